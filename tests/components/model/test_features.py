"""The feature config: loading, validation, and the columns it implies."""

import os

import pytest

from tfxflow.components.model.features import FeatureConfig, FeatureConfigError
from tfxflow.pipeline.config import bundled_dataset_dir

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
