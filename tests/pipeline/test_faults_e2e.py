"""Fault injection on the whole pipeline: runs killed (SIGKILL) at several components, a full disk, two runs at
once, a worse model after a good one, an unwritable serving directory.

One home folder goes through the faults in turn, each followed by the run that must succeed after it. After
every step the serving directory holds only complete versions; the served (newest) version changes only when
a blessed model is pushed; ML Metadata and MLflow show what happened.
"""

import glob
import json
import os
import resource
import signal
import subprocess
import time

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd

from tests import helpers
from tfxflow.pipeline.local.runner import NAME_WIDTH
from tfxflow.pipeline.reports import run_record as report

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

PIPELINE = "tfxflow-taxi"
MODEL = "taxi_faults"
# Ten 400-step epochs: the Trainer writes a backup after each, so a kill can land between two of them.
TRAIN = [
    "--train-steps",
    "4000",
    "--batch-size",
    "64",
    "--eval-every-steps",
    "400",
    "--max-regression",
    "0.05",
    "--model-name",
    MODEL,
    "--keep-versions",
    "4",
]
CACHED_UPSTREAM = ("CsvExampleGen", "StatisticsGen", "ExampleValidator")


class Home:
    """The home folder under test and what a step can observe in it."""

    def __init__(self, folder, data):
        self.folder, self.data = folder, data
        self.serving = os.path.join(folder, "serving", MODEL)
        self.metadata = os.path.join(folder, "metadata", "metadata.sqlite")
        self.mlflow_uri = f"sqlite:///{os.path.join(folder, 'mlflow', 'mlflow.db')}"

    def args(self, *extra):
        return [helpers.TFXFLOW, "run", "--home", self.folder, "--data-root", self.data, *TRAIN, *extra]

    def run(self, *extra, preexec_fn=None):
        return subprocess.run(
            self.args(*extra), capture_output=True, text=True, timeout=900, check=False, preexec_fn=preexec_fn
        )

    def start(self, *extra):
        return subprocess.Popen(
            self.args(*extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )

    def versions(self):
        return helpers.pushed_versions(os.path.dirname(self.serving), MODEL)

    def incomplete_versions(self):
        """Version folders TF Serving would load that lack the graph or the variables."""
        return [
            v
            for v in self.versions()
            if not (
                os.path.isfile(os.path.join(self.serving, v, "saved_model.pb"))
                and glob.glob(os.path.join(self.serving, v, "variables", "variables.index"))
            )
        ]

    def snapshot(self):
        return helpers.tree_snapshot(self.serving)

    def executions(self):
        """{execution id: (component, state name)} of every execution of the pipeline."""
        store = report.open_store(self.metadata)
        found = {}
        for node in store.get_contexts_by_type("node"):
            if node.name.startswith(PIPELINE + "."):
                for execution in store.get_executions_by_context(node.id):
                    found[execution.id] = (
                        node.name[len(PIPELINE) + 1 :],
                        mlmd.Execution.State.Name(execution.last_known_state),
                    )
        return found

    def runs(self):
        return report.run_ids(report.open_store(self.metadata), PIPELINE)

    def mlflow_statuses(self):
        """The statuses of the runs in the embedded MLflow store, oldest first."""
        from mlflow import MlflowClient

        mlflow_client = MlflowClient(self.mlflow_uri)
        experiment = mlflow_client.get_experiment_by_name(PIPELINE)
        runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
        return [r.info.status for r in runs]


def kill_when(process, component, ready=lambda: True, delay=0.0, timeout=300, sig=signal.SIGKILL):
    """Signals (SIGKILL) the run's process group once `component` has started and `ready()` holds; returns its
    stdout."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if f"] {component:<{NAME_WIDTH}} running" in line:
            break
    else:
        raise AssertionError(f"{component} never started:\n{''.join(lines)}{process.stderr.read()[-3000:]}")
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"not ready to kill {component}"
        time.sleep(0.05)
    time.sleep(delay)
    os.killpg(process.pid, sig)
    process.wait(timeout=300)
    return "".join(lines) + process.stdout.read()


def observe(home, result=None, **extra):
    return {
        "result": result,
        "versions": home.versions(),
        "incomplete": home.incomplete_versions(),
        "snapshot": home.snapshot(),
        "executions": home.executions(),
        "runs": home.runs(),
        "mlflow": home.mlflow_statuses(),
        **extra,
    }


def _trainer_checkpoint(home):
    return glob.glob(os.path.join(home.folder, "trainer_backup", "*", "chief", "checkpoint"))


def _limit_file_size(limit):
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG ("File too large"), as on a full disk.
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def _sizes_around_the_model(home):
    """(the metadata store's size, the last model graph's size): the largest file a run grows before the Trainer
    writes its model, and the largest file the Trainer writes."""
    graphs = glob.glob(os.path.join(home.folder, "pipeline_root", "Trainer", "model", "*", "*", "saved_model.pb"))
    store = os.path.join(home.folder, "metadata", "metadata.sqlite")
    return os.path.getsize(store), max(os.path.getsize(graph) for graph in graphs)


def jobs(base, mlflow_server):
    """The faults in turn on one home folder, as one job of the session's pool of long runs
    (tests/conftest.py's `long_runs`): {"steps": a function returning what each step observed}."""
    return {"steps": lambda: _run_faults(base, mlflow_server)}


@pytest.fixture(scope="module")
def faults(long_runs):
    return long_runs.results("faults")["steps"]


def _run_faults(base, mlflow_server):
    home = Home(str(base / "home"), helpers.write_taxi_sample(str(base / "data"), rows=2000))
    steps = {}

    # 1. Killed while Transform runs (it takes ~20 s here), then run again.
    process = home.start()
    steps["kill_transform"] = observe(home, kill_when(process, "Transform", delay=3), rc=process.returncode)
    steps["after_transform"] = observe(home, home.run())

    # 2. SIGTERM (what a scheduler or Kubernetes sends first) once the Trainer has backed up an epoch.
    backups = set(_trainer_checkpoint(home))
    process = home.start("--seed", "13")
    stdout = kill_when(process, "Trainer", ready=lambda: set(_trainer_checkpoint(home)) - backups, sig=signal.SIGTERM)
    steps["term_trainer"] = observe(home, stdout, rc=process.returncode, stderr=process.stderr.read())

    # 3. The disk fills up while the Trainer writes its model: files may not grow past halfway between the
    # metadata store's size and the last model graph's (their sizes move with the export's format, so they are
    # read, not written down). Tracked on the MLflow server, whose store the limit does not reach. Then run again.
    tracked = ["--seed", "13", "--mlflow-uri", mlflow_server.uri, "--experiment", "tfxflow-faults"]
    store, graph = _sizes_around_the_model(home)
    limit = (store + graph) // 2
    steps["disk_full"] = observe(home, home.run(*tracked, preexec_fn=_limit_file_size(limit)), sizes=(store, graph))
    steps["after_disk_full"] = observe(home, home.run(*tracked))

    # 4. Killed once the Trainer has backed up an epoch, then run again: the Trainer resumes from the backup.
    backups = set(_trainer_checkpoint(home))
    process = home.start("--seed", "7")
    stdout = kill_when(process, "Trainer", ready=lambda: set(_trainer_checkpoint(home)) - backups)
    steps["kill_trainer"] = observe(home, stdout, rc=process.returncode, backups=_trainer_checkpoint(home))
    steps["after_trainer"] = observe(home, home.run("--seed", "7"))

    # 5. Killed while the Evaluator runs (a new blessing threshold re-runs it alone), then run again.
    process = home.start("--seed", "7", "--min-accuracy", "0.5")
    steps["kill_evaluator"] = observe(home, kill_when(process, "Evaluator", delay=1.5), rc=process.returncode)
    steps["after_evaluator"] = observe(home, home.run("--seed", "7", "--min-accuracy", "0.5"))

    # 6. Three runs at once: the first runs, the second refuses, the third waits and finds the work done.
    first = home.start("--seed", "7", "--min-accuracy", "0.55")
    header = first.stdout.readline()  # printed once the first run holds the lock
    waiting = home.start("--seed", "7", "--min-accuracy", "0.55", "--wait-for-lock", "600")
    refused = home.run("--seed", "7", "--min-accuracy", "0.55")
    first_out, first_err = first.communicate(timeout=900)
    waited_out, waited_err = waiting.communicate(timeout=900)
    steps["concurrent"] = observe(
        home,
        None,
        first=(first.returncode, header + first_out, first_err),
        refused=refused,
        waited=(waiting.returncode, waited_out, waited_err),
        first_pid=first.pid,
    )

    # 7. A deliberately worse model after good ones: two steps at a tiny learning rate.
    steps["worse"] = observe(
        home, home.run("--train-steps", "2", "--learning-rate", "0.00001", "--max-regression", "0.01")
    )

    # 8. A serving directory that cannot be created (its parent is a file).
    blocker = os.path.join(home.folder, "not-a-folder")
    with open(blocker, "w", encoding="utf-8") as f:
        f.write("a file")
    steps["unwritable"] = observe(home, home.run("--serving-dir", os.path.join(blocker, "serving")))
    steps["home"] = home
    return steps


def _assert_ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def _state(step, component):
    """The states of `component`'s executions, oldest first."""
    return [state for _, (name, state) in sorted(step["executions"].items()) if name == component]


def test_every_step_leaves_only_complete_versions(faults):
    for name, step in faults.items():
        if name != "home":
            assert step["incomplete"] == [], name
            assert not [path for path in step["snapshot"] if not path.split(os.sep)[0].isdigit()], name
    # Five pushes with --keep-versions 4: the oldest was pruned, the served (newest) one is kept.
    pushed = faults["after_transform"]["versions"] + faults["concurrent"]["versions"]
    assert len(faults["concurrent"]["versions"]) == 4 and pushed[0] not in faults["concurrent"]["versions"]
    assert faults["unwritable"]["versions"] == faults["concurrent"]["versions"]


def test_killed_transform_is_recovered_and_upstream_reused(faults):
    killed, after = faults["kill_transform"], faults["after_transform"]
    assert killed["rc"] == -signal.SIGKILL
    assert killed["versions"] == [] and _state(killed, "Transform") == ["RUNNING"]
    transform_id = next(i for i, (name, _) in killed["executions"].items() if name == "Transform")
    partial = os.path.join(faults["home"].folder, "pipeline_root", "Transform", "transform_graph", str(transform_id))

    result = after["result"]
    _assert_ok(result)
    assert "recovered from an interrupted run started " in result.stdout
    assert f"marked CANCELED in ML Metadata: Transform (execution {transform_id})" in result.stdout
    assert "partial output folders" in result.stdout and "MLflow run " in result.stdout
    for component in CACHED_UPSTREAM:
        assert f"{component:<{NAME_WIDTH}} cached" in result.stdout
    assert f"{'Transform':<{NAME_WIDTH}} ran" in result.stdout
    assert after["executions"][transform_id] == ("Transform", "CANCELED")
    assert not os.path.exists(partial)
    assert len(after["versions"]) == 1 and "blessed:        yes" in result.stdout


def test_killed_run_is_marked_killed_in_mlflow(faults):
    from mlflow import MlflowClient

    # A killed run's MLflow run stays RUNNING until the next run marks it KILLED.
    assert faults["kill_transform"]["mlflow"] == ["RUNNING"]
    assert faults["after_transform"]["mlflow"] == ["KILLED", "FINISHED"]
    assert faults["kill_trainer"]["mlflow"][-1] == "RUNNING"
    assert faults["after_trainer"]["mlflow"][-2:] == ["KILLED", "FINISHED"]
    mlflow_client = MlflowClient(faults["home"].mlflow_uri)
    experiment = mlflow_client.get_experiment_by_name(PIPELINE)
    runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    # The Transform, Trainer and Evaluator kills; every other run here finished (the disk-full pair went to the
    # server).
    assert (
        [r.info.status for r in runs].count("KILLED") == 3
        and faults["unwritable"]["mlflow"] == [r.info.status for r in runs]
        and "RUNNING" not in faults["unwritable"]["mlflow"]
    )
    killed = [r for r in runs if r.info.status == "KILLED"]
    assert all("stopped without finishing" in r.data.tags["tfxflow.error"] for r in killed)


def test_sigterm_stops_the_run_cleanly_at_once(faults):
    step, before = faults["term_trainer"], faults["after_transform"]
    assert step["rc"] == 143
    trainer = max(i for i, (name, _) in step["executions"].items() if name == "Trainer")
    assert (
        f"error: the run was stopped (SIGTERM); marked CANCELED in ML Metadata: Trainer (execution {trainer})"
        in step["stderr"]
    ), step["stderr"][-3000:]
    assert "Traceback" not in step["stderr"] and "stopped at Trainer" in step["result"]
    assert f"{'Trainer':<{NAME_WIDTH}} STOPPED" in step["result"]
    assert step["executions"][trainer] == ("Trainer", "CANCELED")
    assert "RUNNING" not in [state for _, state in step["executions"].values()]
    assert step["mlflow"] == before["mlflow"] + ["FAILED"] and step["snapshot"] == before["snapshot"]
    # Nothing was left for the next run to clean up.
    assert "recovered from an interrupted run" not in faults["disk_full"]["result"].stdout


def test_full_disk_fails_clearly_and_the_next_run_succeeds(faults, mlflow_server):
    full, after, before = faults["disk_full"], faults["after_disk_full"], faults["after_transform"]
    result = full["result"]
    store, graph = full["sizes"]
    assert graph - store > 64 << 10, f"the limit needs room between the store ({store} B) and the graph ({graph} B)"
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "error: the run failed: the file system refused a write (File too large) writing " in result.stderr
    assert "/Trainer/model/" in result.stderr and "MB free there" in result.stderr
    assert "stopped at Trainer" in result.stdout
    assert "pushed:         no; the served model is untouched: version " in result.stdout
    assert full["snapshot"] == before["snapshot"]
    assert _state(full, "Trainer")[-1] == "FAILED"
    # The failed Trainer's output folders are gone; only finished models are left.
    trainer_models = os.path.join(faults["home"].folder, "pipeline_root", "Trainer", "model")
    failed_id = max(i for i, (name, _) in full["executions"].items() if name == "Trainer")
    assert not os.path.exists(os.path.join(trainer_models, str(failed_id)))

    _assert_ok(after["result"])
    assert len(after["versions"]) == 2
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(mlflow_server.uri)
    experiment = mlflow_client.get_experiment_by_name("tfxflow-faults")
    runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    assert [r.info.status for r in runs] == ["FAILED", "FINISHED"]
    assert "File too large" in runs[0].data.tags["tfxflow.error"]


def test_killed_trainer_resumes_from_its_backup(faults):
    killed, after = faults["kill_trainer"], faults["after_trainer"]
    assert killed["rc"] == -signal.SIGKILL and killed["backups"]
    assert killed["snapshot"] == faults["after_disk_full"]["snapshot"]
    result = after["result"]
    _assert_ok(result)
    for component in CACHED_UPSTREAM + ("Transform",):
        assert f"{component:<{NAME_WIDTH}} cached" in result.stdout
    assert "marked CANCELED in ML Metadata: Trainer (execution " in result.stdout
    trainer = report.read_run(faults["home"].metadata, PIPELINE, after["runs"][-1]).component("Trainer")
    assert trainer.state == "done"
    with open(os.path.join(trainer.outputs["model_run"][0].uri, "training_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    # Resumed after the epochs the killed Trainer had backed up; early stopping may end it before the tenth.
    assert info["epochs"] == 10 and info["resumed_from_epoch"] >= 1
    assert 1 <= info["epochs_run"] <= 10 - info["resumed_from_epoch"]
    assert not os.listdir(os.path.join(faults["home"].folder, "trainer_backup"))  # removed after the export
    assert len(after["versions"]) == 3


def test_killed_evaluator_is_rerun_on_the_cached_model(faults):
    killed, after = faults["kill_evaluator"], faults["after_evaluator"]
    assert killed["rc"] == -signal.SIGKILL
    assert killed["snapshot"] == faults["after_trainer"]["snapshot"]
    assert _state(killed, "Evaluator")[-1] == "RUNNING"
    result = after["result"]
    _assert_ok(result)
    assert f"{'Trainer':<{NAME_WIDTH}} cached" in result.stdout
    assert f"{'Evaluator':<{NAME_WIDTH}} ran" in result.stdout
    assert "marked CANCELED in ML Metadata: Evaluator (execution " in result.stdout
    assert "RUNNING" not in [state for _, state in after["executions"].values()]


def test_concurrent_runs_one_runs_one_refuses_one_waits(faults):
    step = faults["concurrent"]
    before = faults["after_evaluator"]
    first_rc, first_out, first_err = step["first"]
    assert first_rc == 0, first_out[-3000:] + first_err[-3000:]
    refused = step["refused"]
    assert refused.returncode == 4
    assert f"error: another run of this pipeline is in progress (pid {step['first_pid']} on " in refused.stderr, (
        refused.stderr
    )
    assert "run.lock" in refused.stderr and "--wait-for-lock SECONDS" in refused.stderr
    waited_rc, waited_out, _ = step["waited"]
    assert waited_rc == 0
    assert f"waiting up to 600 s for the run in progress (pid {step['first_pid']} on " in waited_out
    # Only the first run ran: one new pipeline run in ML Metadata, and the waiting run found it up to date.
    assert len(step["runs"]) == len(before["runs"]) + 1
    assert f"is up to date: nothing changed since run {step['runs'][-1]}" in waited_out
    # The same in MLflow: the refused and the waiting run started no MLflow run.
    assert step["mlflow"] == before["mlflow"] + ["FINISHED"]


def test_worse_model_is_not_pushed_and_the_run_says_why(faults):
    step = faults["worse"]
    result = step["result"]
    _assert_ok(result)
    assert "blessed:        no" in result.stdout
    assert (
        "not blessed: binary_accuracy 0." in result.stdout
        and "for the last blessed model: a change of -0." in result.stdout
        and "beyond the allowed -0.0100 (--max-regression)" in result.stdout
    )
    assert (
        "pushed:         no (the candidate was not blessed); the served model is untouched: version "
        f"{faults['concurrent']['versions'][-1]}" in result.stdout
    )
    assert step["snapshot"] == faults["concurrent"]["snapshot"]
    latest = report.read_run(faults["home"].metadata, PIPELINE)
    assert latest.blessed is False and latest.pushed_version is None
    assert latest.component("Pusher").state == "done"
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(faults["home"].mlflow_uri)
    experiment = mlflow_client.get_experiment_by_name(PIPELINE)
    run = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])[0]
    assert run.data.tags["tfxflow.blessed"] == "no" and run.data.tags["tfxflow.pushed"] == "no"
    assert "binary_accuracy" in run.data.tags["tfxflow.not_blessed_because"]


def test_unwritable_serving_dir_is_refused_before_any_work(faults):
    step = faults["unwritable"]
    result = step["result"]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    blocker = os.path.join(faults["home"].folder, "not-a-folder")
    assert (
        f"error: cannot write to the serving directory {blocker}/serving/{MODEL}: Not a directory; nothing was run"
    ) in result.stderr
    assert step["runs"] == faults["worse"]["runs"] and step["executions"] == faults["worse"]["executions"]
    assert step["snapshot"] == faults["worse"]["snapshot"]
