"""The feature config: loading, validation, and the columns it implies."""

import os
import re

import pytest

from tfxflow.components.model.features import FeatureConfig, FeatureConfigError
from tfxflow.pipeline.inputs import bundled_dataset_dir

TAXI_FEATURES = os.path.join(bundled_dataset_dir("taxi"), "features.yaml")


def _config(**overrides):
    data = {"label": {"name": "y", "column": "target"}, "numeric": ["a"], "categorical": ["b"]}
    data.update(overrides)
    return FeatureConfig.from_dict(data, source="test.yaml")


def test_taxi_config_loads_and_round_trips():
    config = FeatureConfig.load(TAXI_FEATURES)
    assert config.label.column == "tips" and config.label.ratio_of == "fare"
    assert config.label.greater_than == pytest.approx(0.2)
    assert "fare" in config.numeric and "payment_type" in config.categorical
    # fare is a feature, so only tips is missing at serving time.
    assert config.label_only_columns == ("tips",)
    assert FeatureConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"numerics": ["a"]}, "unknown key(s) ['numerics']"),
        ({"numeric": ["target"]}, "label column 'target' is also a feature"),
        ({"numeric": ["a"], "bucketized": ["a"]}, "column 'a' is listed under more than one role"),
        ({"numeric": [], "categorical": []}, "no feature columns"),
        ({"num_buckets": 0}, "num_buckets must be >= 1"),
        ({"num_buckets": "ten"}, "'num_buckets' must be an integer"),
        ({"label": {"name": "y", "column": "target", "ratio_of": "a"}}, "ratio_of needs greater_than"),
        ({"label": {"column": "target"}}, "label.name is required"),
        ({"text": ["a"]}, "column 'a' is listed under more than one role"),
        (
            {"text": ["c"], "sequence_length": 2},
            "sequence_length must be between 3 ([CLS], one word piece, [SEP]) and 512",
        ),
        ({"text": ["c"], "sequence_length": 513}, "sequence_length must be between 3"),
        ({"text": ["c"], "text_vocab_size": 99}, "text_vocab_size must be >= 100"),
        ({"text": ["c"], "lower_case": "yes"}, "'lower_case' must be true or false, got 'yes'"),
        ({"text": ["c"], "text_vocab_file": 7}, "'text_vocab_file' must be a string (a path), got 7"),
        ({"text": ["c"], "label": {"name": "c_xf_mask", "column": "target"}}, "label name 'c_xf_mask' clashes"),
    ],
)
def test_invalid_configs_name_the_file_and_the_problem(overrides, message):
    with pytest.raises(FeatureConfigError) as err:
        _config(**overrides)
    assert "test.yaml" in str(err.value) and message in str(err.value)


def test_columns_missing_from_the_schema_are_named():
    with pytest.raises(FeatureConfigError, match=r"\['b'\] not found in schema s.pbtxt"):
        _config().check_columns(["a", "target"], "schema s.pbtxt")


def test_unparsable_yaml_names_the_file(tmp_path):
    path = tmp_path / "features.yaml"
    path.write_text("label: [unclosed\n")
    with pytest.raises(FeatureConfigError, match=f"{path}: not valid YAML"):
        FeatureConfig.load(str(path))


def _task(task, **label):
    return {"task": task, "label": {"name": "y", "column": "target", **label}, "numeric": ["a"]}


def test_each_task_loads_with_its_label_keys_and_round_trips():
    multi = FeatureConfig.from_dict(_task("multiclass", classes=["low", 2, "high"]), source="f.yaml")
    assert multi.task == "multiclass" and multi.label.classes == ("low", "2", "high")
    assert multi.task_spec.outputs == ("scores", "classes")
    regression = FeatureConfig.from_dict(_task("regression", transform="log1p"), source="f.yaml")
    assert regression.label.transform == "log1p" and regression.task_spec.prediction_key == "predictions"
    binary = FeatureConfig.from_dict({"label": {"name": "y", "column": "target"}, "numeric": ["a"]})
    assert binary.task == "binary"  # no task key: today's configs keep working
    for config in (multi, regression, binary):
        assert FeatureConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
        assert config.to_dict()["task"] == config.task


@pytest.mark.parametrize(
    "data, message",
    [
        (_task("ranking"), "task must be one of ['binary', 'multiclass', 'regression'], got 'ranking'"),
        (_task("regression", classes=["a", "b"]), "label.classes applies to task 'multiclass'"),
        (_task("multiclass", greater_than=3), "label.greater_than applies to task 'binary'"),
        (_task("multiclass", transform="log1p"), "label.transform applies to task 'regression'"),
        (
            {"label": {"name": "y", "column": "target", "classes": ["a", "b"]}, "numeric": ["a"]},
            "label.classes applies to task 'multiclass', and this config's task is 'binary' (the default; set task:",
        ),
        (_task("multiclass", classes=["a", "a", "b"]), "label.classes lists ['a'] more than once"),
        (_task("multiclass", classes=["a"]), "a classifier needs at least 2"),
        (_task("multiclass", classes=[1.5, 2.5]), "label.classes must be a list of class values"),
        (_task("regression", transform="sqrt"), "label.transform must be one of ['none', 'log1p'], got 'sqrt'"),
    ],
)
def test_a_label_key_of_another_task_is_refused_naming_the_file_and_key(data, message):
    with pytest.raises(FeatureConfigError) as err:
        FeatureConfig.from_dict(data, source="f.yaml")
    assert str(err.value).startswith("f.yaml: ") and message in str(err.value)


@pytest.mark.parametrize(
    "task, label, column_type, message",
    [
        ("regression", {}, "BYTES", "task regression: label.column 'target' holds strings in schema s.pbtxt"),
        ("multiclass", {}, "FLOAT", "task multiclass: label.column 'target' holds floats in schema s.pbtxt"),
        ("multiclass", {"classes": ["1", "two"]}, "INT", "label.classes ['two']: 'target' holds integers"),
    ],
)
def test_a_label_type_the_task_cannot_take_is_refused(task, label, column_type, message):
    config = FeatureConfig.from_dict(_task(task, **label), source="f.yaml")
    with pytest.raises(FeatureConfigError, match=re.escape(message)):
        config.check_label_type(column_type, "schema s.pbtxt")
    for ok in {"regression": ("INT", "FLOAT"), "multiclass": ("BYTES",)}[task]:
        if not label:
            config.check_label_type(ok, "schema s.pbtxt")


def test_roles_are_optional_when_a_module_file_makes_the_features():
    data = {"task": "binary", "label": {"name": "tips_xf", "column": "tips"}}
    with pytest.raises(FeatureConfigError, match="no feature columns"):
        FeatureConfig.from_dict(data)
    config = FeatureConfig.from_dict(data, roles_required=False)
    assert config.feature_columns == () and config.label_only_columns == ("tips",)


def test_each_task_evaluates_a_csv_row_as_ingestion_counts_it():
    multi = FeatureConfig.from_dict(_task("multiclass")).label
    assert multi.evaluate({"target": "low"}) == "low" and multi.evaluate({"target": ""}) is None
    regression = FeatureConfig.from_dict(_task("regression")).label
    assert regression.evaluate({"target": "1.5e2"}) == 150.0 and regression.evaluate({"target": " "}) is None
    assert regression.describe() == "target"
    assert FeatureConfig.from_dict(_task("regression", transform="log1p")).label.describe() == (
        "target (trained as log1p(target))"
    )


def test_a_text_column_makes_ids_and_a_mask_and_its_knobs_round_trip():
    config = _config(text=["note"], sequence_length=64, text_vocab_size=3000, lower_case=False)
    assert config.feature_columns == ("a", "b", "note")
    assert (config.transformed_name("note"), config.mask_name("note")) == ("note_xf", "note_xf_mask")
    again = FeatureConfig.from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()
    assert (again.sequence_length, again.text_vocab_size, again.lower_case) == (64, 3000, False)
    assert config.label_only_columns == ("target",)


def test_a_text_column_must_hold_strings_in_the_schema():
    config = _config(text=["note", "code"])
    config.check_text_types({"note": "BYTES", "code": "BYTES", "a": "FLOAT"}, "schema s.pbtxt")
    with pytest.raises(FeatureConfigError, match=r"text column\(s\) \['code'\] hold numbers in schema s.pbtxt"):
        config.check_text_types({"note": "BYTES", "code": "INT"}, "schema s.pbtxt")
