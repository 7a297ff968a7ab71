"""A real Examples artifact of `rows` rows split 3:1 into train and eval by components/ingest/csv_input.py (its hash
split and its record of each split's size), for the tests of what reads a sample of a split."""

import tensorflow as tf
from tfx.types import artifact_utils, standard_artifacts

from tfxflow.components.ingest import csv_input
from tfxflow.components.ingest.csv_input import ColumnRule

RULES = {"x": ColumnRule("INT"), "y": ColumnRule("FLOAT")}


def examples_of(tmp_path, rows):
    """(the Examples artifact, ingest's result) of rows x = i, y = i % 7 + 0.5 for i < `rows`."""
    data = tmp_path / "data.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i % 7}.5\n" for i in range(rows)))
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    result = csv_input.ingest([str(data)], {s: f"{examples.uri}/Split-{s}" for s in ("train", "eval")}, [3, 1], RULES)
    csv_input.record_rows(examples, result)
    return examples, result


def records(pattern):
    """The serialized records of the GZIP TFRecord files `pattern` matches, in order."""
    return [r.numpy() for r in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP")]
