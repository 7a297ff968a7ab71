"""What is no checkpoint is refused naming what is there; a moved folder of checkpoints reads the latest by its
name; a checkpoint on an object store is read there and copied whole."""

import os
import shutil

import pytest
import tensorflow as tf

from tests.components.model.checkpoints.folders import GARDEN, hugging_face_copy
from tfxflow.components.model import checkpoints
from tfxflow.components.model.checkpoints import CheckpointError


def test_what_is_no_checkpoint_is_refused_naming_what_is_there(tmp_path, release):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"not a checkpoint this pipeline reads: .* it holds notes.txt"):
        checkpoints.locate(str(tmp_path))
    with pytest.raises(CheckpointError, match="a file, not a checkpoint"):
        checkpoints.locate(str(tmp_path / "notes.txt"))
    with pytest.raises(CheckpointError, match="nothing is there"):
        checkpoints.locate(str(tmp_path / "missing"))
    keras_checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(tmp_path / "keras" / "ckpt"))
    with pytest.raises(CheckpointError, match="a TF checkpoint of neither Google's BERT names"):
        checkpoints.locate(keras_checkpoint)
    broken = tmp_path / "broken"
    shutil.copytree(release, broken)
    data = broken / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"hold 1,000 bytes and the index lists .* bytes of tensors: a truncated"):
        checkpoints.locate(str(broken))
    data.unlink()
    with pytest.raises(CheckpointError, match=r"bert_model.ckpt.data-\* files are missing"):
        checkpoints.locate(str(broken))


def test_a_moved_folder_of_checkpoints_reads_the_latest_by_its_name(tmp_path):
    """TF's CheckpointManager writes the absolute path of the latest checkpoint, stale once the folder moved."""
    moved = tmp_path / "moved" / "uncased_L-2_H-32_A-4"
    shutil.copytree(os.path.join(GARDEN, "uncased_L-2_H-32_A-4"), moved)
    (moved / "checkpoint").write_text('model_checkpoint_path: "/gone/elsewhere/bert_model.ckpt-1"\n')
    assert checkpoints.locate(str(moved)).weights == str(moved / "bert_model.ckpt-1")


def test_a_checkpoint_on_an_object_store_is_read_there_and_copied_whole(s3_server, monkeypatch, tmp_path, release):
    from tfxflow.components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    bucket = s3_server.create_bucket("pretrained")
    folder = hugging_face_copy(str(tmp_path / "minilm"), **{"pytorch_model.bin": b"other weights, not copied"})
    object_store.upload(folder, f"s3://{bucket}/all-MiniLM-L6-v2")
    remote = checkpoints.locate(f"s3://{bucket}/all-MiniLM-L6-v2")
    assert remote.kind == "huggingface" and remote.vocab_file == f"s3://{bucket}/all-MiniLM-L6-v2/vocab.txt"
    assert remote.pooling == "mean" and remote.encoder.layers == 6
    copy = checkpoints.local_copy(remote, str(tmp_path / "copy"))
    assert sorted(object_store.list_files(copy)) == [
        "1_Pooling/config.json", "README.md", "config.json", "model.safetensors", "modules.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip
    assert checkpoints.locate(copy).encoder == remote.encoder
    # A Google release's prefix on minio:// brings its own files only.
    object_store.upload(release, f"minio://{bucket}/uncased_L-6_H-384_A-12")
    object_store.write_bytes(f"minio://{bucket}/uncased_L-6_H-384_A-12/model.ckpt-9.index", b"another checkpoint")
    prefix = checkpoints.locate(f"minio://{bucket}/uncased_L-6_H-384_A-12/bert_model.ckpt")
    copied = checkpoints.local_copy(prefix, str(tmp_path / "prefix"))
    assert copied == str(tmp_path / "prefix" / "bert_model.ckpt")
    assert sorted(os.listdir(tmp_path / "prefix")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt",
    ]  # fmt: skip
    assert checkpoints.locate(copied).encoder == prefix.encoder
    # A store that does not have it: one line naming the path.
    with pytest.raises(CheckpointError, match=rf"--init-checkpoint s3://{bucket}/gone: nothing is there"):
        checkpoints.locate(f"s3://{bucket}/gone")
    with pytest.raises(
        CheckpointError, match=r"--init-checkpoint s3://no-such-bucket/m: cannot read it: .*no-such-bucket"
    ):
        checkpoints.locate("s3://no-such-bucket/m")
    object_store.clear_client_cache()
