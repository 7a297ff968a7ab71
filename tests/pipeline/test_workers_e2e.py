"""`tfxflow run --workers N`: the Trainer as N worker processes on loopback (MultiWorkerMirroredStrategy, each a
TensorFlow runtime of its own with its TF_CONFIG), the rest of the pipeline as with one.

Runs, on the session's pool of long runs (tests/conftest.py's `long_runs`), on one random sample of the taxi
rows: one worker and two workers with the same global batch, seed and steps; and three workers, worker 0 (not the
chief) killed once the chief has backed up an epoch, then the same command again, which resumes from the backup;
and a text model (bert-tiny over a third of Debian's package descriptions) on two workers.
On two cores these prove that the workers train one model together, not that they are faster.
"""

import glob
import json
import math
import os
import signal
import subprocess
import time

import psutil
import pytest

from tests import helpers
from tests.pipeline.test_tasks_e2e import _served, _training_info
from tests.pipeline.test_text_e2e import _debian
from tfxflow.components import names
from tfxflow.pipeline.local.runner import NAME_WIDTH

pytestmark = pytest.mark.e2e

ROWS = 1500
# The global batch is 128 in every run: 128 per replica on one worker, 64 on each of two.
STEPS = ["--train-steps", "90", "--eval-every-steps", "30", "--tracking", "off"]


def _run(base, name, *flags):
    home = str(base / name)
    return {"home": home, "result": helpers.run_cli("run", "--home", home, "--data-root", str(base / "data"), *flags)}


def _worker_processes(run_pid):
    """The run's Trainer workers: {task type and index: process}."""
    found = {}
    for child in psutil.Process(run_pid).children(recursive=True):
        try:
            if "tfxflow.components.training.worker" in " ".join(child.cmdline()):
                task = json.loads(child.environ()["TF_CONFIG"])["task"]
                found[f"{task['type']} {task['index']}"] = child
        except (psutil.Error, KeyError):
            continue
    return found


def _killed_and_resumed(base):
    """Three workers; worker 0 (not the chief) killed once the chief has backed up an epoch; then the same run."""
    home = str(base / "killed")
    args = [helpers.TFXFLOW, "run", "--home", home, "--data-root", str(base / "data"), "--workers", "3"]
    args += ["--batch-size", "64", *STEPS]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if f"] {names.TRAINER:<{NAME_WIDTH}} running" in line:
            break
    deadline, killed = time.monotonic() + 600, None
    while time.monotonic() < deadline and process.poll() is None:
        if glob.glob(os.path.join(home, "trainer_backup", "*", "chief", "checkpoint")):
            workers = _worker_processes(process.pid)
            if "worker 0" in workers:
                killed = workers["worker 0"].pid
                os.kill(killed, signal.SIGKILL)
                break
        time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=600)
    first = subprocess.CompletedProcess(args, process.returncode, "".join(lines) + stdout, stderr)
    pushed = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    resumed = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    return {"home": home, "killed": first, "killed_pid": killed, "pushed_when_killed": pushed, "resumed": resumed}


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    helpers.write_taxi_samples([(str(base / "data"), ROWS)], seed=11)
    return {
        "one": lambda: _run(base, "one", "--batch-size", "128", *STEPS),
        "two": lambda: _run(base, "two", "--workers", "2", "--batch-size", "64", *STEPS),
        "killed": lambda: _killed_and_resumed(base),
        # A Transformer over text (Debian's package descriptions, a third of them), tokenized in the Transform
        # graph: bert-tiny on two workers.
        "text": lambda: _debian(
            base,
            "text",
            "--workers",
            "2",
            "--model-preset",
            "bert-tiny",
            "--batch-size",
            "16",
            "--train-steps",
            "60",
            "--eval-every-steps",
            "30",
            "--tracking",
            "off",
            every=3,
        ),
    }


def _info(home):
    """The Trainer's training_info.json (a failed Trainer leaves none)."""
    (path,) = glob.glob(os.path.join(home, "pipeline_root", "Trainer", "model_run", "*", names.TRAINING_INFO_FILE))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _metrics(home):
    from tfxflow.pipeline import paths as paths_lib
    from tfxflow.pipeline.reports import run_record

    paths = paths_lib.Paths.under(home)
    return run_record.read_run(paths.metadata_path, "tfxflow-taxi").metrics


@pytest.mark.long_runs("one", "two")
def test_two_workers_train_the_model_one_worker_trains(long_runs):
    runs = long_runs.results("workers")
    for name in ("one", "two"):
        assert runs[name]["result"].returncode == 0, runs[name]["result"].stderr[-3000:]
    one, two = _info(runs["one"]["home"]), _info(runs["two"]["home"])
    assert (one["strategy"], one.get("workers"), one["replicas"]) == ("default", 1, 1)
    assert (two["strategy"], two["workers"], two["replicas"]) == ("MultiWorkerMirroredStrategy", 2, 2)
    assert one["global_batch"] == two["global_batch"] == 128 and two["per_replica_batch"] == 64
    assert one["train_steps"] == two["train_steps"] == 90 and two["input_sharding"] == "FILE"
    # The same eval split judged both models: within twice the standard error of an accuracy on its rows.
    a, b = _metrics(runs["one"]["home"]), _metrics(runs["two"]["home"])
    assert a["example_count"] == b["example_count"] > 300
    tolerance = 2 * math.sqrt(a["binary_accuracy"] * (1 - a["binary_accuracy"]) / a["example_count"])
    assert abs(a["binary_accuracy"] - b["binary_accuracy"]) <= tolerance, (a, b, tolerance)
    assert abs(a["auc"] - b["auc"]) <= 0.02, (a["auc"], b["auc"])
    # The summary says how it trained; both pushed.
    assert "on 2 workers (the CPU; 2 replicas, MultiWorkerMirroredStrategy)" in runs["two"]["result"].stdout
    for name in ("one", "two"):
        assert len(helpers.pushed_versions(os.path.join(runs[name]["home"], "serving"), "taxi")) == 1


@pytest.mark.long_runs("two", "killed")
def test_each_worker_reads_its_own_files_and_the_chief_alone_writes(long_runs):
    runs = long_runs.results("workers")
    for name, workers in (("two", 2), ("killed", 3)):
        result = runs[name]["result" if name == "two" else "resumed"]
        assert result.returncode == 0, result.stderr[-3000:]
        root = os.path.join(runs[name]["home"], "pipeline_root")
        # ExampleGen wrote a file per worker and split.
        for split in ("train", "eval"):
            files = glob.glob(os.path.join(root, "CsvExampleGen", "examples", "*", f"Split-{split}", "*.gz"))
            assert len(files) == workers, files
        info = _info(runs[name]["home"])
        assert (info["workers"], info["replicas"], info["input_sharding"]) == (workers, workers, "FILE")
        # One model, one set of TensorBoard logs (the chief's), and each worker's own log.
        (model_run,) = glob.glob(os.path.join(root, "Trainer", "model_run", "*"))
        assert len(glob.glob(os.path.join(model_run, "train", "events.out.tfevents.*"))) == 1
        logs = sorted(os.listdir(os.path.join(model_run, "workers")))
        assert logs == ["chief-0.log"] + [f"worker-{i}.log" for i in range(workers - 1)]
        assert glob.glob(os.path.join(root, "Trainer", "model", "*", "Format-Serving", "saved_model.pb"))
        assert not glob.glob(os.path.join(root, "Trainer", "**", "workertemp*"), recursive=True)
        assert len(helpers.pushed_versions(os.path.join(runs[name]["home"], "serving"), "taxi")) == 1


@pytest.mark.long_runs("killed")
def test_a_killed_worker_stops_the_step_with_its_name_and_the_next_run_resumes(long_runs):
    run = long_runs.results("workers")["killed"]
    killed, resumed = run["killed"], run["resumed"]
    assert run["killed_pid"] is not None, killed.stdout[-3000:]
    assert killed.returncode == 1, killed.stderr[-3000:]
    # One line naming the worker, its process and how it ended; the traceback stays in the log.
    (line,) = [line for line in killed.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith(
        f"error: the run failed: WorkerFailed: Trainer worker 0 (pid {run['killed_pid']}) was killed by SIGKILL"
    ), killed.stderr
    assert "Traceback" not in killed.stderr
    assert "pushed:         no; the served model is untouched" in killed.stdout
    assert run["pushed_when_killed"] == []
    # The same command again: the Trainer resumes from the chief's backup, and the model is pushed.
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    info = _info(run["home"])
    assert info["resumed_from_epoch"] >= 1 and info["epochs"] == 3 and info["workers"] == 3
    assert len(helpers.pushed_versions(os.path.join(run["home"], "serving"), "taxi")) == 1
    # Nothing is left to resume.
    assert not glob.glob(os.path.join(run["home"], "trainer_backup", "*", "chief", "checkpoint"))


@pytest.mark.long_runs("text")
def test_a_text_model_trains_on_two_workers_and_serves_raw_text(long_runs):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the served graph's tokenizer ops)

    run = long_runs.results("workers")["text"]
    assert run["result"].returncode == 0, run["result"].stderr[-3000:]
    info = _training_info(run["home"])
    assert (info["strategy"], info["workers"], info["replicas"]) == ("MultiWorkerMirroredStrategy", 2, 2)
    assert (info["preset"], info["per_replica_batch"], info["global_batch"]) == ("bert-tiny", 16, 32)
    # The served model tokenizes raw descriptions itself and answers a distribution over the 6 sections.
    model_dir, _ = _served(run["home"], "text")
    rows = helpers.read_csv_rows(os.path.join(run["data"], "packages.csv"), 8)
    examples = helpers.serialize_examples(rows, run["schema"], drop=("section",))
    answer = tf.saved_model.load(model_dir).signatures["serving_default"](examples=tf.constant(examples))
    scores = answer["scores"].numpy()
    assert scores.shape == (8, 6) and np.allclose(scores.sum(axis=1), 1.0, atol=1e-3)
