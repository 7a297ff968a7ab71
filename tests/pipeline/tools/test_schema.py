"""`infer-schema` writes a schema, statistics and a feature config draft that the pipeline accepts."""

import os

import pytest
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tests import helpers
from tfxflow.components import drift
from tfxflow.components.model.features import FeatureConfig
from tfxflow.pipeline.config import schema_columns
from tfxflow.pipeline.tools import schema as schema_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def inferred(tmp_path_factory):
    base = tmp_path_factory.mktemp("infer")
    data = helpers.write_taxi_sample(str(base / "data"), rows=300)
    out = str(base / "out")
    return data, out, schema_tool.infer(data, out, label_column="tips")


def test_writes_schema_statistics_and_feature_config(inferred):
    _, out, result = inferred
    assert result.rows == 300
    assert result.columns["fare"] == "FLOAT" and result.columns["payment_type"] == "BYTES"
    assert result.columns["trip_start_hour"] == "INT"
    assert sorted(os.path.basename(p) for p in result.written) == [
        "features.yaml",
        "inferred_schema.pbtxt",
        "schema.pbtxt",
        "statistics.pb",
    ]
    schema = schema_pb2.Schema()
    with open(os.path.join(out, "schema.pbtxt"), encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    tips = next(f for f in schema.feature if f.name == "tips")
    assert list(tips.not_in_environment) == ["SERVING"]
    assert list(schema.default_environment) == ["TRAINING", "SERVING"]
    # no fixed shape: empty cells stay valid
    assert not any(f.HasField("shape") for f in schema.feature)
    stats = tfdv.load_stats_binary(os.path.join(out, "statistics.pb"))
    assert stats.datasets[0].num_examples == 300


def test_feature_config_draft_is_valid_for_the_schema(inferred):
    _, out, _ = inferred
    config = FeatureConfig.load(os.path.join(out, "features.yaml"))
    config.check_columns(schema_columns(os.path.join(out, "schema.pbtxt")), "the inferred schema")
    assert config.label.column == "tips"
    assert "fare" in config.numeric and "payment_type" in config.categorical
    assert "trip_start_hour" in config.categorical  # 24 values: a category, not a number
    assert "tips" not in config.feature_columns


def _schema(path):
    schema = schema_pb2.Schema()
    text_format.Parse(_read(path), schema)
    return schema


def test_schema_draft_watches_every_feature_for_drift_and_skew(inferred):
    _, out, _ = inferred
    draft = {f.name: f for f in _schema(os.path.join(out, "schema.pbtxt")).feature}
    for comparator in ("drift_comparator", "skew_comparator"):
        assert getattr(draft["fare"], comparator).jensen_shannon_divergence.threshold == pytest.approx(0.01)
        assert getattr(draft["trip_start_hour"], comparator).jensen_shannon_divergence.threshold == pytest.approx(0.01)
        assert getattr(draft["payment_type"], comparator).infinity_norm.threshold == pytest.approx(0.05)
        assert not draft["tips"].HasField(comparator)  # the label
    assert "remove them from columns that change by design" in _read(os.path.join(out, "schema.pbtxt"))
    # TFDV's raw inference is kept as it was
    assert not any(f.HasField("drift_comparator") for f in _schema(os.path.join(out, "inferred_schema.pbtxt")).feature)
    # the gate reads the draft: the data against itself compares every feature but the label, at distance 0
    statistics = tfdv.load_stats_binary(os.path.join(out, "statistics.pb"))
    comparisons, _ = drift.compare_statistics(
        statistics, statistics, _schema(os.path.join(out, "schema.pbtxt")), "drift"
    )
    assert len(comparisons) == len(draft) - 1 and not any(c.value for c in comparisons)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_curated_files_are_kept_unless_forced(inferred):
    data, out, _ = inferred
    curated = os.path.join(out, "schema.pbtxt")
    with open(curated, "a", encoding="utf-8") as f:
        f.write("# curated\n")
    again = schema_tool.infer(data, out, label_column="tips")
    assert curated in again.kept and "# curated" in _read(curated)
    forced = schema_tool.infer(data, out, label_column="tips", force=True)
    assert curated in forced.written and "# curated" not in _read(curated)


def test_cli_refuses_bad_csv_and_unknown_label(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "data.csv").write_bytes(b"a,b\n1,2\n3\n")
    result = helpers.run_cli("infer-schema", "--data-root", str(bad), "--out", str(tmp_path / "out"), timeout=300)
    assert result.returncode == 3
    assert f"{bad}/data.csv line 3: wrong number of fields: 1 fields, the header has 2" in result.stderr
    assert "Traceback" not in result.stderr
    good = tmp_path / "good"
    good.mkdir()
    (good / "data.csv").write_text("a,b\n1,x\n2,y\n")
    result = helpers.run_cli(
        "infer-schema", "--data-root", str(good), "--out", str(tmp_path / "out"), "--label", "c", timeout=300
    )
    assert result.returncode == 2
    assert f"error: --label c: no such column in {good}; it has ['a', 'b']" in result.stderr
