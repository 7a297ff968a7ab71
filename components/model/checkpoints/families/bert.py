"""BERT's family (`model_type` bert): BertModel and every checkpoint of its layout (BERT, its miniatures, MiniLM,
bge, e5, gte and others), weights under `bert.` in a task model's file."""

from __future__ import annotations

from typing import Mapping, Sequence

from tfxflow.components.model import tokenization
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.families.family import HF_ACTIVATIONS, Family, bert_encoder
from tfxflow.components.model.checkpoints.files import Values, given
from tfxflow.components.model.checkpoints.layout import encoder_of
from tfxflow.components.model.presets import Encoder


def check_absolute_positions(config: Values) -> None:
    positions = config.text("position_embedding_type", "absolute")
    if positions != "absolute":
        raise CheckpointError(
            f"{given(config.path)}: config.json's position_embedding_type is {positions!r}; only learned absolute "
            "positions are built here"
        )


def activation(config: Values, key: str, default: str) -> str:
    act = config.text(key, default)
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{given(config.path)}: config.json's {key} {act!r} is none of {sorted(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[act]


def architecture(config: Values, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    check_absolute_positions(config)
    return encoder_of(config, activation(config, "hidden_act", "gelu"), "layer_norm_eps")


def layout(get, has, encoder: Encoder, pooler: bool):
    return bert_encoder(get, has, encoder, pooler, get("embeddings.position_embeddings.weight"))


FAMILY = Family(
    model_type="bert",
    title="BERT",
    prefix="bert.",
    layer="encoder.layer.{}.",
    architecture=architecture,
    layout=layout,
    tokenizer=tokenization.WORDPIECE,
)
