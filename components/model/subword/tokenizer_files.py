"""The subword tokenizers' files, read and checked: a Hugging Face folder's `sentencepiece.bpe.model` (XLM-R's
sentencepiece model) or `vocab.json` and `merges.txt` (RoBERTa's byte-level BPE), from a local path, gs://, s3://
or minio://. A file that cannot serve raises VocabularyError naming it and what is wrong."""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Dict, FrozenSet, List, Optional, Tuple

from tfxflow.components import object_store

# The special tokens of RoBERTa and XLM-R (their tokenizers' bos, pad, eos, unk and mask).
BOS, PAD, EOS, UNK, MASK = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
SPECIAL = (BOS, PAD, EOS, UNK, MASK)


class VocabularyError(ValueError):
    """A tokenizer file that cannot serve: missing, unreadable, malformed, or without the special tokens."""


def _varint(data: bytes, at: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message's fields: a length-delimited value as its bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire in (1, 5):
            value, at = data[at : at + (8 if wire == 1 else 4)], at + (8 if wire == 1 else 4)
        elif wire == 2:
            length, at = _varint(data, at)
            value, at = data[at : at + length], at + length
        else:
            raise ValueError(f"wire type {wire} of field {field}")
        if at > len(data):
            raise ValueError("a field runs past the end")
        yield field, wire, value


def sentencepiece_pieces(data: bytes) -> List[str]:
    """The pieces of a SentencePiece ModelProto in id order (its repeated field 1, each piece's field 1), read from
    the protobuf's fields in Python: no TensorFlow op, so also while a TF1 graph is traced."""
    pieces = []
    for field, wire, value in _fields(data):
        if field == 1 and wire == 2:
            piece = [v for f, w, v in _fields(value) if f == 1 and w == 2]
            pieces.append(piece[0].decode("utf-8") if piece else "")
    return pieces


def read_bytes(path: str) -> bytes:
    import tensorflow as tf

    try:
        if object_store.tf_cannot_read(path):  # s3://, minio://: TensorFlow 2.16 has no S3 file system
            return object_store.read_bytes(path)
        with tf.io.gfile.GFile(path, "rb") as stream:
            return stream.read()
    except (FileNotFoundError, tf.errors.NotFoundError) as err:
        raise VocabularyError(f"{path}: tokenizer file not found") from err
    except (OSError, tf.errors.OpError, object_store.ObjectStoreError) as err:
        raise VocabularyError(f"{path}: cannot read it: {err}") from err


def _text(path: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise VocabularyError(f"{path}: not UTF-8 text ({err})") from err


def read_byte_bpe_vocabulary(path: str) -> List[str]:
    """vocab.json's tokens in id order (its ids must be 0..n-1, each once), with <s>, </s> and <pad>."""
    try:
        mapping = json.loads(_text(path, read_bytes(path)))
    except json.JSONDecodeError as err:
        raise VocabularyError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from err
    if not isinstance(mapping, dict) or not mapping:
        raise VocabularyError(f"{path}: a byte-level BPE vocabulary is a JSON object of token -> id")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in mapping.values()):
        raise VocabularyError(f"{path}: every id must be an integer")
    by_id: Dict[int, str] = {}
    for token, index in mapping.items():
        if index in by_id:
            raise VocabularyError(f"{path}: id {index} is given to {by_id[index]!r} and {token!r}")
        by_id[index] = token
    if sorted(by_id) != list(range(len(by_id))):
        missing = next(i for i in range(len(by_id)) if i not in by_id)
        raise VocabularyError(f"{path}: ids must run from 0 to {len(by_id) - 1} without gaps; {missing} is missing")
    tokens = [by_id[i] for i in range(len(by_id))]
    odd = [t for t in tokens if not t or "\n" in t]
    if odd:  # the Transform asset holds one token a line
        raise VocabularyError(f"{path}: tokens that are empty or hold a line break: {odd[:3]}")
    missing = [t for t in (BOS, EOS, PAD) if t not in mapping]
    if missing:
        raise VocabularyError(f"{path}: a RoBERTa vocabulary needs the tokens {missing}")
    return tokens


def read_merges(path: str) -> Tuple[str, List[str]]:
    """(merges.txt's text, its merges as "left right" in rank order). The header line `#version: ...` that
    tokenizers writes is not a merge."""
    content = _text(path, read_bytes(path))
    lines = content.split("\n")
    merges = []
    for number, line in enumerate(lines, start=1):
        if (number == 1 and line.startswith("#version")) or not line:
            continue
        if len(line.split(" ")) != 2:
            raise VocabularyError(f"{path}: line {number:,} is not a merge of two tokens ('left right'): {line!r}")
        merges.append(line)
    if not merges:
        raise VocabularyError(f"{path}: no merges")
    return content, merges


@dataclasses.dataclass(frozen=True)
class FolderTokenizer:
    """What a Hugging Face folder's tokenizer.json says beyond the vocabulary: the special tokens that take the
    whitespace on their left (`lstrip`) or right (`rstrip`) with them, and the ByteLevel pre-tokenizer's
    `add_prefix_space` (None: not a ByteLevel one)."""

    lstrip: FrozenSet[str] = frozenset()
    rstrip: FrozenSet[str] = frozenset()
    add_prefix_space: Optional[bool] = None


def read_folder_tokenizer(vocab_file: str) -> FolderTokenizer:
    """The tokenizer.json beside `vocab_file`, read for FolderTokenizer's settings; the defaults where there is
    none (a folder without it: the slow tokenizers' files only)."""
    import tensorflow as tf

    path = posixpath.join(posixpath.dirname(vocab_file), "tokenizer.json")
    try:
        exists = object_store.exists(path) if object_store.tf_cannot_read(path) else tf.io.gfile.exists(path)
    except (OSError, tf.errors.OpError, object_store.ObjectStoreError) as err:
        raise VocabularyError(f"{path}: cannot read it: {err}") from err
    if not exists:
        return FolderTokenizer()
    try:
        data = json.loads(_text(path, read_bytes(path)))
        added = [t for t in data.get("added_tokens") or () if t.get("content") in SPECIAL]
        pre_tokenizer = data.get("pre_tokenizer") or {}
        byte_level = pre_tokenizer.get("type") == "ByteLevel"
    except (json.JSONDecodeError, AttributeError, TypeError) as err:
        raise VocabularyError(f"{path}: not a tokenizer.json ({err})") from err
    return FolderTokenizer(
        lstrip=frozenset(t["content"] for t in added if t.get("lstrip")),
        rstrip=frozenset(t["content"] for t in added if t.get("rstrip")),
        add_prefix_space=bool(pre_tokenizer.get("add_prefix_space")) if byte_level else None,
    )
