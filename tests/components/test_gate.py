"""The data gate reads ExampleValidator's anomalies and stops the run on any that is not allowed."""

import os

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.types import standard_artifacts

from components import gate


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
    _write_anomalies(base, "train", {
        "payment_type": ("ENUM_TYPE_UNEXPECTED_STRING_VALUES", "Examples contain values missing from the schema: "
                                                               "Bitcoin (~1%)."),
        "fare": ("FLOAT_TYPE_SMALL_FLOAT", "Unexpectedly low value: -3.5."),
    })
    _write_anomalies(base, "eval", {})
    return base


def test_reads_every_reason_with_split_feature_and_type(anomalies_dir):
    found = gate.read_anomalies(anomalies_dir)
    assert [(a.split, a.feature, a.type) for a in found] == [
        ("train", "fare", "FLOAT_TYPE_SMALL_FLOAT"),
        ("train", "payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES"),
    ]
    assert str(found[1]) == ("split 'train', feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES: "
                             "Examples contain values missing from the schema: Bitcoin (~1%).")


def test_allowed_types_do_not_block(anomalies_dir):
    found = gate.read_anomalies(anomalies_dir)
    blockers = gate.blocking(found, gate.parse_allowed(" FLOAT_TYPE_SMALL_FLOAT ,"))
    assert [a.feature for a in blockers] == ["payment_type"]
    assert gate.report(blockers).startswith("data gate: 1 anomaly stop the run")


def _artifact(uri):
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = uri
    return artifact


def test_component_fails_on_blocking_anomalies(anomalies_dir):
    with pytest.raises(gate.DataGateError) as err:
        gate.DataGate.test_call(anomalies=_artifact(anomalies_dir), allowed_anomaly_types="")
    message = str(err.value)
    assert "2 anomalies stop the run" in message
    assert "split 'train', feature 'fare': FLOAT_TYPE_SMALL_FLOAT: Unexpectedly low value: -3.5." in message


def test_component_passes_clean_or_allowed_data(anomalies_dir, tmp_path):
    clean = str(tmp_path / "clean")
    _write_anomalies(clean, "train", {})
    assert gate.DataGate.test_call(anomalies=_artifact(clean)) == {"anomalies_found": 0}
    allowed = "FLOAT_TYPE_SMALL_FLOAT,ENUM_TYPE_UNEXPECTED_STRING_VALUES"
    assert gate.DataGate.test_call(anomalies=_artifact(anomalies_dir),
                                   allowed_anomaly_types=allowed) == {"anomalies_found": 2}
