"""The tuning's search space: `--tune-space` parsed, checked against what the Trainer accepts, and applied to the
Trainer's custom_config; the best values written in keras-tuner's own HyperParameters format (read back by
keras-tuner itself, as a module file's run_fn would)."""

import json
import re

import pytest

from tfxflow.components.model import search_space as ss
from tfxflow.components.model import tasks


def test_flags_replace_add_and_drop_dimensions_of_the_default_space():
    space = ss.resolve(False, "learning_rate=1e-4:1e-2:log, head_dropout=0:0.2, width=off")
    assert [d.describe() for d in space] == [
        "learning_rate=0.0001:0.01:log",
        "dropout=0:0.5",
        "batch_size=64|128|256|512",
        "head_dropout=0:0.2",
    ]
    assert [d.name for d in ss.resolve(True)] == ["learning_rate", "warmup_share", "dropout", "batch_size"]
    assert ss.resolve(True)[0].high == 1e-4  # fine-tuning rates, not training from scratch's


@pytest.mark.parametrize(
    "text, says",
    [
        ("lr=1e-4:1e-2", "'lr=1e-4:1e-2': lr: not a setting the tuning can change; known: batch_size, dropout"),
        ("dropout=0:1.5", "'dropout=0:1.5': dropout=1.5: must be >= 0 and < 1"),
        ("learning_rate=0:1e-2:log", "learning_rate: a log scale needs low > 0, got 0"),
        ("learning_rate=1e-2:1e-4", "learning_rate: a range needs low < high, got 0.01:0.0001"),
        ("batch_size=64|64", "batch_size: give at least two different choices"),
        ("batch_size=32|48.5", "batch_size=48.5: must be a whole number"),
        ("dropout", "'dropout': write name=low:high[:log], name=a|b|c or name=off"),
        ("dropout=0:0.1:0.2", "'dropout=0:0.1:0.2': write low:high or low:high:log"),
    ],
)
def test_a_wrong_space_is_refused_naming_the_part(text, says):
    with pytest.raises(ValueError) as err:
        ss.resolve(False, text)
    assert says in str(err.value)


def test_a_dimension_survives_its_journey_through_the_pipelines_json_with_a_bound_of_zero():
    for dimension in (*ss.SCRATCH, *ss.ENCODER, ss.Dimension("head_dropout", 0.0, 0.3)):
        assert ss.Dimension.from_dict(json.loads(json.dumps(dimension.to_dict()))) == dimension
    assert ss.Dimension("dropout", 0.0, 0.5).to_dict() == {"name": "dropout", "low": 0.0, "high": 0.5}


def test_turning_every_dimension_off_is_refused():
    with pytest.raises(ValueError, match="the search space is empty"):
        ss.resolve(False, "learning_rate=off,width=off,dropout=off,batch_size=off")


def test_a_trials_values_replace_the_trainers_settings_and_width_keeps_the_layers_ratios():
    custom = {"features": {"x": 1}, "raw_examples": True, "model": {"learning_rate": 0.001}, "training": {}}
    tuned = ss.apply({"learning_rate": 0.02, "width": 64, "batch_size": 128, "dropout": 0.25}, custom, (128, 64))
    assert tuned["model"] == {"learning_rate": 0.02, "hidden_units": [64, 32], "dropout": 0.25}
    assert tuned["training"] == {"batch_size": 128} and tuned["raw_examples"] is True
    assert custom["model"] == {"learning_rate": 0.001}  # the settings given are not changed in place
    assert ss.apply({"width": 48}, custom, ())["model"]["hidden_units"] == [48]


def test_a_trial_is_judged_by_the_blessing_metric_where_training_reports_it():
    binary, multi, regression = (tasks.TASK_SPECS[t].training_metrics for t in tasks.TASKS)
    assert ss.objective_metric("binary_accuracy", binary) == "binary_accuracy"
    assert ss.objective_metric("auc", binary) == "auc"
    assert ss.objective_metric("precision", binary) == "loss"
    assert ss.objective_metric("accuracy", multi) == "accuracy"
    assert ss.objective_metric("macro_f1", multi) == "loss"
    assert ss.objective_metric("r2", regression) == "rmse"
    assert ss.objective_metric("mae", regression) == "mae"
    assert tasks.lower_is_better("rmse") and tasks.lower_is_better("loss") and not tasks.lower_is_better("auc")


def test_the_best_values_read_back_with_keras_tuner_as_tfxs_tuner_writes_them():
    import keras_tuner

    from tfxflow.components.tuning import tuner

    space = ss.resolve(False)
    written = json.loads(json.dumps(tuner.keras_tuner_config(space, {"learning_rate": 0.003, "width": 64})))
    hp = keras_tuner.HyperParameters.from_config(written)
    assert hp.get("learning_rate") == 0.003 and hp.get("width") == 64
    assert [p.name for p in hp.space] == ["learning_rate", "width", "dropout", "batch_size"]
    assert hp.space[0].sampling == "log" and list(hp.space[1].values) == [32, 64, 128, 256]


def test_a_text_models_space_reads_a_quarter_half_or_all_of_the_graphs_tokens():
    lengths = {d.name: d for d in ss.resolve(True, "", sequence_length=128)}["sequence_length"]
    assert lengths.choices == (32, 64, 128)
    assert ss.text_lengths(16) == (8, 16)
    # Too short a graph to read fewer tokens of, and a model without text: no such dimension.
    assert "sequence_length" not in {d.name for d in ss.resolve(True, "", sequence_length=8)}
    assert "sequence_length" not in {d.name for d in ss.resolve(False, "")}
    # A flag narrows it; values below the graph's length are kept as given.
    narrowed = ss.resolve(True, "sequence_length=48|96", sequence_length=128)
    assert {d.name: d for d in narrowed}["sequence_length"].choices == (48, 96)
    assert ss.apply({"sequence_length": 48.0}, {}, ())["model"] == {"sequence_length": 48}


@pytest.mark.parametrize(
    "flags, length, says",
    [
        ("sequence_length=64|256", 128, "sequence_length=64|256: over the feature config's sequence_length 128"),
        ("sequence_length=16:200", 128, "over the feature config's sequence_length 128"),
        ("sequence_length=16|32", 0, "sequence_length: the model has no text input"),
        ("sequence_length=2|8", 128, "sequence_length=2: must be >= 3"),
    ],
)
def test_reading_more_tokens_than_the_graph_makes_or_none_is_refused(flags, length, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        ss.resolve(True, flags, sequence_length=length)
