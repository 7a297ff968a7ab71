"""Pretrained BERT-family checkpoints as users hold them (`--init-checkpoint PATH`), read without PyTorch, on a
local disk or an object store (gs://, s3://, minio://):

- a Hugging Face model folder: `config.json` (`model_type` bert), the weights in `model.safetensors` (or shards
  listed by `model.safetensors.index.json`), `vocab.txt`, and where present `tokenizer_config.json` (casing) and
  sentence-transformers' `1_Pooling/config.json` (pooling). `pytorch_model.bin` alone is refused, naming the
  command that converts it;
- a Google BERT release (google-research/bert's zips: `bert_config.json`, `bert_model.ckpt.{index,data-*}`,
  `vocab.txt`, no `checkpoint` state file), as its folder or its checkpoint prefix; a folder of TF checkpoints
  whose `checkpoint` file names the latest;
- a TF2 checkpoint of Model Garden's BertEncoder (official/nlp/tools/tf2_bert_encoder_checkpoint_converter.py:
  `encoder/layer_with_weights-N/...`), with its `bert_config.json` and `vocab.txt`;
- a SavedModel this pipeline pushed (a text model's encoder; its vocabulary asset and tokenization).

`locate` reads only what describes a checkpoint (its configs, its vocabulary, the weights' header or index) and
refuses anything else, naming the file and what is missing or wrong; `weights` reads the tensors, in this
project's encoder layout (components/model/encoder.py): BERT's separate query, key and value kernels become one
`qkv` kernel, PyTorch's [out, in] matrices are transposed, Model Garden's per-head kernels flattened, and the
first segment's token-type embedding (every token is of the first segment) is folded into the positions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import posixpath
import re
import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfxflow.components.model import presets
from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.presets import Encoder

HUGGING_FACE = "huggingface"
GOOGLE_BERT = "bert"
MODEL_GARDEN = "model_garden"
SAVED_MODEL = "saved_model"
KINDS = (HUGGING_FACE, GOOGLE_BERT, MODEL_GARDEN, SAVED_MODEL)
KIND_NAMES = {
    HUGGING_FACE: "a Hugging Face model folder",
    GOOGLE_BERT: "a Google BERT checkpoint",
    MODEL_GARDEN: "a Model Garden BERT encoder checkpoint",
    SAVED_MODEL: "a SavedModel this pipeline pushed",
}

CONVERT_PYTORCH = (
    'python -c "import torch, safetensors.torch as st; st.save_file({k: v.contiguous() for k, v in '
    "torch.load('pytorch_model.bin', map_location='cpu').items()}, 'model.safetensors', metadata={'format': 'pt'})\""
)
# What describes a Hugging Face folder besides its weights (read when present).
HF_DESCRIPTION_FILES = (
    "config.json",
    "vocab.txt",
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "modules.json",
    "README.md",
)
# Hugging Face's names of the feed-forward activation: "gelu" is the exact GELU, the others its tanh approximation.
HF_ACTIVATIONS = {
    "gelu": presets.GELU_ERF,
    "gelu_new": presets.GELU_TANH,
    "gelu_pytorch_tanh": presets.GELU_TANH,
    "gelu_fast": presets.GELU_TANH,
    "relu": presets.RELU,
}
# google-research/bert's modeling.py and Model Garden's tf_utils.get_activation: "gelu" is the tanh approximation.
GOOGLE_ACTIVATIONS = {"gelu": presets.GELU_TANH, "relu": presets.RELU}
# google-research/bert's tokenization.py `validate_case_matches_checkpoint`, and the release names since (the
# miniatures `uncased_L-4_H-256_A-4`, whole-word masking `wwm_cased_L-24_H-1024_A-16`).
_UNCASED_RELEASE = re.compile(r"^(?:wwm_)?uncased_L-|^multilingual_L-|^chinese_L-")
_CASED_RELEASE = re.compile(r"^(?:wwm_|multi_)?cased_L-")
# The encoder's variables, as encoder.py names them: "<input>_block_0/qkv/kernel:0" and so on. An input's name holds
# no "/": an optimizer's slot of the same variable ("AdamW/m/<input>_block_0/...") is not one.
ENCODER_VARIABLE = re.compile(
    r"^(?P<input>[^/]+?)_(?P<part>tokens|positions|embedding_norm|block_\d+|pooled)/(?P<rest>.+):0$"
)


class CheckpointError(ValueError):
    """A checkpoint that cannot initialise the model: the message names the path, the file and what is wrong."""


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """What a pretrained checkpoint is: its `kind` (KINDS), a display `name`, the encoder's architecture, the
    vocabulary its word embeddings are indexed by (`vocab_file`, `vocab_size` rows), how its own tokenizer
    makes word pieces (`tokenization`, and where the casing was read: `casing_from`), its pooling (`pooling`,
    `pooling_from`; `has_pooler`: it holds BERT's pooler weights), its dropout rates, the file or prefix of its
    weights, its parameter count and a `fingerprint` that changes with any of its files."""

    path: str
    kind: str
    name: str
    encoder: Encoder
    vocab_size: int
    vocab_file: str
    tokenization: tokenization_lib.Tokenization
    casing_from: str
    pooling: str
    pooling_from: str
    has_pooler: bool
    hidden_dropout: float
    attention_dropout: float
    head_dropout: float
    weights: str
    parameters: int
    fingerprint: str
    files: Tuple[str, ...] = ()  # what it is made of (a SavedModel: its folder), for a copy of it elsewhere
    encoder_input: str = ""  # a SavedModel's: the text input its encoder was trained on

    def describe(self) -> str:
        """e.g. "all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters)"."""
        return (
            f"{self.name} ({self.encoder.layers} layers, {self.encoder.hidden} wide, "
            f"{parameters_text(self.parameters)} parameters)"
        )

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON-able data (what the Trainer's custom_config carries)."""
        data = dataclasses.asdict(self)
        data["encoder"] = self.encoder.to_dict()
        data["tokenization"] = dataclasses.asdict(self.tokenization)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Checkpoint":
        values = dict(data)
        values["encoder"] = Encoder.from_dict(values["encoder"])
        values["tokenization"] = tokenization_lib.Tokenization(**values["tokenization"])
        values["files"] = tuple(values.get("files") or ())
        return cls(**values)


def parameters_text(count: int) -> str:
    """22.7M, or 53,248 below a million."""
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count:,}"


def _where(path: str) -> str:
    return f"--init-checkpoint {path}"


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if "://" in folder else os.path.join(folder, name)


def _read(path: str, uri: str, what: str) -> bytes:
    from tfxflow.components import object_store

    try:
        return object_store.read_bytes(uri)
    except FileNotFoundError as err:
        raise CheckpointError(f"{_where(path)}: {what} {uri} is missing") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{_where(path)}: cannot read {uri}: {err}") from err


def _json(path: str, uri: str, kind: type = dict) -> Any:
    """The JSON file `uri` of the checkpoint at `path`, which must hold a `kind` (an object, or a list)."""
    raw = _read(path, uri, "the file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(f"{_where(path)}: {uri} is not JSON: {err}") from err
    if not isinstance(data, kind):
        expected = "a JSON object" if kind is dict else "a JSON list"
        raise CheckpointError(f"{_where(path)}: {uri} holds {type(data).__name__}, not {expected}")
    return data


_REQUIRED = object()


class _Values:
    """A JSON object's values, each read with its type checked: a wrong one raises CheckpointError naming the
    checkpoint, the file and the key."""

    def __init__(self, path: str, where: str, data: Mapping[str, Any]):
        self.path, self.where, self.data = path, where, data

    def _get(self, key: str, default: Any) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is _REQUIRED:
                raise CheckpointError(f"{_where(self.path)}: {self.where} lacks {key}")
            return default
        return self.data[key]

    def _wrong(self, key: str, kind: str) -> CheckpointError:
        return CheckpointError(f"{_where(self.path)}: {self.where}'s {key} is {self.data[key]!r}, not {kind}")

    def int(self, key: str, default: Any = _REQUIRED, minimum: int = 1) -> Any:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._wrong(key, f"an integer >= {minimum}")
        return value

    def number(self, key: str, default: Any = _REQUIRED, low: float = 0.0, high: float = float("inf")) -> float:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < high:
            raise self._wrong(key, f"a number in [{low:g}, {high:g})")
        return float(value)

    def rate(self, key: str, default: float) -> float:
        """A dropout rate, in [0, 1)."""
        return self.number(key, default, 0.0, 1.0)

    def flag(self, key: str, default: Any = None) -> Any:
        """true, false, or the default where absent or null (a JSON string "false" is refused, not read as true)."""
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if not isinstance(value, bool):
            raise self._wrong(key, "true or false")
        return value

    def text(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def mapping(self, key: str) -> "_Values":
        value = self._get(key, {})
        if not isinstance(value, dict):
            raise self._wrong(key, "a JSON object")
        return _Values(self.path, f"{self.where}'s {key}", value)


def _names(path: str, folder: str) -> List[str]:
    """The names in `folder`; CheckpointError naming the path when it cannot be listed."""
    from tfxflow.components import object_store

    try:
        return object_store.list_names(folder)
    except NotADirectoryError:
        return []
    except FileNotFoundError as err:
        raise CheckpointError(f"{_where(path)}: nothing is there") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{_where(path)}: cannot read it: {err}") from err


def _stat(path: str, uri: str) -> Tuple[int, str]:
    from tfxflow.components import object_store

    try:
        return object_store.stat(uri)
    except FileNotFoundError as err:
        raise CheckpointError(f"{_where(path)}: {uri} is missing") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{_where(path)}: cannot read {uri}: {err}") from err


def _fingerprint(path: str, files: Sequence[str]) -> str:
    """Changes when any of `files` changes (size and modification time, or the object's ETag)."""
    digest = hashlib.sha256()
    for uri in sorted(files):
        size, tag = _stat(path, uri)
        digest.update(f"{posixpath.basename(uri)}\0{size}\0{tag}\n".encode())
    return digest.hexdigest()[:16]


def _is_folder(path: str) -> bool:
    from tfxflow.components import object_store

    if not object_store.is_remote(path):
        return os.path.isdir(path)
    try:
        return bool(object_store.list_names(path))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except object_store.ObjectStoreError as err:
        raise CheckpointError(f"{_where(path)}: cannot read it: {err}") from err


# ---------------------------------------------------------------------------------------------------------------
# What a checkpoint is
# ---------------------------------------------------------------------------------------------------------------


def locate(path: str) -> Checkpoint:
    """The checkpoint at `path` (KINDS), checked: its configuration, vocabulary and the shapes of its weights
    agree, and its weights file is whole. Raises CheckpointError naming the path, the file and what is wrong."""
    path = path.rstrip("/") if "://" in path else path
    if _is_folder(path):
        names = set(_names(path, path))
        if "saved_model.pb" in names:
            return _saved_model(path)
        if "config.json" in names:
            return _hugging_face(path, names)
        prefix = _prefix_in_folder(path, names)
        if prefix is not None:
            return _tf_checkpoint(path, prefix)
        found = ", ".join(sorted(names)[:8]) or "nothing"
        raise CheckpointError(
            f"{_where(path)}: not a checkpoint this pipeline reads: no config.json (a Hugging Face folder), no "
            f"bert_model.ckpt.index or other TF checkpoint (Google's BERT, Model Garden), no saved_model.pb (a "
            f"pushed model); it holds {found}"
        )
    folder, base = _split(path)
    siblings = set(_names(path, folder)) if folder else set()
    if base + ".index" in siblings:
        return _tf_checkpoint(path, path)
    if base in siblings:
        raise CheckpointError(
            f"{_where(path)}: a file, not a checkpoint: give the folder that holds it (a Hugging Face folder, a "
            "Google BERT release), a TF checkpoint prefix (<prefix>.index beside it) or a SavedModel folder"
        )
    raise CheckpointError(f"{_where(path)}: nothing is there (no folder, no file, no <prefix>.index)")


def _split(path: str) -> Tuple[str, str]:
    """(folder, name) of a path or URI."""
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if "/" not in rest:
            return path, ""
        folder, base = rest.rsplit("/", 1)
        return f"{scheme}://{folder}", base
    path = os.path.abspath(path)
    return os.path.dirname(path), os.path.basename(path)


def _prefix_in_folder(path: str, names: set) -> Optional[str]:
    """The TF checkpoint in a folder: the one its `checkpoint` state file names, else Google's
    `bert_model.ckpt`, else the only `<prefix>.index`; None when there is none."""
    if "checkpoint" in names:
        state = _read(path, _join(path, "checkpoint"), "the checkpoint state file").decode("utf-8", "replace")
        match = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', state, re.M)
        if match:
            latest = match.group(1)
            # TF's CheckpointManager writes an absolute path, stale once the folder moved: its name in this folder.
            if posixpath.basename(latest) + ".index" in names:
                return _join(path, posixpath.basename(latest))
            if (latest.startswith("/") or "://" in latest) and _exists(latest + ".index"):
                return latest
    if "bert_model.ckpt.index" in names:
        return _join(path, "bert_model.ckpt")
    indexes = sorted(n[: -len(".index")] for n in names if n.endswith(".index"))
    if len(indexes) > 1:
        raise CheckpointError(
            f"{_where(path)}: holds several TF checkpoints ({', '.join(indexes)}) and no 'checkpoint' file naming "
            "the latest: give the prefix of one"
        )
    return _join(path, indexes[0]) if indexes else None


def _exists(uri: str) -> bool:
    from tfxflow.components import object_store

    try:
        return object_store.exists(uri)
    except object_store.ObjectStoreError:
        return False


# ---------------------------------------------------------------------------------------------------------------
# Tokenization and pooling of a checkpoint
# ---------------------------------------------------------------------------------------------------------------


def _vocabulary(path: str, uri: str) -> List[str]:
    from tfxflow.components.model import text  # TensorFlow: only when a checkpoint is read

    try:
        return text.read_vocabulary(uri)
    except text.VocabularyError as err:
        raise CheckpointError(f"{_where(path)}: {err}") from err


def vocabulary_is_uncased(tokens: Sequence[str]) -> bool:
    """An uncased model's vocabulary has no word piece with an upper-case letter (the special tokens aside)."""
    return not any(t != t.lower() for t in tokens if not (t.startswith("[") and t.endswith("]")))


def _release_casing(name: str) -> Optional[bool]:
    if _UNCASED_RELEASE.match(name):
        return True
    if _CASED_RELEASE.match(name):
        return False
    return None


def _casing(path: str, tokens: Sequence[str], said: Optional[bool], source: str) -> Tuple[bool, str]:
    """(lower_case, where it was read): what the checkpoint's files say, else what its vocabulary shows. Raises
    when the two disagree (a cased vocabulary under a do_lower_case tokenizer loses every upper-case piece)."""
    uncased = vocabulary_is_uncased(tokens)
    if said is None:
        return uncased, "its vocabulary (" + ("no" if uncased else "some") + " upper-case word pieces)"
    if said and not uncased:
        raise CheckpointError(
            f"{_where(path)}: {source} says uncased, and its vocabulary holds upper-case word pieces: the casing "
            "of the tokenizer and of the vocabulary differ"
        )
    return said, source


def _sentence_transformers_pooling(path: str, names: set) -> Optional[Tuple[str, str, str]]:
    """(pooling, where it was read, the file) that sentence-transformers' module config names
    (`1_Pooling/config.json`), if the folder has one."""
    folder = None
    if "modules.json" in names:
        for module in _json(path, _join(path, "modules.json"), list):
            entry = _Values(path, "modules.json", module if isinstance(module, dict) else {})
            if entry.text("type", "").endswith(".Pooling"):
                folder = entry.text("path", "")
                if not re.fullmatch(r"[\w.-]+", folder) or folder in (".", ".."):
                    raise CheckpointError(
                        f"{_where(path)}: modules.json's Pooling module has the path {folder!r}, not a folder of it"
                    )
                break
    if folder is None and "1_Pooling" in names:
        folder = "1_Pooling"
    if folder is None:
        return None
    config_uri = _join(_join(path, folder), "config.json")
    config = _json(path, config_uri)
    where = f"{folder}/config.json"
    modes = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
    if modes == ["pooling_mode_mean_tokens"]:
        return presets.MEAN, f"{where}: mean of the tokens", config_uri
    if modes == ["pooling_mode_cls_token"]:
        return presets.CLS, f"{where}: the [CLS] token", config_uri
    raise CheckpointError(
        f"{_where(path)}: {where} asks for {modes or 'no pooling'}; the encoder pools by BERT's pooler, the mean of "
        "the tokens or [CLS]: give --pooling pooler, mean or cls"
    )


# ---------------------------------------------------------------------------------------------------------------
# Weights in this project's layout, for any kind
# ---------------------------------------------------------------------------------------------------------------


def encoder_shapes(encoder: Encoder, vocab_size: int, pooler: bool) -> Dict[str, Tuple[int, ...]]:
    """The shape of every weight of an encoder of this architecture, by its name here (encoder.py)."""
    hidden = encoder.hidden
    shapes = {
        "tokens/embeddings": (vocab_size, hidden),
        "positions/embeddings": (encoder.max_positions, hidden),
        "embedding_norm/gamma": (hidden,),
        "embedding_norm/beta": (hidden,),
    }
    for i in range(encoder.layers):
        block = f"block_{i}"
        shapes.update(
            {
                f"{block}/qkv/kernel": (hidden, 3 * hidden),
                f"{block}/qkv/bias": (3 * hidden,),
                f"{block}/attention_output/kernel": (hidden, hidden),
                f"{block}/attention_output/bias": (hidden,),
                f"{block}/attention_norm/gamma": (hidden,),
                f"{block}/attention_norm/beta": (hidden,),
                f"{block}/up/kernel": (hidden, encoder.intermediate),
                f"{block}/up/bias": (encoder.intermediate,),
                f"{block}/down/kernel": (encoder.intermediate, hidden),
                f"{block}/down/bias": (hidden,),
                f"{block}/output_norm/gamma": (hidden,),
                f"{block}/output_norm/beta": (hidden,),
            }
        )
    if pooler:
        shapes.update({"pooled/kernel": (hidden, hidden), "pooled/bias": (hidden,)})
    return shapes


def _check_shapes(path: str, mapped: Mapping[str, np.ndarray], expected: Mapping[str, Tuple[int, ...]], where: str):
    wrong = [
        f"'{key}' is missing"
        if key not in mapped
        else f"'{key}' is {list(mapped[key].shape)}, the config's architecture makes it {list(shape)}"
        for key, shape in expected.items()
        if key not in mapped or tuple(mapped[key].shape) != tuple(shape)
    ]
    if wrong:
        raise CheckpointError(f"{_where(path)}: {where} does not fit its own config: " + "; ".join(wrong[:4]))


Getter = Callable[[str], np.ndarray]


def _hf_layout(get: Getter, has: Callable[[str], bool], layers: int, pooler: bool) -> Dict[str, np.ndarray]:
    """A Hugging Face BertModel's weights (PyTorch names, [out, in] matrices) in this encoder's layout."""

    def norm(name: str) -> Tuple[np.ndarray, np.ndarray]:  # newer checkpoints say weight/bias, old ones gamma/beta
        if has(f"{name}.weight"):
            return get(f"{name}.weight"), get(f"{name}.bias")
        return get(f"{name}.gamma"), get(f"{name}.beta")

    def dense(name: str) -> Tuple[np.ndarray, np.ndarray]:
        return np.transpose(get(f"{name}.weight")), get(f"{name}.bias")

    positions = get("embeddings.position_embeddings.weight")
    if has("embeddings.token_type_embeddings.weight"):  # every token is of the first segment
        positions = positions + get("embeddings.token_type_embeddings.weight")[0]
    gamma, beta = norm("embeddings.LayerNorm")
    weights = {
        "tokens/embeddings": get("embeddings.word_embeddings.weight"),
        "positions/embeddings": positions,
        "embedding_norm/gamma": gamma,
        "embedding_norm/beta": beta,
    }
    for i in range(layers):
        layer, block = f"encoder.layer.{i}", f"block_{i}"
        parts = [dense(f"{layer}.attention.self.{p}") for p in ("query", "key", "value")]
        weights[f"{block}/qkv/kernel"] = np.concatenate([k for k, _ in parts], axis=1)
        weights[f"{block}/qkv/bias"] = np.concatenate([b for _, b in parts], axis=0)
        for ours, theirs in (
            ("attention_output", "attention.output.dense"),
            ("up", "intermediate.dense"),
            ("down", "output.dense"),
        ):
            weights[f"{block}/{ours}/kernel"], weights[f"{block}/{ours}/bias"] = dense(f"{layer}.{theirs}")
        for ours, theirs in (("attention_norm", "attention.output.LayerNorm"), ("output_norm", "output.LayerNorm")):
            weights[f"{block}/{ours}/gamma"], weights[f"{block}/{ours}/beta"] = norm(f"{layer}.{theirs}")
    if pooler:
        weights["pooled/kernel"], weights["pooled/bias"] = dense("pooler.dense")
    return weights


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


_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def _model_garden_layout(
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
            f"{_where(path)}: the Model Garden encoder has {len(embedding)} layers before its first block, not the "
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


def _is_model_garden(names: Sequence[str]) -> bool:
    return any(n.endswith("_attention_layer/_query_dense/kernel" + _VALUE) for n in names)


def _model_garden_has_pooler(names: Sequence[str]) -> bool:
    root = _model_garden_root(names)
    blocks = [
        int(m.group(1))
        for n in names
        if (m := re.match(re.escape(root) + r"layer_with_weights-(\d+)/_attention_layer/_query_dense/kernel", n))
    ]
    return bool(blocks) and f"{root}layer_with_weights-{max(blocks) + 1}/kernel{_VALUE}" in set(names)


def _missing(path: str, where: str) -> Callable[[str], None]:
    def report(name: str):
        raise CheckpointError(f"{_where(path)}: {where} has no tensor '{name}'")

    return report


def _shaped(shapes: Mapping[str, Sequence[int]], path: str, where: str) -> Tuple[Getter, Callable[[str], bool]]:
    """A getter of zero-cost stand-ins of the tensors' shapes (a broadcast scalar): the layout functions run on
    them to check every tensor is there and of the architecture's shape, before any weight is read."""
    missing = _missing(path, where)

    def get(name: str) -> np.ndarray:
        if name not in shapes:
            missing(name)
        return np.broadcast_to(np.float32(0), tuple(int(d) for d in shapes[name]))

    return get, lambda name: name in shapes


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face folders and safetensors
# ---------------------------------------------------------------------------------------------------------------

_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # read as bits, widened to float32
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_MAX_HEADER = 100 * 2**20


def _read_range(path: str, uri: str, start: int, length: int) -> bytes:
    from tfxflow.components import object_store

    try:
        return object_store.read_range(uri, start, length)
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{_where(path)}: cannot read {uri}: {err}") from err


def safetensors_header(path: str, uri: str) -> Tuple[int, Dict[str, Dict[str, Any]]]:
    """(where the data starts, {tensor: {dtype, shape, data_offsets}}) of a safetensors file, checked against the
    file's size: a truncated or malformed file raises CheckpointError naming it."""
    size, _ = _stat(path, uri)
    start = _read_range(path, uri, 0, 8)
    if len(start) < 8:
        raise CheckpointError(f"{_where(path)}: {uri} is truncated ({size} bytes): not a safetensors file")
    (length,) = struct.unpack("<Q", start)
    if length > _MAX_HEADER or 8 + length > size:
        raise CheckpointError(
            f"{_where(path)}: {uri} is truncated or not a safetensors file (a header of {length:,} bytes in a file "
            f"of {size:,})"
        )
    try:
        header = json.loads(_read_range(path, uri, 8, length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(f"{_where(path)}: {uri}: the safetensors header does not read: {err}") from err
    if not isinstance(header, dict):
        raise CheckpointError(f"{_where(path)}: {uri}: the safetensors header is not a JSON object")
    header.pop("__metadata__", None)
    data = size - 8 - length
    for name, entry in header.items():
        malformed = CheckpointError(f"{_where(path)}: {uri}: tensor '{name}' has a malformed header entry")
        if not isinstance(entry, dict):
            raise malformed
        dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype"))
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if dtype is None:
            raise CheckpointError(f"{_where(path)}: {uri}: tensor '{name}' is of dtype {entry.get('dtype')!r}")
        if not (
            isinstance(shape, list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
            and isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise malformed
        begin, end = offsets
        if end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
            raise CheckpointError(f"{_where(path)}: {uri}: tensor '{name}' does not hold its shape's bytes")
        if end > data:
            raise CheckpointError(
                f"{_where(path)}: {uri} is truncated: tensor '{name}' ends at byte {8 + length + end:,} of a file "
                f"of {size:,}"
            )
    return 8 + length, header


def read_safetensors(uri: str, names: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """Tensors of a local safetensors file (all, or `names`), float ones as float32."""
    base, header = safetensors_header(uri, uri)
    out = {}
    with open(uri, "rb") as f:
        for name in names if names is not None else sorted(header):
            entry = header[name]
            begin, end = entry["data_offsets"]
            f.seek(base + begin)
            raw = np.frombuffer(f.read(end - begin), dtype=_SAFETENSORS_DTYPES[entry["dtype"]])
            if entry["dtype"] == "BF16":
                raw = (raw.astype(np.uint32) << 16).view(np.float32)
            elif raw.dtype.kind == "f":
                raw = raw.astype(np.float32)
            out[name] = raw.reshape(entry["shape"])
    return out


def _hf_files(path: str, names: set) -> List[str]:
    """The safetensors files of a Hugging Face folder: `model.safetensors`, or the shards its index lists."""
    if "model.safetensors" in names:
        return [_join(path, "model.safetensors")]
    if "model.safetensors.index.json" in names:
        index = _Values(path, "model.safetensors.index.json", _json(path, _join(path, "model.safetensors.index.json")))
        shards = sorted({str(v) for v in index.mapping("weight_map").data.values()})
        if not shards:
            raise CheckpointError(f"{_where(path)}: model.safetensors.index.json lists no weight files")
        for shard in shards:  # files of this folder, by name
            if shard not in names or "/" in shard or shard in (".", ".."):
                raise CheckpointError(
                    f"{_where(path)}: model.safetensors.index.json names {shard!r}, which is no file of the folder"
                )
        return [_join(path, shard) for shard in shards]
    if "pytorch_model.bin" in names or "pytorch_model.bin.index.json" in names:
        raise CheckpointError(
            f"{_where(path)}: holds PyTorch's pytorch_model.bin and no model.safetensors; this pipeline reads "
            f"safetensors (no PyTorch needed). Convert it once in that folder, with PyTorch and safetensors "
            f"installed: {CONVERT_PYTORCH}"
        )
    if "tf_model.h5" in names:
        raise CheckpointError(
            f"{_where(path)}: holds only Keras' tf_model.h5; give the folder's model.safetensors (the Hugging Face "
            "hub has it for BERT models)"
        )
    raise CheckpointError(f"{_where(path)}: config.json is there, and no model.safetensors with the weights")


def _hf_names(header: Mapping[str, Any]) -> Tuple[Dict[str, str], str]:
    """{BertModel's name: the name in the file} and the prefix stripped: a BertForPreTraining or a classifier's
    file names the encoder `bert.embeddings...`."""
    prefix = "bert." if any(k.startswith("bert.embeddings.") for k in header) else ""
    return {k[len(prefix) :]: k for k in header if k.startswith(prefix)}, prefix


def _hugging_face(path: str, names: set) -> Checkpoint:
    config = _Values(path, "config.json", _json(path, _join(path, "config.json")))
    model_type = config.data.get("model_type")
    if model_type != "bert":
        raise CheckpointError(
            f"{_where(path)}: config.json's model_type is {model_type!r}; this encoder is BERT's layout "
            "(model_type 'bert': BERT, its miniatures, MiniLM and other BertModel checkpoints)"
        )
    positions = config.text("position_embedding_type", "absolute")
    if positions != "absolute":
        raise CheckpointError(
            f"{_where(path)}: config.json's position_embedding_type is {positions!r}; only learned absolute "
            "positions are built here"
        )
    act = config.text("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{_where(path)}: config.json's hidden_act {act!r} is none of {sorted(HF_ACTIVATIONS)}")
    encoder = _encoder(config, HF_ACTIVATIONS[act], "layer_norm_eps")
    files = _hf_files(path, names)
    header: Dict[str, Any] = {}
    for uri in files:
        header.update(safetensors_header(path, uri)[1])
    mapping, _ = _hf_names(header)
    shapes = {ours: header[theirs]["shape"] for ours, theirs in mapping.items()}
    pooler = "pooler.dense.weight" in shapes
    get, has = _shaped(shapes, path, posixpath.basename(files[0]))
    vocab_size = config.int("vocab_size", None) or int(shapes.get("embeddings.word_embeddings.weight", [0])[0])
    mapped = _hf_layout(get, has, encoder.layers, pooler)
    _check_shapes(path, mapped, encoder_shapes(encoder, vocab_size, pooler), posixpath.basename(files[0]))
    extra_layers = [n for n in shapes if n.startswith(f"encoder.layer.{encoder.layers}.")]
    if extra_layers:
        raise CheckpointError(
            f"{_where(path)}: the weights hold more layers than config.json's num_hidden_layers "
            f"{encoder.layers} ({extra_layers[0]})"
        )
    if "vocab.txt" not in names:
        raise CheckpointError(
            f"{_where(path)}: has no vocab.txt (a WordPiece vocabulary, one token per line): the word embeddings "
            "are indexed by it"
        )
    vocab_file = _join(path, "vocab.txt")
    tokens = _vocabulary(path, vocab_file)
    _check_vocabulary_rows(path, len(tokens), vocab_size)
    tokenization, casing_from = _hf_tokenization(path, names, tokens)
    pooling = _sentence_transformers_pooling(path, names)
    if pooling is None:
        pooling = (presets.POOLER, "its pooler weights", "") if pooler else (presets.CLS, "no pooler: [CLS]", "")
    described = [_join(path, n) for n in HF_DESCRIPTION_FILES if n in names] + [p for p in pooling[2:] if p]
    if "model.safetensors.index.json" in names and len(files) > 1:
        described.append(_join(path, "model.safetensors.index.json"))
    hidden_dropout = config.rate("hidden_dropout_prob", 0.1)
    return Checkpoint(
        path=path,
        kind=HUGGING_FACE,
        name=_hf_name(path, names, config.data),
        encoder=encoder,
        vocab_size=vocab_size,
        vocab_file=vocab_file,
        tokenization=tokenization,
        casing_from=casing_from,
        pooling=pooling[0],
        pooling_from=pooling[1],
        has_pooler=pooler,
        hidden_dropout=hidden_dropout,
        attention_dropout=config.rate("attention_probs_dropout_prob", 0.1),
        head_dropout=config.rate("classifier_dropout", hidden_dropout),
        weights=files[0] if len(files) == 1 else _join(path, "model.safetensors.index.json"),
        parameters=_parameters(mapped),
        fingerprint=_fingerprint(path, files + described),
        files=tuple(files + described),
    )


# The Hugging Face tokenizers the rules reproduce (tokenization.py), by tokenizer_config.json's tokenizer_class.
HF_TOKENIZER_CLASSES = ("BertTokenizer", "BertTokenizerFast")


def _hf_tokenization(path: str, names: set, tokens: Sequence[str]) -> Tuple[tokenization_lib.Tokenization, str]:
    """(how the folder's own tokenizer makes word pieces, where its casing was read): tokenizer_config.json
    (`do_lower_case`, `strip_accents`), else tokenizer.json's BertNormalizer, else the vocabulary. A tokenizer
    these rules do not reproduce (another class, no basic tokenization, CJK characters not split, words never
    split, another normalizer or model) is refused, naming the file and setting."""
    said, strip, source = None, None, ""
    if "tokenizer_config.json" in names:
        config = _Values(path, "tokenizer_config.json", _json(path, _join(path, "tokenizer_config.json")))
        kind = config.text("tokenizer_class", "BertTokenizer")
        if kind not in HF_TOKENIZER_CLASSES:
            raise CheckpointError(
                f"{_where(path)}: tokenizer_config.json's tokenizer_class is {kind!r}; BERT's WordPiece tokenizer "
                f"({' or '.join(HF_TOKENIZER_CLASSES)}) is what the Transform graph reproduces"
            )
        for key, needed in (("do_basic_tokenize", True), ("tokenize_chinese_chars", True)):
            if config.flag(key, needed) is not needed:
                raise CheckpointError(
                    f"{_where(path)}: tokenizer_config.json's {key} is false; the Transform graph tokenizes as "
                    f"BERT's basic tokenizer does, with {key} true"
                )
        if config.data.get("never_split"):
            raise CheckpointError(
                f"{_where(path)}: tokenizer_config.json's never_split lists words the Transform graph would split"
            )
        said, strip, source = config.flag("do_lower_case"), config.flag("strip_accents"), "tokenizer_config.json"
    max_chars = None
    if "tokenizer.json" in names:
        tokenizer = _Values(path, "tokenizer.json", _json(path, _join(path, "tokenizer.json")))
        normalizer, model = tokenizer.mapping("normalizer"), tokenizer.mapping("model")
        pre = tokenizer.mapping("pre_tokenizer")
        kinds = (normalizer.data.get("type"), pre.data.get("type"), model.data.get("type"))
        if kinds != ("BertNormalizer", "BertPreTokenizer", "WordPiece"):
            raise CheckpointError(
                f"{_where(path)}: tokenizer.json's normalizer, pre-tokenizer and model are {kinds}; BERT's "
                "('BertNormalizer', 'BertPreTokenizer', 'WordPiece') are what the Transform graph reproduces"
            )
        for key in ("clean_text", "handle_chinese_chars"):
            if normalizer.flag(key, True) is not True:
                raise CheckpointError(f"{_where(path)}: tokenizer.json's normalizer has {key} false")
        if said is None:
            said, source = normalizer.flag("lowercase"), "tokenizer.json (BertNormalizer)"
            strip = normalizer.flag("strip_accents")
        max_chars = model.int("max_input_chars_per_word", None)
    lower_case, casing_from = _casing(path, tokens, said, f"{source} (do_lower_case)" if source else "")
    return (
        tokenization_lib.Tokenization(
            lower_case=lower_case,
            strip_accents=strip,
            rules=tokenization_lib.HUGGING_FACE,
            max_chars_per_word=max_chars,
        ),
        casing_from,
    )


def _hf_name(path: str, names: set, config: Mapping[str, Any]) -> str:
    """The model card's title (README.md's first "# " heading), else the folder's name, else config.json's
    _name_or_path (for a folder of a generic name, "model")."""
    if "README.md" in names:
        card = _read(path, _join(path, "README.md"), "README.md").decode("utf-8", "replace")
        title = re.search(r"^# +(\S.*?)\s*$", card, re.M)
        if title:
            return title.group(1)
    base = _split(path)[1]
    named = str(config.get("_name_or_path") or "").rsplit("/", 1)[-1]
    return named if base in ("model", "checkpoint", "") and named else base or path


def _parameters(mapped: Mapping[str, np.ndarray]) -> int:
    """The encoder's parameter count as this model holds it (the token-type table folded into the positions)."""
    return int(sum(int(np.prod(value.shape)) for value in mapped.values()))


def _encoder(config: _Values, activation: str, epsilon_key: str) -> Encoder:
    """The architecture a config file states (BERT's names); its layer norms' epsilon from `epsilon_key`, else
    BERT's."""
    hidden = config.int("hidden_size")
    if config.data.get("embedding_size") not in (None, hidden):
        raise CheckpointError(
            f"{_where(config.path)}: {config.where}'s embedding_size {config.data['embedding_size']} differs from "
            f"hidden_size {hidden} (ALBERT's factorized embeddings): not BERT's layout"
        )
    try:
        return Encoder(
            layers=config.int("num_hidden_layers"),
            hidden=hidden,
            heads=config.int("num_attention_heads"),
            intermediate=config.int("intermediate_size"),
            max_positions=config.int("max_position_embeddings", 512),
            activation=activation,
            layer_norm_epsilon=config.number(epsilon_key, presets.LAYER_NORM_EPSILON, 0.0, 1.0),
        )
    except ValueError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{_where(config.path)}: {config.where}: {err}") from err


def _check_vocabulary_rows(path: str, tokens: int, rows: int) -> None:
    if tokens > rows:
        raise CheckpointError(
            f"{_where(path)}: vocab.txt has {tokens:,} word pieces and the word embeddings {rows:,} rows: ids past "
            f"{rows - 1:,} would have no embedding (a vocabulary of another model?)"
        )


# ---------------------------------------------------------------------------------------------------------------
# TF checkpoints: Google's BERT (TF1 names) and Model Garden's encoder (TF2 objects)
# ---------------------------------------------------------------------------------------------------------------


def _checkpoint_index(path: str, prefix: str) -> Tuple[Dict[str, List[int]], Dict[str, Any], List[str]]:
    """(shapes, dtypes, data files) of a TF checkpoint, from its index (copied first from a store TF cannot
    read); raises naming a data file that is missing or shorter than the tensors it holds."""
    import tempfile

    import tensorflow as tf

    from tfxflow.components import object_store

    folder, base = _split(prefix)
    data_files = [_join(folder, n) for n in _names(path, folder) if n.startswith(base + ".data-")]
    with tempfile.TemporaryDirectory() as scratch:
        index = prefix + ".index"
        if object_store.tf_cannot_read(prefix):
            local = os.path.join(scratch, base)
            try:
                object_store.download(index, local + ".index")
            except (OSError, object_store.ObjectStoreError) as err:
                raise CheckpointError(f"{_where(path)}: cannot read {index}: {err}") from err
        else:
            local = prefix
        try:
            reader = tf.train.load_checkpoint(local)
            shapes = reader.get_variable_to_shape_map()
            dtypes = reader.get_variable_to_dtype_map()
        except (tf.errors.OpError, ValueError) as err:
            raise CheckpointError(f"{_where(path)}: the checkpoint's index {index} does not read: {err}") from err
    expected = re.match(r".*\.data-\d+-of-(\d+)$", data_files[0]) if data_files else None
    if not data_files or (expected and len(data_files) != int(expected.group(1))):
        raise CheckpointError(
            f"{_where(path)}: {prefix}.data-* files are missing beside {index} (found {len(data_files)})"
        )
    held = sum(
        int(np.prod(shapes[name])) * dtypes[name].size
        for name in shapes
        if dtypes[name] != tf.string and dtypes[name].size
    )
    size = sum(_stat(path, uri)[0] for uri in data_files)
    if size < held:
        raise CheckpointError(
            f"{_where(path)}: {prefix}.data-* hold {size:,} bytes and the index lists {held:,} bytes of tensors: "
            "a truncated copy"
        )
    return shapes, dtypes, data_files


def _tf_checkpoint(path: str, prefix: str) -> Checkpoint:
    folder, base = _split(prefix)
    names = set(_names(path, folder))
    shapes, _, data_files = _checkpoint_index(path, prefix)
    model_garden = _is_model_garden(list(shapes))
    if not model_garden and "bert/embeddings/word_embeddings" not in shapes:
        some = ", ".join(sorted(shapes)[:3])
        raise CheckpointError(
            f"{_where(path)}: a TF checkpoint of neither Google's BERT names (no 'bert/embeddings/word_embeddings') "
            f"nor Model Garden's BertEncoder; it holds {some}, ..."
        )
    kind = MODEL_GARDEN if model_garden else GOOGLE_BERT
    config_name = next((n for n in ("bert_config.json", "config.json") if n in names), "")
    if config_name:
        config = _Values(path, config_name, _json(path, _join(folder, config_name)))
        act = config.text("hidden_act", "gelu")
        if act not in GOOGLE_ACTIVATIONS:
            raise CheckpointError(
                f"{_where(path)}: {config_name}'s hidden_act {act!r} is none of {sorted(GOOGLE_ACTIVATIONS)}"
            )
        encoder = _encoder(config, GOOGLE_ACTIVATIONS[act], "layer_norm_eps")
    elif kind == GOOGLE_BERT:
        encoder, config = _encoder_from_google_shapes(path, shapes), _Values(path, "", {})
    else:
        raise CheckpointError(f"{_where(path)}: a Model Garden checkpoint needs its bert_config.json beside it")
    get, has = _shaped(shapes, path, f"{base}.index")
    if kind == MODEL_GARDEN:
        pooler = _model_garden_has_pooler(list(shapes))
        mapped = _model_garden_layout(get, list(shapes), encoder.layers, pooler, path)
        blocks = sum(1 for n in shapes if n.endswith("_attention_layer/_query_dense/kernel" + _VALUE))
    else:
        pooler = "bert/pooler/dense/kernel" in shapes
        mapped = _google_layout(get, has, encoder.layers, pooler)
        blocks = len({m.group(1) for k in shapes if (m := re.match(r"bert/encoder/layer_(\d+)/", k))})
    if blocks != encoder.layers:
        raise CheckpointError(
            f"{_where(path)}: the checkpoint holds {blocks} layers, {config_name or 'its config'} says {encoder.layers}"
        )
    vocab_size = int(mapped["tokens/embeddings"].shape[0])
    stated = config.int("vocab_size", None)
    if stated not in (None, vocab_size):
        raise CheckpointError(
            f"{_where(path)}: {config_name} says vocab_size {stated:,}, the word embeddings hold {vocab_size:,} rows"
        )
    _check_shapes(path, mapped, encoder_shapes(encoder, vocab_size, pooler), f"{base}.index")
    if "vocab.txt" not in names:
        raise CheckpointError(
            f"{_where(path)}: has no vocab.txt beside {base}.index (Google's releases ship it in the same folder)"
        )
    vocab_file = _join(folder, "vocab.txt")
    tokens = _vocabulary(path, vocab_file)
    _check_vocabulary_rows(path, len(tokens), vocab_size)
    release = posixpath.basename(folder.rstrip("/")) if "://" in folder else os.path.basename(os.path.abspath(folder))
    said = _release_casing(release)
    lower_case, casing_from = _casing(path, tokens, said, f"the release name {release}")
    dropout = config.rate("hidden_dropout_prob", 0.1)
    made_of = data_files + [prefix + ".index", vocab_file] + ([_join(folder, config_name)] if config_name else [])
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
        parameters=_parameters(mapped),
        fingerprint=_fingerprint(path, made_of),
        files=tuple(made_of),
    )


def _encoder_from_google_shapes(path: str, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    """A Google checkpoint without its bert_config.json: the sizes from its shapes, heads of 64 (BERT's)."""
    layers = len({m.group(1) for k in shapes if (m := re.match(r"bert/encoder/layer_(\d+)/", k))})
    _, hidden = shapes["bert/embeddings/word_embeddings"]
    if hidden % 64 or not layers:
        raise CheckpointError(
            f"{_where(path)}: no bert_config.json beside it, and its shapes ({layers} layers, {hidden} wide) do not "
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


# ---------------------------------------------------------------------------------------------------------------
# A SavedModel this pipeline pushed
# ---------------------------------------------------------------------------------------------------------------


def _saved_model(path: str) -> Checkpoint:
    """A pushed text model: its encoders' record (assets.extra/tfxflow_model.json, `encoders`), else, for a
    model exported before the record held them, the architecture of the bert-* preset of its sizes (read by
    loading it: from a local path only)."""
    from tfxflow.components import names as names_lib
    from tfxflow.components import object_store
    from tfxflow.components.model import text

    info = names_lib.MODEL_INFO_FILE
    record = _Values(path, info, _json(path, _join(path, info)) if _exists(_join(path, info)) else {})
    encoders = record.mapping("encoders").data
    if len(encoders) > 1:
        listed = ", ".join(sorted(encoders))
        raise CheckpointError(
            f"{_where(path)}: the SavedModel has encoders of several text columns ({listed}); a run starts one "
            "encoder from it"
        )
    if encoders:
        ((name, data),) = encoders.items()
        entry = record.mapping("encoders").mapping(name)
        try:
            encoder = Encoder.from_dict(entry.mapping("encoder").data)
            tokenization = tokenization_lib.Tokenization(**entry.mapping("tokenization").data)
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{_where(path)}: {info}'s encoder of {name} does not read: {err}") from err
        vocab_size = entry.int("vocab_size")
        pooling = entry.text("pooling", presets.POOLER)
        if pooling not in presets.POOLINGS:
            raise CheckpointError(f"{_where(path)}: {info}'s pooling {pooling!r} is none of {presets.POOLINGS}")
        dropout = entry.rate("dropout", 0.1)
        casing_from = f"the pushed model's record ({info})"
    else:
        if object_store.is_remote(path):
            raise CheckpointError(
                f"{_where(path)}: a SavedModel without an encoder record in {info} (pushed by an earlier version) "
                "is read from a local copy only: copy its folder here and give that path"
            )
        name, encoder, vocab_size = _saved_model_shapes(path)
        pooling, dropout, casing_from = presets.POOLER, 0.1, ""
    column = name[: -len("_xf")] if name.endswith("_xf") else name
    vocab_file = _join(_join(path, "assets"), text.asset_name(column))
    if not _exists(vocab_file):
        raise CheckpointError(
            f"{_where(path)}: the SavedModel has no vocabulary asset assets/{text.asset_name(column)}"
        )
    tokens = _vocabulary(path, vocab_file)
    _check_vocabulary_rows(path, len(tokens), vocab_size)
    if not encoders:  # its casing from its vocabulary
        lower_case, casing_from = _casing(path, tokens, None, "")
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
        fingerprint=_fingerprint(path, [_join(path, "saved_model.pb"), vocab_file]),
        files=(path,),
        encoder_input=name,
    )


def _saved_model_shapes(path: str) -> Tuple[str, Encoder, int]:
    """(input, architecture, vocabulary rows) of a pushed model's only encoder, from its variables' shapes."""
    found = _saved_model_variables(path)
    if len(found) != 1:
        raise CheckpointError(
            f"{_where(path)}: the SavedModel has encoders of {sorted(found)}; a run starts one encoder from it"
        )
    ((name, variables),) = found.items()
    needed = ("tokens/embeddings", "positions/embeddings", "block_0/up/kernel")
    if any(key not in variables for key in needed):
        raise CheckpointError(f"{_where(path)}: the SavedModel's encoder of {name} lacks some of {list(needed)}")
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
        raise CheckpointError(f"{_where(path)}: the SavedModel's encoder of {name}: {err}") from err
    return name, encoder, int(vocab_size)


def _saved_model_variables(path: str) -> Dict[str, Dict[str, np.ndarray]]:
    import tensorflow as tf

    from tfxflow.components.model import text as text_lib

    try:
        text_lib.load_ops_for(path)
        loaded = tf.saved_model.load(path)
    except (OSError, tf.errors.OpError, ValueError) as err:
        raise CheckpointError(f"{_where(path)}: the SavedModel does not load: {err}") from err
    found: Dict[str, Dict[str, np.ndarray]] = {}
    for item in tf.train.TrackableView(loaded).descendants():
        if isinstance(item, tf.Variable):
            match = ENCODER_VARIABLE.match(item.name)
            if match:
                found.setdefault(match["input"], {})[f"{match['part']}/{match['rest']}"] = item.numpy()
    if not found:
        raise CheckpointError(
            f"{_where(path)}: the SavedModel has no Transformer encoder (a text model trained with a bert-* preset "
            "or a checkpoint)"
        )
    return found


# ---------------------------------------------------------------------------------------------------------------
# Reading the weights
# ---------------------------------------------------------------------------------------------------------------


def weights(checkpoint: Checkpoint) -> Dict[str, np.ndarray]:
    """The encoder's weights in this project's layout ({"block_0/qkv/kernel": array, ...}), float32, read from
    a local copy of the checkpoint (the Trainer fetches one from an object store first)."""
    kind = checkpoint.kind
    encoder = checkpoint.encoder
    if kind == SAVED_MODEL:
        found = _saved_model_variables(checkpoint.weights)
        mapped = found.get(checkpoint.encoder_input) or next(iter(found.values()))
    elif kind == HUGGING_FACE:
        files = (
            [checkpoint.weights]
            if checkpoint.weights.endswith(".safetensors")
            else sorted(
                {
                    _join(os.path.dirname(checkpoint.weights), shard)
                    for shard in _json(checkpoint.path, checkpoint.weights)["weight_map"].values()
                }
            )
        )
        tensors: Dict[str, np.ndarray] = {}
        for uri in files:
            tensors.update(read_safetensors(uri))
        mapping, _ = _hf_names(tensors)
        named = {ours: tensors[theirs] for ours, theirs in mapping.items()}
        getter = _getter(named, checkpoint.path, "the safetensors weights")
        mapped = _hf_layout(getter, lambda n: n in named, encoder.layers, checkpoint.has_pooler)
    else:
        import tensorflow as tf

        reader = tf.train.load_checkpoint(checkpoint.weights)
        names = list(reader.get_variable_to_shape_map())
        values = _LazyTensors(reader, names)
        getter = _getter(values, checkpoint.path, "the checkpoint")
        if kind == MODEL_GARDEN:
            mapped = _model_garden_layout(getter, names, encoder.layers, checkpoint.has_pooler, checkpoint.path)
        else:
            mapped = _google_layout(getter, lambda n: n in values, encoder.layers, checkpoint.has_pooler)
    _check_shapes(
        checkpoint.path, mapped, encoder_shapes(encoder, checkpoint.vocab_size, checkpoint.has_pooler), "the weights"
    )
    return {key: np.asarray(value, dtype=np.float32) for key, value in mapped.items()}


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


def _getter(values: Mapping[str, np.ndarray], path: str, where: str) -> Getter:
    missing = _missing(path, where)

    def get(name: str) -> np.ndarray:
        if name not in values:
            missing(name)
        return values[name]

    return get


def unchanged(checkpoint: Checkpoint) -> bool:
    """Whether the files of `checkpoint` are still those it was located with (their sizes and modification times,
    or ETags)."""
    return _fingerprint(checkpoint.path, checkpoint.files) == checkpoint.fingerprint if checkpoint.files else True


def local_copy(checkpoint: Checkpoint, scratch: str) -> str:
    """A local path of `checkpoint`: its own on a local disk, else the path of a copy of its files (`files`, laid
    out as in its folder) under the folder `scratch`."""
    from tfxflow.components import object_store

    if not object_store.is_remote(checkpoint.path):
        return checkpoint.path
    prefix_given = checkpoint.kind in (GOOGLE_BERT, MODEL_GARDEN) and checkpoint.weights == checkpoint.path
    root = _split(checkpoint.path)[0] if prefix_given else checkpoint.path
    for uri in checkpoint.files:
        relative = uri[len(root) :].lstrip("/")
        try:
            object_store.download(uri, os.path.join(scratch, relative) if relative else scratch)
        except (OSError, object_store.ObjectStoreError) as err:
            raise CheckpointError(f"{_where(checkpoint.path)}: cannot copy {uri}: {err}") from err
    return os.path.join(scratch, _split(checkpoint.path)[1]) if prefix_given else scratch
