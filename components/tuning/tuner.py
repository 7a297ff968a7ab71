"""Tuner: searches the built-in Trainer's settings with Optuna before the Trainer trains the model that is pushed.

Wired as TFX wires its own Tuner: between Transform and the Trainer, its `best_hyperparameters` (one
`best_hyperparameters.txt`, keras-tuner's HyperParameters config: `space` and `values`) is the Trainer's
`hyperparameters` input, so the model evaluated, checked and pushed is trained with the best trial's values.

Each trial is the Trainer's own training (`fit.train`) with the trial's values in place of the settings: it
reads ExampleGen's examples through Transform's graph (no CSV read, no analysis), trains on the train split and
is judged on the eval split by the per-epoch validation metric of the task's blessing metric
(`search_space.objective_metric`). Optuna's TPE sampler (seeded) proposes the values; its median pruner stops a
trial whose validation metric trails the median of earlier trials at the same epoch.

The study lives in SQLite, in `study_dir` when given (the run's home: a killed tuning resumes at its next trial,
not at trial 0, since a re-run with the same inputs and settings names the same study), else in the output.
`tuner_results` holds `trials.json`: every trial's values, state (complete, pruned, failed with its error),
objective, per-epoch metrics and time; MlflowRecord logs each as a run nested under the pipeline run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from tfxflow.components import artifact_files
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import search_space, text
from tfxflow.components.training import hardware as hardware_lib
from tfxflow.components.training.train_params import TrainParams

BEST_FILE = "best_hyperparameters.txt"  # the name TFX's own Tuner writes; its Trainer reads the only file there
TRIALS_FILE = "trials.json"
STUDY_FILE = "study.db"
COMPLETE, PRUNED, FAILED = "complete", "pruned", "failed"
# A trial that was running when its process died (found when the tuning resumes).
INTERRUPTED = "interrupted: the tuning stopped during this trial"
MAX_AUTO_WORKERS = 4  # --tune-workers 0's cap: each worker holds TensorFlow and a model (about 1 GB on a CPU)


class TuningFailed(RuntimeError):
    """No trial gave a model: the run stops here, naming the first trial's error."""


def study_name(key: Mapping[str, Any]) -> str:
    """The study of what the tuning depends on: the same inputs and settings resume it, others start anew."""
    return "tfxflow-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def keras_tuner_config(space: Sequence[search_space.Dimension], values: Mapping[str, Any]) -> Dict[str, Any]:
    """`values` as keras-tuner's `HyperParameters.get_config()` writes them, the format of TFX's Tuner: a module
    file's run_fn reads it with `keras_tuner.HyperParameters.from_config(fn_args.hyperparameters)`."""
    entries = []
    for d in space:
        common = {"name": d.name, "default": d.choices[0] if d.choices else d.low, "conditions": []}
        if d.choices:
            entries.append({"class_name": "Choice", "config": {**common, "values": list(d.choices), "ordered": True}})
        else:
            sampling = "log" if d.log else "linear"
            bounds = {"min_value": d.low, "max_value": d.high, "step": None, "sampling": sampling}
            entries.append({"class_name": "Float", "config": {**common, **bounds}})
    return {"space": entries, "values": dict(values)}


def sample(trial, dimension: search_space.Dimension):
    if dimension.choices:
        return trial.suggest_categorical(dimension.name, list(dimension.choices))
    return trial.suggest_float(dimension.name, dimension.low, dimension.high, log=dimension.log)


def objective_value(history: Mapping[str, Sequence[float]], metric: str, restored_best: bool) -> float:
    """The trial's validation `metric` for the model training ends with: at the epoch of the lowest validation
    loss where early stopping restores that epoch's weights, else at the last epoch."""
    values = history.get(f"val_{metric}") or []
    if not values:
        raise ValueError(f"training reported no val_{metric}: {sorted(history)}")
    losses = history.get("val_loss") or []
    if restored_best and len(losses) == len(values):
        return float(values[min(range(len(losses)), key=losses.__getitem__)])
    return float(values[-1])


def _pruning_callback(trial, monitor: str):
    """Reports the validation metric to Optuna after each epoch and stops training where its pruner says so."""
    import tf_keras as keras  # the built-in model's Keras

    class Pruning(keras.callbacks.Callback):
        pruned_at: Optional[int] = None

        def on_epoch_end(self, epoch, logs=None):
            value = (logs or {}).get(monitor)
            if value is None or not math.isfinite(float(value)):
                return
            trial.report(float(value), step=epoch + 1)
            if trial.should_prune():
                self.pruned_at = epoch + 1
                self.model.stop_training = True

    return Pruning()


def _trial_record(trial) -> Dict[str, Any]:
    from optuna.trial import TrialState

    state = {TrialState.COMPLETE: COMPLETE, TrialState.PRUNED: PRUNED}.get(trial.state, FAILED)
    end = trial.datetime_complete
    return {
        "number": trial.number,
        "state": state,
        "values": dict(trial.params),
        "value": trial.value if state == COMPLETE else None,
        "seconds": round((end - trial.datetime_start).total_seconds(), 2) if end and trial.datetime_start else None,
        "start_time_ms": int(trial.datetime_start.timestamp() * 1000) if trial.datetime_start else None,
        "end_time_ms": int(end.timestamp() * 1000) if end else None,
        "history": trial.user_attrs.get("history", {}),
        "worker": trial.user_attrs.get("worker", 0),
        **({"pruned_at_epoch": trial.user_attrs["pruned_at"]} if "pruned_at" in trial.user_attrs else {}),
        **({"error": trial.user_attrs.get("error", INTERRUPTED)} if state == FAILED else {}),
    }


def monitor(results: Mapping[str, Any]) -> str:
    """The metric that judged the trials: keras-tuner's objective of a module's tuner_fn as named there
    (components/tuning/module_tuner.py), else the validation metric of the built-in search's objective."""
    return results.get("monitor") or f"val_{results['objective']}"


def summary(results: Mapping[str, Any]) -> str:
    """One line: trials by state, the best trial's value and values, the time."""
    cut = sum(t.get("error") == INTERRUPTED for t in results["trials"])
    counts = {s: sum(t["state"] == s for t in results["trials"]) for s in (COMPLETE, PRUNED, FAILED)}
    counts[FAILED] -= cut
    best = results.get("best")
    best_text = (
        f"best trial {best['number']}: {monitor(results)} {best['value']:.4f} with "
        + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["values"].items())
        if best
        else "no best trial"
    )
    resumed = f", {results['resumed_trials']} from an earlier try" if results.get("resumed_trials") else ""
    resumed += f", {cut} cut short by a stop and tried again" if cut else ""
    return (
        f"{len(results['trials']) - cut} trials ({counts[COMPLETE]} complete, {counts[PRUNED]} pruned, "
        f"{counts[FAILED]} failed{resumed}) in {results['seconds']:.1f} s; {best_text}"
    )


def make_study(name: str, db_path: str, maximize: bool, seed: int, parallel: bool = False):
    """The Optuna study `name` in SQLite at `db_path`, made or, after a stop, loaded: TPE seeded with `seed`, and a
    median pruner that judges a trial from its second epoch once three trials have ended. TPE counts the trials
    other workers are running as ending at the worst value seen (Optuna 5's default constant liar), so that two
    workers do not propose the same values. `parallel`: other processes run trials of the same study (each its
    own seed), and a writer waits up to 120 s for another's lock instead of failing."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{db_path}"
    if parallel:
        storage = optuna.storages.RDBStorage(storage, engine_kwargs={"connect_args": {"timeout": 120}})
    return optuna.create_study(
        study_name=name,
        storage=storage,
        load_if_exists=True,
        direction="maximize" if maximize else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
    )


def shares(remaining: int, workers: int) -> List[int]:
    """`remaining` trials split among `workers` as evenly as whole trials allow, the first workers one more."""
    return [remaining // workers + (1 if i < remaining % workers else 0) for i in range(workers)]


def optimize(
    study,
    space: Sequence[search_space.Dimension],
    objective: str,
    train: Callable[[Mapping[str, Any], Sequence[Any]], Mapping[str, Sequence[float]]],
    count: int,
    total: int,
    seconds: float = 0.0,
    restored_best: bool = True,
    worker: int = 0,
) -> None:
    """Runs `count` trials of the study in this process (of `total` in the search; `worker` 0 is the Tuner's own
    process, recorded with each trial), starting none after `seconds` (0: no limit). Each samples `space` and
    calls `train(values, callbacks)`, which returns the per-epoch history (`val_<objective>` among it) and passes
    the callbacks (the pruner's) to Keras. A trial that raises is recorded failed with its error and the study
    goes on."""
    import optuna

    def run_trial(trial) -> float:
        trial.set_user_attr("worker", worker)
        values = {d.name: sample(trial, d) for d in space}
        pruning = _pruning_callback(trial, f"val_{objective}")
        try:
            history = train(values, [pruning])
            curves = {k: [float(v) for v in vs] for k, vs in history.items() if not k.endswith("_ms")}
            trial.set_user_attr("history", curves)
            if pruning.pruned_at is not None:
                trial.set_user_attr("pruned_at", pruning.pruned_at)
            else:
                value = objective_value(curves, objective, restored_best)
                if not math.isfinite(value):
                    raise ValueError(f"val_{objective} is {value}")
                return value
        except Exception as err:  # recorded with the trial; Optuna marks it failed and goes on
            trial.set_user_attr("error", f"{type(err).__name__}: {err}"[:2000])
            raise
        raise optuna.TrialPruned(f"pruned after epoch {pruning.pruned_at}")

    def progress(_, trial) -> None:
        record = _trial_record(trial)
        shown = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in record["values"].items())
        outcome = f"val_{objective} {record['value']:.4f}" if record["state"] == COMPLETE else record["state"]
        if record["state"] == FAILED:
            outcome += f" ({record['error']})"
        logging.info("Tuner: trial %d/%d %s in %ss: %s", trial.number + 1, total, outcome, record["seconds"], shown)

    if count:
        study.optimize(
            run_trial,
            n_trials=count,
            timeout=seconds or None,
            catch=(Exception,),
            callbacks=[progress],
            gc_after_trial=True,
        )


def search(
    study,
    space: Sequence[search_space.Dimension],
    objective: str,
    train: Callable[[Mapping[str, Any], Sequence[Any]], Mapping[str, Sequence[float]]],
    trials: int,
    seconds: float = 0.0,
    restored_best: bool = True,
    workers: int = 1,
    start_workers: Optional[Callable[[Sequence[int], float], Callable[[], List[str]]]] = None,
) -> Dict[str, Any]:
    """Runs the study's trials up to `trials` in all (those an earlier, stopped try finished count; one it cut
    short is tried again), starting none after `seconds` (0: no limit), as `optimize` runs them. With `workers`
    > 1, `start_workers(counts, seconds)` starts the other workers (processes running `optimize` on the same
    study, one per count of trials) and returns a function that waits for them and names those that failed;
    this process runs the first share. Returns the results `trials.json` holds; `best` is None where no trial
    completed."""
    resumed = _close_interrupted(study)  # before any worker starts: their running trials are not a stop's
    started = time.monotonic()
    remaining = max(0, trials - resumed)
    if resumed:
        logging.info("Tuner: resuming study %s: %d trials done before, %d to go", study.study_name, resumed, remaining)
    counts = shares(remaining, max(1, workers)) if start_workers is not None else [remaining]
    wait = start_workers(counts[1:], seconds) if len(counts) > 1 and any(counts[1:]) else (lambda: [])
    try:
        optimize(study, space, objective, train, counts[0], trials, seconds, restored_best)
    finally:
        problems = wait()
    for problem in problems:
        logging.warning("Tuner: %s", problem)
    if problems:  # a worker that died left its running trial, and its share unrun: marked, then run here
        _fail_running(study, f"its worker stopped: {'; '.join(problems)}")
        left = max(0, trials - _counted(study))
        spent = time.monotonic() - started
        if left and not (seconds and spent >= seconds):
            logging.info("Tuner: %d trials a stopped worker did not run, run here", left)
            optimize(study, space, objective, train, left, trials, max(0.0, seconds - spent), restored_best)
    records = [_trial_record(t) for t in study.trials]
    best = None
    if any(t["state"] == COMPLETE for t in records):
        found = study.best_trial
        best = {"number": found.number, "value": found.value, "values": dict(found.params)}
    return {
        "objective": objective,
        "monitor": f"val_{objective}",
        "direction": study.direction.name.lower(),
        "space": [d.to_dict() for d in space],
        "budget": {"trials": trials, "seconds": seconds},
        "resumed_trials": resumed,
        "workers": len([c for c in counts if c]) or 1,
        "seconds": round(time.monotonic() - started, 2),
        "trials": records,
        "best": best,
        **({"worker_problems": problems} if problems else {}),
    }


def failure(results: Mapping[str, Any]) -> str:
    """Why a tuning gave no model: the trials by state and the first trial's error."""
    failed = [t for t in results["trials"] if t["state"] == FAILED]
    first = f"the first trial's error: {failed[0]['error']}" if failed else "every trial was pruned"
    return f"Tuner: no trial completed ({summary(results)}); {first}"


class TrialTrainer:
    """The Trainer's training with a trial's values (`fit.train`), set up once per process from the Tuner's
    inputs (`setup`: plain values, so that a worker process gets them too); called as `train(values,
    callbacks)`, it returns the per-epoch history."""

    def __init__(self, setup: Mapping[str, Any], scratch: str):
        import tensorflow_transform as tft

        # lazy: it imports tf.Transform
        from tfxflow.components.model import keras_model as model_lib
        from tfxflow.components.training import pretrained, trainer

        self.setup, self.scratch = dict(setup), scratch
        self.custom = setup["custom_config"]
        self.config = features_lib.as_config(self.custom["features"], roles_required=False)
        self.hardware = hardware_lib.HardwareConfig.from_dict(self.custom.get("hardware", {}))
        base_model = model_lib.ModelParams.from_dict(self.custom.get("model", {}))
        self.strategy = hardware_lib.make_strategy()
        self.policy = hardware_lib.resolve_precision(self.hardware.precision)
        self.tf_transform_output = tft.TFTransformOutput(setup["transform_uri"])
        text.load_ops_for(self.tf_transform_output.transform_savedmodel_dir)
        self.eval_rows = trainer.recorded_rows(setup["eval_files"], "eval")
        self.train_rows = trainer.recorded_rows(setup["train_files"], "train")
        self.checkpoint = pretrained.pretrained_checkpoint(base_model, scratch) if base_model.init_checkpoint else None
        patience = TrainParams.from_dict(self.custom.get("training", {})).early_stopping_patience
        self.restored_best = patience > 0

    def __call__(self, values: Mapping[str, Any], callbacks: Sequence[Any]) -> Dict[str, List[float]]:
        # lazy: it imports tf.Transform
        from tfxflow.components.model import keras_model as model_lib
        from tfxflow.components.training import fit, trainer

        trial_custom = trainer.with_tuned(self.custom, values)
        model_params = model_lib.ModelParams.from_dict(trial_custom.get("model", {}))
        train_params = TrainParams.from_dict({**trial_custom.get("training", {}), "backup_root": None})
        log_dir = tempfile.mkdtemp(prefix="trial-", dir=self.scratch)
        try:
            with hardware_lib.precision_policy(self.policy):
                _, history, _ = fit.train(
                    self.config,
                    self.tf_transform_output,
                    self.setup["train_files"],
                    self.setup["eval_files"],
                    train_steps=self.setup["train_steps"],
                    eval_steps=self.setup["eval_steps"],
                    model_params=model_params,
                    train_params=train_params,
                    log_dir=log_dir,
                    hardware=self.hardware,
                    strategy=self.strategy,
                    extra_callbacks=list(callbacks),
                    raw_examples=bool(trial_custom.get("raw_examples")),
                    eval_rows=self.eval_rows,
                    checkpoint=self.checkpoint,
                    train_rows=self.train_rows,
                )
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)
        return history.history


def worker_count(requested: int) -> int:
    """`requested` workers; for 0, one per CPU this container may use (its cgroup limit: a pod's, not its node's;
    at most MAX_AUTO_WORKERS), or 1 where TensorFlow sees a GPU (trials would share it)."""
    if requested:
        return requested
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return 1
    return max(1, min(hardware_lib.pod_cpus(), MAX_AUTO_WORKERS))


def _die_with_parent(parent: int) -> None:
    """A worker ends when the Tuner's process (`parent`) does, however it ends (Linux's parent-death signal): a
    killed tuning leaves no trial running that its resumption would count as cut short. A parent already gone
    (it died while this interpreter started) ends the worker here."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent is checked below only
        pass
    if os.getppid() != parent:
        os._exit(0)


def _worker(setup: Mapping[str, Any], count: int, deadline: float, index: int, parent: int) -> None:
    """A worker process: `count` trials of the study `setup` names, none started after `deadline` (time.time();
    0: none), TPE seeded apart from the other workers'."""
    _die_with_parent(parent)

    hardware_lib.use_keras_2()  # a fresh interpreter: before TensorFlow loads, as the steps' entry points do
    logging.set_verbosity(logging.INFO)  # its trials' lines go to the run's log, as the Tuner's own
    scratch = tempfile.mkdtemp(prefix=f"tfxflow-tuner-{index}-")
    try:
        train = TrialTrainer(setup, scratch)
        study = make_study(setup["study"], setup["db_path"], setup["maximize"], setup["seed"] + index, parallel=True)
        seconds = 0.0
        if deadline:
            seconds = deadline - time.time()
            if seconds <= 0:
                return
        optimize(
            study,
            setup["space"],
            setup["objective"],
            train,
            count,
            setup["trials"],
            seconds,
            train.restored_best,
            index,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def spawn_workers(setup: Mapping[str, Any]) -> Callable[[Sequence[int], float], Callable[[], List[str]]]:
    """`search`'s start_workers: a fresh interpreter per worker (`spawn`: forking a process that has loaded
    TensorFlow is not safe), each running `_worker`."""
    import multiprocessing

    def start(counts: Sequence[int], seconds: float) -> Callable[[], List[str]]:
        context = multiprocessing.get_context("spawn")
        deadline = time.time() + seconds if seconds else 0.0
        procs = []
        for index, count in enumerate(counts, start=1):
            if count:
                args = (dict(setup), count, deadline, index, os.getpid())
                proc = context.Process(target=_worker, args=args, daemon=True)
                proc.start()
                procs.append((index, proc))

        def wait() -> List[str]:
            for _, proc in procs:
                proc.join()
            return [f"worker {i} stopped with exit status {proc.exitcode}" for i, proc in procs if proc.exitcode]

        return wait

    return start


class Executor(base_executor.BaseExecutor):
    """Runs the study and writes the best trial's values and every trial's record."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        custom = json.loads(exec_properties["custom_config"])
        space = [search_space.Dimension.from_dict(d) for d in json.loads(exec_properties["space"])]
        objective = exec_properties["objective"]
        maximize = exec_properties["direction"] == "maximize"
        budget_trials = int(exec_properties["trials"])
        budget_s = float(exec_properties.get("time_budget_s") or 0.0)
        seed = int(exec_properties.get("seed") or 0)
        train_steps = int(exec_properties.get("train_steps") or 0) or None
        eval_steps = int(exec_properties.get("eval_steps") or 0)
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        transform_uri = artifact_utils.get_single_uri(input_dict["transform_graph"])
        best_artifact = artifact_utils.get_single_instance(output_dict["best_hyperparameters"])
        results_artifact = artifact_utils.get_single_instance(output_dict["tuner_results"])

        key = {
            "examples": examples.uri,
            "transform": transform_uri,
            "custom_config": custom,
            "space": [d.to_dict() for d in space],
            "objective": objective,
            "seed": seed,
            "train_steps": train_steps,
            "eval_steps": eval_steps,
        }
        name = study_name(key)
        study_dir = exec_properties.get("study_dir") or ""
        scratch = tempfile.mkdtemp(prefix="tfxflow-tuner-")
        db_path = os.path.join(study_dir or scratch, f"{name}.db")
        if study_dir:
            os.makedirs(study_dir, exist_ok=True)
        workers = worker_count(int(exec_properties.get("workers") or 0))
        setup = {
            "custom_config": custom,
            "transform_uri": transform_uri,
            "train_files": [os.path.join(artifact_utils.get_split_uri([examples], "train"), "*")],
            "eval_files": [os.path.join(artifact_utils.get_split_uri([examples], "eval"), "*")],
            "train_steps": train_steps,
            "eval_steps": eval_steps,
            "study": name,
            "db_path": db_path,
            "maximize": maximize,
            "seed": seed,
            "space": space,
            "objective": objective,
            "trials": budget_trials,
        }
        study = make_study(name, db_path, maximize, seed, parallel=workers > 1)
        try:
            train = TrialTrainer(setup, scratch)
            results = search(
                study,
                space,
                objective,
                train,
                budget_trials,
                budget_s,
                restored_best=train.restored_best,
                workers=workers,
                start_workers=spawn_workers(setup),
            )
            results.update(study=name, seed=seed)
            results_text = json.dumps(results, indent=1)
            fileio.makedirs(results_artifact.uri)
            with fileio.open(os.path.join(results_artifact.uri, TRIALS_FILE), "w") as f:
                f.write(results_text)
            if results["best"] is None:
                raise TuningFailed(failure(results))
            fileio.makedirs(best_artifact.uri)
            with fileio.open(os.path.join(best_artifact.uri, BEST_FILE), "w") as f:
                f.write(json.dumps(keras_tuner_config(space, results["best"]["values"])))
            if not study_dir:  # the study goes with the results, where no home keeps it
                fileio.copy(db_path, os.path.join(results_artifact.uri, STUDY_FILE), overwrite=True)
            for artifact in (best_artifact, results_artifact):
                artifact.set_string_custom_property("summary", summary(results))
            logging.info("Tuner: %s", summary(results))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _interrupted(trial) -> bool:
    from optuna.trial import TrialState

    return trial.state == TrialState.FAIL and "error" not in trial.user_attrs


def _close_interrupted(study) -> int:
    """Marks the trials a killed tuning left running as failed (their process is gone; `_trial_record` names
    them interrupted); returns the count of trials that ended before this run."""
    _fail_running(study)
    return _counted(study)


def _counted(study) -> int:
    """The trials that count against the budget: every trial but those a stop cut short (tried again)."""
    return sum(not _interrupted(t) for t in study.trials)


def _fail_running(study, error: Optional[str] = None) -> None:
    """Marks the study's running trials failed, with `error` (None: interrupted by a stop, see `_interrupted`)."""
    from optuna.trial import TrialState

    storage = study._storage  # noqa: SLF001  (the study's own storage, for the error Optuna's tell cannot set)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if error is not None:
            storage.set_trial_user_attr(trial._trial_id, "error", error[:2000])  # noqa: SLF001
        study.tell(trial.number, state=TrialState.FAIL)


def read_results(results_uri: str) -> Optional[Dict[str, Any]]:
    """The `trials.json` of a Tuner's `tuner_results`, or None."""
    return artifact_files.read_json(results_uri, TRIALS_FILE)


class TunerSpec(ComponentSpec):
    """Inputs: ExampleGen's examples, Transform's graph, the schema; the Trainer's settings and the search."""

    PARAMETERS = {
        "custom_config": ExecutionParameter(type=str),
        "space": ExecutionParameter(type=str),
        "objective": ExecutionParameter(type=str),
        "direction": ExecutionParameter(type=str),
        "trials": ExecutionParameter(type=int),
        "time_budget_s": ExecutionParameter(type=float),
        "seed": ExecutionParameter(type=int),
        "workers": ExecutionParameter(type=int, optional=True),
        "train_steps": ExecutionParameter(type=int),
        "eval_steps": ExecutionParameter(type=int),
        "study_dir": ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        "examples": ChannelParameter(type=standard_artifacts.Examples),
        "transform_graph": ChannelParameter(type=standard_artifacts.TransformGraph),
        "schema": ChannelParameter(type=standard_artifacts.Schema),
    }
    OUTPUTS = {
        "best_hyperparameters": ChannelParameter(type=standard_artifacts.HyperParameters),
        "tuner_results": ChannelParameter(type=standard_artifacts.TunerResults),
    }


class Tuner(base_component.BaseComponent):
    """Searches the Trainer's settings (`space`) for the best validation `objective`; the Trainer takes its
    `best_hyperparameters` as `hyperparameters`."""

    SPEC_CLASS = TunerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        transform_graph: types.BaseChannel,
        schema: types.BaseChannel,
        custom_config: Mapping[str, Any],
        space: Sequence[search_space.Dimension],
        objective: str,
        maximize: bool,
        trials: int,
        time_budget_s: float = 0.0,
        seed: int = 0,
        train_steps: int = 0,
        eval_steps: int = 0,
        study_dir: str = "",
        workers: int = 1,
    ):
        super().__init__(
            spec=TunerSpec(
                examples=examples,
                transform_graph=transform_graph,
                schema=schema,
                custom_config=json.dumps(dict(custom_config), sort_keys=True),
                space=json.dumps([d.to_dict() for d in space]),
                objective=objective,
                direction="maximize" if maximize else "minimize",
                trials=int(trials),
                time_budget_s=float(time_budget_s),
                seed=int(seed),
                workers=int(workers),
                train_steps=int(train_steps),
                eval_steps=int(eval_steps),
                study_dir=study_dir,
                best_hyperparameters=types.Channel(type=standard_artifacts.HyperParameters),
                tuner_results=types.Channel(type=standard_artifacts.TunerResults),
            )
        )
