"""`tfxflow mlflow-sync`, run as a user runs it: each exit status in the situation that gives it. What is kept was
kept by the tracking components themselves, while a proxy in front of a real `mlflow server` answered 503."""

import json
import os

import pytest

from tests import helpers
from tests.components.tracking.test_tracking_outbox import Proxy
from tfxflow.components.tracking import mlflow_runs, tracking_outbox
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.local.run import EXIT_BUSY, EXIT_CONFIG_ERROR, EXIT_TRACKING

EXPERIMENT = "mlflow-sync"


def _sync(home, uri, *extra):
    return helpers.run_cli("mlflow-sync", "--home", str(home), "--mlflow-uri", uri, *extra, timeout=300)


def _outbox(home) -> str:
    return os.path.join(str(home), "metadata", "mlflow_outbox")


def _settings(proxy, home, key):
    return mlflow_runs.TrackingSettings(proxy.uri, EXPERIMENT, key, {"seed": 1}, "optional", 1.0, _outbox(home))


def _kept_run(proxy, home, key):
    """A pipeline run that started and ended while the server did not answer: its start and close are kept."""
    proxy.answer = 503
    settings = _settings(proxy, home, key)
    assert mlflow_runs.start_run(settings, "tfxflow-taxi") == ""
    mlflow_runs.finish_run(settings, "FINISHED")
    entry = tracking_outbox.load(settings.outbox, key)
    assert tracking_outbox.describe(entry["ops"]) == "the run's start, 1 param, the run's close (FINISHED)"
    return entry


def _errors(result):
    """The lines of stderr that are the command's own (a sync imports TensorFlow, which writes lines of its own)."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def _entry_text(home, key) -> str:
    with open(tracking_outbox.entry_path(_outbox(home), key), encoding="utf-8") as f:
        return f.read()


def _mlflow_run(server, key):
    from mlflow import MlflowClient

    return mlflow_runs.find_run(MlflowClient(server.uri), EXPERIMENT, key)


def test_nothing_kept_exits_0_without_asking_any_server(tmp_path):
    result = _sync(tmp_path / "home", f"http://127.0.0.1:{helpers.free_port()}")  # nothing listens there
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"tfxflow: nothing kept in {tmp_path}/home/metadata/mlflow_outbox\n"


def test_a_wait_under_one_second_exits_2_before_anything_is_sent(mlflow_server, tmp_path):
    home = tmp_path / "home"
    with Proxy(mlflow_server.uri) as proxy:
        kept = _kept_run(proxy, home, "sync-wait")
        proxy.answer = None
        result = _sync(home, proxy.uri, "--wait", "0.5")
    assert result.returncode == EXIT_CONFIG_ERROR == 2
    assert result.stderr == "error: --wait must be >= 1, got 0.5\n" and result.stdout == ""
    assert tracking_outbox.load(_outbox(home), "sync-wait") == kept
    assert _mlflow_run(mlflow_server, "sync-wait") is None


def test_what_was_kept_is_sent_and_exits_0(mlflow_server, tmp_path):
    home = tmp_path / "home"
    with Proxy(mlflow_server.uri) as proxy:
        kept = _kept_run(proxy, home, "sync-sent")
        proxy.answer = None
        result = _sync(home, proxy.uri)
    assert (result.returncode, _errors(result)) == (0, []), result.stderr[-3000:]
    # (MLflow's client prints a line of its own, "View run ...", when it closes a run.)
    assert [line for line in result.stdout.splitlines() if line.startswith(("tfxflow:", "  "))] == [
        f"tfxflow: MLflow tracking server {proxy.uri}",
        f"  sent to MLflow what run sync-sent kept since {kept['since']}: the run's start, 1 param, the run's "
        "close (FINISHED)",
    ]
    run = _mlflow_run(mlflow_server, "sync-sent")
    assert run.info.status == "FINISHED" and run.data.params == {"seed": "1"}
    assert os.listdir(_outbox(home)) == []


@pytest.mark.parametrize("outage", ["answers 503", "refuses connections"])
def test_a_server_that_still_does_not_answer_exits_5_and_everything_stays(mlflow_server, tmp_path, outage):
    home = tmp_path / "home"
    with Proxy(mlflow_server.uri) as proxy:
        _kept_run(proxy, home, "sync-down")
        before = _entry_text(home, "sync-down")
        if outage == "refuses connections":
            proxy.close()
        result = _sync(home, proxy.uri, "--wait", "2")
    assert result.returncode == EXIT_TRACKING == 5, result.stderr[-3000:]
    (line,) = _errors(result)
    assert line.endswith(f"; 1 run(s) stay kept in {_outbox(home)}")
    assert result.stdout == ""
    assert _entry_text(home, "sync-down") == before
    assert _mlflow_run(mlflow_server, "sync-down") is None


def test_what_mlflow_refuses_stays_kept_and_exits_5(mlflow_server, tmp_path):
    """The server answers again, but refuses what was kept (its MLflow run was deleted meanwhile)."""
    from mlflow import MlflowClient

    home = tmp_path / "home"
    with Proxy(mlflow_server.uri) as proxy:
        settings = _settings(proxy, home, "sync-refused")
        run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
        proxy.answer = 503
        ops = [{"op": "log_batch", "metrics": [["eval.auc", 0.9, 1_800_000_000_000, 0]], "params": []}]
        assert not mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord").send(ops)
        MlflowClient(mlflow_server.uri).delete_run(run_id)
        proxy.answer = None
        result = _sync(home, proxy.uri)
    assert result.returncode == EXIT_TRACKING == 5, result.stderr[-3000:]
    entry = tracking_outbox.entry_path(_outbox(home), "sync-refused")
    refused = [line for line in result.stdout.splitlines() if "MLflow refused" in line]
    assert len(refused) == 1 and refused[0].startswith(
        "  MLflow refused what run sync-refused kept (RestException: INVALID_PARAMETER_VALUE: "
    )
    assert refused[0].endswith(f"it stays in {entry}")
    assert tracking_outbox.load(_outbox(home), "sync-refused")["ops"][0] == ops[0]


def test_a_run_holding_the_lock_exits_4_and_nothing_is_sent_until_it_ends(mlflow_server, tmp_path):
    home = tmp_path / "home"
    with Proxy(mlflow_server.uri) as proxy:
        _kept_run(proxy, home, "sync-busy")
        before = _entry_text(home, "sync-busy")
        proxy.answer = None
        with run_guard.RunLock(os.path.join(str(home), "metadata")):  # as a `tfxflow run` of this home holds it
            busy = _sync(home, proxy.uri)
        assert busy.returncode == EXIT_BUSY == 4, busy.stderr[-3000:]
        (line,) = _errors(busy)
        assert line.startswith("error: another run of this pipeline is in progress (")
        assert line.endswith("; the run sends what is kept when it starts")
        assert f"pid {os.getpid()}" in line
        assert _entry_text(home, "sync-busy") == before and _mlflow_run(mlflow_server, "sync-busy") is None
        free = _sync(home, proxy.uri)  # the run ended
    assert (free.returncode, _errors(free)) == (0, []), free.stderr[-3000:]
    assert _mlflow_run(mlflow_server, "sync-busy").info.status == "FINISHED"
    assert json.loads(before)["ops"][0]["op"] == "start"
