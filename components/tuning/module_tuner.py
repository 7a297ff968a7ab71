"""TFX's own Tuner for a module file's `tuner_fn`, run as TFX runs it: the module builds a keras-tuner tuner and
its fit arguments from TFX's `fn_args`, the search runs, and the best trial's hyperparameters
(`best_hyperparameters.txt`) go to the module's `run_fn` as `fn_args.hyperparameters`.

Two things beyond TFX's executor (tfx/components/tuner/executor.py):
- `tuner_results` also holds `trials.json` in the built-in Tuner's format (components/tuning/tuner.py): every trial's
  values, state (complete or failed with keras-tuner's message), score, per-epoch metrics and time, which
  MlflowRecord logs as runs nested under the pipeline run, as the summary and the run page show them.
- A search in which no trial completed, or that keras-tuner stopped (after consecutive failed trials, or a
  model it cannot tune), fails the step naming the first error, where TFX's executor would hand the Trainer
  the values of a failed trial or stop with keras-tuner's bare error.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from typing import Any, Dict, List, Optional

from absl import logging
from tfx import types
from tfx.components.trainer import fn_args_utils
from tfx.components.tuner import component as tfx_tuner
from tfx.components.tuner import executor as tfx_tuner_executor
from tfx.components.util import udf_utils
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from tfxflow.components.tuning import tuner as tuner_lib

# keras-tuner's trial states (keras_tuner/engine/trial.py) as the built-in Tuner's; a trial in any other state
# (idle, running, stopped) never trained.
STATES = {"COMPLETED": tuner_lib.COMPLETE, "FAILED": tuner_lib.FAILED, "INVALID": tuner_lib.FAILED}
TFX_RESULTS_FILE = "tuner_results.json"  # TFX's name (tfx/components/tuner/executor.py)
KERAS_3_NOTE = (
    "keras-tuner 1.3 (what TFX's Tuner runs here) tunes tf.keras models (Keras 2, tf-keras, what `from "
    "tensorflow import keras` gives in every step); this model is Keras 3 (`import keras`)"
)


def keras_3_note(err: BaseException) -> str:
    """KERAS_3_NOTE where keras-tuner refused a model because it is Keras 3's (its message names the model's
    class, `keras.src...`), else ""."""
    text = str(err)
    return KERAS_3_NOTE if "valid Keras Model" in text and "keras.src." in text and "tf_keras" not in text else ""


def _space(hyperparameters) -> List[Dict[str, Any]]:
    """keras-tuner's search space as the built-in Tuner's dimensions: a range (`low`, `high`, `log`) or `choices`."""
    dims = []
    for hp in hyperparameters.space:
        kind = type(hp).__name__
        if kind == "Choice":
            dims.append({"name": hp.name, "choices": list(hp.values)})
        elif kind in ("Int", "Float"):
            dims.append(
                {"name": hp.name, "low": hp.min_value, "high": hp.max_value}
                | ({"log": True} if getattr(hp, "sampling", None) == "log" else {})
            )
        elif kind == "Boolean":
            dims.append({"name": hp.name, "choices": [False, True]})
        else:  # Fixed
            dims.append({"name": hp.name, "choices": [hp.value]})
    return dims


def _history(trial, curves: Dict[str, Dict[str, List[float]]]) -> Dict[str, List[float]]:
    """A trial's metrics per epoch, from the Keras histories its fits returned; else what keras-tuner kept (1.3
    keeps the best epoch's metrics only, a list over executions each)."""
    if trial.trial_id in curves:
        return curves[trial.trial_id]
    kept = {}
    for name in sorted(trial.metrics.metrics):
        values = [statistics.fmean(obs.value) for obs in trial.metrics.get_history(name) if obs.value]
        if values:
            kept[name] = [float(v) for v in values]
    return kept


def _curves(results) -> Dict[str, List[float]]:
    """Per-epoch metrics of what a keras-tuner `run_trial` returned: Keras History objects (one per execution,
    averaged epoch by epoch), or {} for a tuner whose run_trial returns a score or a dict."""
    runs = results if isinstance(results, list) else [results]
    histories = [r.history for r in runs if isinstance(getattr(r, "history", None), dict)]
    if not histories:
        return {}
    names = sorted(set.intersection(*(set(h) for h in histories)))
    epochs = {name: min(len(h[name]) for h in histories) for name in names}
    return {
        name: [float(statistics.fmean(float(h[name][e]) for h in histories)) for e in range(epochs[name])]
        for name in names
    }


def _error(message: Optional[str]) -> str:
    """keras-tuner's message of a failed trial (1.3 keeps the whole traceback): its last line, the error."""
    lines = [line.strip() for line in (message or "").strip().splitlines() if line.strip()]
    if not lines:
        return "failed"
    return (lines[-1] if lines[0].startswith("Traceback") else " ".join(lines))[:2000]


def trial_records(
    oracle, times: Dict[str, List[float]], curves: Optional[Dict[str, Dict[str, List[float]]]] = None
) -> List[Dict[str, Any]]:
    """The oracle's trials that ran, in the order they began, as the built-in Tuner's trial records."""
    ran = [t for t in oracle.trials.values() if t.status in STATES]
    ran.sort(key=lambda t: (times.get(t.trial_id, [float("inf")])[0], t.trial_id))
    records = []
    for number, trial in enumerate(ran):
        state = STATES[trial.status]
        start, end = (times.get(trial.trial_id) or [None, None])[:2]
        records.append(
            {
                "number": number,
                "trial_id": trial.trial_id,
                "state": state,
                "values": dict(trial.hyperparameters.values),
                "value": float(trial.score) if state == tuner_lib.COMPLETE and trial.score is not None else None,
                "seconds": round(end - start, 2) if start and end else None,
                "start_time_ms": int(start * 1000) if start else None,
                "end_time_ms": int(end * 1000) if end else None,
                "history": _history(trial, curves or {}),
                **({"error": _error(trial.message)} if state == tuner_lib.FAILED else {}),
            }
        )
    return records


def results_of(
    tuner, times: Dict[str, List[float]], seconds: float, curves: Optional[Dict[str, Dict[str, List[float]]]] = None
) -> Dict[str, Any]:
    """The search as `trials.json` holds it (components/tuning/tuner.py's format; `monitor` is keras-tuner's
    objective)."""
    oracle = tuner.oracle
    objective = oracle.objective
    monitor = getattr(objective, "name", str(objective))
    maximize = getattr(objective, "direction", "min") == "max"
    records = trial_records(oracle, times, curves)
    done = [t for t in records if t["state"] == tuner_lib.COMPLETE and t["value"] is not None]
    best = None
    if done:
        found = (max if maximize else min)(done, key=lambda t: t["value"])
        best = {"number": found["number"], "value": found["value"], "values": found["values"]}
    return {
        "objective": monitor[len("val_") :] if monitor.startswith("val_") else monitor,
        "monitor": monitor,
        "direction": "maximize" if maximize else "minimize",
        "space": _space(oracle.hyperparameters),
        "budget": {"trials": int(getattr(oracle, "max_trials", 0) or 0), "seconds": 0.0},
        "resumed_trials": 0,
        "seconds": round(seconds, 2),
        "trials": records,
        "best": best,
        "study": f"{type(tuner).__name__} of the module's tuner_fn",
        "seed": getattr(oracle, "seed", None),
    }


def _timed(tuner, times: Dict[str, List[float]], curves: Dict[str, Dict[str, List[float]]]) -> None:
    """Records each trial's start, end and per-epoch metrics on `tuner` (its own methods still run, wrapped on
    the instance) and logs each trial's outcome."""
    begin, end, run_trial = tuner.on_trial_begin, tuner.on_trial_end, tuner.run_trial

    def run_trial_kept(trial, *args, **kwargs):
        results = run_trial(trial, *args, **kwargs)
        curves[trial.trial_id] = _curves(results)
        return results

    def on_trial_begin(trial):
        times[trial.trial_id] = [time.time(), None]
        begin(trial)

    def on_trial_end(trial):
        try:
            end(trial)  # keras-tuner's oracle raises here after too many consecutive failed trials
        finally:
            times[trial.trial_id][1] = time.time()
            took = times[trial.trial_id][1] - times[trial.trial_id][0]
            outcome = f"score {trial.score:.4f}" if trial.score is not None else trial.status.lower()
            logging.info("Tuner: trial %s %s in %.1fs: %s", trial.trial_id, outcome, took, trial.hyperparameters.values)

    tuner.on_trial_begin = on_trial_begin
    tuner.on_trial_end = on_trial_end
    tuner.run_trial = run_trial_kept


def write_best_hyperparameters(tuner, output_dict: Dict[str, List[types.Artifact]]) -> None:
    """TFX's two files as its executor writes them (`best_hyperparameters.txt`, the best trial's config;
    `tuner_results.json`, the completed trials best first), over every trial the oracle holds: TFX asks for
    `max_trials` of them, which Hyperband and GridSearch leave None."""
    from keras_tuner.engine import trial as trial_lib

    best = tuner.get_best_hyperparameters()[0].get_config()
    best_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.BEST_HYPERPARAMETERS_KEY])
    io_utils.write_string_file(os.path.join(best_uri, tuner_lib.BEST_FILE), json.dumps(best))
    results = [
        {"trial_id": t.trial_id, "score": t.score, **t.hyperparameters.values}
        for t in tuner.oracle.get_best_trials(len(tuner.oracle.trials))
        if t.status == trial_lib.TrialStatus.COMPLETED and t.hyperparameters.values
    ]
    results_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.TUNER_RESULTS_KEY])
    io_utils.write_string_file(os.path.join(results_uri, TFX_RESULTS_FILE), json.dumps(results))


def seed_python(custom_config: Optional[Dict[str, Any]]) -> Optional[int]:
    """Seeds Python's `random` with the run's training seed (--seed), returning it: keras-tuner's tuners built
    without a seed draw theirs from it (`seed or random.randint(1, 10000)`, keras_tuner/engine/oracle.py), so a
    module's search repeats run after run as the built-in Tuner's does. A RandomSearch over a small grid stops
    after 20 draws that were all tried: unseeded, how many of its points it tries changes from run to run."""
    seed = ((custom_config or {}).get("training") or {}).get("seed")
    if seed is not None:
        random.seed(int(seed))
    return seed


class Executor(tfx_tuner_executor.Executor):
    """TFX's Tuner executor, plus `trials.json` and a failure that names the first trial's error."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        if tfx_tuner_executor.get_tune_args(exec_properties):
            raise ValueError("TuneArgs is not supported by this Tuner's Executor.")  # TFX's own refusal
        tuner_fn = udf_utils.get_fn(exec_properties, "tuner_fn")
        fn_args = fn_args_utils.get_common_fn_args(input_dict, exec_properties, self._get_tmp_dir())
        seed_python(fn_args.custom_config)
        result = tuner_fn(fn_args)
        tuner = result.tuner
        tuner.search_space_summary()
        times: Dict[str, List[float]] = {}
        curves: Dict[str, Dict[str, List[float]]] = {}
        _timed(tuner, times, curves)
        started = time.monotonic()
        results_artifact = artifact_utils.get_single_instance(output_dict[standard_component_specs.TUNER_RESULTS_KEY])

        def record() -> Dict[str, Any]:
            """The trials that ran, written to `trials.json` (also when the search stopped)."""
            results = results_of(tuner, times, time.monotonic() - started, curves)
            fileio.makedirs(results_artifact.uri)
            with fileio.open(os.path.join(results_artifact.uri, tuner_lib.TRIALS_FILE), "w") as f:
                f.write(json.dumps(results, indent=1))
            return results

        try:
            tuner.search(**result.fit_kwargs)
        except Exception as err:  # keras-tuner's own stop, raised again with the trials that ran
            stopped = record()
            reason = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
            if keras_3_note(err):
                reason += f" ({KERAS_3_NOTE})"
            failed = [t["error"] for t in stopped["trials"] if t["state"] == tuner_lib.FAILED]
            reason += f"; the first trial's error: {failed[0]}" if failed else ""
            summary = tuner_lib.summary(stopped)
            raise tuner_lib.TuningFailed(f"Tuner: the module's search stopped ({summary}): {reason}") from err
        results = record()
        if results["best"] is None:
            raise tuner_lib.TuningFailed(tuner_lib.failure(results))
        tuner.results_summary()
        write_best_hyperparameters(tuner, output_dict)
        best_artifact = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.BEST_HYPERPARAMETERS_KEY]
        )
        for artifact in (best_artifact, results_artifact):
            artifact.set_string_custom_property("summary", tuner_lib.summary(results))
        logging.info("Tuner: %s", tuner_lib.summary(results))


class Tuner(tfx_tuner.Tuner):
    """TFX's Tuner (every argument of it) with `Executor`."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
