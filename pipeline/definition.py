"""`create_pipeline`: the whole TFX pipeline as one pure function of its paths and knobs."""

from __future__ import annotations

import json
from typing import List, Optional, Sequence, Union

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
from tfxflow.components.tracking import tracking as tracking_lib
from tfxflow.components.training import transform as transform_lib
from tfxflow.components.training import user_trainer as user_trainer_lib
from tfxflow.components.tuning import tuner as tuner_lib
from tfxflow.components.validation import drift
from tfxflow.components.validation.baseline import BlessedDataStatisticsStrategy, ServedBaseline
from tfxflow.components.validation.gate import DataGate
from tfxflow.components.validation.schema import EmbeddedSchema
from tfxflow.pipeline.config import EvaluationConfig, SplitConfig, TrainingConfig, TuningConfig, check_tuning
from tfxflow.pipeline.user_module import UserModule

PREPROCESSING_FN = "tfxflow.components.model.preprocessing.preprocessing_fn"
RUN_FN = "tfxflow.components.training.trainer.run_fn"
# Where the baselines (the model to beat, the data to compare with) come from: resolvers over ML Metadata, or
# a step that reads the serving directory (for Kubeflow, which runs no resolver; components/validation/baseline.py).
BASELINE_SOURCES = ("metadata", "serving")


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


def create_pipeline(
    *,
    pipeline_name: str,
    pipeline_root: str,
    data_root: Union[str, RuntimeParameter],
    schema_path: str,
    features: features_lib.FeatureConfig,
    serving_dir: str,
    model_name: str,
    trainer_backup_dir: Optional[str] = None,
    metadata_connection_config=None,
    training: TrainingConfig = TrainingConfig(),
    evaluation: EvaluationConfig = EvaluationConfig(),
    split: SplitConfig = SplitConfig(),
    beam_pipeline_args: Optional[List[str]] = None,
    enable_cache: bool = True,
    allowed_anomaly_types: Union[Sequence[str], RuntimeParameter] = (),
    drift_check: bool = True,
    serving_data_root: Union[None, str, RuntimeParameter] = None,
    serving_data_fingerprint: str = "",
    tracking: Optional[tracking_lib.TrackingSettings] = None,
    train_args: Optional[RuntimeParameter] = None,
    keep_versions: int = names.DEFAULT_KEEP_VERSIONS,
    baseline_source: str = "metadata",
    schema_text: str = "",
    user_module: Optional[UserModule] = None,
    warm_serving_probe: bool = False,
    tuning: Optional[TuningConfig] = None,
    tuning_dir: str = "",
) -> Pipeline:
    """Builds CsvExampleGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> DataGate -> Transform
    -> Trainer -> latest blessed model -> Evaluator -> Pusher (to `<serving_dir>/<model_name>/<version>/`).

    CsvExampleGen first checks every `*.csv` (and gzip-compressed `*.csv.gz`) file of `data_root` (encoding,
    quotes, field counts, values of the schema's types, the label) and refuses bad files. The gate fails the
    run on any anomaly whose type is not in `allowed_anomaly_types`: the schema's, drift against the data of
    the last blessed model (`drift_check`), and with `serving_data_root` (CSV files without the label) the
    serving data's and training/serving skew. `serving_data_fingerprint` changes when those files do, so the
    gate re-runs.

    With `tracking`, MlflowStart runs first (ExampleGen waits for it), MlflowRecord logs the run's data,
    training and evaluation before the Pusher, and MlflowFinish records the push (components/tracking/tracking.py).

    Reads nothing: `data_root` and `schema_path` are read by the components when the pipeline runs; the
    runner gives a `schema_path` that changes with the file's content, or cached components miss an edit.
    `trainer_backup_dir` is a durable folder where an interrupted Trainer's backup survives for its retry.

    `baseline_source`: "metadata" finds the last blessed model and its data with resolvers over ML Metadata
    (LocalDagRunner); "serving" with a `ServedBaseline` step that reads the newest version under
    `<serving_dir>/<model_name>` and the statistics the Pusher keeps with it (Kubeflow runs no resolver).
    `schema_text`: the schema's content, carried by the pipeline instead of read from `schema_path` (an
    orchestrator whose steps cannot read the compiling machine's files).

    An orchestrator that sets values per run (Kubeflow) passes RuntimeParameters for `data_root`,
    `allowed_anomaly_types` (comma-separated), `serving_data_root` and `train_args` (a TrainArgs proto as JSON,
    which then replaces `training.train_steps`).

    `user_module`: a TFX module file of the user's (pipeline/user_module.py). Its preprocessing_fn replaces the
    built-in one in Transform (and its stats_options_updater_fn turns Transform's statistics on); its run_fn
    replaces the built-in Trainer, which then reads Transform's materialized examples as TFX's contract has
    it. The Evaluator, ServingCheck, Pusher and tracking take the model it exports: the task and label come
    from `features`, and a model of a user's run_fn needs only `serving_default` (and, for TFMA's label,
    `transform_features` or a raw-column label).

    `warm_serving_probe`: the Evaluator starts the serving check's probe as it begins (a small evaluation
    only), for a runner whose components share one process (LocalDagRunner); where each runs in its own
    (Kubeflow), the probe would be lost with the Evaluator's.

    `tuning` (with `tune` set): a Tuner between Transform and the Trainer searches the built-in Trainer's
    settings (components/tuning/tuner.py), or runs the module's tuner_fn in TFX's Tuner
    (components/tuning/module_tuner.py); the Trainer trains with its best trial's values. `tuning_dir` keeps its
    Optuna study across runs (a killed tuning resumes); "" keeps it in the step's output.
    """
    if baseline_source not in BASELINE_SOURCES:
        raise ValueError(f"baseline_source must be one of {BASELINE_SOURCES}, got '{baseline_source}'")
    model_base = f"{serving_dir}/{model_name}"
    output_config = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=split.train_buckets),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=split.eval_buckets),
            ]
        )
    )
    # CsvExampleGen takes no custom_config; its base class does, and runs our checking executor.
    example_gen = FileBasedExampleGen(
        input_base=data_root,
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern=names.CSV_PATTERN)]
        ),
        output_config=output_config,
        custom_config=csv_input.make_example_gen_config(schema_path, features.label, schema_text=schema_text),
        custom_executor_spec=executor_spec.BeamExecutorSpec(csv_input.Executor),
    ).with_id(names.EXAMPLE_GEN)
    schema_gen = EmbeddedSchema(schema_text=schema_text) if schema_text else ImportSchemaGen(schema_file=schema_path)
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
    baseline_nodes = []
    baseline_statistics = baseline_blessing = None
    served = (
        ServedBaseline(model_base=model_base).with_id(names.SERVED_BASELINE) if baseline_source == "serving" else None
    )
    if served is not None:
        baseline_nodes = [served]
        if drift_check:
            baseline_statistics = served.outputs["statistics"]
    elif drift_check:
        baseline_resolver = Resolver(
            strategy_class=BlessedDataStatisticsStrategy,
            statistics=Channel(type=standard_artifacts.ExampleStatistics),
            model_blessing=Channel(type=standard_artifacts.ModelBlessing),
        ).with_id("blessed_data_statistics_resolver")
        baseline_nodes = [baseline_resolver]
        baseline_statistics = baseline_resolver.outputs["statistics"]
        baseline_blessing = baseline_resolver.outputs["model_blessing"]
    data_gate = DataGate(
        anomalies=example_validator.outputs["anomalies"],
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_gen.outputs["schema"],
        examples=example_gen.outputs["examples"],
        baseline_statistics=baseline_statistics,
        baseline_blessing=baseline_blessing,
        allowed_anomaly_types=(
            allowed_anomaly_types
            if isinstance(allowed_anomaly_types, RuntimeParameter)
            else ",".join(allowed_anomaly_types)
        ),
        serving_data_root=serving_data_root or "",
        serving_data_fingerprint=serving_data_fingerprint,
    ).with_id(names.DATA_GATE)

    feature_dict = features.to_dict()
    user_transform = user_module is not None and user_module.preprocessing_fn
    user_trainer = user_module is not None and user_module.run_fn
    transform = transform_lib.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        **({"module_file": user_module.path} if user_transform else {"preprocessing_fn": PREPROCESSING_FN}),
        # A pretrained checkpoint's vocabulary is read by path: its fingerprint makes a changed checkpoint a new
        # cache key (TFX keys Transform on its properties, not on the files they name).
        custom_config={
            "features": feature_dict,
            **({"pretrained_fingerprint": training.pretrained["fingerprint"]} if training.pretrained else {}),
        },
        # StatisticsGen and the gate have validated this data already; Transform's own pre- and post-transform
        # statistics and anomalies would be three more passes over it that nothing reads, unless the module
        # file asks for them (stats_options_updater_fn).
        disable_statistics=not (user_transform and user_module.stats_options_updater_fn),
        # The built-in Trainer transforms the rows it reads with the graph (and the Evaluator and the served
        # model do so anyway): writing every split transformed would cost a pass over all the data (43 us a
        # row). A user's run_fn gets the transformed examples, as TFX's contract has it.
        materialize=bool(user_trainer),
        # TFX reads an analyzer cache only from an `analyzer_cache` input, which this pipeline does not wire (a
        # run whose data did not change is cached whole by TFX): writing one would be Beam stages and files
        # that nothing reads.
        disable_analyzer_cache=True,
        force_tf_compat_v1=True,
        # The built-in analyzers on a sample of a larger training split (components/training/transform.py). Not a module
        # file's preprocessing_fn (it may count rows or list a label's classes), nor a multi-class label whose
        # classes come from Transform's vocabulary: a class left out of the sample would have no index.
        max_analyze_rows=(
            0
            if user_transform or (features.task == tasks.MULTICLASS and not features.label.classes)
            else training.transform_max_rows
        ),
    ).with_id(names.TRANSFORM)
    # Transform (and so everything after it) waits for the gate; a failed gate stops the run here.
    transform.add_upstream_node(data_gate)
    trainer_custom = {
        "features": feature_dict,
        **({} if user_trainer else {"raw_examples": True}),
        **training.custom_config(backup_root=trainer_backup_dir),
    }
    # 0: the Trainer counts its steps (--train-epochs passes over the training split; TFX passes None).
    train_args = train_args or trainer_pb2.TrainArgs(num_steps=training.train_steps or 0)
    eval_args = trainer_pb2.EvalArgs(num_steps=training.eval_steps or (presets.USER_EVAL_STEPS if user_trainer else 0))
    tuner = None
    if tuning is not None and tuning.tune:
        check_tuning(tuning, user_module, training, features)
    if tuning is not None and tuning.tune and user_module is not None and user_module.tuner_fn:
        # The module's own tuner_fn in TFX's Tuner, on what its run_fn reads (components/tuning/module_tuner.py). Not
        # imported otherwise: TFX's Tuner imports keras-tuner, which a run without a module file keeps out.
        from tfxflow.components.tuning import module_tuner

        tuner = module_tuner.Tuner(
            module_file=user_module.path,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            train_args=train_args,
            eval_args=eval_args,
            custom_config=trainer_custom,
        ).with_id(names.TUNER)
    elif tuning is not None and tuning.tune:
        task = features.task_spec
        objective = search_space.objective_metric(evaluation.for_task(task.name).metric, task.training_metrics)
        tuner = tuner_lib.Tuner(
            examples=example_gen.outputs["examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            custom_config=trainer_custom,
            space=tuning.space(training, features),
            objective=objective,
            maximize=not tasks.lower_is_better(objective),
            trials=tuning.tune_trials,
            time_budget_s=60.0 * tuning.tune_minutes,
            seed=tuning.seed(training),
            workers=tuning.workers(training),
            train_steps=training.train_steps or 0,
            eval_steps=training.eval_steps,
            study_dir=tuning_dir,
        ).with_id(names.TUNER)
    trainer = Trainer(
        **(
            # TFX's executor, and the built-in Trainer's record of the run (components/training/user_trainer.py).
            {
                "module_file": user_module.path,
                "custom_executor_spec": executor_spec.ExecutorClassSpec(user_trainer_lib.Executor),
            }
            if user_trainer
            else {"run_fn": RUN_FN}
        ),
        examples=transform.outputs["transformed_examples"] if user_trainer else example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=train_args,
        eval_args=eval_args,
        custom_config=trainer_custom,
        **({"hyperparameters": tuner.outputs["best_hyperparameters"]} if tuner is not None else {}),
    ).with_id(names.TRAINER)
    # A model of the user's run_fn: TFMA takes its only output; it needs no signature but serving_default.
    model_eval_config = eval_config(
        evaluation,
        features,
        prediction_key="" if user_trainer else None,
        model_type="" if user_trainer else tfma.TF_GENERIC,
    )
    required_signatures = (
        (names.SERVING_SIGNATURE,)
        if user_trainer or not features.feature_columns
        else (names.SERVING_SIGNATURE, names.RAW_SIGNATURE)
    )
    model_resolvers = []
    if served is not None:
        baseline_model = served.outputs["model"]
    else:
        model_resolver = Resolver(
            strategy_class=LatestBlessedModelStrategy,
            model=Channel(type=standard_artifacts.Model),
            model_blessing=Channel(type=standard_artifacts.ModelBlessing),
        ).with_id("latest_blessed_model_resolver")
        model_resolvers = [model_resolver]
        baseline_model = model_resolver.outputs["model"]
    # TFX's Evaluator on a bounded sample of a large eval split; drops a baseline that holds no model
    # (ServedBaseline before the first push).
    evaluator = evaluator_lib.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline_model,
        eval_config=model_eval_config,
        max_eval_rows=evaluation.max_rows,
        warm_serving_probe=warm_serving_probe,
    ).with_id(names.EVALUATOR)
    # A version appears complete or not at all, with its training data's statistics; the newest
    # `keep_versions` are kept (components/serving/pusher.py).
    # The candidate loads and answers in a TensorFlow-only process as the Evaluator's model did, within the
    # latency bound (components/serving/serving_check.py); the Pusher checks its InfraBlessing.
    serving_check = serving_check_lib.ServingCheck(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        features=feature_dict,
        eval_config=model_eval_config,
        max_latency_ms=evaluation.max_latency_ms,
        required_signatures=required_signatures,
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
            examples=example_gen.outputs["examples"],
        ).with_id(names.EDGE_EXPORT)
    pusher = pusher_lib.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],
        base_directory=model_base,
        keep_versions=keep_versions,
        statistics=statistics_gen.outputs["statistics"],
        edge_model=edge_export.outputs["edge_model"] if edge_export is not None else None,
    ).with_id(names.PUSHER)
    tracking_nodes = []
    if tracking is not None:
        from tfxflow.components.tracking import mlflow_auth

        # Exec properties land in ML Metadata, the run log and a compiled spec: credentials travel in the
        # environment instead (tracking_store.resolve_tracking_uri moves them there).
        if mlflow_auth.split_credentials(tracking.uri)[1] is not None:
            raise ValueError(
                f"tracking URI {mlflow_auth.redact_uri(tracking.uri)} carries credentials: pass them in "
                f"${mlflow_auth.USERNAME_ENV}/${mlflow_auth.PASSWORD_ENV} instead"
            )
        outage = dict(tracking_mode=tracking.mode, tracking_wait_s=float(tracking.wait_s), outbox=tracking.outbox)
        start = tracking_lib.MlflowStart(
            tracking_uri=tracking.uri,
            experiment=tracking.experiment,
            run_key=tracking.run_key,
            pipeline_name=pipeline_name,
            params_json=json.dumps(tracking.params, sort_keys=True),
            **outage,
        ).with_id(names.MLFLOW_START)
        # No work starts before the run is tracked; the key parameter changes every run, so it never caches.
        example_gen.add_upstream_node(start)
        for node in baseline_nodes:
            node.add_upstream_node(start)
        record = tracking_lib.MlflowRecord(
            run_id=start.outputs["run_id"],
            anomalies_found=data_gate.outputs["anomalies_found"],
            anomalies=example_validator.outputs["anomalies"],
            statistics=statistics_gen.outputs["statistics"],
            schema=schema_gen.outputs["schema"],
            model_run=trainer.outputs["model_run"],
            model=trainer.outputs["model"],
            evaluation=evaluator.outputs["evaluation"],
            blessing=evaluator.outputs["blessing"],
            serving_check=serving_check.outputs["blessing"],
            **({"tuning": tuner.outputs["tuner_results"]} if tuner is not None else {}),
            **({"edge_model": edge_export.outputs["edge_model"]} if edge_export is not None else {}),
            tracking_uri=tracking.uri,
            experiment=tracking.experiment,
            run_key=tracking.run_key,
            **outage,
        ).with_id(names.MLFLOW_RECORD)
        pusher.add_upstream_node(record)  # nothing is pushed that was not recorded first
        finish = tracking_lib.MlflowFinish(
            run_id=start.outputs["run_id"],
            model=trainer.outputs["model"],
            pushed_model=pusher.outputs["pushed_model"],
            tracking_uri=tracking.uri,
            registered_model_name=model_name,
            experiment=tracking.experiment,
            run_key=tracking.run_key,
            **outage,
        ).with_id(names.MLFLOW_FINISH)
        tracking_nodes = [start, record, finish]
    return Pipeline(
        pipeline_name=pipeline_name,
        pipeline_root=pipeline_root,
        components=[
            *tracking_nodes[:1],
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            *baseline_nodes,
            data_gate,
            transform,
            *([tuner] if tuner is not None else []),
            trainer,
            *model_resolvers,
            evaluator,
            serving_check,
            *([edge_export] if edge_export is not None else []),
            *tracking_nodes[1:2],
            pusher,
            *tracking_nodes[2:],
        ],
        enable_cache=enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=(beam_pipeline_args or []) + (list(TEXT_BEAM_ARGS) if features.text else []),
    )
