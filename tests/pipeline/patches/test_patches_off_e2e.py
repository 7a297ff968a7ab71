"""The taxi pipeline with `TFXFLOW_PATCHES=off` decides and measures what the patched run does: the same rows, data
gate, metrics, blessing, push, serving check and TFLite export as tests/pipeline/test_drift_e2e.py's first run
(patched), which trains on the same rows with the same flags. One run of its own, on the session's pool of long
runs (tests/conftest.py's `long_runs`); the patched run is the drift group's."""

import glob
import os

import pytest

from tests import helpers
from tests.pipeline import test_drift_e2e
from tfxflow.pipeline import patches
from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.reports import run_record

pytestmark = pytest.mark.e2e

PIPELINE = "tfxflow-taxi"


def _first_run_of(home):
    metadata = paths_lib.Paths.under(home).metadata_path
    return run_record.read_run(metadata, PIPELINE, run_record.run_ids(run_record.open_store(metadata), PIPELINE)[0])


def _off_run(base):
    # The drift group's first sample: the same seed and sizes give the same rows.
    first = helpers.write_taxi_samples([(str(base / "first"), 1500), (str(base / "fresh"), 1000)], seed=7)[0]
    home = str(base / "home")
    result = helpers.run_cli(
        "run",
        "--home",
        home,
        "--data-root",
        first,
        *test_drift_e2e.FLAGS,
        *test_drift_e2e.UNTRACKED,
        "--tflite",
        env={patches.ENV: patches.OFF},
    )
    return {"home": home, "result": result}


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    return {"off": lambda: _off_run(base)}


def _decisions(stdout):
    """The summary's lines that say what the run decided (not its timings or paths)."""
    keys = ("row counts:", "data gate:", "drift:", "blessed:", "serving check:", "golden rows")
    return [line.strip() for line in stdout.splitlines() if line.strip().startswith(keys)]


def test_a_run_without_patches_decides_and_measures_what_the_patched_run_does(long_runs):
    long_runs.start("drift")  # beside this group's run, where the session did not select the drift tests
    off = long_runs.results("patches-off")["off"]
    patched = long_runs.results("drift")["steps"]
    assert off["result"].returncode == 0, off["result"].stderr[-3000:]
    assert patched["first"].returncode == 0, patched["first"].stderr[-3000:]
    # The off run's log says so once, and no patch was applied (none skipped either).
    (log,) = glob.glob(os.path.join(paths_lib.Paths.under(off["home"]).log_dir, "run-*.log"))
    with open(log, encoding="utf-8") as f:
        text = f.read()
    assert text.count("TFXFLOW_PATCHES=off: no library patch applied") == 1 and "tfxflow: patch " not in text
    ours, theirs = _first_run_of(off["home"]), _first_run_of(patched["home"])
    assert _decisions(off["result"].stdout) == _decisions(patched["first"].stdout) != []
    assert ours.rows == theirs.rows and ours.rows["train"] > 1000
    assert ours.gate_checks == theirs.gate_checks
    assert (ours.blessed, ours.blessing_failures) == (theirs.blessed, theirs.blessing_failures) == (True, [])
    assert ours.pushed_version is not None and theirs.pushed_version is not None
    assert ours.not_pushed_reason is None and theirs.not_pushed_reason is None
    assert set(ours.metrics) == set(theirs.metrics) and "binary_accuracy" in ours.metrics
    # (A model of 40 steps predicts no positive at the threshold: precision is NaN in both.)
    assert ours.metrics == pytest.approx(theirs.metrics, rel=1e-6, abs=1e-9, nan_ok=True)
    assert ours.serving_check["blessed"] and theirs.serving_check["blessed"]
    assert ours.serving_check["golden_rows"] == theirs.serving_check["golden_rows"]
    # The TFLite models published: the same variants, checked on the same golden rows.
    assert (ours.edge["published"], ours.edge["rows"]) == (theirs.edge["published"], theirs.edge["rows"])
