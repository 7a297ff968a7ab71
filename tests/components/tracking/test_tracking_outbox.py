"""What a run logs while its MLflow server does not answer is kept in order and sent when it answers again: a
real `mlflow server` on loopback, stopped and started again on the same port and store."""

import dataclasses
import http.server
import json
import os
import threading
import time

import pytest

from tests import helpers
from tfxflow.components.tracking import mlflow_runs, model_registry, tracking, tracking_outbox

pytestmark = pytest.mark.integration


class Proxy:
    """A reverse proxy on 127.0.0.1 in front of a real server, as nginx or a load balancer stands in front of a
    team's MLflow: it passes each request on, or while `answer` is set answers it with that HTTP status itself
    (502 or 504: its upstream is down or too slow; 503: maintenance; 403 or 404: a refusal of its own).
    `outage_at` = (path fragment, status): `answer` becomes that status at the first request whose path has it.
    `answered`: the (status, path) of each request it answered itself."""

    HOP_BY_HOP = {"connection", "content-length", "content-encoding", "host", "keep-alive", "transfer-encoding"}

    def __init__(self, target: str, answer=None, outage_at=None):
        self.target, self.answer, self.outage_at = target.rstrip("/"), answer, outage_at
        self.answered = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        chunk = self.rfile.read(size + 2)[:size]  # each chunk ends with CRLF
                        if not size:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(chunk)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status: int, headers, content: bytes) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def _handle(self) -> None:
                import requests

                body = self._body()
                with proxy._lock:
                    if proxy.outage_at and proxy.outage_at[0] in self.path:
                        proxy.answer, proxy.outage_at = proxy.outage_at[1], None
                    status = proxy.answer
                    if status is not None:
                        proxy.answered.append((status, self.path))
                if status is not None:
                    page = f"<html><body><h1>{status} {self.responses[status][0]}</h1></body></html>\n"
                    self._send(status, [("Content-Type", "text/html")], page.encode())
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in Proxy.HOP_BY_HOP}
                upstream = requests.request(
                    self.command,
                    proxy.target + self.path,
                    headers=headers,
                    data=body,
                    timeout=120,
                    allow_redirects=False,
                )
                kept = [(k, v) for k, v in upstream.headers.items() if k.lower() not in Proxy.HOP_BY_HOP]
                self._send(upstream.status_code, kept, upstream.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.uri = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops listening: a connection to its port is refused from now on."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            self.close()


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
    return mlflow_runs.TrackingSettings(
        server.uri, "outbox", key, {"training": {"batch_size": 32}}, mode, wait_s, str(tmp_path / "outbox")
    )


def _run(server, run_id):
    from mlflow import MlflowClient

    return MlflowClient(server.uri).get_run(run_id)


def test_unanswered_calls_wait_then_are_kept_in_order_and_delivered(server, tmp_path):
    settings = _settings(server, tmp_path, "run-a")
    run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
    server.stop()
    record = mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord")
    started = time.monotonic()
    assert not record.send([{"op": "log_batch", "metrics": [("eval.auc", 0.91, 0, 0)], "params": [("trainer.x", "1")]}])
    waited = time.monotonic() - started
    assert not record.send([])  # nothing new: still down
    assert 1.0 <= waited < 5.0  # --tracking-wait, not MLflow's four minutes
    # Later calls of the run try briefly (RETRY_WAIT_S, not their own wait) and queue behind what waits.
    started = time.monotonic()
    finish = mlflow_runs.Tracker.of(dataclasses.replace(settings, wait_s=30.0), run_id, "MlflowFinish")
    assert not finish.send(
        [{"op": "set_tags", "tags": {"tfxflow.pushed": "no"}}, {"op": "terminate", "status": "FINISHED"}]
    )
    assert tracking_outbox.RETRY_WAIT_S - 0.5 < time.monotonic() - started < tracking_outbox.RETRY_WAIT_S + 3.0
    entry = tracking_outbox.load(settings.outbox, "run-a")
    assert entry["run_id"] == run_id and entry["uri"] == server.uri
    assert [op["op"] for op in entry["ops"]] == ["log_batch", "set_tags", "terminate"]
    assert tracking_outbox.describe(entry["ops"]) == "1 metric, 1 param, 1 tag, the run's close (FINISHED)"
    assert _run_status_after_restart(server, run_id) == "RUNNING"  # nothing reached it
    lines = mlflow_runs.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-b")
    assert lines == [
        f"sent to MLflow what run run-a kept since {entry['since']}: 1 metric, 1 param, 1 tag, the run's close "
        "(FINISHED)"
    ]
    run = _run(server, run_id)
    assert run.info.status == "FINISHED" and run.data.metrics == {"eval.auc": 0.91}
    assert run.data.params == {"training.batch_size": "32", "trainer.x": "1"}
    assert mlflow_runs.REPLACED_BY_TAG not in run.data.tags  # it finished: nothing replaced it
    assert os.listdir(settings.outbox) == []


def _run_status_after_restart(server, run_id):
    server.start()
    return _run(server, run_id).info.status


def test_required_tracking_raises_naming_server_since_and_meaning_then_the_run_is_closed_failed(server, tmp_path):
    settings = _settings(server, tmp_path, "run-c", mode="required", wait_s=1.0)
    run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
    server.stop()
    with pytest.raises(tracking_outbox.TrackingUnavailable) as err:
        mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord").send(
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
    mlflow_runs.finish_run(settings, "FAILED", f"TrackingUnavailable: {problem}", wait_s=0)
    assert time.monotonic() - started < 2.0
    server.start()
    lines = mlflow_runs.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-d")
    assert len(lines) == 1 and "the run's close (FAILED)" in lines[0]
    run = _run(server, run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["tfxflow.blessed"] == "yes"
    assert run.data.tags[mlflow_runs.REPLACED_BY_TAG] == "pipeline run run-d"
    assert run.data.tags[mlflow_runs.ERROR_TAG].startswith("TrackingUnavailable: MLflow tracking server")


def test_a_refusal_is_not_an_outage_and_is_not_waited_for_but_what_it_refused_is_kept(server, tmp_path):
    from mlflow.exceptions import MlflowException

    settings = _settings(server, tmp_path, "run-e", wait_s=30.0)
    tracker = mlflow_runs.Tracker.of(settings, "0" * 32, "MlflowRecord")
    started = time.monotonic()
    with pytest.raises(MlflowException) as err:
        tracker.send([{"op": "set_tags", "tags": {"a": "b"}}])
    assert time.monotonic() - started < 5.0
    assert tracking_outbox.outage_reason(err.value) is None
    assert tracking_outbox.load(settings.outbox, "run-e")["ops"] == [{"op": "set_tags", "tags": {"a": "b"}}]


def test_recovery_with_the_server_down_keeps_the_killed_mark_for_the_next_run(server, tmp_path):
    from tfxflow.pipeline.local import run_guard

    settings = _settings(server, tmp_path, "run-f")
    run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
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
    mlflow_runs.deliver(server.uri, settings.outbox, 5.0, replaced_by="run-g")
    run = _run(server, run_id)
    assert run.info.status == "KILLED" and "stopped without finishing" in run.data.tags[mlflow_runs.ERROR_TAG]
    assert run.data.tags[mlflow_runs.REPLACED_BY_TAG] == "pipeline run run-g"


def test_a_refusal_part_way_keeps_what_was_not_applied_and_raises(server, tmp_path):
    settings = _settings(server, tmp_path, "run-h")
    run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
    missing = str(tmp_path / "gone.json")
    tracker = mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord")
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
    (line,) = mlflow_runs.deliver(server.uri, settings.outbox, 5.0)
    assert line.startswith("MLflow refused what run run-h kept (FileNotFoundError: ")
    assert line.endswith(f"it stays in {tracking_outbox.entry_path(settings.outbox, 'run-h')}")


# --- a proxy's own answers: 502, 503 and 504 are an outage, a refusal is not ------------------------------------


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_proxy_answering_502_503_or_504_is_an_outage_and_nothing_is_lost(server, tmp_path, status):
    key = f"proxy-{status}"
    with Proxy(server.uri) as proxy:
        settings = _settings(proxy, tmp_path, key, mode="required", wait_s=1.0)
        run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
        proxy.answer = status
        ops = [
            {"op": "log_batch", "metrics": [("eval.auc", 0.91, 1_800_000_000_000, 0)], "params": [("trainer.x", "1")]},
            {"op": "set_tags", "tags": {"tfxflow.blessed": "yes"}},
        ]
        started = time.monotonic()
        with pytest.raises(tracking_outbox.TrackingUnavailable) as err:
            mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord").send(ops, "the model was not pushed")
        # Waited and tried again, as for a server that does not answer; the reason names the status.
        assert 1.0 <= time.monotonic() - started < 5.0
        assert len(proxy.answered) >= 2 and {s for s, _ in proxy.answered} == {status}
        assert err.value.reason == f"HTTP {status}"
        assert str(err.value).endswith(f"(MlflowRecord waited 1 s, --tracking-wait; HTTP {status})")
        entry = tracking_outbox.load(settings.outbox, key)
        assert err.value.outbox_file == tracking_outbox.entry_path(settings.outbox, key)
        assert entry["ops"] == json.loads(json.dumps(ops)) and entry["run_id"] == run_id
        assert _run(server, run_id).data.metrics == {}  # nothing got through the proxy
        mlflow_runs.finish_run(settings, "FAILED", f"TrackingUnavailable: {err.value}", wait_s=0)  # the run's end
        proxy.answer = None
        lines = mlflow_runs.deliver(proxy.uri, settings.outbox, 5.0)
    assert lines == [
        f"sent to MLflow what run {key} kept since {entry['since']}: 1 metric, 1 param, 2 tags, the run's close "
        "(FAILED)"
    ]
    run = _run(server, run_id)
    assert run.info.status == "FAILED" and run.data.tags[mlflow_runs.ERROR_TAG].endswith(f"HTTP {status})")
    assert run.data.metrics == {"eval.auc": 0.91} and run.data.params["trainer.x"] == "1"
    assert run.data.tags["tfxflow.blessed"] == "yes"
    assert os.listdir(settings.outbox) == []


@pytest.mark.parametrize("status", [403, 404])
def test_a_proxy_refusing_with_403_or_404_is_not_an_outage(server, tmp_path, status):
    from mlflow.exceptions import MlflowException

    key = f"proxy-{status}"
    with Proxy(server.uri) as proxy:
        settings = _settings(proxy, tmp_path, key, mode="required", wait_s=30.0)
        run_id = mlflow_runs.start_run(settings, "tfxflow-taxi")
        proxy.answer = status
        started = time.monotonic()
        with pytest.raises(MlflowException) as err:  # not TrackingUnavailable: no wait, no "has not answered"
            mlflow_runs.Tracker.of(settings, run_id, "MlflowRecord").send([{"op": "set_tags", "tags": {"a": "b"}}])
    assert time.monotonic() - started < 5.0  # not the 30 s of --tracking-wait
    assert [s for s, _ in proxy.answered] == [status]  # asked once: a refusal is not tried again
    assert f"{status}" in str(err.value)
    assert tracking_outbox.outage_reason(err.value) is None
    # What it refused stays for the user to see, as any refusal does.
    assert tracking_outbox.load(settings.outbox, key)["ops"] == [{"op": "set_tags", "tags": {"a": "b"}}]


# --- late records: their times, and the champion alias ---------------------------------------------------------

NOW = 1_800_000_000  # pushed versions (the Pusher's seconds)


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved_models")
    return helpers.save_scale_models(root)


def _finish(settings, run_id, model_uri, registered_name, pushed_version=None, destination=""):
    """MlflowFinish of a run that pushed `pushed_version` of the SavedModel at `model_uri` (None: pushed nothing)."""
    from tfx.types import standard_artifacts

    model = standard_artifacts.Model()
    model.uri = model_uri
    pushed_model = standard_artifacts.PushedModel()
    pushed_model.uri = destination or model_uri
    pushed_model.set_int_custom_property("pushed", int(pushed_version is not None))
    if pushed_version is not None:
        pushed_model.set_string_custom_property("pushed_version", str(pushed_version))
        pushed_model.set_string_custom_property("pushed_destination", destination or f"/serving/{pushed_version}")
    tracking.MlflowFinish.test_call(
        run_id=run_id,
        model=model,
        pushed_model=pushed_model,
        tracking_uri=settings.uri,
        registered_model_name=registered_name,
        experiment=settings.experiment,
        run_key=settings.run_key,
        tracking_mode=settings.mode,
        tracking_wait_s=settings.wait_s,
        outbox=settings.outbox,
    )


def _registry(server, name):
    """({MLflow version: pushed version}, the champion's MLflow version) of registered model `name`."""
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(server.uri, registry_uri=server.uri)
    versions = mlflow_client.search_model_versions(f"name='{name}'")
    champion = mlflow_client.get_model_version_by_alias(name, model_registry.CHAMPION_ALIAS)
    return {v.version: v.tags["tfxflow.pushed_version"] for v in versions}, champion.version


def test_late_records_keep_their_times_the_runs_start_and_end(server, tmp_path):
    """A run whose server did not answer from its start to its end: delivered later, the MLflow run starts and
    ends when the pipeline run did, and its metrics keep their timestamps, not the delivery's."""
    with Proxy(server.uri, answer=502) as proxy:
        settings = _settings(proxy, tmp_path, "late-times")
        before_start = _now_ms()
        assert mlflow_runs.start_run(settings, "tfxflow-taxi") == ""  # kept: no run id yet
        after_start = _now_ms()
        measured = _now_ms()  # as the run's end logs its durations
        end = mlflow_runs.Tracker.of(settings, component="the run's end", mode="optional")
        assert not end.send([{"op": "log_batch", "metrics": [("duration.pipeline", 42.0, measured, 0)]}])
        before_finish = _now_ms()
        _finish(settings, "", str(tmp_path / "model"), "late-times")  # nothing pushed: its tags and the close
        after_finish = _now_ms()
        # A second run, closed FAILED by the run's end (the pipeline failed) while the server did not answer.
        failed = _settings(proxy, tmp_path, "late-failed")
        mlflow_runs.start_run(failed, "tfxflow-taxi")
        before_fail = _now_ms()
        mlflow_runs.finish_run(failed, "FAILED", "RuntimeError: boom")
        after_fail = _now_ms()
        kept = tracking_outbox.load(settings.outbox, "late-times")["ops"]
        assert [op["op"] for op in kept] == ["start", "log_batch", "set_tags", "terminate"]
        time.sleep(1.5)  # delivered well after the run ended
        proxy.answer = None
        delivered = _now_ms()
        lines = mlflow_runs.deliver(proxy.uri, settings.outbox, 5.0)
    assert len(lines) == 2 and all(line.startswith("sent to MLflow what run ") for line in lines)
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(server.uri)
    run = mlflow_runs.find_run(mlflow_client, "outbox", "late-times")
    assert run.info.status == "FINISHED" and run.data.tags["tfxflow.pushed"] == "no"
    assert run.info.start_time == kept[0]["time"] and before_start <= run.info.start_time <= after_start
    assert before_finish <= run.info.end_time <= after_finish < delivered
    (duration,) = mlflow_client.get_metric_history(run.info.run_id, "duration.pipeline")
    assert (duration.value, duration.timestamp) == (42.0, measured)
    run = mlflow_runs.find_run(mlflow_client, "outbox", "late-failed")
    assert run.info.status == "FAILED" and run.data.tags[mlflow_runs.ERROR_TAG] == "RuntimeError: boom"
    assert before_fail <= run.info.end_time <= after_fail < delivered


def test_a_late_registration_does_not_take_champion_from_a_newer_push(server, saved_models, tmp_path):
    """Run A pushes while its server does not answer, so its registration waits in its home's outbox; run B, of
    another home, pushes a newer version and registers it. A's registration, delivered then, is MLflow's highest
    version, but `champion` stays on B's push: the newer model is the one being served."""
    name = "late-newer"
    with Proxy(server.uri) as proxy:
        late = _settings(proxy, tmp_path / "home-a", "late-a")
        late_id = mlflow_runs.start_run(late, "tfxflow-taxi")
        proxy.answer = 502
        _finish(late, late_id, saved_models["a"], name, NOW)
        kept = tracking_outbox.load(late.outbox, "late-a")["ops"]
        assert [op["op"] for op in kept] == ["set_tags", "log_model", "terminate"]
        proxy.answer = None
        newer = _settings(proxy, tmp_path / "home-b", "newer-b")
        _finish(newer, mlflow_runs.start_run(newer, "tfxflow-taxi"), saved_models["b"], name, NOW + 10)
        assert _registry(server, name) == ({"1": str(NOW + 10)}, "1")
        (line,) = mlflow_runs.deliver(proxy.uri, late.outbox, 5.0)
    assert line.startswith("sent to MLflow what run late-a kept since ") and "the pushed model's registration" in line
    assert _registry(server, name) == ({"1": str(NOW + 10), "2": str(NOW)}, "1")
    run = _run(server, late_id)
    assert run.info.status == "FINISHED" and run.data.tags["tfxflow.registered_version"] == "2"


def test_a_late_registration_does_not_take_champion_from_a_rollback(server, saved_models, tmp_path):
    """B is pushed and registered; C is pushed while the server does not answer (its registration waits); the
    server answers again and C is rolled back: B is served again as a new, highest version. C's registration,
    delivered then, leaves `champion` on B, the model being served."""
    from tfxflow.components.serving import pusher
    from tfxflow.pipeline.tools import rollback

    name = "late-rollback"
    base = str(tmp_path / "serving" / name)
    with Proxy(server.uri) as proxy:
        served = _settings(proxy, tmp_path / "home", "served-b")
        served_id = mlflow_runs.start_run(served, "tfxflow-taxi")
        _finish(served, served_id, saved_models["b"], name, NOW, pusher.push_atomically(saved_models["b"], base, NOW))
        late = _settings(proxy, tmp_path / "home", "late-c")
        late_id = mlflow_runs.start_run(late, "tfxflow-taxi")
        proxy.answer = 503
        pushed = pusher.push_atomically(saved_models["c"], base, NOW + 10)
        _finish(late, late_id, saved_models["c"], name, NOW + 10, pushed)
        assert tracking_outbox.load(late.outbox, "late-c")["run_id"] == late_id
        proxy.answer = None
        done = rollback.rollback(
            base, reason="bad tips", by="ann@host", tracking_uri=proxy.uri, registered_name=name, clock=lambda: NOW + 20
        )
        assert (done.plan.target, done.new_version) == (NOW, NOW + 20)
        assert (
            done.tracking[0]
            == f"alias champion of '{name}' moved to version 1 (tagged tfxflow.republished_as {NOW + 20})"
        )
        (line,) = mlflow_runs.deliver(proxy.uri, late.outbox, 5.0)
    assert line.startswith("sent to MLflow what run late-c kept since ") and "the pushed model's registration" in line
    assert _registry(server, name) == ({"1": str(NOW), "2": str(NOW + 10)}, "1")
    assert _run(server, late_id).data.tags["tfxflow.registered_version"] == "2"
