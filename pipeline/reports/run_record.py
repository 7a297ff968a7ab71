"""What a pipeline run did, read back from ML Metadata: per-component state and time, rows, metrics, push."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tfxflow.components import names

_STATES = {
    metadata_store_pb2.Execution.COMPLETE: "done",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "FAILED",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.NEW: "new",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclasses.dataclass
class ComponentRecord:
    name: str
    state: str
    seconds: float
    execution_id: int
    outputs: Dict[str, List[metadata_store_pb2.Artifact]]


def sample_text(plan: Dict[str, Dict[str, int]]) -> str:
    """A sample of large splits ({split: {"rows", "every", "sampled"}}, components/ingest/sampling.py) in words, e.g.
    "a sample of 93,660 of the 374,640 eval rows (every 4th)"; "" for none."""
    return "; ".join(
        f"a sample of {s['sampled']:,} of the {s['rows']:,} {split} rows (every {_nth(s['every'])})"
        for split, s in sorted(plan.items())
    )


@dataclasses.dataclass
class RunReport:
    """A pipeline run as MLMD recorded it."""

    pipeline_name: str
    run_id: str
    components: List[ComponentRecord]
    rows: Dict[str, int]
    metrics: Dict[str, float]
    baseline_metrics: Dict[str, float]
    blessed: Optional[bool]
    pushed_version: Optional[str]
    pushed_destination: Optional[str]
    gate_checks: Optional[str] = None  # the data gate's one-line account of what it compared
    mlflow_run_id: Optional[str] = None
    blessing_failures: List[str] = dataclasses.field(default_factory=list)  # why the model was not blessed
    # The Evaluator's sample of a large split: {split: {"rows", "every", "sampled"}}
    # (components/evaluation/evaluator.py).
    eval_sample: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)
    # Transform's analysis sample of a large split, alike (components/training/transform.py).
    analyze_sample: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)
    # ServingCheck's serving_check.json (components/serving/serving_check.py), when it ran.
    serving_check: Optional[dict] = None
    # EdgeExport's edge.json (components/edge/edge.py), when the run made TFLite models (--tflite).
    edge: Optional[dict] = None
    # A blessed model the Pusher did not push (it was rolled back), and a push that replaced a rollback's copy
    # (components/serving/pusher.py); a blessing `tfxflow rollback` revoked (handed on by a cached Evaluator).
    not_pushed_reason: Optional[str] = None
    after_rollback: Optional[str] = None
    blessing_revoked: Optional[str] = None
    # The Trainer's training_info.json (components/training/trainer.py), when it ran.
    training: Optional[dict] = None
    tuning: Optional[dict] = None  # the Tuner's trials.json (components/tuning/tuner.py)

    def eval_sample_text(self) -> str:
        """E.g. "a sample of 93,660 of the 374,640 eval rows (every 4th)", or ""."""
        return sample_text(self.eval_sample)

    def analyze_sample_text(self) -> str:
        """Transform's analysis sample, as `eval_sample_text` words the Evaluator's."""
        return sample_text(self.analyze_sample)

    def component(self, name: str) -> Optional[ComponentRecord]:
        return next((c for c in self.components if c.name == name), None)


def open_store(metadata_path: str, readonly: bool = True) -> metadata_store.MetadataStore:
    modes = metadata_store_pb2.SqliteMetadataSourceConfig
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = modes.READONLY if readonly else modes.READWRITE
    return metadata_store.MetadataStore(config)


def run_ids(store: metadata_store.MetadataStore, pipeline_name: str) -> List[str]:
    """The pipeline's run ids, oldest first."""
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        return []
    runs = store.get_children_contexts_by_context(pipeline.id)
    # TFX makes each pipeline_run context a child of its pipeline context.
    return [c.name for c in sorted(runs, key=lambda c: (c.create_time_since_epoch, c.id))]


def _prop(artifact: metadata_store_pb2.Artifact, key: str):
    if key not in artifact.custom_properties:
        return None
    value = artifact.custom_properties[key]
    return getattr(value, value.WhichOneof("value"))


def read_run(metadata_path: str, pipeline_name: str, run_id: Optional[str] = None) -> Optional[RunReport]:
    """The report of `run_id` (default: the latest run of `pipeline_name`), or None if there is none."""
    if not os.path.exists(metadata_path):
        return None
    store = open_store(metadata_path)
    ids = run_ids(store, pipeline_name)
    if not ids:
        return None
    run_id = run_id or ids[-1]
    run_ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
    if run_ctx is None:
        return None
    executions = {e.id: e for e in store.get_executions_by_context(run_ctx.id)}
    prefix = pipeline_name + "."
    components = []
    for node_ctx in store.get_contexts_by_type("node"):
        if not node_ctx.name.startswith(prefix):
            continue
        mine = [executions[e.id] for e in store.get_executions_by_context(node_ctx.id) if e.id in executions]
        if not mine:
            continue
        execution = max(mine, key=lambda e: e.id)
        outputs: Dict[str, List[metadata_store_pb2.Artifact]] = {}
        events = [
            ev for ev in store.get_events_by_execution_ids([execution.id]) if ev.type == metadata_store_pb2.Event.OUTPUT
        ]
        artifacts = {a.id: a for a in store.get_artifacts_by_id([ev.artifact_id for ev in events])}
        for ev in events:
            key = ev.path.steps[0].key if ev.path.steps else ""
            outputs.setdefault(key, []).append(artifacts[ev.artifact_id])
        components.append(
            ComponentRecord(
                name=node_ctx.name[len(prefix) :],
                state=_STATES.get(execution.last_known_state, str(execution.last_known_state)),
                seconds=(execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000.0,
                execution_id=execution.id,
                outputs=outputs,
            )
        )
    components.sort(key=lambda c: c.execution_id)
    report = RunReport(pipeline_name, run_id, components, {}, {}, {}, None, None, None)
    _fill_results(report)
    return report


def first_output(record: Optional[ComponentRecord], key: str) -> Optional[metadata_store_pb2.Artifact]:
    """The first artifact a component's execution wrote under `key`, or None."""
    if record is None or not record.outputs.get(key):
        return None
    return record.outputs[key][0]


def _fill_results(report: RunReport) -> None:
    from tfxflow.components.serving.pusher import (  # imports TFX: only for a run
        AFTER_ROLLBACK,
        NOT_PUSHED_REASON,
        ROLLED_BACK,
    )

    stats = first_output(report.component(names.STATISTICS_GEN), "statistics")
    if stats is not None:
        # Imports TFX: only when there is a run to report.
        from tfxflow.components.tracking.artifact_readers import split_rows

        report.rows = split_rows(stats.uri)
    model_run = first_output(report.component(names.TRAINER), "model_run")
    if model_run is not None:
        from tfx.dsl.io import fileio

        path = os.path.join(model_run.uri, names.TRAINING_INFO_FILE)
        if fileio.exists(path) and not fileio.isdir(path):  # wherever the Trainer wrote it (gs:// too)
            with fileio.open(path, "r") as f:
                report.training = json.load(f)
    tuned = first_output(report.component(names.TUNER), "tuner_results")
    if tuned is not None:
        from tfxflow.components.tuning import tuner as tuner_lib  # imports TFX: only for a run that tuned

        report.tuning = tuner_lib.read_results(tuned.uri)
    checks = first_output(report.component(names.DATA_GATE), "checks")
    if checks is not None and os.path.isfile(checks.uri):
        with open(checks.uri, encoding="utf-8") as f:
            report.gate_checks = f.read()
    graph = first_output(report.component(names.TRANSFORM), "transform_graph")
    if graph is not None and _prop(graph, "analyze_sample"):
        report.analyze_sample = json.loads(_prop(graph, "analyze_sample"))
    evaluation = first_output(report.component(names.EVALUATOR), "evaluation")
    blessing = first_output(report.component(names.EVALUATOR), "blessing")
    if blessing is not None and _prop(blessing, "blessed") is not None:
        report.blessed = bool(_prop(blessing, "blessed"))
        report.blessing_revoked = _prop(blessing, ROLLED_BACK) if not report.blessed else None
    if evaluation is not None:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.tracking.artifact_readers import blessing_failures, overall_metrics

        if _prop(evaluation, "eval_sample"):
            report.eval_sample = json.loads(_prop(evaluation, "eval_sample"))
        report.metrics, report.baseline_metrics = overall_metrics(evaluation.uri)
        if report.blessed is False:
            report.blessing_failures = blessing_failures(evaluation.uri, (report.metrics, report.baseline_metrics))
    served = first_output(report.component(names.SERVING_CHECK), "blessing")
    if served is not None:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.serving.serving_check import read_result

        report.serving_check = read_result(served.uri)
    edge_model = first_output(report.component(names.EDGE_EXPORT), "edge_model")
    if edge_model is not None:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.edge import edge

        report.edge = edge.read_result(edge_model.uri)
    pushed = first_output(report.component(names.PUSHER), "pushed_model")
    if pushed is not None:
        report.not_pushed_reason = _prop(pushed, NOT_PUSHED_REASON)
        report.after_rollback = _prop(pushed, AFTER_ROLLBACK)
    if pushed is not None and _prop(pushed, "pushed"):
        report.pushed_version = _prop(pushed, "pushed_version")
        report.pushed_destination = _prop(pushed, "pushed_destination")
