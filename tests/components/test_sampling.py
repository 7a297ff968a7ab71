"""A bounded, systematic sample of a large split (the Evaluator's and Transform's), sized from ExampleGen's record."""

import tensorflow as tf
from tfx.types import artifact_utils, standard_artifacts

from tfxflow.components import csv_input, sampling
from tfxflow.components.csv_input import ColumnRule

RULES = {"x": ColumnRule("INT"), "y": ColumnRule("FLOAT")}


def examples_of(tmp_path, rows):
    data = tmp_path / "data.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i % 7}.5\n" for i in range(rows)))
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    result = csv_input.ingest([str(data)], {s: f"{examples.uri}/Split-{s}" for s in ("train", "eval")}, [3, 1], RULES)
    csv_input.record_rows(examples, result)
    return examples, result


def _records(pattern):
    return [r.numpy() for r in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP")]


def test_a_large_eval_split_is_sampled_every_kth_row(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    rows = result.split_rows["eval"]
    plan = sampling.sampled_examples(examples, ["eval"], 300, str(tmp_path / "sample"))
    every = -(-rows // 300)
    assert plan == {"eval": {"rows": rows, "every": every, "sampled": -(-rows // every)}}
    everything = _records(f"{examples.uri}/Split-eval/*")
    sample = _records(str(tmp_path / "sample" / "Split-eval" / "*"))
    assert sample == everything[::every] and 0 < len(sample) <= 300


def test_a_split_within_the_bound_is_evaluated_whole(tmp_path):
    examples, _ = examples_of(tmp_path, 400)
    assert sampling.sampled_examples(examples, ["eval"], 300, str(tmp_path / "sample")) is None
    assert sampling.sampled_examples(examples, ["eval"], 0, str(tmp_path / "sample")) is None


def test_the_sample_artifact_has_the_splits_and_formats_of_the_whole(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    examples.set_string_custom_property("file_format", "tfrecords_gzip")
    plan = sampling.sampled_examples(examples, ["train"], 1000, str(tmp_path / "sample"))
    sample = sampling.sample_artifact(examples, str(tmp_path / "sample"))
    assert artifact_utils.decode_split_names(sample.split_names) == ["train", "eval"]
    assert sample.get_string_custom_property("file_format") == "tfrecords_gzip"
    train = _records(artifact_utils.get_split_uri([sample], "train") + "/*")
    assert len(train) == plan["train"]["sampled"] == -(-result.split_rows["train"] // plan["train"]["every"])
    assert _records(artifact_utils.get_split_uri([sample], "eval") + "/*") == []  # not read by its reader
