"""The wide-and-deep model builds from the feature config and trains."""

import numpy as np
import pytest
import tensorflow as tf

from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.training import fit
from tfxflow.components.training import trainer as trainer_lib
from tfxflow.components.training.train_params import TrainParams

CONFIG = FeatureConfig.from_dict(
    {
        "label": {"name": "label", "column": "y"},
        "numeric": ["x1", "x2"],
        "categorical": ["c"],
        "bucketized": ["b"],
    }
)
TOKENS = {"c_xf": 12, "b_xf": 10}


def _batch(n, rng):
    x1 = rng.normal(size=(n, 1)).astype("float32")
    c = rng.integers(0, 12, size=(n, 1))
    features = {
        "x1_xf": x1,
        "x2_xf": rng.normal(size=(n, 1)).astype("float32"),
        "c_xf": c,
        "b_xf": rng.integers(0, 10, size=(n, 1)),
    }
    label = ((x1[:, 0] > 0) ^ (c[:, 0] % 2 == 0)).astype("int64").reshape(-1, 1)
    return features, label


def test_model_inputs_follow_the_feature_config():
    model = model_lib.build_model(CONFIG, TOKENS)
    assert sorted(model.input_names) == ["b_xf", "c_xf", "x1_xf", "x2_xf"]
    assert model.get_layer("c_xf_onehot").num_tokens == 12
    assert model.get_layer("c_xf_embedding").input_dim == 12
    assert model.output.dtype == tf.float32


def test_missing_id_range_is_an_error():
    with pytest.raises(ValueError, match="no id range for transformed feature 'b_xf'"):
        model_lib.build_model(CONFIG, {"c_xf": 12})


@pytest.mark.integration
def test_a_few_steps_train_with_finite_falling_loss():
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features, label = _batch(512, rng)
    model = model_lib.build_model(CONFIG, TOKENS, model_lib.ModelParams(hidden_units=(16, 8), learning_rate=0.01))
    history = model.fit(features, label, batch_size=64, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    probabilities = model.predict(features, verbose=0)
    assert probabilities.shape == (512, 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))


def test_embedding_dim_rule_is_capped():
    assert model_lib.embedding_dim(10, 16) == 11
    assert model_lib.embedding_dim(100_000, 16) == 16
    assert model_lib.embedding_dim(1, 16) == 6


@pytest.mark.parametrize(
    "steps, every, expected",
    [
        (1500, 250, {"epochs": 6, "steps_per_epoch": 250}),
        (100, 250, {"epochs": 1, "steps_per_epoch": 100}),
        (260, 250, {"epochs": 2, "steps_per_epoch": 130}),
        (1001, 250, {"epochs": 5, "steps_per_epoch": 201}),
    ],
)
def test_schedule_splits_steps_into_epochs(steps, every, expected):
    assert fit.schedule(steps, every) == expected


def test_autograph_leaves_tf_keras_code_alone():
    import tf_keras
    from tensorflow.python.autograph.core import config as autograph_config
    from tensorflow.python.autograph.impl import conversion

    fit.skip_autograph_for_tf_keras()
    fit.skip_autograph_for_tf_keras()
    rules = [str(r) for r in autograph_config.CONVERSION_RULES]
    assert rules.count("DoNotConvert rule for tf_keras") == 1
    assert conversion.is_allowlisted(tf_keras.Model.train_step)


def test_custom_config_of_the_training_settings_parses_strictly_on_the_trainer_side():
    from tfxflow.components.training.hardware import HardwareConfig
    from tfxflow.pipeline.config import TrainingConfig

    training = TrainingConfig(
        batch_size=64,
        learning_rate=0.01,
        model_preset="large",
        hidden_units=(32, 16),
        dropout=0.1,
        grad_accum_steps=2,
        early_stopping_patience=0,
        seed=7,
        hardware=HardwareConfig(precision="mixed_bfloat16", visible_gpus=(1,)),
    )
    custom = training.custom_config(backup_root="/tmp/backup")
    model = model_lib.ModelParams.from_dict(custom["model"])
    assert (model.preset, model.hidden_units, model.learning_rate, model.dropout) == ("large", (32, 16), 0.01, 0.1)
    params = TrainParams.from_dict(custom["training"])
    assert (params.batch_size, params.grad_accum_steps, params.seed, params.backup_root) == (64, 2, 7, "/tmp/backup")
    assert params.early_stopping_patience == 0 and params.eval_every_steps == training.eval_every_steps
    assert HardwareConfig.from_dict(custom["hardware"]) == training.hardware


def test_unknown_custom_config_keys_are_errors_naming_them():
    import types

    with pytest.raises(ValueError, match=r"custom_config\['model'\]: unknown key\(s\) \['hidden_unit'\]"):
        model_lib.ModelParams.from_dict({"hidden_unit": [8]})
    with pytest.raises(ValueError, match=r"custom_config\['training'\]: unknown key\(s\) \['batchsize'\]"):
        TrainParams.from_dict({"batchsize": 8})
    with pytest.raises(ValueError, match=r"Trainer custom_config: unknown key\(s\) \['modle'\]"):
        trainer_lib.run_fn(types.SimpleNamespace(custom_config={"features": {}, "modle": {}}))
