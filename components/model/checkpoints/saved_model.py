"""A SavedModel this pipeline pushed, as a checkpoint: a text model's encoder, its vocabulary asset and
tokenization, from the model's record (assets.extra/tfxflow_model.json), else (an older push) from its
variables."""

from __future__ import annotations

import posixpath
from typing import Dict, Tuple

import numpy as np

from tfxflow.components import names as names_lib
from tfxflow.components import object_store
from tfxflow.components.model import presets
from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.checkpoints.description import SAVED_MODEL, Checkpoint, CheckpointError
from tfxflow.components.model.checkpoints.files import Values, exists, fingerprint_of, given, join, read_json
from tfxflow.components.model.checkpoints.layout import ENCODER_VARIABLE, encoder_shapes
from tfxflow.components.model.checkpoints.vocabulary import casing, check_vocabulary_rows, read_tokens
from tfxflow.components.model.presets import Encoder


def locate_saved_model(path: str) -> Checkpoint:
    """A pushed text model: its encoders' record (assets.extra/tfxflow_model.json, `encoders`), else, for a
    model exported before the record held them, the architecture of the bert-* preset of its sizes (read by
    loading it: from a local path only)."""
    from tfxflow.components.model import text  # imports TensorFlow

    info = names_lib.MODEL_INFO_FILE
    record = Values(path, info, read_json(path, join(path, info)) if exists(join(path, info)) else {})
    encoders = record.mapping("encoders").data
    if len(encoders) > 1:
        listed = ", ".join(sorted(encoders))
        raise CheckpointError(
            f"{given(path)}: the SavedModel has encoders of several text columns ({listed}); a run starts one "
            "encoder from it"
        )
    if encoders:
        ((name, data),) = encoders.items()
        entry = record.mapping("encoders").mapping(name)
        try:
            encoder = Encoder.from_dict(entry.mapping("encoder").data)
            tokenization = tokenization_lib.Tokenization(**entry.mapping("tokenization").data)
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{given(path)}: {info}'s encoder of {name} does not read: {err}") from err
        if tokenization.kind != tokenization_lib.WORDPIECE:
            # Its assets hold the tokenizer's pieces, not the files (vocab.json, tokenizer.json's settings) the
            # Transform graph's subword tokenizers are made from.
            raise CheckpointError(
                f"{given(path)}: the pushed model's encoder of {name} tokenizes with "
                f"{tokenization_lib.KIND_NAMES[tokenization.kind]}, and a pushed model is read as a checkpoint with "
                "WordPiece only: give the Hugging Face folder it was fine-tuned from"
            )
        vocab_size = entry.int("vocab_size")
        pooling = entry.text("pooling", presets.POOLER)
        if pooling not in presets.POOLINGS:
            raise CheckpointError(f"{given(path)}: {info}'s pooling {pooling!r} is none of {presets.POOLINGS}")
        dropout = entry.rate("dropout", 0.1)
        casing_from = f"the pushed model's record ({info})"
    else:
        if object_store.is_remote(path):
            raise CheckpointError(
                f"{given(path)}: a SavedModel without an encoder record in {info} (pushed by an earlier version) "
                "is read from a local copy only: copy its folder here and give that path"
            )
        name, encoder, vocab_size = _saved_model_shapes(path)
        pooling, dropout, casing_from = presets.POOLER, 0.1, ""
    column = name[: -len("_xf")] if name.endswith("_xf") else name
    vocab_file = join(join(path, "assets"), text.asset_name(column))
    if not exists(vocab_file):
        raise CheckpointError(f"{given(path)}: the SavedModel has no vocabulary asset assets/{text.asset_name(column)}")
    tokens = read_tokens(path, vocab_file)
    check_vocabulary_rows(path, len(tokens), vocab_size)
    if not encoders:  # its casing from its vocabulary
        lower_case, casing_from = casing(path, tokens, None, "")
        tokenization = tokenization_lib.Tokenization(lower_case=lower_case)
    has_pooler = pooling == presets.POOLER
    return Checkpoint(
        path=path,
        kind=SAVED_MODEL,
        name=posixpath.basename(path.rstrip("/")) or path,
        encoder=encoder,
        vocab_size=vocab_size,
        vocab_file=vocab_file,
        tokenization=tokenization,
        casing_from=casing_from,
        pooling=pooling,
        pooling_from="the pushed model's pooling",
        has_pooler=has_pooler,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        head_dropout=dropout,
        weights=path,
        parameters=int(sum(np.prod(s) for s in encoder_shapes(encoder, vocab_size, has_pooler).values())),
        fingerprint=fingerprint_of(path, [join(path, "saved_model.pb"), vocab_file]),
        files=(path,),
        encoder_input=name,
    )


def _saved_model_shapes(path: str) -> Tuple[str, Encoder, int]:
    """(input, architecture, vocabulary rows) of a pushed model's only encoder, from its variables' shapes."""
    found = _saved_model_variables(path)
    if len(found) != 1:
        raise CheckpointError(
            f"{given(path)}: the SavedModel has encoders of {sorted(found)}; a run starts one encoder from it"
        )
    ((name, variables),) = found.items()
    needed = ("tokens/embeddings", "positions/embeddings", "block_0/up/kernel")
    if any(key not in variables for key in needed):
        raise CheckpointError(f"{given(path)}: the SavedModel's encoder of {name} lacks some of {list(needed)}")
    vocab_size, hidden = variables["tokens/embeddings"].shape
    layers = len({k.split("/")[0] for k in variables if k.startswith("block_")})
    try:
        encoder = Encoder(
            layers=layers,
            hidden=int(hidden),
            heads=max(1, int(hidden) // 64),
            intermediate=int(variables["block_0/up/kernel"].shape[1]),
            max_positions=int(variables["positions/embeddings"].shape[0]),
        )
    except ValueError as err:
        raise CheckpointError(f"{given(path)}: the SavedModel's encoder of {name}: {err}") from err
    return name, encoder, int(vocab_size)


def _saved_model_variables(path: str) -> Dict[str, Dict[str, np.ndarray]]:
    import tensorflow as tf

    from tfxflow.components.model import text as text_lib  # imports TensorFlow

    try:
        text_lib.load_ops_for(path)
        loaded = tf.saved_model.load(path)
    except (OSError, tf.errors.OpError, ValueError) as err:
        raise CheckpointError(f"{given(path)}: the SavedModel does not load: {err}") from err
    found: Dict[str, Dict[str, np.ndarray]] = {}
    for item in tf.train.TrackableView(loaded).descendants():
        if isinstance(item, tf.Variable):
            match = ENCODER_VARIABLE.match(item.name)
            if match:
                found.setdefault(match["input"], {})[f"{match['part']}/{match['rest']}"] = item.numpy()
    if not found:
        raise CheckpointError(
            f"{given(path)}: the SavedModel has no Transformer encoder (a text model trained with a bert-* preset "
            "or a checkpoint)"
        )
    return found


def saved_model_weights(checkpoint: Checkpoint) -> Dict[str, np.ndarray]:
    """The weights of a located SavedModel's encoder (the one of `encoder_input`), loaded from a local disk."""
    found = _saved_model_variables(checkpoint.weights)
    return found.get(checkpoint.encoder_input) or next(iter(found.values()))
