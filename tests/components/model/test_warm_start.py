"""Warm start from pretrained encoders: a checkpoint in Google's BERT names gives BERT's own outputs (a NumPy
BERT written from google-research/bert's modeling.py is the reference), a pushed SavedModel's encoder carries
over, and what does not fit is refused naming what differs."""

import dataclasses
import math
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import encoder, presets, warm_start

LENGTH = 8


def gelu(x):  # modeling.py's gelu: the tanh approximation
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def bert_pooled(ckpt, ids, mask, layers, heads):
    """modeling.py's BertModel.pooled_output for one segment (token_type_ids 0), from a {name: array}."""
    x = ckpt["bert/embeddings/word_embeddings"][ids]
    x = x + ckpt["bert/embeddings/token_type_embeddings"][0]
    x = x + ckpt["bert/embeddings/position_embeddings"][: ids.shape[1]]
    x = layer_norm(x, ckpt["bert/embeddings/LayerNorm/gamma"], ckpt["bert/embeddings/LayerNorm/beta"])
    batch, length, hidden = x.shape
    size = hidden // heads
    adder = (1.0 - mask[:, None, None, :]) * -10000.0  # create_attention_mask_from_input_mask, then the adder
    for i in range(layers):
        p = f"bert/encoder/layer_{i}/"

        def dense(t, name, p=p):
            return t @ ckpt[p + name + "/kernel"] + ckpt[p + name + "/bias"]

        def split(t):
            return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (split(dense(x, f"attention/self/{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        attention = layer_norm(
            dense(context, "attention/output/dense") + x,
            ckpt[p + "attention/output/LayerNorm/gamma"],
            ckpt[p + "attention/output/LayerNorm/beta"],
        )
        out = dense(gelu(dense(attention, "intermediate/dense")), "output/dense")
        x = layer_norm(out + attention, ckpt[p + "output/LayerNorm/gamma"], ckpt[p + "output/LayerNorm/beta"])
    return np.tanh(x[:, 0] @ ckpt["bert/pooler/dense/kernel"] + ckpt["bert/pooler/dense/bias"])


def bert_checkpoint_values(layers, hidden, vocab, positions=512, seed=0):
    """Random weights under every name of a google-research/bert checkpoint of this size (scaled so layer
    norms and attention do real work)."""
    rng = np.random.default_rng(seed)
    values = {
        "bert/embeddings/word_embeddings": rng.normal(0, 0.5, (vocab, hidden)),
        "bert/embeddings/token_type_embeddings": rng.normal(0, 0.5, (2, hidden)),
        "bert/embeddings/position_embeddings": rng.normal(0, 0.5, (positions, hidden)),
        "bert/pooler/dense/kernel": rng.normal(0, 0.2, (hidden, hidden)),
        "bert/pooler/dense/bias": rng.normal(0, 0.2, (hidden,)),
    }
    for scope in ["bert/embeddings/LayerNorm"] + [
        f"bert/encoder/layer_{i}/{n}" for i in range(layers) for n in ("attention/output/LayerNorm", "output/LayerNorm")
    ]:
        values[scope + "/gamma"] = rng.normal(1, 0.1, (hidden,))
        values[scope + "/beta"] = rng.normal(0, 0.1, (hidden,))
    shapes = {
        "attention/self/query": (hidden, hidden),
        "attention/self/key": (hidden, hidden),
        "attention/self/value": (hidden, hidden),
        "attention/output/dense": (hidden, hidden),
        "intermediate/dense": (hidden, 4 * hidden),
        "output/dense": (4 * hidden, hidden),
    }
    for i in range(layers):
        for name, shape in shapes.items():
            values[f"bert/encoder/layer_{i}/{name}/kernel"] = rng.normal(0, 1 / math.sqrt(shape[0]), shape)
            values[f"bert/encoder/layer_{i}/{name}/bias"] = rng.normal(0, 0.1, shape[1:])
    # Optimizer slots and the step, as google-research/bert's checkpoints also hold them.
    values["bert/embeddings/word_embeddings/adam_m"] = np.zeros((vocab, hidden))
    values["global_step"] = np.array(1000, np.int64)
    return {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in values.items()}


def write_name_based_checkpoint(prefix, values):
    """A TF1 name-based checkpoint (V2 format, as tf.compat.v1.train.Saver writes google-research/bert's)."""
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=[values[n] for n in names]
    )
    return prefix


def encoder_model(preset, vocab, name="text_xf"):
    ids = keras.Input((LENGTH,), dtype="int64")
    mask = keras.Input((LENGTH,), dtype="int64")
    spec = presets.PRESETS[preset].encoder
    return keras.Model([ids, mask], encoder.transformer_encoder(ids, mask, vocab, spec, 0.1, name))


@pytest.fixture(scope="module")
def bert_tiny(tmp_path_factory):
    values = bert_checkpoint_values(layers=2, hidden=128, vocab=50)
    prefix = write_name_based_checkpoint(str(tmp_path_factory.mktemp("bert") / "bert_model.ckpt"), values)
    return prefix, values


def test_a_google_bert_checkpoint_gives_berts_own_pooled_output(bert_tiny):
    prefix, values = bert_tiny
    pretrained = warm_start.locate(prefix)
    assert (pretrained.kind, pretrained.layers, pretrained.hidden, pretrained.vocab_size) == ("bert", 2, 128, 50)
    assert (pretrained.intermediate, pretrained.max_positions) == (512, 512)
    model = encoder_model("bert-tiny", 50)
    loaded = warm_start.initialise(model, pretrained, ["text_xf"])
    assert loaded == {"text_xf": model.count_params()}  # every variable of the encoder
    ids = np.array([[2, 17, 30, 41, 3, 0, 0, 0], [2, 5, 6, 7, 8, 9, 10, 3]])
    mask = (ids != 0).astype(np.int64)
    expected = bert_pooled(values, ids, mask.astype(np.float32), layers=2, heads=2)
    np.testing.assert_allclose(model([ids, mask], training=False).numpy(), expected, atol=2e-5)


def test_a_checkpoint_folder_reads_its_latest_checkpoint(bert_tiny, tmp_path):
    prefix, values = bert_tiny
    folder = tmp_path / "run"
    folder.mkdir()
    write_name_based_checkpoint(str(folder / "model.ckpt-20"), values)
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-20"\n')
    assert warm_start.locate(str(folder)).prefix == str(folder / "model.ckpt-20")


def test_a_checkpoint_of_another_size_or_vocabulary_is_refused_naming_the_fit(bert_tiny):
    pretrained = warm_start.locate(bert_tiny[0])
    with pytest.raises(
        warm_start.CheckpointError,
        match=r"holds 2 layers, 128 wide .* bert-mini is 4 layers, "
        r"256 wide .*: use --model-preset bert-tiny",
    ):
        warm_start.check(pretrained, "bert-mini", 50, 128)
    with pytest.raises(warm_start.CheckpointError, match="set text_vocab_file"):
        warm_start.check(pretrained, "bert-tiny", None, 128)
    with pytest.raises(warm_start.CheckpointError, match="hold 50 word pieces, text_vocab_file has 30,522"):
        warm_start.check(pretrained, "bert-tiny", 30522, 128)
    with pytest.raises(warm_start.CheckpointError, match="sequence_length 513 is over the 512 positions"):
        warm_start.check(pretrained, "bert-tiny", 50, 513)
    short = dataclasses.replace(pretrained, max_positions=128)
    with pytest.raises(warm_start.CheckpointError, match="has 128 positions, the bert-tiny encoder 512"):
        warm_start.check(short, "bert-tiny", 50, 64)
    with pytest.raises(warm_start.CheckpointError, match="no Transformer encoder"):
        warm_start.check(pretrained, "default", 50, 128)
    warm_start.check(pretrained, "bert-tiny", 50, 128)
    with pytest.raises(
        warm_start.CheckpointError, match=r"'tokens/embeddings' is \[50, 128\], the model's \[60, 128\]"
    ):
        warm_start.initialise(encoder_model("bert-tiny", 60), pretrained, ["text_xf"])


def test_what_is_not_a_bert_checkpoint_is_refused_naming_the_path(tmp_path):
    with pytest.raises(warm_start.CheckpointError, match="neither a SavedModel folder"):
        warm_start.locate(str(tmp_path))
    keras_checkpoint = tf.train.Checkpoint(model=encoder_model("bert-tiny", 20)).write(str(tmp_path / "keras"))
    with pytest.raises(warm_start.CheckpointError, match="not a BERT checkpoint in Google's names"):
        warm_start.locate(keras_checkpoint)


def test_a_pushed_saved_models_encoder_carries_over_to_another_column(tmp_path):
    keras.utils.set_random_seed(3)
    trained = encoder_model("bert-tiny", 40, name="review_xf")
    # Trained with AdamW, as the Trainer's models are: its slots ("AdamW/m/review_xf_block_0/...") are saved too.
    trained.compile(optimizer=keras.optimizers.AdamW(1e-3), loss="mse")
    ids = np.array([[2, 9, 12, 3, 0, 0, 0, 0]] * 4)
    mask = (ids != 0).astype(np.int64)
    trained.fit([ids, mask], np.zeros((4, 128)), epochs=1, verbose=0)
    module = tf.Module()
    module.model = trained
    module.vocabulary = tf.saved_model.Asset(str(_write(tmp_path / "review_wordpiece", "[PAD]\n[UNK]\nword\n")))
    tf.saved_model.save(module, str(tmp_path / "pushed"))
    pretrained = warm_start.locate(str(tmp_path / "pushed"))
    assert pretrained.kind == "saved_model"
    found = warm_start.encoders(pretrained)
    assert sorted(found) == ["review_xf"] and len(found["review_xf"]) == len(trained.variables)
    assert warm_start.source_of(pretrained, found, "body_xf") == "review_xf"  # its only encoder

    fresh = encoder_model("bert-tiny", 40, name="body_xf")
    warm_start.initialise(fresh, pretrained, ["body_xf"], found)
    np.testing.assert_allclose(fresh([ids, mask]).numpy(), trained([ids, mask]).numpy(), atol=1e-6)

    warm_start.check_vocabulary(pretrained, "review_wordpiece", str(tmp_path / "review_wordpiece"))
    other = _write(tmp_path / "other", "[PAD]\n[UNK]\nother\n")
    with pytest.raises(warm_start.CheckpointError, match="its vocabulary differs .* set text_vocab_file"):
        warm_start.check_vocabulary(pretrained, "review_wordpiece", str(other))
    with pytest.raises(warm_start.CheckpointError, match="no vocabulary asset 'body_wordpiece'"):
        warm_start.check_vocabulary(pretrained, "body_wordpiece", str(other))
    two = {"review_xf": found["review_xf"], "title_xf": found["review_xf"]}
    with pytest.raises(warm_start.CheckpointError, match=r"has encoders of \['review_xf', 'title_xf'\], none of"):
        warm_start.source_of(pretrained, two, "body_xf")


def _write(path, text):
    path.write_text(text)
    return path


def test_a_saved_model_without_an_encoder_is_refused(tmp_path):
    module = tf.Module()
    module.v = tf.Variable(1.0, name="deep_0/kernel")
    tf.saved_model.save(module, str(tmp_path / "tabular"))
    with pytest.raises(warm_start.CheckpointError, match="has no Transformer encoder"):
        warm_start.initialise(encoder_model("bert-tiny", 20), warm_start.locate(str(tmp_path / "tabular")), ["x"])
    assert os.path.isdir(tmp_path / "tabular")
