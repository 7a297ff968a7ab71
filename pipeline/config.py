"""The typed run configuration: every path and knob of a local run, resolved and validated once, at the edge."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional, Sequence, Tuple

from tfxflow.components import settings as settings_lib
from tfxflow.components.model import presets, search_space, tasks, tokenization
from tfxflow.components.model.features import OPTIONAL_KNOBS, FeatureConfig
from tfxflow.components.names import DEFAULT_KEEP_VERSIONS
from tfxflow.components.settings import ConfigError, at_least, int_list, local_or_remote_path, setting
from tfxflow.components.tracking.tracking_outbox import DEFAULT_WAIT_S as DEFAULT_TRACKING_WAIT_S
from tfxflow.components.training.cluster import ClusterConfig
from tfxflow.components.training.hardware import HardwareConfig
from tfxflow.pipeline import beam_runners
from tfxflow.pipeline import user_module as user_module_lib
from tfxflow.pipeline.beam_runners import BeamRunner
from tfxflow.pipeline.inputs import (
    bundled_taxi_data_root,
    check_data_root,
    load_schema_and_features,
    resolve_module_label,
)
from tfxflow.pipeline.paths import Paths, resolve_home
from tfxflow.pipeline.tracking_store import resolve_tracking_uri
from tfxflow.pipeline.user_module import UserModule


def _rate(value: Optional[float]) -> Optional[str]:
    """A `check` of a dropout rate."""
    return None if value is None or 0 <= value < 1 else "must be in [0, 1)"


DEFAULT_DATASET = "taxi"
TRACKING_MODES = ("required", "optional", "off")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Trainer knobs; steps count batches of `batch_size`. Each field with a `key` becomes that entry of the
    Trainer's `custom_config` (components/training/trainer.py and keras_model.py read it strictly).

    A knob left None takes its default when the run is configured (`resolve_training`): training from scratch's
    (presets.py), or with --init-checkpoint BERT's fine-tuning recipe (presets.FINE_TUNING) and the checkpoint's
    own architecture, dropout and pooling. From scratch, the defaults suit the taxi data (11k training rows): 300
    steps of 256 are about 7 epochs; longer training overfits (validation loss rises after about 400 steps while
    training accuracy nears 1).
    """

    train_steps: Optional[int] = setting(
        None,
        type=int,
        help=f"optimizer steps, each of one global batch (default: {presets.TRAIN_STEPS}; with --init-checkpoint, "
        "--train-epochs passes over the training split)",
        check=at_least(1),
    )
    train_epochs: Optional[int] = setting(
        None,
        type=int,
        metavar="N",
        help="passes over the training split instead of a step count (default with --init-checkpoint: "
        f"{presets.FINE_TUNING.epochs})",
        check=at_least(1),
        key=("training", "train_epochs"),
    )
    eval_steps: int = setting(
        0,
        help="validation batches after each epoch (0: the eval split, at most 100; a module file's run_fn gets "
        f"{presets.USER_EVAL_STEPS} as fn_args.eval_steps)",
        check=at_least(0),
    )
    batch_size: Optional[int] = setting(
        None,
        type=int,
        help=f"examples per replica: the global batch is this x replicas x --grad-accum-steps (default: "
        f"{presets.BATCH_SIZE}; {presets.FINE_TUNING.batch_size} with --init-checkpoint)",
        check=at_least(1),
        key=("training", "batch_size"),
    )
    eval_every_steps: int = setting(
        presets.EVAL_EVERY_STEPS,
        help="validate after this many steps (one Keras epoch)",
        check=at_least(1),
        key=("training", "eval_every_steps"),
    )
    learning_rate: Optional[float] = setting(
        None,
        type=float,
        metavar="X",
        help=f"applied to the global batch as is (default: {presets.LEARNING_RATE:g}; "
        f"{presets.FINE_TUNING.learning_rate:g} with --init-checkpoint)",
        key=("model", "learning_rate"),
        check=at_least(0),
    )
    model_preset: Optional[str] = setting(
        None,
        choices=sorted(presets.PRESETS),
        help="model size (default: 'default', sized for the taxi data; 'large' has wide layers for GPU "
        "benchmarks); text columns: bert-tiny to bert-large (a Transformer encoder), else the mean of word-piece "
        "embeddings. With --init-checkpoint the encoder is the checkpoint's: a preset given must be its size",
        key=("model", "preset"),
    )
    hidden_units: Optional[Sequence[int]] = setting(
        None,
        parse=int_list,
        metavar="N,N,...",
        help="comma-separated layer sizes (default: the preset's)",
        key=("model", "hidden_units"),
    )
    optimizer: Optional[str] = setting(
        None,
        choices=("adam", "adamw", "sgd"),
        help="default: adamw with BERT's warmup and linear decay for a Transformer encoder, else adam",
        key=("model", "optimizer"),
    )
    init_checkpoint: Optional[str] = setting(
        None,
        parse=local_or_remote_path,
        metavar="PATH",
        help="fine-tune a pretrained BERT-family encoder: a Hugging Face model folder (config.json, "
        "model.safetensors, vocab.txt), a Google BERT release folder or checkpoint prefix, a Model Garden BERT "
        "encoder checkpoint, or a SavedModel this pipeline pushed; local, gs://, s3:// or minio://. Its "
        "architecture, vocabulary, casing and pooling are used, with BERT's fine-tuning recipe by default",
        key=("model", "init_checkpoint"),
    )
    # The checkpoint --init-checkpoint names, as resolve_training found it (checkpoints.Checkpoint.to_dict()).
    pretrained: Optional[Mapping[str, Any]] = setting(None, cli=False, key=("model", "pretrained"))
    # None: the preset's
    max_embedding_dim: Optional[int] = setting(None, cli=False, key=("model", "max_embedding_dim"))
    dropout: Optional[float] = setting(
        None,
        type=float,
        metavar="X",
        help="dropout rate after each hidden layer, and in a Transformer encoder (default: 0; with "
        "--init-checkpoint its config's hidden_dropout_prob)",
        key=("model", "dropout"),
        check=_rate,
    )
    # A Transformer's dropout on its attention probabilities; None: --dropout, or the checkpoint's.
    attention_dropout: Optional[float] = setting(None, cli=False, key=("model", "attention_dropout"), check=_rate)
    head_dropout: Optional[float] = setting(
        None,
        type=float,
        metavar="X",
        help="dropout rate before the output layer (default: 0; with --init-checkpoint its classifier_dropout, "
        "else its hidden_dropout_prob, as BERT's classifier)",
        key=("model", "head_dropout"),
        check=_rate,
    )
    clip_norm: Optional[float] = setting(
        None,
        type=float,
        metavar="X",
        help="clip the gradients' global norm to X; 0: no clipping (default: 0; "
        f"{presets.FINE_TUNING.clip_norm:g} with --init-checkpoint, as BERT)",
        key=("model", "clip_norm"),
        check=at_least(0),
    )
    adam_epsilon: Optional[float] = setting(
        None,
        type=float,
        metavar="X",
        help=f"Adam's and AdamW's epsilon (default: Keras' 1e-07; {presets.FINE_TUNING.adam_epsilon:g} with "
        "--init-checkpoint, as BERT)",
        key=("model", "adam_epsilon"),
        check=lambda v: None if v is None or v > 0 else "must be > 0",
    )
    warmup_share: float = setting(
        presets.WARMUP_SHARE,
        metavar="X",
        help="adamw's warmup, a share of the training steps; then the rate falls linearly to 0",
        key=("model", "warmup_share"),
        check=lambda v: None if 0 <= v < 1 else "must be in [0, 1)",
    )
    pooling: Optional[str] = setting(
        None,
        choices=presets.POOLINGS,
        help="a Transformer encoder's sentence vector: BERT's pooler (tanh over [CLS]), the mean of the tokens, "
        "or [CLS] (default: the checkpoint's: sentence-transformers' 1_Pooling/config.json, else its pooler "
        "weights; pooler from scratch)",
        key=("model", "pooling"),
    )
    grad_accum_steps: int = setting(
        presets.GRAD_ACCUM_STEPS,
        help="accumulate gradients over this many micro-batches of --batch-size per update",
        check=at_least(1),
        key=("training", "grad_accum_steps"),
    )
    length_buckets: int = setting(
        presets.LENGTH_BUCKETS,
        help="a text model's training batches are grouped by length and each cut to the narrowest of N widths "
        "(sequence_length x 1/N, 2/N, ..., 1) that holds its rows: less padding, the same math (0: every batch at "
        "sequence_length)",
        check=at_least(0),
        key=("training", "length_buckets"),
    )
    early_stopping_patience: int = setting(
        presets.EARLY_STOPPING_PATIENCE,
        help="epochs without val_loss improvement before stopping (0: off)",
        check=at_least(0),
        key=("training", "early_stopping_patience"),
    )
    seed: int = setting(presets.SEED, help="seed of shuffling and initialisation", key=("training", "seed"))
    profile_steps: Optional[Sequence[int]] = setting(
        None,
        parse=int_list,
        metavar="FIRST,LAST",
        help="a profiler trace of these training steps in the Trainer's TensorBoard logs (e.g. 10,15)",
        key=("training", "profile_steps"),
        check=lambda v: None if v is None or (len(v) == 2 and 1 <= v[0] <= v[1]) else "two steps, first <= last",
    )
    # The built-in preprocessing's analyzers (means, deviations, quantiles, vocabularies) on a systematic sample
    # of a larger training split (components/training/transform.py): what they compute has converged long before.
    transform_max_rows: int = setting(
        200_000,
        flag="--transform-max-rows",
        metavar="N",
        help="the built-in preprocessing analyzes a larger training split on every k-th row, at most N (0: every "
        "row; a module file's preprocessing_fn and a multi-class label whose classes the feature config does not "
        "list: every row)",
        check=at_least(0, " (0: every training row)"),
    )
    hardware: HardwareConfig = setting(HardwareConfig(), cli=False)
    cluster: ClusterConfig = setting(ClusterConfig(), cli=False)

    def custom_config(self, backup_root: Optional[str] = None) -> dict:
        """The Trainer's `custom_config` entries (plain JSON-able values), from the fields' keys; `cluster` only
        with several workers (one worker's Trainer stays as it was, cache included)."""
        custom = settings_lib.sections(self)
        custom["training"]["backup_root"] = backup_root
        custom["hardware"] = self.hardware.to_dict()
        if self.cluster.workers > 1:
            custom["cluster"] = self.cluster.to_dict()
        return custom


def _tune_space_problem(text: str) -> Optional[str]:
    try:
        search_space.parse(text)
    except ValueError as err:
        return str(err)
    return None


@dataclasses.dataclass(frozen=True)
class TuningConfig:
    """The tuning step (components/tuning/tuner.py): off unless `tune`; a budget of trials and/or minutes."""

    tune: bool = setting(
        False,
        help="search the Trainer's settings with Optuna before training the model that is pushed (a step between "
        "Transform and the Trainer; each trial an MLflow run nested under the pipeline run)",
    )
    tune_trials: int = setting(20, metavar="N", help="trials at most", check=at_least(1))
    tune_minutes: float = setting(
        0.0,
        metavar="X",
        help="stop starting trials after this many minutes (0: the trial count alone)",
        check=at_least(0),
    )
    tune_space: str = setting(
        "",
        metavar="SPEC",
        help="replace, add or drop dimensions of the model's default search space: e.g. "
        "'learning_rate=1e-4:1e-2:log,dropout=0:0.3,batch_size=64|128,width=off' (settings: "
        + ", ".join(sorted(search_space.KNOBS))
        + "; defaults: "
        + ", ".join(d.describe() for d in search_space.SCRATCH)
        + "; with a Transformer encoder: "
        + ", ".join(d.describe() for d in search_space.ENCODER)
        + "; with text inputs also sequence_length, "
        + "|".join(f"{share:g}" for share in search_space.TEXT_LENGTH_SHARES)
        + " of the feature config's)",
        check=_tune_space_problem,
    )
    tune_seed: Optional[int] = setting(None, type=int, metavar="N", help="the search's seed (default: --seed)")
    # One trial of the built-in models keeps about one core busy (one Python process, mostly
    # single-threaded): a second process running trials of the same study uses another (components/tuning/tuner.py).
    tune_workers: int = setting(
        0,
        metavar="N",
        help="trials run side by side, each worker a process of its own on the same study (0: one per CPU core, at "
        "most 4, without a GPU or a Transformer encoder, else 1; 1: a search that repeats exactly with its seed)",
        check=at_least(0),
    )

    def seed(self, training: TrainingConfig) -> int:
        """The search's seed: --tune-seed, else the training's."""
        return training.seed if self.tune_seed is None else self.tune_seed

    def space(
        self, training: TrainingConfig, features: Optional[FeatureConfig] = None
    ) -> Tuple["search_space.Dimension", ...]:
        """The dimensions searched for the model `training` and `features` describe (its text inputs' tokens read
        among them)."""
        text_length = features.sequence_length if features is not None and features.text else 0
        return search_space.resolve(_has_encoder(training), self.tune_space, text_length)

    def workers(self, training: TrainingConfig) -> int:
        """--tune-workers; for 0, 1 with a Transformer encoder (its training keeps every core busy itself), else
        0: the Tuner counts the cores where it runs, and takes 1 there if it has a GPU."""
        return self.tune_workers or (1 if _has_encoder(training) else 0)


def _has_encoder(training: TrainingConfig) -> bool:
    preset = presets.PRESETS.get(training.model_preset or presets.DEFAULT_PRESET)
    return bool(training.init_checkpoint) or (preset is not None and preset.encoder is not None)


def _blessing_metric_help() -> str:
    per_task = "; ".join(f"{task}: {', '.join(names)}" for task, names in tasks.blessing_choices().items())
    return f"the metric the blessing judges ({per_task}; default: the first of the task's)"


def _threshold_help() -> str:
    defaults = ", ".join(
        f"{task.default_metric} {task.metric(task.default_metric).default_threshold:g}"
        for task in tasks.TASK_SPECS.values()
    )
    return (
        "the blessing metric's bound: a minimum, a maximum for a metric where lower is better (rmse, mae) "
        f"(default: the metric's, e.g. {defaults}; rmse and mae have none)"
    )


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Blessing rules: a bound on `metric`, and no regression beyond `max_regression` vs. baseline. `metric` and
    `threshold` None: the task's defaults (components/model/tasks.py), filled in by `for_task`."""

    metric: Optional[str] = setting(
        None,
        flag="--blessing-metric",
        metavar="METRIC",
        choices=sorted(set(tasks.ALL_BLESSING_METRICS)),
        help=_blessing_metric_help(),
    )
    threshold: Optional[float] = setting(
        None, flag="--blessing-threshold", metavar="X", type=float, help=_threshold_help()
    )
    max_regression: float = setting(
        1e-10,
        help="blessing allows at most this change for the worse in the metric vs. the last blessed model",
        check=at_least(0),
    )
    slice_columns: Sequence[str] = setting(
        (), flag="--slice-by", metavar="COLUMN", help="also evaluate per value of this column (repeatable)"
    )
    # A larger eval split is evaluated on a systematic sample of at most this many rows (every k-th row of a
    # random split): TFMA's time grows with the rows (about half a millisecond a row); on 25,000 rows an accuracy
    # near 0.9 has a standard error of sqrt(0.9 * 0.1 / 25,000) = 0.19%, and candidate and baseline are judged on
    # the same rows.
    max_rows: int = setting(
        25_000,
        flag="--eval-max-rows",
        metavar="N",
        help="a larger eval split is evaluated on every k-th row, at most N (0: all rows)",
        check=at_least(0, " (0: every row of the eval split)"),
    )
    max_latency_ms: float = setting(
        0.0,
        metavar="MS",
        help="the serving check refuses to push a model whose p99 latency for single requests is above this "
        "(0: no bound)",
        check=at_least(0, " (0: no bound)"),
    )
    tflite: bool = setting(
        False,
        help="also convert the blessed model to TensorFlow Lite (float32 and int8, the Transform graph inside), "
        "check it against the SavedModel and publish it in the pushed version's assets.extra/tfxflow/edge/",
    )

    def check(self) -> None:
        """Raises ConfigError naming the flag of a value that cannot work."""
        settings_lib.check(self)

    def for_task(self, task: str) -> "EvaluationConfig":
        """This config with the task's default metric and bound filled in; raises ConfigError naming the flag
        when the metric is not one of the task's, or has no default bound and none was given."""
        spec = tasks.spec(task)
        metric = self.metric or spec.default_metric
        if metric not in spec.metric_names:
            raise ConfigError(
                f"--blessing-metric {metric}: not a metric of task '{task}'; its metrics are "
                f"{', '.join(spec.metric_names)}"
            )
        threshold = self.threshold
        if threshold is None:
            threshold = spec.metric(metric).default_threshold
            if threshold is None:
                raise ConfigError(
                    f"--blessing-metric {metric} has no default bound: give --blessing-threshold X, the largest "
                    f"{metric} (in the label's units) a model may have to be pushed"
                )
        return dataclasses.replace(self, metric=metric, threshold=float(threshold))

    def describe(self, task: str) -> str:
        """The blessing rule in words, e.g. "binary_accuracy >= 0.6, no regression vs. the last blessed model"."""
        resolved = self.for_task(task)
        higher = tasks.spec(task).metric(resolved.metric).higher_is_better
        return (
            f"{resolved.metric} {'>=' if higher else '<='} {resolved.threshold:g}, "
            "no regression vs. the last blessed model"
        )


@dataclasses.dataclass(frozen=True)
class SplitConfig:
    """Hash-bucket split of the input rows."""

    train_buckets: int = 3
    eval_buckets: int = 1


@dataclasses.dataclass(frozen=True)
class PipelineSettings:
    """The flags `tfxflow run` and `tfxflow kubeflow compile` share besides training and evaluation: what the
    pipeline reads, what it is named, what stops it, and where it is tracked."""

    dataset: str = setting(
        DEFAULT_DATASET,
        metavar="NAME",
        help="name of the schemas/<dataset>/ folder; also names the pipeline and the model",
    )
    schema_path: Optional[str] = setting(
        None,
        flag="--schema",
        metavar="FILE",
        help="curated schema (default: schemas/<dataset>/schema.pbtxt); a compiled spec carries its content",
    )
    feature_config_path: Optional[str] = setting(
        None,
        flag="--feature-config",
        metavar="FILE",
        help="feature config YAML (default: schemas/<dataset>/features.yaml)",
    )
    module_file: Optional[str] = setting(
        None,
        metavar="FILE",
        help="a TFX module file of your own: preprocessing_fn(inputs) for Transform, run_fn(fn_args) for the "
        "Trainer, either or both (and stats_options_updater_fn); the feature config still names the task and "
        "label",
    )
    pipeline_name: Optional[str] = setting(None, metavar="NAME", help="pipeline name (default: tfxflow-<dataset>)")
    model_name: Optional[str] = setting(None, metavar="NAME", help="serving model name (default: <dataset>)")
    allowed_anomaly_types: Tuple[str, ...] = setting(
        (),
        flag="--allow-anomaly",
        metavar="TYPE",
        help="an anomaly type (e.g. FEATURE_TYPE_LOW_NUMBER_VALUES) that does not stop the run (repeatable)",
    )
    serving_data_root: Optional[str] = setting(
        None,
        flag="--serving-data",
        metavar="DIR",
        help="CSV files of serving requests (no label): validated against the schema's SERVING environment "
        "and compared with the training data (skew)",
    )
    drift_check: bool = setting(
        True, flag="--no-drift-check", help="do not compare the data with the data of the last blessed model"
    )
    experiment: Optional[str] = setting(None, metavar="NAME", help="MLflow experiment (default: the pipeline name)")
    mlflow_uri: Optional[str] = setting(
        None,
        metavar="URI",
        help="tracking server or store (default: $MLFLOW_TRACKING_URI, else sqlite:///<home>/mlflow/mlflow.db)",
    )
    tracking: str = setting(
        "required",
        choices=TRACKING_MODES,
        help="required: stop before any work if the store does not answer, and stop (nothing pushed) if it stops "
        "answering during the run; optional: run untracked then, and go on and push if it stops answering; "
        "off: do not track",
    )
    tracking_wait: float = setting(
        DEFAULT_TRACKING_WAIT_S,
        metavar="SECONDS",
        check=at_least(1),
        help="how long each MLflow call of a run waits for a server that stops answering; then what the run "
        "could not log is kept beside the metadata store (<home>/metadata/mlflow_outbox) and sent when it "
        "answers again (the next run, or tfxflow mlflow-sync)",
    )


def resolve_shared(
    training: TrainingConfig, evaluation: EvaluationConfig, features: Optional[FeatureConfig] = None
) -> Tuple[TrainingConfig, Optional[FeatureConfig]]:
    """The settings a local run and a compiled pipeline share, checked and with their defaults filled in
    (`resolve_training`): raises ConfigError naming the flag or file at fault. With --init-checkpoint, the
    checkpoint is located and checked against the settings before any work (`pretrained_fit`), and the feature
    config takes its vocabulary and tokenization."""
    settings_lib.check(training)
    settings_lib.check(evaluation)
    if training.train_steps and training.train_epochs:
        raise ConfigError(
            f"--train-steps {training.train_steps} and --train-epochs {training.train_epochs}: give one of them"
        )
    checkpoint = None
    if features is not None:
        evaluation.for_task(features.task)
        if training.init_checkpoint:
            checkpoint, features = pretrained_fit(training, features)
        if evaluation.tflite and features.text and features.tokenizer_kind != tokenization.WORDPIECE:
            raise ConfigError(
                f"--tflite: the text columns' tokenizer is {tokenization.KIND_NAMES[features.tokenizer_kind]}, and "
                "a TFLite model tokenizes with TF Text's FastBertTokenizer (WordPiece) only: leave --tflite out"
            )
        if evaluation.tflite and features.num_oov_buckets > 1:
            # Hashing an unseen value into one of several buckets (StringToHashBucketFast) has no TFLite builtin:
            # with --tflite the served and the edge model alike give every unseen value the one id past the list.
            features = dataclasses.replace(features, num_oov_buckets=1)
    return resolve_training(training, checkpoint), features


def check_tuning(
    tuning: TuningConfig,
    user_module: Optional[UserModule],
    training: Optional[TrainingConfig] = None,
    features: Optional[FeatureConfig] = None,
) -> None:
    """The tuning's settings; --tune searches the built-in Trainer's, which a module file's run_fn replaces: its
    module's tuner_fn is tuned instead (TFX's Tuner), and a run_fn without one cannot be. With `training` and
    `features`, the search space of that model (a text input's tokens read are at most the graph's)."""
    settings_lib.check(tuning)
    module_tuner = tuning.tune and user_module is not None and bool(user_module.tuner_fn)
    if tuning.tune and training is not None and not module_tuner:
        try:
            tuning.space(training, features)
        except ValueError as err:
            raise ConfigError(f"--tune-space: {err}") from None
    if module_tuner:
        if not user_module.run_fn:
            raise ConfigError(
                f"--tune runs --module-file {user_module.path}'s tuner_fn, whose best hyperparameters go to the "
                "module's run_fn (TFX's Trainer), and the module has none"
            )
        given = [
            flag
            for flag, value, default in (
                ("--tune-trials", tuning.tune_trials, TuningConfig.tune_trials),
                ("--tune-minutes", tuning.tune_minutes, TuningConfig.tune_minutes),
                ("--tune-space", tuning.tune_space, TuningConfig.tune_space),
                ("--tune-workers", tuning.tune_workers, TuningConfig.tune_workers),
                ("--tune-seed", tuning.tune_seed, TuningConfig.tune_seed),
            )
            if value != default
        ]
        if given:
            raise ConfigError(
                f"{', '.join(given)}: --module-file {user_module.path}'s tuner_fn builds its own keras-tuner search "
                "(its trials, space and seed), which these do not reach"
            )
    if tuning.tune and user_module is not None and user_module.run_fn and not user_module.tuner_fn:
        raise ConfigError(
            f"--tune searches the built-in Trainer's settings, and --module-file {user_module.path} brings its own "
            "run_fn: tune it with a tuner_fn in the module file (TFX's Tuner)"
        )


def check_user_trainer(training: TrainingConfig, user_module: Optional[UserModule]) -> None:
    """A module file's run_fn trains its own model for TFX's step count: --init-checkpoint (the built-in model's
    encoder) and --train-epochs (the built-in Trainer's count) do not reach it."""
    if user_module is None or not user_module.run_fn:
        return
    if training.init_checkpoint:
        raise ConfigError(
            f"--init-checkpoint {training.init_checkpoint}: starts the built-in model's text encoder, and "
            f"--module-file {user_module.path} brings its own run_fn: load the checkpoint there"
        )
    if training.train_epochs:
        raise ConfigError(
            f"--train-epochs {training.train_epochs}: the built-in Trainer counts epochs; the run_fn of --module-file "
            f"{user_module.path} gets TFX's fn_args.train_steps: give --train-steps"
        )


def pretrained_fit(training: TrainingConfig, features: FeatureConfig):
    """(the checkpoint --init-checkpoint names, the feature config with its vocabulary and tokenization): read
    from where it is (a local folder, or an object store this machine reaches) and checked against the feature
    config and a --model-preset given; raises ConfigError naming the file and what does not fit."""
    # kept out of `tfxflow --help`'s import
    from tfxflow.components.model import checkpoints, warm_start

    flag = f"--init-checkpoint {training.init_checkpoint}"
    if not features.text:
        raise ConfigError(f"{flag}: the feature config has no text column; pretrained weights are an encoder's")
    try:
        checkpoint = checkpoints.locate(training.init_checkpoint)
        warm_start.check_tokenizer(checkpoint)
        warm_start.check_preset(checkpoint, training.model_preset)
        warm_start.check_pooling(checkpoint, training.pooling)
        warm_start.check_sequence_length(checkpoint, features.sequence_length)
        warm_start.check_vocabulary_file(checkpoint, features.text_vocab_file, features.source)
        knobs = warm_start.tokenizer_knobs(
            checkpoint, {key: getattr(features, key) for key in OPTIONAL_KNOBS}, features.source
        )
    except (checkpoints.CheckpointError, ValueError) as err:
        raise ConfigError(str(err)) from err
    return checkpoint, dataclasses.replace(
        features,
        text_vocab_file=checkpoint.vocab_file,
        tokenizer_kind=checkpoint.tokenization.kind,
        text_merges_file=checkpoint.merges_file,
        **knobs,
    )


def resolve_training(training: TrainingConfig, checkpoint=None) -> TrainingConfig:
    """`training` with each knob left None given its default: training from scratch's (presets.py), or with
    `checkpoint` (checkpoints.Checkpoint) BERT's fine-tuning recipe (presets.FINE_TUNING), the checkpoint's
    dropout rates and pooling, and the checkpoint itself (`pretrained`). A knob the user set stays."""
    if checkpoint is None:
        defaults = {
            "train_steps": None if training.train_epochs else presets.TRAIN_STEPS,
            "batch_size": presets.BATCH_SIZE,
            "learning_rate": presets.LEARNING_RATE,
            "model_preset": presets.DEFAULT_PRESET,
            "dropout": presets.DROPOUT,
            "head_dropout": presets.HEAD_DROPOUT,
            "clip_norm": presets.CLIP_NORM,
        }
    else:
        recipe = presets.FINE_TUNING
        defaults = {
            "train_epochs": None if training.train_steps else recipe.epochs,
            "batch_size": recipe.batch_size,
            "learning_rate": recipe.learning_rate,
            "dropout": checkpoint.hidden_dropout,
            # --dropout given: the attention's too, as from scratch
            "attention_dropout": checkpoint.attention_dropout if training.dropout is None else None,
            "head_dropout": checkpoint.head_dropout,
            "clip_norm": recipe.clip_norm,
            "adam_epsilon": recipe.adam_epsilon,
            "pooling": checkpoint.pooling,
            "pretrained": checkpoint.to_dict(),
        }
    return dataclasses.replace(
        training, **{key: value for key, value in defaults.items() if getattr(training, key) is None}
    )


@dataclasses.dataclass(frozen=True)
class SharedConfig:
    """What a local run (RunConfig) and a compiled Kubeflow pipeline (pipeline/kfp/compiler.py's KubeflowConfig)
    both are: the data, the schema and features, the settings of every step, the Beam runner. Each adds its
    own fields; a field here is declared once for both."""

    pipeline_name: str
    model_name: str
    data_root: str
    schema_path: str
    features: FeatureConfig
    training: TrainingConfig = TrainingConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    split: SplitConfig = SplitConfig()
    tuning: TuningConfig = TuningConfig()
    beam_mode: str = "in_memory"  # the DirectRunner's, when `beam` is None
    beam_workers: int = 1
    beam: Optional[BeamRunner] = None  # another Beam runner (pipeline/beam_runners.py); None: the DirectRunner
    enable_cache: bool = True
    allowed_anomaly_types: Tuple[str, ...] = ()
    drift_check: bool = True
    serving_data_root: Optional[str] = None  # CSV files of serving requests (no label), for skew
    experiment: str = ""  # MLflow experiment; default: the pipeline name
    user_module: Optional[UserModule] = None  # a TFX module file of the user's (pipeline/user_module.py)

    @property
    def beam_runner(self) -> BeamRunner:
        return beam_runners.beam_runner_of(self.beam, self.beam_mode, self.beam_workers)

    @property
    def beam_pipeline_args(self) -> list:
        """What every Beam component gets; `[]` for the default in-memory DirectRunner (beam_runners.py)."""
        return beam_runners.beam_pipeline_args(self.beam_runner)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig(SharedConfig):
    """Everything a local run needs, validated."""

    paths: Paths
    tracking_uri: Optional[str] = None  # MLflow; None: not tracked
    tracking_mode: str = "required"  # required: an unreachable store stops the run; optional: runs untracked
    tracking_wait_s: float = DEFAULT_TRACKING_WAIT_S  # per MLflow call, for a server that stops answering
    keep_versions: int = DEFAULT_KEEP_VERSIONS  # model versions kept in the serving directory (at least 2)

    @property
    def model_base_dir(self) -> str:
        """`<serving_dir>/<model_name>`: the folder of the model's integer versions, TF Serving's base path."""
        return os.path.join(self.paths.serving_dir, self.model_name)


def build_run_config(
    *,
    environ: Mapping[str, str],
    home: Optional[str] = None,
    dataset: str = DEFAULT_DATASET,
    data_root: Optional[str] = None,
    schema_path: Optional[str] = None,
    feature_config_path: Optional[str] = None,
    pipeline_name: Optional[str] = None,
    model_name: Optional[str] = None,
    pipeline_root: Optional[str] = None,
    metadata_path: Optional[str] = None,
    serving_dir: Optional[str] = None,
    training: TrainingConfig = TrainingConfig(),
    evaluation: EvaluationConfig = EvaluationConfig(),
    split: SplitConfig = SplitConfig(),
    tuning: TuningConfig = TuningConfig(),
    beam_mode: str = "in_memory",
    beam_workers: int = 1,
    beam: Optional[BeamRunner] = None,
    enable_cache: bool = True,
    allowed_anomaly_types: Tuple[str, ...] = (),
    drift_check: bool = True,
    serving_data_root: Optional[str] = None,
    tracking_uri: Optional[str] = None,
    tracking_mode: str = "required",
    tracking_wait_s: float = DEFAULT_TRACKING_WAIT_S,
    experiment: Optional[str] = None,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    module_file: Optional[str] = None,
) -> RunConfig:
    """Resolves defaults (bundled data, `schemas/<dataset>/`), loads the feature config, checks it all."""
    if data_root is None and dataset != DEFAULT_DATASET:
        raise ConfigError(f"--dataset {dataset}: only '{DEFAULT_DATASET}' has bundled data; pass --data-root")
    data_root = os.path.abspath(data_root or bundled_taxi_data_root())
    check_data_root(data_root)
    if serving_data_root is not None:
        serving_data_root = os.path.abspath(serving_data_root)
        check_data_root(serving_data_root, "--serving-data")
    user_module = user_module_lib.inspect(module_file) if module_file else None
    schema_path, features = load_schema_and_features(
        dataset, schema_path, feature_config_path, roles_required=not (user_module and user_module.preprocessing_fn)
    )
    beam, beam_mode, beam_workers = beam_runners.split_beam_runner(beam, beam_mode, beam_workers)
    if beam is not None and beam.runner == "dataflow":
        # Every path of a local run is on this machine (Paths.under); Dataflow's workers read only GCS.
        raise ConfigError(
            "--beam-runner dataflow: Dataflow's workers cannot read this machine's files, and a "
            "local run keeps its data and artifacts here; run it from Kubeflow: tfxflow kubeflow "
            "compile --pipeline-root gs://... --data-root gs://... --beam-runner dataflow ..."
        )
    if tracking_mode not in TRACKING_MODES:
        raise ConfigError(f"--tracking must be one of {TRACKING_MODES}, got '{tracking_mode}'")
    check_user_trainer(training, user_module)
    features = resolve_module_label(features, user_module, schema_path)
    training, features = resolve_shared(training, evaluation, features)
    check_tuning(tuning, user_module, training, features)
    if keep_versions < 2:
        raise ConfigError("--keep-versions must be >= 2: the previous model stays while TF Serving loads a new one")
    paths = Paths.under(resolve_home(home, environ), pipeline_root, metadata_path, serving_dir)
    pipeline_name = pipeline_name or f"tfxflow-{dataset}"
    if tracking_mode != "off":
        tracking_uri = resolve_tracking_uri(tracking_uri, environ, paths.home)
    return RunConfig(
        pipeline_name=pipeline_name,
        model_name=model_name or dataset,
        data_root=data_root,
        schema_path=schema_path,
        features=features,
        paths=paths,
        training=training,
        evaluation=evaluation,
        split=split,
        tuning=tuning,
        beam_mode=beam_mode,
        beam_workers=beam_workers,
        beam=beam,
        enable_cache=enable_cache,
        allowed_anomaly_types=tuple(allowed_anomaly_types),
        drift_check=drift_check,
        serving_data_root=serving_data_root,
        tracking_uri=tracking_uri if tracking_mode != "off" else None,
        tracking_mode=tracking_mode,
        tracking_wait_s=tracking_wait_s,
        experiment=experiment or pipeline_name,
        keep_versions=keep_versions,
        user_module=user_module,
    )
