"""Warm start from a pretrained checkpoint: a checkpoint in Google's BERT names gives BERT's own pooled output
(a NumPy BERT of google-research/bert's modeling.py, with its tanh GELU, is the reference here; Hugging Face's
BertModel is in checkpoints/test_hugging_face.py), and what does not fit the run's settings is refused naming
both sides."""

import math
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import checkpoints, encoder, presets, warm_start
from tfxflow.components.model.checkpoints import CheckpointError

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
    folder = tmp_path_factory.mktemp("bert") / "uncased_L-2_H-128_A-2"
    folder.mkdir()
    prefix = write_name_based_checkpoint(str(folder / "bert_model.ckpt"), values)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    return prefix, values


def test_a_google_bert_checkpoint_gives_berts_own_pooled_output(bert_tiny):
    prefix, values = bert_tiny
    found = checkpoints.locate(prefix)
    # No bert_config.json beside it: its sizes from its shapes, heads of 64 units, BERT's tanh GELU.
    assert (found.kind, found.encoder, found.vocab_size) == ("bert", presets.PRESETS["bert-tiny"].encoder, 50)
    model = encoder_model("bert-tiny", 50)
    loaded = warm_start.initialise(model, found, checkpoints.weights(found), ["text_xf"])
    assert loaded == {"text_xf": model.count_params()}  # every variable of the encoder
    ids = np.array([[2, 17, 30, 41, 3, 0, 0, 0], [2, 5, 6, 7, 8, 9, 10, 3]])
    mask = (ids != 0).astype(np.int64)
    expected = bert_pooled(values, ids, mask.astype(np.float32), layers=2, heads=2)
    np.testing.assert_allclose(model([ids, mask], training=False).numpy(), expected, atol=2e-5)


def test_a_checkpoint_folder_reads_its_latest_checkpoint(bert_tiny, tmp_path):
    prefix, values = bert_tiny
    folder = tmp_path / "run"
    folder.mkdir()
    write_name_based_checkpoint(str(folder / "model.ckpt-10"), values)
    write_name_based_checkpoint(str(folder / "model.ckpt-20"), values)
    (folder / "vocab.txt").write_text(open(os.path.join(os.path.dirname(prefix), "vocab.txt")).read())
    with pytest.raises(CheckpointError, match=r"several TF checkpoints \(model.ckpt-10, model.ckpt-20\) and no"):
        checkpoints.locate(str(folder))
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-20"\n')
    assert checkpoints.locate(str(folder)).weights == str(folder / "model.ckpt-20")


def test_a_preset_given_with_a_checkpoint_must_be_its_architecture(bert_tiny):
    found = checkpoints.locate(bert_tiny[0])
    warm_start.check_preset(found, None)
    warm_start.check_preset(found, "bert-tiny")
    assert warm_start.preset_of(found.encoder) == "bert-tiny"
    with pytest.raises(
        CheckpointError,
        match=r"the checkpoint is 2 layers, 128 wide, 2 heads of 64, feed-forward 512 \(gelu_tanh\); --model-preset "
        r"bert-mini is 4 layers, 256 wide, 4 heads of 64, feed-forward 1,024 \(gelu_tanh\): leave --model-preset out",
    ):
        warm_start.check_preset(found, "bert-mini")
    with pytest.raises(CheckpointError, match="--model-preset default has no Transformer; leave --model-preset out"):
        warm_start.check_preset(found, "default")
    warm_start.check_sequence_length(found, 512)
    with pytest.raises(CheckpointError, match="sequence_length 513 is over the checkpoint's 512 positions"):
        warm_start.check_sequence_length(found, 513)


def test_the_feature_configs_tokenization_must_be_the_checkpoints(bert_tiny, tmp_path):
    found = checkpoints.locate(bert_tiny[0])  # uncased by its release name, google-research/bert's rules
    unset = {"lower_case": None, "strip_accents": None, "tokenizer": None, "max_chars_per_word": None}
    resolved = warm_start.tokenizer_knobs(found, unset, "features.yaml")
    assert resolved == {"lower_case": True, "strip_accents": None, "tokenizer": "google", "max_chars_per_word": None}
    assert warm_start.tokenizer_knobs(found, {**unset, "lower_case": True}, "features.yaml") == resolved
    with pytest.raises(
        CheckpointError,
        match=r"features.yaml: lower_case: False, and the checkpoint .* is tokenized with lower_case: True \(from the "
        r"release name uncased_L-2_H-128_A-2\): leave lower_case out of the feature config",
    ):
        warm_start.tokenizer_knobs(found, {**unset, "lower_case": False}, "features.yaml")
    with pytest.raises(CheckpointError, match="tokenizer: 'huggingface', and the checkpoint .* tokenizer: 'google'"):
        warm_start.tokenizer_knobs(found, {**unset, "tokenizer": "huggingface"}, "features.yaml")
    with pytest.raises(CheckpointError, match="max_chars_per_word: 100, .* with max_chars_per_word: 200"):
        warm_start.tokenizer_knobs(found, {**unset, "max_chars_per_word": 100}, "features.yaml")
    # A vocabulary file must be the checkpoint's own, line for line.
    warm_start.check_vocabulary_file(found, found.vocab_file, "features.yaml")
    same = tmp_path / "same.txt"
    same.write_text(open(found.vocab_file).read())
    warm_start.check_vocabulary_file(found, str(same), "features.yaml")
    other = tmp_path / "other.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nw0\nw2\n")
    with pytest.raises(CheckpointError, match=r"is not the checkpoint's .* \(50; they differ from line 7\)"):
        warm_start.check_vocabulary_file(found, str(other), "features.yaml")


def test_weights_that_do_not_fit_the_model_are_refused_before_any_is_assigned(bert_tiny):
    found = checkpoints.locate(bert_tiny[0])
    weights = checkpoints.weights(found)
    model = encoder_model("bert-tiny", 60)
    before = [v.numpy().copy() for v in model.variables]
    with pytest.raises(CheckpointError, match=r"'tokens/embeddings' is \[50, 128\], the model's \[60, 128\]"):
        warm_start.initialise(model, found, weights, ["text_xf"])
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables, strict=True))
    with pytest.raises(CheckpointError, match="the model has no Transformer encoder for 'title_xf'"):
        warm_start.initialise(model, found, weights, ["title_xf"])
    partial = {k: v for k, v in weights.items() if k != "block_1/up/bias"}
    with pytest.raises(CheckpointError, match="'block_1/up/bias' is missing"):
        warm_start.initialise(encoder_model("bert-tiny", 50), found, partial, ["text_xf"])


def test_berts_pooler_needs_the_checkpoints_pooler_weights(bert_tiny, tmp_path):
    import dataclasses

    found = checkpoints.locate(bert_tiny[0])
    warm_start.check_pooling(found, "pooler")  # Google's checkpoints hold it
    warm_start.check_pooling(found, "mean")
    without = dataclasses.replace(found, has_pooler=False, pooling="cls")
    with pytest.raises(CheckpointError, match="--pooling pooler, and the checkpoint has no pooler weights: use"):
        warm_start.check_pooling(without, "pooler")
    warm_start.check_pooling(without, None)  # its own pooling
