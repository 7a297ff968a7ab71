"""Runs the pipeline with LocalDagRunner: paths from the run config, live per-component progress, a summary."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import sys
import time
import uuid
from typing import Callable, Iterator, List, Optional, TextIO

from tfxflow.components import lane, names
from tfxflow.components.errors import DataError
from tfxflow.components.model.checkpoints import parameters_text
from tfxflow.components.model.tasks import spec
from tfxflow.components.serving_probe import mark_absent
from tfxflow.components.tracking import mlflow_runs as tracking_lib
from tfxflow.components.tracking import tracking_outbox
from tfxflow.components.tracking.mlflow_auth import redact_uri
from tfxflow.components.training import hardware
from tfxflow.pipeline import patches
from tfxflow.pipeline.config import RunConfig
from tfxflow.pipeline.heartbeat import HEARTBEAT_S, Heartbeat, tree_rss_bytes
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.reports import publish
from tfxflow.pipeline.reports import run_record as report_lib
from tfxflow.pipeline.staging import (
    forget_last_run,
    git_commit,
    record_last_run,
    run_fingerprint,
    serving_data_fingerprint,
    stage_schema,
    tracking_params,
)

# Messages LocalDagRunner (tfx.orchestration.local) and the portable launcher log around each component.
_RUNNING = "Component %s is running."
_FINISHED = "Component %s is finished."
_CACHED = "A cached execution %d is used."
_NEW = "Going to run a new execution %d"
NAME_WIDTH = 32  # the longest component id, blessed_data_statistics_resolver


@dataclasses.dataclass
class ComponentTiming:
    name: str
    status: str
    seconds: float


class ComponentProgress(logging.Handler):
    """Prints each component's start, status (ran or cached) and duration as LocalDagRunner logs them, and
    while one runs, a heartbeat line every `heartbeat_s` seconds (inside `with progress.heartbeat:`); calls
    `on_finish(component, status)` as each one ends."""

    def __init__(
        self,
        out: TextIO = sys.stdout,
        clock: Callable[[], float] = time.monotonic,
        total: int = 0,
        heartbeat_s: float = HEARTBEAT_S,
        memory: Callable[[], Optional[int]] = tree_rss_bytes,
        on_finish: Optional[Callable[[str, str], None]] = None,
    ):
        super().__init__(level=logging.INFO)
        self.out, self.clock, self.total, self.on_finish = out, clock, total, on_finish
        self.timings: List[ComponentTiming] = []
        self.current: Optional[str] = None
        self._started = 0.0
        self._status = "ran"
        self.heartbeat = Heartbeat(out, heartbeat_s, clock, memory=memory)

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == _RUNNING:
            self.current, self._started, self._status = str(record.args[0]), self.clock(), "ran"
            label = f"[{len(self.timings) + 1}/{self.total}] {self.current:<{NAME_WIDTH}}"
            self._print(f"{label} running ...")
            self.heartbeat.begin(label)
        elif record.msg == _CACHED:
            self._status = "cached"
        elif record.msg == _FINISHED and self.current:
            self._finish(self._status)

    def fail(self, status: str = "FAILED") -> None:
        """Records the component that was running when the run raised (STOPPED: by a signal)."""
        if self.current:
            self._finish(status)

    def _finish(self, status: str) -> None:
        self.heartbeat.end()
        seconds = self.clock() - self._started
        self.timings.append(ComponentTiming(self.current, status, seconds))
        self._print(f"[{len(self.timings)}/{self.total}] {self.current:<{NAME_WIDTH}} {status:<7} {seconds:7.1f} s")
        finished, self.current = self.current, None
        if self.on_finish is not None:
            self.on_finish(finished, status)

    def _print(self, line: str) -> None:
        self.heartbeat.print(line)  # whole lines, never interleaved with a heartbeat's


def configure_logging(log_file: str) -> None:
    """Sends every library log record (TFX, Beam, TF) to `log_file`; the console gets progress and errors."""
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    # MLflow, once imported, logs through a handler of its own on stderr: a machine's first run creates MLflow's
    # empty store before stderr goes to the log, and its lines reached the console. Told not to, MLflow's loggers
    # hand their records to the root logger's file.
    os.environ.setdefault("MLFLOW_CONFIGURE_LOGGING", "false")
    root = logging.getLogger()
    # Libraries call logging.basicConfig(); their INFO chatter belongs in the file, not on the console.
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.INFO)
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    logging.captureWarnings(True)
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    # absl prints a "not initialized" warning to stderr once when it is used outside app.run.
    absl_logging._warn_preinit_stderr = False  # noqa: SLF001 (absl has no public switch)


@contextlib.contextmanager
def stderr_to(log_file: str):
    """Sends file descriptor 2 (TensorFlow's and Beam's native logging) to `log_file` while the block runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log_file, "ab") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def stdout_to(log_file: str):
    """Sends file descriptor 1 to `log_file` while the block runs, and yields a stream to the console for the
    run's own lines: what a module file's code prints (Keras' progress bars), and the output of the processes
    TFX starts (pip installing a module file's wheel), go to the log with the libraries' chatter."""
    sys.stdout.flush()
    saved = os.dup(1)
    console = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8")
    with open(log_file, "ab") as f:
        os.dup2(f.fileno(), 1)
    try:
        yield console
    finally:
        sys.stdout.flush()
        console.flush()
        os.dup2(saved, 1)
        os.close(saved)
        console.close()


def warm_probe_rules(component: str, status: str) -> None:
    """The serving probe the Evaluator may start ahead (components/serving/serving_check.py): not for a model from the
    cache (its check comes from the cache too), and ended once the check is over, whoever answered it."""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.serving import serving_check

    if component == names.TRAINER:
        serving_check.allow_warm_probe(status == "ran")
    elif component == names.SERVING_CHECK:
        serving_check.discard_warm_probe()


@contextlib.contextmanager
def imports_kept_out_of_collections() -> Iterator[None]:
    """Pauses the cycle collector while the block imports the libraries and builds the pipeline (and sends
    what earlier runs left in the tracking outbox), then moves every object alive into the collector's permanent
    generation (`gc.freeze`) and resumes it; a block that raises resumes it without freezing.

    Their objects (about a million) live as long as the process. Collected while they were made, the imports
    take longer (each full collection traverses all made so far); kept collectable, each full collection of the
    run traverses them again and writes to every object's header, keeping their pages touched. Frozen, the
    run's full collections are shorter and the process smaller (`make bench` reports the run's time and peak).
    What the components make afterwards is collected as before. The imports leave a few thousand objects of
    garbage cycles, frozen with the rest: finding them would cost a full collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


# Packages that TFMA and tf.Transform import whenever they are installed, for models or graphs that use their
# ops (tensorflow_model_analysis/utils/model_util.py at import, tensorflow_transform/saved/saved_transform_io.py
# at each graph load). TF Text 2.21's op libraries are statically linked: importing it costs over a hundred MB
# resident (2.16's, about ten); TF-DF's, tens of MB.
ADDON_OP_PACKAGES = ("tensorflow_text", "tensorflow_decision_forests", "struct2tensor")
# keras_tuner, which `tfx.components` imports for its Tuner, where TFX imports it inside `except ImportError`
# (components/lane.py); only a module file's tuner_fn runs TFX's Tuner (components/tuning/module_tuner.py).
TUNER_PACKAGES = ("keras_tuner",)


def unused_packages(config: RunConfig) -> List[str]:
    """What a run of `config` never imports itself and may keep out of its process: none with a user's module
    file (it may load anything), TF Text's companions but not TF Text for a text run, all of them otherwise."""
    if config.user_module:
        return []
    tuner = list(TUNER_PACKAGES) if lane.tfx_tuner_import_is_optional() else []
    if config.features.text:
        return [name for name in ADDON_OP_PACKAGES if name != "tensorflow_text"] + tuner
    return list(ADDON_OP_PACKAGES) + tuner


@contextlib.contextmanager
def unused_packages_absent(config: RunConfig) -> Iterator[List[str]]:
    """Makes `unused_packages(config)` absent while the block runs (their imports raise ImportError, which TFMA,
    tf.Transform and TFX take as "not installed"; the serving check's probe process registers the ops a model
    needs itself) and gives their names. A text run imports TF Text first: its graphs need its ops whatever
    imported TFMA before."""
    if config.features.text and not config.user_module:
        import tensorflow_text  # noqa: F401  (registers TF Text's ops)

    absent = mark_absent(unused_packages(config))
    try:
        yield absent
    finally:
        for name in absent:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


# Gen-1 collections between full ones during the run (CPython's default: 10). With the imports frozen, the
# collector's rule that a full collection waits until a quarter as many objects are pending as live in the
# oldest generation counts only what the components made, so full collections came several times more often in
# a 1x run than every 100 gen-1 collections, which halves their time for a few percent higher peak (older
# cycles that died wait longer). Young cycles die as often as before.
FULL_COLLECTION_EVERY = 100


@contextlib.contextmanager
def fewer_full_collections(every: int = FULL_COLLECTION_EVERY) -> Iterator[None]:
    """The collector's third threshold set to `every` inside the block, restored after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], every)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def run_local(config: RunConfig, out: TextIO = sys.stdout, fingerprint: Optional[str] = None) -> report_lib.RunReport:
    """Runs the whole pipeline once; returns what MLMD recorded. Raises if a component fails.

    A run that finishes records `fingerprint` (staging.run_fingerprint), so an identical next run can be
    answered without starting TFX."""
    with unused_packages_absent(config):
        return _run_local(config, out, fingerprint)


def _run_local(config: RunConfig, out: TextIO, fingerprint: Optional[str]) -> report_lib.RunReport:
    with imports_kept_out_of_collections():
        # Imported here, not at module level, so the CLI can route TensorFlow's import-time output to the log.
        from tfx.orchestration import metadata
        from tfx.orchestration.local.local_dag_runner import LocalDagRunner

        # lazy: it imports TensorFlow, TFX and Beam
        from tfxflow.pipeline.definition import Orchestrator, create_pipeline

        patches.apply()
        # Every component shares this process and Transform initialises TensorFlow's devices before the
        # Trainer runs, so the Trainer's device settings are applied now.
        hardware.configure_devices(config.training.hardware)
        # lazy: it imports TensorFlow, TFX and Beam
        from tfxflow.components.evaluation import evaluator
        from tfxflow.components.serving import serving_check

        # A small evaluation starts the serving check's probe, which the check (next, in this process) takes over.
        evaluator.warm_up = serving_check.warm_probe

        paths = config.paths
        for folder in (paths.pipeline_root, os.path.dirname(paths.metadata_path), paths.serving_dir):
            os.makedirs(folder, exist_ok=True)
        schema_path = stage_schema(config.schema_path, paths.pipeline_root)
        tracking = None
        if config.tracking_uri:
            run_key = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
            tracking = tracking_lib.TrackingSettings(
                config.tracking_uri,
                config.experiment,
                run_key,
                tracking_params(config, schema_path),
                mode=config.tracking_mode,
                wait_s=config.tracking_wait_s,
                outbox=paths.tracking_outbox,
            )
            # What earlier runs could not log (their server did not answer) goes first; a run they left open is
            # closed, naming this one.
            for line in tracking_lib.deliver(
                config.tracking_uri, paths.tracking_outbox, tracking_outbox.RETRY_WAIT_S, replaced_by=run_key
            ):
                print(f"tfxflow: {line}", file=out, flush=True)
        pipeline = create_pipeline(
            dataclasses.replace(config, schema_path=schema_path),
            orchestrator=Orchestrator.local(
                metadata.sqlite_metadata_connection_config(paths.metadata_path),
                serving_data_fingerprint=serving_data_fingerprint(config.serving_data_root),
                tuning_dir=paths.tuning_dir,
            ),
            pipeline_root=paths.pipeline_root,
            serving_dir=paths.serving_dir,
            trainer_backup_dir=paths.trainer_backup_dir,
            keep_versions=config.keep_versions,
            tracking=tracking,
        )
        progress = ComponentProgress(out=out, total=len(pipeline.components), on_finish=warm_probe_rules)
        logging.getLogger().addHandler(progress)
        started = time.monotonic()
        # Found by the next run if this process dies before the end (run_guard.recover_interrupted).
        run_guard.mark_started(
            paths.metadata_path,
            {
                "run_key": tracking.run_key if tracking else None,
                "tracking_uri": tracking.uri if tracking else None,
                "experiment": tracking.experiment if tracking else None,
                "outbox": tracking.outbox if tracking else None,
            },
        )
    try:
        with (
            progress.heartbeat,  # stopped and joined however the run ends
            fewer_full_collections(),
            patches.payloads_in_process(config.beam_runner.workers_in_this_process),
        ):
            LocalDagRunner().run(pipeline)
    except BaseException as err:
        progress.fail("FAILED" if isinstance(err, Exception) else "STOPPED")  # SIGTERM, Ctrl-C: BaseException
        print_failure(err, progress.timings, time.monotonic() - started, config, out)
        if tracking is not None:
            _close_failed_run(tracking, err)
        if isinstance(err, Exception):  # not after SIGTERM or Ctrl-C: the user wants the run to stop now
            _publish(config, tracking, out, error=_failure_text(err))
        raise
    finally:
        logging.getLogger().removeHandler(progress)
        run_guard.mark_ended(paths.metadata_path)
        serving_check.discard_warm_probe()  # one the Evaluator started for a check that did not run
        serving_check.allow_warm_probe(True)
        evaluator.warm_up = None
    wall = time.monotonic() - started
    result = report_lib.read_run(paths.metadata_path, config.pipeline_name)
    if result is None:
        raise RuntimeError(f"the run left no record in {paths.metadata_path}")
    if result.not_pushed_reason:
        # This run's Evaluator blessed a model that was rolled back (the Pusher refused it): its new blessing is
        # revoked as the rollback revoked the old ones, so the next run's baseline stays the served model.
        from tfxflow.components.serving_dir import read_rollbacks
        from tfxflow.pipeline.tools.rollback import revoke_blessings

        for line in revoke_blessings(paths.metadata_path, config.pipeline_name, read_rollbacks(config.model_base_dir)):
            logging.info("rollback: %s", line)
    if tracking is not None:
        result.mlflow_run_id = _log_durations(tracking, progress.timings, wall)
    print_summary(result, progress.timings, wall, config, out)
    if tracking is not None:
        _print_kept(tracking, out)
    _publish(config, tracking, out, run_id=result.run_id, mlflow_run_id=result.mlflow_run_id)
    if tracking is not None and tracking_outbox.load(tracking.outbox, tracking.run_key):
        forget_last_run(config.paths.metadata_path)  # not "up to date" while its records wait: the next run sends them
        return result
    record_last_run(
        config,
        fingerprint or run_fingerprint(config),
        {
            "run_id": result.run_id,
            "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"),
            "wall_s": round(wall, 1),
            "task": config.features.task,
            "metrics": {k: v for k, v in result.metrics.items() if "." not in k},
            "blessed": result.blessed,
            "pushed_version": result.pushed_version,
            "pushed_destination": result.pushed_destination,
            "mlflow_run_id": result.mlflow_run_id,
        },
    )
    return result


def _publish(config: RunConfig, tracking, out: TextIO, *, run_id=None, mlflow_run_id=None, error=None) -> None:
    """Writes the run's page (and a pushed model's card) and ends the console output with its path. A page
    that cannot be written is a warning: it never fails the run or hides the run's own error."""
    started = time.monotonic()
    try:
        if mlflow_run_id is None and tracking is not None:
            mlflow_run_id = _mlflow_run_id(tracking)
        published = publish.publish(
            config,
            run_id=run_id,
            mlflow_run_id=mlflow_run_id,
            code_commit=git_commit(),
            error=error,
            tracking=tracking,
        )
    except Exception as err:  # the page is a view of the run; the run's outcome stands
        logging.getLogger(__name__).exception("could not write the run page")
        print(f"  report:         not written ({type(err).__name__}: {err}; see the log)", file=out, flush=True)
        return
    seconds = time.monotonic() - started
    if published.model_card:
        print(f"  model card:     {published.model_card}", file=out)
    where = " (and in the MLflow run)" if published.logged_to_mlflow else ""
    print(f"  report:         {published.report}{where} ({seconds:.1f} s)", file=out, flush=True)


def _failure_text(err: Exception) -> str:
    """What the page says stopped the run: a data refusal as the user reads it on the console."""
    return str(err) if isinstance(err, DataError) else f"{type(err).__name__}: {err}"


def _mlflow_run_id(tracking) -> Optional[str]:
    """The MLflow run of a pipeline run that stopped, or None when MLflow does not answer (at once)."""
    try:
        run = tracking_outbox.call(
            lambda: tracking_lib.find_run(tracking_lib.client(tracking.uri), tracking.experiment, tracking.run_key),
            wait_s=0,
        )
    except Exception:  # noqa: BLE001 (MLflow's client raises many kinds; the page is written without it)
        return None
    return run.info.run_id if run is not None else None


def _close_failed_run(tracking, err: BaseException) -> None:
    """Marks the MLflow run of a failed pipeline run FAILED, with the error (kept in the outbox where the server
    does not answer); never hides the original error."""
    unanswered = isinstance(err, tracking_outbox.TrackingUnavailable)
    try:
        tracking_lib.finish_run(
            tracking, "FAILED", f"{type(err).__name__}: {err}", wait_s=0 if unanswered else tracking_outbox.RETRY_WAIT_S
        )
    except Exception:  # recording the failure must not hide the run's own error
        logging.getLogger(__name__).exception("could not mark the MLflow run failed")


def _log_durations(tracking, timings: List[ComponentTiming], wall: float) -> Optional[str]:
    """Each component's seconds (and the run's) as metrics of the MLflow run (kept in the outbox where the server
    does not answer: the run finished, so this never stops it); returns the run id, "" when not known."""
    now = int(time.time() * 1000)
    metrics = [(f"duration.{t.name}", t.seconds, now, 0) for t in timings]
    metrics.append(("duration.pipeline", wall, now, 0))
    metrics.append(("components.cached", sum(t.status == "cached" for t in timings), now, 0))
    tracker = tracking_lib.Tracker.of(tracking, component="the run's end", mode="optional")
    try:
        tracker.send([{"op": "log_batch", "metrics": metrics}])
    except LookupError:  # no MLflow run to log into
        return None
    return tracker.run_id or None


def _print_kept(tracking, out: TextIO) -> None:
    """Says what this run kept in the outbox because the server did not answer (tracking optional)."""
    entry = tracking_outbox.load(tracking.outbox, tracking.run_key)
    if entry is None:
        return
    print(
        f"  mlflow:         the server has not answered since {entry['since']}; kept "
        f"{tracking_outbox.describe(entry['ops'])} in {tracking_outbox.entry_path(tracking.outbox, tracking.run_key)}"
        "\n                  sent when it answers again: by the next run, or tfxflow mlflow-sync",
        file=out,
        flush=True,
    )


def _timing_table(timings: List[ComponentTiming], wall: float) -> List[str]:
    lines = [f"  {'component':<{NAME_WIDTH}} {'status':<7} {'seconds':>8} {'share':>6}"]
    for t in timings:
        share = 100 * t.seconds / max(wall, 1e-9)
        lines.append(f"  {t.name:<{NAME_WIDTH}} {t.status:<7} {t.seconds:8.1f} {share:5.1f}%")
    return lines


def newest_version(config: RunConfig) -> str:
    """The version TF Serving serves from the serving directory (the newest), in words."""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.serving_dir import versions

    base = config.model_base_dir
    existing = versions(base)
    return f"version {existing[-1]} in {base}" if existing else f"no version in {base} yet"


def print_failure(
    err: BaseException, timings: List[ComponentTiming], wall: float, config: RunConfig, out: TextIO
) -> None:
    """The summary of a run that stopped: where, and the verdict on its data; the error follows on stderr."""
    failed = timings[-1].name if timings and timings[-1].status in ("FAILED", "STOPPED") else "?"
    lines = ["", f"Run of {config.pipeline_name}: stopped at {failed} after {wall:.1f} s", ""]
    lines += _timing_table(timings, wall)
    lines.append("")
    if isinstance(err, DataError):
        lines.append(f"  data:           refused by {failed} (the reasons follow)")
    if any(t.name == names.PUSHER and t.status == "ran" for t in timings):
        lines.append(f"  pushed:         yes, before the failure: {newest_version(config)}")
    else:
        lines.append(f"  pushed:         no; the served model is untouched: {newest_version(config)}")
    print("\n".join(lines), file=out, flush=True)


def serving_check_lines(check: Optional[dict], max_latency_ms: float) -> List[str]:
    """The summary's serving-check lines: the verdict, what was compared, the figures, and any reasons."""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.serving.serving_check import summary_line

    if check is None:
        return []
    verdict = "passed" if check["blessed"] else "FAILED (not pushed)"
    lines = [f"  serving check:  {verdict}"]
    if "load_s" in check:
        gaps = check.get("max_abs_difference", {})
        agree = ", ".join(f"{name} {gap:.1g}" for name, gap in sorted(gaps.items()))
        named = {"tensorflow_text": "TF Text's ops", "tensorflow_decision_forests": "TF Decision Forests' ops"}
        libraries = [named.get(name, name) for name in check.get("op_libraries") or ()]
        company = f"with {' and '.join(libraries)}" if libraries else "alone"
        lines.append(
            f"                  loaded in TensorFlow {check.get('tensorflow', '?')} {company} in "
            f"{check['load_s']:.1f} s; {check['golden_rows']} golden rows vs. the Evaluator's model: "
            f"max difference {agree} (tolerance {check['tolerance']:g})"
        )
    figures = summary_line(check)
    if figures:
        bound = f" (bound {max_latency_ms:g} ms)" if max_latency_ms else ""
        lines.append(f"                  {figures}{bound}")
    lines += [f"                  not pushed: {reason}" for reason in check.get("reasons", [])]
    return lines


def tuning_lines(results: Optional[dict], timings: List[ComponentTiming]) -> List[str]:
    """The summary's tuning lines: trials by state, the best trial, and the tuning's time against the Trainer's."""
    if not results:
        return []
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.tuning import tuner as tuner_lib

    seconds = {t.name: t.seconds for t in timings}
    lines = [f"  tuning:         {tuner_lib.summary(results)}"]
    if any(t.name == names.TUNER and t.status == "cached" for t in timings):
        lines.append("                  from TFX's cache: an earlier run tuned on the same data and settings")
    elif seconds.get(names.TUNER) and seconds.get(names.TRAINER):
        tuner, trainer = seconds[names.TUNER], seconds[names.TRAINER]
        lines.append(
            f"                  Tuner {tuner:.1f} s = {tuner / trainer:.1f}x the Trainer's {trainer:.1f} s;"
            " the Trainer trained with the best trial's values"
        )
    return lines


def training_lines(info: Optional[dict]) -> List[str]:
    """The summary's training lines from training_info.json: model, steps and devices, the last epoch's speed
    (and GPU memory and utilization), and whether the input pipeline held training back."""
    if not info:
        return []
    history = info.get("history") or {}

    def last(key):
        values = history.get(key) or []
        return values[-1] if values else None

    gpus = len(info.get("gpus") or [])
    devices = f"{gpus} GPU{'s' if gpus > 1 else ''}" if gpus else "the CPU"
    if not gpus and info.get("replicas", 1) > 1:
        devices = f"{info['replicas']} CPU replicas"
    if info.get("workers", 1) > 1:  # training_info counts the GPUs of one worker
        each = f"{gpus} GPU{'s' if gpus > 1 else ''} each" if gpus else "the CPU"
        devices = f"{info['workers']} workers ({each}; {info.get('replicas', '?')} replicas, {info.get('strategy')})"
    model = info.get("preset") or "a module file's model"
    if info.get("parameters"):
        count = info["parameters"]
        model += f" ({count / 1e6:.1f}M parameters)" if count >= 1e6 else f" ({count:,} parameters)"
    steps = f", {info['train_steps']:,} steps of {info['effective_batch']:,}" if "train_steps" in info else ""
    lines = []
    if info.get("init_checkpoint_name"):
        lines.append(
            f"  fine-tuned:     {info['init_checkpoint_name']} ({info['encoder_layers']} layers, "
            f"{info['encoder_hidden']} wide, {parameters_text(info['init_checkpoint_parameters'])} parameters) from "
            f"{info.get('init_checkpoint', '?')}"
        )
        model = f"the fine-tuned encoder and a {info['task']} head ({parameters_text(info['parameters'])} parameters)"
        recipe = (
            f"learning rate {info['learning_rate']:g}, dropout {info['dropout']:g} (head {info['head_dropout']:g})"
            + (f", clipped at {info['clip_norm']:g}" if info.get("clip_norm") else "")
            + (f", {info['train_steps_from']}" if info.get("train_steps_from") not in (None, "given") else "")
        )
        lines.append(f"                  {recipe}")
    lines.insert(0, f"  training:       {model}{steps} on {devices}, {info.get('precision_policy', 'float32')}")
    speed = last("examples_per_s")
    if speed is not None:
        figures = [f"{speed:,.0f} examples/s"]
        if last("tokens_per_s") is not None:
            figures.append(f"{last('tokens_per_s'):,.0f} tokens/s")
        if last("step_ms") is not None:
            figures.append(f"{last('step_ms'):.1f} ms a step")
        if last("gpu_utilization_percent") is not None:
            figures.append(f"GPU busy {last('gpu_utilization_percent'):.0f}%")
        if last("gpu_peak_memory_mb") is not None:
            figures.append(f"GPU memory peak {last('gpu_peak_memory_mb'):,.0f} MB")
        lines.append(f"                  last epoch: {', '.join(figures)}")
    if info.get("input_bound") and speed is not None:
        waited = "the GPUs waited for batches" if gpus else "the input pipeline set the pace"
        lines.append(
            f"                  input-bound: the input pipeline alone delivers {info['input_examples_per_s']:,.0f} "
            f"examples/s, training took {speed:,.0f}: {waited} (the input pipeline runs on the Trainer's CPU "
            "cores: give it more)"
        )
    return lines


def metrics_text(metrics: dict, task: str) -> str:
    """The task's summary metrics (components/model/tasks.py) in its order, e.g. "accuracy 0.9213, macro_f1
    0.8120, example_count 3,751"."""
    return ", ".join(
        f"{k} {metrics[k]:.4f}" if k != "example_count" else f"{k} {int(metrics[k]):,}"
        for k in spec(task).summary_metrics
        if k in metrics
    )


def print_summary(
    result: report_lib.RunReport, timings: List[ComponentTiming], wall: float, config: RunConfig, out: TextIO
) -> None:
    """The end-of-run table: components, rows read, eval metrics, blessing and push."""
    lines = ["", f"Run {result.run_id} of {result.pipeline_name}: {wall:.1f} s wall", ""]
    lines += _timing_table(timings, wall)
    rows = ", ".join(f"{split} {count:,}" for split, count in result.rows.items()) or "n/a"
    lines += ["", f"  rows read:      {rows}"]
    gate = result.component(names.DATA_GATE)
    if gate is not None:
        lines.append(f"  data gate:      {'passed' if gate.state in ('done', 'cached') else gate.state}")
        for check in (result.gate_checks or "").split("; "):
            if check:
                lines.append(f"                  {check}")
    if result.analyze_sample:
        lines.append(f"  transform:      analyzed {result.analyze_sample_text()} (--transform-max-rows)")
    lines += tuning_lines(result.tuning, timings)
    lines += training_lines(result.training)
    task = config.features.task
    if result.metrics:
        lines.append(f"  eval metrics:   {metrics_text(result.metrics, task)}")
        if result.eval_sample:
            lines.append(f"                  on {result.eval_sample_text()} (--eval-max-rows)")
    evaluation = config.evaluation.for_task(task)
    if result.baseline_metrics:
        metric = evaluation.metric
        if metric in result.baseline_metrics:
            lines.append(f"  baseline:       {metric} {result.baseline_metrics[metric]:.4f}")
    blessed = {None: "n/a", True: "yes", False: "no"}[result.blessed]
    lines.append(f"  blessed:        {blessed} ({config.evaluation.describe(task)})")
    if result.blessing_revoked:
        lines.append(f"                  blessing revoked: this model was {result.blessing_revoked}")
    for reason in result.blessing_failures if result.blessed is False and not result.blessing_revoked else ():
        lines.append(f"                  not blessed: {reason}")
    lines += serving_check_lines(result.serving_check, config.evaluation.max_latency_ms)
    if result.edge is not None:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.edge import edge

        lines.append(f"  edge (TFLite):  {edge.summary_line(result.edge)}")
    if result.pushed_version:
        lines.append(f"  pushed:         version {result.pushed_version} -> {result.pushed_destination}")
        if result.after_rollback:
            lines.append(f"                  after a rollback: {result.after_rollback}")
    else:
        why = result.not_pushed_reason or (
            "the candidate was not blessed"
            if result.blessed is False
            else "the serving check failed"
            if result.serving_check and not result.serving_check["blessed"]
            else "no blessing"
        )
        lines.append(f"  pushed:         no ({why}); the served model is untouched: {newest_version(config)}")
    if result.mlflow_run_id:
        lines.append(
            f"  mlflow:         run {result.mlflow_run_id} in experiment '{config.experiment}' "
            f"({redact_uri(config.tracking_uri)})"
        )
    print("\n".join(lines), file=out, flush=True)
