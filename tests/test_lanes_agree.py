"""The two lanes on the same inputs: tests/lane_record.py's three runs (a sample pushed, the same rows with fares
25% higher refused for drift, a word in a number column refused naming its cell), made by each lane's own Python
at once, and what they decided and made compared: the same decisions and exit codes, the same serving
signatures, predictions that agree, the same MLflow records (statuses, parameters, tags, artifacts, metrics).

The compat lane runs in this session's venv; the current one natively where the host can run it, else in the
Debian 13 root (lanes/debian13, root). `make test-lanes` (and CI) run this; `-m lanes` selects it.
"""

import json
import os
import subprocess
import sys

import pytest

from tfxflow.components import lane

pytestmark = [pytest.mark.e2e, pytest.mark.lanes]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT_VENV = "/opt/tfxflow/venv-current"  # the Makefile's test-current venv in the root
# How far the two TensorFlows' training of the same model on the same rows may move a probability or a metric
# (kernels may differ between TF 2.16 and 2.21; on this machine they agree to the 4th decimal).
TOLERANCE = 0.001


def _current_lane_commands(out: str):
    """(set-up argv, record argv, env) for the current lane on this host."""
    native = subprocess.run([os.path.join(REPO, "lanes", "pick"), "current"], capture_output=True, text=True)
    if native.returncode == 0:
        venv = os.path.join(REPO, ".venv-current")
        return (["make", "LANE=current", "install"], [f"{venv}/bin/python", "-m", "tests.lane_record", out], None)
    wrap = [os.path.join(REPO, "lanes", "debian13")]
    env = {**os.environ, "TFXFLOW_BIND": os.path.dirname(out)}
    return (
        [*wrap, "make", "LANE=current", f"VENV={ROOT_VENV}", "install"],
        [*wrap, f"{ROOT_VENV}/bin/python", "-m", "tests.lane_record", out],
        env,
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """{lane: record} of both lanes, made side by side."""
    assert lane.name() == lane.COMPAT, "run from the compat lane's session (make test-lanes)"
    base = tmp_path_factory.mktemp("lanes")
    outs = {name: str(base / name) for name in (lane.COMPAT, lane.CURRENT)}
    setup, command, env = _current_lane_commands(outs[lane.CURRENT])
    made = subprocess.run(setup, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    logs = {name: open(str(base / f"{name}.log"), "w") for name in outs}
    started = {
        lane.COMPAT: subprocess.Popen(
            [sys.executable, "-m", "tests.lane_record", outs[lane.COMPAT]],
            cwd=REPO,
            stdout=logs[lane.COMPAT],
            stderr=subprocess.STDOUT,
        ),
        lane.CURRENT: subprocess.Popen(command, cwd=REPO, env=env, stdout=logs[lane.CURRENT], stderr=subprocess.STDOUT),
    }
    found = {}
    for name, process in started.items():
        code = process.wait(timeout=1800)
        logs[name].close()
        with open(str(base / f"{name}.log"), encoding="utf-8") as f:
            assert code == 0, f"{name}: " + f.read()[-3000:]
        with open(os.path.join(outs[name], "record.json"), encoding="utf-8") as f:
            found[name] = json.load(f)
    return found


def test_each_record_is_its_own_lanes(records):
    assert records[lane.COMPAT]["lane"] == lane.COMPAT and records[lane.CURRENT]["lane"] == lane.CURRENT
    assert records[lane.COMPAT]["tfx"].startswith("1.16.") and records[lane.CURRENT]["tfx"].startswith("1.21.")


def test_the_lanes_decide_the_same_on_the_same_data(records):
    compat, current = records[lane.COMPAT]["runs"], records[lane.CURRENT]["runs"]
    assert [(r["run"], r["exit"]) for r in compat] == [("sample", 0), ("fares up 25%", 3), ("a word in fare", 3)]
    assert [(r["run"], r["exit"]) for r in current] == [(r["run"], r["exit"]) for r in compat]
    # Word for word, figures included: the blessing, the drift gate's statistics, the cell named.
    assert [r["decided"] for r in current] == [r["decided"] for r in compat]
    decided = [" | ".join(r["decided"]) for r in compat]
    assert "blessed:        yes" in decided[0] and "pushed:         version <version>" in decided[0]
    assert "feature 'fare': COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH" in decided[1]
    assert "<out>/broken/data.csv line 43, column 'fare': not a number: 'twelve'" in decided[2]
    assert records[lane.CURRENT]["pushed_versions"] == records[lane.COMPAT]["pushed_versions"] == 1


def test_the_pushed_models_serve_the_same_signatures_and_the_same_predictions(records):
    compat, current = records[lane.COMPAT], records[lane.CURRENT]
    assert set(compat["signatures"]) == {"serving_default", "serving_raw", "transform_features"}
    assert current["signatures"] == compat["signatures"]
    assert len(compat["predictions"]) == len(current["predictions"]) == 20
    gaps = [abs(a - b) for a, b in zip(compat["predictions"], current["predictions"], strict=True)]
    assert max(gaps) <= TOLERANCE, gaps


# What MLflow records that measures this machine's speed, not the model or the data.
TIMINGS = ("duration.", "serving.", "train.examples_per_s", "train.step_ms")


def test_the_lanes_record_the_same_in_mlflow(records):
    compat, current = records[lane.COMPAT]["mlflow"], records[lane.CURRENT]["mlflow"]
    assert [r["status"] for r in compat] == ["FINISHED", "FAILED", "FAILED"]
    assert len(current) == len(compat)
    for ours, theirs in zip(current, compat, strict=True):
        for key in ("experiment", "status", "params", "tags", "artifacts"):
            assert ours[key] == theirs[key], key
        assert sorted(ours["metrics"]) == sorted(theirs["metrics"])
        quality = {k: v for k, v in theirs["metrics"].items() if not k.startswith(TIMINGS)}
        moved = {k: (v, ours["metrics"][k]) for k, v in quality.items() if abs(v - ours["metrics"][k]) > TOLERANCE}
        assert not moved
    assert "eval.binary_accuracy" in compat[0]["metrics"]
