"""A bounded, systematic sample of a large split (the Evaluator's and Transform's), sized from ExampleGen's record."""

from tfx.types import artifact_utils

from tests.components.split_examples import examples_of, records
from tfxflow.components.ingest import sampling


def test_a_large_eval_split_is_sampled_every_kth_row(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    rows = result.split_rows["eval"]
    plan = sampling.sampled_examples(examples, ["eval"], 300, str(tmp_path / "sample"))
    every = -(-rows // 300)
    assert plan == {"eval": {"rows": rows, "every": every, "sampled": -(-rows // every)}}
    everything = records(f"{examples.uri}/Split-eval/*")
    sample = records(str(tmp_path / "sample" / "Split-eval" / "*"))
    assert sample == everything[::every] and 0 < len(sample) <= 300


def test_a_split_within_the_bound_is_not_sampled(tmp_path):
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
    train = records(artifact_utils.get_split_uri([sample], "train") + "/*")
    assert len(train) == plan["train"]["sampled"] == -(-result.split_rows["train"] // plan["train"]["every"])
    # A split not asked for is left empty: its reader must not read it (components/training/transform.py)
    assert records(artifact_utils.get_split_uri([sample], "eval") + "/*") == []
