"""The data gate: stops the run when ExampleValidator found anomalies the configuration does not allow.

TFX's ExampleValidator records anomalies but nothing downstream reads them, so a run trains on bad data
anyway. This component runs right after it; Transform waits for it, so when it fails nothing downstream
runs and nothing is pushed.

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.
"""

import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple, TypedDict

from absl import logging
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from tfxflow.components import names
from tfxflow.components.errors import DataError
from tfxflow.components.validation import drift, folder_statistics
from tfxflow.components.validation.baseline import served_info

ANOMALIES_FILE = "SchemaDiff.pb"
STATISTICS_FILE = "FeatureStats.pb"
DRIFT_TYPES = {anomaly_type for _, anomaly_type in drift.MEASURES.values()}
DRIFT = "(drift)"  # ends the split name of a drift anomaly
SKEW = "(skew)"  # ends the split name of a skew anomaly
BLESSED_BASELINE = "the last blessed model's data"
ACCEPTED_BASELINE = "the data accepted as the baseline"  # by `tfxflow accept-data`
SERVED_BASELINE = "the data of served version"  # ServedBaseline (Kubeflow)
VERDICT_FILE = "verdict.json"
VERDICT_OUTPUT = "verdict"  # the gate's output key


class DataGateError(DataError):
    """Anomalies that the configuration does not allow; the message lists split, feature, type and why.
    `drifted`: the features that drifted from the baseline (their refusal can be answered by accepting
    the data as the new baseline)."""

    def __init__(self, message: str, drifted: Sequence[str] = ()):
        super().__init__(message)
        self.drifted = list(drifted)


@dataclasses.dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str  # "" for a dataset-level anomaly
    type: str
    description: str

    def __str__(self) -> str:
        where = f"feature '{self.feature}'" if self.feature else "the dataset"
        return f"split '{self.split}', {where}: {self.type}: {self.description}"


def anomaly_list(anomalies: anomalies_pb2.Anomalies, split: str) -> List[Anomaly]:
    """Every reason in an Anomalies proto (features, then the dataset), under the name `split`."""
    infos = sorted(anomalies.anomaly_info.items())
    if anomalies.HasField("dataset_anomaly_info"):
        infos.append(("", anomalies.dataset_anomaly_info))
    found = []
    for feature, info in infos:
        for reason in info.reason:
            kind = anomalies_pb2.AnomalyInfo.Type.Name(reason.type)
            found.append(Anomaly(split, feature, kind, (reason.description or info.description).strip()))
    return found


def read_anomalies(anomalies_uri: str) -> List[Anomaly]:
    """Every anomaly reason recorded in an ExampleAnomalies artifact, split by split."""
    found = []
    for entry in sorted(fileio.listdir(anomalies_uri)):
        path = os.path.join(anomalies_uri, entry.rstrip("/"), ANOMALIES_FILE)
        if not (names.split_of(entry) and fileio.exists(path)):
            continue
        anomalies = anomalies_pb2.Anomalies()
        with fileio.open(path, "rb") as f:
            anomalies.ParseFromString(f.read())
        found += anomaly_list(anomalies, names.split_of(entry))
    return found


def blocking(anomalies: Sequence[Anomaly], allowed_types: Sequence[str]) -> List[Anomaly]:
    """The anomalies whose type is not in `allowed_types`."""
    allowed = set(allowed_types)
    return [a for a in anomalies if a.type not in allowed]


def _anomalies(count: int) -> str:
    return f"{count} anomal{'y' if count == 1 else 'ies'}"


def report(blockers: Sequence[Anomaly], notes: Sequence[str] = ()) -> str:
    lines = [
        f"data gate: {_anomalies(len(blockers))} {'stops' if len(blockers) == 1 else 'stop'} the run "
        "(nothing was trained or pushed):"
    ]
    lines += [f"  - {a}" for a in blockers]
    lines += [f"  ({note})" for note in notes]
    if any(a.type in DRIFT_TYPES for a in blockers):
        lines.append(f"  (drift and skew: {drift.HOW})")
    return "\n".join(lines)


def parse_allowed(text: str) -> List[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _load_split(statistics_uri: str, split: str):
    import tensorflow_data_validation as tfdv

    return tfdv.load_stats_binary(os.path.join(names.split_dir(statistics_uri, split), STATISTICS_FILE))


UNEXPECTED_VALUES = "ENUM_TYPE_UNEXPECTED_STRING_VALUES"
LISTED_VALUES = 10


def explain_values(anomaly: Anomaly, schema, statistics) -> Anomaly:
    """`anomaly` (values missing from the schema's domain) with the values quoted, so that spaces show, and
    counted from `statistics` (the split's); a known value with spaces around it is named as such."""
    import tensorflow_data_validation as tfdv

    feature = next((f for f in statistics.datasets[0].features if f.path.step == [anomaly.feature]), None)
    try:
        domain = set(tfdv.get_domain(schema, anomaly.feature).value)
    except ValueError:  # no string domain: TFDV's words stand
        return anomaly
    if feature is None or not feature.string_stats.rank_histogram.buckets:
        return anomaly
    unexpected = [
        (b.label, int(b.sample_count)) for b in feature.string_stats.rank_histogram.buckets if b.label not in domain
    ]
    if not unexpected:
        return anomaly
    listed = ", ".join(f"{value!r} ({rows:,} rows)" for value, rows in unexpected[:LISTED_VALUES])
    more = f" and {len(unexpected) - LISTED_VALUES} more" if len(unexpected) > LISTED_VALUES else ""
    text = f"values missing from the schema's domain: {listed}{more}"
    padded = [value for value, _ in unexpected if value != value.strip() and value.strip() in domain]
    if padded:
        text += (
            f"; {', '.join(repr(v) for v in padded[:LISTED_VALUES])} "
            f"{'is a known value' if len(padded) == 1 else 'are known values'} with spaces around: "
            "trim the spaces in the data (the export or the files), or add the padded form to the domain"
        )
    return dataclasses.replace(anomaly, description=text)


def _compared(
    baseline, current, schema, kind: str, where: str, what: str, findings: Optional[List[dict]] = None
) -> Tuple[List[Anomaly], List[str]]:
    """Drift or skew of `current` vs. `baseline` on common bins (components/validation/drift.py): the anomalies and the
    check's account, one line, plus one per feature not compared. `findings` gets one `finding` per feature."""
    comparisons, skipped = drift.compare_statistics(baseline, current, schema, kind)
    found = [Anomaly(where, c.feature, c.anomaly_type, str(c)) for c in comparisons if c.shifted]
    if findings is not None:
        findings += [finding(kind, c) for c in comparisons]
    return found, [drift.summary(comparisons, what)] + [f"{what}: {note}" for note in skipped]


def finding(kind: str, comparison: drift.Comparison) -> dict:
    """One feature's drift or skew as the gate judged it (a verdict's `findings`)."""
    return {
        "kind": kind,
        "feature": comparison.feature,
        "measure": comparison.measure,
        "value": comparison.value,
        "threshold": comparison.threshold,
        "p_value": comparison.p_value,
        "over_threshold": comparison.over_threshold,
        "shifted": comparison.shifted,
        "text": str(comparison),
    }


def compare(
    statistics_uri: str,
    schema,
    baseline_uri: Optional[str] = None,
    serving_stats=None,
    split: str = "train",
    baseline_name: str = BLESSED_BASELINE,
    no_baseline: str = "no blessed model yet, nothing to compare with",
    findings: Optional[List[dict]] = None,
) -> Tuple[List[Anomaly], List[str]]:
    """Drift of `split` vs. the baseline's same split (`baseline_name` says what the baseline is), and skew vs.
    serving statistics, with the schema's comparators measured on common bins. Also validates the serving
    statistics against the SERVING environment. Returns the anomalies and one line per check done; `findings`
    gets each feature's comparison."""
    import tensorflow_data_validation as tfdv

    current = _load_split(statistics_uri, split)
    found, notes = [], []
    if baseline_uri and not fileio.exists(os.path.join(names.split_dir(baseline_uri, split), STATISTICS_FILE)):
        notes.append(f"drift: the baseline {baseline_uri} has no '{split}' split, not compared")
    elif baseline_uri:
        anomalies, lines = _compared(
            _load_split(baseline_uri, split),
            current,
            schema,
            "drift",
            f"{split} vs. {baseline_name} {DRIFT}",
            f"drift vs. {baseline_name}",
            findings,
        )
        found += anomalies
        notes += lines
    else:
        notes.append(f"drift: {no_baseline}")
    if serving_stats is not None:
        found += anomaly_list(tfdv.validate_statistics(serving_stats, schema, environment="SERVING"), "serving")
        anomalies, lines = _compared(
            current, serving_stats, schema, "skew", f"{split} vs. serving {SKEW}", "skew vs. serving data", findings
        )
        found += anomalies
        notes += lines
    return found, notes


def check_rows(examples_uri: str, statistics_uri: str) -> Tuple[Optional[str], str]:
    """(a refusal or None, a note): the rows ExampleGen recorded per split against the rows StatisticsGen's
    statistics count. TFDV has lost rows without an error in multi-process Beam
    (tensorflow/data-validation#247); statistics of part of the data are no basis for the gate's checks."""
    # lazy: it imports TFMA, TFDV and tf.Transform
    from tfxflow.components.ingest import csv_input

    counts = csv_input.read_rows(examples_uri)
    if counts is None:
        return None, "row counts: not recorded by this ExampleGen"
    seen = {
        split: int(_load_split(statistics_uri, split).datasets[0].num_examples)
        for split in counts["split_rows"]
        if fileio.exists(os.path.join(names.split_dir(statistics_uri, split), STATISTICS_FILE))
    }
    written = ", ".join(f"{split} {rows:,}" for split, rows in counts["split_rows"].items())
    note = f"row counts: {counts['rows_read']:,} read = {written} written = StatisticsGen's"
    wrong = {
        split: (rows, seen[split])
        for split, rows in counts["split_rows"].items()
        if split in seen and seen[split] != rows
    }
    if not wrong:
        return None, note
    details = "; ".join(
        f"split '{split}': ExampleGen wrote {rows:,} rows, StatisticsGen counted {got:,}"
        for split, (rows, got) in wrong.items()
    )
    return (
        f"row counts differ: {details}. Statistics of part of the data are no basis for the data checks "
        "(TFDV has lost rows in multi-process Beam: tensorflow/data-validation#247); nothing was trained or "
        "pushed. Run again; if it recurs, run with --beam-mode in_memory."
    ), note


def _baseline(statistics, blessing) -> Tuple[Optional[str], str, str]:
    """The drift baseline's folder, what it is, and what to say when there is none."""
    served = served_info(statistics.uri) if statistics else None
    if served is None:
        return (
            statistics.uri if statistics else None,
            BLESSED_BASELINE if blessing else ACCEPTED_BASELINE,
            "no blessed model yet, nothing to compare with",
        )
    if not served["version"]:
        return None, "", f"no model served yet under {served['model_base']}, nothing to compare with"
    if not served["statistics"]:
        return (
            None,
            "",
            (
                f"served version {served['version']} carries no statistics of its data (pushed by an "
                "older release), not compared"
            ),
        )
    return statistics.uri, f"{SERVED_BASELINE} {served['version']}", ""


def verdict_record(
    found: Sequence[Anomaly],
    allowed_types: Sequence[str],
    checks: Sequence[str],
    findings: Sequence[dict] = (),
    message: Optional[str] = None,
    baseline: str = "",
) -> dict:
    """The gate's verdict as it writes it (VERDICT_FILE): passed or stopped, the message that stopped the run,
    the anomalies that stopped it and those its configuration allowed, each drift/skew comparison and the
    checks' account. A refusal by row counts stops the run with no anomaly: `message` says why."""
    allowed = set(allowed_types)
    return {
        "passed": message is None,
        "message": message,
        "checks": list(checks),
        "allowed_types": list(allowed_types),
        "stopped_by": [dataclasses.asdict(a) for a in found if a.type not in allowed],
        "allowed": [dataclasses.asdict(a) for a in found if a.type in allowed],
        "findings": list(findings),
        "baseline": baseline,
    }


def verdict_folder(verdict_uri: str) -> str:
    """Where VERDICT_FILE lies for the `verdict` output at `verdict_uri`. The output is a String: TFX keeps its
    value in `<node dir>/verdict/<execution id>/value` and, when the execution fails, deletes that file only, so
    the verdict of a run the gate stopped outlives the failure in the folder."""
    return os.path.dirname(verdict_uri)


def write_verdict(verdict_uri: str, record: dict) -> None:
    with fileio.open(os.path.join(verdict_folder(verdict_uri), VERDICT_FILE), "w") as f:
        f.write(json.dumps(record, indent=1))
    with fileio.open(verdict_uri, "w") as f:
        f.write("passed" if record["passed"] else "stopped")


def read_verdict(folder: str) -> Optional[dict]:
    """The verdict the gate wrote in `folder` (verdict_folder), or None where there is none."""
    path = os.path.join(folder, VERDICT_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path, "r") as f:
        return json.loads(f.read())


class GateResult(TypedDict):
    anomalies_found: int  # all of them allowed, or the gate would have failed
    checks: str  # what was compared, one line per check


@component
def DataGate(  # noqa: N802 (TFX's function components are named like classes)
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    verdict: OutputArtifact[standard_artifacts.String],
    examples: InputArtifact[standard_artifacts.Examples] = None,
    baseline_statistics: InputArtifact[standard_artifacts.ExampleStatistics] = None,
    baseline_blessing: InputArtifact[standard_artifacts.ModelBlessing] = None,
    allowed_anomaly_types: Parameter[str] = "",
    serving_data_root: Parameter[str] = "",
    serving_data_fingerprint: Parameter[str] = "",
) -> GateResult:
    """Fails with DataGateError when an anomaly's type is not in `allowed_anomaly_types` (comma-separated
    AnomalyInfo.Type names, e.g. "FEATURE_TYPE_LOW_NUMBER_VALUES").

    Besides ExampleValidator's anomalies it checks drift of the training split against
    `baseline_statistics` (the data of the model `baseline_blessing` blessed; without a blessing, data accepted
    with `tfxflow accept-data`) and, given `serving_data_root` (CSV files without the label), the serving data
    against the schema's SERVING environment and skew between training and serving; the thresholds are
    the schema's `drift_comparator` / `skew_comparator`. `serving_data_fingerprint` only makes the cache
    notice changed serving files.

    First of all, with `examples`, the rows ExampleGen recorded must be the rows the statistics count.

    Passed or stopped, it writes its verdict (`verdict_record`) for the run page to read.
    """
    del serving_data_fingerprint
    from tfx.utils import io_utils

    allowed_types = parse_allowed(allowed_anomaly_types)
    rows_note = None
    if examples is not None:
        refusal, rows_note = check_rows(examples.uri, statistics.uri)
        if refusal:
            message = f"data gate: {refusal}"
            write_verdict(verdict.uri, verdict_record([], allowed_types, [rows_note], message=message))
            raise DataGateError(message)

    schema_proto = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema.uri))
    serving_stats = None
    if serving_data_root:
        serving_stats = folder_statistics.csv_statistics(serving_data_root, schema_proto)
    found = [
        explain_values(a, schema_proto, _load_split(statistics.uri, a.split)) if a.type == UNEXPECTED_VALUES else a
        for a in read_anomalies(anomalies.uri)
    ]
    baseline_uri, baseline_name, no_baseline = _baseline(baseline_statistics, baseline_blessing)
    findings: List[dict] = []
    extra, notes = compare(
        statistics.uri,
        schema_proto,
        baseline_uri,
        serving_stats,
        baseline_name=baseline_name,
        no_baseline=no_baseline,
        findings=findings,
    )
    found += extra
    notes.insert(0, f"schema (ExampleValidator): {_anomalies(len(found) - len(extra))}")
    if rows_note:
        notes.insert(0, rows_note)
    for note in notes:
        logging.info("data gate: %s", note)
    blockers = blocking(found, allowed_types)
    message = None
    if blockers:
        message = report(blockers, notes)
        drift_types = sorted({a.type for a in blockers if a.split.endswith(DRIFT)})
        if drift_types and baseline_name.startswith(SERVED_BASELINE):
            # No metadata store to mark accepted data in (Kubeflow): a run that lets the drift through and
            # pushes makes its data the baseline.
            message += (
                "\n  If the new data is right (the world changed, not the feed), run once with "
                f"allowed_anomaly_types={','.join(drift_types)}: its model, once pushed, makes this data "
                "the drift baseline."
            )
    compared_with = baseline_name if baseline_uri else ""
    write_verdict(verdict.uri, verdict_record(found, allowed_types, notes, findings, message, compared_with))
    if message is not None:
        raise DataGateError(message, drifted=sorted({a.feature for a in blockers if a.split.endswith(DRIFT)}))
    return {"anomalies_found": len(found), "checks": "; ".join(notes)}
