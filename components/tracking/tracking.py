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
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple, TypedDict

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from tfxflow.components import names
from tfxflow.components.tracking import tracking_outbox as outbox_lib

RUN_KEY_TAG = "tfxflow.pipeline_run"
PIPELINE_TAG = "tfxflow.pipeline"
REPLACED_BY_TAG = "tfxflow.replaced_by"
# On a registered version that `tfxflow rollback` served again: the serving versions of its copies.
REPUBLISHED_AS_TAG = "tfxflow.republished_as"
ERROR_TAG = "tfxflow.error"


@dataclasses.dataclass(frozen=True)
class TrackingSettings:
    """Where and how a pipeline run is tracked; `run_key` is unique to the pipeline run. `mode`: what a server
    that stops answering during the run means (required: the run stops; optional: it goes on), `wait_s` how
    long each call waits for it, `outbox` the folder that keeps what could not be logged ("": nothing kept)."""

    uri: str
    experiment: str
    run_key: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # nested dicts are flattened
    mode: str = "required"
    wait_s: float = outbox_lib.DEFAULT_WAIT_S
    outbox: str = ""


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
    from tfxflow.components.tracking import mlflow_auth

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


def _start_run(mlflow_client, uri: str, experiment: str, run_key: str, op: Dict[str, Any]) -> str:
    """Creates (or, on a retry, finds) the MLflow run of pipeline run `run_key`, started at the op's time, and
    logs its params (again on a retry: the first try may have stopped before them)."""
    from mlflow.entities import Param

    existing = find_run(mlflow_client, experiment, run_key)
    if existing is not None:
        run_id = existing.info.run_id
    else:
        found = mlflow_client.get_experiment_by_name(experiment)
        experiment_id = (
            found.experiment_id
            if found
            else mlflow_client.create_experiment(experiment, artifact_location=artifact_location(uri))
        )
        run_id = mlflow_client.create_run(
            experiment_id,
            start_time=op.get("time"),
            run_name=run_key,
            tags={RUN_KEY_TAG: run_key, PIPELINE_TAG: op["pipeline"]},
        ).info.run_id
    logged = [Param(k, v[:6000]) for k, v in sorted(flatten(op.get("params", {})).items())]
    for i in range(0, len(logged), 100):
        mlflow_client.log_batch(run_id, params=logged[i : i + 100])
    return run_id


def _now_ms() -> int:
    return int(time.time() * 1000)


def start_run(settings: TrackingSettings, pipeline_name: str, component: str = names.MLFLOW_START) -> str:
    """The MLflow run of this pipeline run, created with its params; "" where the server did not answer and
    the start waits in the outbox (`optional` mode). In `required` mode that raises TrackingUnavailable, and
    nothing is kept: the run did no work to record."""
    tracker = Tracker.of(settings, component=component)
    meaning = "nothing was run: a run that requires tracking stops before any work when it cannot be tracked"
    try:
        tracker.send(
            [{"op": "start", "pipeline": pipeline_name, "params": dict(settings.params), "time": _now_ms()}], meaning
        )
    except outbox_lib.TrackingUnavailable as err:
        outbox_lib.remove(settings.outbox, settings.run_key)
        err.outbox_file = ""
        raise
    return tracker.run_id


def finish_run(settings: TrackingSettings, status: str, error: str = "", wait_s: Optional[float] = None) -> None:
    """Marks the run FINISHED or FAILED (with the error as a tag), or keeps that in the outbox where the server
    does not answer within `wait_s` (default: the settings'). Never raises for an unanswered server."""
    tags = {ERROR_TAG: error[:5000]} if error else {}
    tracker = Tracker.of(settings, component="the run's end", mode="optional")
    if wait_s is not None:
        tracker.wait_s = wait_s
    queued = outbox_lib.load(tracker.outbox, tracker.run_key)
    if queued and any(op["op"] == "terminate" for op in queued["ops"]):
        return  # MlflowFinish's own close waits in the outbox already
    try:
        tracker.send([{"op": "terminate", "status": status, "tags": tags, "time": _now_ms()}])
    except LookupError:  # the run never reached MLflow: nothing to close
        pass


# Operations that upload files: a request may take MLflow's own time limit.
_UPLOADS = ("log_artifact", "log_model")


@dataclasses.dataclass
class Tracker:
    """Sends one pipeline run's MLflow operations in order; where the server does not answer within `wait_s`,
    keeps them (and every later one of the run) in the outbox and, with mode "required", stops the run with
    TrackingUnavailable. An operation is a dict: start, log_batch, set_tags, log_artifact, log_model,
    describe_version, log_trial, terminate (see `_apply`)."""

    uri: str
    experiment: str
    run_key: str
    run_id: str = ""
    mode: str = "required"
    wait_s: float = outbox_lib.DEFAULT_WAIT_S
    outbox: str = ""
    component: str = ""
    closed: bool = False  # a terminate operation closed the run

    @classmethod
    def of(
        cls, settings: TrackingSettings, run_id: str = "", component: str = "", mode: Optional[str] = None
    ) -> "Tracker":
        return cls(
            settings.uri,
            settings.experiment,
            settings.run_key,
            run_id,
            mode or settings.mode,
            settings.wait_s,
            settings.outbox,
            component,
        )

    def send(self, ops: List[Dict[str, Any]], meaning: str = "") -> bool:
        """Applies what waits in the outbox for this run, then `ops`; True when all of it reached the server.
        `meaning`: what an unanswered server means for the run, for TrackingUnavailable's message. Whatever
        stops it (an unanswered server, a refusal, Ctrl-C), what was not applied stays in the outbox."""
        from absl import logging

        from tfxflow.components.tracking import mlflow_auth

        queued = outbox_lib.load(self.outbox, self.run_key)
        if queued and not self.run_id:
            self.run_id = queued.get("run_id", "")
        queue = [*(queued["ops"] if queued else []), *ops]
        # The server did not answer this run before: one short try, then the operations join the queue.
        wait = self.wait_s if queued is None else min(self.wait_s, outbox_lib.RETRY_WAIT_S)
        since = queued["since"] if queued else ""
        done = 0
        try:
            mlflow_client = client(self.uri)
            for op in queue:
                request_s = outbox_lib.MAX_REQUEST_S if op["op"] in _UPLOADS else None
                outbox_lib.call(lambda op=op: self._apply(mlflow_client, op), wait, request_s)
                done += 1
        except outbox_lib.Unanswered as err:
            since = since or outbox_lib.clock(err.first)
            kept = self._keep(queue[done:], since)
            shown = mlflow_auth.redact_uri(resolve_uri(self.uri))
            problem = outbox_lib.TrackingUnavailable(
                shown, since, err.waited, err.reason, self.component, meaning, kept
            )
            if self.mode == "required":
                raise problem from None
            logging.warning(
                "%s; %s", problem, f"kept in {kept}: {outbox_lib.describe(queue[done:])}" if kept else "not kept"
            )
            return False
        except BaseException:
            if queue[done:]:
                self._keep(queue[done:], since or outbox_lib.clock(time.time()))
            raise
        outbox_lib.remove(self.outbox, self.run_key)
        return True

    def _keep(self, ops: List[Dict[str, Any]], since: str) -> str:
        """Writes `ops` as this run's outbox entry; its path, or "" without an outbox or where it cannot be
        written (logged: it never hides why the operations were not sent)."""
        from absl import logging

        if not self.outbox:
            return ""
        entry = {
            "uri": self.uri,
            "experiment": self.experiment,
            "run_key": self.run_key,
            "run_id": self.run_id,
            "since": since,
            "ops": ops,
        }
        try:
            return outbox_lib.save(self.outbox, entry)
        except OSError as err:
            logging.error("could not keep what MLflow did not take in %s: %s", self.outbox, err)
            return ""

    def _apply(self, mlflow_client, op: Dict[str, Any]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        kind = op["op"]
        if kind == "start":
            self.run_id = _start_run(mlflow_client, self.uri, self.experiment, self.run_key, op)
            return
        if not self.run_id:
            found = find_run(mlflow_client, self.experiment, self.run_key)
            if found is None:
                raise LookupError(f"no MLflow run of pipeline run {self.run_key} in experiment {self.experiment}")
            self.run_id = found.info.run_id
        tags = op.get("tags") or {}
        if kind == "terminate":  # with "only_if_running", a run closed already stays as it is
            if op.get("only_if_running") and mlflow_client.get_run(self.run_id).info.status != "RUNNING":
                return
        if kind in ("set_tags", "terminate") and tags:
            mlflow_client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        if kind == "log_batch":
            mlflow_client.log_batch(
                self.run_id,
                metrics=[Metric(*m) for m in op.get("metrics", ())],
                params=[Param(*p) for p in op.get("params", ())],
            )
        elif kind == "log_artifact":
            mlflow_client.log_artifact(self.run_id, op["path"], op.get("artifact_path"))
        elif kind == "log_model":
            _register_push(mlflow_client, self.uri, self.run_id, op)
        elif kind == "log_trial":
            _log_trial(mlflow_client, self.run_id, op)
        elif kind == "describe_version":
            version = served_version(mlflow_client, op["registered_name"], op["pushed_version"])
            if version is not None:
                mlflow_client.update_model_version(op["registered_name"], version, description=op["description"])
        elif kind == "terminate":
            mlflow_client.set_terminated(self.run_id, status=op["status"], end_time=op.get("time"))
            self.closed = True
        elif kind != "set_tags":
            raise ValueError(f"unknown MLflow operation {kind!r}")


def deliver(uri: str, outbox: str, wait_s: float, replaced_by: str = "") -> List[str]:
    """Sends what earlier runs kept in `outbox` for the server at `uri`, oldest first; returns a line per run.
    Call it holding the run lock: every run it finds has ended, so one whose close was never kept (its process
    died) is closed KILLED. A run closed FAILED or KILLED gets the tag `tfxflow.replaced_by` naming `replaced_by`
    (the pipeline run that sends it). What gets no answer, or is refused, stays; what is for another server is
    left for it."""
    lines = []
    for entry in outbox_lib.entries(outbox):
        if entry["uri"] != uri:
            continue
        ops = [op for op in entry["ops"] if REPLACED_BY_TAG not in (op.get("tags") or {})]
        if not any(op["op"] == "terminate" for op in ops):
            why = "the pipeline process stopped before it closed its MLflow run"
            ops.append({"op": "terminate", "status": "KILLED", "only_if_running": True, "tags": {ERROR_TAG: why}})
        if replaced_by and any(op["op"] == "terminate" and op["status"] in ("FAILED", "KILLED") for op in ops):
            ops.append({"op": "set_tags", "tags": {REPLACED_BY_TAG: f"pipeline run {replaced_by}"}})
        if ops != entry["ops"]:
            entry["ops"] = ops
            outbox_lib.save(outbox, entry)
        what = outbox_lib.describe(entry["ops"])
        settings = TrackingSettings(uri, entry["experiment"], entry["run_key"], wait_s=wait_s, outbox=outbox)
        tracker = Tracker.of(settings, entry.get("run_id", ""), "delivery", mode="optional")
        try:
            sent = tracker.send([])
        except LookupError:  # the run was never created and its start was not kept: nothing to log into
            outbox_lib.remove(outbox, entry["run_key"])
            lines.append(f"run {entry['run_key']} never reached MLflow: nothing to close")
            continue
        except Exception as err:  # noqa: BLE001 (a refusal of MLflow's: the entry stays for the user to see)
            first = (str(err).strip().splitlines() or [""])[0][:300]
            lines.append(
                f"MLflow refused what run {entry['run_key']} kept ({type(err).__name__}: {first}); it stays in "
                f"{outbox_lib.entry_path(outbox, entry['run_key'])}"
            )
            continue
        if sent:
            lines.append(f"sent to MLflow what run {entry['run_key']} kept since {entry['since']}: {what}")
        else:
            lines.append(f"still kept for run {entry['run_key']} (the server does not answer): {what}")
    return lines


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
    from tfxflow.components.evaluation.eval_metrics import class_metric_name

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


# A trial's state as an MLflow run status; the tag says pruned apart from killed.
TRIAL_STATUS = {"complete": "FINISHED", "pruned": "KILLED", "failed": "FAILED"}
TRIAL_TAG = names.TRIAL_TAG
OBJECTIVE_PREFIX = "objective."  # a trial's metric: objective.<the validation metric that judged it>
PARENT_TAG = names.PARENT_RUN_TAG


def tuning_records(results_uri: str):
    """What the pipeline run records of its Tuner (metrics, params and tags of its own) and a `log_trial`
    operation per trial: a run nested under it with the trial's values, per-epoch metrics, state and time."""
    from tfxflow.components.tuning import tuner as tuner_lib

    results = tuner_lib.read_results(results_uri) or {"trials": []}
    now = _now_ms()
    counts = {state: sum(t["state"] == state for t in results["trials"]) for state in TRIAL_STATUS}
    metrics = [(f"tuning.trials.{state}", float(n), now, 0) for state, n in counts.items()]
    metrics.append(("tuning.seconds", float(results.get("seconds", 0.0)), now, 0))
    best = results.get("best")
    params = [
        ("tuning.objective", tuner_lib.monitor(results) if "objective" in results else ""),
        ("tuning.study", results.get("study", "")),
    ]
    if best:
        metrics.append(("tuning.best_value", float(best["value"]), now, 0))
        params += [(f"tuning.best.{k}", str(v)) for k, v in sorted(best["values"].items())]
        params.append(("tuning.best_trial", str(best["number"])))
    tags = {
        "tfxflow.tuning_uri": results_uri,
        "tfxflow.tuning": tuner_lib.summary(results) if results["trials"] else "",
    }
    trial_ops = []
    for trial in results["trials"]:
        at = trial.get("end_time_ms") or now
        trial_metrics = [
            (f"val.{k[4:]}" if k.startswith("val_") else f"train.{k}", float(v), at, epoch)
            for k, values in sorted(trial.get("history", {}).items())
            for epoch, v in enumerate(values, start=1)
        ]
        if trial.get("value") is not None:
            trial_metrics.append((f"{OBJECTIVE_PREFIX}{results['objective']}", float(trial["value"]), at, 0))
        if trial.get("seconds") is not None:
            trial_metrics.append(("seconds", float(trial["seconds"]), at, 0))
        trial_ops.append(
            {
                "op": "log_trial",
                "number": trial["number"],
                "status": TRIAL_STATUS[trial["state"]],
                "tags": {
                    "tfxflow.trial_state": trial["state"],
                    "tfxflow.tuning_uri": results_uri,
                    **({ERROR_TAG: trial["error"][:5000]} if trial.get("error") else {}),
                    **(
                        {"tfxflow.pruned_at_epoch": str(trial["pruned_at_epoch"])} if "pruned_at_epoch" in trial else {}
                    ),
                },
                "params": [(k, str(v)) for k, v in sorted(trial["values"].items())],
                "metrics": trial_metrics,
                "start_time": trial.get("start_time_ms"),
                "end_time": trial.get("end_time_ms"),
            }
        )
    return metrics, params, tags, trial_ops


def _log_trial(mlflow_client, parent_run_id: str, op: Dict[str, Any]) -> None:
    """One trial as a run nested under the pipeline run, made once: a retry (the outbox) finds it by its number."""
    from mlflow.entities import Metric, Param, RunTag

    parent = mlflow_client.get_run(parent_run_id)
    found = mlflow_client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`{PARENT_TAG}` = '{parent_run_id}' and tags.`{TRIAL_TAG}` = '{op['number']}'",
        max_results=1,
    )
    if found:
        run_id = found[0].info.run_id
    else:
        run_id = mlflow_client.create_run(
            parent.info.experiment_id,
            start_time=op.get("start_time"),
            run_name=f"{parent.info.run_name}-trial-{op['number']}",
            tags={PARENT_TAG: parent_run_id, TRIAL_TAG: str(op["number"])},
        ).info.run_id
    metrics = [Metric(*m) for m in op.get("metrics", ())]
    for i in range(0, max(1, len(metrics)), 500):
        mlflow_client.log_batch(
            run_id,
            metrics=metrics[i : i + 500],
            params=[Param(*p) for p in op.get("params", ())] if i == 0 else [],
            tags=[RunTag(k, v) for k, v in op.get("tags", {}).items()] if i == 0 else [],
        )
    mlflow_client.set_terminated(run_id, status=op["status"], end_time=op.get("end_time"))


def edge_figures(result: Optional[Dict[str, Any]]) -> Dict[str, float]:
    """MLflow metrics of EdgeExport's edge.json: per published variant its size, largest difference from the
    SavedModel, p50 latency at batch 1, load time and its metric on the eval rows (`edge.<variant>.<metric>`)."""
    figures: Dict[str, float] = {}
    for variant in (result or {}).get("published", []):
        entry = result["variants"][variant]
        figures[f"edge.{variant}.kib"] = round(entry["bytes"] / 1024, 1)
        figures[f"edge.{variant}.max_diff"] = max(entry.get("max_diff", {}).values(), default=0.0)
        for key in ("p50_ms", "load_ms"):
            if entry.get(key) is not None:
                figures[f"edge.{variant}.{key}"] = entry[key]
        if "eval" in entry:
            figures[f"edge.{variant}.{entry['eval']['metric']}"] = entry["eval"]["value"]
    return figures


def _edge_records(edge_model) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """EdgeExport's edge.json, and the published files and edge.json as local paths to log (on an object store,
    none: MLflow logs local files; the files are in the pushed version)."""
    if edge_model is None:
        return None, []
    from tfxflow.components.edge import edge

    result = edge.read_result(edge_model.uri)
    if result is None or not os.path.isdir(edge_model.uri):
        return result, []
    # edge.json also where nothing was published: it says why.
    logged = edge.published_files(result) or [edge.RESULT_FILE]
    return result, [os.path.join(edge_model.uri, name) for name in logged]


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
    from tfxflow.components.model import model_info

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
    from tfxflow.components.serving import serving_check as serving_check_lib

    served = serving_check_lib.read_result(serving_check.uri) or {}
    metrics += [Metric(f"serving.{name}", value, 0, 0) for name, value in serving_check_lib.figures(served).items()]
    edge_result, edge_files = _edge_records(edge_model)
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
        from tfxflow.components.edge import edge

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
        from tfxflow.components.validation import gate

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


CHAMPION_ALIAS = "champion"


def log_serving_model(uri: str, run_id: str, saved_model_dir: str, registered_name: str) -> Any:
    """Logs the pushed SavedModel, copied as it is, in MLflow's pyfunc flavour (its loader:
    components/tracking/savedmodel_pyfunc.py) and registers it as a new version of `registered_name`. Input: serialized
    tf.Examples (without the label) as URL-safe base64 strings (`base64.urlsafe_b64encode`), so `mlflow models
    serve` takes them as JSON; output: the task's prediction (probabilities [n, 1], a multi-class model's scores
    [n, K] in its classes' order, a regression's predictions [n, 1]; a user's own model's only output)."""
    import mlflow
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from tfxflow.components.model import model_info, text
    from tfxflow.components.tracking import savedmodel_pyfunc

    described = model_info.describe(saved_model_dir)
    needs_text = text.load_ops_for(saved_model_dir)
    outputs = model_info.signature_outputs(saved_model_dir, names.SERVING_SIGNATURE)
    if not outputs:
        raise ValueError(f"{saved_model_dir} has no readable SavedModel with a '{names.SERVING_SIGNATURE}' signature")
    key = described["prediction_key"] or outputs[0]
    width = len(described["classes"]) if described["task"] == "multiclass" and described["classes"] else 1
    if not described["prediction_key"]:
        width = -1  # a user's model: its output's width is its own

    # Unnamed tensors: MLflow hands the loader a plain array of base64 strings.
    signature = ModelSignature(
        inputs=Schema([TensorSpec(np.dtype(object), (-1,))]),
        outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, width))]),
    )
    # Explicit requirements: MLflow's inference loads the model once more in a subprocess (~10 s).
    dists = ("tensorflow", "tensorflow-transform") + (("tensorflow-text",) if needs_text else ())
    requirements = [f"{dist}=={importlib.metadata.version(dist)}" for dist in dists]
    # The fluent API is the only way to log a flavour; point it at this run, and put it back after.
    with fluent_api_at(uri):
        with mlflow.start_run(run_id=run_id):
            return mlflow.pyfunc.log_model(
                name="model",
                loader_module=savedmodel_pyfunc.__name__.rsplit(".", 1)[-1],
                data_path=saved_model_dir,
                code_paths=[savedmodel_pyfunc.__file__],
                model_config={
                    savedmodel_pyfunc.SIGNATURE: names.SERVING_SIGNATURE,
                    savedmodel_pyfunc.OUTPUT: key,
                    savedmodel_pyfunc.TEXT_OPS: bool(needs_text),
                },
                signature=signature,
                registered_model_name=registered_name,
                pip_requirements=requirements,
                metadata={"task": described["task"], "classes": described["classes"], "output": key},
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
    except MlflowException as err:
        if outbox_lib.outage_reason(err):
            raise  # no answer is not "not registered": the caller waits or keeps the operation
        return None
    return next((v.version for v in versions if v.tags.get("tfxflow.pushed_version") == pushed_version), None)


def _register_push(mlflow_client, uri: str, run_id: str, op: Dict[str, Any]) -> None:
    """Logs the pushed SavedModel to the run and registers it (once per pushed version), moves the champion
    alias to it and tags the run with the registered version."""
    registered_name, version = op["registered_name"], op["pushed_version"]
    registered = served_version(mlflow_client, registered_name, version)
    if registered is None:  # a cached Pusher hands on a push that is registered already
        # A try that stopped between registering and tagging left a version of this run: tag that one.
        ours = [v for v in mlflow_client.search_model_versions(f"name='{registered_name}'") if v.run_id == run_id]
        if ours:
            registered = ours[0].version
        else:
            logged = log_serving_model(resolve_uri(uri), run_id, op["saved_model"], registered_name)
            registered = logged.registered_model_version
        for key, value in (("tfxflow.pushed_version", version), ("tfxflow.pushed_destination", op["destination"])):
            mlflow_client.set_model_version_tag(registered_name, str(registered), key, value)
    if _newer_than_champion(mlflow_client, registered_name, version):
        mlflow_client.set_registered_model_alias(registered_name, CHAMPION_ALIAS, str(registered))
    mlflow_client.set_tag(run_id, "tfxflow.registered_version", str(registered))


def _newer_than_champion(mlflow_client, registered_name: str, pushed_version: str) -> bool:
    """Whether the pushed version is at least the champion's: a push registered late (its run's server did not
    answer) does not take the alias from a newer one, or from a rollback's copy (a higher version too)."""
    from mlflow.exceptions import MlflowException

    try:
        champion = mlflow_client.get_model_version_by_alias(registered_name, CHAMPION_ALIAS)
    except MlflowException as err:
        if outbox_lib.outage_reason(err):
            raise
        return True  # no champion yet
    served = [champion.tags.get("tfxflow.pushed_version", ""), *champion.tags.get(REPUBLISHED_AS_TAG, "").split(",")]
    served = [int(v) for v in served if v.isdigit()]
    return not served or int(pushed_version) >= max(served)


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
    ops.append({"op": "terminate", "status": "FINISHED", "time": _now_ms()})
    settings = TrackingSettings(tracking_uri, experiment, run_key, {}, tracking_mode, tracking_wait_s, outbox)
    Tracker.of(settings, run_id, names.MLFLOW_FINISH).send(
        ops, f"{meaning}; its registration in MLflow and the close of the MLflow run wait"
    )
