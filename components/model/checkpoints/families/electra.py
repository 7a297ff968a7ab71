"""ELECTRA's discriminator (`model_type` electra): BERT's layout, weights under `electra.`, no pooler; where
config.json's embedding_size is not hidden_size (ELECTRA-Small), embeddings of that width projected to the hidden
width after their layer norm (`embeddings_project`, encoder.py's embedding projection). A generator checkpoint
(ElectraForMaskedLM: the small masked language model ELECTRA trains beside the discriminator) is refused."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tfxflow.components.model import tokenization
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.families.bert import activation, check_absolute_positions
from tfxflow.components.model.checkpoints.families.family import Family, bert_encoder, dense
from tfxflow.components.model.checkpoints.files import Values, given
from tfxflow.components.model.checkpoints.layout import encoder_of
from tfxflow.components.model.presets import Encoder

GENERATOR_WEIGHTS = ("generator_predictions.dense.weight", "generator_lm_head.weight")


def architecture(config: Values, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    architectures = config.data.get("architectures") or []
    generator = [w for w in GENERATOR_WEIGHTS if w in shapes]
    if "ElectraForMaskedLM" in architectures or generator:
        why = f"its weights hold {generator[0]}" if generator else "config.json's architectures is ElectraForMaskedLM"
        raise CheckpointError(
            f"{given(config.path)}: an ELECTRA generator ({why}): the generator is the small masked language model "
            "ELECTRA trains beside its discriminator; give the discriminator (e.g. google/electra-small-"
            "discriminator), the encoder ELECTRA fine-tunes"
        )
    check_absolute_positions(config)
    hidden = config.int("hidden_size")
    width = config.int("embedding_size", hidden)
    without = Values(config.path, config.where, {k: v for k, v in config.data.items() if k != "embedding_size"})
    encoder = encoder_of(without, activation(config, "hidden_act", "gelu"), "layer_norm_eps")
    if width == hidden:
        return encoder
    try:
        return Encoder(**{**encoder.to_dict(), "embedding_size": width})
    except ValueError as err:
        raise CheckpointError(f"{given(config.path)}: config.json: {err}") from err


def layout(get, has, encoder: Encoder, pooler: bool):
    weights = bert_encoder(get, has, encoder, False, get("embeddings.position_embeddings.weight"))
    if encoder.embedding_size is not None:
        kernel, bias = dense(get, "embeddings_project")
        weights["embedding_projection/kernel"], weights["embedding_projection/bias"] = np.asarray(kernel), bias
    return weights


FAMILY = Family(
    model_type="electra",
    title="ELECTRA",
    prefix="electra.",
    layer="encoder.layer.{}.",
    architecture=architecture,
    layout=layout,
    tokenizer=tokenization.WORDPIECE,
)
