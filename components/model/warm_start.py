"""Warm start of the built-in Transformer encoder (`--init-checkpoint`) from a pretrained checkpoint, which
components/model/checkpoints/ locates and reads: what must agree with the run's settings before any work (the
architecture a preset names, the positions a sequence needs, the vocabulary and the casing the feature config
says), and the assignment of its weights to the encoder of each text column.

The encoder's variables are named by the text input and a part that does not depend on it (`<input>_block_0/
qkv/kernel:0`): those parts are what a checkpoint's weights are matched by."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from tfxflow.components.model import presets, tokenization
from tfxflow.components.model.checkpoints import ENCODER_VARIABLE, Checkpoint, CheckpointError


def preset_of(encoder: presets.Encoder) -> Optional[str]:
    """The bert-* preset of this architecture, if any."""
    for name, preset in presets.PRESETS.items():
        spec = preset.encoder
        if spec is not None and (spec.layers, spec.hidden, spec.heads, spec.intermediate) == (
            encoder.layers,
            encoder.hidden,
            encoder.heads,
            encoder.intermediate,
        ):
            return name
    return None


def check_preset(checkpoint: Checkpoint, preset: Optional[str]) -> None:
    """A --model-preset given with a checkpoint must be its architecture (the preset's own activation aside):
    raises naming both otherwise."""
    if preset is None:
        return
    spec = presets.PRESETS[preset].encoder
    where = f"--init-checkpoint {checkpoint.path}"
    if spec is None:
        raise CheckpointError(
            f"{where}: --model-preset {preset} has no Transformer; leave --model-preset out to take the "
            f"checkpoint's own architecture ({checkpoint.encoder.describe()})"
        )
    mine = (spec.layers, spec.hidden, spec.heads, spec.intermediate)
    theirs = checkpoint.encoder
    if mine != (theirs.layers, theirs.hidden, theirs.heads, theirs.intermediate):
        raise CheckpointError(
            f"{where}: the checkpoint is {theirs.describe()}; --model-preset {preset} is {spec.describe()}: leave "
            "--model-preset out to take the checkpoint's architecture"
        )


def check_pooling(checkpoint: Checkpoint, pooling: Optional[str]) -> None:
    """BERT's pooler needs the checkpoint's pooler weights: refused naming the poolings it has otherwise."""
    if pooling == presets.POOLER and not checkpoint.has_pooler:
        raise CheckpointError(
            f"--init-checkpoint {checkpoint.path}: --pooling pooler, and the checkpoint has no pooler weights: use "
            f"--pooling mean or cls (its own: {checkpoint.pooling})"
        )


def check_sequence_length(checkpoint: Checkpoint, sequence_length: int) -> None:
    if sequence_length > checkpoint.encoder.max_positions:
        raise CheckpointError(
            f"--init-checkpoint {checkpoint.path}: sequence_length {sequence_length} is over the checkpoint's "
            f"{checkpoint.encoder.max_positions} positions"
        )


def check_tokenizer(checkpoint: Checkpoint) -> None:
    """The checkpoint's tokenizer must be of a kind the Transform graph tokenizes (tokenization.TRANSFORM_KINDS):
    word ids of another tokenizer would index the wrong embeddings."""
    kind = checkpoint.tokenization.kind
    if kind not in tokenization.TRANSFORM_KINDS:
        graph = ", ".join(tokenization.KIND_NAMES[k] for k in tokenization.TRANSFORM_KINDS)
        raise CheckpointError(
            f"--init-checkpoint {checkpoint.path}: its tokenizer is {tokenization.KIND_NAMES[kind]} "
            f"({checkpoint.vocab_file}), and the Transform graph tokenizes {graph} only: this checkpoint's "
            "encoder loads, its tokenizer does not yet"
        )


# The feature config's tokenization knobs and the checkpoint's value of each.
def _tokenizer_values(checkpoint: Checkpoint) -> Dict[str, Any]:
    tokenization = checkpoint.tokenization
    return {
        "lower_case": tokenization.lower_case,
        "strip_accents": tokenization.accents_stripped,
        "tokenizer": tokenization.rules,
        "max_chars_per_word": tokenization.max_chars,
    }


def tokenizer_knobs(checkpoint: Checkpoint, knobs: Mapping[str, Any], source: str) -> Dict[str, Any]:
    """The feature config's tokenization knobs (lower_case, strip_accents, tokenizer, max_chars_per_word; None:
    unset) with the checkpoint's filling the unset ones. A knob set otherwise than the checkpoint's tokenizer
    is refused (Google's validate_case_matches_checkpoint): an uncased model fed cased text, or the reverse,
    sees word pieces it was not trained on. A tokenizer the Transform graph does not make is refused."""
    check_tokenizer(checkpoint)
    theirs = _tokenizer_values(checkpoint)
    resolved = dict(theirs)
    resolved["strip_accents"] = checkpoint.tokenization.strip_accents
    resolved["max_chars_per_word"] = checkpoint.tokenization.max_chars_per_word
    for key, value in knobs.items():
        if value is None:
            continue
        if value != theirs[key]:
            why = f" (from {checkpoint.casing_from})" if key == "lower_case" else ""
            raise CheckpointError(
                f"{source}: {key}: {value!r}, and the checkpoint {checkpoint.path} is tokenized with "
                f"{key}: {theirs[key]!r}{why}: leave {key} out of the feature config to take the checkpoint's"
            )
        resolved[key] = value
    return resolved


def check_vocabulary_file(checkpoint: Checkpoint, vocab_file: str, source: str) -> None:
    """A feature config's text_vocab_file must hold the checkpoint's own word pieces, line for line: its word
    embeddings are indexed by them."""
    # lazy: it imports TensorFlow
    from tfxflow.components.model import text

    check_tokenizer(checkpoint)
    if not vocab_file or vocab_file == checkpoint.vocab_file:
        return
    if checkpoint.tokenization.kind != tokenization.WORDPIECE:
        raise CheckpointError(
            f"{source}: text_vocab_file {vocab_file}: the checkpoint's tokenizer is "
            f"{tokenization.KIND_NAMES[checkpoint.tokenization.kind]} ({checkpoint.vocab_file}), whose files come "
            "with it: leave text_vocab_file out"
        )
    mine, theirs = text.read_vocabulary(vocab_file), text.read_vocabulary(checkpoint.vocab_file)
    if mine != theirs:
        pairs = zip(mine, theirs, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(mine), len(theirs)))
        raise CheckpointError(
            f"{source}: text_vocab_file {vocab_file} ({len(mine):,} word pieces) is not the checkpoint's "
            f"{checkpoint.vocab_file} ({len(theirs):,}; they differ from line {first + 1:,}): leave text_vocab_file "
            "out to take the checkpoint's"
        )


def encoder_variables(model, name: str) -> Dict[str, Any]:
    """The variables of the encoder of text input `name`, by their part of the name ("block_0/qkv/kernel")."""
    prefix = f"{name}_"
    return {
        v.name[len(prefix) : -len(":0")]: v
        for v in model.variables
        if v.name.startswith(prefix) and ENCODER_VARIABLE.match(v.name)
    }


def initialise(model, checkpoint: Checkpoint, weights: Mapping[str, np.ndarray], text_inputs: Sequence[str]):
    """Assigns the checkpoint's `weights` (checkpoints.weights) to the encoder of each of `text_inputs`; returns
    the values loaded per input. Raises CheckpointError naming a variable that is missing or of another shape,
    before assigning any."""
    plans = []
    for name in text_inputs:
        variables = encoder_variables(model, name)
        if not variables:
            raise CheckpointError(
                f"--init-checkpoint {checkpoint.path}: the model has no Transformer encoder for '{name}'"
            )
        problems = []
        for key, variable in variables.items():
            value = weights.get(key)
            if value is None:
                problems.append(f"'{key}' is missing")
            elif tuple(value.shape) != tuple(variable.shape):
                problems.append(f"'{key}' is {list(value.shape)}, the model's {list(variable.shape)}")
        if problems:
            raise CheckpointError(
                f"--init-checkpoint {checkpoint.path}: does not fit the encoder of '{name}': " + "; ".join(problems[:5])
            )
        plans.append((name, variables))
    loaded = {}
    for name, variables in plans:
        for key, variable in variables.items():
            variable.assign(weights[key].astype(variable.dtype.as_numpy_dtype))
        loaded[name] = int(sum(np.prod(v.shape) for v in variables.values()))
    return loaded
