"""Exports the trained model as a SavedModel whose signatures take raw tf.Examples (Transform graph inside)."""

from __future__ import annotations

from typing import Dict

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from components import features as features_lib

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
OUTPUT_KEY = "probabilities"


def as_model_inputs(transformed: Dict[str, tf.Tensor], input_names) -> Dict[str, tf.Tensor]:
    """Selects the model's inputs from transformed features and shapes each as [batch, 1]."""
    return {name: tf.reshape(transformed[name], [-1, 1]) for name in input_names}


def serving_raw_feature_spec(tf_transform_output: tft.TFTransformOutput,
                             config: features_lib.FeatureConfig) -> dict:
    """The raw feature spec minus the columns that exist only to make the label (absent at serving)."""
    spec = tf_transform_output.raw_feature_spec()
    for column in config.label_only_columns:
        spec.pop(column, None)
    return spec


def export_serving_model(model: keras.Model, tf_transform_output: tft.TFTransformOutput,
                         config: features_lib.FeatureConfig, export_dir: str) -> None:
    """Writes `export_dir` with `serving_default` (serialized raw tf.Examples -> probabilities, float32)
    and `transform_features` (serialized raw tf.Examples -> transformed features, used by TFMA)."""
    # Attached to the model so the SavedModel tracks the Transform graph's assets and variables.
    model.tft_layer = tf_transform_output.transform_features_layer()
    input_names = list(model.input_names)
    serving_spec = serving_raw_feature_spec(tf_transform_output, config)
    full_spec = tf_transform_output.raw_feature_spec()

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve_examples(serialized):
        raw = tf.io.parse_example(serialized, serving_spec)
        transformed = model.tft_layer(raw)
        probabilities = model(as_model_inputs(transformed, input_names), training=False)
        return {OUTPUT_KEY: tf.cast(probabilities, tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def transform_features(serialized):
        raw = tf.io.parse_example(serialized, full_spec)
        return model.tft_layer(raw)

    tf.saved_model.save(model, export_dir, signatures={
        SERVING_SIGNATURE: serve_examples,
        TRANSFORM_SIGNATURE: transform_features,
    })
