"""A local run as `tfxflow run` makes it: the log, the run lock, SIGTERM, recovery from an interrupted run,
the up-to-date shortcut, the run itself, and the exit status of each outcome."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import signal
import sys
from typing import List, Optional

from tfxflow.components.errors import DataError, UserCodeError
from tfxflow.components.tracking.tracking_outbox import TrackingUnavailable
from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.beam_runners import describe
from tfxflow.pipeline.config import DEFAULT_DATASET
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.staging import run_fingerprint, up_to_date
from tfxflow.pipeline.tracking_store import TrackingError, check_tracking

EXIT_CONFIG_ERROR = 2
EXIT_DATA_GATE = 3  # the data was refused: bad CSV files or anomalies
EXIT_BUSY = 4  # another run holds this metadata store
EXIT_TRACKING = 5  # the tracking server stopped answering during a run that requires tracking
EXIT_TERMINATED = 143  # SIGTERM or Ctrl-C: the run stopped, finished components stay cached


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so the run cleans up as it would on Ctrl-C."""

    def __str__(self) -> str:
        return "stopped by SIGTERM"


def _raise_terminated(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated()


def writable(folders, warn: bool = True) -> bool:
    """run_guard.check_writable with its error (and warnings) on stderr; False when a folder is refused."""
    try:
        warnings = run_guard.check_writable(folders)
    except run_guard.NotWritable as err:
        print(f"error: {err}; nothing was run", file=sys.stderr)
        return False
    for warning in warnings if warn else ():
        print(f"warning: {warning}", file=sys.stderr)
    return True


def start_log(home: str) -> Optional[str]:
    """The log file of a run under `home`, logging configured to it; None (the error printed) when the home
    or log folder cannot be written."""
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import configure_logging

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir = paths_lib.Paths.under(home).log_dir
    # Before the log exists; low space is reported with the output folders in `run`, on the same file system.
    if not writable([("home folder", os.path.abspath(home)), ("log folder", log_dir)], warn=False):
        return None
    log_file = os.path.join(log_dir, f"run-{stamp}.log")
    configure_logging(log_file)
    return log_file


def run(config, log_file: str, force: bool = False, wait_for_lock: float = 0.0) -> int:
    """Runs `config` under the run lock of its metadata store; returns the exit status."""
    paths = config.paths
    if not writable(
        [
            ("pipeline root", paths.pipeline_root),
            ("metadata folder", os.path.dirname(paths.metadata_path)),
            ("serving directory", config.model_base_dir),
            ("Trainer backup folder", paths.trainer_backup_dir),
        ]
    ):
        return EXIT_CONFIG_ERROR
    lock = run_guard.RunLock(
        os.path.dirname(paths.metadata_path),
        wait_s=max(0.0, wait_for_lock),
        on_wait=lambda holder: print(
            f"tfxflow: waiting up to {wait_for_lock:.0f} s for the run in progress "
            f"({run_guard.holder_text(holder)}) to finish",
            flush=True,
        ),
    )
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with lock:
            try:
                return _run_locked(config, log_file, force)
            except (Terminated, KeyboardInterrupt) as err:
                return _stopped(err, config, log_file)
    except run_guard.RunBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BUSY


def _stopped(err: BaseException, config, log_file: str) -> int:
    """SIGTERM or Ctrl-C: the component that was running is marked CANCELED and its partial outputs removed now,
    while this run still holds the lock."""
    how = "SIGTERM" if isinstance(err, Terminated) else "Ctrl-C"
    logging.getLogger(__name__).warning("run stopped by %s", how)
    canceled = ""
    try:
        recovery = run_guard.recover_interrupted(
            config.paths.metadata_path,
            config.pipeline_name,
            config.paths.pipeline_root,
            by=f"this run, stopped by {how}",
        )
        if recovery is not None and recovery.executions:
            canceled = f"; marked CANCELED in ML Metadata: {', '.join(recovery.executions)}"
    except Exception:  # the next run cleans up what this one could not
        logging.getLogger(__name__).exception("clean-up after %s failed", how)
    print(
        f"\nerror: the run was stopped ({how}){canceled}\n  finished components are reused when you run again"
        f"\n  full log: {log_file}",
        file=sys.stderr,
    )
    return EXIT_TERMINATED


def _run_locked(config, log_file: str, force: bool) -> int:
    """The part of a run that holds the run lock: recovery, the up-to-date check, the run."""
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import run_local, stderr_to, stdout_to

    try:
        recovery = run_guard.recover_interrupted(
            config.paths.metadata_path, config.pipeline_name, config.paths.pipeline_root
        )
    except Exception as err:  # leftovers of a dead run never block a new one
        logging.getLogger(__name__).exception("recovery failed")
        print(f"warning: could not clean up after an interrupted run: {type(err).__name__}: {err}", file=sys.stderr)
        recovery = None
    if recovery is not None:
        print("tfxflow: " + "\n".join(recovery.lines()) + "\n", flush=True)
    fingerprint = run_fingerprint(config)
    last = up_to_date(config, fingerprint) if config.enable_cache and not force else None
    if last is not None:
        _print_up_to_date(config, last)
        return 0
    tracking_line = "off"
    if config.tracking_uri:
        try:
            tracking_line = check_tracking(
                config.tracking_uri, experiment=config.experiment, model_name=config.model_name
            )
        except TrackingError as err:
            if config.tracking_mode == "required":
                print(f"error: {err}", file=sys.stderr)
                return EXIT_CONFIG_ERROR
            print(f"warning: {err}; the run is not tracked (--tracking optional)", file=sys.stderr)
            config = dataclasses.replace(config, tracking_uri=None)
            tracking_line = "off (the store did not answer)"

    print(
        f"tfxflow: pipeline {config.pipeline_name}\n  data:    {config.data_root}\n"
        f"  schema:  {config.schema_path}\n  home:    {config.paths.home}\n  log:     {log_file}\n"
        f"  mlflow:  {tracking_line}\n  beam:    {describe(config.beam_runner)}\n",
        flush=True,
    )
    for line in _text_cut_lines(config, log_file):
        print(f"tfxflow: {line}", flush=True)
    try:
        with stderr_to(log_file), stdout_to(log_file) as console:
            run_local(config, out=console, fingerprint=fingerprint)
    except Exception as err:  # the log gets the traceback, the console one line
        # The traceback goes to the log file; the console gets the error and where to look.
        logging.getLogger(__name__).exception("run failed")
        return _failed(err, config, log_file)
    return 0


def _text_cut_lines(config, log_file: str) -> list:
    """How many rows of the data root each text column's sequence_length cuts (text_lengths.cut_lines: of its
    first RUN_MAX_ROWS rows, so the run starts as soon on terabytes), with the built-in preprocessing's
    tokenizer; a module file's own preprocessing is not counted."""
    features = config.features
    if features is None or not features.text or config.user_module is not None:
        return []
    # lazy: they import TensorFlow, which the run imports next anyway
    from tfxflow.components.model import text_lengths
    from tfxflow.pipeline.local.runner import stderr_to
    from tfxflow.pipeline.tools.infer_schema import column_values

    try:
        with stderr_to(log_file):
            lines = text_lengths.cut_lines(
                features, lambda column: column_values(config.data_root, column, text_lengths.RUN_MAX_ROWS)
            )
    except (ValueError, OSError) as err:  # counting is a report: the run's own steps say what is wrong
        return [f"could not count the text rows longer than sequence_length: {err}"]
    for line in lines:
        logging.getLogger(__name__).info("%s", line)
    return lines


def _failed(err: Exception, config, log_file: str) -> int:
    """Prints why the run failed and what to do; returns its exit status."""
    if isinstance(err, TrackingUnavailable):
        print(f"\nerror: {err}", file=sys.stderr)
        if err.meaning:
            print(f"  {err.meaning}", file=sys.stderr)
        if err.outbox_file:
            print(
                f"  what the run could not log is kept in {err.outbox_file}; it is sent when the server answers "
                "again, by the next run or by `tfxflow mlflow-sync`, and the MLflow run is closed then",
                file=sys.stderr,
            )
        print(f"  full log: {log_file}", file=sys.stderr)
        return EXIT_TRACKING
    if isinstance(err, UserCodeError):
        module = f" (--module-file {config.user_module.path})" if config.user_module else ""
        print(
            f"\nerror: {err}{module}\n  nothing was pushed; the served model is untouched: {config.paths.serving_dir}"
            f"\n  full log: {log_file}",
            file=sys.stderr,
        )
        return EXIT_CONFIG_ERROR
    if isinstance(err, DataError):
        print(
            f"\n{err}\n  serving directory untouched: {config.paths.serving_dir}\n  full log: {log_file}",
            file=sys.stderr,
        )
        if getattr(err, "drifted", None):
            _print_accept_hint(config, err.drifted)
        return EXIT_DATA_GATE
    storage = run_guard.storage_error(err)
    if storage:
        print(
            f"\nerror: the run failed: {storage}\n  free space or fix the folder, then run again: finished "
            f"components are reused\n  full log: {log_file}",
            file=sys.stderr,
        )
        return 1
    first_line = (str(err).strip().splitlines() or [""])[0]
    print(f"\nerror: the run failed: {type(err).__name__}: {first_line}\n  full log: {log_file}", file=sys.stderr)
    return 1


def _print_accept_hint(config, drifted: List[str]) -> None:
    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.pipeline.tools.accept_data import accept_command

    command = accept_command(
        config.paths.home, config.paths.metadata_path, config.pipeline_name, f"tfxflow-{DEFAULT_DATASET}"
    )
    print(
        f"\nNext: look at what changed in {', '.join(drifted)}. If the new data is right (the world changed, "
        f"not the feed), make it the drift baseline and run the same command again:\n  {command} --reason "
        "'...'\nLater runs are compared with it; the check stays on. A model blessed after that becomes the "
        "baseline again.",
        file=sys.stderr,
    )


def _print_up_to_date(config, last: dict) -> None:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import metrics_text

    metrics = metrics_text(last.get("metrics", {}), last.get("task", "binary"))
    served = (
        f"version {last['pushed_version']} -> {last['pushed_destination']}"
        if last.get("pushed_version")
        else "nothing pushed by that run"
    )
    print(
        f"tfxflow: pipeline {config.pipeline_name} is up to date: nothing changed since run {last['run_id']} "
        f"({last['finished_at']}, {last['wall_s']} s)\n"
        "  the data files, schema, feature config, settings and code are the same, so every component would be "
        "served from its cache\n"
        f"  eval metrics:   {metrics or 'n/a'}\n  pushed:         {served}\n"
        "  --force runs it through TFX anyway; --no-cache re-runs every component",
        flush=True,
    )
