"""Exports the trained model as a SavedModel whose signatures take raw tf.Examples (Transform graph inside) and
answer per task (components/model/tasks.py): `probabilities` [batch, 1] for binary; `scores` [batch, K] and
`classes` [batch, K] (the class names, as TF Serving's classify API and the Estimator heads give them) for
multiclass; `predictions` [batch, 1] in the label's own units for regression. All float32 whatever the
training policy. `assets.extra/tfxflow_model.json` records the task, the label and the classes for the steps
after the Trainer (TF Serving ignores it)."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from tfxflow.components import names
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import tasks
from tfxflow.components.model import text as text_lib

SERVING_SIGNATURE = names.SERVING_SIGNATURE
RAW_SIGNATURE = names.RAW_SIGNATURE
TRANSFORM_SIGNATURE = names.TRANSFORM_SIGNATURE
OUTPUT_KEY = names.OUTPUT_KEY
EXAMPLES_INPUT = "examples"  # serving_default's input
# TF Serving replays these PredictionLog records when it loads a version, before it takes traffic, so the
# first requests do not pay for the lazy initialisation (tensorflow/serving#385, #1414).
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_BATCHES = (1, 8)
MODEL_INFO_FILE = names.MODEL_INFO_FILE


# Serving never differentiates: the encoder's custom gradients (encoder.gelu, encoder.attend) stay out of the
# SavedModel, whose functions, loaded and saved again (the TFLite export), could not carry them.
SERVING = tf.saved_model.SaveOptions(experimental_custom_gradients=False)


def as_model_inputs(
    transformed: Dict[str, tf.Tensor], input_names, dtypes: Optional[Dict[str, tf.DType]] = None
) -> Dict[str, tf.Tensor]:
    """Selects the model's inputs from transformed features and shapes each as [batch, 1], a text feature's as
    [batch, length] (cast to `dtypes` where given: an integer feature of a user's preprocessing_fn can be a
    numeric input)."""
    inputs = {
        name: transformed[name] if transformed[name].shape.rank == 2 else tf.reshape(transformed[name], [-1, 1])
        for name in input_names
    }
    for name, dtype in (dtypes or {}).items():
        if name in inputs and inputs[name].dtype != dtype:
            inputs[name] = tf.cast(inputs[name], dtype)
    return inputs


def serving_raw_feature_spec(
    tf_transform_output: tft.TFTransformOutput,
    config: features_lib.FeatureConfig,
    serving_columns: Optional[Sequence[str]] = None,
) -> dict:
    """The raw feature spec of what a request holds: `serving_columns` (the schema's SERVING environment) but the
    label; without them, every column but those that exist only to make the label."""
    spec = tf_transform_output.raw_feature_spec()
    if serving_columns is not None:
        return {k: v for k, v in spec.items() if k in set(serving_columns) - {config.label.column}}
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


def label_forward(label: features_lib.LabelSpec, values):
    """A regression label on the scale the model trains on (`label.transform`)."""
    return tf.math.log1p(values) if label.transform == "log1p" else values


def label_inverse(label: features_lib.LabelSpec, values):
    """The model's output back in the label's own units."""
    return tf.math.expm1(values) if label.transform == "log1p" else values


def task_outputs(config: features_lib.FeatureConfig, output, class_names: Sequence[str] = ()) -> Dict[str, Any]:
    """The signatures' outputs of the model's `output`, per task, float32."""
    output = tf.cast(output, tf.float32)
    if config.task == tasks.MULTICLASS:
        names_row = tf.constant([list(class_names)], dtype=tf.string)
        classes = tf.tile(names_row, tf.stack([tf.shape(output)[0], 1]))
        return {"scores": output, "classes": classes}
    if config.task == tasks.REGRESSION:
        return {"predictions": label_inverse(config.label, output)}
    return {OUTPUT_KEY: output}


def model_info(
    config: features_lib.FeatureConfig,
    class_names: Sequence[str] = (),
    signatures: Sequence[str] = (),
    encoders: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """What the steps after the Trainer need to know of an exported model: task, label, classes, outputs; and
    of its Transformer encoders (`encoders`, by text input: architecture, word embeddings' rows, tokenization,
    pooling), what a later run needs to start from them (components/model/checkpoints/)."""
    task = config.task_spec
    info = {
        "task": task.name,
        "label": config.label.to_dict(),
        "classes": list(class_names),
        "outputs": list(task.outputs),
        "prediction_key": task.prediction_key,
        "signatures": list(signatures),
    }
    if encoders:
        info["encoders"] = dict(encoders)
    if config.text:
        # How each text column became token ids in the Transform graph: what an edge tokenizer must redo
        # (components/edge/edge_convert.py), the vocabulary being the SavedModel's asset of that name.
        info["text"] = {
            column: {
                "ids": config.transformed_name(column),
                "mask": config.mask_name(column),
                "sequence_length": config.sequence_length,
                "vocabulary": text_lib.asset_name(column),
                "tokenization": dataclasses.asdict(config.tokenization),
            }
            for column in config.text
        }
    return info


def write_model_info(export_dir: str, info: Dict[str, Any]) -> None:
    path = os.path.join(export_dir, MODEL_INFO_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(info, indent=1, sort_keys=True))


def export_serving_model(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    config: features_lib.FeatureConfig,
    export_dir: str,
    class_names: Sequence[str] = (),
    raw_signature: bool = True,
    serving_columns: Optional[Sequence[str]] = None,
    encoders: Optional[Dict[str, Any]] = None,
) -> None:
    """Writes `export_dir` with three signatures, float32 in and out whatever the training policy:
    `serving_default` (serialized raw tf.Examples -> the task's outputs), `serving_raw` (one tensor per raw
    feature column, for TF Serving's JSON REST API -> the same outputs; only with `raw_signature`, which needs
    the feature config's columns) and `transform_features` (serialized raw tf.Examples -> transformed
    features and label, used by TFMA). `class_names`: a multi-class model's classes in index order;
    `serving_columns`: the columns a request holds (`serving_raw_feature_spec`); `encoders`: what model_info
    records of its Transformer encoders."""
    # Create it under the float32 policy: a mixed policy would cast its raw float inputs to 16 bits.
    transform_layer = tf_transform_output.transform_features_layer()
    input_names = list(model.input_names)
    serving_spec = serving_raw_feature_spec(tf_transform_output, config, serving_columns)
    full_spec = tf_transform_output.raw_feature_spec()
    class_names = list(class_names)

    # autograph=False: no branch or loop here depends on a tensor, and converting the Transform layer's and
    # Keras' Python source for them (TF's autograph) was most of the time traced functions took.
    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def serve_examples(serialized):
        raw = tf.io.parse_example(serialized, serving_spec)
        transformed = transform_layer(raw)
        return task_outputs(config, model(as_model_inputs(transformed, input_names), training=False), class_names)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def transform_features(serialized):
        raw = tf.io.parse_example(serialized, full_spec)
        return transform_layer(raw)

    signatures = {SERVING_SIGNATURE: serve_examples, TRANSFORM_SIGNATURE: transform_features}
    if raw_signature:
        raw_specs = raw_input_specs(tf_transform_output, config)
        feature_kinds = {name: spec for name, spec in full_spec.items() if name in raw_specs}

        @tf.function(input_signature=[raw_specs], autograph=False)
        def serve_raw(features):
            raw = {}
            for name, value in features.items():
                if isinstance(feature_kinds[name], tf.io.FixedLenFeature):
                    raw[name] = tf.reshape(value, [-1] + list(feature_kinds[name].shape))
                else:
                    raw[name] = _as_single_value_sparse(value)
            transformed = transform_layer(raw)
            output = model(as_model_inputs(transformed, input_names), training=False)
            return task_outputs(config, output, class_names)

        signatures[RAW_SIGNATURE] = serve_raw
    tf.saved_model.save(serving_module(model, transform_layer), export_dir, signatures=signatures, options=SERVING)
    write_model_info(export_dir, model_info(config, class_names, sorted(signatures), encoders))


# Where TFT's Keras layer keeps the loaded Transform graph (its tables' initialisers, vocabulary assets) for
# tracking (tensorflow_transform/output_wrapper.py, TransformFeaturesLayer.__init__).
TRANSFORM_TRACKED = "_saved_model_loader_tracked_dict"


def serving_module(model: keras.Model, transform_layer) -> tf.Module:
    """What the SavedModel keeps besides its signatures: the model's variables and the Transform graph's tables
    and assets, but not the Keras objects that hold them.

    Saved as Keras objects, every layer's call would be traced into the SavedModel as well (Keras' own
    SavedModel format), functions that nothing serving the signatures calls: that makes the export slower and
    every consumer slower to load it (the Evaluator, the serving check, TF Serving)."""
    module = tf.Module()
    module.model_variables = list(model.variables)
    # Without the attribute (another TFT), the layer itself: the same SavedModel, saved the slower way.
    module.transform_graph = getattr(transform_layer, TRANSFORM_TRACKED, transform_layer)
    return module


SCANNED_ROWS = 20_000  # rows looked through for ones with a value in every column


def sample_rows(
    file_patterns: Iterable[str], columns: Sequence[str], count: int = max(WARMUP_BATCHES), scan: int = SCANNED_ROWS
) -> Tuple[List[bytes], List[bool]]:
    """Up to `count` serialized raw tf.Examples of the files (GZIP TFRecords), in file order among the first
    `scan`: those with one value in every one of `columns` first (serving_raw takes one value per column), then
    the others; and for each, whether it has every column."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    complete: List[bytes] = []
    partial: List[bytes] = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").take(scan):
        features = tf.train.Example.FromString(record.numpy()).features.feature
        if all(c in features and len(feature_values(features[c])) == 1 for c in columns):
            complete.append(record.numpy())
            if len(complete) == count:
                break
        elif len(partial) < count:
            partial.append(record.numpy())
    rows = (complete + partial)[:count]
    return rows, [i < len(complete) for i in range(len(rows))]


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
    raw_signature: bool = True,
    complete: Optional[Sequence[bool]] = None,
) -> int:
    """Writes `assets.extra/tf_serving_warmup_requests` into the SavedModel: for each batch size of
    WARMUP_BATCHES, a request through `serving_default` (serialized tf.Examples of `rows`) and one through
    `serving_raw` (one tensor per column, of the rows `complete` marks as having every feature column; all of
    them when it is None). Returns how many."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    if not rows:
        return 0
    whole = [row for i, row in enumerate(rows) if complete is None or complete[i]]
    specs = raw_input_specs(tf_transform_output, config) if raw_signature else {}
    path = os.path.join(export_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    written = 0
    with tf.io.TFRecordWriter(path) as writer:
        for size in WARMUP_BATCHES:
            batch = list(rows[:size])
            requests = {SERVING_SIGNATURE: {EXAMPLES_INPUT: tf.constant(batch, tf.string)}}
            if raw_signature and whole:
                requests[RAW_SIGNATURE] = _raw_inputs(whole[:size], specs)
            for signature, inputs in requests.items():
                request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
                for name, tensor in inputs.items():
                    request.inputs[name].CopyFrom(tf.make_tensor_proto(tensor))
                log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())
                written += 1
    return written
