"""What keeps local runs safe from each other and from the runs before them.

- `check_writable`: every output folder can be written before any work starts; the error names the folder.
- `RunLock`: one run at a time per metadata store. A second run refuses at once with the holder's pid and
  start time, or waits for it (`--wait-for-lock`). The lock is an flock on `<metadata dir>/run.lock`, so the
  kernel releases it when its process dies, even by SIGKILL: a killed run never leaves a stale lock.
- `recover_interrupted`: a run that died without finishing (killed, out of memory, power lost) left executions
  RUNNING in ML Metadata, the partial output folders of those executions, and an MLflow run RUNNING. Under the
  lock nothing else can be running, so those are marked CANCELED (MLMD) and KILLED (MLflow), and the folders
  no artifact points at are removed. Finished components stay in TFX's cache and the next run reuses them.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import glob
import json
import os
import shutil
import socket
import time
from typing import Callable, List, Optional, Sequence, Tuple

from tfxflow.components.tracking import tracking_outbox
from tfxflow.pipeline.staging import write_json_atomically

LOCK_FILE = "run.lock"
CURRENT_RUN_FILE = "current_run.json"
INTERRUPTED_PROPERTY = "tfxflow_interrupted"
LOW_SPACE_BYTES = 1 << 30  # below this, a run warns: a TFX run on a few GB of CSV writes several times that
# Errors of a full or refusing file system: the run's message names the path and the free space.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES)


class RunBusy(RuntimeError):
    """Another run holds the lock; the message names it."""


class NotWritable(RuntimeError):
    """An output folder cannot be created or written; the message names it."""


def _nearest_existing(path: str) -> str:
    """`path`, or its nearest parent that exists ("" when none does: a relative path)."""
    while path and not os.path.lexists(path):
        parent = os.path.dirname(path)
        path = "" if parent == path else parent
    return path


def check_writable(folders: Sequence[Tuple[str, str]]) -> List[str]:
    """Raises NotWritable naming the first (what, folder) that cannot be written: an existing folder must take a
    probe file; a missing one needs its nearest existing parent to be a writable folder (nothing is created).
    Returns warnings for folders on a file system with less than 1 GiB free."""
    warnings = []
    for what, folder in folders:
        existing = _nearest_existing(folder)
        try:
            if not os.path.isdir(existing):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            if existing == folder:
                probe = os.path.join(folder, f".tfxflow-write-check-{os.getpid()}")
                with open(probe, "wb") as f:
                    f.write(b"ok")
                os.remove(probe)
            elif not os.access(existing, os.W_OK | os.X_OK):
                code = errno.EROFS if os.statvfs(existing).f_flag & os.ST_RDONLY else errno.EACCES
                raise OSError(code, os.strerror(code))
        except OSError as err:
            raise NotWritable(f"cannot write to the {what} {folder}: {err.strerror or err}") from None
        free = shutil.disk_usage(existing).free
        if free < LOW_SPACE_BYTES:
            warnings.append(f"only {free / 2**20:,.0f} MB free on the file system of the {what} {folder}")
    return warnings


@dataclasses.dataclass
class RunLock:
    """An exclusive lock on `<folder>/run.lock` for the life of a run; holds who has it, for the next one."""

    folder: str
    wait_s: float = 0.0
    poll_s: float = 0.5
    clock: Callable[[], float] = time.monotonic
    on_wait: Optional[Callable[[dict], None]] = None  # told once who holds the lock, when waiting for it
    _fd: Optional[int] = None

    @property
    def path(self) -> str:
        return os.path.join(self.folder, LOCK_FILE)

    def __enter__(self) -> "RunLock":
        os.makedirs(self.folder, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = self.clock() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if self.clock() >= deadline:
                    holder = self.holder()
                    os.close(fd)
                    raise RunBusy(self._busy_message(holder)) from None
                if self.on_wait is not None:
                    self.on_wait(self.holder())
                    self.on_wait = None
                time.sleep(self.poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
            ).encode(),
            0,
        )
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> dict:
        """What the holder wrote into the lock file ({} if nothing yet)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.loads(f.read() or "{}")
        except (OSError, ValueError):
            return {}

    def _busy_message(self, holder: dict) -> str:
        who = holder_text(holder)
        waited = f" after waiting {self.wait_s:.0f} s" if self.wait_s else ""
        return (
            f"another run of this pipeline is in progress ({who}): it holds {self.path}{waited}. Runs on one "
            "metadata store go one at a time; --wait-for-lock SECONDS waits for it to finish"
        )


def holder_text(holder: dict) -> str:
    """ "pid 123 on host, started 2026-11-29 10:00:00" from a lock file's record."""
    if not holder.get("pid"):
        return "another process"
    return f"pid {holder['pid']} on {holder.get('host', '?')}, started {holder.get('started', '?')}"


def current_run_path(metadata_path: str) -> str:
    return os.path.join(os.path.dirname(metadata_path), CURRENT_RUN_FILE)


def mark_started(metadata_path: str, record: dict) -> None:
    """Records the run in progress (its MLflow run key); removed by `mark_ended`, found by the next run if the
    process died first."""
    write_json_atomically(
        current_run_path(metadata_path), {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), **record}
    )


def mark_ended(metadata_path: str) -> None:
    try:
        os.remove(current_run_path(metadata_path))
    except FileNotFoundError:
        pass


@dataclasses.dataclass
class Recovery:
    """What `recover_interrupted` found and did."""

    run: dict  # the interrupted run's record ({} when only MLMD showed it)
    executions: List[str]  # "<component> (execution <id>)"
    removed: List[str]
    removed_bytes: int
    mlflow_run_id: Optional[str] = None
    warnings: List[str] = dataclasses.field(default_factory=list)

    def lines(self) -> List[str]:
        when = f" started {self.run['started']} (pid {self.run.get('pid', '?')})" if self.run.get("started") else ""
        lines = [f"recovered from an interrupted run{when}: it stopped without finishing"]
        if self.executions:
            lines.append(f"  marked CANCELED in ML Metadata: {', '.join(self.executions)}")
        if self.removed:
            lines.append(f"  removed {len(self.removed)} partial output folders ({self.removed_bytes / 2**20:.1f} MB)")
        if self.mlflow_run_id:
            lines.append(f"  MLflow run {self.mlflow_run_id} marked KILLED")
        lines += [f"  warning: {w}" for w in self.warnings]
        lines.append("  finished components are reused from the cache")
        return lines


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def recover_interrupted(
    metadata_path: str, pipeline_name: str, pipeline_root: str, by: str = "the next run"
) -> Optional[Recovery]:
    """Cleans up after runs of `pipeline_name` that died; call only while holding the RunLock. None if there
    was nothing to clean up. `by` says who cleaned up, in the executions' `tfxflow_interrupted` property."""
    marker = current_run_path(metadata_path)
    run: dict = {}
    if os.path.exists(marker):
        try:
            with open(marker, encoding="utf-8") as f:
                run = json.load(f)
        except (OSError, ValueError):
            run = {"started": "?"}
    executions, removed, removed_bytes = [], [], 0
    if os.path.exists(metadata_path):
        executions, folders = _cancel_running_executions(metadata_path, pipeline_name, pipeline_root, run, by)
        for folder in folders:
            removed_bytes += _size(folder)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if not run and not executions:
        return None
    recovery = Recovery(run, executions, removed, removed_bytes)
    if run.get("tracking_uri") and run.get("run_key"):
        from tfxflow.components.tracking import mlflow_runs as tracking_lib  # kept out of `tfxflow --help`'s import

        try:
            recovery.mlflow_run_id = _kill_mlflow_run(tracking_lib, run)
        except Exception as err:  # noqa: BLE001 (MLflow's client raises many kinds)
            recovery.warnings.append(f"could not mark the MLflow run of {run['run_key']} KILLED: {err}")
    mark_ended(metadata_path)
    return recovery


def _kill_mlflow_run(tracking_lib, run: dict) -> Optional[str]:
    """Marks the MLflow run of the dead run KILLED (kept in the outbox when its server does not answer now);
    its id, or None when there is none still RUNNING."""
    settings = tracking_lib.TrackingSettings(
        run["tracking_uri"],
        run["experiment"],
        run["run_key"],
        mode="optional",
        wait_s=tracking_outbox.RETRY_WAIT_S,
        outbox=run.get("outbox") or "",
    )
    why = f"the pipeline process stopped without finishing (killed); started {run.get('started')}"
    tracker = tracking_lib.Tracker.of(settings, component="recovery")
    try:
        sent = tracker.send(
            [{"op": "terminate", "status": "KILLED", "only_if_running": True, "tags": {tracking_lib.ERROR_TAG: why}}]
        )
    except LookupError:  # the run never reached MLflow
        return None
    return tracker.run_id if sent and tracker.closed else None


def _cancel_running_executions(
    metadata_path: str, pipeline_name: str, pipeline_root: str, run: dict, by: str
) -> Tuple[List[str], List[str]]:
    """Marks the pipeline's NEW/RUNNING executions CANCELED; returns them and their output folders that no
    artifact points at."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd

    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.reports.run_record import open_store

    store = open_store(metadata_path, readonly=False)
    prefix = pipeline_name + "."
    names, folders, stale = [], [], []
    for node in store.get_contexts_by_type("node"):
        if not node.name.startswith(prefix):
            continue
        node_id = node.name[len(prefix) :]
        for execution in store.get_executions_by_context(node.id):
            if execution.last_known_state not in (mlmd.Execution.NEW, mlmd.Execution.RUNNING):
                continue
            execution.last_known_state = mlmd.Execution.CANCELED
            started = f" started {run['started']}" if run.get("started") else ""
            execution.custom_properties[
                INTERRUPTED_PROPERTY
            ].string_value = f"the run{started} stopped while this execution ran; marked by {by}"
            stale.append(execution)
            names.append(f"{node_id} (execution {execution.id})")
            node_dir = os.path.join(pipeline_root, node_id)
            candidates = glob.glob(os.path.join(node_dir, "*", str(execution.id)))
            candidates.append(os.path.join(node_dir, ".system", "executor_execution", str(execution.id)))
            folders += [c for c in candidates if os.path.exists(c)]
    if not stale:
        return [], []
    store.put_executions(stale)
    # A folder some artifact lives in (or under: value artifacts are files in it) is never removed.
    uris = [a.uri for a in store.get_artifacts()]
    return names, [f for f in folders if not any(u == f or u.startswith(f + os.sep) for u in uris)]


def storage_error(err: BaseException) -> Optional[str]:
    """For an error of a full or refusing file system anywhere in `err`'s chain, a message naming the path
    and the free space there; None for any other error."""
    import re

    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        text = str(err)
        code = err.errno if isinstance(err, OSError) else None
        reason = next((os.strerror(c) for c in STORAGE_ERRNOS if code == c or os.strerror(c) in text), None)
        if reason:
            path = getattr(err, "filename", None) or next(iter(re.findall(r"(/[^\s;:,'\"]+)", text)), None)
            where = f" writing {path}" if path else ""
            existing = _nearest_existing(path or "")
            free = f" ({shutil.disk_usage(existing).free / 2**20:,.0f} MB free there)" if existing else ""
            return f"the file system refused a write ({reason}){where}{free}"
        err = err.__cause__ or err.__context__
    return None
