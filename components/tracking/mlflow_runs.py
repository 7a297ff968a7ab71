"""A pipeline run's MLflow run: the client bound to a tracking URI, the run re-found by its pipeline run's tag,
the operations that write it (sent in order, or kept in the outbox while the server does not answer), its close,
and the delivery of what earlier runs kept.

MLflow itself is imported only by the calls that talk to it.
"""

import dataclasses
import json
import os
import re
import time
from typing import Any, Dict, List, Mapping, Optional

from tfxflow.components import names
from tfxflow.components.tracking import mlflow_auth, model_registry
from tfxflow.components.tracking import tracking_outbox as outbox_lib

RUN_KEY_TAG = "tfxflow.pipeline_run"
PIPELINE_TAG = "tfxflow.pipeline"
REPLACED_BY_TAG = "tfxflow.replaced_by"
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


def now_ms() -> int:
    return int(time.time() * 1000)


def start_run(settings: TrackingSettings, pipeline_name: str, component: str = names.MLFLOW_START) -> str:
    """The MLflow run of this pipeline run, created with its params; "" where the server did not answer and
    the start waits in the outbox (`optional` mode). In `required` mode that raises TrackingUnavailable, and
    nothing is kept: the run did no work to record."""
    tracker = Tracker.of(settings, component=component)
    meaning = "nothing was run: a run that requires tracking stops before any work when it cannot be tracked"
    try:
        tracker.send(
            [{"op": "start", "pipeline": pipeline_name, "params": dict(settings.params), "time": now_ms()}], meaning
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
        tracker.send([{"op": "terminate", "status": status, "tags": tags, "time": now_ms()}])
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
            model_registry.register_push(mlflow_client, resolve_uri(self.uri), self.run_id, op)
        elif kind == "log_trial":
            _log_trial(mlflow_client, self.run_id, op)
        elif kind == "describe_version":
            version = model_registry.served_version(mlflow_client, op["registered_name"], op["pushed_version"])
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


def _log_trial(mlflow_client, parent_run_id: str, op: Dict[str, Any]) -> None:
    """One trial as a run nested under the pipeline run, made once: a retry (the outbox) finds it by its number."""
    from mlflow.entities import Metric, Param, RunTag

    parent = mlflow_client.get_run(parent_run_id)
    found = mlflow_client.search_runs(
        [parent.info.experiment_id],
        filter_string=(
            f"tags.`{names.PARENT_RUN_TAG}` = '{parent_run_id}' and tags.`{names.TRIAL_TAG}` = '{op['number']}'"
        ),
        max_results=1,
    )
    if found:
        run_id = found[0].info.run_id
    else:
        run_id = mlflow_client.create_run(
            parent.info.experiment_id,
            start_time=op.get("start_time"),
            run_name=f"{parent.info.run_name}-trial-{op['number']}",
            tags={names.PARENT_RUN_TAG: parent_run_id, names.TRIAL_TAG: str(op["number"])},
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
