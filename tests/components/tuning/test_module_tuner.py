"""A module file's tuner_fn search as the module Tuner records it (components/tuning/module_tuner.py), on keras-tuner's
own RandomSearch and a tf.keras model trained on numbers whose best learning rate is known: what keras-tuner's
trials become in `trials.json` (values, scores, per-epoch metrics, times, failures with keras-tuner's message),
and the best trial it picks, which TFX's `best_hyperparameters.txt` names too."""

import json
import os

import numpy as np
import pytest

pytestmark = pytest.mark.current_lane

keras_tuner = pytest.importorskip("keras_tuner")  # TFX's own dependency: in both locks


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(512, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0], dtype="float32") > 0).astype("int64")
    return x, y


def _build(hp):
    from tensorflow import keras  # tf.keras: Keras 2 (tf-keras) in every step of the pipeline

    units = hp.Int("units", 4, 8, step=4)
    if hp.Choice("learning_rate", [1e-1, 1e-9, -1.0]) < 0:
        raise ValueError("a negative learning rate")
    inputs = keras.layers.Input(shape=(4,))
    hidden = keras.layers.Dense(units, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))
    model.compile(
        optimizer=keras.optimizers.SGD(hp.get("learning_rate")),
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    return model


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    import tensorflow as tf
    import tf_keras

    from tfxflow.components.tuning import module_tuner

    assert tf.keras.Model is tf_keras.Model  # tests/conftest.py, as the CLI and the steps make it
    tuner = keras_tuner.GridSearch(
        _build,
        objective=keras_tuner.Objective("val_sparse_categorical_accuracy", "max"),
        max_trials=6,
        max_consecutive_failed_trials=10,
        directory=str(tmp_path_factory.mktemp("kt")),
        project_name="t",
    )
    times, curves = {}, {}
    module_tuner._timed(tuner, times, curves)
    x, y = _data()
    tuner.search(x, y, validation_split=0.25, epochs=3, batch_size=32, verbose=0)
    return tuner, module_tuner.results_of(tuner, times, seconds=12.5, curves=curves)


def test_every_trial_that_ran_is_recorded_with_its_values_scores_epochs_and_time(searched):
    _, results = searched
    trials = results["trials"]
    assert [t["number"] for t in trials] == list(range(6))
    combos = {(t["values"]["units"], t["values"]["learning_rate"]) for t in trials}
    assert combos == {(u, lr) for u in (4, 8) for lr in (1e-1, 1e-9, -1.0)}  # the grid, every point once
    for t in trials:
        assert t["seconds"] is not None and 0 < t["seconds"] < 120
        assert t["end_time_ms"] >= t["start_time_ms"]
        if t["values"]["learning_rate"] < 0:
            assert t["state"] == "failed" and t["error"] == "ValueError: a negative learning rate"
            assert t["value"] is None
        else:
            assert t["state"] == "complete" and "error" not in t
            curve = t["history"]["val_sparse_categorical_accuracy"]
            assert len(curve) == 3 and t["value"] == pytest.approx(max(curve))
            assert len(t["history"]["loss"]) == 3
    assert results["monitor"] == "val_sparse_categorical_accuracy"
    assert results["objective"] == "sparse_categorical_accuracy" and results["direction"] == "maximize"
    assert results["space"] == [
        {"name": "units", "low": 4, "high": 8},
        {"name": "learning_rate", "choices": [0.1, 1e-9, -1.0]},
    ]
    assert results["budget"]["trials"] == 6


def test_the_best_trial_is_keras_tuners_own_best(searched):
    tuner, results = searched
    best = results["best"]
    ours = next(t for t in results["trials"] if t["number"] == best["number"])
    assert best["values"] == ours["values"] == tuner.get_best_hyperparameters()[0].values
    assert best["value"] == pytest.approx(tuner.oracle.get_best_trials(1)[0].score)
    assert best["values"]["learning_rate"] == 0.1 and best["value"] > 0.7  # the rate that learns in 3 epochs
    stuck = [t["value"] for t in results["trials"] if t["values"]["learning_rate"] == 1e-9]
    assert len(stuck) == 2 and max(stuck) < best["value"]
    from tfxflow.components.tuning import tuner as tuner_lib

    line = tuner_lib.summary(results)
    assert line.startswith("6 trials (4 complete, 0 pruned, 2 failed) in 12.5 s; best trial")
    assert "val_sparse_categorical_accuracy" in line and "learning_rate=0.1" in line


def test_no_completed_trial_names_the_first_error(searched):
    from tfxflow.components.tuning import tuner as tuner_lib

    _, results = searched
    failed = dict(results, trials=[t for t in results["trials"] if t["state"] == "failed"], best=None)
    message = tuner_lib.failure(failed)
    assert "no trial completed" in message and "a negative learning rate" in message


def test_a_keras_3_model_is_refused_with_the_reason(tmp_path):
    """keras-tuner 1.3 builds and checks tf.keras models: a Keras 3 model stops the search at its first trial
    (a FatalError), and the step's message says why."""
    import keras

    from tfxflow.components.tuning import module_tuner

    def build(hp):
        hp.Choice("units", [2, 4])
        inputs = keras.Input(shape=(4,))
        return keras.Model(inputs, keras.layers.Dense(2)(inputs))

    tuner = keras_tuner.RandomSearch(build, objective="val_loss", max_trials=2, directory=str(tmp_path))
    with pytest.raises(keras_tuner.errors.FatalTypeError) as caught:
        tuner.search(*_data(), validation_split=0.25, epochs=1, verbose=0)
    assert module_tuner.keras_3_note(caught.value) == module_tuner.KERAS_3_NOTE
    assert module_tuner.keras_3_note(ValueError("something else")) == ""


def test_the_trials_file_is_json(searched):
    _, results = searched
    assert json.loads(json.dumps(results)) == results


MODULE = """
import numpy as np
import keras_tuner
from tensorflow import keras
from tfx import v1 as tfx


def _build(hp):
    rate = hp.Choice("learning_rate", [0.1, 0.05, 0.02])
    inputs = keras.layers.Input(shape=(5 if FAIL else 4,))  # 5: the fit fails on the data's 4 columns
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))
    model.compile(keras.optimizers.SGD(rate), "sparse_categorical_crossentropy", ["sparse_categorical_accuracy"])
    return model


def tuner_fn(fn_args):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    if HYPERBAND:  # leaves the oracle's max_trials None, which TFX's own writer cannot take
        tuner = keras_tuner.Hyperband(
            _build, objective="val_sparse_categorical_accuracy", max_epochs=2, factor=2, hyperband_iterations=1,
            directory=fn_args.working_dir, project_name="p", seed=1,
        )
    else:  # unseeded, as Google's penguin module builds its RandomSearch
        tuner = keras_tuner.RandomSearch(
            _build, objective="val_sparse_categorical_accuracy", max_trials=3, directory=fn_args.working_dir,
            project_name="p", **({"seed": 1} if SEEDED else {}),
        )
    fit = {"x": x, "y": y, "validation_split": 0.25, "epochs": fn_args.train_steps, "verbose": 0}
    return tfx.components.TunerFnResult(tuner=tuner, fit_kwargs=fit)
"""


def _execute(tmp_path, fail, hyperband=False, seeded=True, custom_config=None):
    """The module Tuner's executor as TFX calls it, on a module whose tuner_fn searches numbers in memory."""
    from tfx.types import standard_artifacts

    from tfxflow.components.tuning import module_tuner

    module = tmp_path / f"module_{int(fail)}.py"
    module.write_text(f"FAIL = {fail}\nHYPERBAND = {hyperband}\nSEEDED = {seeded}\n" + MODULE)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["train", "eval"]'
    best, results = standard_artifacts.HyperParameters(), standard_artifacts.TunerResults()
    best.uri, results.uri = str(tmp_path / f"best{int(fail)}"), str(tmp_path / f"results{int(fail)}")
    context = module_tuner.Executor.Context(tmp_dir=str(tmp_path / "tmp"), unique_id=str(int(fail)))
    executor = module_tuner.Executor(context)
    properties = {"module_file": str(module), "train_args": '{"num_steps": 2}', "eval_args": '{"num_steps": 1}'}
    if custom_config is not None:
        properties["custom_config"] = json.dumps(custom_config)
    executor.Do({"examples": [examples]}, {"best_hyperparameters": [best], "tuner_results": [results]}, properties)
    return best, results


def test_the_executor_writes_tfxs_outputs_and_the_trials(tmp_path):
    best, results = _execute(tmp_path, fail=False)
    with open(os.path.join(results.uri, "trials.json"), encoding="utf-8") as f:
        trials = json.load(f)
    assert [t["state"] for t in trials["trials"]] == ["complete"] * 3
    assert all(len(t["history"]["val_sparse_categorical_accuracy"]) == 2 for t in trials["trials"])  # 2 epochs
    with open(os.path.join(best.uri, "best_hyperparameters.txt"), encoding="utf-8") as f:
        written = json.load(f)
    assert written["values"] == trials["best"]["values"]  # TFX's file, what the run_fn reads
    assert keras_tuner.HyperParameters.from_config(written).get("learning_rate") in (0.1, 0.05, 0.02)
    with open(os.path.join(results.uri, "tuner_results.json"), encoding="utf-8") as f:
        assert len(json.load(f)) == 3  # TFX's own list of the completed trials
    assert best.get_string_custom_property("summary").startswith("3 trials (3 complete, 0 pruned, 0 failed)")


def test_a_search_where_every_trial_fails_stops_naming_the_first_error(tmp_path):
    from tfxflow.components.tuning import tuner as tuner_lib

    with pytest.raises(tuner_lib.TuningFailed) as caught:
        _execute(tmp_path, fail=True)
    message = str(caught.value)
    # keras-tuner gives up after 3 consecutive failed trials; the trials it ran are kept and named
    assert "3 trials (0 complete, 0 pruned, 3 failed)" in message and "incompatible" in message
    with open(tmp_path / "results1" / "trials.json", encoding="utf-8") as f:
        trials = json.load(f)["trials"]
    assert [t["state"] for t in trials] == ["failed"] * 3
    assert trials[0]["error"].startswith('ValueError: Input 0 of layer "model" is incompatible with the layer')
    assert not (tmp_path / "best1").exists()


def test_a_hyperband_search_writes_tfxs_outputs_too(tmp_path):
    """keras-tuner's Hyperband leaves max_trials None, over which TFX's own writer fails after the search."""
    best, results = _execute(tmp_path, fail=False, hyperband=True)
    with open(os.path.join(results.uri, "trials.json"), encoding="utf-8") as f:
        trials = json.load(f)
    assert len(trials["trials"]) >= 2 and {t["state"] for t in trials["trials"]} == {"complete"}
    assert trials["budget"]["trials"] == 0  # Hyperband sets its budget in epochs, not trials
    with open(os.path.join(best.uri, "best_hyperparameters.txt"), encoding="utf-8") as f:
        written = json.load(f)
    assert written["values"] == trials["best"]["values"]  # with Hyperband's own tuner/* entries
    with open(os.path.join(results.uri, "tuner_results.json"), encoding="utf-8") as f:
        assert len(json.load(f)) == len(trials["trials"])


def test_an_unseeded_module_search_repeats_with_the_runs_seed(tmp_path):
    """keras-tuner draws an unseeded tuner's seed from Python's random: seeded with --seed before tuner_fn, the
    search's seed and its trials' order are the same run after run, and another --seed gives another search."""
    import random

    def search(folder, seed):
        (tmp_path / folder).mkdir()
        _, results = _execute(tmp_path / folder, fail=False, seeded=False, custom_config={"training": {"seed": seed}})
        with open(os.path.join(results.uri, "trials.json"), encoding="utf-8") as f:
            trials = json.load(f)
        return trials["seed"], [t["values"]["learning_rate"] for t in trials["trials"]]

    first, again, other = search("a", 42), search("b", 42), search("c", 7)
    random.seed(42)
    assert first[0] == random.randint(1, 10000)  # keras-tuner's draw, from the seeded generator
    assert again == first and sorted(first[1]) == [0.02, 0.05, 0.1]
    assert other[0] != first[0]
