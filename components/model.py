"""The wide-and-deep Keras (tf-keras) model, built from the feature config and Transform's output sizes."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Sequence, Tuple

import tf_keras as keras

from components import features as features_lib


@dataclasses.dataclass(frozen=True)
class ModelParams:
    """Hyperparameters of the model and its optimiser."""

    hidden_units: Tuple[int, ...] = (128, 64)
    max_embedding_dim: int = 16
    learning_rate: float = 0.001
    dropout: float = 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelParams":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "hidden_units" in values:
            values["hidden_units"] = tuple(int(u) for u in values["hidden_units"])
        return cls(**values)


def embedding_dim(num_tokens: int, max_dim: int) -> int:
    """The usual rule of thumb, 6 * n^(1/4), capped."""
    return max(2, min(max_dim, int(math.ceil(6 * num_tokens ** 0.25))))


def build_model(config: features_lib.FeatureConfig, num_tokens: Mapping[str, int],
                params: ModelParams = ModelParams()) -> keras.Model:
    """A compiled wide-and-deep binary classifier.

    `num_tokens` maps each categorical and bucketized *transformed* feature name to its id range (vocabulary
    plus OOV buckets, or bucket count), as Transform reports it. Inputs are rank-1 per example ([batch, 1]).
    """
    inputs: Dict[str, keras.layers.Input] = {}
    deep, wide = [], []
    for column in config.numeric:
        name = config.transformed_name(column)
        inputs[name] = keras.layers.Input(shape=(1,), name=name, dtype="float32")
        deep.append(inputs[name])
    for column in tuple(config.categorical) + tuple(config.bucketized):
        name = config.transformed_name(column)
        if name not in num_tokens:
            raise ValueError(f"no id range for transformed feature '{name}'")
        tokens = int(num_tokens[name])
        inputs[name] = keras.layers.Input(shape=(1,), name=name, dtype="int64")
        wide.append(keras.layers.CategoryEncoding(num_tokens=tokens, output_mode="one_hot",
                                                  name=f"{name}_onehot")(inputs[name]))
        emb = keras.layers.Embedding(tokens, embedding_dim(tokens, params.max_embedding_dim),
                                     name=f"{name}_embedding")(inputs[name])
        deep.append(keras.layers.Flatten(name=f"{name}_flat")(emb))

    x = _concat(deep, "deep_inputs")
    for i, units in enumerate(params.hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"deep_{i}")(x)
        if params.dropout:
            x = keras.layers.Dropout(params.dropout, name=f"dropout_{i}")(x)
    both = _concat([x] + wide, "wide_and_deep")
    # The output stays float32 whatever the compute policy, so exported signatures return float32.
    output = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="probability")(both)
    model = keras.Model(inputs=inputs, outputs=output)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=params.learning_rate),
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.BinaryAccuracy(name="binary_accuracy"), keras.metrics.AUC(name="auc")],
    )
    return model


def _concat(tensors: Sequence, name: str):
    return tensors[0] if len(tensors) == 1 else keras.layers.Concatenate(name=name)(list(tensors))
