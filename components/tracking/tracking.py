"""MLflow tracking components: a pipeline run and an MLflow run are the same thing seen from two sides.

The store is chosen and checked at the edge (pipeline/tracking_store.py). `MlflowStart`, the first component,
creates the MLflow run tagged with the pipeline run's key (a parameter that changes every run, so it is
never cached) and hands its id on; `MlflowRecord`, after the Evaluator and before the Pusher, logs what the
artifacts say (data, training curves, evaluation per slice, the gate's count) even when the Trainer was
cached; `MlflowFinish`, after the Pusher, records the push and closes the run. The Trainer knows nothing of
MLflow, which keeps its cache intact; nothing is autologged (mlflow/mlflow#9600).

What the components send is made elsewhere: the MLflow run and its operations in mlflow_runs.py, what the
artifacts say in artifact_readers.py, the registered model in model_registry.py.

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.
"""

import json
import os
from typing import Any, Dict, List, TypedDict

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from tfxflow.components import names
from tfxflow.components.edge import edge
from tfxflow.components.model import model_info
from tfxflow.components.serving import serving_check as serving_check_lib
from tfxflow.components.tracking import tracking_outbox as outbox_lib
from tfxflow.components.tracking.artifact_readers import (
    blessing_failures,
    edge_figures,
    edge_records,
    evaluation_metrics,
    overall_metrics,
    split_rows,
    tuning_records,
)
from tfxflow.components.tracking.mlflow_runs import (
    Tracker,
    TrackingSettings,
    metric_name,
    now_ms,
    run_key_for,
    start_run,
)
from tfxflow.components.validation import gate


@component
def MlflowStart(  # noqa: N802 (TFX's function components are named like classes)
    tracking_uri: Parameter[str],
    experiment: Parameter[str],
    run_key: Parameter[str],
    pipeline_name: Parameter[str],
    run_id: OutputArtifact[standard_artifacts.String],
    params_json: Parameter[str] = "{}",
    tracking_mode: Parameter[str] = "required",
    tracking_wait_s: Parameter[float] = outbox_lib.DEFAULT_WAIT_S,
    outbox: Parameter[str] = "",
) -> None:
    """Creates the MLflow run of this pipeline run (tag `tfxflow.pipeline_run` = `run_key`), logs the params."""
    settings = TrackingSettings(
        tracking_uri,
        experiment,
        run_key_for(run_key, run_id.uri),
        json.loads(params_json),
        tracking_mode,
        tracking_wait_s,
        outbox,
    )
    run_id.value = start_run(settings, pipeline_name)


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
    tuning: InputArtifact[standard_artifacts.TunerResults] = None,
    edge_model: InputArtifact[standard_artifacts.Model] = None,
    experiment: Parameter[str] = "",
    run_key: Parameter[str] = "",
    tracking_mode: Parameter[str] = "required",
    tracking_wait_s: Parameter[float] = outbox_lib.DEFAULT_WAIT_S,
    outbox: Parameter[str] = "",
) -> RecordResult:
    """Logs rows per split, the gate's anomaly count and ExampleValidator's report, the Trainer's hardware
    and per-epoch curves, the Evaluator's metrics overall and per slice, the serving check's figures and
    verdict, the schema and summaries as artifacts, and lineage tags. `run_id` is "" where MlflowStart's
    start waits in the outbox (the run is found by `experiment` and `run_key` then)."""
    import tempfile

    from mlflow.entities import Metric

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

    served = serving_check_lib.read_result(serving_check.uri) or {}
    metrics += [Metric(f"serving.{name}", value, 0, 0) for name, value in serving_check_lib.figures(served).items()]
    edge_result, edge_files = edge_records(edge_model)
    metrics += [Metric(name, value, 0, 0) for name, value in edge_figures(edge_result).items()]
    blessed = int(blessing.get_int_custom_property("blessed") == 1)
    params = [
        (f"trainer.{k}", json.dumps(v) if isinstance(v, (list, dict)) else str(v))
        for k, v in sorted(info.items())
        if k != "backup_dir"
    ]
    ops: List[Dict[str, Any]] = [
        {
            "op": "log_batch",
            "metrics": [(m.key, m.value, m.timestamp, m.step) for m in metrics[i : i + 500]],
            "params": params if i == 0 else [],
        }
        for i in range(0, len(metrics), 500)
    ]
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
        # lazy: it imports TFMA, TFDV and tf.Transform
        from tfxflow.components.serving.pusher import ROLLED_BACK

        revoked = blessing.get_string_custom_property(ROLLED_BACK) if blessing.has_custom_property(ROLLED_BACK) else ""
        tags["tfxflow.not_blessed_because"] = (
            f"blessing revoked: this model was {revoked}"
            if revoked
            else "; ".join(blessing_failures(evaluation.uri)) or "unknown"
        )
    tags["tfxflow.serving_check"] = "passed" if served.get("blessed") else "failed"
    if served.get("reasons"):
        tags["tfxflow.serving_check_failed_because"] = "; ".join(served["reasons"])[:5000]
    if tuning is not None:
        tuned_metrics, tuned_params, tuned_tags, trial_ops = tuning_records(tuning.uri)
        ops[0]["params"] = list(ops[0]["params"]) + tuned_params
        ops[0]["metrics"] = list(ops[0]["metrics"]) + tuned_metrics
        tags.update(tuned_tags)
        ops += trial_ops
    if edge_result is not None:
        tags["tfxflow.edge"] = edge.summary_line(edge_result)[:5000]
    ops.append({"op": "set_tags", "tags": tags})
    ops += [{"op": "log_artifact", "path": path, "artifact_path": "edge"} for path in edge_files]
    with tempfile.TemporaryDirectory() as folder:
        for name, content in (
            ("evaluation.json", evaluation_by_slice),
            (names.TRAINING_INFO_FILE, info),
            (serving_check_lib.RESULT_FILE, served),
        ):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2)
            ops.append({"op": "log_artifact", "path": os.path.join(folder, name), "artifact_path": "summaries"})
        with (
            fileio.open(os.path.join(schema.uri, "schema.pbtxt"), "r") as src,
            open(os.path.join(folder, "schema.pbtxt"), "w", encoding="utf-8") as dst,
        ):
            dst.write(src.read())
        ops.append({"op": "log_artifact", "path": os.path.join(folder, "schema.pbtxt"), "artifact_path": "data"})

        found = gate.read_anomalies(anomalies.uri)
        with open(os.path.join(folder, "anomalies.txt"), "w", encoding="utf-8") as f:
            f.write("".join(f"{a}\n" for a in found) or "no anomalies\n")
        ops.append({"op": "log_artifact", "path": os.path.join(folder, "anomalies.txt"), "artifact_path": "data"})
        verdict = (
            f"{'blessed' if blessed else 'not blessed'} by the Evaluator and "
            f"{'passed' if served.get('blessed') else 'failed'} the serving check"
        )
        then = "the model is pushed" if blessed and served.get("blessed") else "the run is recorded"
        settings = TrackingSettings(tracking_uri, experiment, run_key, {}, tracking_mode, tracking_wait_s, outbox)
        Tracker.of(settings, run_id, names.MLFLOW_RECORD).send(
            ops,
            f"the model was trained and evaluated ({verdict}) but not pushed: with --tracking required no model "
            "is pushed unrecorded; run the same command once the server answers again: finished components come "
            f"from the cache and {then}",
        )
    return {"blessed": blessed}


@component
def MlflowFinish(  # noqa: N802 (TFX's function components are named like classes)
    run_id: str,
    model: InputArtifact[standard_artifacts.Model],
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    tracking_uri: Parameter[str],
    registered_model_name: Parameter[str],
    experiment: Parameter[str] = "",
    run_key: Parameter[str] = "",
    tracking_mode: Parameter[str] = "required",
    tracking_wait_s: Parameter[float] = outbox_lib.DEFAULT_WAIT_S,
    outbox: Parameter[str] = "",
) -> None:
    """Records whether and where the model was pushed; a pushed model is logged in MLflow's TensorFlow
    flavour, registered as a new version of `registered_model_name`, and the `champion` alias moves to it
    (the version being served). Closes the run."""
    pushed = pushed_model.get_int_custom_property("pushed") == 1
    tags = {"tfxflow.pushed": "yes" if pushed else "no"}
    # lazy: it imports TFMA, TFDV and tf.Transform
    from tfxflow.components.serving.pusher import AFTER_ROLLBACK, NOT_PUSHED_REASON

    for key, tag in ((NOT_PUSHED_REASON, "tfxflow.not_pushed_because"), (AFTER_ROLLBACK, "tfxflow.after_rollback")):
        if pushed_model.has_custom_property(key):
            tags[tag] = pushed_model.get_string_custom_property(key)[:5000]
    ops: List[Dict[str, Any]] = [{"op": "set_tags", "tags": tags}]
    meaning = "no model was pushed"
    if pushed:
        version = pushed_model.get_string_custom_property("pushed_version")
        destination = pushed_model.get_string_custom_property("pushed_destination")
        # The SavedModel: `Format-Serving/` in TFX's layout, the artifact's root where it was flattened.
        saved_model = os.path.join(model.uri, "Format-Serving")
        if not fileio.exists(saved_model):
            saved_model = model.uri
        tags.update({"tfxflow.pushed_version": version, "tfxflow.pushed_destination": destination})
        ops.append(
            {
                "op": "log_model",
                "saved_model": saved_model,
                "registered_name": registered_model_name,
                "pushed_version": version,
                "destination": destination,
            }
        )
        meaning = f"the model was recorded and pushed (version {version}: {destination})"
    # Its time goes with it: a close kept in the outbox and sent later still ends the run when it ended.
    ops.append({"op": "terminate", "status": "FINISHED", "time": now_ms()})
    settings = TrackingSettings(tracking_uri, experiment, run_key, {}, tracking_mode, tracking_wait_s, outbox)
    Tracker.of(settings, run_id, names.MLFLOW_FINISH).send(
        ops, f"{meaning}; its registration in MLflow and the close of the MLflow run wait"
    )
