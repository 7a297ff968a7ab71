"""The checkpoint a text model's encoders start from (`--init-checkpoint`): located again from a local copy,
its weights loaded into the encoders, and what the run records of it and of the encoders it trained."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Dict, Mapping, Optional, Sequence

import tf_keras as keras
from absl import logging

from tfxflow.components import memory
from tfxflow.components.model import checkpoints, warm_start
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import keras_model as model_lib


def pretrained_checkpoint(model_params: model_lib.ModelParams, scratch: str) -> checkpoints.Checkpoint:
    """The checkpoint --init-checkpoint names, as a local copy (from an object store, into `scratch`), located
    again: its architecture must be what the run was configured with (`model_params.pretrained`)."""
    given = (
        checkpoints.Checkpoint.from_dict(model_params.pretrained)
        if model_params.pretrained
        else checkpoints.locate(model_params.init_checkpoint)
    )
    if not checkpoints.unchanged(given):  # Transform's vocabulary was read from the files as they were
        raise checkpoints.CheckpointError(
            f"--init-checkpoint {given.path}: its files changed since the run was configured (or the pipeline "
            "compiled): run (or compile) again"
        )
    local = checkpoints.locate(checkpoints.local_copy(given, os.path.join(scratch, "init_checkpoint")))
    if (local.encoder, local.vocab_size, local.has_pooler) != (given.encoder, given.vocab_size, given.has_pooler):
        raise checkpoints.CheckpointError(
            f"--init-checkpoint {given.path}: it changed since the run was configured: it is now "
            f"{local.encoder.describe()} over {local.vocab_size:,} word pieces, it was {given.encoder.describe()} "
            f"over {given.vocab_size:,}"
        )
    return local


def warm_start_encoder(
    model: keras.Model, checkpoint: checkpoints.Checkpoint, inputs: Sequence[model_lib.ModelInput]
) -> Dict[str, Any]:
    """Initialises each text input's encoder from the checkpoint's weights, then gives the checkpoint's arrays
    and the random initial values they replaced back to the system before training (a MiniLM-sized encoder's
    training peak is lower by what they held in the heap); what it loaded."""
    started = time.perf_counter()
    weights = checkpoints.weights(checkpoint)
    loaded = warm_start.initialise(model, checkpoint, weights, [i.name for i in inputs if i.kind == "text"])
    del weights
    memory.give_back_free_memory()
    logging.info("Trainer: encoder weights from %s: %s", checkpoint.describe(), loaded)
    return {"init_checkpoint_values": sum(loaded.values()), "init_checkpoint_load_s": time.perf_counter() - started}


def fine_tuning_record(model_params: model_lib.ModelParams, checkpoint: checkpoints.Checkpoint) -> Dict[str, Any]:
    """What training_info.json (and so MLflow's params and the run page) says of the checkpoint and the recipe:
    flat values."""
    encoder = checkpoint.encoder
    tokenization = checkpoint.tokenization
    return {
        "init_checkpoint_kind": checkpoint.kind,
        "init_checkpoint_name": checkpoint.name,
        "init_checkpoint_parameters": checkpoint.parameters,
        "init_checkpoint_family": checkpoint.family or "bert",  # a Hugging Face folder's model_type
        "encoder_layers": encoder.layers,
        "encoder_hidden": encoder.hidden,
        "encoder_heads": encoder.heads,
        "encoder_intermediate": encoder.intermediate,
        "encoder_activation": encoder.activation,
        "encoder_positions": encoder.max_positions,
        "encoder_embedding_size": encoder.embedding_width,
        "pooling": model_params.encoder_pooling,
        "lower_case": tokenization.lower_case,
        "tokenizer_kind": tokenization.kind,
        "tokenizer": tokenization.describe(),
    }


def encoder_records(
    model_params: model_lib.ModelParams,
    config: features_lib.FeatureConfig,
    checkpoint: Optional[checkpoints.Checkpoint],
    info: Mapping[str, Any],
) -> Dict[str, Any]:
    """{text input: what a later run needs to start an encoder from this model's} (export.model_info)."""
    encoder = model_params.encoder
    if encoder is None or not config.text:
        return {}
    vocabulary = info.get("text_vocabulary") or {}
    return {
        config.transformed_name(column): {
            "encoder": encoder.to_dict(),
            "vocab_size": int(vocabulary.get(config.transformed_name(column), 0)),
            "tokenization": dataclasses.asdict(config.tokenization),
            "pooling": model_params.encoder_pooling,
            "dropout": model_params.dropout,
            "checkpoint": checkpoint.name if checkpoint is not None else "",
        }
        for column in config.text
    }
