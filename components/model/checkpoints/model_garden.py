"""Model Garden's BertEncoder in a TF2 checkpoint (official/nlp/tools/tf2_bert_encoder_checkpoint_converter.py:
`encoder/layer_with_weights-N/...`): recognised by its names, its per-head kernels flattened into this layout.
The checkpoint itself is read as any TF checkpoint (tf_checkpoint.py)."""

from __future__ import annotations

import re
from typing import Dict, Sequence

import numpy as np

from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.files import given
from tfxflow.components.model.checkpoints.layout import Getter

_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def model_garden_layout(
    get: Getter, names: Sequence[str], layers: int, pooler: bool, path: str = ""
) -> Dict[str, np.ndarray]:
    """Model Garden's BertEncoder, saved object by object: `<root>/layer_with_weights-K/...`, K in the order the
    encoder makes its layers (word, position and type embeddings, the embeddings' layer norm, the blocks, the
    pooler). Its attention kernels are per head ([hidden, heads, size]; the output's [heads, size, hidden])."""
    root = _model_garden_root(names)
    indexes = sorted(
        {int(m.group(1)) for n in names if (m := re.match(re.escape(root) + r"layer_with_weights-(\d+)/", n))}
    )

    def var(k: int, rest: str) -> np.ndarray:
        return get(f"{root}layer_with_weights-{k}/{rest}{_VALUE}")

    blocks = [
        k for k in indexes if f"{root}layer_with_weights-{k}/_attention_layer/_query_dense/kernel{_VALUE}" in names
    ]
    # Before the blocks: the word and position embeddings, the token-type table (when the encoder has one), the
    # embeddings' layer norm.
    embedding = [k for k in indexes if not blocks or k < blocks[0]]
    if len(embedding) not in (3, 4):
        raise CheckpointError(
            f"{given(path)}: the Model Garden encoder has {len(embedding)} layers before its first block, not the "
            "word, position and token-type embeddings and a layer norm"
        )
    word, position, norm = embedding[0], embedding[1], embedding[-1]
    positions = var(position, "embeddings")
    if len(embedding) == 4:  # every token is of the first segment
        positions = positions + var(embedding[2], "embeddings")[0]
    weights = {
        "tokens/embeddings": var(word, "embeddings"),
        "positions/embeddings": positions,
        "embedding_norm/gamma": var(norm, "gamma"),
        "embedding_norm/beta": var(norm, "beta"),
    }

    def flat_in(kernel: np.ndarray) -> np.ndarray:  # [hidden, heads, size] -> [hidden, heads x size]
        return kernel.reshape(kernel.shape[0], -1)

    for i, k in enumerate(blocks[:layers]):
        attention = "_attention_layer/"
        q, k_, v = (var(k, f"{attention}_{p}_dense/kernel") for p in ("query", "key", "value"))
        weights[f"block_{i}/qkv/kernel"] = np.concatenate([flat_in(q), flat_in(k_), flat_in(v)], axis=1)
        weights[f"block_{i}/qkv/bias"] = np.concatenate(
            [var(k, f"{attention}_{p}_dense/bias").reshape(-1) for p in ("query", "key", "value")]
        )
        out = var(k, f"{attention}_output_dense/kernel")
        weights[f"block_{i}/attention_output/kernel"] = out.reshape(-1, out.shape[-1])
        weights[f"block_{i}/attention_output/bias"] = var(k, f"{attention}_output_dense/bias")
        for ours, theirs in (("up", "_intermediate_dense"), ("down", "_output_dense")):
            weights[f"block_{i}/{ours}/kernel"] = var(k, f"{theirs}/kernel")
            weights[f"block_{i}/{ours}/bias"] = var(k, f"{theirs}/bias")
        for ours, theirs in (("attention_norm", "_attention_layer_norm"), ("output_norm", "_output_layer_norm")):
            weights[f"block_{i}/{ours}/gamma"] = var(k, f"{theirs}/gamma")
            weights[f"block_{i}/{ours}/beta"] = var(k, f"{theirs}/beta")
    if pooler:
        last = blocks[-1] + 1 if blocks else 0
        weights["pooled/kernel"] = var(last, "kernel")
        weights["pooled/bias"] = var(last, "bias")
    return weights


def _model_garden_root(names: Sequence[str]) -> str:
    """The object path of the encoder ("encoder/", "model/", "model/encoder/" ...): what precedes the first
    block's `layer_with_weights-K/_attention_layer/`."""
    for name in sorted(names):
        match = re.match(r"^(.*?)layer_with_weights-\d+/_attention_layer/_query_dense/kernel" + re.escape(_VALUE), name)
        if match:
            return match.group(1)
    return ""


def is_model_garden(names: Sequence[str]) -> bool:
    return any(n.endswith("_attention_layer/_query_dense/kernel" + _VALUE) for n in names)


def model_garden_has_pooler(names: Sequence[str]) -> bool:
    root = _model_garden_root(names)
    blocks = [
        int(m.group(1))
        for n in names
        if (m := re.match(re.escape(root) + r"layer_with_weights-(\d+)/_attention_layer/_query_dense/kernel", n))
    ]
    return bool(blocks) and f"{root}layer_with_weights-{max(blocks) + 1}/kernel{_VALUE}" in set(names)


def model_garden_blocks(names: Sequence[str]) -> int:
    """The Transformer blocks a Model Garden checkpoint holds."""
    return sum(1 for n in names if n.endswith("_attention_layer/_query_dense/kernel" + _VALUE))
