"""Exports the trained model as a SavedModel whose signatures take raw tf.Examples (Transform graph inside)."""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from tfxflow.components import names
from tfxflow.components.model import features as features_lib

SERVING_SIGNATURE = names.SERVING_SIGNATURE
RAW_SIGNATURE = names.RAW_SIGNATURE
TRANSFORM_SIGNATURE = "transform_features"
OUTPUT_KEY = names.OUTPUT_KEY
EXAMPLES_INPUT = "examples"  # serving_default's input
# TF Serving replays these PredictionLog records when it loads a version, before it takes traffic, so the
# first requests do not pay for the lazy initialisation (tensorflow/serving#385, #1414).
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_BATCHES = (1, 8)


def as_model_inputs(transformed: Dict[str, tf.Tensor], input_names) -> Dict[str, tf.Tensor]:
    """Selects the model's inputs from transformed features and shapes each as [batch, 1]."""
    return {name: tf.reshape(transformed[name], [-1, 1]) for name in input_names}


def serving_raw_feature_spec(tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig) -> dict:
    """The raw feature spec minus the columns that exist only to make the label (absent at serving)."""
    spec = tf_transform_output.raw_feature_spec()
    for column in config.label_only_columns:
        spec.pop(column, None)
    return spec


def raw_input_specs(
    tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig
) -> Dict[str, tf.TensorSpec]:
    """One [batch] tensor per feature column, typed as in the raw data (float32, int64 or string)."""
    raw_spec = tf_transform_output.raw_feature_spec()
    return {
        column: tf.TensorSpec(shape=[None], dtype=raw_spec[column].dtype, name=column)
        for column in config.feature_columns
    }


def _as_single_value_sparse(tensor: tf.Tensor) -> tf.SparseTensor:
    """[batch] -> [batch, 1] SparseTensor with every value present (what Transform's VarLen inputs expect).
    Unlike tf.sparse.from_dense this keeps zeros and empty strings as values."""
    batch = tf.shape(tensor, out_type=tf.int64)[0]
    indices = tf.stack([tf.range(batch), tf.zeros([batch], tf.int64)], axis=1)
    return tf.SparseTensor(indices=indices, values=tensor, dense_shape=tf.stack([batch, tf.constant(1, tf.int64)]))


def export_serving_model(
    model: keras.Model, tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig, export_dir: str
) -> None:
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

    tf.saved_model.save(
        model,
        export_dir,
        signatures={
            SERVING_SIGNATURE: serve_examples,
            RAW_SIGNATURE: serve_raw,
            TRANSFORM_SIGNATURE: transform_features,
        },
    )


def warmup_rows(file_patterns: Iterable[str], columns: Sequence[str], count: int = max(WARMUP_BATCHES)) -> List[bytes]:
    """The first `count` serialized raw tf.Examples of the files (GZIP TFRecords) with a value in every one of
    `columns`: serving_raw takes one value per column."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    rows: List[bytes] = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        features = tf.train.Example.FromString(record.numpy()).features.feature
        if all(c in features and len(feature_values(features[c])) == 1 for c in columns):
            rows.append(record.numpy())
            if len(rows) == count:
                break
    return rows


def feature_values(feature: tf.train.Feature) -> list:
    """The values of a tf.train.Feature, whichever list it holds ([] for none)."""
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def _raw_inputs(rows: Sequence[bytes], specs: Dict[str, tf.TensorSpec]) -> Dict[str, tf.Tensor]:
    columns: Dict[str, list] = {name: [] for name in specs}
    for row in rows:
        features = tf.train.Example.FromString(row).features.feature
        for name in specs:
            columns[name].append(feature_values(features[name])[0])
    return {name: tf.constant(values, dtype=specs[name].dtype) for name, values in columns.items()}


def write_warmup_requests(
    export_dir: str,
    rows: Sequence[bytes],
    tf_transform_output: tft.TFTransformOutput,
    config: features_lib.FeatureConfig,
) -> int:
    """Writes `assets.extra/tf_serving_warmup_requests` into the SavedModel: for each batch size of
    WARMUP_BATCHES, a request through `serving_default` (serialized tf.Examples) and one through `serving_raw`
    (one tensor per column), from `rows` (real examples with every feature column present). Returns how many."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    if not rows:
        return 0
    specs = raw_input_specs(tf_transform_output, config)
    path = os.path.join(export_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    written = 0
    with tf.io.TFRecordWriter(path) as writer:
        for size in WARMUP_BATCHES:
            batch = list(rows[:size])
            requests = {
                SERVING_SIGNATURE: {EXAMPLES_INPUT: tf.constant(batch, tf.string)},
                RAW_SIGNATURE: _raw_inputs(batch, specs),
            }
            for signature, inputs in requests.items():
                request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
                for name, tensor in inputs.items():
                    request.inputs[name].CopyFrom(tf.make_tensor_proto(tensor))
                log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())
                written += 1
    return written
