"""`create_pipeline`: the whole TFX pipeline as one pure function of the run's settings (pipeline/config.py) and
what its orchestrator decides (`Orchestrator`: where local and Kubeflow runs differ)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List, Mapping, Optional

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2 as tfma_config

# Imported from their modules: `from tfx import v1` also imports TFX's Google Cloud extensions
# (google.cloud.aiplatform), seconds of every start of the CLI or of a Kubeflow step.
from tfx.components import ExampleValidator, StatisticsGen, Trainer
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, trainer_pb2
from tfx.types import Channel, standard_artifacts

from tfxflow.components import names
from tfxflow.components.edge import edge as edge_lib
from tfxflow.components.evaluation import eval_metrics
from tfxflow.components.evaluation import evaluator as evaluator_lib
from tfxflow.components.ingest import csv_input
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import presets, search_space, tasks
from tfxflow.components.serving import pusher as pusher_lib
from tfxflow.components.serving import serving_check as serving_check_lib
from tfxflow.components.tracking import mlflow_auth
from tfxflow.components.tracking import tracking as tracking_lib
from tfxflow.components.tracking.mlflow_runs import TrackingSettings
from tfxflow.components.training import executor as trainer_executor
from tfxflow.components.training import transform as transform_lib
from tfxflow.components.training import user_trainer as user_trainer_lib
from tfxflow.components.tuning import tuner as tuner_lib
from tfxflow.components.validation import drift
from tfxflow.components.validation.baseline import BlessedDataStatisticsStrategy, ServedBaseline
from tfxflow.components.validation.gate import DataGate
from tfxflow.components.validation.schema import EmbeddedSchema
from tfxflow.pipeline.config import EvaluationConfig, SharedConfig, check_tuning

PREPROCESSING_FN = "tfxflow.components.model.preprocessing.preprocessing_fn"
RUN_FN = "tfxflow.components.training.trainer.run_fn"
# Where the baselines (the model to beat, the data to compare with) come from: resolvers over ML Metadata, or
# a step that reads the serving directory (for Kubeflow, which runs no resolver; components/validation/baseline.py).
BASELINE_SOURCES = ("metadata", "serving")
# The values an orchestrator may set per run (Orchestrator.parameters) instead of the config's.
RUN_PARAMETERS = ("data_root", "allowed_anomaly_types", "serving_data_root", "train_args")


# The Evaluator's metrics per task: (class name, module or "" for TFMA's own, config JSON or "").
EVAL_METRICS = {
    tasks.BINARY: (
        ("BinaryAccuracy", "", ""),
        ("AUC", "", ""),
        ("Precision", "", ""),
        ("Recall", "", ""),
        ("MeanLabel", "", ""),
        ("MeanPrediction", "", ""),
    ),
    tasks.MULTICLASS: (
        ("MultiClassAccuracy", eval_metrics.MODULE, ""),
        ("MacroF1", eval_metrics.MODULE, ""),
        ("MacroPrecision", eval_metrics.MODULE, ""),
        ("MacroRecall", eval_metrics.MODULE, ""),
        ("PerClassScores", eval_metrics.MODULE, ""),
        # TFMA's own matrix of the top-scoring class (threshold 0), for the run page's confusion matrix.
        ("MultiClassConfusionMatrixAtThresholds", "", json.dumps({"thresholds": eval_metrics.ARGMAX})),
    ),
    tasks.REGRESSION: (
        ("RSquared", eval_metrics.MODULE, ""),
        ("RootMeanSquaredError", eval_metrics.MODULE, ""),
        ("AbsoluteError", eval_metrics.MODULE, ""),
        ("MeanLabel", "", ""),
        ("MeanPrediction", "", ""),
    ),
}

# A text column's graphs use TF Text's ops: Beam's worker processes (multi-processing, a cluster) import it
# before they load a graph, as the main process does.
TEXT_BEAM_ARGS = ("--beam_plugins=tensorflow_text",)


def eval_config(
    evaluation: EvaluationConfig,
    features: features_lib.FeatureConfig,
    prediction_key: Optional[str] = None,
    model_type: str = tfma.TF_GENERIC,
) -> tfma_config.EvalConfig:
    """TFMA config of the task: raw examples go through the model's `transform_features` signature to get the
    label, `serving_default` gives the prediction (`prediction_key`: the task's output; "" for a model of a
    user's own run_fn, whose one output TFMA takes). The blessing: the metric's bound, and no change for the
    worse beyond `max_regression` against the baseline model.

    `model_type`: the built-in Trainer exports a plain SavedModel (a tf.Module's signatures), which TFMA, not
    told, finds out by first trying to load it as a Keras model (0.9 s each time the model is loaded); "" lets
    TFMA find out for a user's run_fn, whose model may be a Keras one (TFMA then adds its compiled metrics)."""
    task = features.task_spec
    evaluation = evaluation.for_task(task.name)
    higher = task.metric(evaluation.metric).higher_is_better
    bound = {"lower_bound" if higher else "upper_bound": {"value": evaluation.threshold}}
    threshold = tfma_config.MetricThreshold(
        value_threshold=tfma_config.GenericValueThreshold(**bound),
        change_threshold=tfma_config.GenericChangeThreshold(
            direction=tfma_config.MetricDirection.HIGHER_IS_BETTER
            if higher
            else tfma_config.MetricDirection.LOWER_IS_BETTER,
            absolute={"value": -abs(evaluation.max_regression) if higher else abs(evaluation.max_regression)},
        ),
    )
    # The blessing judges the overall slice only: a MetricConfig's plain `threshold` would apply to every
    # slice, and one small slice (--slice-by) would veto the model.
    overall_only = [tfma_config.PerSliceMetricThreshold(slicing_specs=[tfma_config.SlicingSpec()], threshold=threshold)]
    metrics = [tfma_config.MetricConfig(class_name="ExampleCount")]
    for class_name, module, config in EVAL_METRICS[task.name]:
        judged = tasks.METRIC_CLASSES.get(class_name) == evaluation.metric
        metrics.append(
            tfma_config.MetricConfig(
                class_name=class_name,
                module=module or None,
                config=config or None,
                per_slice_thresholds=overall_only if judged else None,
            )
        )
    slicing = [tfma_config.SlicingSpec()] + [
        tfma_config.SlicingSpec(feature_keys=[c]) for c in evaluation.slice_columns
    ]
    key = task.prediction_key if prediction_key is None else prediction_key
    return tfma_config.EvalConfig(
        model_specs=[
            tfma_config.ModelSpec(
                model_type=model_type,
                signature_name=names.SERVING_SIGNATURE,
                label_key=features.label.name,
                prediction_key=key or None,
                preprocessing_function_names=[names.TRANSFORM_SIGNATURE],
            )
        ],
        slicing_specs=slicing,
        metrics_specs=[tfma_config.MetricsSpec(metrics=metrics)],
    )


@dataclasses.dataclass(frozen=True)
class Orchestrator:
    """What differs between a local run (LocalDagRunner; pipeline/local/runner.py builds `local`) and a compiled
    Kubeflow pipeline (pipeline/kfp/compiler.py builds `kubeflow`), and why; the rest of the pipeline is the same.

    - `baseline_source`, the model to beat and the data to compare with: locally "metadata", resolvers over ML
      Metadata; on Kubeflow "serving", a `ServedBaseline` step that reads the newest version under
      `<serving_dir>/<model_name>` and the statistics the Pusher keeps with it (KFP runs no TFX resolver).
    - `schema_text`: locally "", ImportSchemaGen reads the schema file the runner staged; on Kubeflow the schema's
      content, carried by the spec, since the steps cannot read the compiling machine's files.
    - `warm_serving_probe`: locally the Evaluator starts the serving check's probe as it begins, for the check
      that runs next in the same process; on Kubeflow each step runs in its own pod, where the probe would be
      lost with the Evaluator's.
    - `metadata_connection_config`: locally the run's ML Metadata store; on Kubeflow None (KFP keeps its own).
    - `parameters`: values set per run rather than at build time, as RuntimeParameters by name: on Kubeflow
      `data_root`, `allowed_anomaly_types` (comma-separated), `serving_data_root` and `train_args` (a TrainArgs
      proto as JSON, which replaces `training.train_steps`); locally none, the config's values.
    - `serving_data_fingerprint`: locally a fingerprint of the serving data's files, so the gate re-runs when they
      change; on Kubeflow "", the files being a run's parameter that the compile does not read.
    - `tuning_dir`: locally the home's folder where a killed tuning's Optuna study resumes; on Kubeflow "", the
      step's output (a pod keeps no folder from one run to the next).
    """

    baseline_source: str = "metadata"
    schema_text: str = ""
    warm_serving_probe: bool = False
    metadata_connection_config: Any = None
    parameters: Mapping[str, RuntimeParameter] = dataclasses.field(default_factory=dict)
    serving_data_fingerprint: str = ""
    tuning_dir: str = ""

    def __post_init__(self) -> None:
        if self.baseline_source not in BASELINE_SOURCES:
            raise ValueError(f"baseline_source must be one of {BASELINE_SOURCES}, got '{self.baseline_source}'")
        unknown = sorted(set(self.parameters) - set(RUN_PARAMETERS))
        if unknown:
            raise ValueError(f"parameters {unknown}: a run may set only {RUN_PARAMETERS}")

    @classmethod
    def local(
        cls, metadata_connection_config, serving_data_fingerprint: str = "", tuning_dir: str = ""
    ) -> Orchestrator:
        """LocalDagRunner's: every component in this process, on this machine's files and ML Metadata store."""
        return cls(
            baseline_source="metadata",
            warm_serving_probe=True,
            metadata_connection_config=metadata_connection_config,
            serving_data_fingerprint=serving_data_fingerprint,
            tuning_dir=tuning_dir,
        )

    @classmethod
    def kubeflow(cls, schema_text: str, parameters: Mapping[str, RuntimeParameter]) -> Orchestrator:
        """A compiled KFP v2 pipeline's: one pod per step, the schema in the spec, values set per run."""
        return cls(baseline_source="serving", schema_text=schema_text, parameters=dict(parameters))

    def value(self, name: str, default):
        """The run's RuntimeParameter `name`, else `default` (the config's value)."""
        return self.parameters.get(name, default)


@dataclasses.dataclass(frozen=True)
class _Data:
    """The ingest and validation steps' nodes."""

    example_gen: Any
    schema_gen: Any
    statistics_gen: Any
    example_validator: Any


@dataclasses.dataclass(frozen=True)
class _Baseline:
    """Where the last blessed model and its data's statistics come from, and the nodes that find them."""

    nodes: List[Any]  # before the gate: the ServedBaseline step, or the data statistics' resolver
    model_resolvers: List[Any]  # before the Evaluator: the latest blessed model's resolver, if any
    statistics: Any
    blessing: Any
    model: Any


@dataclasses.dataclass(frozen=True)
class _Model:
    """The training and evaluation steps' nodes; `tuner` and `edge_export` are None when not asked for."""

    tuner: Any
    trainer: Any
    evaluator: Any
    serving_check: Any
    edge_export: Any


def create_pipeline(
    config: SharedConfig,
    *,
    orchestrator: Orchestrator,
    pipeline_root: str,
    serving_dir: str,
    trainer_backup_dir: Optional[str] = None,
    keep_versions: int = names.DEFAULT_KEEP_VERSIONS,
    tracking: Optional[TrackingSettings] = None,
) -> Pipeline:
    """Builds CsvExampleGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> DataGate -> Transform
    -> Trainer -> latest blessed model -> Evaluator -> Pusher (to `<serving_dir>/<model_name>/<version>/`), from
    `config`'s settings (pipeline/config.py's SharedConfig: data, schema, features, training, evaluation, split,
    tuning, the gate's rules, the Beam runner, the user's module) and what the runner decides: `orchestrator`
    (what differs between local and Kubeflow runs, in one place), where artifacts and models go, and `tracking`.

    CsvExampleGen first checks every `*.csv` (and gzip-compressed `*.csv.gz`) file of `data_root` (encoding,
    quotes, field counts, values of the schema's types, the label) and refuses bad files. The gate fails the
    run on any anomaly whose type is not in `allowed_anomaly_types`: the schema's, drift against the data of
    the last blessed model (`drift_check`), and with `serving_data_root` (CSV files without the label) the
    serving data's and training/serving skew.

    With `tracking`, MlflowStart runs first (ExampleGen waits for it), MlflowRecord logs the run's data,
    training and evaluation before the Pusher, and MlflowFinish records the push (components/tracking/tracking.py).

    Reads nothing: `data_root` and `schema_path` are read by the components when the pipeline runs; the
    runner gives a `schema_path` that changes with the file's content, or cached components miss an edit.
    `trainer_backup_dir` is a durable folder where an interrupted Trainer's backup survives for its retry;
    `keep_versions` the newest model versions the Pusher keeps.

    `user_module`: a TFX module file of the user's (pipeline/user_module.py). Its preprocessing_fn replaces the
    built-in one in Transform (and its stats_options_updater_fn turns Transform's statistics on); its run_fn
    replaces the built-in Trainer, which then reads Transform's materialized examples as TFX's contract has
    it. The Evaluator, ServingCheck, Pusher and tracking take the model it exports: the task and label come
    from `features`, and a model of a user's run_fn needs only `serving_default` (and, for TFMA's label,
    `transform_features` or a raw-column label).

    `tuning` (with `tune` set): a Tuner between Transform and the Trainer searches the built-in Trainer's
    settings (components/tuning/tuner.py), or runs the module's tuner_fn in TFX's Tuner
    (components/tuning/module_tuner.py); the Trainer trains with its best trial's values.
    """
    if tracking is not None:
        _check_tracking(tracking)
    model_base = f"{serving_dir}/{config.model_name}"
    data = _ingest(config, orchestrator)
    baseline = _baseline(config, orchestrator, model_base)
    data_gate = _data_gate(config, orchestrator, data, baseline)
    transform = _transform(config, data)
    # Transform (and so everything after it) waits for the gate; a failed gate stops the run here.
    transform.add_upstream_node(data_gate)
    model = _model(config, orchestrator, data, transform, baseline, trainer_backup_dir)
    pusher = pusher_lib.Pusher(
        model=model.trainer.outputs["model"],
        model_blessing=model.evaluator.outputs["blessing"],
        infra_blessing=model.serving_check.outputs["blessing"],
        base_directory=model_base,
        keep_versions=keep_versions,
        statistics=data.statistics_gen.outputs["statistics"],
        edge_model=model.edge_export.outputs["edge_model"] if model.edge_export is not None else None,
    ).with_id(names.PUSHER)
    tracking_nodes = []
    if tracking is not None:
        tracking_nodes = _tracking(config, tracking, data, baseline, data_gate, model, pusher)
    return Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=pipeline_root,
        components=[
            *tracking_nodes[:1],
            data.example_gen,
            data.statistics_gen,
            data.schema_gen,
            data.example_validator,
            *baseline.nodes,
            data_gate,
            transform,
            *([model.tuner] if model.tuner is not None else []),
            model.trainer,
            *baseline.model_resolvers,
            model.evaluator,
            model.serving_check,
            *([model.edge_export] if model.edge_export is not None else []),
            *tracking_nodes[1:2],
            pusher,
            *tracking_nodes[2:],
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=orchestrator.metadata_connection_config,
        beam_pipeline_args=list(config.beam_pipeline_args) + (list(TEXT_BEAM_ARGS) if config.features.text else []),
    )


def _ingest(config: SharedConfig, orchestrator: Orchestrator) -> _Data:
    """CsvExampleGen (this project's checking executor, TFX's hash split), the schema, StatisticsGen and
    ExampleValidator."""
    output_config = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=config.split.train_buckets),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=config.split.eval_buckets),
            ]
        )
    )
    schema_text = orchestrator.schema_text
    # CsvExampleGen takes no custom_config; its base class does, and runs our checking executor.
    example_gen = FileBasedExampleGen(
        input_base=orchestrator.value("data_root", config.data_root),
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern=names.CSV_PATTERN)]
        ),
        output_config=output_config,
        custom_config=csv_input.make_example_gen_config(
            config.schema_path,
            config.features.label,
            schema_text=schema_text,
            # A file per training worker and split, so that each reads its own (tf.data's FILE sharding).
            min_files=config.training.cluster.workers,
        ),
        custom_executor_spec=executor_spec.BeamExecutorSpec(csv_input.Executor),
    ).with_id(names.EXAMPLE_GEN)
    schema_gen = (
        EmbeddedSchema(schema_text=schema_text) if schema_text else ImportSchemaGen(schema_file=config.schema_path)
    )
    # Quantiles fine enough for the drift and skew checks to bin other data on this data's deciles; with the
    # schema, an integer the schema marks categorical (a multi-class label's classes) gets counts per value.
    statistics_gen = StatisticsGen(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        stats_options=drift.stats_options(),
    ).with_id(names.STATISTICS_GEN)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    return _Data(example_gen, schema_gen, statistics_gen, example_validator)


def _baseline(config: SharedConfig, orchestrator: Orchestrator, model_base: str) -> _Baseline:
    """The last blessed model and, with the drift check, its data's statistics: from the serving directory (a
    ServedBaseline step) or from ML Metadata (resolvers), as the orchestrator has it."""
    if orchestrator.baseline_source == "serving":
        served = ServedBaseline(model_base=model_base).with_id(names.SERVED_BASELINE)
        statistics = served.outputs["statistics"] if config.drift_check else None
        return _Baseline([served], [], statistics, None, served.outputs["model"])
    nodes, statistics, blessing = [], None, None
    if config.drift_check:
        baseline_resolver = Resolver(
            strategy_class=BlessedDataStatisticsStrategy,
            statistics=Channel(type=standard_artifacts.ExampleStatistics),
            model_blessing=Channel(type=standard_artifacts.ModelBlessing),
        ).with_id("blessed_data_statistics_resolver")
        nodes = [baseline_resolver]
        statistics = baseline_resolver.outputs["statistics"]
        blessing = baseline_resolver.outputs["model_blessing"]
    model_resolver = Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    return _Baseline(nodes, [model_resolver], statistics, blessing, model_resolver.outputs["model"])


def _data_gate(config: SharedConfig, orchestrator: Orchestrator, data: _Data, baseline: _Baseline):
    """The gate: schema anomalies, drift against the baseline's data, the serving data's skew."""
    allowed = orchestrator.value("allowed_anomaly_types", config.allowed_anomaly_types)
    return DataGate(
        anomalies=data.example_validator.outputs["anomalies"],
        statistics=data.statistics_gen.outputs["statistics"],
        schema=data.schema_gen.outputs["schema"],
        examples=data.example_gen.outputs["examples"],
        baseline_statistics=baseline.statistics,
        baseline_blessing=baseline.blessing,
        allowed_anomaly_types=allowed if isinstance(allowed, RuntimeParameter) else ",".join(allowed),
        serving_data_root=orchestrator.value("serving_data_root", config.serving_data_root) or "",
        serving_data_fingerprint=orchestrator.serving_data_fingerprint,
    ).with_id(names.DATA_GATE)


def _transform(config: SharedConfig, data: _Data):
    """Transform: the built-in preprocessing_fn, or the module file's."""
    features, training, user_module = config.features, config.training, config.user_module
    user_transform = user_module is not None and user_module.preprocessing_fn
    user_trainer = user_module is not None and user_module.run_fn
    return transform_lib.Transform(
        examples=data.example_gen.outputs["examples"],
        schema=data.schema_gen.outputs["schema"],
        **({"module_file": user_module.path} if user_transform else {"preprocessing_fn": PREPROCESSING_FN}),
        # A pretrained checkpoint's vocabulary is read by path: its fingerprint makes a changed checkpoint a new
        # cache key (TFX keys Transform on its properties, not on the files they name).
        custom_config={
            "features": features.to_dict(),
            **({"pretrained_fingerprint": training.pretrained["fingerprint"]} if training.pretrained else {}),
        },
        # StatisticsGen and the gate have validated this data already; Transform's own pre- and post-transform
        # statistics and anomalies would be three more passes over it that nothing reads, unless the module
        # file asks for them (stats_options_updater_fn).
        disable_statistics=not (user_transform and user_module.stats_options_updater_fn),
        # The built-in Trainer transforms the rows it reads with the graph (and the Evaluator and the served
        # model do so anyway): writing every split transformed would cost a pass over all the data. A user's
        # run_fn gets the transformed examples, as TFX's contract has it.
        materialize=bool(user_trainer),
        # TFX reads an analyzer cache only from an `analyzer_cache` input, which this pipeline does not wire (a
        # run whose data did not change is cached whole by TFX): writing one would be Beam stages and files
        # that nothing reads.
        disable_analyzer_cache=True,
        force_tf_compat_v1=True,
        # The built-in analyzers on a sample of a larger training split (components/training/transform.py). Not a
        # module file's preprocessing_fn (it may count rows or list a label's classes), nor a multi-class label
        # whose classes come from Transform's vocabulary: a class left out of the sample would have no index.
        max_analyze_rows=(
            0
            if user_transform or (features.task == tasks.MULTICLASS and not features.label.classes)
            else training.transform_max_rows
        ),
    ).with_id(names.TRANSFORM)


def _model(
    config: SharedConfig,
    orchestrator: Orchestrator,
    data: _Data,
    transform,
    baseline: _Baseline,
    trainer_backup_dir: Optional[str],
) -> _Model:
    """The Tuner (with --tune) and the Trainer, then the Evaluator against the baseline, the serving check and the
    TensorFlow Lite export (with --tflite)."""
    tuner, trainer = _training(config, orchestrator, data, transform, trainer_backup_dir)
    return _Model(tuner, trainer, *_evaluation(config, orchestrator, data, trainer, baseline))


def _training(config: SharedConfig, orchestrator: Orchestrator, data: _Data, transform, trainer_backup_dir):
    """(the Tuner or None, the Trainer): the built-in run_fn on the raw examples, or the module's on Transform's."""
    features, training, user_module = config.features, config.training, config.user_module
    user_trainer = user_module is not None and user_module.run_fn
    trainer_custom = {
        "features": features.to_dict(),
        **({} if user_trainer else {"raw_examples": True}),
        **training.custom_config(backup_root=trainer_backup_dir),
    }
    # 0: the Trainer counts its steps (--train-epochs passes over the training split; TFX passes None).
    train_args = orchestrator.value("train_args", None) or trainer_pb2.TrainArgs(num_steps=training.train_steps or 0)
    eval_args = trainer_pb2.EvalArgs(num_steps=training.eval_steps or (presets.USER_EVAL_STEPS if user_trainer else 0))
    tuner = _tuner(config, orchestrator, data, transform, train_args, eval_args, trainer_custom)
    trainer = Trainer(
        **(
            # TFX's executor on one worker or several (components/training/executor.py), and for a module's
            # run_fn the built-in Trainer's record of the run (components/training/user_trainer.py).
            {
                "module_file": user_module.path,
                "custom_executor_spec": executor_spec.ExecutorClassSpec(user_trainer_lib.Executor),
            }
            if user_trainer
            else {"run_fn": RUN_FN, "custom_executor_spec": executor_spec.ExecutorClassSpec(trainer_executor.Executor)}
        ),
        examples=transform.outputs["transformed_examples"] if user_trainer else data.example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=data.schema_gen.outputs["schema"],
        train_args=train_args,
        eval_args=eval_args,
        custom_config=trainer_custom,
        **({"hyperparameters": tuner.outputs["best_hyperparameters"]} if tuner is not None else {}),
    ).with_id(names.TRAINER)
    return tuner, trainer


def _evaluation(config: SharedConfig, orchestrator: Orchestrator, data: _Data, trainer, baseline: _Baseline):
    """(the Evaluator, the serving check, the TensorFlow Lite export or None) of the Trainer's model."""
    features, evaluation, user_module = config.features, config.evaluation, config.user_module
    user_trainer = user_module is not None and user_module.run_fn
    # A model of the user's run_fn: TFMA takes its only output; it needs no signature but serving_default.
    model_eval_config = eval_config(
        evaluation,
        features,
        prediction_key="" if user_trainer else None,
        model_type="" if user_trainer else tfma.TF_GENERIC,
    )
    # TFX's Evaluator on a bounded sample of a large eval split; drops a baseline that holds no model
    # (ServedBaseline before the first push).
    evaluator = evaluator_lib.Evaluator(
        examples=data.example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline.model,
        eval_config=model_eval_config,
        max_eval_rows=evaluation.max_rows,
        warm_serving_probe=orchestrator.warm_serving_probe,
    ).with_id(names.EVALUATOR)
    # The candidate loads and answers in a TensorFlow-only process as the Evaluator's model did, within the
    # latency bound (components/serving/serving_check.py); the Pusher checks its InfraBlessing.
    serving_check = serving_check_lib.ServingCheck(
        model=trainer.outputs["model"],
        examples=data.example_gen.outputs["examples"],
        schema=data.schema_gen.outputs["schema"],
        features=features.to_dict(),
        eval_config=model_eval_config,
        max_latency_ms=evaluation.max_latency_ms,
        required_signatures=(
            (names.SERVING_SIGNATURE,)
            if user_trainer or not features.feature_columns
            else (names.SERVING_SIGNATURE, names.RAW_SIGNATURE)
        ),
    ).with_id(names.SERVING_CHECK)
    serving_check.add_upstream_node(evaluator)  # an evaluated model's figures; a failed evaluation stops first
    # The blessed model as TensorFlow Lite, checked against the SavedModel; the Pusher publishes it in the
    # version (components/edge/edge.py).
    edge_export = None
    if evaluation.tflite:
        edge_export = edge_lib.EdgeExport(
            model=trainer.outputs["model"],
            model_blessing=evaluator.outputs["blessing"],
            infra_blessing=serving_check.outputs["blessing"],
            examples=data.example_gen.outputs["examples"],
        ).with_id(names.EDGE_EXPORT)
    return evaluator, serving_check, edge_export


def _tuner(config: SharedConfig, orchestrator: Orchestrator, data: _Data, transform, train_args, eval_args, custom):
    """The Tuner with --tune (None without): the module's tuner_fn in TFX's Tuner, else the built-in search."""
    tuning, training, features, user_module = config.tuning, config.training, config.features, config.user_module
    if not tuning.tune:
        return None
    check_tuning(tuning, user_module, training, features)
    if user_module is not None and user_module.tuner_fn:
        # The module's own tuner_fn in TFX's Tuner, on what its run_fn reads (components/tuning/module_tuner.py).
        # Lazy: TFX's Tuner imports keras-tuner, which a run without a module file keeps out (on TFX 1.21 that
        # import fails where Keras 3's keras-tuner meets tf-keras).
        from tfxflow.components.tuning import module_tuner

        return module_tuner.Tuner(
            module_file=user_module.path,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=data.schema_gen.outputs["schema"],
            train_args=train_args,
            eval_args=eval_args,
            custom_config=custom,
        ).with_id(names.TUNER)
    task = features.task_spec
    objective = search_space.objective_metric(config.evaluation.for_task(task.name).metric, task.training_metrics)
    return tuner_lib.Tuner(
        examples=data.example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=data.schema_gen.outputs["schema"],
        custom_config=custom,
        space=tuning.space(training, features),
        objective=objective,
        maximize=not tasks.lower_is_better(objective),
        trials=tuning.tune_trials,
        time_budget_s=60.0 * tuning.tune_minutes,
        seed=tuning.seed(training),
        workers=tuning.workers(training),
        train_steps=training.train_steps or 0,
        eval_steps=training.eval_steps,
        study_dir=orchestrator.tuning_dir,
    ).with_id(names.TUNER)


def _check_tracking(tracking: TrackingSettings) -> None:
    """Exec properties land in ML Metadata, the run log and a compiled spec: credentials travel in the
    environment instead (tracking_store.resolve_tracking_uri moves them there)."""
    if mlflow_auth.split_credentials(tracking.uri)[1] is not None:
        raise ValueError(
            f"tracking URI {mlflow_auth.redact_uri(tracking.uri)} carries credentials: pass them in "
            f"${mlflow_auth.USERNAME_ENV}/${mlflow_auth.PASSWORD_ENV} instead"
        )


def _tracking(
    config: SharedConfig, tracking: TrackingSettings, data: _Data, baseline: _Baseline, data_gate, model: _Model, pusher
) -> list:
    """[MlflowStart, MlflowRecord, MlflowFinish]: no work starts before the run is tracked, nothing is pushed that
    was not recorded first, and the push is recorded last."""
    outage = dict(tracking_mode=tracking.mode, tracking_wait_s=float(tracking.wait_s), outbox=tracking.outbox)
    start = tracking_lib.MlflowStart(
        tracking_uri=tracking.uri,
        experiment=tracking.experiment,
        run_key=tracking.run_key,
        pipeline_name=config.pipeline_name,
        params_json=json.dumps(tracking.params, sort_keys=True),
        **outage,
    ).with_id(names.MLFLOW_START)
    # The key parameter changes every run, so MlflowStart never caches.
    data.example_gen.add_upstream_node(start)
    for node in baseline.nodes:
        node.add_upstream_node(start)
    record = tracking_lib.MlflowRecord(
        run_id=start.outputs["run_id"],
        anomalies_found=data_gate.outputs["anomalies_found"],
        anomalies=data.example_validator.outputs["anomalies"],
        statistics=data.statistics_gen.outputs["statistics"],
        schema=data.schema_gen.outputs["schema"],
        model_run=model.trainer.outputs["model_run"],
        model=model.trainer.outputs["model"],
        evaluation=model.evaluator.outputs["evaluation"],
        blessing=model.evaluator.outputs["blessing"],
        serving_check=model.serving_check.outputs["blessing"],
        **({"tuning": model.tuner.outputs["tuner_results"]} if model.tuner is not None else {}),
        **({"edge_model": model.edge_export.outputs["edge_model"]} if model.edge_export is not None else {}),
        tracking_uri=tracking.uri,
        experiment=tracking.experiment,
        run_key=tracking.run_key,
        **outage,
    ).with_id(names.MLFLOW_RECORD)
    pusher.add_upstream_node(record)
    finish = tracking_lib.MlflowFinish(
        run_id=start.outputs["run_id"],
        model=model.trainer.outputs["model"],
        pushed_model=pusher.outputs["pushed_model"],
        tracking_uri=tracking.uri,
        registered_model_name=config.model_name,
        experiment=tracking.experiment,
        run_key=tracking.run_key,
        **outage,
    ).with_id(names.MLFLOW_FINISH)
    return [start, record, finish]
