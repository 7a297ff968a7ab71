"""The tuning's search on a real Optuna study in SQLite (components/tuning/tuner.py's `make_study` and `search`), with a
training stand-in whose validation curve is a known function of the learning rate: what the sampler finds, what
the median pruner stops, what a failing trial leaves, and how a study a kill cut short resumes."""

import math
import time
import types

import pytest

from tfxflow.components.model import search_space as ss
from tfxflow.components.tuning import tuner

SPACE = (ss.Dimension("learning_rate", 1e-4, 1e-1, log=True),)


def curve(learning_rate: float, epochs: int = 4):
    """Validation accuracy by epoch, best at 1e-2 and rising with each epoch."""
    top = 0.9 - 0.1 * abs(math.log10(learning_rate) + 2)
    return [top - 0.2 / (e + 1) for e in range(epochs)]


def trainer(calls, fail=None):
    def train(values, callbacks):
        calls.append(values)
        if fail is not None and fail(values):
            raise ValueError(f"no model at learning rate {values['learning_rate']:.3g}")
        (pruning,) = callbacks
        pruning.set_model(types.SimpleNamespace(stop_training=False))
        history = {"val_binary_accuracy": [], "val_loss": [], "step_ms": []}
        for epoch, value in enumerate(curve(values["learning_rate"])):
            history["val_binary_accuracy"].append(value)
            history["val_loss"].append(1 - value)
            history["step_ms"].append(3.0)
            pruning.on_epoch_end(epoch, {"val_binary_accuracy": value})
            if pruning.model.stop_training:
                break
        return history

    return train


def test_the_search_finds_the_best_rate_and_the_pruner_stops_hopeless_trials_early(tmp_path):
    study = tuner.make_study("s", str(tmp_path / "s.db"), maximize=True, seed=3)
    calls = []
    results = tuner.search(study, SPACE, "binary_accuracy", trainer(calls), trials=16)
    states = [t["state"] for t in results["trials"]]
    assert len(states) == len(calls) == 16 and "failed" not in states
    assert results["direction"] == "maximize" and results["resumed_trials"] == 0
    best = results["best"]
    complete = [t for t in results["trials"] if t["state"] == "complete"]
    assert best["value"] == max(t["value"] for t in complete)
    assert best["value"] == pytest.approx(curve(best["values"]["learning_rate"])[-1])
    assert 10**-2.5 < best["values"]["learning_rate"] < 10**-1.5  # near the curve's best, 1e-2
    pruned = [t for t in results["trials"] if t["state"] == "pruned"]
    assert pruned, "the median pruner stopped no trial"
    for t in pruned:  # stopped after the epoch where it trailed, its curve kept up to there
        assert len(t["history"]["val_binary_accuracy"]) == t["pruned_at_epoch"] < 4
        assert "step_ms" not in t["history"]
    assert "16 trials (" in tuner.summary(results) and f"{len(pruned)} pruned" in tuner.summary(results)


def test_a_failing_trial_is_recorded_with_its_error_and_a_tuning_with_no_model_names_the_first(tmp_path):
    study = tuner.make_study("f", str(tmp_path / "f.db"), maximize=True, seed=1)
    results = tuner.search(study, SPACE, "binary_accuracy", trainer([], fail=lambda v: v["learning_rate"] > 1e-3), 6)
    failed = [t for t in results["trials"] if t["state"] == "failed"]
    assert failed and all(t["error"].startswith("ValueError: no model at learning rate") for t in failed)
    assert results["best"] is not None and results["best"]["values"]["learning_rate"] <= 1e-3

    study = tuner.make_study("g", str(tmp_path / "g.db"), maximize=True, seed=1)
    results = tuner.search(study, SPACE, "binary_accuracy", trainer([], fail=lambda v: True), 3)
    assert results["best"] is None
    first = results["trials"][0]["values"]["learning_rate"]
    assert tuner.failure(results) == (
        "Tuner: no trial completed (3 trials (0 complete, 0 pruned, 3 failed) in "
        f"{results['seconds']:.1f} s; no best trial); the first trial's error: ValueError: no model at learning "
        f"rate {first:.3g}"
    )


def test_a_study_a_kill_cut_short_resumes_at_its_next_trial_and_tries_the_cut_one_again(tmp_path):
    db = str(tmp_path / "r.db")
    calls = []
    first = tuner.search(tuner.make_study("r", db, True, 5), SPACE, "binary_accuracy", trainer(calls), trials=2)
    assert len(first["trials"]) == 2
    # What a killed process leaves: a trial still RUNNING in the study's database.
    tuner.make_study("r", db, True, 5).ask()
    again = tuner.search(tuner.make_study("r", db, True, 5), SPACE, "binary_accuracy", trainer(calls), trials=5)
    assert again["resumed_trials"] == 2 and len(calls) == 5  # 2 before, 3 now: none run twice
    cut = [t for t in again["trials"] if t.get("error") == tuner.INTERRUPTED]
    assert [t["number"] for t in cut] == [2] and cut[0]["state"] == "failed"
    assert [t["values"] for t in again["trials"][:2]] == [t["values"] for t in first["trials"]]
    assert "5 trials (" in tuner.summary(again) and "2 from an earlier try, 1 cut short" in tuner.summary(again)
    # Done: a later run with the same study trains nothing more.
    done = tuner.search(tuner.make_study("r", db, True, 5), SPACE, "binary_accuracy", trainer(calls), trials=5)
    assert len(calls) == 5 and done["best"] == again["best"]


def test_a_minimised_objective_and_a_time_budget(tmp_path):
    study = tuner.make_study("m", str(tmp_path / "m.db"), maximize=False, seed=2)
    calls = []
    train = trainer(calls)

    def slow(values, callbacks):
        time.sleep(0.2)
        return train(values, callbacks)

    results = tuner.search(study, SPACE, "loss", slow, trials=50, seconds=1.0)
    assert 1 <= len(calls) <= 6  # no trial starts after the budget
    assert results["direction"] == "minimize"
    complete = [t for t in results["trials"] if t["state"] == "complete"]
    assert results["best"]["value"] == min(t["value"] for t in complete)


def test_the_objective_is_the_restored_epochs_where_early_stopping_restores_the_best_weights():
    history = {"val_auc": [0.7, 0.8, 0.75], "val_loss": [0.5, 0.4, 0.45]}
    assert tuner.objective_value(history, "auc", restored_best=True) == 0.8
    assert tuner.objective_value(history, "auc", restored_best=False) == 0.75
    with pytest.raises(ValueError, match="training reported no val_rmse"):
        tuner.objective_value(history, "rmse", True)


def test_workers_share_the_budget_exactly_and_every_trial_names_its_worker(tmp_path):
    """search() with 3 workers on one study: 10 trials split 4/3/3, no more; a worker that failed is named. The
    other workers here are threads with studies of their own on the same SQLite file (the Tuner's are spawned
    processes: tests/pipeline/test_tuning_e2e.py)."""
    import collections
    import threading

    db = str(tmp_path / "p.db")
    study = tuner.make_study("p", db, maximize=True, seed=3, parallel=True)
    calls, threads, asked = [], [], []

    def start_workers(counts, seconds):
        asked.append((list(counts), seconds))
        for index, count in enumerate(counts, start=1):
            other = tuner.make_study("p", db, maximize=True, seed=3 + index, parallel=True)
            args = (other, SPACE, "binary_accuracy", trainer(calls), count, 10, seconds, True, index)
            threads.append(threading.Thread(target=tuner.optimize, args=args))
            threads[-1].start()

        def wait():
            for thread in threads:
                thread.join()
            return ["worker 2 stopped with exit status 1"]

        return wait

    results = tuner.search(
        study, SPACE, "binary_accuracy", trainer(calls), trials=10, workers=3, start_workers=start_workers
    )
    assert asked == [([3, 3], 0.0)]
    assert len(results["trials"]) == len(calls) == 10
    assert collections.Counter(t["worker"] for t in results["trials"]) == {0: 4, 1: 3, 2: 3}
    assert results["workers"] == 3 and results["worker_problems"] == ["worker 2 stopped with exit status 1"]
    assert len({t["values"]["learning_rate"] for t in results["trials"]}) == 10  # seeded apart: no repeats
    assert tuner.shares(10, 3) == [4, 3, 3] and tuner.shares(1, 2) == [1, 0] and tuner.shares(0, 2) == [0, 0]


def test_the_worker_count_is_the_cores_without_a_gpu_and_what_was_asked_otherwise():
    import os

    import tensorflow as tf

    assert tuner.worker_count(3) == 3 and tuner.worker_count(1) == 1
    cores = len(os.sched_getaffinity(0))
    gpus = tf.config.list_physical_devices("GPU")
    assert tuner.worker_count(0) == (1 if gpus else min(cores, tuner.MAX_AUTO_WORKERS))


def test_a_worker_that_dies_leaves_its_trial_failed_and_its_share_to_the_tuners_process(tmp_path):
    """A worker that died mid-trial (an OOM kill): its running trial is marked failed naming the worker, and the
    trials it did not run are run in the Tuner's own process, so the budget is met."""
    db = str(tmp_path / "d.db")
    study = tuner.make_study("d", db, maximize=True, seed=3, parallel=True)
    calls = []

    def start_workers(counts, seconds):
        other = tuner.make_study("d", db, maximize=True, seed=4, parallel=True)
        tuner.optimize(other, SPACE, "binary_accuracy", trainer(calls), 1, 6, seconds, True, 1)
        other.ask()  # its second trial began, then the worker was killed
        return lambda: ["worker 1 stopped with exit status -9"]

    results = tuner.search(
        study, SPACE, "binary_accuracy", trainer(calls), trials=6, workers=2, start_workers=start_workers
    )
    records = results["trials"]
    failed = [t for t in records if t["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] == "its worker stopped: worker 1 stopped with exit status -9"
    assert len(records) == 6 and len(calls) == 5  # 1 by the worker, 3 + the 1 it left by the Tuner's process
    assert [t["worker"] for t in records if t["state"] != "failed"].count(0) == 4
    assert "6 trials (" in tuner.summary(results) and "1 failed" in tuner.summary(results)
