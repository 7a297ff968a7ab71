"""What each encoder family tells the Hugging Face reader (`Family`), and the helpers its layouts share: PyTorch's
[out, in] matrices transposed, layer norms by weight/bias or gamma/beta, and BERT's block of query, key and value
(one `qkv` kernel) with its post-layer-norm sublayers."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Mapping, Sequence, Tuple

import numpy as np

from tfxflow.components.model import presets
from tfxflow.components.model.checkpoints.files import Values
from tfxflow.components.model.checkpoints.layout import Getter
from tfxflow.components.model.presets import Encoder

# Hugging Face's names of the feed-forward activation: "gelu" is the exact GELU, the others its tanh approximation.
HF_ACTIVATIONS = {
    "gelu": presets.GELU_ERF,
    "gelu_new": presets.GELU_TANH,
    "gelu_pytorch_tanh": presets.GELU_TANH,
    "gelu_fast": presets.GELU_TANH,
    "relu": presets.RELU,
}
Has = Callable[[str], bool]
# (config.json, the shape of each tensor by its name without the family's prefix) -> the architecture.
Architecture = Callable[[Values, Mapping[str, Sequence[int]]], Encoder]
# (a getter of the tensors by name, whether one is there, the architecture, pooler weights?) -> this layout.
Layout = Callable[[Getter, Has, Encoder, bool], Dict[str, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Family:
    """A Hugging Face encoder family: its config.json `model_type`, a display `title`, the `prefix` of the base
    model's weights in a task model's file ("distilbert." in DistilBertForMaskedLM's), the name of block i's
    weights (`layer`, a format string of i), the config keys of the hidden, attention and classifier dropout, the
    kind of its tokenizer (tokenization.KINDS), and functions of its config (`architecture`) and weights
    (`layout`)."""

    model_type: str
    title: str
    prefix: str
    layer: str
    architecture: Architecture
    layout: Layout
    tokenizer: str
    dropout_keys: Tuple[str, str, str] = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
    layers_key: str = "num_hidden_layers"


def norm(get: Getter, has: Has, name: str) -> Tuple[np.ndarray, np.ndarray]:
    """A layer norm's (gamma, beta): newer checkpoints say weight/bias, old ones gamma/beta."""
    if has(f"{name}.weight"):
        return get(f"{name}.weight"), get(f"{name}.bias")
    return get(f"{name}.gamma"), get(f"{name}.beta")


def dense(get: Getter, name: str) -> Tuple[np.ndarray, np.ndarray]:
    """A Linear's (kernel [in, out], bias): PyTorch holds [out, in]."""
    return np.transpose(get(f"{name}.weight")), get(f"{name}.bias")


def bert_block(get: Getter, has: Has, layer: str, block: str, names: Mapping[str, str]) -> Dict[str, np.ndarray]:
    """One post-layer-norm block in this layout, its sublayers' names in the file given by `names`: query, key,
    value, attention_output, attention_norm, up, down, output_norm."""
    parts = [dense(get, f"{layer}.{names[p]}") for p in ("query", "key", "value")]
    weights = {
        f"{block}/qkv/kernel": np.concatenate([k for k, _ in parts], axis=1),
        f"{block}/qkv/bias": np.concatenate([b for _, b in parts], axis=0),
    }
    for ours in ("attention_output", "up", "down"):
        weights[f"{block}/{ours}/kernel"], weights[f"{block}/{ours}/bias"] = dense(get, f"{layer}.{names[ours]}")
    for ours in ("attention_norm", "output_norm"):
        weights[f"{block}/{ours}/gamma"], weights[f"{block}/{ours}/beta"] = norm(get, has, f"{layer}.{names[ours]}")
    return weights


def embeddings(get: Getter, has: Has, positions: np.ndarray) -> Dict[str, np.ndarray]:
    """The embeddings in this layout, `positions` the rows the encoder's positions 0, 1, ... take; the first
    segment's token-type embedding (every token is of the first segment) folded into them."""
    if has("embeddings.token_type_embeddings.weight"):
        positions = positions + get("embeddings.token_type_embeddings.weight")[0]
    gamma, beta = norm(get, has, "embeddings.LayerNorm")
    return {
        "tokens/embeddings": get("embeddings.word_embeddings.weight"),
        "positions/embeddings": positions,
        "embedding_norm/gamma": gamma,
        "embedding_norm/beta": beta,
    }


BERT_NAMES = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "up": "intermediate.dense",
    "down": "output.dense",
    "output_norm": "output.LayerNorm",
}


def bert_encoder(get: Getter, has: Has, encoder: Encoder, pooler: bool, positions: np.ndarray):
    """BertModel's embeddings, blocks (`encoder.layer.N`) and pooler in this layout (RoBERTa's and ELECTRA's are
    named as BERT's)."""
    weights = embeddings(get, has, positions)
    for i in range(encoder.layers):
        weights.update(bert_block(get, has, f"encoder.layer.{i}", f"block_{i}", BERT_NAMES))
    if pooler:
        weights["pooled/kernel"], weights["pooled/bias"] = dense(get, "pooler.dense")
    return weights
