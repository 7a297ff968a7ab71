"""tf.Transform `preprocessing_fn`: z-scored numerics, vocabularies, buckets, word pieces of text, missing values
filled, the label."""

from __future__ import annotations

from typing import Any, Dict, Mapping

import tensorflow as tf
import tensorflow_transform as tft

from tfxflow.components.model import features as features_lib
from tfxflow.components.model import tasks, text
from tfxflow.components.model.subword import assets as subword
from tfxflow.components.model.tokenization import WORDPIECE

# Transform's vocabulary of a multi-class label whose classes the feature config does not list: the class names
# in index order (the export's `classes` output reads it back).
LABEL_VOCABULARY = "tfxflow_label_classes"


def _densify(x, default_value):
    """Turns a [batch, 0-or-1] sparse or ragged input into a dense [batch] tensor, filling gaps."""
    if isinstance(x, tf.RaggedTensor):
        x = x.to_sparse()
    if isinstance(x, tf.sparse.SparseTensor):
        default_value = tf.cast(default_value, x.dtype)
        dense = tf.sparse.to_dense(tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value)
        return tf.squeeze(dense, axis=1)
    if x.shape.rank == 2:
        return tf.squeeze(x, axis=1)
    return x


def _to_float(x):
    if isinstance(x, tf.sparse.SparseTensor):
        return tf.sparse.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
    if isinstance(x, tf.RaggedTensor):
        return x.with_values(tf.cast(x.values, tf.float32))
    return tf.cast(x, tf.float32)


def _present_values(x):
    return x.values if isinstance(x, (tf.sparse.SparseTensor, tf.RaggedTensor)) else x


def _present_fraction(x):
    """The fraction of rows that hold a value (an analyzer; 1.0 for a dense column, which has no gaps)."""
    if isinstance(x, tf.sparse.SparseTensor):
        ones = tf.sparse.SparseTensor(x.indices, tf.ones_like(x.values, tf.float32), x.dense_shape)
    elif isinstance(x, tf.RaggedTensor):
        ones = x.with_values(tf.ones_like(x.values, tf.float32))
    else:
        return tf.constant(1.0)
    return tft.mean(_densify(ones, 0.0))


def fill_numeric(x):
    """Fills missing numeric values with the column mean (over present values), as float32."""
    x = _to_float(x)
    mean = tft.mean(_present_values(x))
    return _densify(x, mean)


def z_score_filled(x):
    """`tft.scale_to_z_score(fill_numeric(x))` in one pass over the data, where that composition takes two (the
    variance of the filled column needs the mean first). Filling with the mean adds no deviation, so the filled
    column's population variance is the present values' variance times the fraction of rows present."""
    x = _to_float(x)
    present = _present_values(x)
    mean, variance = tft.mean(present), tft.var(present)
    deviation = _densify(x, mean) - mean
    std = tf.sqrt(variance * _present_fraction(x))
    # As tft.scale_to_z_score: a constant column keeps its (zero) deviation.
    return tf.where(tf.not_equal(std, 0.0), tf.math.divide_no_nan(deviation, std), deviation)


def bucketize_filled(x, num_buckets: int):
    """Quantile buckets in one pass: the boundaries of the present values (as `tft.bucketize` computes them), a
    missing value in the bucket of the column mean. `tft.bucketize(fill_numeric(x))` takes two passes and counts
    each missing row at the mean in the boundaries as well, which moves them only where many rows miss a value."""
    x = _to_float(x)
    # The epsilon tft.bucketize picks.
    boundaries = tft.quantiles(_present_values(x), num_buckets, epsilon=min(1.0 / num_buckets, 0.01))
    return tft.apply_buckets(fill_numeric(x), boundaries)


def fill_categorical(x):
    """Fills missing categorical values with a reserved token (string) or -1 (integer)."""
    default = features_lib.MISSING_TOKEN if x.dtype == tf.string else features_lib.MISSING_INT
    return _densify(x, default)


def make_label(inputs: Mapping[str, Any], label: features_lib.LabelSpec):
    """The label per task. binary: int64 0/1 (rows whose label sources are missing get 0); multiclass: the int64
    index of the class (-1 for a value not among the classes, which ingestion refuses); regression: the float32
    value in the label's own units (the Trainer applies `label.transform` itself, so TFMA compares predictions
    with labels in those units)."""
    value = inputs[label.column]
    if label.task == tasks.MULTICLASS:
        value = fill_categorical(value)
        as_text = value if value.dtype == tf.string else tf.strings.as_string(value)
        if label.classes:
            table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(list(label.classes)), tf.range(len(label.classes), dtype=tf.int64)
                ),
                default_value=-1,
            )
            return table.lookup(as_text)
        return tft.compute_and_apply_vocabulary(
            as_text, num_oov_buckets=0, default_value=-1, vocab_filename=LABEL_VOCABULARY
        )
    if label.task == tasks.REGRESSION:
        return _densify(_to_float(value), float("nan"))
    if label.greater_than is not None:
        value = _densify(_to_float(value), float("nan"))
        threshold = tf.constant(label.greater_than, tf.float32)
        if label.ratio_of:
            threshold = threshold * _densify(_to_float(inputs[label.ratio_of]), float("nan"))
        # NaN compares false, so a missing source gives 0.
        return tf.cast(tf.greater(value, threshold), tf.int64)
    if label.positive_values:
        value = fill_categorical(value)
        as_text = value if value.dtype == tf.string else tf.strings.as_string(value)
        hits = [tf.equal(as_text, v) for v in label.positive_values]
        return tf.cast(tf.reduce_any(tf.stack(hits, axis=0), axis=0), tf.int64)
    return tf.cast(_densify(value, 0), tf.int64)


def preprocessing_fn(inputs: Dict[str, Any], custom_config: Dict[str, Any]) -> Dict[str, Any]:
    """Transforms raw columns per the feature config in `custom_config['features']`."""
    config = features_lib.as_config(custom_config["features"])
    outputs = {}
    for column in config.numeric:
        outputs[config.transformed_name(column)] = z_score_filled(inputs[column])
    for column in config.categorical:
        outputs[config.transformed_name(column)] = tft.compute_and_apply_vocabulary(
            fill_categorical(inputs[column]),
            top_k=config.vocab_top_k,
            num_oov_buckets=config.num_oov_buckets,
            vocab_filename=column,
        )
    for column in config.bucketized:
        outputs[config.transformed_name(column)] = bucketize_filled(inputs[column], config.num_buckets)
    wordpiece = config.tokenization.kind == WORDPIECE
    given = (
        text.read_vocabulary(config.text_vocab_file) if config.text and config.text_vocab_file and wordpiece else None
    )
    for column in config.text:
        values = _densify(inputs[column], "")  # a missing text is an empty one: [CLS] [SEP]
        if wordpiece:
            path = text.vocabulary(values, column, config.text_vocab_size, config.tokenization, given)
            ids, mask = text.tokenize(values, path, config.sequence_length, config.tokenization, given)
        else:  # a pretrained model's sentencepiece or byte-level BPE: <s> ... </s>
            ids, mask = subword.tokenize(
                values, column, config.tokenization, config.text_vocab_file, config.text_merges_file,
                config.sequence_length,
            )  # fmt: skip
        outputs[config.transformed_name(column)] = ids
        outputs[config.mask_name(column)] = mask
    outputs[config.label.name] = make_label(inputs, config.label)
    return outputs
