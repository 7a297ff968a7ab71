"""The content of a run's HTML page, collected from ML Metadata and the run's artifacts (html.py renders it).

Built on run_record.read_run. Every section is optional: a run refused by the data gate has no training, a
first run no baseline, a run without tracking no MLflow id; what is missing gets a one-line note in
`RunPage.notes` instead of an exception. TFX, TFDV and TFMA are imported inside the functions that read
their artifacts, so importing this module costs nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tfxflow.components import names
from tfxflow.components.errors import DataError
from tfxflow.components.model import model_info, tasks
from tfxflow.components.validation import drift
from tfxflow.pipeline.reports import run_record

MAX_FEATURES = 50  # per split: the page stays small for a wide data set
TOP_VALUES = 5
MAX_BINS = 40  # of a drift chart; categorical features can have many values
STATE_NAMES = {"done": "ran", "cached": "cached", "FAILED": "failed"}  # run_record's states, as the page says them
EXECUTION_RESULT = "__execution_result__"  # TFX's custom property on an execution with an executor result
TRAIN_SPLIT = "train"


@dataclasses.dataclass
class ComponentRow:
    name: str
    state: str  # ran, cached, failed, running, canceled, new
    seconds: float
    execution_id: int


@dataclasses.dataclass
class FeatureSummary:
    """One feature of one split, from TFDV's statistics."""

    name: str
    kind: str  # numeric, categorical, other
    count: int  # rows with a value
    missing: int  # rows without one
    mean: Optional[float] = None
    std: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None
    unique: Optional[int] = None
    histogram: List[Tuple[float, float, float]] = dataclasses.field(default_factory=list)  # (low, high, count)
    top_values: List[Tuple[str, float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SplitSummary:
    split: str
    rows: int
    features: List[FeatureSummary]
    features_total: int  # before the cap of MAX_FEATURES


@dataclasses.dataclass
class AnomalyRow:
    split: str
    feature: str
    type: str
    description: str


@dataclasses.dataclass
class DistanceCheck:
    """A drift (or skew) distance of one feature, with the two distributions on common bins."""

    kind: str  # drift, skew
    feature: str
    measure: str
    value: float
    threshold: float
    p_value: float
    over_threshold: bool
    shifted: bool  # over the threshold and not sampling noise: the gate refuses it
    text: str  # drift.Comparison's own account
    labels: List[str]
    baseline: List[float]
    current: List[float]


@dataclasses.dataclass
class EvalSection:
    metrics: Dict[str, float]  # overall; a multi-class model's per-class ones named `f1.<class>`
    baseline_metrics: Dict[str, float]
    slices: Dict[str, Dict[str, float]]  # slice name -> metrics, "overall" first
    blessed: Optional[bool]
    blessing_failures: List[str]
    thresholds: List[str]  # the blessing's rules in words
    sample: str  # the Evaluator's sample of a large split, in words, or ""
    revoked: Optional[str] = None
    task: str = "binary"
    classes: List[str] = dataclasses.field(default_factory=list)  # a multi-class model's, in index order
    # A multi-class model's confusion matrix of the overall slice: rows actual, columns predicted (the classes'
    # order), counts of evaluated rows; a last column for rows whose top score was 0 when there are any.
    confusion: Optional[List[List[float]]] = None
    # A regression model's sample of evaluated rows: {"label": [...], "prediction": [...]}.
    pairs: Optional[Dict[str, List[float]]] = None

    @property
    def overall(self) -> Dict[str, float]:
        """The overall metrics but the per-class ones."""
        return {k: v for k, v in self.metrics.items() if "." not in k}

    def per_class(self) -> List[Tuple[str, Dict[str, float]]]:
        """[(class, {precision, recall, f1, rows})] of a multi-class model, in the classes' order."""
        found = []
        for i, name in enumerate(self.classes):
            values = {
                m: self.metrics[f"{m}.{name}"] for m in ("precision", "recall", "f1") if f"{m}.{name}" in self.metrics
            }
            if self.confusion is not None and i < len(self.confusion):
                values["rows"] = float(sum(self.confusion[i]))
            if values:
                found.append((name, values))
        return found


@dataclasses.dataclass
class RunPage:
    """Everything the run page shows; None or empty means the run has no such section."""

    pipeline_name: str
    run_id: str
    status: str  # succeeded, refused, failed, running
    verdict: str  # one line for the header
    started: Optional[str] = None  # UTC, "2026-11-30 16:09:28"
    finished: Optional[str] = None
    wall_s: Optional[float] = None
    failed_component: Optional[str] = None
    failure: Optional[str] = None  # the refusal's or failure's message
    settings: Dict[str, Tuple[str, Optional[str]]] = dataclasses.field(default_factory=dict)  # name -> (value, default)
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    code_commit: Optional[str] = None
    mlflow_run_id: Optional[str] = None
    pushed_version: Optional[str] = None
    pushed_destination: Optional[str] = None
    not_pushed: Optional[str] = None  # why not pushed
    components: List[ComponentRow] = dataclasses.field(default_factory=list)
    rows: Dict[str, int] = dataclasses.field(default_factory=dict)
    splits: List[SplitSummary] = dataclasses.field(default_factory=list)
    anomalies: List[AnomalyRow] = dataclasses.field(default_factory=list)
    allowed_anomaly_types: List[str] = dataclasses.field(default_factory=list)
    gate_checks: List[str] = dataclasses.field(default_factory=list)  # the gate's account, one line per check
    baseline_name: Optional[str] = None  # what the drift baseline is
    baseline_uri: Optional[str] = None
    distances: List[DistanceCheck] = dataclasses.field(default_factory=list)
    training: Dict[str, Dict[str, List[float]]] = dataclasses.field(default_factory=dict)  # metric -> side -> epochs
    training_info: Dict[str, Any] = dataclasses.field(default_factory=dict)  # devices, batch, steps (no history)
    tuning: Optional[dict] = None  # the Tuner's trials.json, with its one-line `summary`
    evaluation: Optional[EvalSection] = None
    serving_check: Optional[dict] = None
    edge: Optional[dict] = None  # EdgeExport's edge.json (--tflite)
    features: Optional[dict] = None  # the feature config the Trainer used (components/model/features.py)
    lineage: Dict[str, str] = dataclasses.field(default_factory=dict)  # what -> id or URI
    notes: Dict[str, str] = dataclasses.field(default_factory=dict)  # section -> why it is absent or partial

    @property
    def pushed(self) -> bool:
        return bool(self.pushed_version)


# --- settings and versions ---------------------------------------------------------------------------------


def _flatten(values: Mapping[str, Any], prefix: str = "") -> Dict[str, str]:
    flat: Dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            flat.update(_flatten(dataclasses.asdict(value), name + "."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return flat


def changed_settings(
    settings: Optional[Mapping[str, Any]], defaults: Optional[Mapping[str, Any]]
) -> Dict[str, Tuple[str, Optional[str]]]:
    """{name: (value, default)} of the settings (nested mappings or dataclasses, flattened with dots) that
    differ from `defaults`; every setting when there are no defaults (default None)."""
    if not settings:
        return {}
    flat = _flatten(dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else settings)
    if defaults is None:
        return {k: (v, None) for k, v in sorted(flat.items())}
    base = _flatten(dataclasses.asdict(defaults) if dataclasses.is_dataclass(defaults) else defaults)
    return {k: (v, base.get(k)) for k, v in sorted(flat.items()) if base.get(k) != v}


def versions() -> Dict[str, str]:
    """Installed versions of tfxflow and the libraries a run's results depend on."""
    found = {}
    for label, package in (
        ("tfxflow", "tfxflow"),
        ("TFX", "tfx"),
        ("TensorFlow", "tensorflow"),
        ("TFDV", "tensorflow-data-validation"),
        ("TFMA", "tensorflow-model-analysis"),
        ("Beam", "apache-beam"),
    ):
        try:
            found[label] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _utc(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _prop(message, key: str):
    """A custom property's value (an execution's or an artifact's), or None."""
    if key not in message.custom_properties:
        return None
    value = message.custom_properties[key]
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


# --- statistics ----------------------------------------------------------------------------------------------


def load_statistics(statistics_uri: str, split: str):
    """A split's DatasetFeatureStatisticsList from StatisticsGen's output, or None."""
    from tensorflow_metadata.proto.v0 import statistics_pb2
    from tfx.dsl.io import fileio

    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.components.validation.gate import STATISTICS_FILE

    path = os.path.join(names.split_dir(statistics_uri, split), STATISTICS_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path, "rb") as f:
        return statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read())


def summarize_feature(feature, rows: int) -> FeatureSummary:
    """A FeatureNameStatistics in the page's terms: counts, moments or unique values, histogram or top values.

    Figures of values a feature does not have are None, not TFDV's proto defaults (0): no mean, minimum,
    maximum or histogram without a value, no spread without two."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    name = ".".join(feature.path.step) if feature.path.step else feature.name
    kind = feature.WhichOneof("stats")
    if kind == "num_stats":
        stats = feature.num_stats
        count, values = drift.rows_with_values(stats.common_stats)
        standard = next(
            (h for h in stats.histograms if h.type == statistics_pb2.Histogram.STANDARD and h.buckets), None
        )
        return FeatureSummary(
            name,
            "numeric",
            count,
            max(rows - count, int(stats.common_stats.num_missing)),
            mean=stats.mean if values else None,
            std=stats.std_dev if values > 1 else None,
            min=stats.min if values else None,
            max=stats.max if values else None,
            histogram=[(b.low_value, b.high_value, b.sample_count) for b in standard.buckets]
            if standard and values
            else [],
        )
    if kind == "string_stats":
        stats = feature.string_stats
        count, _ = drift.rows_with_values(stats.common_stats)
        return FeatureSummary(
            name,
            "categorical",
            count,
            max(rows - count, int(stats.common_stats.num_missing)),
            unique=int(stats.unique),  # a count: 0 distinct values is what an all-empty column has
            top_values=[(v.value, float(v.frequency)) for v in stats.top_values[:TOP_VALUES]],
        )
    return FeatureSummary(name, "other", 0, rows)


def summarize_split(statistics, split: str) -> SplitSummary:
    dataset = statistics.datasets[0]
    rows = int(dataset.num_examples)
    features = sorted(dataset.features, key=lambda f: ".".join(f.path.step) if f.path.step else f.name)
    return SplitSummary(
        split, rows, [summarize_feature(f, rows) for f in features[:MAX_FEATURES]], features_total=len(features)
    )


def distance_checks(baseline, current, schema, kind: str) -> Tuple[List[DistanceCheck], List[str]]:
    """components/validation/drift.py's comparisons of `current` against `baseline`, each with its bins for a chart."""
    comparisons, notes = drift.compare_statistics(baseline, current, schema, kind)
    base_rows, base_features = drift.feature_statistics(baseline)
    cur_rows, cur_features = drift.feature_statistics(current)
    checks = []
    for c in comparisons:
        binned = drift.bin_feature(base_features.get(c.feature), cur_features.get(c.feature), base_rows, cur_rows)
        labels, base, cur = (
            (list(binned.labels), list(binned.baseline), list(binned.current)) if binned else ([], [], [])
        )
        checks.append(
            DistanceCheck(
                kind=kind,
                feature=c.feature,
                measure=c.measure,
                value=c.value,
                threshold=c.threshold,
                p_value=c.p_value,
                over_threshold=c.over_threshold,
                shifted=c.shifted,
                text=str(c),
                labels=[str(label) for label in labels[:MAX_BINS]],
                baseline=[float(v) for v in base[:MAX_BINS]],
                current=[float(v) for v in cur[:MAX_BINS]],
            )
        )
    return ordered(checks), notes


def ordered(checks: Sequence[DistanceCheck]) -> List[DistanceCheck]:
    """The refused first, then by distance over threshold: what a reader looks for."""
    return sorted(checks, key=lambda d: (not d.shifted, -(d.value / d.threshold if d.threshold else 0.0), d.feature))


# --- metadata ------------------------------------------------------------------------------------------------


def _inputs(store, execution_id: int) -> Dict[str, List[Any]]:
    """An execution's input artifacts by key."""
    from ml_metadata.proto import metadata_store_pb2

    events = [e for e in store.get_events_by_execution_ids([execution_id]) if e.type == metadata_store_pb2.Event.INPUT]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    found: Dict[str, List[Any]] = {}
    for event in events:
        # One event holds every key an artifact was given under (the same statistics as `statistics` and
        # `baseline_statistics` when ExampleGen and StatisticsGen were cached): key and index steps in turn.
        for step in event.path.steps:
            if step.HasField("key"):
                found.setdefault(step.key, []).append(artifacts[event.artifact_id])
    return found


def _result_message(execution) -> Optional[str]:
    """The executor's message TFX keeps on a failed execution (an out-of-process executor's), or None."""
    text = _prop(execution, EXECUTION_RESULT)
    if not text:
        return None
    try:
        return json.loads(text).get("resultMessage") or None
    except ValueError:
        return None


def _read_text(uri: str) -> Optional[str]:
    from tfx.dsl.io import fileio

    if not fileio.exists(uri) or fileio.isdir(uri):
        return None
    with fileio.open(uri, "r") as f:
        return f.read()


def _schema(schema_artifact):
    from tfx.utils import io_utils

    return io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_artifact.uri))


def _gate(page: RunPage, store, report: run_record.RunReport, execution, skew: bool) -> None:
    """Anomalies, drift and skew checks and, for a refusal, its message: as the gate's verdict records them
    (components/validation/gate.py); the charts' bins come from the statistics it compared."""
    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.components.validation import gate

    record = report.component(names.DATA_GATE)
    inputs = _inputs(store, record.execution_id)
    verdict = _verdict(record, inputs)
    if verdict is None:
        _unrecorded_gate(page, inputs, execution)
        return
    page.allowed_anomaly_types = list(verdict["allowed_types"])
    page.gate_checks = list(verdict["checks"]) or page.gate_checks
    page.baseline_name = verdict["baseline"] or None
    page.anomalies = [
        AnomalyRow(a["split"], a["feature"], a["type"], a["description"])
        for a in verdict["stopped_by"] + verdict["allowed"]
        if not a["split"].endswith((gate.DRIFT, gate.SKEW))  # shown as drift and skew checks
    ]
    statistics = inputs.get("statistics", [None])[0]
    current = load_statistics(statistics.uri, TRAIN_SPLIT) if statistics is not None else None
    baseline = inputs.get("baseline_statistics", [None])[0]
    sides = {"drift": None, "skew": None}  # kind -> (baseline, current) statistics for the bins
    if baseline is not None and page.baseline_name:
        page.baseline_uri = baseline.uri
        old = load_statistics(baseline.uri, TRAIN_SPLIT)
        sides["drift"] = (old, current) if old is not None else None
    serving_root = _prop(execution, "serving_data_root")
    if serving_root and any(f["kind"] == "skew" for f in verdict["findings"]):
        serving = _serving_statistics(page, inputs, serving_root, skew)
        sides["skew"] = (current, serving) if serving is not None else None
    page.distances = ordered([_distance(f, sides[f["kind"]]) for f in verdict["findings"]])
    if not any(f["kind"] == "drift" for f in verdict["findings"]) and "drift" not in page.notes:
        page.notes["drift"] = next(
            (line for line in page.gate_checks if line.startswith("drift")),
            "no baseline to compare with (no blessed model yet, or the drift check is off)",
        )
    if record.state == "FAILED" and verdict["message"]:
        page.failure = page.failure or verdict["message"]


def _verdict(record: run_record.ComponentRecord, inputs: Dict[str, List[Any]]) -> Optional[dict]:
    """The verdict the gate wrote, or None for a run recorded before the gate wrote one."""
    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.components.validation import gate

    output = run_record.first_output(record, gate.VERDICT_OUTPUT)
    if output is not None:
        return gate.read_verdict(gate.verdict_folder(output.uri))
    anomalies = inputs.get("anomalies", [None])[0]
    if anomalies is None:
        return None
    # A failed execution publishes no outputs: its verdict lies where TFX put the output's folder,
    # <pipeline root>/<node id>/verdict/<execution id>, the pipeline root being that of ExampleValidator's
    # <pipeline root>/<node id>/anomalies/<execution id>.
    root = os.path.dirname(os.path.dirname(os.path.dirname(anomalies.uri.rstrip("/"))))
    return gate.read_verdict(os.path.join(root, record.name, gate.VERDICT_OUTPUT, str(record.execution_id)))


def _distance(finding: Dict[str, Any], sides) -> DistanceCheck:
    """A drift or skew check as the gate judged it, with both sides' bins where their statistics are here."""
    labels: List[Any] = []
    base: List[float] = []
    cur: List[float] = []
    if sides is not None and sides[0] is not None and sides[1] is not None:
        base_rows, base_features = drift.feature_statistics(sides[0])
        cur_rows, cur_features = drift.feature_statistics(sides[1])
        feature = finding["feature"]
        binned = drift.bin_feature(base_features.get(feature), cur_features.get(feature), base_rows, cur_rows)
        if binned:
            labels, base, cur = list(binned.labels), list(binned.baseline), list(binned.current)
    return DistanceCheck(
        kind=finding["kind"],
        feature=finding["feature"],
        measure=finding["measure"],
        value=finding["value"],
        threshold=finding["threshold"],
        p_value=finding["p_value"],
        over_threshold=finding["over_threshold"],
        shifted=finding["shifted"],
        text=finding["text"],
        labels=[str(label) for label in labels[:MAX_BINS]],
        baseline=[float(v) for v in base[:MAX_BINS]],
        current=[float(v) for v in cur[:MAX_BINS]],
    )


def _serving_statistics(page: RunPage, inputs: Dict[str, List[Any]], serving_root: str, recompute: bool):
    """Statistics of the serving data for the skew charts' bins: the gate does not keep them, so they are
    computed again from the CSV files (a Beam pass over them); None where they are not."""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.validation import folder_statistics

    if not recompute or not inputs.get("schema"):
        page.notes["skew"] = f"skew vs. the serving data in {serving_root}: charts not computed again for this page"
        return None
    try:
        return folder_statistics.csv_statistics(serving_root, _schema(inputs["schema"][0]))
    except (DataError, OSError) as err:  # the files changed or went away since the run
        page.notes["skew"] = f"skew vs. the serving data in {serving_root}: charts not computed again ({err})"
        return None


def _unrecorded_gate(page: RunPage, inputs: Dict[str, List[Any]], execution) -> None:
    """A run recorded before the gate wrote its verdict (gate.VERDICT_FILE): kept so that its page still
    renders, with ExampleValidator's anomalies and the gate's configuration, and no verdict re-derived."""
    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.components.validation import gate

    page.allowed_anomaly_types = gate.parse_allowed(_prop(execution, "allowed_anomaly_types") or "")
    anomalies = inputs.get("anomalies", [None])[0]
    if anomalies is not None:
        page.anomalies = [
            AnomalyRow(a.split, a.feature, a.type, a.description) for a in gate.read_anomalies(anomalies.uri)
        ]
    page.notes["drift"] = "this run's data gate kept no verdict (an older release): its drift checks are not shown"


def _thresholds(eval_config_json: Optional[str]) -> List[str]:
    """The blessing's rules in words, from the Evaluator's eval_config (TFMA's EvalConfig as JSON)."""
    if not eval_config_json:
        return []
    try:
        config = json.loads(eval_config_json)
    except ValueError:
        return []
    rules = []
    for spec in config.get("metrics_specs", []):
        for metric in spec.get("metrics", []):
            name = tasks.METRIC_CLASSES.get(metric.get("class_name", "?"), metric.get("class_name", "?"))
            for per_slice in metric.get("per_slice_thresholds", []) + (
                [{"threshold": metric["threshold"]}] if "threshold" in metric else []
            ):
                where = "overall" if per_slice.get("slicing_specs", [{}]) == [{}] else "every slice"
                threshold = per_slice.get("threshold", {})
                value = threshold.get("value_threshold", {})
                if "lower_bound" in value:
                    rules.append(f"{name} at least {value['lower_bound']:g} ({where})")
                if "upper_bound" in value:
                    rules.append(f"{name} at most {value['upper_bound']:g} ({where})")
                change = threshold.get("change_threshold", {})
                if "absolute" in change:
                    allowed = abs(float(change["absolute"]))
                    rules.append(
                        f"{name} no worse than the last blessed model's"
                        + (f" by more than {allowed:g}" if allowed >= 1e-6 else "")
                        + f" ({where}; skipped without a baseline)"
                    )
    return rules


def _training(page: RunPage, report: run_record.RunReport) -> None:
    model_run = run_record.first_output(report.component(names.TRAINER), "model_run")
    if model_run is None:
        page.notes["training"] = "no Trainer ran in this run"
        return
    if report.training is None:  # read with the run's record (run_record.read_run)
        page.notes["training"] = f"the Trainer left no {names.TRAINING_INFO_FILE} in {model_run.uri}"
        return
    info = dict(report.training)
    history = info.pop("history", {}) or {}
    page.training_info = {k: v for k, v in info.items() if not isinstance(v, (dict, list)) or k == "devices"}
    for key, values in history.items():
        metric, side = (key[4:], "validation") if key.startswith("val_") else (key, "train")
        page.training.setdefault(metric, {})[side] = [float(v) for v in values]
    if not page.training:
        page.notes["training"] = "the Trainer recorded no per-epoch history"


def _evaluation(page: RunPage, report: run_record.RunReport, executions: Mapping[int, Any]) -> None:
    record = report.component(names.EVALUATOR)
    evaluation = run_record.first_output(record, "evaluation")
    if evaluation is None:
        page.notes["evaluation"] = "no Evaluator ran in this run"
        return
    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.components.evaluation.evaluator import read_prediction_pairs
    from tfxflow.components.tracking.artifact_readers import confusion_matrix, evaluation_metrics

    model = run_record.first_output(report.component(names.TRAINER), "model")
    described = (
        model_info.describe(model.uri, page.features) if model is not None else model_info.describe("", page.features)
    )
    classes = list(described.get("classes") or [])
    slices = evaluation_metrics(evaluation.uri, classes)
    ordered = {"overall": slices.pop("overall", report.metrics)}
    ordered.update(sorted(slices.items()))
    execution = executions.get(record.execution_id)
    page.evaluation = EvalSection(
        metrics=dict(ordered["overall"]),
        baseline_metrics={k: v for k, v in report.baseline_metrics.items() if "." not in k},
        slices=ordered,
        blessed=report.blessed,
        blessing_failures=list(report.blessing_failures),
        thresholds=_thresholds(_prop(execution, "eval_config") if execution is not None else None),
        sample=report.eval_sample_text(),
        revoked=report.blessing_revoked,
        task=described["task"],
        classes=classes,
    )
    if described["task"] == "multiclass":
        entries = confusion_matrix(evaluation.uri)
        if entries:
            size = max(len(classes), 1 + max(max(a, p) for a, p in entries))
            unscored = any(p < 0 for _, p in entries)
            matrix = [[0.0] * (size + unscored) for _ in range(size)]
            for (actual, predicted), rows in entries.items():
                matrix[actual][predicted if predicted >= 0 else size] += rows
            page.evaluation.confusion = matrix
            page.evaluation.classes = classes + [f"class {i}" for i in range(len(classes), size)]
    elif described["task"] == "regression":
        page.evaluation.pairs = read_prediction_pairs(evaluation.uri)
    if not report.baseline_metrics:
        page.notes["evaluation"] = "no baseline model: the candidate was judged against the thresholds alone"


def _lineage(page: RunPage, report: run_record.RunReport) -> None:
    for component in report.components:
        page.lineage[f"{component.name} execution"] = str(component.execution_id)
    for component, key, label in (
        (names.EXAMPLE_GEN, "examples", "examples"),
        (names.STATISTICS_GEN, "statistics", "statistics"),
        (names.TRAINER, "model", "model"),
        (names.TRAINER, "model_run", "model run (training_info.json)"),
        (names.EVALUATOR, "evaluation", "evaluation"),
        (names.EVALUATOR, "blessing", "model blessing"),
        (names.PUSHER, "pushed_model", "pushed model (record)"),
    ):
        artifact = run_record.first_output(report.component(component), key)
        if artifact is not None:
            page.lineage[f"{label} artifact {artifact.id}"] = artifact.uri
    if page.pushed_destination:
        page.lineage["served copy"] = page.pushed_destination
    if page.baseline_uri:
        page.lineage["drift baseline statistics"] = page.baseline_uri


def _mlflow_run_id(report: run_record.RunReport) -> Optional[str]:
    """MlflowStart's run id (a value artifact: a file holding the id), or None without tracking."""
    artifact = run_record.first_output(report.component(names.MLFLOW_START), "run_id")
    if artifact is None:
        return None
    text = _read_text(artifact.uri)
    return text.strip() if text else None


def _status(page: RunPage, report: run_record.RunReport) -> None:
    failed = next((c for c in report.components if c.state == "FAILED"), None)
    unfinished = next((c for c in report.components if c.state in ("running", "new", "canceled")), None)
    if failed is not None and failed.name in (names.DATA_GATE, names.EXAMPLE_GEN) and page.failure is not None:
        page.status, page.failed_component = "refused", failed.name
        page.verdict = f"data refused by {failed.name}: nothing was trained or pushed"
    elif failed is not None:
        page.status, page.failed_component = "failed", failed.name
        page.verdict = f"failed at {failed.name}" + ("; nothing was pushed" if not page.pushed else "")
    elif unfinished is not None:
        page.status = "stopped" if unfinished.state == "canceled" else "running"
        page.verdict = f"{page.status} at {unfinished.name}"
    else:
        page.status = "succeeded"
        if page.pushed:
            page.verdict = f"blessed and pushed as version {page.pushed_version}"
        elif report.blessed is False:
            page.verdict = "not blessed: nothing was pushed"
        elif page.not_pushed:
            page.verdict = f"not pushed: {page.not_pushed}"
        else:
            page.verdict = "finished; nothing was pushed"


def collect(
    metadata_path: str,
    pipeline_name: str,
    run_id: Optional[str] = None,
    *,
    settings: Optional[Mapping[str, Any]] = None,
    defaults: Optional[Mapping[str, Any]] = None,
    mlflow_run_id: Optional[str] = None,
    code_commit: Optional[str] = None,
    error: Optional[str] = None,
    skew: bool = True,
) -> Optional[RunPage]:
    """The page of `run_id` (default: the latest run of `pipeline_name`), or None when the store has no such run.

    `settings` and `defaults`: the run's settings and the defaults (nested mappings or dataclasses); the page
    lists those that differ. `error`: the message of the exception that ended the run, which ML Metadata does
    not keep for an in-process executor; without it a data gate's refusal is the message of its verdict.
    `skew`: with serving data, compute its statistics again for the skew charts (one Beam pass over it)."""
    report = run_record.read_run(metadata_path, pipeline_name, run_id)
    if report is None:
        return None
    store = run_record.open_store(metadata_path)
    executions = {e.id: e for e in store.get_executions_by_id([c.execution_id for c in report.components])}
    page = RunPage(pipeline_name=pipeline_name, run_id=report.run_id, status="", verdict="")
    if executions:
        start = min(e.create_time_since_epoch for e in executions.values())
        end = max(e.last_update_time_since_epoch for e in executions.values())
        page.started, page.finished, page.wall_s = _utc(start), _utc(end), (end - start) / 1000.0
    page.settings = changed_settings(settings, defaults)
    page.versions = versions()
    page.code_commit = code_commit
    page.mlflow_run_id = mlflow_run_id or report.mlflow_run_id or _mlflow_run_id(report)
    if page.mlflow_run_id is None:
        page.notes["mlflow"] = "this run was not tracked in MLflow"
    page.pushed_version, page.pushed_destination = report.pushed_version, report.pushed_destination
    page.not_pushed = report.not_pushed_reason
    page.components = [
        ComponentRow(c.name, STATE_NAMES.get(c.state, c.state), c.seconds, c.execution_id) for c in report.components
    ]
    page.rows = dict(report.rows)
    page.gate_checks = [line.strip() for line in (report.gate_checks or "").split(";") if line.strip()]
    failed = next((c for c in report.components if c.state == "FAILED"), None)
    if failed is not None:
        page.failure = error or _result_message(executions[failed.execution_id])
    statistics = run_record.first_output(report.component(names.STATISTICS_GEN), "statistics")
    if statistics is not None:
        for split in sorted(report.rows, key=lambda s: (s != TRAIN_SPLIT, s)):
            loaded = load_statistics(statistics.uri, split)
            if loaded is not None and loaded.datasets:
                page.splits.append(summarize_split(loaded, split))
    else:
        page.notes["data"] = "StatisticsGen did not finish in this run: no statistics"
    gate_record = report.component(names.DATA_GATE)
    if gate_record is not None:
        _gate(page, store, report, executions[gate_record.execution_id], skew)
    else:
        page.notes["gate"] = "the data gate did not run"
    trainer = report.component(names.TRAINER) or report.component(names.TRANSFORM)
    if trainer is not None:
        config = _prop(executions[trainer.execution_id], "custom_config")
        if config:
            page.features = json.loads(config).get("features")
    if report.tuning:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.tuning import tuner as tuner_lib

        page.tuning = {
            **report.tuning,
            "summary": tuner_lib.summary(report.tuning),
            "monitor": tuner_lib.monitor(report.tuning),
        }
    _training(page, report)
    _evaluation(page, report, executions)
    page.serving_check = report.serving_check
    page.edge = report.edge
    if report.serving_check is None:
        page.notes["serving"] = "no serving check ran in this run"
    if page.failure is None and failed is not None:
        page.failure = f"{failed.name} failed; its error is in the run's log"
    if not page.pushed and not page.not_pushed:
        page.not_pushed = _why_not_pushed(report, failed)
    _status(page, report)
    _lineage(page, report)
    return page


def _why_not_pushed(report: run_record.RunReport, failed: Optional[run_record.ComponentRecord]) -> str:
    if failed is not None:
        return f"the run stopped at {failed.name}"
    if report.blessing_revoked:
        return f"its blessing was revoked: {report.blessing_revoked}"
    if report.blessed is False:
        return "the Evaluator did not bless the model"
    if report.serving_check is not None and not report.serving_check.get("blessed", True):
        return "the serving check failed"
    if report.component(names.PUSHER) is None:
        return "no Pusher ran"
    return "the Pusher did not push"


def summary_line(page: RunPage) -> str:
    """One line for logs: "<pipeline> <run>: <status>: <verdict>"."""
    return f"{page.pipeline_name} {page.run_id}: {page.status}: {page.verdict}"


def features_of(page: RunPage) -> Sequence[str]:
    """The model's input columns from the feature config, in its order."""
    config = page.features or {}
    return [c for key in ("numeric", "categorical", "bucketized") for c in config.get(key, [])]
