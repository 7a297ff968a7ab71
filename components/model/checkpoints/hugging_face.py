"""A Hugging Face model folder, read without PyTorch: `config.json` (its `model_type` one of families/: bert,
distilbert, electra, roberta, xlm-roberta), the weights in `model.safetensors` (or shards listed by
`model.safetensors.index.json`), the tokenizer's files (WordPiece's `vocab.txt`, and where present
`tokenizer_config.json` / `tokenizer.json` for casing; a SentencePiece model or byte-level BPE: subword_files.py)
and sentence-transformers' `1_Pooling/config.json` (pooling). `pytorch_model.bin` alone is refused, naming the
command that converts it. The family maps the weights into this encoder's layout (PyTorch's [out, in] matrices
transposed, separate query, key and value kernels made one `qkv` kernel)."""

from __future__ import annotations

import json
import os
import posixpath
import re
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfxflow.components.model import presets
from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.checkpoints import families, subword_files
from tfxflow.components.model.checkpoints.description import HUGGING_FACE, Checkpoint, CheckpointError
from tfxflow.components.model.checkpoints.files import (
    Values,
    fingerprint_of,
    given,
    join,
    read,
    read_json,
    read_range,
    split,
    stat,
)
from tfxflow.components.model.checkpoints.layout import (
    check_shapes,
    encoder_shapes,
    parameter_count,
    shaped,
    tensor_getter,
)
from tfxflow.components.model.checkpoints.vocabulary import casing, check_vocabulary_rows, read_tokens

CONVERT_PYTORCH = (
    'python -c "import torch, safetensors.torch as st; st.save_file({k: v.contiguous() for k, v in '
    "torch.load('pytorch_model.bin', map_location='cpu').items()}, 'model.safetensors', metadata={'format': 'pt'})\""
)
# What describes a Hugging Face folder besides its weights (read when present).
HF_DESCRIPTION_FILES = (
    "config.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "modules.json",
    "README.md",
)
# The Hugging Face tokenizers the rules reproduce (tokenization.py), by tokenizer_config.json's tokenizer_class.
HF_TOKENIZER_CLASSES = tuple(
    f"{family}Tokenizer{fast}" for family in ("Bert", "DistilBert", "Electra") for fast in ("", "Fast")
)

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


def safetensors_header(path: str, uri: str) -> Tuple[int, Dict[str, Dict[str, Any]]]:
    """(where the data starts, {tensor: {dtype, shape, data_offsets}}) of a safetensors file, checked against the
    file's size: a truncated or malformed file raises CheckpointError naming it."""
    size, _ = stat(path, uri)
    start = read_range(path, uri, 0, 8)
    if len(start) < 8:
        raise CheckpointError(f"{given(path)}: {uri} is truncated ({size} bytes): not a safetensors file")
    (length,) = struct.unpack("<Q", start)
    if length > _MAX_HEADER or 8 + length > size:
        raise CheckpointError(
            f"{given(path)}: {uri} is truncated or not a safetensors file (a header of {length:,} bytes in a file "
            f"of {size:,})"
        )
    try:
        header = json.loads(read_range(path, uri, 8, length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(f"{given(path)}: {uri}: the safetensors header does not read: {err}") from err
    if not isinstance(header, dict):
        raise CheckpointError(f"{given(path)}: {uri}: the safetensors header is not a JSON object")
    header.pop("__metadata__", None)
    data = size - 8 - length
    for name, entry in header.items():
        malformed = CheckpointError(f"{given(path)}: {uri}: tensor '{name}' has a malformed header entry")
        if not isinstance(entry, dict):
            raise malformed
        dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype"))
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if dtype is None:
            raise CheckpointError(f"{given(path)}: {uri}: tensor '{name}' is of dtype {entry.get('dtype')!r}")
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
            raise CheckpointError(f"{given(path)}: {uri}: tensor '{name}' does not hold its shape's bytes")
        if end > data:
            raise CheckpointError(
                f"{given(path)}: {uri} is truncated: tensor '{name}' ends at byte {8 + length + end:,} of a file "
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
        return [join(path, "model.safetensors")]
    if "model.safetensors.index.json" in names:
        index = Values(
            path, "model.safetensors.index.json", read_json(path, join(path, "model.safetensors.index.json"))
        )
        shards = sorted({str(v) for v in index.mapping("weight_map").data.values()})
        if not shards:
            raise CheckpointError(f"{given(path)}: model.safetensors.index.json lists no weight files")
        for shard in shards:  # files of this folder, by name
            if shard not in names or "/" in shard or shard in (".", ".."):
                raise CheckpointError(
                    f"{given(path)}: model.safetensors.index.json names {shard!r}, which is no file of the folder"
                )
        return [join(path, shard) for shard in shards]
    if "pytorch_model.bin" in names or "pytorch_model.bin.index.json" in names:
        raise CheckpointError(
            f"{given(path)}: holds PyTorch's pytorch_model.bin and no model.safetensors; this pipeline reads "
            f"safetensors (no PyTorch needed). Convert it once in that folder, with PyTorch and safetensors "
            f"installed: {CONVERT_PYTORCH}"
        )
    if "tf_model.h5" in names:
        raise CheckpointError(
            f"{given(path)}: holds only Keras' tf_model.h5; give the folder's model.safetensors (the Hugging Face "
            "hub has it for BERT models)"
        )
    raise CheckpointError(f"{given(path)}: config.json is there, and no model.safetensors with the weights")


def _hf_names(header: Mapping[str, Any], prefix: str) -> Dict[str, str]:
    """{the base model's name: the name in the file}: a task model's file (BertForPreTraining, a classifier,
    DistilBertForMaskedLM...) names the encoder under the family's prefix (`bert.embeddings...`)."""
    prefix = prefix if any(k.startswith(f"{prefix}embeddings.") for k in header) else ""
    return {k[len(prefix) :]: k for k in header if k.startswith(prefix)}


def locate_hugging_face(path: str, names: set) -> Checkpoint:
    config = Values(path, "config.json", read_json(path, join(path, "config.json")))
    family = families.family_of(path, config)
    files = _hf_files(path, names)
    header: Dict[str, Any] = {}
    for uri in files:
        header.update(safetensors_header(path, uri)[1])
    mapping = _hf_names(header, family.prefix)
    shapes = {ours: header[theirs]["shape"] for ours, theirs in mapping.items()}
    # The architecture sees the file's other tensors too (a generator's head beside `electra.`).
    encoder = family.architecture(config, {**{k: v["shape"] for k, v in header.items()}, **shapes})
    pooler = "pooler.dense.weight" in shapes
    get, has = shaped(shapes, path, posixpath.basename(files[0]))
    vocab_size = config.int("vocab_size", None) or int(shapes.get("embeddings.word_embeddings.weight", [0])[0])
    mapped = family.layout(get, has, encoder, pooler)
    check_shapes(path, mapped, encoder_shapes(encoder, vocab_size, pooler), posixpath.basename(files[0]))
    extra_layers = [n for n in shapes if n.startswith(family.layer.format(encoder.layers))]
    if extra_layers:
        raise CheckpointError(
            f"{given(path)}: the weights hold more layers than config.json's {family.layers_key} "
            f"{encoder.layers} ({extra_layers[0]})"
        )
    merges_file = ""
    if family.tokenizer == tokenization_lib.WORDPIECE:
        vocab_file, tokenization, casing_from, special = _wordpiece(path, names, vocab_size)
    else:
        pad = config.int("pad_token_id", 1, minimum=0)
        if family.tokenizer == tokenization_lib.SENTENCEPIECE:
            vocab_file, special = subword_files.sentencepiece(path, names, vocab_size, pad)
        else:
            vocab_file, merges_file, special = subword_files.byte_bpe(path, names, vocab_size, pad)
        tokenization = subword_files.tokenization(family.tokenizer)
        casing_from = f"{family.title}'s {tokenization_lib.KIND_NAMES[family.tokenizer]} (its own normalization)"
    pooling = _sentence_transformers_pooling(path, names)
    if pooling is None:
        pooling = (presets.POOLER, "its pooler weights", "") if pooler else (presets.CLS, "no pooler: [CLS]", "")
    described = [join(path, n) for n in HF_DESCRIPTION_FILES if n in names] + [p for p in pooling[2:] if p]
    if "model.safetensors.index.json" in names and len(files) > 1:
        described.append(join(path, "model.safetensors.index.json"))
    hidden_key, attention_key, classifier_key = family.dropout_keys
    hidden_dropout = config.rate(hidden_key, 0.1)
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
        attention_dropout=config.rate(attention_key, 0.1),
        head_dropout=config.rate(classifier_key, hidden_dropout),
        weights=files[0] if len(files) == 1 else join(path, "model.safetensors.index.json"),
        parameters=parameter_count(mapped),
        fingerprint=fingerprint_of(path, files + described),
        files=tuple(files + described),
        family=family.model_type,
        merges_file=merges_file,
        special_tokens=special,
    )


def _wordpiece(
    path: str, names: set, vocab_size: int
) -> Tuple[str, tokenization_lib.Tokenization, str, Dict[str, int]]:
    """(vocab.txt, its tokenization, where the casing was read, the special tokens' ids) of a WordPiece folder."""
    if "vocab.txt" not in names:
        raise CheckpointError(
            f"{given(path)}: has no vocab.txt (a WordPiece vocabulary, one token per line): the word embeddings "
            "are indexed by it"
        )
    vocab_file = join(path, "vocab.txt")
    tokens = read_tokens(path, vocab_file)
    check_vocabulary_rows(path, len(tokens), vocab_size)
    tokenization, casing_from = _hf_tokenization(path, names, tokens)
    ids = {token: i for i, token in enumerate(tokens)}
    roles = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]", "mask": "[MASK]"}
    return vocab_file, tokenization, casing_from, {role: ids[t] for role, t in roles.items() if t in ids}


def _hf_tokenization(path: str, names: set, tokens: Sequence[str]) -> Tuple[tokenization_lib.Tokenization, str]:
    """(how the folder's own tokenizer makes word pieces, where its casing was read): tokenizer_config.json
    (`do_lower_case`, `strip_accents`), else tokenizer.json's BertNormalizer, else the vocabulary. A tokenizer
    these rules do not reproduce (another class, no basic tokenization, CJK characters not split, words never
    split, another normalizer or model) is refused, naming the file and setting."""
    said, strip, source = None, None, ""
    if "tokenizer_config.json" in names:
        config = Values(path, "tokenizer_config.json", read_json(path, join(path, "tokenizer_config.json")))
        kind = config.text("tokenizer_class", "BertTokenizer")
        if kind not in HF_TOKENIZER_CLASSES:
            raise CheckpointError(
                f"{given(path)}: tokenizer_config.json's tokenizer_class is {kind!r}; BERT's WordPiece tokenizer "
                f"({', '.join(HF_TOKENIZER_CLASSES)}) is what the Transform graph reproduces"
            )
        for key, needed in (("do_basic_tokenize", True), ("tokenize_chinese_chars", True)):
            if config.flag(key, needed) is not needed:
                raise CheckpointError(
                    f"{given(path)}: tokenizer_config.json's {key} is false; the Transform graph tokenizes as "
                    f"BERT's basic tokenizer does, with {key} true"
                )
        if config.data.get("never_split"):
            raise CheckpointError(
                f"{given(path)}: tokenizer_config.json's never_split lists words the Transform graph would split"
            )
        said, strip, source = config.flag("do_lower_case"), config.flag("strip_accents"), "tokenizer_config.json"
    max_chars = None
    if "tokenizer.json" in names:
        tokenizer = Values(path, "tokenizer.json", read_json(path, join(path, "tokenizer.json")))
        normalizer, model = tokenizer.mapping("normalizer"), tokenizer.mapping("model")
        pre = tokenizer.mapping("pre_tokenizer")
        kinds = (normalizer.data.get("type"), pre.data.get("type"), model.data.get("type"))
        if kinds != ("BertNormalizer", "BertPreTokenizer", "WordPiece"):
            raise CheckpointError(
                f"{given(path)}: tokenizer.json's normalizer, pre-tokenizer and model are {kinds}; BERT's "
                "('BertNormalizer', 'BertPreTokenizer', 'WordPiece') are what the Transform graph reproduces"
            )
        for key in ("clean_text", "handle_chinese_chars"):
            if normalizer.flag(key, True) is not True:
                raise CheckpointError(f"{given(path)}: tokenizer.json's normalizer has {key} false")
        if said is None:
            said, source = normalizer.flag("lowercase"), "tokenizer.json (BertNormalizer)"
            strip = normalizer.flag("strip_accents")
        max_chars = model.int("max_input_chars_per_word", None)
    lower_case, casing_from = casing(path, tokens, said, f"{source} (do_lower_case)" if source else "")
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
        card = read(path, join(path, "README.md"), "README.md").decode("utf-8", "replace")
        title = re.search(r"^# +(\S.*?)\s*$", card, re.M)
        if title:
            return title.group(1)
    base = split(path)[1]
    named = str(config.get("_name_or_path") or "").rsplit("/", 1)[-1]
    return named if base in ("model", "checkpoint", "") and named else base or path


def _sentence_transformers_pooling(path: str, names: set) -> Optional[Tuple[str, str, str]]:
    """(pooling, where it was read, the file) that sentence-transformers' module config names
    (`1_Pooling/config.json`), if the folder has one."""
    folder = None
    if "modules.json" in names:
        for module in read_json(path, join(path, "modules.json"), list):
            entry = Values(path, "modules.json", module if isinstance(module, dict) else {})
            if entry.text("type", "").endswith(".Pooling"):
                folder = entry.text("path", "")
                if not re.fullmatch(r"[\w.-]+", folder) or folder in (".", ".."):
                    raise CheckpointError(
                        f"{given(path)}: modules.json's Pooling module has the path {folder!r}, not a folder of it"
                    )
                break
    if folder is None and "1_Pooling" in names:
        folder = "1_Pooling"
    if folder is None:
        return None
    config_uri = join(join(path, folder), "config.json")
    config = read_json(path, config_uri)
    where = f"{folder}/config.json"
    modes = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
    if modes == ["pooling_mode_mean_tokens"]:
        return presets.MEAN, f"{where}: mean of the tokens", config_uri
    if modes == ["pooling_mode_cls_token"]:
        return presets.CLS, f"{where}: the [CLS] token", config_uri
    raise CheckpointError(
        f"{given(path)}: {where} asks for {modes or 'no pooling'}; the encoder pools by BERT's pooler, the mean of "
        "the tokens or [CLS]: give --pooling pooler, mean or cls"
    )


def hugging_face_weights(checkpoint: Checkpoint) -> Dict[str, np.ndarray]:
    """The weights of a located Hugging Face folder on a local disk, in this project's layout."""
    files = (
        [checkpoint.weights]
        if checkpoint.weights.endswith(".safetensors")
        else sorted(
            {
                join(os.path.dirname(checkpoint.weights), shard)
                for shard in read_json(checkpoint.path, checkpoint.weights)["weight_map"].values()
            }
        )
    )
    tensors: Dict[str, np.ndarray] = {}
    for uri in files:
        tensors.update(read_safetensors(uri))
    family = families.FAMILIES[checkpoint.family or "bert"]
    named = {ours: tensors[theirs] for ours, theirs in _hf_names(tensors, family.prefix).items()}
    getter = tensor_getter(named, checkpoint.path, "the safetensors weights")
    return family.layout(getter, lambda n: n in named, checkpoint.encoder, checkpoint.has_pooler)
