"""Systematic samples of large Examples splits, for the steps whose cost grows with every row they read but whose
result does not need them all (TFMA's metrics, tf.Transform's analyzers).

Rows reach a split by a hash of their content (components/ingest/csv_input.py), so every k-th of them, in file order,
is a sample of the data that does not follow the input files' order. A split's size comes from ExampleGen's
record: no row is read to decide. The sample is GZIP TFRecords of the same tf.Examples, as an Examples artifact
the upstream executor reads in place of the whole one."""

from __future__ import annotations

import contextlib
import json
import math
import os
from typing import Dict, Iterator, List, Optional, Sequence

from absl import logging
from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs

from tfxflow.components import names
from tfxflow.components.ingest import csv_input, tf_example


def write_sample(files: Sequence[str], every: int, path: str) -> int:
    """Writes every `every`-th record of `files` (GZIP TFRecords, in order) to `path`; returns how many."""
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(list(files), compression_type="GZIP").shard(every, 0).batch(8192)
    with fileio.open(path, "wb") as stream:
        writer = tf_example.TFRecordGzipWriter(stream)
        for batch in dataset:
            writer.write(list(batch.numpy()))
        writer.close()
    return writer.records


def split_sizes(examples: types.Artifact, splits: Sequence[str]) -> Optional[Dict[str, int]]:
    """Each of `splits`' rows as ExampleGen recorded them (0 for a split it did not write); None when it recorded
    none (another ExampleGen)."""
    counts = csv_input.read_rows(examples.uri)
    if counts is None:
        return None
    return {split: counts["split_rows"].get(split, 0) for split in splits}


def sampled_examples(
    examples: types.Artifact, splits: Sequence[str], max_rows: int, folder: str
) -> Optional[Dict[str, Dict[str, int]]]:
    """Writes a sample of at most `max_rows` rows of each of `splits` that holds more (their sizes from
    ExampleGen's record) under `folder` as an Examples artifact's splits; a split of `splits` within the bound
    is copied whole, any other is left empty. Returns what was sampled per split ({"rows", "every", "sampled"}),
    or None when no split needs it (or no size was recorded)."""
    sizes = split_sizes(examples, splits)
    if not max_rows or sizes is None:
        return None
    if all(rows <= max_rows for rows in sizes.values()):
        return None
    plan = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        source = artifact_utils.get_split_uri([examples], split)
        target = names.split_dir(folder, split)
        fileio.makedirs(target)
        files = sorted(fileio.glob(os.path.join(source, "*")))
        rows = sizes.get(split, 0)
        every = math.ceil(rows / max_rows) if split in sizes and rows > max_rows else 0
        if not every:  # read whole (another split is sampled), or not read
            if split in sizes:
                for name in files:
                    fileio.copy(name, os.path.join(target, os.path.basename(name)))
            continue
        sampled = write_sample(files, every, os.path.join(target, "data_tfrecord-00000-of-00001.gz"))
        plan[split] = {"rows": rows, "every": every, "sampled": sampled}
    return plan


def sample_artifact(examples: types.Artifact, folder: str) -> types.Artifact:
    """An Examples artifact of the sample `sampled_examples` wrote under `folder`: the same splits and formats."""
    sample = standard_artifacts.Examples()
    sample.uri = folder
    sample.split_names = examples.split_names
    for name in ("payload_format", "file_format"):
        if examples.has_custom_property(name):
            sample.set_string_custom_property(name, examples.get_string_custom_property(name))
    return sample


@contextlib.contextmanager
def sampled_input(
    input_dict: Dict[str, List[types.Artifact]],
    splits: Sequence[str],
    max_rows: int,
    folder: str,
    record_on: types.Artifact,
    record_as: str,
) -> Iterator[Dict[str, List[types.Artifact]]]:
    """An executor's `input_dict` whose examples are a sample of at most `max_rows` rows of each of `splits`,
    written under `folder` (which goes on exit) and its plan recorded on `record_on` as the custom property
    `record_as`; `input_dict` as it is when no split holds more."""
    key = standard_component_specs.EXAMPLES_KEY
    examples = artifact_utils.get_single_instance(input_dict[key])
    try:
        plan = sampled_examples(examples, splits, max_rows, folder)
        if plan:
            input_dict = {**input_dict, key: [sample_artifact(examples, folder)]}
            record_on.set_string_custom_property(record_as, json.dumps(plan, sort_keys=True))
            logging.info("%s: %s", record_as, json.dumps(plan))
        yield input_dict
    finally:
        if fileio.exists(folder):
            fileio.rmtree(folder)
