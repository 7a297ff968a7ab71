"""The run lock, the write check, recovery after a dead run, and storage errors in words."""

import errno
import os
import signal
import subprocess
import sys

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd

from tfxflow.pipeline.local import run_guard

HOLD_LOCK = (
    "import sys, time\nfrom tfxflow.pipeline.local.run_guard import RunLock\n"
    "with RunLock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(600)"
)


@pytest.fixture
def lock_holder(tmp_path):
    """Another process holding the lock on `tmp_path`, until the test kills it."""
    process = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    yield process
    process.kill()
    process.wait()


def test_second_run_is_refused_naming_the_holder(tmp_path, lock_holder):
    with pytest.raises(run_guard.RunBusy) as refused:
        with run_guard.RunLock(str(tmp_path)):
            pass
    message = str(refused.value)
    assert f"in progress (pid {lock_holder.pid} on " in message
    assert os.path.join(str(tmp_path), "run.lock") in message and "--wait-for-lock SECONDS" in message


def test_waiting_run_is_told_who_it_waits_for_and_gives_up_at_its_limit(tmp_path, lock_holder):
    told = []
    with pytest.raises(run_guard.RunBusy, match="after waiting 1 s"):
        with run_guard.RunLock(str(tmp_path), wait_s=1, poll_s=0.1, on_wait=told.append):
            pass
    assert [holder["pid"] for holder in told] == [lock_holder.pid]


def test_lock_of_a_killed_run_is_free_at_once(tmp_path, lock_holder):
    lock_holder.send_signal(signal.SIGKILL)
    lock_holder.wait()
    with run_guard.RunLock(str(tmp_path)) as lock:
        assert lock.holder()["pid"] == os.getpid()
    assert lock.holder() == {}  # released and emptied


def test_check_writable_creates_nothing_and_names_the_folder_that_fails(tmp_path, monkeypatch):
    existing = tmp_path / "home"
    existing.mkdir()
    missing = str(existing / "serving" / "taxi")
    monkeypatch.setattr(run_guard, "LOW_SPACE_BYTES", 1 << 62)  # more than any disk: every folder is "low"
    warnings = run_guard.check_writable([("home folder", str(existing)), ("serving directory", missing)])
    assert [w.startswith("only ") for w in warnings] == [True, True]
    assert warnings[1].endswith(f" MB free on the file system of the serving directory {missing}")
    assert os.listdir(existing) == []  # no probe file left, no folder created
    ok = missing
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(run_guard.NotWritable) as refused:
        run_guard.check_writable([("pipeline root", ok), ("serving directory", str(blocker / "serving"))])
    assert str(refused.value) == f"cannot write to the serving directory {blocker}/serving: Not a directory"


def test_storage_error_names_the_path_and_the_free_space(tmp_path):
    target = tmp_path / "model" / "saved_model.pb"
    err = OSError(errno.ENOSPC, "No space left on device", str(target))
    assert run_guard.storage_error(RuntimeError("Trainer failed")) is None
    wrapped = RuntimeError("Trainer failed")
    wrapped.__cause__ = err
    message = run_guard.storage_error(wrapped)
    assert message.startswith(f"the file system refused a write (No space left on device) writing {target} (")
    assert message.endswith(" MB free there)")
    # TensorFlow's file errors carry the reason in their text only.
    tf_like = RuntimeError(f"{tmp_path}/Trainer/model/43/saved_model.pb.tmp81d2; File too large")
    assert run_guard.storage_error(tf_like).startswith(
        f"the file system refused a write (File too large) writing {tmp_path}/Trainer/model/43/saved_model.pb.tmp81d2"
    )


def _store(path):
    config = mlmd.ConnectionConfig()
    config.sqlite.filename_uri = path
    config.sqlite.connection_mode = mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    return metadata_store.MetadataStore(config)


def _execution(store, node_ctx, state):
    type_id = store.put_execution_type(mlmd.ExecutionType(name="tfx.components.transform.component.Transform"))
    [execution_id] = store.put_executions([mlmd.Execution(type_id=type_id, last_known_state=state)])
    store.put_attributions_and_associations([], [mlmd.Association(context_id=node_ctx, execution_id=execution_id)])
    return execution_id


def test_recovery_cancels_running_executions_and_removes_only_unpublished_outputs(tmp_path):
    metadata = str(tmp_path / "metadata" / "metadata.sqlite")
    os.makedirs(os.path.dirname(metadata))
    root = tmp_path / "pipeline_root"
    store = _store(metadata)
    node_type = store.put_context_type(mlmd.ContextType(name="node"))
    [node, other] = store.put_contexts(
        [
            mlmd.Context(type_id=node_type, name="tfxflow-taxi.Transform"),
            mlmd.Context(type_id=node_type, name="another-pipeline.Transform"),
        ]
    )
    done = _execution(store, node, mlmd.Execution.COMPLETE)
    running = _execution(store, node, mlmd.Execution.RUNNING)
    elsewhere = _execution(store, other, mlmd.Execution.RUNNING)
    partial = root / "Transform" / "transform_graph" / str(running)
    partial.mkdir(parents=True)
    (partial / "half.pb").write_bytes(b"x" * 1000)
    (root / "Transform" / ".system" / "executor_execution" / str(running)).mkdir(parents=True)
    published = root / "Transform" / "transform_graph" / str(done)
    published.mkdir(parents=True)
    # An output folder some artifact already lives in is never removed, whatever the execution's state.
    registered = root / "Transform" / "updated_analyzer_cache" / str(running)
    registered.mkdir(parents=True)
    artifact_type = store.put_artifact_type(mlmd.ArtifactType(name="TransformCache"))
    store.put_artifacts([mlmd.Artifact(type_id=artifact_type, uri=str(registered / "value"))])
    run_guard.mark_started(metadata, {"run_key": None, "tracking_uri": None, "experiment": None})
    del store

    recovery = run_guard.recover_interrupted(metadata, "tfxflow-taxi", str(root))
    assert recovery.executions == [f"Transform (execution {running})"]
    assert sorted(recovery.removed) == sorted(
        [str(partial), str(root / "Transform" / ".system" / "executor_execution" / str(running))]
    )
    assert recovery.removed_bytes == 1000
    assert not partial.exists() and published.exists() and registered.exists()
    store = _store(metadata)
    states = {e.id: e.last_known_state for e in store.get_executions()}
    assert states == {
        done: mlmd.Execution.COMPLETE,
        running: mlmd.Execution.CANCELED,
        elsewhere: mlmd.Execution.RUNNING,
    }
    [canceled] = store.get_executions_by_id([running])
    assert "stopped while this execution ran" in canceled.custom_properties[run_guard.INTERRUPTED_PROPERTY].string_value
    assert not os.path.exists(run_guard.current_run_path(metadata))
    lines = "\n".join(recovery.lines())
    assert "marked CANCELED in ML Metadata: Transform (execution" in lines and "removed 2 partial" in lines
    # Nothing left to recover the second time.
    assert run_guard.recover_interrupted(metadata, "tfxflow-taxi", str(root)) is None


def test_recovery_marks_the_dead_runs_mlflow_run_killed(tmp_path, mlflow_server):
    from mlflow import MlflowClient

    from tfxflow.components.tracking import mlflow_runs

    metadata = str(tmp_path / "metadata" / "metadata.sqlite")
    os.makedirs(os.path.dirname(metadata))
    settings = mlflow_runs.TrackingSettings(mlflow_server.uri, "recovery", "run-key-1", {"a": 1})
    run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
    run_guard.mark_started(
        metadata, {"run_key": "run-key-1", "tracking_uri": mlflow_server.uri, "experiment": "recovery"}
    )
    recovery = run_guard.recover_interrupted(metadata, "tfxflow-taxi", str(tmp_path / "root"))
    assert recovery.mlflow_run_id == run_id and recovery.executions == []
    run = MlflowClient(mlflow_server.uri).get_run(run_id)
    assert run.info.status == "KILLED" and "stopped without finishing" in run.data.tags["tfxflow.error"]
