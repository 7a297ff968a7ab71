"""Tuner: searches the built-in Trainer's settings with Optuna before the Trainer trains the model that is pushed.

Wired as TFX wires its own Tuner: between Transform and the Trainer, its `best_hyperparameters` (one
`best_hyperparameters.txt`, keras-tuner's HyperParameters config: `space` and `values`) is the Trainer's
`hyperparameters` input, so the model evaluated, checked and pushed is trained with the best trial's values.

Each trial is the Trainer's own training (`trainer.train`) with the trial's values in place of the settings: it
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
from tfxflow.components.model import search_space

BEST_FILE = "best_hyperparameters.txt"  # the name TFX's own Tuner writes; its Trainer reads the only file there
TRIALS_FILE = "trials.json"
STUDY_FILE = "study.db"
COMPLETE, PRUNED, FAILED = "complete", "pruned", "failed"
# A trial that was running when its process died (found when the tuning resumes).
INTERRUPTED = "interrupted: the tuning stopped during this trial"


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
        **({"pruned_at_epoch": trial.user_attrs["pruned_at"]} if "pruned_at" in trial.user_attrs else {}),
        **({"error": trial.user_attrs.get("error", INTERRUPTED)} if state == FAILED else {}),
    }


def monitor(results: Mapping[str, Any]) -> str:
    """The metric that judged the trials: keras-tuner's objective of a module's tuner_fn as named there
    (components/module_tuner.py), else the validation metric of the built-in search's objective."""
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


def make_study(name: str, db_path: str, maximize: bool, seed: int):
    """The Optuna study `name` in SQLite at `db_path`, made or, after a stop, loaded: TPE seeded with `seed`, and a
    median pruner that judges a trial from its second epoch once three trials have ended."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name=name,
        storage=f"sqlite:///{db_path}",
        load_if_exists=True,
        direction="maximize" if maximize else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
    )


def search(
    study,
    space: Sequence[search_space.Dimension],
    objective: str,
    train: Callable[[Mapping[str, Any], Sequence[Any]], Mapping[str, Sequence[float]]],
    trials: int,
    seconds: float = 0.0,
    restored_best: bool = True,
) -> Dict[str, Any]:
    """Runs the study's trials up to `trials` in all (those an earlier, stopped try finished count; one it cut
    short is tried again), starting none after `seconds` (0: no limit). Each samples `space` and calls
    `train(values, callbacks)`, which returns the per-epoch history (`val_<objective>` among it) and passes the
    callbacks (the pruner's) to Keras. A trial that raises is recorded failed with its error and the study goes
    on. Returns the results `trials.json` holds; `best` is None where no trial completed."""
    import optuna

    resumed = _close_interrupted(study)
    started = time.monotonic()
    remaining = max(0, trials - resumed)
    if resumed:
        logging.info("Tuner: resuming study %s: %d trials done before, %d to go", study.study_name, resumed, remaining)

    def run_trial(trial) -> float:
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
        logging.info("Tuner: trial %d/%d %s in %ss: %s", trial.number + 1, trials, outcome, record["seconds"], shown)

    if remaining:
        study.optimize(
            run_trial,
            n_trials=remaining,
            timeout=seconds or None,
            catch=(Exception,),
            callbacks=[progress],
            gc_after_trial=True,
        )
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
        "seconds": round(time.monotonic() - started, 2),
        "trials": records,
        "best": best,
    }


def failure(results: Mapping[str, Any]) -> str:
    """Why a tuning gave no model: the trials by state and the first trial's error."""
    failed = [t for t in results["trials"] if t["state"] == FAILED]
    first = f"the first trial's error: {failed[0]['error']}" if failed else "every trial was pruned"
    return f"Tuner: no trial completed ({summary(results)}); {first}"


class Executor(base_executor.BaseExecutor):
    """Runs the study and writes the best trial's values and every trial's record."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        import tensorflow_transform as tft

        from tfxflow.components.model import features as features_lib
        from tfxflow.components.model import hardware as hardware_lib
        from tfxflow.components.model import keras_model as model_lib
        from tfxflow.components.model import text, trainer

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
        train_files = [os.path.join(artifact_utils.get_split_uri([examples], "train"), "*")]
        eval_files = [os.path.join(artifact_utils.get_split_uri([examples], "eval"), "*")]

        config = features_lib.as_config(custom["features"], roles_required=False)
        hardware = hardware_lib.HardwareConfig.from_dict(custom.get("hardware", {}))
        base_model = model_lib.ModelParams.from_dict(custom.get("model", {}))
        strategy = hardware_lib.make_strategy()
        policy = hardware_lib.resolve_precision(hardware.precision)
        tf_transform_output = tft.TFTransformOutput(transform_uri)
        text.load_ops_for(tf_transform_output.transform_savedmodel_dir)
        eval_rows = trainer.recorded_rows(eval_files, "eval")
        train_rows = trainer.recorded_rows(train_files, "train")

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
        study = make_study(name, db_path, maximize, seed)
        checkpoint = None
        try:
            if base_model.init_checkpoint:
                checkpoint = trainer.pretrained_checkpoint(base_model, scratch)

            def train(values: Mapping[str, Any], callbacks: Sequence[Any]) -> Dict[str, List[float]]:
                """The Trainer's training with a trial's values; its per-epoch history."""
                trial_custom = trainer.with_tuned(custom, values)
                model_params = model_lib.ModelParams.from_dict(trial_custom.get("model", {}))
                train_params = trainer.TrainParams.from_dict({**trial_custom.get("training", {}), "backup_root": None})
                log_dir = tempfile.mkdtemp(prefix="trial-", dir=scratch)
                try:
                    with hardware_lib.precision_policy(policy):
                        _, history, _ = trainer.train(
                            config,
                            tf_transform_output,
                            train_files,
                            eval_files,
                            train_steps=train_steps,
                            eval_steps=eval_steps,
                            model_params=model_params,
                            train_params=train_params,
                            log_dir=log_dir,
                            hardware=hardware,
                            strategy=strategy,
                            extra_callbacks=list(callbacks),
                            raw_examples=bool(trial_custom.get("raw_examples")),
                            eval_rows=eval_rows,
                            checkpoint=checkpoint,
                            train_rows=train_rows,
                        )
                finally:
                    shutil.rmtree(log_dir, ignore_errors=True)
                return history.history

            patience = trainer.TrainParams.from_dict(custom.get("training", {})).early_stopping_patience
            results = search(study, space, objective, train, budget_trials, budget_s, restored_best=patience > 0)
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
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
    return sum(not _interrupted(t) for t in study.trials)


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
                train_steps=int(train_steps),
                eval_steps=int(eval_steps),
                study_dir=study_dir,
                best_hyperparameters=types.Channel(type=standard_artifacts.HyperParameters),
                tuner_results=types.Channel(type=standard_artifacts.TunerResults),
            )
        )
