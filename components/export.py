"""Exports the trained model as a SavedModel whose signatures take raw tf.Examples (Transform graph inside)."""

from __future__ import annotations

from typing import Dict

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from components import features as features_lib

SERVING_SIGNATURE = "serving_default"
RAW_SIGNATURE = "serving_raw"
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


def raw_input_specs(tf_transform_output: tft.TFTransformOutput,
                    config: features_lib.FeatureConfig) -> Dict[str, tf.TensorSpec]:
    """One [batch] tensor per feature column, typed as in the raw data (float32, int64 or string)."""
    raw_spec = tf_transform_output.raw_feature_spec()
    return {column: tf.TensorSpec(shape=[None], dtype=raw_spec[column].dtype, name=column)
            for column in config.feature_columns}


def _as_single_value_sparse(tensor: tf.Tensor) -> tf.SparseTensor:
    """[batch] -> [batch, 1] SparseTensor with every value present (what Transform's VarLen inputs expect).
    Unlike tf.sparse.from_dense this keeps zeros and empty strings as values."""
    batch = tf.shape(tensor, out_type=tf.int64)[0]
    indices = tf.stack([tf.range(batch), tf.zeros([batch], tf.int64)], axis=1)
    return tf.SparseTensor(indices=indices, values=tensor, dense_shape=tf.stack([batch, tf.constant(1, tf.int64)]))


def export_serving_model(model: keras.Model, tf_transform_output: tft.TFTransformOutput,
                         config: features_lib.FeatureConfig, export_dir: str) -> None:
    """Writes `export_dir` with three signatures, float32 in and out whatever the training policy:
    `serving_default` (serialized raw tf.Examples -> probabilities), `serving_raw` (one tensor per raw
    feature column, for TF Serving's JSON REST API -> probabilities) and `transform_features` (serialized
    raw tf.Examples -> transformed features and label, used by TFMA)."""
    # Attached to the model so the SavedModel tracks the Transform graph's assets and variables. Create it
    # under the float32 policy: a mixed policy would cast its raw float inputs to 16 bits.
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

    raw_specs = raw_input_specs(tf_transform_output, config)
    feature_kinds = {name: spec for name, spec in full_spec.items() if name in raw_specs}

    @tf.function(input_signature=[raw_specs])
    def serve_raw(features):
        raw = {}
        for name, value in features.items():
            if isinstance(feature_kinds[name], tf.io.FixedLenFeature):
                raw[name] = tf.reshape(value, [-1] + list(feature_kinds[name].shape))
            else:
                raw[name] = _as_single_value_sparse(value)
        transformed = model.tft_layer(raw)
        probabilities = model(as_model_inputs(transformed, input_names), training=False)
        return {OUTPUT_KEY: tf.cast(probabilities, tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def transform_features(serialized):
        raw = tf.io.parse_example(serialized, full_spec)
        return model.tft_layer(raw)

    tf.saved_model.save(model, export_dir, signatures={
        SERVING_SIGNATURE: serve_examples,
        RAW_SIGNATURE: serve_raw,
        TRANSFORM_SIGNATURE: transform_features,
    })
