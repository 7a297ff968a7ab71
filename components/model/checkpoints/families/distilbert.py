"""DistilBERT (`model_type` distilbert): BERT's post-layer-norm blocks under other names (`transformer.layer.N`:
q_lin, k_lin, v_lin, out_lin, sa_layer_norm, ffn.lin1, ffn.lin2, output_layer_norm), no token types, no pooler,
layer norms of epsilon 1e-12 (modeling_distilbert.py's, which config.json does not state), weights under
`distilbert.` in a task model's file. Sinusoidal positions (`sinusoidal_pos_embds`) are refused."""

from __future__ import annotations

from typing import Mapping, Sequence

from tfxflow.components.model import tokenization
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.families.bert import activation
from tfxflow.components.model.checkpoints.families.family import Family, bert_block, embeddings
from tfxflow.components.model.checkpoints.files import Values, given
from tfxflow.components.model.presets import Encoder

LAYER_NORM_EPSILON = 1e-12  # modeling_distilbert.py's nn.LayerNorm(config.dim, eps=1e-12)
NAMES = {
    "query": "attention.q_lin",
    "key": "attention.k_lin",
    "value": "attention.v_lin",
    "attention_output": "attention.out_lin",
    "attention_norm": "sa_layer_norm",
    "up": "ffn.lin1",
    "down": "ffn.lin2",
    "output_norm": "output_layer_norm",
}


def architecture(config: Values, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    if config.flag("sinusoidal_pos_embds", False):
        raise CheckpointError(
            f"{given(config.path)}: config.json's sinusoidal_pos_embds is true: fixed sinusoidal positions, and "
            "this encoder's positions are learned"
        )
    try:
        return Encoder(
            layers=config.int("n_layers"),
            hidden=config.int("dim"),
            heads=config.int("n_heads"),
            intermediate=config.int("hidden_dim"),
            max_positions=config.int("max_position_embeddings", 512),
            activation=activation(config, "activation", "gelu"),
            layer_norm_epsilon=LAYER_NORM_EPSILON,
        )
    except ValueError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{given(config.path)}: config.json: {err}") from err


def layout(get, has, encoder: Encoder, pooler: bool):
    weights = embeddings(get, has, get("embeddings.position_embeddings.weight"))
    for i in range(encoder.layers):
        weights.update(bert_block(get, has, f"transformer.layer.{i}", f"block_{i}", NAMES))
    return weights


FAMILY = Family(
    model_type="distilbert",
    title="DistilBERT",
    prefix="distilbert.",
    layer="transformer.layer.{}.",
    architecture=architecture,
    layout=layout,
    tokenizer=tokenization.WORDPIECE,
    dropout_keys=("dropout", "attention_dropout", "seq_classif_dropout"),
    layers_key="n_layers",
)
