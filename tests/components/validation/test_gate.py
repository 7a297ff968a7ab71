"""The data gate reads ExampleValidator's anomalies and stops the run on any that is not allowed."""

import os

import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.types import standard_artifacts

from tfxflow.components.validation import drift, gate

SCHEMA = """
default_environment: "TRAINING"
default_environment: "SERVING"
feature { name: "pay" type: BYTES domain: "pay"
          drift_comparator { infinity_norm { threshold: 0.1 } }
          skew_comparator { infinity_norm { threshold: 0.1 } } }
feature { name: "fare" type: FLOAT
          drift_comparator { jensen_shannon_divergence { threshold: 0.1 } } }
feature { name: "tips" type: FLOAT not_in_environment: "SERVING" }
string_domain { name: "pay" value: "Cash" value: "Card" }
"""


def _write_anomalies(base, split, features):
    anomalies = anomalies_pb2.Anomalies()
    for name, (kind, description) in features.items():
        info = anomalies.anomaly_info[name]
        reason = info.reason.add()
        reason.type = anomalies_pb2.AnomalyInfo.Type.Value(kind)
        reason.description = description
    os.makedirs(os.path.join(base, f"Split-{split}"), exist_ok=True)
    with open(os.path.join(base, f"Split-{split}", gate.ANOMALIES_FILE), "wb") as f:
        f.write(anomalies.SerializeToString())


@pytest.fixture
def anomalies_dir(tmp_path):
    base = str(tmp_path / "anomalies")
    _write_anomalies(
        base,
        "train",
        {
            "payment_type": (
                "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
                "Examples contain values missing from the schema: Bitcoin (~1%).",
            ),
            "fare": ("FLOAT_TYPE_SMALL_FLOAT", "Unexpectedly low value: -3.5."),
        },
    )
    _write_anomalies(base, "eval", {})
    return base


def test_reads_every_reason_with_split_feature_and_type(anomalies_dir):
    found = gate.read_anomalies(anomalies_dir)
    assert [(a.split, a.feature, a.type) for a in found] == [
        ("train", "fare", "FLOAT_TYPE_SMALL_FLOAT"),
        ("train", "payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES"),
    ]
    assert str(found[1]) == (
        "split 'train', feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES: "
        "Examples contain values missing from the schema: Bitcoin (~1%)."
    )


def test_allowed_types_do_not_block(anomalies_dir):
    found = gate.read_anomalies(anomalies_dir)
    blockers = gate.blocking(found, gate.parse_allowed(" FLOAT_TYPE_SMALL_FLOAT ,"))
    assert [a.feature for a in blockers] == ["payment_type"]
    assert gate.report(blockers).startswith("data gate: 1 anomaly stops the run")


def _artifact(uri, kind=standard_artifacts.ExampleAnomalies):
    artifact = kind()
    artifact.uri = uri
    return artifact


def _schema(tmp_path):
    folder = tmp_path / "schema"
    folder.mkdir(exist_ok=True)
    (folder / "schema.pbtxt").write_text(SCHEMA)
    return _artifact(str(folder), standard_artifacts.Schema)


def _frame(cash_share: float, fare_scale: float = 1.0, rows: int = 200, tips: bool = True) -> pd.DataFrame:
    cash = int(rows * cash_share)
    frame = pd.DataFrame(
        {"pay": ["Cash"] * cash + ["Card"] * (rows - cash), "fare": [fare_scale * (5.0 + i % 20) for i in range(rows)]}
    )
    if tips:
        frame["tips"] = [float(i % 3) for i in range(rows)]
    return frame


def _statistics(tmp_path, name: str, frame: pd.DataFrame):
    """A StatisticsGen-like artifact folder with the frame's TFDV statistics as the train split."""
    folder = tmp_path / name / "Split-train"
    folder.mkdir(parents=True)
    statistics = tfdv.generate_statistics_from_dataframe(frame, drift.stats_options())
    (folder / gate.STATISTICS_FILE).write_bytes(statistics.SerializeToString())
    return _artifact(str(tmp_path / name), standard_artifacts.ExampleStatistics)


def _verdict(tmp_path):
    """The gate's `verdict` output as TFX prepares a String output: an empty value file in its own folder."""
    folder = tmp_path / "DataGate" / "verdict" / "1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "value").write_text("")
    return _artifact(str(folder / "value"), standard_artifacts.String)


@pytest.fixture
def gate_inputs(tmp_path):
    return {
        "statistics": _statistics(tmp_path, "current", _frame(0.5)),
        "schema": _schema(tmp_path),
        "verdict": _verdict(tmp_path),
    }


def test_component_fails_on_blocking_anomalies(anomalies_dir, gate_inputs):
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(anomalies=_artifact(anomalies_dir), allowed_anomaly_types="", **gate_inputs)
    message = str(err.value)
    assert "2 anomalies stop the run" in message
    assert "split 'train', feature 'fare': FLOAT_TYPE_SMALL_FLOAT: Unexpectedly low value: -3.5." in message


def test_component_passes_clean_or_allowed_data(anomalies_dir, gate_inputs, tmp_path):
    clean = str(tmp_path / "clean")
    _write_anomalies(clean, "train", {})
    result = gate.DataGate.test_call(anomalies=_artifact(clean), **gate_inputs)
    assert result == {
        "anomalies_found": 0,
        "checks": "schema (ExampleValidator): 0 anomalies; drift: no blessed model yet, nothing to compare with",
    }
    allowed = "FLOAT_TYPE_SMALL_FLOAT,ENUM_TYPE_UNEXPECTED_STRING_VALUES"
    result = gate.DataGate.test_call(anomalies=_artifact(anomalies_dir), allowed_anomaly_types=allowed, **gate_inputs)
    assert result["anomalies_found"] == 2


def _clean_anomalies(tmp_path):
    clean = str(tmp_path / "clean")
    _write_anomalies(clean, "train", {})
    return _artifact(clean)


def _blessing(tmp_path):
    return _artifact(str(tmp_path / "blessing"), standard_artifacts.ModelBlessing)


def test_drift_within_threshold_passes_and_reports_the_largest_distance(tmp_path, gate_inputs):
    baseline = _statistics(tmp_path, "baseline", _frame(0.45))
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path),
        baseline_statistics=baseline,
        baseline_blessing=_blessing(tmp_path),
        **gate_inputs,
    )
    assert result["anomalies_found"] == 0
    assert (
        "drift vs. the last blessed model's data: 2 features compared (200 vs. 200 rows), largest pay "
        "L-infinity distance 0.0500 (threshold 0.1, p = 0.32)"
    ) in result["checks"]


def test_a_difference_within_sampling_noise_is_not_refused(tmp_path):
    # 40 rows: 20 in cash now, 14 before. A share 15 points apart is over the threshold, but at this size a
    # chi-squared test gives p = 0.17: such a difference is common between two samples of one distribution.
    inputs = {
        "statistics": _statistics(tmp_path, "current", _frame(0.5, rows=40)),
        "schema": _schema(tmp_path),
        "verdict": _verdict(tmp_path),
    }
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path),
        baseline_blessing=_blessing(tmp_path),
        baseline_statistics=_statistics(tmp_path, "baseline", _frame(0.35, rows=40)),
        **inputs,
    )
    assert result["anomalies_found"] == 0
    assert (
        "largest pay L-infinity distance 0.1500 (threshold 0.1, p = 0.17, within sampling noise at these sizes)"
    ) in result["checks"]


def test_drift_past_a_threshold_stops_the_run(tmp_path, gate_inputs):
    baseline = _statistics(tmp_path, "baseline", _frame(0.9, fare_scale=4.0))
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(
            anomalies=_clean_anomalies(tmp_path),
            baseline_statistics=baseline,
            baseline_blessing=_blessing(tmp_path),
            **gate_inputs,
        )
    message = str(err.value)
    assert "2 anomalies stop the run" in message
    # feature, measure, value, threshold, bins, test, sample sizes and where the shares moved most
    assert (
        "split 'train vs. the last blessed model's data (drift)', feature 'pay': COMPARATOR_L_INFTY_HIGH: "
        "L-infinity distance 0.4000 > threshold 0.1 on 2 bins (its values); chi-squared p = 2.6e-18 < 5e-05; "
        "200 baseline rows vs. 200 new; largest change: 10.0% -> 50.0% of rows in 'Card'"
    ) in message
    assert (
        "feature 'fare': COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH: Jensen-Shannon divergence 0.7583 > "
        "threshold 0.1 on 10 bins (the baseline's deciles)"
    ) in message
    assert "(drift and skew: each feature is put in common bins (the baseline's deciles for numbers" in message
    assert err.value.drifted == ["fare", "pay"]
    # The verdict it wrote for the run page: in the output's folder, which TFX keeps when the execution fails.
    folder = os.path.dirname(gate_inputs["verdict"].uri)
    os.remove(gate_inputs["verdict"].uri)  # what TFX removes of a failed execution's String output
    stopped = gate.read_verdict(folder)
    assert (stopped["passed"], stopped["message"], stopped["allowed"]) == (False, message, [])
    assert [(a["feature"], a["type"]) for a in stopped["stopped_by"]] == [
        ("pay", "COMPARATOR_L_INFTY_HIGH"),
        ("fare", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH"),
    ]
    assert {(f["kind"], f["feature"], f["shifted"]) for f in stopped["findings"]} == {
        ("drift", "pay", True),
        ("drift", "fare", True),
    }
    assert stopped["baseline"] == "the last blessed model's data"
    # drift past a threshold is allowed like any other anomaly type
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path),
        baseline_statistics=baseline,
        **gate_inputs,
        allowed_anomaly_types="COMPARATOR_L_INFTY_HIGH,COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH",
    )
    assert result["anomalies_found"] == 2
    passed = gate.read_verdict(folder)
    assert (passed["passed"], passed["message"], passed["stopped_by"]) == (True, None, [])
    assert [a["feature"] for a in passed["allowed"]] == ["pay", "fare"]
    assert open(gate_inputs["verdict"].uri, encoding="utf-8").read() == "passed"


def test_a_baseline_without_a_blessing_is_the_accepted_data(tmp_path, gate_inputs):
    baseline = _statistics(tmp_path, "baseline", _frame(0.5))
    result = gate.DataGate.test_call(anomalies=_clean_anomalies(tmp_path), baseline_statistics=baseline, **gate_inputs)
    assert (
        "drift vs. the data accepted as the baseline: 2 features compared (200 vs. 200 rows), largest pay "
        "L-infinity distance 0.0000"
    ) in result["checks"]


@pytest.mark.integration
def test_serving_data_is_validated_and_compared_for_skew(tmp_path, gate_inputs):
    serving = tmp_path / "serving"
    serving.mkdir()
    frame = _frame(0.1, tips=False)
    frame.loc[0, "pay"] = "Bitcoin"
    frame.to_csv(serving / "requests.csv", index=False)
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(anomalies=_clean_anomalies(tmp_path), serving_data_root=str(serving), **gate_inputs)
    message = str(err.value)
    # the label source is absent at serving: not an anomaly; an unseen category and the skew are
    assert "tips" not in message
    assert "split 'serving', feature 'pay': ENUM_TYPE_UNEXPECTED_STRING_VALUES" in message
    assert "split 'train vs. serving (skew)', feature 'pay': COMPARATOR_L_INFTY_HIGH" in message
    assert (
        "(skew vs. serving data: 1 feature compared (200 vs. 200 rows), largest pay L-infinity distance 0.4" in message
    )
    assert err.value.drifted == []  # skew is not drift: accepting a baseline would not answer it


def _served(tmp_path, name, version, frame=None):
    """A ServedBaseline statistics output: what the serving directory held."""
    import json

    folder = tmp_path / name
    if frame is not None:
        _statistics(tmp_path, name, frame)
    folder.mkdir(exist_ok=True)
    (folder / "served_baseline.json").write_text(
        json.dumps({"model_base": "/serving/models/taxi", "version": version, "statistics": frame is not None})
    )
    return _artifact(str(folder), standard_artifacts.ExampleStatistics)


def test_served_baseline_names_the_version_or_says_why_there_is_none(tmp_path, gate_inputs):
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path), **gate_inputs, baseline_statistics=_served(tmp_path, "none", None)
    )
    assert "drift: no model served yet under /serving/models/taxi, nothing to compare with" in result["checks"]
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path), **gate_inputs, baseline_statistics=_served(tmp_path, "old", 17)
    )
    assert "served version 17 carries no statistics of its data" in result["checks"]
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path),
        **gate_inputs,
        baseline_statistics=_served(tmp_path, "v18", 18, _frame(0.45)),
    )
    assert "drift vs. the data of served version 18: 2 features compared" in result["checks"]
    with pytest.raises(gate.DataGateError, match="the data of served version 19") as err:
        gate.DataGate.test_call(
            anomalies=_clean_anomalies(tmp_path),
            **gate_inputs,
            baseline_statistics=_served(tmp_path, "v19", 19, _frame(0.9, fare_scale=4.0)),
        )
    # Kubeflow has no `tfxflow accept-data`: the refusal says how to accept the data there.
    assert "run once with allowed_anomaly_types=COMPARATOR_" in str(err.value)


def _examples_with_counts(tmp_path, split_rows):
    folder = tmp_path / "examples"
    folder.mkdir()
    (folder / "ingest.json").write_text(
        '{"rows_read": %d, "split_rows": {%s}}'
        % (sum(split_rows.values()), ", ".join(f'"{k}": {v}' for k, v in split_rows.items()))
    )
    return _artifact(str(folder), standard_artifacts.Examples)


def test_rows_written_must_be_the_rows_the_statistics_count(tmp_path, gate_inputs):
    """200 rows in the statistics' train split (the fixture's frame)."""
    result = gate.DataGate.test_call(
        anomalies=_clean_anomalies(tmp_path), **gate_inputs, examples=_examples_with_counts(tmp_path, {"train": 200})
    )
    assert result["checks"].startswith("row counts: 200 read = train 200 written = StatisticsGen's; ")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(
            anomalies=_clean_anomalies(other), **gate_inputs, examples=_examples_with_counts(other, {"train": 260})
        )
    assert "row counts differ: split 'train': ExampleGen wrote 260 rows, StatisticsGen counted 200" in str(err.value)
    assert "tensorflow/data-validation#247" in str(err.value)


def test_values_missing_from_the_domain_are_quoted_and_padding_is_named(tmp_path):
    # TFDV's own validation of data whose categories are padded with spaces (a fixed-width export).
    frame = _frame(0.5)
    frame.loc[:39, "pay"] = " Cash "
    frame.loc[40:44, "pay"] = "Bitcoin"
    statistics = _statistics(tmp_path, "padded", frame)
    schema = tfdv.load_schema_text(_schema(tmp_path).uri + "/schema.pbtxt")
    found = tfdv.validate_statistics(gate._load_split(statistics.uri, "train"), schema, environment="TRAINING")
    anomalies = str(tmp_path / "anomalies")
    os.makedirs(os.path.join(anomalies, "Split-train"))
    with open(os.path.join(anomalies, "Split-train", gate.ANOMALIES_FILE), "wb") as f:
        f.write(found.SerializeToString())
    # TFDV's words cannot show the spaces.
    assert " Cash " in found.anomaly_info["pay"].reason[0].description
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(
            anomalies=_artifact(anomalies), statistics=statistics, schema=_schema(tmp_path), verdict=_verdict(tmp_path)
        )
    assert (
        "split 'train', feature 'pay': ENUM_TYPE_UNEXPECTED_STRING_VALUES: values missing from the schema's "
        "domain: ' Cash ' (40 rows), 'Bitcoin' (5 rows); ' Cash ' is a known value with spaces around: trim the "
        "spaces in the data (the export or the files), or add the padded form to the domain"
    ) in str(err.value)
