"""The tuning step end to end through the CLI, on the bundled taxi data: a learning rate far too low for the
training it gets is the case where tuning must pay; the tuned run's Trainer trains with the best trial's values
and its model beats the untuned one on the eval split (TFMA's figures in MLflow); every trial is a run nested under
its pipeline run on a real `mlflow server`; a tuning killed mid-way resumes at its next trial."""

import json
import os
import re
import signal
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

from tests import helpers

pytestmark = [pytest.mark.e2e]

# 100 steps at 1e-5 leave the taxi model near where it started; the default rate (1e-3) reaches 0.89.
POOR = ("--learning-rate", "1e-5", "--train-steps", "100", "--seed", "7")
LEARNING_RATE_ONLY = ("--tune-space", "width=off,dropout=off,batch_size=off")


def _eval_metric(client, experiment, name="eval.binary_accuracy"):
    runs = client.search_runs(
        [client.get_experiment_by_name(experiment).experiment_id], filter_string="tags.`tfxflow.task` = 'binary'"
    )
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(top) == 1, [r.info.run_name for r in runs]
    return top[0], top[0].data.metrics[name]


def jobs(base, server):
    """{name: a function that makes that run} under the folder `base`, tracked on the session's MLflow server
    (tests/conftest.py's `long_runs`): the poor learning rate untuned, and tuned."""
    tracked = ("--mlflow-uri", server.uri)
    return {
        "untuned": lambda: helpers.run_cli(
            "run", "--home", str(base / "a"), *tracked, "--experiment", "untuned", *POOR
        ),
        "tuned": lambda: helpers.run_cli(
            "run",
            "--home",
            str(base / "b"),
            *tracked,
            "--experiment",
            "tuned",
            *POOR,
            "--tune",
            "--tune-trials",
            "4",
            "--tune-workers",
            "2",
            *LEARNING_RATE_ONLY,
            timeout=1500,
        ),
    }


@pytest.fixture(scope="module")
def runs(long_runs):
    return long_runs.results("tuning")


@pytest.mark.current_lane
def test_tuning_beats_a_poor_learning_rate_and_every_trial_is_a_run_nested_under_the_pipeline_run(
    runs, tmp_path, mlflow_server
):
    client = MlflowClient(mlflow_server.uri)
    untuned, tuned = runs["untuned"], runs["tuned"]
    assert untuned.returncode == 0, untuned.stderr[-3000:]
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    _, before = _eval_metric(client, "untuned")
    parent, after = _eval_metric(client, "tuned")
    assert after >= before + 0.05, (before, after)

    # The Tuner's record: 4 trials, each with its values, objective and per-epoch curves.
    results_uri = parent.data.tags["tfxflow.tuning_uri"]
    with open(os.path.join(results_uri, "trials.json")) as f:
        results = json.load(f)
    assert results["objective"] == "binary_accuracy" and results["direction"] == "maximize"
    assert len(results["trials"]) == 4  # the budget, split between the two workers
    assert results["workers"] == 2 and sorted(t["worker"] for t in results["trials"]) == [0, 0, 1, 1]
    best = results["best"]
    assert best["value"] == max(t["value"] for t in results["trials"] if t["state"] == "complete")
    assert 1e-4 <= best["values"]["learning_rate"] <= 3e-2
    # The Trainer trained with the best trial's learning rate, not the flag's.
    assert float(parent.data.params["tuning.best.learning_rate"]) == pytest.approx(best["values"]["learning_rate"])
    assert float(parent.data.params["trainer.learning_rate"]) == pytest.approx(best["values"]["learning_rate"])
    assert parent.data.params["model.learning_rate"] == "1e-05"  # the setting given, recorded as given
    assert parent.data.metrics["tuning.trials.complete"] + parent.data.metrics["tuning.trials.pruned"] == 4

    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert sorted(int(c.data.tags["tfxflow.trial"]) for c in children) == [0, 1, 2, 3]
    for child in children:
        trial = results["trials"][int(child.data.tags["tfxflow.trial"])]
        assert child.data.tags["tfxflow.trial_state"] == trial["state"]
        assert child.info.status == {"complete": "FINISHED", "pruned": "KILLED"}[trial["state"]]
        assert float(child.data.params["learning_rate"]) == pytest.approx(trial["values"]["learning_rate"])
        curve = client.get_metric_history(child.info.run_id, "val.binary_accuracy")
        assert [m.step for m in curve] == list(range(1, len(trial["history"]["val_binary_accuracy"]) + 1))
        if trial["state"] == "complete":
            assert child.data.metrics["objective.binary_accuracy"] == pytest.approx(trial["value"])
        assert child.info.end_time > child.info.start_time
    # `compare` lists pipeline runs, not their trials; `compare --trials` the trials of one, the best marked.
    compared = helpers.run_cli("compare", "--mlflow-uri", mlflow_server.uri, "--experiment", "tuned")
    assert compared.returncode == 0, compared.stderr
    assert f"best by eval.binary_accuracy: {parent.info.run_id[:8]}" in compared.stdout
    assert not any(child.info.run_id[:8] in compared.stdout for child in children)
    plot = tmp_path / "trials.png"
    trials = helpers.run_cli(
        "compare", "--mlflow-uri", mlflow_server.uri, "--trials", parent.info.run_id, "--plot", str(plot)
    )
    assert trials.returncode == 0, trials.stderr
    best_child = next(c for c in children if int(c.data.tags["tfxflow.trial"]) == best["number"])
    assert f"best by objective.binary_accuracy: {best_child.info.run_id[:8]}" in trials.stdout
    assert all(child.info.run_id[:8] in trials.stdout for child in children) and "learning_rate" in trials.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The run page charts and lists the trials.
    with open(re.search(r"report:\s+(\S+\.html)", tuned.stdout).group(1), encoding="utf-8") as f:
        page = f.read()
    assert "val_binary_accuracy per trial" in page and '<span class="badge yes">best</span>' in page
    # The run's summary says what the tuning found and what it cost.
    assert "  tuning:         4 trials (" in tuned.stdout and "x the Trainer's" in tuned.stdout


def test_a_killed_tuning_resumes_at_its_next_trial_not_at_trial_0(tmp_path):
    home = str(tmp_path / "home")
    args = [helpers.TFXFLOW, "run", "--home", home, "--tracking", "off", *POOR, "--tune", "--tune-trials", "4"]
    args += [*LEARNING_RATE_ONLY, "--tune-workers", "2"]  # both processes killed mid-search
    log = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 900
    studies = os.path.join(home, "tuning")
    try:
        while time.monotonic() < deadline and first.poll() is None:
            if _finished_trials(studies) >= 2:
                break
            time.sleep(0.5)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        os.killpg(first.pid, signal.SIGKILL)
    finally:
        first.wait()
        log.close()
    done_before = _finished_trials(studies)
    assert 2 <= done_before < 4
    again = subprocess.run(args, capture_output=True, text=True, timeout=1500)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "  tuning:         4 trials (" in again.stdout  # the summary's tuning line
    assert f", {done_before} from an earlier try" in again.stdout
    results_dir = os.path.join(home, "pipeline_root")
    found = [os.path.join(d, "trials.json") for d, _, files in os.walk(results_dir) if "trials.json" in files]
    assert len(found) == 1
    with open(found[0]) as f:
        results = json.load(f)
    assert results["resumed_trials"] == done_before
    # The trials finished before the kill are kept; those it cut short (one a worker at most) are recorded as
    # interrupted and tried again.
    interrupted = [t for t in results["trials"] if t.get("error", "").startswith("interrupted")]
    assert len(interrupted) <= 2
    earlier = [t for t in results["trials"][: done_before + len(interrupted)] if t not in interrupted]
    assert len(earlier) == done_before and not [t for t in earlier if t["state"] == "failed"]
    assert len([t for t in results["trials"] if not t.get("error", "").startswith("interrupted")]) == 4


def _finished_trials(studies: str) -> int:
    """Trials the study in `studies` holds that ended (complete, pruned or failed), read with SQLite."""
    import sqlite3

    if not os.path.isdir(studies):
        return 0
    total = 0
    for name in os.listdir(studies):
        if name.endswith(".db"):
            try:
                with sqlite3.connect(os.path.join(studies, name), timeout=1) as db:
                    total += db.execute("select count(*) from trials where state != 'RUNNING'").fetchone()[0]
            except sqlite3.Error:
                pass
    return total
