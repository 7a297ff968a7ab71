"""TFX Trainer entry point (`run_fn`) and the small helpers it is made of.

Batches and steps: `batch_size` is per replica; a step consumes the global batch, `batch_size` x replicas
(x gradient-accumulation steps), and `train_steps` counts those steps. The learning rate applies to the
global batch as given: moving to more GPUs changes the global batch, so revisit the rate with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from tfxflow.components import names, object_store
from tfxflow.components.model import checkpoints, export, presets, search_space, tasks, text, warm_start
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.settings import strict_fields
from tfxflow.components.training import hardware as hardware_lib

# The entries of the Trainer's custom_config (pipeline/definition.py; TrainingConfig.custom_config).
CUSTOM_CONFIG_KEYS = ("features", "raw_examples", "model", "training", "hardware")


@dataclasses.dataclass(frozen=True)
class TrainParams:
    """Input pipeline, schedule and callbacks."""

    batch_size: int = presets.BATCH_SIZE  # per replica
    # Passes over the training split when the Trainer is given no step count (TFX's num_steps 0).
    train_epochs: Optional[int] = None
    eval_every_steps: int = presets.EVAL_EVERY_STEPS
    shuffle_buffer: int = 10_000
    cache: bool = True  # keep serialized records in memory after the first pass, when they are small:
    cache_max_mb: int = 64  # at most this much compressed input (several times that in memory)
    max_eval_batches: int = 100  # validation after each epoch reads at most this many batches
    seed: int = presets.SEED
    grad_accum_steps: int = presets.GRAD_ACCUM_STEPS
    early_stopping_patience: int = presets.EARLY_STOPPING_PATIENCE  # epochs without val_loss improvement; 0: off
    backup_root: Optional[str] = None  # durable folder for BackupAndRestore; None: no resume
    profile_steps: Tuple[int, int] = (0, 0)  # a profiler trace of these steps (first, last); (0, 0): none

    def __post_init__(self):
        if self.batch_size < 1 or self.grad_accum_steps < 1 or self.eval_every_steps < 1:
            raise ValueError("batch_size, grad_accum_steps and eval_every_steps must be >= 1")
        if self.train_epochs is not None and self.train_epochs < 1:
            raise ValueError(f"train_epochs must be >= 1, got {self.train_epochs}")
        first, last = self.profile_steps
        if (first, last) != (0, 0) and not 1 <= first <= last:
            raise ValueError(f"profile_steps must be two steps, first <= last, from 1; got {self.profile_steps}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainParams":
        """The `training` section of the Trainer's custom_config; raises ValueError naming an unknown key."""
        values = {k: v for k, v in strict_fields(cls, data, "custom_config['training']").items() if v is not None}
        if values.get("profile_steps") is not None:
            values["profile_steps"] = tuple(int(s) for s in values["profile_steps"])
        else:
            values.pop("profile_steps", None)
        return cls(**values)

    def global_batch(self, replicas: int) -> int:
        """Per-replica batch x replicas."""
        return self.batch_size * replicas

    def effective_batch(self, replicas: int) -> int:
        """Examples one optimizer step consumes across all replicas: the global batch times the
        gradient-accumulation steps. Each dataset batch has this size."""
        return self.global_batch(replicas) * self.grad_accum_steps


def skip_autograph_for_tf_keras() -> None:
    """Stops AutoGraph from transpiling tf_keras' own code at the first `fit` of every process.

    TF 2.16's AutoGraph leaves the `keras` package alone but not `tf_keras` (the same Keras 2 code under
    another name), so the first `fit` converts hundreds of library functions: 10.3 s for a one-layer model
    on 2 cores, against 0.4 s with this rule. Idempotent.
    """
    from tensorflow.python.autograph.core import config as autograph_config

    rule = autograph_config.DoNotConvert("tf_keras")
    if not any(str(r) == str(rule) for r in autograph_config.CONVERSION_RULES):
        autograph_config.CONVERSION_RULES = (rule,) + tuple(autograph_config.CONVERSION_RULES)


def list_files(file_patterns: Iterable[str]) -> List[str]:
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no examples match {list(file_patterns)}")
    return files


def make_dataset(
    file_patterns: Iterable[str],
    feature_spec: Mapping[str, Any],
    label_key: str,
    input_names: Iterable[str],
    params: TrainParams,
    training: bool,
    batch_size: int,
    num_workers: int = 1,
    transform=None,
    label_fn=None,
    input_dtypes: Optional[Mapping[str, tf.DType]] = None,
) -> tf.data.Dataset:
    """Batches of `batch_size` (features, label) from gzipped TFRecords of tf.Examples (for training, the
    effective batch: `TrainParams.effective_batch`): Transform's output, or with `transform` (the Transform
    graph's layer) raw examples that are transformed batch by batch as they are read.

    Files are read in parallel; serialized records are cached after the first pass when the files are small
    (see TrainParams), shuffled per epoch, batched, then parsed in one vectorised `parse_example` per batch
    and prefetched. Across several workers, each reads its own files when there are enough of them, else its
    own share of the records. `label_fn` maps the label to the training target (a regression label's
    `transform`); `input_dtypes` casts inputs to the model's dtypes.
    """
    input_names = list(input_names)
    files = list_files(file_patterns)
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=tf.data.AUTOTUNE)
    if params.cache and sum(tf.io.gfile.stat(f).length for f in files) <= params.cache_max_mb * 2**20:
        ds = ds.cache()  # larger inputs stream from disk each epoch: memory stays bounded at any data size
    if training:
        ds = ds.shuffle(params.shuffle_buffer, seed=params.seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=training)

    # Not converted by autograph (tf.data's map converts by default): no branch here depends on a tensor, and
    # converting the Transform layer's and Keras' Python source took a quarter of a small run's Trainer.
    @tf.autograph.experimental.do_not_convert
    def parse(serialized):
        parsed = tf.io.parse_example(serialized, feature_spec)
        if transform is not None:
            parsed = transform(parsed)
        label = tf.reshape(parsed[label_key], [-1, 1])
        if label_fn is not None:
            label = label_fn(label)
        return export.as_model_inputs(parsed, input_names, input_dtypes), label

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.FILE
        if len(files) >= num_workers
        else tf.data.experimental.AutoShardPolicy.DATA
    )
    ds = ds.with_options(options)
    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def id_ranges(tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig) -> Dict[str, int]:
    """The id range of every categorical and bucketized transformed feature, from Transform's schema, and the
    vocabulary size of every text feature, from its Transform asset."""
    names = [config.transformed_name(c) for c in tuple(config.categorical) + tuple(config.bucketized)]
    ranges = {name: tf_transform_output.num_buckets_for_transformed_feature(name) for name in names}
    for column in config.text:
        path = tf_transform_output.vocabulary_file_by_name(text.asset_name(column))
        with tf.io.gfile.GFile(path, "rb") as f:
            ranges[config.transformed_name(column)] = sum(1 for _ in f)
    return ranges


def transformed_inputs(tf_transform_output: tft.TFTransformOutput, label_key: str) -> List[model_lib.ModelInput]:
    """The model's inputs when a user's own preprocessing_fn made the features (the feature config lists no
    roles): every transformed feature but the label, floats as numeric inputs, integers with an id range in
    Transform's schema (a vocabulary, buckets) as categorical ones, other integers as numbers. Raises
    UserCodeError naming a feature the built-in model cannot take (text, or several values per row)."""
    from tfxflow.components.errors import UserCodeError

    found = []
    for name, spec in sorted(tf_transform_output.transformed_feature_spec().items()):
        if name == label_key:
            continue
        if not isinstance(spec, tf.io.FixedLenFeature) or spec.shape not in ([], [1], (), (1,)):
            raise UserCodeError(
                f"the module's preprocessing_fn makes '{name}' with several values per row ({spec}); the built-in "
                "model takes one value per feature: make it one there, or bring a run_fn too"
            )
        if spec.dtype == tf.string:
            raise UserCodeError(
                f"the module's preprocessing_fn makes '{name}' as text; the built-in model takes numbers: map it "
                "to ids there (tft.compute_and_apply_vocabulary), or bring a run_fn too"
            )
        if spec.dtype == tf.int64:
            try:
                tokens = tf_transform_output.num_buckets_for_transformed_feature(name)
                found.append(model_lib.ModelInput(name, "categorical", tokens))
                continue
            except ValueError:
                pass  # an integer without an id range: a number
        found.append(model_lib.ModelInput(name, "numeric"))
    return found


def class_names(tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig) -> List[str]:
    """A multi-class label's classes in index order: the feature config's list, else Transform's vocabulary of
    the training split (components/model/preprocessing.py). [] for the other tasks."""
    if config.task != tasks.MULTICLASS:
        return []
    if config.label.classes:
        return list(config.label.classes)
    from tfxflow.components.model.preprocessing import LABEL_VOCABULARY

    vocabulary = tf_transform_output.vocabulary_by_name(LABEL_VOCABULARY)
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in vocabulary]


def target_moments(
    file_patterns: Iterable[str],
    feature_spec: Mapping[str, Any],
    column: str,
    label: features_lib.LabelSpec,
    max_rows: int = 100_000,
) -> Tuple[float, float]:
    """Mean and standard deviation of a regression label's training target (after `label.transform`) over the
    first `max_rows` rows of the files, in file order (the same on a resumed Trainer)."""
    import numpy as np

    spec = {column: feature_spec[column]}
    values = []
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP").take(max_rows).batch(8192)
    for batch in dataset:
        parsed = tf.io.parse_example(batch, spec)[column]
        dense = parsed.values if isinstance(parsed, tf.sparse.SparseTensor) else tf.reshape(parsed, [-1])
        values.append(export.label_forward(label, tf.cast(dense, tf.float32)).numpy())
    target = np.concatenate(values) if values else np.zeros([0])
    target = target[np.isfinite(target)]
    if not target.size:
        raise ValueError(f"no training row has a value for the label '{column}'")
    std = float(target.std())
    return float(target.mean()), std if std > 0 else 1.0


def make_head(
    config: features_lib.FeatureConfig,
    tf_transform_output: tft.TFTransformOutput,
    train_files: Iterable[str],
    raw_examples: bool,
) -> Tuple[model_lib.Head, List[str]]:
    """The task's head and a multi-class model's class names."""
    names_ = class_names(tf_transform_output, config)
    if config.task == tasks.MULTICLASS:
        return model_lib.Head(tasks.MULTICLASS, num_classes=len(names_)), names_
    if config.task == tasks.REGRESSION:
        if raw_examples:
            spec, column = tf_transform_output.raw_feature_spec(), config.label.column
        else:
            spec, column = tf_transform_output.transformed_feature_spec(), config.label.name
        mean, std = target_moments(train_files, spec, column, config.label)
        return model_lib.Head(tasks.REGRESSION, label_mean=mean, label_std=std), names_
    return model_lib.Head(tasks.BINARY), names_


def steps_for(
    train_steps: Optional[int], train_epochs: Optional[int], train_rows: Optional[int], effective_batch: int
) -> Tuple[int, str]:
    """(optimizer steps, how they were chosen): `train_steps` when given; else `train_epochs` passes over the
    `train_rows` training rows in batches of `effective_batch`; else presets.TRAIN_STEPS."""
    if train_steps:
        return int(train_steps), "given"
    if train_epochs and train_rows:
        steps = train_epochs * math.ceil(train_rows / effective_batch)
        return max(1, steps), f"{train_epochs} epochs of {train_rows:,} training rows in batches of {effective_batch:,}"
    return presets.TRAIN_STEPS, "the default"


def schedule(train_steps: int, eval_every_steps: int) -> Dict[str, int]:
    """Splits `train_steps` into equal Keras epochs of at most `eval_every_steps`, validating after each.

    The total is `train_steps` rounded up to a multiple of the epoch count.
    """
    epochs = max(1, math.ceil(train_steps / max(1, eval_every_steps)))
    return {"epochs": epochs, "steps_per_epoch": max(1, math.ceil(train_steps / epochs))}


# What Throughput adds to each epoch's metrics (not the model's own).
TELEMETRY = ("step_ms", "examples_per_s", "tokens_per_s", "gpu_peak_memory_mb", "gpu_utilization_percent")


class Throughput(keras.callbacks.Callback):
    """Adds each epoch's training speed to its logs, so TensorBoard, the history (training_info.json) and MLflow
    carry it: `step_ms`, `examples_per_s`, `tokens_per_s` (text models: examples x sequence length) and, on a
    GPU, `gpu_peak_memory_mb` (TensorFlow's allocator peak of the first GPU during the epoch) and
    `gpu_utilization_percent` (NVML's busy share of the visible GPUs, sampled twice a second). The time is the
    training part of the epoch, up to its validation."""

    def __init__(self, examples_per_step: int, steps_per_epoch: int, sequence_length: int = 0):
        super().__init__()
        self.examples_per_step, self.steps_per_epoch = examples_per_step, steps_per_epoch
        self.sequence_length = sequence_length
        self._gpu = bool(tf.config.list_logical_devices("GPU"))
        self._utilization = hardware_lib.GpuUtilization() if self._gpu else None
        self._start = self._trained = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")
            self._utilization.start()
        self._start, self._trained = time.perf_counter(), None

    def on_test_begin(self, logs=None):
        if self._start is not None and self._trained is None:
            self._trained = time.perf_counter() - self._start
            if self._utilization is not None:
                self._utilization.stop()

    def on_train_end(self, logs=None):
        if self._utilization is not None:
            self._utilization.close()

    def on_epoch_end(self, epoch, logs=None):
        if self._utilization is not None:
            self._utilization.stop()
        if logs is None or self._start is None:
            return
        seconds = self._trained or (time.perf_counter() - self._start)
        logs["step_ms"] = 1000 * seconds / self.steps_per_epoch
        logs["examples_per_s"] = self.examples_per_step * self.steps_per_epoch / seconds
        if self.sequence_length:
            logs["tokens_per_s"] = logs["examples_per_s"] * self.sequence_length
        if self._gpu:
            logs["gpu_peak_memory_mb"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
            busy = self._utilization.mean()
            if busy is not None:
                logs["gpu_utilization_percent"] = busy


# Training is bound by its input when the input pipeline alone is at most this much faster than training took
# examples from it: the training step (a GPU's) then waited for batches.
INPUT_BOUND_RATIO = 1.25


def input_speed(dataset: tf.data.Dataset, examples_per_batch: int, batches: int = 20) -> float:
    """Examples/s the training input pipeline delivers alone, with nothing consuming them but this loop: over
    `batches` batches after a first one (which may start its threads and fill its buffers)."""
    iterator = iter(dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return examples_per_batch * batches / max(time.perf_counter() - start, 1e-9)


def input_bound(input_examples_per_s: float, trained_examples_per_s: float) -> bool:
    """Whether training waited on its input (INPUT_BOUND_RATIO)."""
    return input_examples_per_s < INPUT_BOUND_RATIO * trained_examples_per_s


def profile_executions(steps: Tuple[int, int], steps_per_execution: int) -> Tuple[int, int]:
    """TensorBoard's profile_batch counts calls of the train function, each `steps_per_execution` steps: the
    calls that hold training steps `steps` (first, last; (0, 0): none)."""
    if steps == (0, 0):
        return steps
    return tuple(math.ceil(step / steps_per_execution) for step in steps)


def make_callbacks(
    log_dir: str,
    backup_dir: Optional[str],
    patience: int,
    extra: Sequence[keras.callbacks.Callback] = (),
    throughput: Optional[Throughput] = None,
    profile_steps: Tuple[int, int] = (0, 0),
) -> List[keras.callbacks.Callback]:
    """The epoch's throughput first (the others see it in the logs), TensorBoard in the run directory (with a
    profiler trace of the steps `profile_steps`, first to last, when set), early stopping on the eval split, and
    backup for resumption."""
    callbacks: List[keras.callbacks.Callback] = [throughput] if throughput is not None else []
    callbacks.append(keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch", profile_batch=profile_steps))
    if patience > 0:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience, restore_best_weights=True, verbose=0)
        )
    if backup_dir:
        # Saves after every epoch and deletes the backup once training completes.
        callbacks.append(keras.callbacks.BackupAndRestore(backup_dir=backup_dir))
    return callbacks + list(extra)


def backup_dir_for(backup_root: Optional[str], key: Mapping[str, Any]) -> Optional[str]:
    """A folder under `backup_root` named by what the training depends on, so a retried Trainer with the
    same inputs and settings finds its backup and a different one never does."""
    if not backup_root:
        return None
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return os.path.join(backup_root, digest)


class BackupMirror(keras.callbacks.Callback):
    """Copies BackupAndRestore's local folder to an object store after every epoch (TF has no S3 file
    system), so a Trainer pod that is retried resumes from the store. Runs after BackupAndRestore's save."""

    def __init__(self, local_dir: str, remote_dir: str):
        super().__init__()
        self.local_dir, self.remote_dir = local_dir, remote_dir

    def on_epoch_end(self, epoch, logs=None):
        if not os.path.isdir(self.local_dir):
            return
        local = object_store.list_files(self.local_dir)
        # The checkpoint index files last: a pod killed mid-copy leaves the previous epoch's index pointing at
        # the previous epoch's files, which are still there; those go once the new index is up.
        for rel in sorted(local, key=lambda r: os.path.basename(r) == "checkpoint"):
            object_store.upload(os.path.join(self.local_dir, rel), f"{self.remote_dir}/{rel}")
        for rel in set(object_store.list_files(self.remote_dir)) - set(local):
            object_store.delete(f"{self.remote_dir}/{rel}")


def local_backup(backup_dir: Optional[str], scratch: str) -> Tuple[Optional[str], List[keras.callbacks.Callback]]:
    """The folder BackupAndRestore writes and the callbacks that keep it: `backup_dir` itself on a file system
    TF can write (local, mounted, gs://), else a folder under `scratch` restored from and mirrored to it."""
    if not object_store.tf_cannot_read(backup_dir):
        return backup_dir, []
    local = os.path.join(scratch, "backup")
    if object_store.exists(backup_dir):
        object_store.download(backup_dir, local)
        logging.info("Trainer backup restored from %s", backup_dir)
    return local, [BackupMirror(local, backup_dir)]


def pretrained_checkpoint(model_params: model_lib.ModelParams, scratch: str) -> checkpoints.Checkpoint:
    """The checkpoint --init-checkpoint names, as a local copy (from an object store, into `scratch`), located
    again: its architecture must be what the run was configured with (`model_params.pretrained`)."""
    given = (
        checkpoints.Checkpoint.from_dict(model_params.pretrained)
        if model_params.pretrained
        else checkpoints.locate(model_params.init_checkpoint)
    )
    if not checkpoints.unchanged(given):  # Transform's vocabulary was read from the files as they were
        raise checkpoints.CheckpointError(
            f"--init-checkpoint {given.path}: its files changed since the run was configured (or the pipeline "
            "compiled): run (or compile) again"
        )
    local = checkpoints.locate(checkpoints.local_copy(given, os.path.join(scratch, "init_checkpoint")))
    if (local.encoder, local.vocab_size, local.has_pooler) != (given.encoder, given.vocab_size, given.has_pooler):
        raise checkpoints.CheckpointError(
            f"--init-checkpoint {given.path}: it changed since the run was configured: it is now "
            f"{local.encoder.describe()} over {local.vocab_size:,} word pieces, it was {given.encoder.describe()} "
            f"over {given.vocab_size:,}"
        )
    return local


def warm_start_encoder(
    model: keras.Model, checkpoint: checkpoints.Checkpoint, inputs: Sequence[model_lib.ModelInput]
) -> Dict[str, Any]:
    """Initialises each text input's encoder from the checkpoint's weights; what it loaded."""
    started = time.perf_counter()
    weights = checkpoints.weights(checkpoint)
    loaded = warm_start.initialise(model, checkpoint, weights, [i.name for i in inputs if i.kind == "text"])
    logging.info("Trainer: encoder weights from %s: %s", checkpoint.describe(), loaded)
    return {"init_checkpoint_values": sum(loaded.values()), "init_checkpoint_load_s": time.perf_counter() - started}


def encoder_records(
    model_params: model_lib.ModelParams,
    config: features_lib.FeatureConfig,
    checkpoint: Optional[checkpoints.Checkpoint],
    info: Mapping[str, Any],
) -> Dict[str, Any]:
    """{text input: what a later run needs to start an encoder from this model's} (export.model_info)."""
    encoder = model_params.encoder
    if encoder is None or not config.text:
        return {}
    vocabulary = info.get("text_vocabulary") or {}
    return {
        config.transformed_name(column): {
            "encoder": encoder.to_dict(),
            "vocab_size": int(vocabulary.get(config.transformed_name(column), 0)),
            "tokenization": dataclasses.asdict(config.tokenization),
            "pooling": model_params.encoder_pooling,
            "dropout": model_params.dropout,
            "checkpoint": checkpoint.name if checkpoint is not None else "",
        }
        for column in config.text
    }


def fine_tuning_record(model_params: model_lib.ModelParams, checkpoint: checkpoints.Checkpoint) -> Dict[str, Any]:
    """What training_info.json (and so MLflow's params and the run page) says of the checkpoint and the recipe:
    flat values."""
    encoder = checkpoint.encoder
    tokenization = checkpoint.tokenization
    return {
        "init_checkpoint_kind": checkpoint.kind,
        "init_checkpoint_name": checkpoint.name,
        "init_checkpoint_parameters": checkpoint.parameters,
        "encoder_layers": encoder.layers,
        "encoder_hidden": encoder.hidden,
        "encoder_heads": encoder.heads,
        "encoder_intermediate": encoder.intermediate,
        "encoder_activation": encoder.activation,
        "encoder_positions": encoder.max_positions,
        "pooling": model_params.encoder_pooling,
        "lower_case": tokenization.lower_case,
        "tokenizer": tokenization.describe(),
    }


def build(
    strategy: tf.distribute.Strategy,
    config: features_lib.FeatureConfig,
    num_tokens: Mapping[str, int],
    model_params: model_lib.ModelParams,
    train_params: TrainParams,
    hardware: hardware_lib.HardwareConfig,
    head: Optional[model_lib.Head] = None,
    inputs: Optional[Sequence[model_lib.ModelInput]] = None,
    train_steps: int = 0,
) -> keras.Model:
    """The compiled model, its variables placed by `strategy`, in the current dtype policy."""
    skip_autograph_for_tf_keras()
    keras.utils.set_random_seed(train_params.seed)
    with strategy.scope():
        return model_lib.build_model(
            config,
            num_tokens,
            model_params,
            grad_accum_steps=train_params.grad_accum_steps,
            steps_per_execution=hardware.steps_per_execution,
            jit_compile=hardware.xla,
            head=head,
            inputs=inputs,
            train_steps=train_steps,
            recompute=hardware.recompute,
        )


def train(
    config: features_lib.FeatureConfig,
    tf_transform_output: tft.TFTransformOutput,
    train_files: Iterable[str],
    eval_files: Iterable[str],
    train_steps: Optional[int],
    eval_steps: int,
    model_params: model_lib.ModelParams,
    train_params: TrainParams,
    log_dir: str,
    hardware: hardware_lib.HardwareConfig = hardware_lib.HardwareConfig(),
    strategy: Optional[tf.distribute.Strategy] = None,
    backup_dir: Optional[str] = None,
    extra_callbacks: Sequence[keras.callbacks.Callback] = (),
    raw_examples: bool = False,
    eval_rows: Optional[int] = None,
    checkpoint: Optional[checkpoints.Checkpoint] = None,
    train_rows: Optional[int] = None,
):
    """Builds and fits the model, in the current dtype policy; returns (model, history, info).

    The files hold Transform's output, or with `raw_examples` ExampleGen's examples, transformed as they are
    read: then only the rows training reads are transformed, not every row of every split. `eval_rows`, the
    eval split's recorded size, spares a counting pass over it; `train_rows`, the training split's, sets the
    steps of `train_params.train_epochs` when `train_steps` is None. `info["class_names"]` holds a multi-class
    model's classes in index order. Without roles in the feature config, the inputs are the transformed
    features of a user's preprocessing_fn (`transformed_inputs`). `checkpoint` (a local one): the text
    encoders start from its weights, and take its architecture and word embeddings' rows."""
    strategy = strategy or hardware_lib.make_strategy()
    train_files = list(train_files)
    head, names_ = make_head(config, tf_transform_output, train_files, raw_examples)
    inputs = (
        model_lib.inputs_of(config, id_ranges(tf_transform_output, config))
        if config.feature_columns
        else transformed_inputs(tf_transform_output, config.label.name)
    )
    if checkpoint is not None:
        # The word embeddings keep every row of the checkpoint's (a vocab.txt may list fewer word pieces).
        inputs = [dataclasses.replace(i, tokens=checkpoint.vocab_size) if i.kind == "text" else i for i in inputs]
        if not model_params.pretrained:
            model_params = dataclasses.replace(model_params, pretrained=checkpoint.to_dict())
    batch = train_params.effective_batch(strategy.num_replicas_in_sync)
    if train_steps is None and train_params.train_epochs and train_rows is None:
        train_rows = count_rows(train_files)
    train_steps, steps_from = steps_for(train_steps, train_params.train_epochs, train_rows, batch)
    plan = schedule(train_steps, train_params.eval_every_steps)
    # A text input's tokens the model reads (a tuning trial's sequence_length may be fewer than the graph's).
    tokens_read = model_params.tokens_read(config.sequence_length) if config.text else 0
    model = build(
        strategy,
        config,
        {},
        model_params,
        train_params,
        hardware,
        head=head,
        inputs=inputs,
        train_steps=plan["epochs"] * plan["steps_per_epoch"],
    )
    warm = {}
    if checkpoint is not None:
        warm = {**fine_tuning_record(model_params, checkpoint), **warm_start_encoder(model, checkpoint, inputs)}
    transform = None
    if raw_examples:
        spec = tf_transform_output.raw_feature_spec()
        # Built in float32 whatever the policy: the graph takes float32 inputs (float16 coordinates would move
        # by 0.03 degrees), and TFTransformOutput hands the same layer to the export.
        text.load_ops_for(tf_transform_output.transform_savedmodel_dir)  # a text column's graph tokenizes
        with hardware_lib.precision_policy("float32"):
            transform = tf_transform_output.transform_features_layer()
    else:
        spec = tf_transform_output.transformed_feature_spec()
    workers = hardware_lib.worker_count(os.environ)
    label_fn = None
    if config.task == tasks.REGRESSION:
        label_fn = lambda y: export.label_forward(config.label, tf.cast(y, tf.float32))  # noqa: E731 (one use)
    dtypes = model_lib.model_input_dtypes(inputs)
    datasets = [
        make_dataset(
            files,
            spec,
            config.label.name,
            model.input_names,
            train_params,
            training,
            batch,
            workers,
            transform,
            label_fn=label_fn,
            input_dtypes=dtypes,
        )
        for files, training in ((train_files, True), (eval_files, False))
    ]
    train_ds, eval_ds = datasets
    if not eval_steps and eval_rows is not None:
        eval_steps = max(1, min(train_params.max_eval_batches, math.ceil(eval_rows / batch)))
    if not eval_steps:
        # One pass over the eval split, capped: on large data a full pass per epoch would cost more than the
        # training steps. Keras also needs an explicit count with steps_per_execution > 1.
        eval_steps = int(eval_ds.take(train_params.max_eval_batches).reduce(0, lambda count, _: count + 1))
    replicas = strategy.num_replicas_in_sync
    info = hardware_lib.describe(strategy, hardware)
    info.update(
        task=config.task,
        inputs=len(inputs),
        preset=model_params.preset or ("" if checkpoint is not None else presets.DEFAULT_PRESET),
        parameters=int(model.count_params()),
        optimizer=model_params.optimizer_name,
        learning_rate=model_params.learning_rate,
        dropout=model_params.dropout,
        **(
            {
                "attention_dropout": model_params.dropout
                if model_params.attention_dropout is None
                else model_params.attention_dropout
            }
            if model_params.encoder is not None
            else {}
        ),
        head_dropout=model_params.head_dropout,
        clip_norm=model_params.clip_norm,
        **({"adam_epsilon": model_params.adam_epsilon} if model_params.adam_epsilon is not None else {}),
        **(
            {"weight_decay": model_params.weight_decay, "warmup_share": model_params.warmup_share}
            if model_params.optimizer_name == "adamw"
            else {}
        ),
        **(
            {
                "text_columns": list(config.text),
                "sequence_length": config.sequence_length,
                **({"tokens_read": tokens_read} if tokens_read != config.sequence_length else {}),
                "text_vocabulary": {i.name: i.tokens for i in inputs if i.kind == "text"},
            }
            if config.text
            else {}
        ),
        **({"class_names": names_} if names_ else {}),
        **(
            {"target_mean": head.label_mean, "target_std": head.label_std, "label_transform": config.label.transform}
            if config.task == tasks.REGRESSION
            else {}
        ),
        per_replica_batch=train_params.batch_size,
        gradient_accumulation_steps=train_params.grad_accum_steps,
        global_batch=train_params.global_batch(replicas),
        effective_batch=batch,
        train_steps=plan["epochs"] * plan["steps_per_epoch"],
        train_steps_from=steps_from,
        **({"train_rows": train_rows} if train_rows else {}),
        **plan,
        backup_dir=backup_dir,
        **warm,
    )
    logging.info("Trainer: %s", json.dumps(info))
    history = model.fit(
        train_ds,
        validation_data=eval_ds,
        validation_steps=eval_steps or None,
        callbacks=make_callbacks(
            log_dir,
            backup_dir,
            train_params.early_stopping_patience,
            extra_callbacks,
            throughput=Throughput(batch, plan["steps_per_epoch"], tokens_read),
            profile_steps=profile_executions(train_params.profile_steps, hardware.steps_per_execution),
        ),
        verbose=0,
        **plan,
    )
    info["epochs_run"] = len(history.history.get("loss", []))
    trained = history.history.get("examples_per_s")
    if trained:
        # The last epoch's speed against the input's own, read the way training read it (cached by then).
        info["input_examples_per_s"] = input_speed(train_ds, batch, batches=min(20, plan["steps_per_epoch"]))
        info["input_bound"] = input_bound(info["input_examples_per_s"], trained[-1])
    # BackupAndRestore starts a resumed fit at the epoch after its last backup; 0 for a fresh one.
    info["resumed_from_epoch"] = history.epoch[0] if history.epoch else plan["epochs"]
    if info["resumed_from_epoch"]:
        logging.info("Trainer resumed from its backup at epoch %d of %d", info["resumed_from_epoch"], plan["epochs"])
    return model, history, info


def count_rows(file_patterns: Iterable[str]) -> int:
    """The records of gzipped TFRecord files (a pass over them: where ExampleGen's recorded count is unknown)."""
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP")
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


def recorded_rows(file_patterns: Iterable[str], split: str) -> Optional[int]:
    """The rows ExampleGen recorded for `split` when the files are its examples (`<examples>/Split-<split>/*`)."""
    from tfxflow.components.ingest import csv_input

    roots = {os.path.dirname(os.path.dirname(pattern)) for pattern in file_patterns}
    if len(roots) != 1:
        return None
    counts = csv_input.read_rows(roots.pop())
    return None if counts is None else counts["split_rows"].get(split)


def serving_columns(schema_path: Optional[str]) -> Optional[List[str]]:
    """The columns of the schema's SERVING environment (None without a schema): what a request holds."""
    if not schema_path:
        return None
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    from tfxflow.components.validation.schema import serving_features

    return [f.name for f in serving_features(io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema()))]


def with_tuned(custom: Mapping[str, Any], values: Mapping[str, Any]) -> dict:
    """The Trainer's custom_config with a tuning's `values` in place of its settings (search_space.apply), the
    width scaling the model's own hidden layers (the given ones, else its preset's)."""
    base = model_lib.ModelParams.from_dict(custom.get("model", {}))
    return search_space.apply(values, custom, base.hidden_units or base.preset_spec.hidden_units)


def run_fn(fn_args) -> None:
    """TFX Trainer entry point: trains per `custom_config`, exports the serving model, writes what it used."""
    custom = fn_args.custom_config or {}
    unknown = sorted(set(custom) - set(CUSTOM_CONFIG_KEYS))
    if unknown:  # a setting spelled differently here and where the pipeline is built would be lost silently
        raise ValueError(f"Trainer custom_config: unknown key(s) {unknown}; known: {sorted(CUSTOM_CONFIG_KEYS)}")
    tuned = dict((fn_args.hyperparameters or {}).get("values") or {})
    if tuned:  # the Tuner's best trial (components/tuning/tuner.py) in place of the settings it searched
        custom = with_tuned(custom, tuned)
    # No roles: the features are those of a user's own preprocessing_fn (a module file).
    config = features_lib.as_config(custom["features"], roles_required=False)
    hardware = hardware_lib.HardwareConfig.from_dict(custom.get("hardware", {}))
    train_params = TrainParams.from_dict(custom.get("training", {}))
    hardware_lib.configure_devices(hardware)
    strategy = hardware_lib.make_strategy()  # first: MultiWorkerMirroredStrategy needs an untouched runtime
    if hardware.require_gpus:
        hardware_lib.check_gpus(hardware)
    policy = hardware_lib.resolve_precision(hardware.precision)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    text.load_ops_for(tf_transform_output.transform_savedmodel_dir)
    backup_dir = backup_dir_for(
        train_params.backup_root,
        {
            "train_files": list(fn_args.train_files),
            "transform": fn_args.transform_graph_path,
            "train_steps": fn_args.train_steps,
            "custom_config": custom,
        },
    )
    model_params = model_lib.ModelParams.from_dict(custom.get("model", {}))
    scratch = tempfile.mkdtemp(prefix="tfxflow-trainer-")
    try:
        fit_backup_dir, mirror = local_backup(backup_dir, scratch)
        checkpoint = pretrained_checkpoint(model_params, scratch) if model_params.init_checkpoint else None
        # LocalDagRunner runs every component in this process: the policy must not outlive the Trainer.
        with hardware_lib.precision_policy(policy):
            model, history, info = train(
                config,
                tf_transform_output,
                fn_args.train_files,
                fn_args.eval_files,
                train_steps=fn_args.train_steps,
                eval_steps=fn_args.eval_steps,
                model_params=model_params,
                train_params=train_params,
                log_dir=fn_args.model_run_dir,
                hardware=hardware,
                strategy=strategy,
                backup_dir=fit_backup_dir,
                extra_callbacks=mirror,
                raw_examples=bool(custom.get("raw_examples")),
                eval_rows=recorded_rows(fn_args.eval_files, "eval"),
                checkpoint=checkpoint,
                train_rows=recorded_rows(fn_args.train_files, "train"),
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    # Outside the policy: the Transform layer created at export must keep float32 inputs.
    raw_signature = bool(config.feature_columns)  # one tensor per column needs the columns the config names
    export.export_serving_model(
        model,
        tf_transform_output,
        config,
        fn_args.serving_model_dir,
        class_names=info.get("class_names", ()),
        raw_signature=raw_signature,
        serving_columns=serving_columns(fn_args.schema_path),
        encoders=encoder_records(model_params, config, checkpoint, info),
    )
    if custom.get("raw_examples"):  # real rows for TF Serving's warmup (transformed ones are not requests)
        rows, complete = export.sample_rows(fn_args.eval_files, config.feature_columns)
        info["warmup_requests"] = export.write_warmup_requests(
            fn_args.serving_model_dir, rows, tf_transform_output, config, raw_signature, complete
        )
    # The model is exported: nothing is left to resume.
    if object_store.tf_cannot_read(backup_dir):
        object_store.delete(backup_dir)
    elif backup_dir and tf.io.gfile.exists(backup_dir):
        tf.io.gfile.rmtree(backup_dir)
    if model_params.init_checkpoint:
        info["init_checkpoint"] = model_params.init_checkpoint  # as given, not the local copy
    if tuned:
        info["tuned"] = tuned
    info["history"] = {k: [float(v) for v in values] for k, values in history.history.items()}
    tf.io.gfile.makedirs(fn_args.model_run_dir)
    with tf.io.gfile.GFile(os.path.join(fn_args.model_run_dir, names.TRAINING_INFO_FILE), "w") as f:
        json.dump(info, f, indent=2)
    logging.info("Final epoch metrics: %s", {k: round(v[-1], 4) for k, v in info["history"].items()})
