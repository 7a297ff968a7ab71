"""The tokenizer files of a Hugging Face folder whose tokenizer is not WordPiece, read without the tokenizers'
libraries: XLM-R's SentencePiece model (`sentencepiece.bpe.model`, its pieces counted from the protobuf) and
RoBERTa's byte-level BPE (`vocab.json`, `merges.txt`), checked against the word embeddings' rows, with the ids of
the special tokens the family uses."""

from __future__ import annotations

from typing import Dict, List, Tuple

from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.files import given, join, read, read_json
from tfxflow.components.model.subword.tokenizer_files import sentencepiece_pieces

SENTENCEPIECE_MODEL = "sentencepiece.bpe.model"
BPE_VOCABULARY, BPE_MERGES = "vocab.json", "merges.txt"
# RoBERTa's special tokens (fairseq's <s>, </s>, <pad>, <unk> and <mask>), by their role.
ROBERTA_TOKENS = {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "unk": "<unk>", "mask": "<mask>"}


def sentencepiece(path: str, names: set, rows: int, pad_token_id: int) -> Tuple[str, Dict[str, int]]:
    """(the model's file, the special tokens' ids) of XLM-R's SentencePiece tokenizer: fairseq's ids, <s> 0, <pad>
    1, </s> 2, <unk> 3, the model's other pieces shifted by one, <mask> after them (pieces + 2 ids in all)."""
    if SENTENCEPIECE_MODEL not in names:
        raise CheckpointError(
            f"{given(path)}: has no {SENTENCEPIECE_MODEL} (XLM-R's SentencePiece model): the word embeddings are "
            "indexed by its pieces"
        )
    uri = join(path, SENTENCEPIECE_MODEL)
    try:
        pieces = len(sentencepiece_pieces(read(path, uri, SENTENCEPIECE_MODEL)))
    except ValueError as err:
        raise CheckpointError(f"{given(path)}: {SENTENCEPIECE_MODEL} is not a SentencePiece model: {err}") from err
    if pieces < 4:
        raise CheckpointError(f"{given(path)}: {SENTENCEPIECE_MODEL} holds {pieces} pieces: not a tokenizer's model")
    ids = pieces + 2
    if ids > rows:
        raise CheckpointError(
            f"{given(path)}: {SENTENCEPIECE_MODEL} makes {ids:,} ids ({pieces:,} pieces, <pad> and <mask>) and the "
            f"word embeddings have {rows:,} rows (a tokenizer of another model?)"
        )
    special = {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": pieces + 1}
    if pad_token_id != special["pad"]:
        raise CheckpointError(
            f"{given(path)}: config.json's pad_token_id is {pad_token_id}; XLM-R's SentencePiece ids put <pad> at 1"
        )
    return uri, special


def byte_bpe(path: str, names: set, rows: int, pad_token_id: int) -> Tuple[str, str, Dict[str, int]]:
    """(vocab.json, merges.txt, the special tokens' ids) of RoBERTa's byte-level BPE."""
    for name in (BPE_VOCABULARY, BPE_MERGES):
        if name not in names:
            raise CheckpointError(
                f"{given(path)}: has no {name} (RoBERTa's byte-level BPE is vocab.json and merges.txt): the word "
                "embeddings are indexed by its tokens"
            )
    vocab_uri, merges_uri = join(path, BPE_VOCABULARY), join(path, BPE_MERGES)
    vocab = read_json(path, vocab_uri)
    wrong = next((k for k, v in vocab.items() if not isinstance(v, int) or isinstance(v, bool) or v < 0), None)
    if wrong is not None:
        raise CheckpointError(f"{given(path)}: {BPE_VOCABULARY}: {wrong!r} has the id {vocab[wrong]!r}")
    if vocab and max(vocab.values()) >= rows:
        raise CheckpointError(
            f"{given(path)}: {BPE_VOCABULARY} has ids up to {max(vocab.values()):,} and the word embeddings "
            f"{rows:,} rows (a tokenizer of another model?)"
        )
    missing: List[str] = [t for t in ROBERTA_TOKENS.values() if t not in vocab]
    if missing:
        raise CheckpointError(f"{given(path)}: {BPE_VOCABULARY} has no {', '.join(missing)} (RoBERTa's special tokens)")
    merges = read(path, merges_uri, BPE_MERGES).decode("utf-8", "replace").splitlines()
    if not any(line and not line.startswith("#version") for line in merges):
        raise CheckpointError(f"{given(path)}: {BPE_MERGES} lists no merges")
    special = {role: vocab[token] for role, token in ROBERTA_TOKENS.items()}
    if pad_token_id != special["pad"]:
        raise CheckpointError(
            f"{given(path)}: config.json's pad_token_id is {pad_token_id}, and {BPE_VOCABULARY} has <pad> at "
            f"{special['pad']}"
        )
    return vocab_uri, merges_uri, special


def tokenization(kind: str) -> tokenization_lib.Tokenization:
    """A SentencePiece model's or a byte-level BPE's: cased, its own normalization."""
    return tokenization_lib.Tokenization(lower_case=False, strip_accents=False, kind=kind)
