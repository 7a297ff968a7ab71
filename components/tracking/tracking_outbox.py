"""What a run could not log to MLflow because its tracking server stopped answering, kept until it answers again.

MLflow's client retries a call for about four minutes, then raises its own exception. Here each call waits at
most the run's tracking wait (`--tracking-wait`), then the call and every later one of that pipeline run go to
an outbox folder (`<home>/metadata/mlflow_outbox/<run key>.json` beside the metadata store, whose run lock guards
it; files they log beside it) in order, and are sent when
the server answers again: by the next run before it starts work, or by `tfxflow mlflow-sync`. With `--tracking
required` the component that could not log stops the run (`TrackingUnavailable`); with `optional` the run goes
on. The operations themselves (what a logged run is made of) are applied by components/tracking/mlflow_runs.py.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

DEFAULT_WAIT_S = 60.0
# Once the server is known to be down in this run, later calls try once, this long, before they queue.
RETRY_WAIT_S = 5.0
# One request's time limit: a slow answer (a server that just started, a large upload) is not an outage.
MIN_REQUEST_S, MAX_REQUEST_S = 10.0, 120.0


class TrackingUnavailable(Exception):
    """The tracking server stopped answering during a run that requires tracking; what it means for the run is
    in `meaning`, what was kept in `outbox_file`."""

    def __init__(
        self,
        server: str,
        since: str,
        waited: float,
        reason: str,
        component: str,
        meaning: str = "",
        outbox_file: str = "",
    ):
        super().__init__(server, since, waited, reason, component, meaning, outbox_file)
        self.server, self.since, self.waited, self.reason = server, since, waited, reason
        self.component, self.meaning, self.outbox_file = component, meaning, outbox_file

    def __str__(self) -> str:
        return (
            f"MLflow tracking server {self.server} has not answered since {self.since} ({self.component} waited "
            f"{self.waited:.0f} s, --tracking-wait; {self.reason})"
        )


def root_error(err: BaseException) -> BaseException:
    """The deepest OS-level error behind MLflow's "API request ... failed" (connection refused, name not known,
    a TLS failure); urllib3 leaves a TypeError of its own below some of them, which says nothing."""
    found = err
    while err.__cause__ or err.__context__:
        err = err.__cause__ or err.__context__
        if isinstance(err, OSError):
            found = err
    return found


def outage_reason(err: BaseException) -> Optional[str]:
    """In words, why `err` means the server did not answer: no connection (refused, reset, name not resolved), a
    timeout, or 502/503/504 from it or its proxy. None for anything else (an answer that refuses the call, a
    local file that is missing), which waiting does not change."""
    import socket

    import requests
    import urllib3

    no_answer = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        urllib3.exceptions.NewConnectionError,
        urllib3.exceptions.ProtocolError,
        urllib3.exceptions.TimeoutError,
        ConnectionError,  # refused, reset, aborted
        TimeoutError,
        socket.gaierror,
    )
    chain, found = [], err
    while found is not None and found not in chain:
        chain.append(found)
        found = found.__cause__ or found.__context__
    if any(isinstance(e, requests.exceptions.RetryError) for e in chain):
        # With no retries, urllib3 reports a retryable HTTP status as "too many <status> error responses".
        unavailable = re.search(r"too many (50[234]) error responses", " ".join(str(e) for e in chain))
        return f"HTTP {unavailable.group(1)}" if unavailable else None
    if not any(isinstance(e, no_answer) for e in chain):
        return None
    root = root_error(err)
    reason = getattr(root, "reason", None) or root  # urllib3's MaxRetryError, NewConnectionError
    text = str(reason)
    text = text.split(": ", 1)[1] if text.startswith("<") and ": " in text else text
    return text[:300]


@contextlib.contextmanager
def bounded_requests(timeout_s: float) -> Iterator[None]:
    """MLflow's HTTP calls in this block make one attempt of at most `timeout_s` seconds (its own retries,
    about four minutes, are replaced by `call`'s); the settings are put back after."""
    limits = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(timeout_s)))}
    with environment(limits):
        yield


@contextlib.contextmanager
def environment(env: Dict[str, str]) -> Iterator[None]:
    """This process's environment with `env` set while the block runs, as it was after."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Unanswered(Exception):
    """A call the server did not answer within the wait: `reason` in words, `first` the time it first failed."""

    def __init__(self, reason: str, first: float, waited: float):
        super().__init__(reason)
        self.reason, self.first, self.waited = reason, first, waited


def call(fn: Callable[[], Any], wait_s: float, request_s: Optional[float] = None) -> Any:
    """`fn()`, tried again while the server does not answer, until `wait_s` seconds after the first failure
    (pauses of 1, 2, 4 ... 10 s; 0: one try); raises Unanswered then. Other errors pass through. Each request
    may take `request_s` seconds (default: the wait, at least MIN_REQUEST_S: a slow answer is not an outage)."""
    limit = request_s or min(MAX_REQUEST_S, max(wait_s, MIN_REQUEST_S))
    first = None
    pause = 1.0
    while True:
        started = time.time()
        try:
            with bounded_requests(limit):
                return fn()
        except Exception as err:  # MLflow raises MlflowException or the requests library's errors
            reason = outage_reason(err)
            if reason is None:
                raise
            first = first or started
            waited = time.time() - first
            if waited >= wait_s:
                raise Unanswered(reason, first, waited) from err
            time.sleep(min(pause, wait_s - waited))
            pause = min(pause * 2, 10.0)


def clock(seconds: float) -> str:
    """A wall-clock time as the console shows it: 2026-12-02 07:41:12 UTC."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --- the outbox ------------------------------------------------------------------------------------------------


def entry_path(outbox: str, run_key: str) -> str:
    return os.path.join(outbox, f"{run_key}.json")


def load(outbox: str, run_key: str) -> Optional[Dict[str, Any]]:
    """The pending entry of pipeline run `run_key`: {"uri", "experiment", "run_key", "run_id", "since", "ops"}."""
    path = entry_path(outbox, run_key) if outbox else ""
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def entries(outbox: str) -> List[Dict[str, Any]]:
    """Every pending entry, oldest first."""
    if not outbox or not os.path.isdir(outbox):
        return []
    found = []
    for name in os.listdir(outbox):
        if name.endswith(".json"):
            entry = load(outbox, name[: -len(".json")])
            if entry is not None:
                found.append(entry)
    return sorted(found, key=lambda e: e.get("since", ""))


def save(outbox: str, entry: Dict[str, Any]) -> str:
    """Writes `entry` (atomically); files its operations log are copied into `<outbox>/<run key>/` first, so
    that they outlive the run's scratch folders. Returns the entry's path."""
    os.makedirs(outbox, exist_ok=True)
    files = os.path.join(outbox, entry["run_key"])
    for op in entry["ops"]:
        path = op.get("path")
        # (A file that is gone stays named as it was: sending it fails again, and says so.)
        if path and os.path.exists(path) and os.path.dirname(os.path.abspath(path)) != os.path.abspath(files):
            os.makedirs(files, exist_ok=True)
            kept = os.path.join(files, f"{len(os.listdir(files)):03d}-{os.path.basename(path)}")
            shutil.copyfile(path, kept)
            op["path"] = kept
    path = entry_path(outbox, entry["run_key"])
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(entry, f, indent=1)
    os.replace(path + ".tmp", path)
    return path


def remove(outbox: str, run_key: str) -> None:
    """Forgets the entry of `run_key` (and its files): everything in it reached the server."""
    if not outbox:
        return
    with contextlib.suppress(FileNotFoundError):
        os.remove(entry_path(outbox, run_key))
    shutil.rmtree(os.path.join(outbox, run_key), ignore_errors=True)


def describe(ops: List[Dict[str, Any]]) -> str:
    """What the operations hold, in words: "12 metrics, 3 params, 9 tags, 4 files, the pushed model's
    registration, the run's close (FINISHED)"."""
    metrics = sum(len(op.get("metrics", ())) for op in ops)
    params = sum(len(op.get("params", ())) for op in ops)
    tags = sum(len(op.get("tags", ())) for op in ops)
    files = sum(op["op"] == "log_artifact" for op in ops)
    counted = [(metrics, "metric"), (params, "param"), (tags, "tag"), (files, "file")]
    parts = [
        *(["the run's start"] if any(op["op"] == "start" for op in ops) else []),
        *[f"{n} {word}{'s' if n != 1 else ''}" for n, word in counted if n],
        *(["the pushed model's registration"] if any(op["op"] == "log_model" for op in ops) else []),
        *[f"the run's close ({op['status']})" for op in ops if op["op"] == "terminate"][-1:],
    ]
    return ", ".join(parts) or "nothing"
