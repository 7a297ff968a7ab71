"""The Trainer's input: batches of (features, label) read from gzipped TFRecords of tf.Examples, the rows they
hold, and how fast the pipeline alone delivers them (whether training waited on its input)."""

from __future__ import annotations

import math
import time
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from tfxflow.components.model import export
from tfxflow.components.training.train_params import TrainParams


def list_files(file_patterns: Iterable[str]) -> List[str]:
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no examples match {list(file_patterns)}")
    return files


def make_dataset(
    file_patterns: Iterable[str],
    feature_spec: Mapping[str, Any],
    label_key: str,
    input_names: Iterable[str],
    params: TrainParams,
    training: bool,
    batch_size: int,
    num_workers: int = 1,
    transform=None,
    label_fn=None,
    input_dtypes: Optional[Mapping[str, tf.DType]] = None,
    text_masks: Sequence[Tuple[str, str]] = (),
    sequence_length: int = 0,
) -> tf.data.Dataset:
    """Batches of `batch_size` (features, label) from gzipped TFRecords of tf.Examples (for training, the
    effective batch: `TrainParams.effective_batch`): Transform's output, or with `transform` (the Transform
    graph's layer) raw examples that are transformed batch by batch as they are read.

    Files are read in parallel; serialized records are cached after the first pass when the files are small
    (see TrainParams), shuffled per epoch, batched, then parsed in one vectorised `parse_example` per batch
    and prefetched. Across several workers, each reads its own files when there are enough of them, else its
    own share of the records (`shard_policy`); the eval split then repeats and its last partial batch is
    dropped, so every worker runs the same validation steps on full batches. `label_fn` maps the label to the
    training target (a regression label's `transform`); `input_dtypes` casts inputs to the model's dtypes.

    `text_masks`, (ids, mask) input names of text columns of `sequence_length` tokens: with
    `params.length_buckets` and one worker (fed_widths), batches are grouped by length (group_by_length) and the
    text inputs are [batch, width] of a few widths.
    """
    input_names = list(input_names)
    files = list_files(file_patterns)
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=tf.data.AUTOTUNE)
    if params.cache and sum(tf.io.gfile.stat(f).length for f in files) <= params.cache_max_mb * 2**20:
        ds = ds.cache()  # larger inputs stream from disk each epoch: memory stays bounded at any data size
    if training:
        ds = ds.shuffle(params.shuffle_buffer, seed=params.seed, reshuffle_each_iteration=True).repeat()
    elif num_workers > 1:
        # Every worker runs the same number of validation steps (their metrics are all-reduced): a worker whose
        # share ran out first would leave the others waiting.
        ds = ds.repeat()
    drop = training or num_workers > 1
    widths = fed_widths(sequence_length, params.length_buckets, num_workers) if text_masks else ()
    ds = ds.batch(batch_size * (LENGTH_WINDOW if widths else 1), drop_remainder=drop)

    # Not converted by autograph (tf.data's map converts by default): no branch here depends on a tensor, and
    # converting the Transform layer's and Keras' Python source took a quarter of a small run's Trainer.
    @tf.autograph.experimental.do_not_convert
    def parse(serialized):
        parsed = tf.io.parse_example(serialized, feature_spec)
        if transform is not None:
            parsed = transform(parsed)
        label = tf.reshape(parsed[label_key], [-1, 1])
        if label_fn is not None:
            label = label_fn(label)
        return export.as_model_inputs(parsed, input_names, input_dtypes), label

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = shard_policy(len(files), num_workers)
    if options.experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.DATA:
        logging.info(
            "Trainer input: %d file(s) for %d workers: each worker reads every record and keeps its share "
            "(tf.data's DATA sharding); ExampleGen writes a file per worker when the run asks for the workers",
            len(files),
            num_workers,
        )
    ds = ds.with_options(options).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if widths:
        ds = group_by_length(ds, text_masks, widths, batch_size, drop, shuffle_seed=params.seed if training else None)
    return ds.prefetch(tf.data.AUTOTUNE)


# Batches grouped together by length: rows are sorted within windows of this many batches (Hugging Face's
# LengthGroupedSampler sorts "megabatches" of 50). Wider windows group tighter and mix less.
LENGTH_WINDOW = 32


def fed_widths(sequence_length: int, buckets: int, workers: int) -> Tuple[int, ...]:
    """The widths text batches are cut to on `workers` workers: none with several, whose all-gather of the word
    embeddings' sparse gradient needs rows of one width on every worker (each worker's batch is its own)."""
    return bucket_widths(sequence_length, buckets) if workers == 1 else ()


def bucket_widths(sequence_length: int, buckets: int) -> Tuple[int, ...]:
    """The widths text batches are cut to: sequence_length x 1/buckets, 2/buckets, ..., 1, each rounded up to
    a multiple of 8 (vector widths); () for no grouping. A few fixed widths keep the traced steps few: a width
    per batch would trace (and with XLA compile) a step per width."""
    if buckets < 1 or sequence_length < 1:
        return ()
    widths = {min(sequence_length, 8 * math.ceil(sequence_length * i / buckets / 8)) for i in range(1, buckets + 1)}
    return tuple(sorted(widths))


def group_by_length(
    ds: tf.data.Dataset,
    text_masks: Sequence[Tuple[str, str]],
    widths: Sequence[int],
    batch_size: int,
    drop_remainder: bool,
    shuffle_seed: Optional[int] = None,
) -> tf.data.Dataset:
    """Splits each (features, label) window of rows into batches of `batch_size` rows of near length, and cuts
    every text input (ids and mask) to the narrowest of `widths` that holds the batch's longest row (its mask's
    count; across several text columns the longest of them). Only padding is cut: the model's attention and
    pooling leave padding out, so each row's output is the one it has at full width. With `shuffle_seed`, the
    batches are shuffled about a window at a time (training: a window's batches would come shortest first)."""
    table = tf.constant(widths, tf.int32)
    cut_names = {name for pair in text_masks for name in pair}

    def lengths(features):
        counts = [tf.reduce_sum(tf.cast(features[mask], tf.int32), axis=1) for _, mask in text_masks]
        return tf.reduce_max(tf.stack(counts), axis=0)

    @tf.autograph.experimental.do_not_convert
    def cut(features, label):
        longest = tf.reduce_max(lengths(features))
        width = table[tf.minimum(tf.searchsorted(table, longest[tf.newaxis])[0], len(widths) - 1)]
        return {k: v[:, :width] if k in cut_names else v for k, v in features.items()}, label

    @tf.autograph.experimental.do_not_convert
    def split(features, label):
        order = tf.argsort(lengths(features), stable=True)
        rows = tf.data.Dataset.from_tensor_slices(
            ({k: tf.gather(v, order) for k, v in features.items()}, tf.gather(label, order))
        )
        return rows.batch(batch_size, drop_remainder=drop_remainder).map(cut)

    ds = ds.flat_map(split)
    if shuffle_seed is not None:
        ds = ds.shuffle(LENGTH_WINDOW, seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds


def shard_policy(files: int, workers: int) -> "tf.data.experimental.AutoShardPolicy":
    """FILE (each worker reads its own files) where there are at least as many files as workers; else DATA
    (each worker reads every record and keeps its share)."""
    if files >= workers:
        return tf.data.experimental.AutoShardPolicy.FILE
    return tf.data.experimental.AutoShardPolicy.DATA


def count_rows(file_patterns: Iterable[str]) -> int:
    """The records of gzipped TFRecord files (a pass over them: where ExampleGen's recorded count is unknown)."""
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP")
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


# Training is bound by its input when the input pipeline alone is at most this much faster than training took
# examples from it: the training step (a GPU's) then waited for batches.
INPUT_BOUND_RATIO = 1.25


def input_speed(dataset: tf.data.Dataset, examples_per_batch: int, batches: int = 20) -> float:
    """Examples/s the training input pipeline delivers alone, with nothing consuming them but this loop: over
    `batches` batches after a first one (which may start its threads and fill its buffers)."""
    iterator = iter(dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return examples_per_batch * batches / max(time.perf_counter() - start, 1e-9)


def input_bound(input_examples_per_s: float, trained_examples_per_s: float) -> bool:
    """Whether training waited on its input (INPUT_BOUND_RATIO)."""
    return input_examples_per_s < INPUT_BOUND_RATIO * trained_examples_per_s
