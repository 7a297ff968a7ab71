"""MLflow tracking components: a pipeline run and an MLflow run are the same thing seen from two sides.

The store is chosen and checked at the edge (pipeline/tracking_store.py). `MlflowStart`, the first component,
creates the MLflow run tagged with the pipeline run's key (a parameter that changes every run, so it is
never cached) and hands its id on; `MlflowRecord`, after the Evaluator and before the Pusher, logs what the
artifacts say (data, training curves, evaluation per slice, the gate's count) even when the Trainer was
cached; `MlflowFinish`, after the Pusher, records the push and closes the run. The Trainer knows nothing of
MLflow, which keeps its cache intact; nothing is autologged (mlflow/mlflow#9600).

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.
"""

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import re
import tempfile
from typing import Any, Dict, List, Mapping, Optional, TypedDict

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from tfxflow.components import names

RUN_KEY_TAG = "tfxflow.pipeline_run"
PIPELINE_TAG = "tfxflow.pipeline"


@dataclasses.dataclass(frozen=True)
class TrackingSettings:
    """Where and how a pipeline run is tracked; `run_key` is unique to the pipeline run."""

    uri: str
    experiment: str
    run_key: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # nested dicts are flattened


def flatten(params: Mapping[str, Any], prefix: str = "") -> Dict[str, str]:
    """{"training": {"batch_size": 256}} -> {"training.batch_size": "256"}; MLflow params are strings."""
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return flat


def metric_name(text: str) -> str:
    """A valid MLflow metric name: letters, digits, _ - . / and spaces."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", text)


TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"


def resolve_uri(uri: str) -> str:
    """`uri`, or when empty the container's $MLFLOW_TRACKING_URI (on Kubeflow the URI, and any credentials,
    come from the pod's environment, never from the compiled pipeline). A user:password in it moves into
    $MLFLOW_TRACKING_USERNAME/$MLFLOW_TRACKING_PASSWORD, where MLflow's client reads them, so that no error
    message or log line of MLflow's shows them."""
    from tfxflow.components import mlflow_auth

    uri = uri or os.environ.get(TRACKING_URI_ENV, "")
    if not uri:
        raise ValueError(
            f"no MLflow tracking URI: the tracking_uri parameter is empty and ${TRACKING_URI_ENV} "
            "is not set in this container"
        )
    return mlflow_auth.adopt_uri_credentials(uri)


def client(uri: str):
    """An MLflow client bound to `uri` (no global state: every component shares LocalDagRunner's process)."""
    from mlflow import MlflowClient

    uri = resolve_uri(uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def find_run(mlflow_client, experiment: str, run_key: str):
    """The MLflow run of the pipeline run `run_key`, or None."""
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        return None
    runs = mlflow_client.search_runs(
        [found.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{run_key}'", max_results=1
    )
    return runs[0] if runs else None


def artifact_location(uri: str) -> Optional[str]:
    """Artifacts of an embedded SQLite store live beside it (MLflow's default is ./mlruns under the current
    folder, wherever the run was started); a server chooses its own."""
    uri = resolve_uri(uri)
    if not uri.startswith("sqlite:///"):
        return None
    return "file://" + os.path.join(os.path.dirname(uri[len("sqlite:///") :]), "artifacts")


def start_run(settings: TrackingSettings, pipeline_name: str) -> str:
    """Creates (or, on a retry, finds) the MLflow run of this pipeline run and logs its params."""
    from mlflow.entities import Param

    mlflow_client = client(settings.uri)
    existing = find_run(mlflow_client, settings.experiment, settings.run_key)
    if existing is not None:
        return existing.info.run_id
    experiment = mlflow_client.get_experiment_by_name(settings.experiment)
    experiment_id = (
        experiment.experiment_id
        if experiment
        else mlflow_client.create_experiment(settings.experiment, artifact_location=artifact_location(settings.uri))
    )
    run = mlflow_client.create_run(
        experiment_id, run_name=settings.run_key, tags={RUN_KEY_TAG: settings.run_key, PIPELINE_TAG: pipeline_name}
    )
    params = [Param(k, v[:6000]) for k, v in sorted(flatten(settings.params).items())]
    for i in range(0, len(params), 100):
        mlflow_client.log_batch(run.info.run_id, params=params[i : i + 100])
    return run.info.run_id


def finish_run(uri: str, experiment: str, run_key: str, status: str, error: str = "") -> Optional[str]:
    """Marks the run of `run_key` FINISHED or FAILED (with the error as a tag); returns its id."""
    mlflow_client = client(uri)
    run = find_run(mlflow_client, experiment, run_key)
    if run is None:
        return None
    if error:
        mlflow_client.set_tag(run.info.run_id, "tfxflow.error", error[:5000])
    mlflow_client.set_terminated(run.info.run_id, status=status)
    return run.info.run_id


def run_key_for(run_key: str, output_uri: str) -> str:
    """`run_key`, or where the orchestrator left it empty or unresolved (a `{{$.pipeline_job_uuid}}` that a KFP
    backend older than 2.5 passes on verbatim) the folder of this execution's output, which is unique to the
    pipeline run and the same when a failed run is retried."""
    if run_key and "{{" not in run_key:
        return run_key
    import hashlib

    folder = os.path.dirname(output_uri.rstrip("/"))
    return "uri-" + hashlib.sha256(folder.encode()).hexdigest()[:16]


@component
def MlflowStart(  # noqa: N802 (TFX's function components are named like classes)
    tracking_uri: Parameter[str],
    experiment: Parameter[str],
    run_key: Parameter[str],
    pipeline_name: Parameter[str],
    run_id: OutputArtifact[standard_artifacts.String],
    params_json: Parameter[str] = "{}",
) -> None:
    """Creates the MLflow run of this pipeline run (tag `tfxflow.pipeline_run` = `run_key`), logs the params."""
    settings = TrackingSettings(tracking_uri, experiment, run_key_for(run_key, run_id.uri), json.loads(params_json))
    run_id.value = start_run(settings, pipeline_name)


def split_rows(statistics_uri: str) -> Dict[str, int]:
    """Rows per split, from StatisticsGen's output."""
    import tensorflow_data_validation as tfdv

    rows = {}
    for entry in sorted(fileio.listdir(statistics_uri)):
        name = entry.rstrip("/")
        path = os.path.join(statistics_uri, name, "FeatureStats.pb")
        if names.split_of(name) and fileio.exists(path):
            rows[names.split_of(name)] = int(tfdv.load_stats_binary(path).datasets[0].num_examples)
    return rows


def metric_label(key, class_names=()) -> str:
    """A TFMA metric key's name; a per-class metric (sub-key `class_id`) as `f1.<class name>`."""
    from tfxflow.components.eval_metrics import class_metric_name

    class_id = key.sub_key.class_id.value if key.HasField("sub_key") and key.sub_key.HasField("class_id") else None
    return class_metric_name(key.name, class_id, class_names)


def evaluation_metrics(evaluation_uri: str, class_names=()) -> Dict[str, Dict[str, float]]:
    """{slice name: {metric: value}} of the candidate model; the overall slice is "overall". `class_names`: a
    multi-class model's classes in index order, which name its per-class metrics."""
    import tensorflow_model_analysis as tfma

    result: Dict[str, Dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        keys = metrics.slice_key.single_slice_keys
        name = (
            "overall"
            if not keys
            else ",".join(
                f"{k.column}={k.bytes_value.decode() if k.HasField('bytes_value') else k.int64_value or k.float_value}"
                for k in keys
            )
        )
        for kv in metrics.metric_keys_and_values:
            if kv.key.is_diff or kv.key.model_name == "baseline" or not kv.value.HasField("double_value"):
                continue
            result.setdefault(name, {})[metric_label(kv.key, class_names)] = float(kv.value.double_value.value)
    return result


def confusion_matrix(evaluation_uri: str, model_name: str = ""):
    """A multi-class model's confusion matrix of the overall slice (TFMA's, at the top-scoring class) as
    ({(actual class id, predicted class id): rows}), or None; predicted -1: no class scored above 0."""
    import tensorflow_model_analysis as tfma

    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for kv in metrics.metric_keys_and_values:
            if kv.key.model_name != model_name or not kv.value.HasField("multi_class_confusion_matrix_at_thresholds"):
                continue
            matrix = kv.value.multi_class_confusion_matrix_at_thresholds.matrices[0]
            return {(e.actual_class_id, e.predicted_class_id): float(e.num_weighted_examples) for e in matrix.entries}
    return None


def overall_metrics(evaluation_uri: str):
    """(candidate, baseline) metrics of the overall slice, from the Evaluator's output (per-class metrics are
    named `f1.class_<id>` here: `evaluation_metrics` names them by class)."""
    import tensorflow_model_analysis as tfma

    candidate: Dict[str, float] = {}
    baseline: Dict[str, float] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for kv in metrics.metric_keys_and_values:
            if kv.key.is_diff or not kv.value.HasField("double_value"):
                continue
            target = baseline if kv.key.model_name == "baseline" else candidate
            target[metric_label(kv.key)] = float(kv.value.double_value.value)
    return candidate, baseline


def blessing_failures(evaluation_uri: str, overall=None) -> List[str]:
    """Each threshold the candidate failed, in words with the values: why the Evaluator did not bless it.
    `overall`: `overall_metrics(evaluation_uri)` when the caller has it already."""
    import tensorflow_model_analysis as tfma

    if not fileio.exists(os.path.join(evaluation_uri, "validations.tfrecord")):
        return []
    metrics, baseline = overall or overall_metrics(evaluation_uri)
    result = tfma.load_validation_result(evaluation_uri)
    reasons = []
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            name = failure.metric_key.name
            value = failure.metric_value.double_value.value
            threshold = failure.metric_threshold
            if failure.metric_key.is_diff and threshold.HasField("change_threshold"):
                allowed = threshold.change_threshold.absolute.value
                compared = (
                    f"{metrics[name]:.4f} vs. {baseline[name]:.4f} for the last blessed model"
                    if name in metrics and name in baseline
                    else "vs. the last blessed model"
                )
                # Higher is better: the allowed change is -max_regression; lower is better (rmse): +max_regression.
                reasons.append(
                    f"{name} {compared}: a change of {value:+.4f}, beyond the allowed {allowed:+.4f} (--max-regression)"
                )
            elif threshold.value_threshold.HasField("lower_bound"):
                reasons.append(
                    f"{name} {value:.4f} is below the minimum {threshold.value_threshold.lower_bound.value:.4f} "
                    "(--blessing-threshold)"
                )
            elif threshold.value_threshold.HasField("upper_bound"):
                reasons.append(
                    f"{name} {value:.4f} is above the maximum {threshold.value_threshold.upper_bound.value:.4f} "
                    "(--blessing-threshold)"
                )
            else:
                reasons.append(f"{name} {value:.4f} failed its threshold")
    if not reasons and result.missing_thresholds:
        reasons.append("a threshold could not be computed (missing metric or baseline)")
    return reasons


class RecordResult(TypedDict):
    blessed: int


@component
def MlflowRecord(  # noqa: N802 (TFX's function components are named like classes)
    run_id: str,
    anomalies_found: int,
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    model_run: InputArtifact[standard_artifacts.ModelRun],
    model: InputArtifact[standard_artifacts.Model],
    evaluation: InputArtifact[standard_artifacts.ModelEvaluation],
    blessing: InputArtifact[standard_artifacts.ModelBlessing],
    serving_check: InputArtifact[standard_artifacts.InfraBlessing],
    tracking_uri: Parameter[str],
) -> RecordResult:
    """Logs rows per split, the gate's anomaly count and ExampleValidator's report, the Trainer's hardware
    and per-epoch curves, the Evaluator's metrics overall and per slice, the serving check's figures and
    verdict, the schema and summaries as artifacts, and lineage tags."""
    import tempfile

    from mlflow.entities import Metric, Param

    mlflow_client = client(tracking_uri)
    metrics: List[Metric] = [Metric("data.anomalies", anomalies_found, 0, 0)]
    metrics += [Metric(f"data.rows.{split}", count, 0, 0) for split, count in split_rows(statistics.uri).items()]
    info_path = os.path.join(model_run.uri, names.TRAINING_INFO_FILE)
    info = {}
    if fileio.exists(info_path):  # a Trainer that keeps no record (another executor) has no curves to log
        with fileio.open(info_path, "r") as f:
            info = json.load(f)
    for name, values in info.pop("history", {}).items():
        series = f"val.{name[4:]}" if name.startswith("val_") else f"train.{name}"
        metrics += [Metric(series, value, 0, epoch) for epoch, value in enumerate(values, start=1)]
    # The baseline model's values beside the candidate's, so runs can be compared with what they were judged against
    # (overall metrics only: the baseline's classes can be in another order).
    _, baseline = overall_metrics(evaluation.uri)
    metrics += [Metric(f"baseline.{name}", value, 0, 0) for name, value in baseline.items() if "." not in name]
    from tfxflow.components import model_info

    described = model_info.describe(model.uri)
    evaluation_by_slice = evaluation_metrics(evaluation.uri, described.get("classes") or ())
    for slice_name, values in evaluation_by_slice.items():
        prefix = "eval" if slice_name == "overall" else f"eval_slice.{metric_name(slice_name)}"
        metrics += [Metric(f"{prefix}.{name}", value, 0, 0) for name, value in values.items()]
    if evaluation.has_custom_property("eval_sample"):  # the Evaluator judged a sample of a large split
        for split, sample in json.loads(evaluation.get_string_custom_property("eval_sample")).items():
            metrics += [
                Metric(f"eval_sample.{split}.rows", sample["rows"], 0, 0),
                Metric(f"eval_sample.{split}.sampled", sample["sampled"], 0, 0),
            ]
    from tfxflow.components import serving_check as serving_check_lib

    served = serving_check_lib.read_result(serving_check.uri) or {}
    metrics += [Metric(f"serving.{name}", value, 0, 0) for name, value in serving_check_lib.figures(served).items()]
    blessed = int(blessing.get_int_custom_property("blessed") == 1)
    params = [
        Param(f"trainer.{k}", json.dumps(v) if isinstance(v, (list, dict)) else str(v))
        for k, v in sorted(info.items())
        if k != "backup_dir"
    ]
    for i in range(0, len(metrics), 500):
        mlflow_client.log_batch(run_id, metrics=metrics[i : i + 500], params=params if i == 0 else [])
    tags = {
        "tfxflow.task": described["task"],
        "tfxflow.blessed": "yes" if blessed else "no",
        "tfxflow.model_uri": model.uri,
        "tfxflow.model_mlmd_id": str(model.id),
        "tfxflow.evaluation_uri": evaluation.uri,
        "tfxflow.statistics_uri": statistics.uri,
        "tfxflow.schema_uri": schema.uri,
    }
    if not blessed:
        from tfxflow.components.pusher import ROLLED_BACK

        revoked = blessing.get_string_custom_property(ROLLED_BACK) if blessing.has_custom_property(ROLLED_BACK) else ""
        tags["tfxflow.not_blessed_because"] = (
            f"blessing revoked: this model was {revoked}"
            if revoked
            else "; ".join(blessing_failures(evaluation.uri)) or "unknown"
        )
    tags["tfxflow.serving_check"] = "passed" if served.get("blessed") else "failed"
    if served.get("reasons"):
        tags["tfxflow.serving_check_failed_because"] = "; ".join(served["reasons"])[:5000]
    for key, value in tags.items():
        mlflow_client.set_tag(run_id, key, value)
    with tempfile.TemporaryDirectory() as folder:
        for name, content in (
            ("evaluation.json", evaluation_by_slice),
            (names.TRAINING_INFO_FILE, info),
            (serving_check_lib.RESULT_FILE, served),
        ):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2)
            mlflow_client.log_artifact(run_id, os.path.join(folder, name), "summaries")
        with (
            fileio.open(os.path.join(schema.uri, "schema.pbtxt"), "r") as src,
            open(os.path.join(folder, "schema.pbtxt"), "w", encoding="utf-8") as dst,
        ):
            dst.write(src.read())
        mlflow_client.log_artifact(run_id, os.path.join(folder, "schema.pbtxt"), "data")
        from tfxflow.components import gate

        found = gate.read_anomalies(anomalies.uri)
        with open(os.path.join(folder, "anomalies.txt"), "w", encoding="utf-8") as f:
            f.write("".join(f"{a}\n" for a in found) or "no anomalies\n")
        mlflow_client.log_artifact(run_id, os.path.join(folder, "anomalies.txt"), "data")
    return {"blessed": blessed}


CHAMPION_ALIAS = "champion"


def log_serving_model(uri: str, run_id: str, saved_model_dir: str, registered_name: str) -> Any:
    """Logs the pushed SavedModel in MLflow's TensorFlow flavour (a text model: the pyfunc flavour whose loader
    registers TF Text's ops, components/tf_text_pyfunc.py) and registers it as a new version of
    `registered_name`. Input: serialized tf.Examples (without the label) as URL-safe base64 strings
    (`base64.urlsafe_b64encode`), so `mlflow models serve` takes them as JSON; output: the task's prediction
    (probabilities [n, 1], a multi-class model's scores [n, K] in its classes' order, a regression's
    predictions [n, 1]; a user's own model's only output)."""
    import mlflow
    import numpy as np
    import tensorflow as tf
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from tfxflow.components import model_info
    from tfxflow.components.model import text

    described = model_info.describe(saved_model_dir)
    needs_text = text.load_ops_for(saved_model_dir)
    loaded_outputs = tf.saved_model.load(saved_model_dir).signatures[names.SERVING_SIGNATURE].structured_outputs
    key = described["prediction_key"] or next(iter(sorted(loaded_outputs)))
    width = len(described["classes"]) if described["task"] == "multiclass" and described["classes"] else 1
    if not described["prediction_key"]:
        width = -1  # a user's model: its output's width is its own

    class ServingModule(tf.Module):
        def __init__(self, path: str):
            super().__init__()
            text.load_ops_for(path)
            self.saved_model = tf.saved_model.load(path)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples_b64")])
        def __call__(self, examples_b64):
            # JSON cannot carry raw bytes and MLflow's scoring server does not decode {"b64": ...}.
            examples = tf.io.decode_base64(examples_b64)
            return self.saved_model.signatures[names.SERVING_SIGNATURE](examples=examples)[key]

    # Unnamed tensors: MLflow's TF pyfunc hands the module a plain array of serialized tf.Examples.
    signature = ModelSignature(
        inputs=Schema([TensorSpec(np.dtype(object), (-1,))]),
        outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, width))]),
    )
    # Explicit requirements: MLflow's inference loads the model once more in a subprocess (~10 s).
    dists = ("tensorflow", "tensorflow-transform") + (("tensorflow-text",) if needs_text else ())
    requirements = [f"{dist}=={importlib.metadata.version(dist)}" for dist in dists]
    common = dict(
        signature=signature,
        registered_model_name=registered_name,
        pip_requirements=requirements,
        metadata={"task": described["task"], "classes": described["classes"], "output": key},
    )
    # The fluent API is the only way to log a flavour; point it at this run, and put it back after.
    with fluent_api_at(uri):
        with mlflow.start_run(run_id=run_id):
            if not needs_text:
                return mlflow.tensorflow.log_model(ServingModule(saved_model_dir), name="model", **common)
            # MLflow's TensorFlow flavour cannot load a graph of TF Text's ops in a fresh process: the pyfunc
            # flavour with a loader that registers them first (components/tf_text_pyfunc.py).
            from tfxflow.components import tf_text_pyfunc

            with tempfile.TemporaryDirectory() as scratch:
                module_dir = os.path.join(scratch, "saved_model")
                tf.saved_model.save(ServingModule(saved_model_dir), module_dir)
                return mlflow.pyfunc.log_model(
                    name="model",
                    loader_module=tf_text_pyfunc.__name__.rsplit(".", 1)[-1],
                    data_path=module_dir,
                    code_paths=[tf_text_pyfunc.__file__],
                    **common,
                )


FLUENT_URI_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


@contextlib.contextmanager
def fluent_api_at(uri: str):
    """Points MLflow's process-wide fluent API (tracking and registry) at `uri`, then puts back both URIs and
    the variables MLflow's setters also write ($MLFLOW_TRACKING_URI, $MLFLOW_REGISTRY_URI): later code in
    this process, another component of LocalDagRunner's included, resolves URIs as before."""
    import mlflow

    saved_env = {key: os.environ.get(key) for key in FLUENT_URI_ENV}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        # Unset, MLflow resolves both from the variables again; its setters write them too, so a URI set
        # before this call is in them and comes back.
        mlflow.set_tracking_uri(None)
        mlflow.set_registry_uri(None)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def served_version(mlflow_client, registered_name: str, pushed_version: str) -> Optional[str]:
    """The registered version already recorded for the pushed (TF Serving) version, if any."""
    from mlflow.exceptions import MlflowException

    try:
        versions = mlflow_client.search_model_versions(f"name='{registered_name}'")
    except MlflowException:
        return None
    return next((v.version for v in versions if v.tags.get("tfxflow.pushed_version") == pushed_version), None)


@component
def MlflowFinish(  # noqa: N802 (TFX's function components are named like classes)
    run_id: str,
    model: InputArtifact[standard_artifacts.Model],
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    tracking_uri: Parameter[str],
    registered_model_name: Parameter[str],
) -> None:
    """Records whether and where the model was pushed; a pushed model is logged in MLflow's TensorFlow
    flavour, registered as a new version of `registered_model_name`, and the `champion` alias moves to it
    (the version being served). Closes the run."""
    mlflow_client = client(tracking_uri)
    pushed = pushed_model.get_int_custom_property("pushed") == 1
    mlflow_client.set_tag(run_id, "tfxflow.pushed", "yes" if pushed else "no")
    from tfxflow.components.pusher import AFTER_ROLLBACK, NOT_PUSHED_REASON

    for key, tag in ((NOT_PUSHED_REASON, "tfxflow.not_pushed_because"), (AFTER_ROLLBACK, "tfxflow.after_rollback")):
        if pushed_model.has_custom_property(key):
            mlflow_client.set_tag(run_id, tag, pushed_model.get_string_custom_property(key)[:5000])
    if pushed:
        version = pushed_model.get_string_custom_property("pushed_version")
        destination = pushed_model.get_string_custom_property("pushed_destination")
        mlflow_client.set_tag(run_id, "tfxflow.pushed_version", version)
        mlflow_client.set_tag(run_id, "tfxflow.pushed_destination", destination)
        registered = served_version(mlflow_client, registered_model_name, version)
        if registered is None:  # a cached Pusher hands on a push that is registered already
            # The SavedModel: `Format-Serving/` in TFX's layout, the artifact's root where it was flattened.
            saved_model = os.path.join(model.uri, "Format-Serving")
            if not fileio.exists(saved_model):
                saved_model = model.uri
            info = log_serving_model(resolve_uri(tracking_uri), run_id, saved_model, registered_model_name)
            registered = info.registered_model_version
            for key, value in (("tfxflow.pushed_version", version), ("tfxflow.pushed_destination", destination)):
                mlflow_client.set_model_version_tag(registered_model_name, str(registered), key, value)
        mlflow_client.set_registered_model_alias(registered_model_name, CHAMPION_ALIAS, str(registered))
        mlflow_client.set_tag(run_id, "tfxflow.registered_version", str(registered))
    mlflow_client.set_terminated(run_id, status="FINISHED")
