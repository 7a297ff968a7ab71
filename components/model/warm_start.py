"""Warm start of the built-in Transformer encoder (`--init-checkpoint`) from pretrained weights: Google's BERT
checkpoints (the TF checkpoints of google-research/bert: BERT-Base, -Large and the miniatures bert-tiny to
bert-medium, variables named `bert/encoder/layer_0/attention/self/query/kernel` and so on), or a SavedModel this
pipeline exported (a pushed model of an earlier run). Only the encoder's weights are taken; the task's head and
the other columns' layers start fresh.

The encoder's variables are named by the text input and a part that does not depend on it (`<input>_block_0/
qkv/kernel:0`): those parts are what a checkpoint is matched by. BERT's separate query, key and value kernels
are one `qkv` kernel here (concatenated in that order, heads in BERT's order), and its token-type embedding of
the first segment, added to every position, is folded into the position table."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfxflow.components.model.presets import PRESETS, Encoder

BERT_WORDS = "bert/embeddings/word_embeddings"
BERT = "bert"
SAVED_MODEL = "saved_model"

# <input>_<part>/<variable>:0, the names encoder.transformer_encoder gives. An input's name holds no "/": an
# optimizer's slot of the same variable ("AdamW/m/<input>_block_0/...") is not one.
_ENCODER_VARIABLE = re.compile(
    r"^(?P<input>[^/]+?)_(?P<part>tokens|positions|embedding_norm|block_\d+|pooled)/(?P<rest>.+):0$"
)


class CheckpointError(ValueError):
    """A checkpoint that cannot initialise the model: the message names the path and what does not match."""


@dataclasses.dataclass(frozen=True)
class Pretrained:
    """Where pretrained weights are and what they hold: `kind` BERT (a TF checkpoint in Google's names, `prefix`
    its prefix, with the encoder's size read from its shapes) or SAVED_MODEL (`prefix` the folder)."""

    path: str
    kind: str
    prefix: str
    layers: int = 0
    hidden: int = 0
    intermediate: int = 0
    vocab_size: int = 0
    max_positions: int = 0

    def describe(self) -> str:
        if self.kind == SAVED_MODEL:
            return f"the SavedModel {self.path}"
        return (
            f"a BERT checkpoint of {self.layers} layers, {self.hidden} wide, {self.vocab_size:,} word pieces "
            f"({self.path})"
        )


def locate(path: str) -> Pretrained:
    """What `path` holds: a SavedModel folder, a checkpoint folder (its `checkpoint` file names the latest) or
    a checkpoint prefix (`<prefix>.index` beside it). Raises CheckpointError naming the path otherwise."""
    gfile = tf.io.gfile
    if gfile.isdir(path) and gfile.exists(os.path.join(path, "saved_model.pb")):
        return Pretrained(path, SAVED_MODEL, path)
    prefix = tf.train.latest_checkpoint(path) if gfile.isdir(path) else path
    if not prefix or not gfile.exists(prefix + ".index"):
        raise CheckpointError(
            f"--init-checkpoint {path}: neither a SavedModel folder (saved_model.pb) nor a TF checkpoint (a folder "
            "with a 'checkpoint' file, or a prefix with '<prefix>.index' beside it)"
        )
    try:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as err:
        raise CheckpointError(f"--init-checkpoint {path}: the checkpoint does not read: {err}") from err
    if BERT_WORDS not in shapes:
        some = ", ".join(sorted(shapes)[:3])
        raise CheckpointError(
            f"--init-checkpoint {path}: not a BERT checkpoint in Google's names (no '{BERT_WORDS}'; it holds "
            f"{some}, ...): give one of google-research/bert's checkpoints or a SavedModel this pipeline pushed"
        )
    layers = {int(m.group(1)) for k in shapes if (m := re.match(r"bert/encoder/layer_(\d+)/", k))}
    if layers != set(range(len(layers))):
        raise CheckpointError(f"--init-checkpoint {path}: encoder layers {sorted(layers)} are not numbered 0 to N-1")
    vocab_size, hidden = shapes[BERT_WORDS]
    return Pretrained(
        path,
        BERT,
        prefix,
        layers=len(layers),
        hidden=int(hidden),
        intermediate=int(shapes.get("bert/encoder/layer_0/intermediate/dense/kernel", [0, 0])[1]),
        vocab_size=int(vocab_size),
        max_positions=int(shapes.get("bert/embeddings/position_embeddings", [0])[0]),
    )


def preset_of(layers: int, hidden: int) -> Optional[str]:
    """The preset of an encoder of this size, if any."""
    for name, preset in PRESETS.items():
        if preset.encoder is not None and (preset.encoder.layers, preset.encoder.hidden) == (layers, hidden):
            return name
    return None


def check(pretrained: Pretrained, preset: str, vocabulary_size: Optional[int], sequence_length: int) -> None:
    """Raises CheckpointError when a BERT checkpoint cannot initialise `preset`'s encoder: another size, a
    vocabulary (`vocabulary_size`, the given vocab.txt's lines; None: a vocabulary learned from the data) of
    other word pieces, or positions fewer than `sequence_length`."""
    if pretrained.kind != BERT:
        return
    spec: Optional[Encoder] = PRESETS[preset].encoder
    where = f"--init-checkpoint {pretrained.path}"
    if spec is None:
        raise CheckpointError(f"{where}: --model-preset {preset} has no Transformer encoder; pick a bert-* preset")
    size = (pretrained.layers, pretrained.hidden, pretrained.intermediate)
    if size != (spec.layers, spec.hidden, spec.intermediate):
        match = preset_of(pretrained.layers, pretrained.hidden)
        hint = f": use --model-preset {match}" if match else ""
        raise CheckpointError(
            f"{where}: holds {pretrained.layers} layers, {pretrained.hidden} wide (feed-forward "
            f"{pretrained.intermediate}); --model-preset {preset} is {spec.layers} layers, {spec.hidden} wide "
            f"(feed-forward {spec.intermediate}){hint}"
        )
    if vocabulary_size is None:
        raise CheckpointError(
            f"{where}: its word embeddings are indexed by the model's own vocab.txt; set text_vocab_file in the "
            "feature config to that file (a vocabulary learned from the data numbers word pieces otherwise)"
        )
    if vocabulary_size != pretrained.vocab_size:
        raise CheckpointError(
            f"{where}: its word embeddings hold {pretrained.vocab_size:,} word pieces, text_vocab_file has "
            f"{vocabulary_size:,}: give the vocab.txt that came with the checkpoint"
        )
    if pretrained.max_positions and pretrained.max_positions != spec.max_positions:
        raise CheckpointError(
            f"{where}: has {pretrained.max_positions} positions, the {preset} encoder {spec.max_positions}"
        )
    if sequence_length > spec.max_positions:
        raise CheckpointError(f"{where}: sequence_length {sequence_length} is over the {spec.max_positions} positions")


def locate_fitting(path: str, preset: str, vocab_file: Optional[str], sequence_length: int) -> Pretrained:
    """locate(path), then check() it against `preset`, the feature config's `text_vocab_file` (None: a learned
    vocabulary) and `sequence_length`: what the run's edge and the Trainer both ask before any weight is read."""
    from tfxflow.components.model import text

    pretrained = locate(path)
    check(pretrained, preset, len(text.read_vocabulary(vocab_file)) if vocab_file else None, sequence_length)
    return pretrained


def bert_weights(pretrained: Pretrained) -> Dict[str, np.ndarray]:
    """A BERT checkpoint's encoder as {part/variable: value}, in this encoder's names and layout."""
    reader = tf.train.load_checkpoint(pretrained.prefix)
    keys = set(reader.get_variable_to_shape_map())

    def get(name: str) -> np.ndarray:
        if name not in keys:
            raise CheckpointError(f"--init-checkpoint {pretrained.path}: has no variable '{name}'")
        return reader.get_tensor(name)

    positions = get("bert/embeddings/position_embeddings")
    if "bert/embeddings/token_type_embeddings" in keys:  # every token is of the first segment
        positions = positions + get("bert/embeddings/token_type_embeddings")[0]
    weights = {
        "tokens/embeddings": get(BERT_WORDS),
        "positions/embeddings": positions,
        "embedding_norm/gamma": get("bert/embeddings/LayerNorm/gamma"),
        "embedding_norm/beta": get("bert/embeddings/LayerNorm/beta"),
        "pooled/kernel": get("bert/pooler/dense/kernel"),
        "pooled/bias": get("bert/pooler/dense/bias"),
    }
    parts = {
        "attention_output": "attention/output/dense",
        "attention_norm": "attention/output/LayerNorm",
        "up": "intermediate/dense",
        "down": "output/dense",
        "output_norm": "output/LayerNorm",
    }
    for i in range(pretrained.layers):
        layer = f"bert/encoder/layer_{i}"
        for variable, axis in (("kernel", 1), ("bias", 0)):
            weights[f"block_{i}/qkv/{variable}"] = np.concatenate(
                [get(f"{layer}/attention/self/{part}/{variable}") for part in ("query", "key", "value")], axis=axis
            )
        for ours, theirs in parts.items():
            names_ = ("gamma", "beta") if ours.endswith("norm") else ("kernel", "bias")
            for variable in names_:
                weights[f"block_{i}/{ours}/{variable}"] = get(f"{layer}/{theirs}/{variable}")
    return weights


def saved_model_weights(pretrained: Pretrained) -> Dict[str, Dict[str, np.ndarray]]:
    """The encoders of a SavedModel this pipeline exported, by text input: {input: {part/variable: value}}."""
    from tfxflow.components.model import text

    text.load_ops_for(pretrained.prefix)
    loaded = tf.saved_model.load(pretrained.prefix)
    found: Dict[str, Dict[str, np.ndarray]] = {}
    for item in tf.train.TrackableView(loaded).descendants():
        if isinstance(item, tf.Variable):
            match = _ENCODER_VARIABLE.match(item.name)
            if match:
                found.setdefault(match["input"], {})[f"{match['part']}/{match['rest']}"] = item.numpy()
    if not found:
        raise CheckpointError(
            f"--init-checkpoint {pretrained.path}: the SavedModel has no Transformer encoder (trained with a bert-* "
            "preset)"
        )
    return found


def check_vocabulary(pretrained: Pretrained, asset: str, vocabulary_path: str) -> None:
    """Raises CheckpointError unless the SavedModel's vocabulary asset `asset` holds the same word pieces as
    `vocabulary_path` (this run's Transform asset): a token's id must mean the same word piece in both."""
    if pretrained.kind != SAVED_MODEL:
        return
    theirs = os.path.join(pretrained.prefix, "assets", asset)
    if not tf.io.gfile.exists(theirs):
        raise CheckpointError(f"--init-checkpoint {pretrained.path}: has no vocabulary asset '{asset}'")
    with tf.io.gfile.GFile(theirs, "rb") as a, tf.io.gfile.GFile(vocabulary_path, "rb") as b:
        same = a.read() == b.read()
    if not same:
        raise CheckpointError(
            f"--init-checkpoint {pretrained.path}: its vocabulary differs from this run's (learned from other "
            f"data): set text_vocab_file in the feature config to {theirs}"
        )


def encoders(pretrained: Pretrained) -> Dict[str, Dict[str, np.ndarray]]:
    """The pretrained encoders by the text input they were trained on ({"": ...} for a BERT checkpoint, which
    fits any input): {input: {part/variable: value}}."""
    return {"": bert_weights(pretrained)} if pretrained.kind == BERT else saved_model_weights(pretrained)


def source_of(pretrained: Pretrained, found: Mapping[str, Dict[str, np.ndarray]], name: str) -> str:
    """Which of `found` (encoders()) initialises the encoder of input `name`: the one of the same input, else
    the only one; raises CheckpointError when neither."""
    if name in found:
        return name
    if len(found) == 1:
        return next(iter(found))
    raise CheckpointError(f"--init-checkpoint {pretrained.path}: has encoders of {sorted(found)}, none of '{name}'")


def initialise(
    model, pretrained: Pretrained, text_inputs: Sequence[str], found: Optional[Mapping[str, Dict]] = None
) -> Dict[str, int]:
    """Assigns the pretrained encoder's weights (`found`, default: encoders()) to the encoder of each of
    `text_inputs` (source_of); returns the values loaded per input. Raises CheckpointError naming a variable
    that is missing or of another shape, before assigning any."""
    found = encoders(pretrained) if found is None else found
    plans = []
    for name in text_inputs:
        source = found[source_of(pretrained, found, name)]
        prefix = f"{name}_"
        variables = {
            v.name[len(prefix) : -len(":0")]: v
            for v in model.variables
            if v.name.startswith(prefix) and _ENCODER_VARIABLE.match(v.name)
        }
        if not variables:
            raise CheckpointError(f"--init-checkpoint: the model has no Transformer encoder for '{name}'")
        problems: List[str] = []
        for key, variable in variables.items():
            value = source.get(key)
            if value is None:
                problems.append(f"'{key}' is missing")
            elif tuple(value.shape) != tuple(variable.shape):
                problems.append(f"'{key}' is {list(value.shape)}, the model's {list(variable.shape)}")
        if problems:
            raise CheckpointError(
                f"--init-checkpoint {pretrained.path}: does not fit the encoder of '{name}': " + "; ".join(problems[:5])
            )
        plans.append((name, source, variables))
    loaded = {}
    for name, source, variables in plans:
        for key, variable in variables.items():
            variable.assign(source[key].astype(variable.dtype.as_numpy_dtype))
        loaded[name] = int(sum(np.prod(v.shape) for v in variables.values()))
    return loaded
