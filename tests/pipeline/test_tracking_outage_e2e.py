"""A team's MLflow server that goes away during a run: a real `mlflow server` on loopback, stopped at several
points of whole CLI runs and started again on the same port and store.

One home goes through the outages in turn. Each outage step is followed by what must work once the server is
back: the next run (or `tfxflow mlflow-sync`) sends what was kept, and no MLflow run stays RUNNING.
"""

import json
import os
import signal
import subprocess

import pytest

from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.current_lane]

EXPERIMENT = "tfxflow-outage"
MODEL = "taxi_outage"
EXIT_TRACKING = 5
FLAGS = [
    "--train-steps",
    "60",
    "--batch-size",
    "64",
    "--eval-every-steps",
    "30",
    "--max-regression",
    "0.5",
    "--model-name",
    MODEL,
    "--experiment",
    EXPERIMENT,
    "--tracking-wait",
    "3",
]


def jobs(base):
    """The outages in turn on one home folder and one server of their own, as one job of the session's pool of
    long runs (tests/conftest.py's `long_runs`): with the compiled pipelines' steps forked from a warm process
    there, the pool ends minutes before the main thread."""
    return {"steps": lambda: _run_outages(base)}


@pytest.fixture(scope="module")
def outages(long_runs):
    return long_runs.results("outage")["steps"]


class _Home:
    def __init__(self, base, server):
        self.folder = str(base / "home")
        self.data = helpers.write_taxi_sample(str(base / "data"), rows=1500)
        self.server = server
        self.serving = os.path.join(self.folder, "serving")
        self.outbox = os.path.join(self.folder, "metadata", "mlflow_outbox")

    def args(self, *extra):
        return [
            helpers.TFXFLOW,
            "run",
            "--home",
            self.folder,
            "--data-root",
            self.data,
            "--mlflow-uri",
            self.server.uri,
            *FLAGS,
            *extra,
        ]

    def run(self, *extra):
        return subprocess.run(self.args(*extra), capture_output=True, text=True, timeout=900, check=False)

    def sync(self):
        command = [helpers.TFXFLOW, "mlflow-sync", "--home", self.folder, "--mlflow-uri", self.server.uri]
        return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)

    def stop_server_when(self, component, *extra):
        """Runs the pipeline and stops the server once `component` starts; (status, stdout, stderr)."""
        process = subprocess.Popen(
            self.args(*extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            stdout = _until_started(process, component)
            # The run is paused while the server stops (it takes a moment): no call of its reaches it meanwhile.
            os.killpg(process.pid, signal.SIGSTOP)
            self.server.stop()
            os.killpg(process.pid, signal.SIGCONT)
            rest, stderr = process.communicate(timeout=900)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return process.returncode, stdout + rest, stderr

    def observe(self, result):
        return {
            "result": result,
            "versions": helpers.pushed_versions(self.serving, MODEL),
            "snapshot": helpers.tree_snapshot(os.path.join(self.serving, MODEL)),
            "outbox": sorted(os.listdir(self.outbox)) if os.path.isdir(self.outbox) else [],
            "kept": {
                name: [op["op"] for op in json.load(open(os.path.join(self.outbox, name), encoding="utf-8"))["ops"]]
                for name in (os.listdir(self.outbox) if os.path.isdir(self.outbox) else [])
                if name.endswith(".json")
            },
        }


def _until_started(process, component):
    """The run's stdout up to the line saying `component` started."""
    from tfxflow.pipeline.local.runner import NAME_WIDTH

    lines = []
    for line in process.stdout:
        lines.append(line)
        if f"] {component:<{NAME_WIDTH}} running" in line:
            return "".join(lines)
    raise AssertionError(f"{component} never started:\n{''.join(lines)}{process.stderr.read()[-3000:]}")


def _mlflow_runs(server):
    """{run name (the pipeline run's key): (status, metrics, tags)} of the experiment, oldest first."""
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(server.uri)
    experiment = mlflow_client.get_experiment_by_name(EXPERIMENT)
    runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    return [(r.info.run_name, r.info.status, dict(r.data.metrics), dict(r.data.tags)) for r in runs]


def _registered(server):
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(server.uri, registry_uri=server.uri)
    versions = mlflow_client.search_model_versions(f"name='{MODEL}'")
    champion = mlflow_client.get_model_version_by_alias(MODEL, "champion").version if versions else None
    return sorted(v.tags.get("tfxflow.pushed_version") for v in versions), champion


def _run_outages(base):
    server = helpers.MlflowServer(str(base / "server")).start()
    home = _Home(base, server)
    steps = {}
    try:
        # 1. --tracking required; the server stops while the Trainer runs. The Trainer, Evaluator and serving
        # check go on; MlflowRecord waits 3 s (--tracking-wait), and nothing is pushed.
        steps["required_trainer"] = home.observe(home.stop_server_when("Trainer"))
        server.start()
        # 2. The same command with the server back: cached components, the kept records sent first, the push.
        steps["after_required"] = home.observe(home.run())
        steps["after_required"]["mlflow"] = _mlflow_runs(server)

        # 3. --tracking optional; the server stops while the serving check runs (a new model: another seed), so
        # MlflowRecord, MlflowFinish and the run's end find it down. The run goes on and pushes.
        steps["optional_record"] = home.observe(
            home.stop_server_when("ServingCheck", "--seed", "7", "--tracking", "optional")
        )
        server.start()
        # 4. `tfxflow mlflow-sync` sends what the run kept.
        steps["sync"] = home.observe(home.sync())
        steps["sync"]["mlflow"] = _mlflow_runs(server)
        steps["sync"]["registered"] = _registered(server)

        # 5. --tracking required; the server stops while the Pusher runs: the model is pushed, the registration
        # and the close of the MLflow run are kept, and sent once the server is back.
        steps["required_finish"] = home.observe(home.stop_server_when("Pusher", "--seed", "9"))
        server.start()
        steps["after_finish"] = home.observe(home.sync())
        steps["after_finish"]["mlflow"] = _mlflow_runs(server)
        steps["after_finish"]["registered"] = _registered(server)
    finally:
        server.stop()
    return steps


def _step(outages, name):
    step = outages[name]
    status, stdout, stderr = (
        step["result"]
        if isinstance(step["result"], tuple)
        else (step["result"].returncode, step["result"].stdout, step["result"].stderr)
    )
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr[-3000:]
    return step, status, stdout, stderr


def test_required_tracking_stops_before_the_push_and_says_why(outages):
    step, status, stdout, stderr = _step(outages, "required_trainer")
    assert status == EXIT_TRACKING, (stdout[-2000:], stderr[-3000:])
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: MLflow tracking server http://127.0.0.1:")
    assert "has not answered since " in lines[0]
    assert "(MlflowRecord waited 3 s, --tracking-wait; [Errno 111] Connection refused)" in lines[0]
    assert (
        "the model was trained and evaluated (blessed by the Evaluator and passed the serving check) but not "
        "pushed: with --tracking required no model is pushed unrecorded; run the same command once the server "
        "answers again"
    ) in stderr
    assert "metadata/mlflow_outbox/" in stderr and "tfxflow mlflow-sync" in stderr
    assert step["versions"] == []  # nothing pushed
    assert len(step["outbox"]) == 2  # <run key>.json and the files it logs
    assert "pushed:         no; the served model is untouched" in stdout


def test_the_next_run_sends_what_was_kept_closes_the_interrupted_run_and_pushes(outages):
    step, status, stdout, stderr = _step(outages, "after_required")
    assert status == 0, stderr[-3000:]
    (first, first_status, first_metrics, first_tags), (second, second_status, second_metrics, second_tags) = step[
        "mlflow"
    ]
    assert f"tfxflow: sent to MLflow what run {first} kept since " in stdout
    assert len(step["versions"]) == 1 and step["outbox"] == []
    # The interrupted run: its records arrived, it is closed FAILED, naming why and the run that replaced it.
    assert first_status == "FAILED"
    assert first_tags["tfxflow.replaced_by"] == f"pipeline run {second}"
    assert first_tags["tfxflow.error"].startswith("TrackingUnavailable: MLflow tracking server http://127.0.0.1:")
    assert first_metrics["eval.binary_accuracy"] > 0.6 and first_metrics["data.rows.train"] > 900
    assert first_tags["tfxflow.blessed"] == "yes"
    # The run that pushed: complete.
    assert second_status == "FINISHED" and second_tags["tfxflow.pushed"] == "yes"
    assert second_metrics["eval.binary_accuracy"] == first_metrics["eval.binary_accuracy"]  # the cached model
    assert second_tags["tfxflow.pushed_version"] == step["versions"][0]


def test_optional_tracking_goes_on_pushes_and_keeps_what_it_could_not_log(outages):
    step, status, stdout, stderr = _step(outages, "optional_record")
    assert status == 0, stderr[-3000:]
    assert len(step["versions"]) == 2
    assert "  mlflow:         the server has not answered since " in stdout
    (kept,) = step["kept"].values()
    # In order: MlflowRecord's metrics, tags and five files; MlflowFinish's tags, registration and close; the
    # run's durations; its page, the page's tag, the model card (two files) and the card as the version's text.
    assert kept == [
        "log_batch",
        "set_tags",
        *["log_artifact"] * 5,
        "set_tags",
        "log_model",
        "terminate",
        "log_batch",
        "log_artifact",
        "set_tags",
        "log_artifact",
        "log_artifact",
        "describe_version",
    ]
    assert "sent when it answers again: by the next run, or tfxflow mlflow-sync" in stdout


def test_mlflow_sync_sends_it_all_and_no_run_stays_running(outages):
    step, status, stdout, stderr = _step(outages, "sync")
    assert status == 0, (stdout, stderr)
    assert "tfxflow: MLflow tracking server http://127.0.0.1:" in stdout
    assert "  sent to MLflow what run " in stdout
    assert step["outbox"] == []
    third = step["mlflow"][-1]
    name, run_status, metrics, tags = third
    assert run_status == "FINISHED"
    assert tags["tfxflow.pushed"] == "yes" and tags["tfxflow.pushed_version"] == step["versions"][1]
    assert tags["tfxflow.registered_version"] == "2"  # MLflow's numbering of the registered model's versions
    assert metrics["eval.binary_accuracy"] > 0.6 and "duration.pipeline" in metrics
    assert step["registered"] == (step["versions"], "2")
    assert [s for _, s, _, _ in step["mlflow"]].count("RUNNING") == 0


def test_an_outage_after_the_push_keeps_the_registration_and_mlflow_sync_sends_it(outages):
    step, status, stdout, stderr = _step(outages, "required_finish")
    assert status == EXIT_TRACKING, stderr[-3000:]
    assert "(MlflowFinish waited 3 s, --tracking-wait;" in stderr
    assert len(step["versions"]) == 3
    assert f"the model was recorded and pushed (version {step['versions'][2]}: " in stderr
    after, status, stdout, stderr = _step(outages, "after_finish")
    assert status == 0, (stdout, stderr)
    runs = after["mlflow"]
    assert [s for _, s, _, _ in runs] == ["FAILED", "FINISHED", "FINISHED", "FINISHED"]
    interrupted = runs[3]
    assert interrupted[3]["tfxflow.registered_version"] == "3"
    assert interrupted[3]["tfxflow.pushed_version"] == step["versions"][2]
    assert after["registered"] == (step["versions"], "3")
    assert after["versions"] == step["versions"] and after["outbox"] == []
    assert json.dumps(runs).count("RUNNING") == 0
