"""What a run logs while its MLflow server does not answer is kept in order and sent when it answers again: a
real `mlflow server` on loopback, stopped and started again on the same port and store."""

import dataclasses
import os
import time

import pytest

from tests import helpers
from tfxflow.components import tracking, tracking_outbox

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def module_server(tmp_path_factory):
    started = helpers.MlflowServer(str(tmp_path_factory.mktemp("outbox_server"))).start()
    yield started
    started.stop()


@pytest.fixture
def server(module_server):
    """A server of this module's own, answering at the start of each test: the tests stop it."""
    if module_server.process is None:
        module_server.start()
    return module_server


def _settings(server, tmp_path, key, mode="optional", wait_s=1.0):
    return tracking.TrackingSettings(
        server.uri, "outbox", key, {"training": {"batch_size": 32}}, mode, wait_s, str(tmp_path / "outbox")
    )


def _run(server, run_id):
    from mlflow import MlflowClient

    return MlflowClient(server.uri).get_run(run_id)


def test_unanswered_calls_wait_then_are_kept_in_order_and_delivered(server, tmp_path):
    settings = _settings(server, tmp_path, "run-a")
    run_id = tracking.start_run(settings, "tfxflow-taxi")
    server.stop()
    record = tracking.Tracker.of(settings, run_id, "MlflowRecord")
    started = time.monotonic()
    assert not record.send([{"op": "log_batch", "metrics": [("eval.auc", 0.91, 0, 0)], "params": [("trainer.x", "1")]}])
    waited = time.monotonic() - started
    assert not record.send([])  # nothing new: still down
    assert 1.0 <= waited < 5.0  # --tracking-wait, not MLflow's four minutes
    # Later calls of the run try briefly (RETRY_WAIT_S, not their own wait) and queue behind what waits.
    started = time.monotonic()
    finish = tracking.Tracker.of(dataclasses.replace(settings, wait_s=30.0), run_id, "MlflowFinish")
    assert not finish.send(
        [{"op": "set_tags", "tags": {"tfxflow.pushed": "no"}}, {"op": "terminate", "status": "FINISHED"}]
    )
    assert tracking_outbox.RETRY_WAIT_S - 0.5 < time.monotonic() - started < tracking_outbox.RETRY_WAIT_S + 3.0
    entry = tracking_outbox.load(settings.outbox, "run-a")
    assert entry["run_id"] == run_id and entry["uri"] == server.uri
    assert [op["op"] for op in entry["ops"]] == ["log_batch", "set_tags", "terminate"]
    assert tracking_outbox.describe(entry["ops"]) == "1 metric, 1 param, 1 tag, the run's close (FINISHED)"
    assert _run_status_after_restart(server, run_id) == "RUNNING"  # nothing reached it
    lines = tracking.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-b")
    assert lines == [
        f"sent to MLflow what run run-a kept since {entry['since']}: 1 metric, 1 param, 1 tag, the run's close "
        "(FINISHED)"
    ]
    run = _run(server, run_id)
    assert run.info.status == "FINISHED" and run.data.metrics == {"eval.auc": 0.91}
    assert run.data.params == {"training.batch_size": "32", "trainer.x": "1"}
    assert tracking.REPLACED_BY_TAG not in run.data.tags  # it finished: nothing replaced it
    assert os.listdir(settings.outbox) == []


def _run_status_after_restart(server, run_id):
    server.start()
    return _run(server, run_id).info.status


def test_required_tracking_raises_naming_server_since_and_meaning_then_the_run_is_closed_failed(server, tmp_path):
    settings = _settings(server, tmp_path, "run-c", mode="required", wait_s=1.0)
    run_id = tracking.start_run(settings, "tfxflow-taxi")
    server.stop()
    with pytest.raises(tracking_outbox.TrackingUnavailable) as err:
        tracking.Tracker.of(settings, run_id, "MlflowRecord").send(
            [{"op": "set_tags", "tags": {"tfxflow.blessed": "yes"}}], "the model was not pushed"
        )
    problem = err.value
    assert str(problem) == (
        f"MLflow tracking server {server.uri} has not answered since {problem.since} (MlflowRecord waited "
        f"{problem.waited:.0f} s, --tracking-wait; [Errno 111] Connection refused)"
    )
    assert problem.meaning == "the model was not pushed"
    assert problem.outbox_file == os.path.join(settings.outbox, "run-c.json")
    # The run's end marks it FAILED: kept too, at once.
    started = time.monotonic()
    tracking.finish_run(settings, "FAILED", f"TrackingUnavailable: {problem}", wait_s=0)
    assert time.monotonic() - started < 2.0
    server.start()
    lines = tracking.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-d")
    assert len(lines) == 1 and "the run's close (FAILED)" in lines[0]
    run = _run(server, run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["tfxflow.blessed"] == "yes"
    assert run.data.tags[tracking.REPLACED_BY_TAG] == "pipeline run run-d"
    assert run.data.tags[tracking.ERROR_TAG].startswith("TrackingUnavailable: MLflow tracking server")


def test_a_refusal_is_not_an_outage_and_is_not_waited_for_but_what_it_refused_is_kept(server, tmp_path):
    from mlflow.exceptions import MlflowException

    settings = _settings(server, tmp_path, "run-e", wait_s=30.0)
    tracker = tracking.Tracker.of(settings, "0" * 32, "MlflowRecord")
    started = time.monotonic()
    with pytest.raises(MlflowException) as err:
        tracker.send([{"op": "set_tags", "tags": {"a": "b"}}])
    assert time.monotonic() - started < 5.0
    assert tracking_outbox.outage_reason(err.value) is None
    assert tracking_outbox.load(settings.outbox, "run-e")["ops"] == [{"op": "set_tags", "tags": {"a": "b"}}]


def test_recovery_with_the_server_down_keeps_the_killed_mark_for_the_next_run(server, tmp_path):
    from tfxflow.pipeline.local import run_guard

    settings = _settings(server, tmp_path, "run-f")
    run_id = tracking.start_run(settings, "tfxflow-taxi")
    metadata = str(tmp_path / "metadata" / "metadata.sqlite")
    os.makedirs(os.path.dirname(metadata))
    run_guard.mark_started(
        metadata,
        {"run_key": "run-f", "tracking_uri": server.uri, "experiment": "outbox", "outbox": settings.outbox},
    )
    server.stop()
    recovery = run_guard.recover_interrupted(metadata, "tfxflow-taxi", str(tmp_path / "root"))
    assert recovery.mlflow_run_id is None and recovery.warnings == []
    assert (
        tracking_outbox.describe(tracking_outbox.load(settings.outbox, "run-f")["ops"])
        == "1 tag, the run's close (KILLED)"
    )
    server.start()
    tracking.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-g")
    run = _run(server, run_id)
    assert run.info.status == "KILLED" and "stopped without finishing" in run.data.tags[tracking.ERROR_TAG]
    assert run.data.tags[tracking.REPLACED_BY_TAG] == "pipeline run run-g"


def test_a_refusal_part_way_keeps_what_was_not_applied_and_raises(server, tmp_path):
    settings = _settings(server, tmp_path, "run-h")
    run_id = tracking.start_run(settings, "tfxflow-taxi")
    missing = str(tmp_path / "gone.json")
    tracker = tracking.Tracker.of(settings, run_id, "MlflowRecord")
    with pytest.raises(FileNotFoundError):  # a local file, not the server: not waited for
        tracker.send(
            [
                {"op": "set_tags", "tags": {"tfxflow.blessed": "yes"}},
                {"op": "log_artifact", "path": missing, "artifact_path": "data"},
                {"op": "terminate", "status": "FINISHED"},
            ]
        )
    entry = tracking_outbox.load(settings.outbox, "run-h")
    assert [op["op"] for op in entry["ops"]] == ["log_artifact", "terminate"]
    assert _run(server, run_id).data.tags["tfxflow.blessed"] == "yes"  # applied once, not kept again
    # Delivery reports the refusal and leaves the entry for the user to see.
    (line,) = tracking.deliver(server.uri, settings.outbox, 5.0)
    assert line.startswith("MLflow refused what run run-h kept (FileNotFoundError: ")
    assert line.endswith(f"it stays in {tracking_outbox.entry_path(settings.outbox, 'run-h')}")
