"""The local runner's helpers: content-addressed schema staging, file fingerprints, the failure summary."""

import io
import logging
import os
import re
import threading
import time

import pytest

from tfxflow.components.validation.gate import DataGateError
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline.heartbeat import format_elapsed
from tfxflow.pipeline.local import runner
from tfxflow.pipeline.local.runner import NAME_WIDTH, ComponentProgress, ComponentTiming, print_failure
from tfxflow.pipeline.staging import files_fingerprint, stage_schema


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


class _FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(msg: str, *args) -> logging.LogRecord:
    return logging.LogRecord("absl", logging.INFO, __file__, 1, msg, args, None)


def test_heartbeat_line_names_component_elapsed_rows_and_memory():
    from tfxflow.components import progress

    clock, out = _FakeClock(), io.StringIO()
    tracker = ComponentProgress(out=out, clock=clock, total=14, memory=lambda: 812 * 2**20)
    for name in ("CsvExampleGen", "ImportSchemaGen", "StatisticsGen", "ExampleValidator"):
        tracker.emit(_record("Component %s is running.", name))
        tracker.emit(_record("Component %s is finished.", name))
    tracker.emit(_record("Component %s is running.", "Transform"))
    assert tracker.heartbeat.line() == f"[5/14] {'Transform':<{NAME_WIDTH}} ... 0s elapsed, 812 MB resident"
    progress.start("rows")
    progress.advance(1_000_000)
    progress.advance(234_567)
    clock.now += 90.4
    assert (
        tracker.heartbeat.line()
        == f"[5/14] {'Transform':<{NAME_WIDTH}} ... 1m30s elapsed, 1,234,567 rows, 812 MB resident"
    )
    clock.now += 7200
    assert "2h01m elapsed" in tracker.heartbeat.line()
    tracker.emit(_record("Component %s is finished.", "Transform"))
    # The count belongs to the component that finished; nothing is running now.
    assert progress.snapshot() == (None, "rows") and tracker.heartbeat.line() is None


def test_heartbeat_prints_while_a_component_runs_and_stops_with_the_run():
    out = io.StringIO()
    tracker = ComponentProgress(out=out, total=3, heartbeat_s=0.2)

    def beats() -> list:
        return [line for line in out.getvalue().splitlines() if " elapsed" in line]

    with tracker.heartbeat:
        tracker.emit(_record("Component %s is running.", "StatisticsGen"))
        deadline = time.monotonic() + 10
        while len(beats()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        tracker.emit(_record("Component %s is finished.", "StatisticsGen"))
        after_finish = len(beats())
        time.sleep(0.6)  # no component running: no heartbeat
        assert len(beats()) == after_finish >= 3
    assert not any(t.name == "tfxflow-heartbeat" for t in threading.enumerate())
    lines = out.getvalue().splitlines()
    assert lines[0] == f"[1/3] {'StatisticsGen':<{NAME_WIDTH}} running ..."
    assert all(re.fullmatch(r"\[1/3\] StatisticsGen +\.\.\. [0-9]s elapsed, [0-9,]+ MB resident", b) for b in beats())
    assert lines[-1].startswith(f"[1/3] {'StatisticsGen':<{NAME_WIDTH}} ran ")  # none after the component's end


def test_heartbeat_thread_stops_when_the_run_fails():
    tracker = ComponentProgress(out=io.StringIO(), total=2, heartbeat_s=0.05)
    try:
        with tracker.heartbeat:
            tracker.emit(_record("Component %s is running.", "Trainer"))
            raise RuntimeError("the Trainer failed")
    except RuntimeError:
        tracker.fail()
    assert not any(t.name == "tfxflow-heartbeat" for t in threading.enumerate())
    assert tracker.timings[-1].status == "FAILED" and tracker.heartbeat.line() is None


def test_resident_memory_counts_child_processes():
    import subprocess
    import sys

    # Measured in a fresh process: this one's other children (servers, workers of earlier tests) come and go.
    probe = """
import subprocess, sys, time
import psutil
from tfxflow.pipeline.heartbeat import tree_rss_bytes
alone = tree_rss_bytes()
child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 2**20); import time; time.sleep(30)"])
deadline = time.monotonic() + 20
while psutil.Process(child.pid).memory_info().rss < 200 * 2**20 and time.monotonic() < deadline:
    time.sleep(0.1)
print(tree_rss_bytes() - alone)
child.kill()
child.wait()
"""
    grown = int(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert grown > 190 * 2**20
    assert format_elapsed(59.9) == "59s" and format_elapsed(61) == "1m01s" and format_elapsed(3600) == "1h00m"


def test_what_lives_before_the_run_is_kept_out_of_collections_and_later_garbage_is_still_collected():
    import gc
    import weakref

    class Node:
        pass

    assert gc.isenabled()
    try:
        with runner.imports_kept_out_of_collections():
            assert not gc.isenabled()  # no collection while the libraries are imported
            kept = [Node() for _ in range(10)]
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 1000
        assert not any(o is kept[0] for o in gc.get_objects())  # frozen: in no generation a collection reads
        # A cycle made afterwards (as a component makes them) is found and freed by a full collection.
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_the_collector_resumes_when_the_set_up_fails_and_its_thresholds_come_back_after_the_run():
    import gc

    try:
        with pytest.raises(ValueError), runner.imports_kept_out_of_collections():
            raise ValueError("a bad config")
        assert gc.isenabled() and gc.get_freeze_count() == 0  # resumed, and nothing frozen
    finally:
        gc.unfreeze()
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), runner.fewer_full_collections(100):
        assert gc.get_threshold() == (before[0], before[1], 100)
        raise RuntimeError("a component failed")
    assert gc.get_threshold() == before


def test_a_probe_is_started_ahead_only_for_a_new_model_and_ended_once_its_check_is_over(monkeypatch):
    from tfxflow.components.serving import serving_check

    calls = []
    monkeypatch.setattr(serving_check, "allow_warm_probe", lambda allowed: calls.append(("allow", allowed)))
    monkeypatch.setattr(serving_check, "discard_warm_probe", lambda: calls.append(("discard",)))
    tracker = ComponentProgress(out=io.StringIO(), total=4, on_finish=runner.warm_probe_rules)
    # LocalDagRunner's own log lines: a run whose Trainer and ServingCheck come from the cache (a --force re-run).
    for name, cached in (("Trainer", True), ("Evaluator", False), ("ServingCheck", True), ("Pusher", False)):
        tracker.emit(_record("Component %s is running.", name))
        if cached:
            tracker.emit(_record("A cached execution %d is used.", 7))
        tracker.emit(_record("Component %s is finished.", name))
    assert calls == [("allow", False), ("discard",)]
    calls.clear()
    tracker.emit(_record("Component %s is running.", "Trainer"))
    tracker.emit(_record("Component %s is finished.", "Trainer"))
    assert calls == [("allow", True)]


def test_no_probe_starts_ahead_where_the_runner_disallows_it(monkeypatch):
    from tfxflow.components.serving import serving_check

    monkeypatch.setattr(serving_check, "_Probe", lambda: pytest.fail("a probe was started"))
    serving_check.allow_warm_probe(False)
    try:
        assert serving_check.warm_probe() is False and serving_check._warm is None
    finally:
        serving_check.allow_warm_probe(True)


ABSENT_SCRIPT = """
import json, sys, types
from tfxflow.components import lane
from tfxflow.pipeline.local.runner import ADDON_OP_PACKAGES, TUNER_PACKAGES, unused_packages_absent

KEPT_OUT = ADDON_OP_PACKAGES + TUNER_PACKAGES

def config(text=(), user_module=None):
    return types.SimpleNamespace(user_module=user_module, features=types.SimpleNamespace(text=text))

def loaded():
    return sorted(n for n, m in sys.modules.items() if m is not None and n.split(".")[0] in KEPT_OUT)

found = {"tuner_optional": lane.tfx_tuner_import_is_optional()}
with unused_packages_absent(config(user_module="my_module.py")) as absent:
    found["module_file"] = absent
with unused_packages_absent(config()) as absent:
    found["tabular"] = absent
    import tensorflow_model_analysis  # its model_util imports every installed op package it knows
    from tensorflow_transform.saved import saved_transform_io
    saved_transform_io._maybe_register_addon_ops()  # what each transform graph load calls
    from tfx.components import StatisticsGen, Trainer  # noqa: F401  (the package imports every component)
    found["loaded"] = loaded()
    try:
        import tensorflow_text  # noqa: F401
        found["import_in_block"] = "imported"
    except ImportError as e:
        found["import_in_block"] = type(e).__name__
found["markers_left"] = sorted(n for n in KEPT_OUT if n in sys.modules and sys.modules[n] is None)
with unused_packages_absent(config(text=("description",))) as absent:
    found["text"] = [absent, "tensorflow_text" in loaded()]
print(json.dumps(found))
"""


@pytest.mark.integration
def test_a_tabular_run_keeps_unused_packages_out_a_text_run_loads_tf_text_and_a_module_file_decides():
    """TFMA and tf.Transform import TF Text (and TF-DF, struct2tensor) whenever installed: 118 MB resident for TF
    Text 2.21; TFX 1.21 imports keras_tuner for its Tuner (39 MB). A run without text features or a module file
    keeps them out; a text run has TF Text's ops; a module file's run imports what it imports."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ABSENT_SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["module_file"] == []
    tuner = ["keras_tuner"] if found["tuner_optional"] else []
    kept_out = ["tensorflow_text", "tensorflow_decision_forests", "struct2tensor"]
    assert sorted(found["tabular"]) == sorted(kept_out + tuner)
    # None of them loaded; where TFX 1.16 imports keras_tuner unguarded, only that.
    assert {name.split(".")[0] for name in found["loaded"]} == (set() if tuner else {"keras_tuner"})
    assert found["import_in_block"] == "ModuleNotFoundError"
    assert found["markers_left"] == []  # after the run, the packages import again
    assert found["text"][1] is True and "tensorflow_text" not in found["text"][0]
