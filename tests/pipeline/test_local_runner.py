"""The local runner's helpers: content-addressed schema staging, file fingerprints, the failure summary."""

import io
import os

from components.gate import DataGateError
from pipeline import config as config_lib
from pipeline.local_runner import ComponentTiming, print_failure
from pipeline.staging import files_fingerprint, stage_schema


def test_staged_schema_path_changes_exactly_when_the_content_does(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    schema.write_text('feature { name: "a" type: INT }\n')
    root = str(tmp_path / "root")
    first = stage_schema(str(schema), root)
    assert stage_schema(str(schema), root) == first
    with open(first, encoding="utf-8") as f:
        assert f.read() == schema.read_text()
    schema.write_text('feature { name: "a" type: FLOAT }\n')
    second = stage_schema(str(schema), root)
    assert second != first and os.path.basename(second) == "schema.pbtxt"
    with open(second, encoding="utf-8") as f:
        assert "FLOAT" in f.read()


def test_fingerprint_follows_files_added_and_changed(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("x\n1\n")
    one = files_fingerprint([str(a)])
    assert files_fingerprint([str(a)]) == one
    b = tmp_path / "b.csv"
    b.write_text("x\n2\n")
    two = files_fingerprint([str(a), str(b)])
    assert two != one
    a.write_text("x\n10\n")
    assert files_fingerprint([str(a), str(b)]) != two


def test_failure_summary_names_where_the_data_was_refused(tmp_path):
    config = config_lib.build_run_config(environ={}, home=str(tmp_path))
    out = io.StringIO()
    timings = [ComponentTiming("CsvExampleGen", "cached", 0.0), ComponentTiming("DataGate", "FAILED", 0.25)]
    print_failure(DataGateError("data gate: 1 anomaly"), timings, 2.0, config, out)
    text = out.getvalue()
    assert "Run of tfxflow-taxi: stopped at DataGate after 2.0 s" in text
    assert "DataGate" in text and "FAILED       0.2  12.5%" in text
    assert "data:           refused by DataGate (the reasons follow)" in text
    assert f"pushed:         no; the served model is untouched: no version in {tmp_path}/serving/taxi yet" in text
