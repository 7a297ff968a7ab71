"""TF checkpoints: a Google BERT release (google-research/bert's zips: `bert_config.json`,
`bert_model.ckpt.{index,data-*}`, `vocab.txt`), as its folder or its checkpoint prefix, and Model Garden's
BertEncoder (model_garden.py), with its `bert_config.json` and `vocab.txt`. The index is read first (its shapes
checked against the config, its data files against the bytes it lists); the tensors only for the weights."""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from tfxflow.components import object_store
from tfxflow.components.model import presets
from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.checkpoints.description import GOOGLE_BERT, MODEL_GARDEN, Checkpoint, CheckpointError
from tfxflow.components.model.checkpoints.files import (
    Values,
    fingerprint_of,
    given,
    join,
    list_names,
    read_json,
    split,
    stat,
)
from tfxflow.components.model.checkpoints.layout import (
    Getter,
    check_shapes,
    encoder_of,
    encoder_shapes,
    parameter_count,
    shaped,
    tensor_getter,
)
from tfxflow.components.model.checkpoints.model_garden import (
    is_model_garden,
    model_garden_blocks,
    model_garden_has_pooler,
    model_garden_layout,
)
from tfxflow.components.model.checkpoints.vocabulary import (
    casing,
    check_vocabulary_rows,
    read_tokens,
    release_casing,
)
from tfxflow.components.model.presets import Encoder

# google-research/bert's modeling.py and Model Garden's tf_utils.get_activation: "gelu" is the tanh approximation.
GOOGLE_ACTIVATIONS = {"gelu": presets.GELU_TANH, "relu": presets.RELU}


def _checkpoint_index(path: str, prefix: str) -> Tuple[Dict[str, List[int]], Dict[str, Any], List[str]]:
    """(shapes, dtypes, data files) of a TF checkpoint, from its index (copied first from a store TF cannot
    read); raises naming a data file that is missing or shorter than the tensors it holds."""
    import tensorflow as tf

    folder, base = split(prefix)
    data_files = [join(folder, n) for n in list_names(path, folder) if n.startswith(base + ".data-")]
    with tempfile.TemporaryDirectory() as scratch:
        index = prefix + ".index"
        if object_store.tf_cannot_read(prefix):
            local = os.path.join(scratch, base)
            try:
                object_store.download(index, local + ".index")
            except (OSError, object_store.ObjectStoreError) as err:
                raise CheckpointError(f"{given(path)}: cannot read {index}: {err}") from err
        else:
            local = prefix
        try:
            reader = tf.train.load_checkpoint(local)
            shapes = reader.get_variable_to_shape_map()
            dtypes = reader.get_variable_to_dtype_map()
        except (tf.errors.OpError, ValueError) as err:
            raise CheckpointError(f"{given(path)}: the checkpoint's index {index} does not read: {err}") from err
    expected = re.match(r".*\.data-\d+-of-(\d+)$", data_files[0]) if data_files else None
    if not data_files or (expected and len(data_files) != int(expected.group(1))):
        raise CheckpointError(
            f"{given(path)}: {prefix}.data-* files are missing beside {index} (found {len(data_files)})"
        )
    held = sum(
        int(np.prod(shapes[name])) * dtypes[name].size
        for name in shapes
        if dtypes[name] != tf.string and dtypes[name].size
    )
    size = sum(stat(path, uri)[0] for uri in data_files)
    if size < held:
        raise CheckpointError(
            f"{given(path)}: {prefix}.data-* hold {size:,} bytes and the index lists {held:,} bytes of tensors: "
            "a truncated copy"
        )
    return shapes, dtypes, data_files


def locate_tf_checkpoint(path: str, prefix: str) -> Checkpoint:
    folder, base = split(prefix)
    names = set(list_names(path, folder))
    shapes, _, data_files = _checkpoint_index(path, prefix)
    model_garden = is_model_garden(list(shapes))
    if not model_garden and "bert/embeddings/word_embeddings" not in shapes:
        some = ", ".join(sorted(shapes)[:3])
        raise CheckpointError(
            f"{given(path)}: a TF checkpoint of neither Google's BERT names (no 'bert/embeddings/word_embeddings') "
            f"nor Model Garden's BertEncoder; it holds {some}, ..."
        )
    kind = MODEL_GARDEN if model_garden else GOOGLE_BERT
    config_name = next((n for n in ("bert_config.json", "config.json") if n in names), "")
    if config_name:
        config = Values(path, config_name, read_json(path, join(folder, config_name)))
        act = config.text("hidden_act", "gelu")
        if act not in GOOGLE_ACTIVATIONS:
            raise CheckpointError(
                f"{given(path)}: {config_name}'s hidden_act {act!r} is none of {sorted(GOOGLE_ACTIVATIONS)}"
            )
        encoder = encoder_of(config, GOOGLE_ACTIVATIONS[act], "layer_norm_eps")
    elif kind == GOOGLE_BERT:
        encoder, config = _encoder_from_google_shapes(path, shapes), Values(path, "", {})
    else:
        raise CheckpointError(f"{given(path)}: a Model Garden checkpoint needs its bert_config.json beside it")
    get, has = shaped(shapes, path, f"{base}.index")
    if kind == MODEL_GARDEN:
        pooler = model_garden_has_pooler(list(shapes))
        mapped = model_garden_layout(get, list(shapes), encoder.layers, pooler, path)
        blocks = model_garden_blocks(list(shapes))
    else:
        pooler = "bert/pooler/dense/kernel" in shapes
        mapped = _google_layout(get, has, encoder.layers, pooler)
        blocks = len({m.group(1) for k in shapes if (m := re.match(r"bert/encoder/layer_(\d+)/", k))})
    if blocks != encoder.layers:
        raise CheckpointError(
            f"{given(path)}: the checkpoint holds {blocks} layers, {config_name or 'its config'} says {encoder.layers}"
        )
    vocab_size = int(mapped["tokens/embeddings"].shape[0])
    stated = config.int("vocab_size", None)
    if stated not in (None, vocab_size):
        raise CheckpointError(
            f"{given(path)}: {config_name} says vocab_size {stated:,}, the word embeddings hold {vocab_size:,} rows"
        )
    check_shapes(path, mapped, encoder_shapes(encoder, vocab_size, pooler), f"{base}.index")
    if "vocab.txt" not in names:
        raise CheckpointError(
            f"{given(path)}: has no vocab.txt beside {base}.index (Google's releases ship it in the same folder)"
        )
    vocab_file = join(folder, "vocab.txt")
    tokens = read_tokens(path, vocab_file)
    check_vocabulary_rows(path, len(tokens), vocab_size)
    release = posixpath.basename(folder.rstrip("/")) if "://" in folder else os.path.basename(os.path.abspath(folder))
    said = release_casing(release)
    lower_case, casing_from = casing(path, tokens, said, f"the release name {release}")
    dropout = config.rate("hidden_dropout_prob", 0.1)
    made_of = data_files + [prefix + ".index", vocab_file] + ([join(folder, config_name)] if config_name else [])
    return Checkpoint(
        path=path,
        kind=kind,
        name=release or base,
        encoder=encoder,
        vocab_size=vocab_size,
        vocab_file=vocab_file,
        tokenization=tokenization_lib.Tokenization(
            lower_case=lower_case,
            rules=tokenization_lib.GOOGLE,
            max_chars_per_word=tokenization_lib.MODEL_GARDEN_MAX_CHARS_PER_WORD if kind == MODEL_GARDEN else None,
        ),
        casing_from=casing_from,
        pooling=presets.POOLER if pooler else presets.CLS,
        pooling_from="its pooler weights" if pooler else "no pooler: [CLS]",
        has_pooler=pooler,
        hidden_dropout=dropout,
        attention_dropout=config.rate("attention_probs_dropout_prob", 0.1),
        head_dropout=dropout,
        weights=prefix,
        parameters=parameter_count(mapped),
        fingerprint=fingerprint_of(path, made_of),
        files=tuple(made_of),
    )


def _encoder_from_google_shapes(path: str, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    """A Google checkpoint without its bert_config.json: the sizes from its shapes, heads of 64 (BERT's)."""
    layers = len({m.group(1) for k in shapes if (m := re.match(r"bert/encoder/layer_(\d+)/", k))})
    _, hidden = shapes["bert/embeddings/word_embeddings"]
    if hidden % 64 or not layers:
        raise CheckpointError(
            f"{given(path)}: no bert_config.json beside it, and its shapes ({layers} layers, {hidden} wide) do not "
            "tell its architecture: put the release's bert_config.json next to the checkpoint"
        )
    return Encoder(
        layers=layers,
        hidden=int(hidden),
        heads=int(hidden) // 64,
        intermediate=int(shapes.get("bert/encoder/layer_0/intermediate/dense/kernel", [0, 4 * hidden])[1]),
        max_positions=int(shapes.get("bert/embeddings/position_embeddings", [512])[0]),
        activation=presets.GELU_TANH,
    )


def _google_layout(get: Getter, has: Callable[[str], bool], layers: int, pooler: bool) -> Dict[str, np.ndarray]:
    """google-research/bert's TF1 names (`bert/encoder/layer_0/attention/self/query/kernel`) in this layout."""
    positions = get("bert/embeddings/position_embeddings")
    if has("bert/embeddings/token_type_embeddings"):
        positions = positions + get("bert/embeddings/token_type_embeddings")[0]
    weights = {
        "tokens/embeddings": get("bert/embeddings/word_embeddings"),
        "positions/embeddings": positions,
        "embedding_norm/gamma": get("bert/embeddings/LayerNorm/gamma"),
        "embedding_norm/beta": get("bert/embeddings/LayerNorm/beta"),
    }
    parts = {
        "attention_output": "attention/output/dense",
        "attention_norm": "attention/output/LayerNorm",
        "up": "intermediate/dense",
        "down": "output/dense",
        "output_norm": "output/LayerNorm",
    }
    for i in range(layers):
        layer = f"bert/encoder/layer_{i}"
        for variable, axis in (("kernel", 1), ("bias", 0)):
            weights[f"block_{i}/qkv/{variable}"] = np.concatenate(
                [get(f"{layer}/attention/self/{p}/{variable}") for p in ("query", "key", "value")], axis=axis
            )
        for ours, theirs in parts.items():
            for variable in ("gamma", "beta") if ours.endswith("norm") else ("kernel", "bias"):
                weights[f"block_{i}/{ours}/{variable}"] = get(f"{layer}/{theirs}/{variable}")
    if pooler:
        weights["pooled/kernel"] = get("bert/pooler/dense/kernel")
        weights["pooled/bias"] = get("bert/pooler/dense/bias")
    return weights


class _LazyTensors(dict):
    """A TF checkpoint's tensors by name, each read when first asked for."""

    def __init__(self, reader, names: Sequence[str]):
        super().__init__()
        self._reader, self._names = reader, set(names)

    def __contains__(self, name) -> bool:
        return name in self._names

    def __missing__(self, name: str) -> np.ndarray:
        value = self._reader.get_tensor(name)
        self[name] = value
        return value


def tf_checkpoint_weights(checkpoint: Checkpoint) -> Dict[str, np.ndarray]:
    """The weights of a located TF checkpoint (Google's BERT or Model Garden's) on a local disk, in this
    project's layout; each tensor read when the layout asks for it."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint.weights)
    names = list(reader.get_variable_to_shape_map())
    values = _LazyTensors(reader, names)
    getter = tensor_getter(values, checkpoint.path, "the checkpoint")
    layers, pooler = checkpoint.encoder.layers, checkpoint.has_pooler
    if checkpoint.kind == MODEL_GARDEN:
        return model_garden_layout(getter, names, layers, pooler, checkpoint.path)
    return _google_layout(getter, lambda n: n in values, layers, pooler)
