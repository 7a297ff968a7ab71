"""XLM-RoBERTa's tokenizer in the Transform graph: TF Text's SentencepieceTokenizer (the ops SentencepieceOp and
SentencepieceTokenizeOp, which TF Serving 2.16 links) over the folder's `sentencepiece.bpe.model`, with the ids
fairseq gave XLM-R and transformers' XLMRobertaTokenizer keeps: <s> 0, <pad> 1, </s> 2, <unk> 3, a sentencepiece
piece its id + 1 (its <unk> 3), <mask> last. The model's proto is an attribute of the graph's op, so the
SavedModel carries it; the Transform also carries the file and its pieces as assets (subword/assets.py)."""

from __future__ import annotations

import functools
from typing import Collection, List, Tuple

import tensorflow as tf

from tfxflow.components.model.subword import frame
from tfxflow.components.model.subword import tokenizer_files as files

# fairseq's dictionary before the sentencepiece pieces (transformers' XLMRobertaTokenizer.fairseq_tokens_to_ids).
FAIRSEQ = {files.BOS: 0, files.PAD: 1, files.EOS: 2, files.UNK: 3}
OFFSET = 1  # a piece's id is its sentencepiece id + 1: fairseq's four tokens take 0..3, sentencepiece's three 0..2
# TF Text's op reads its input up to the first NUL (a C string); the sentencepiece library and Hugging Face's
# tokenizer read on and make NUL an unknown character. A private-use code point of the last plane, which XLM-R's
# nmt_nfkc normalization keeps and no model has as a piece, stands for it: the same <unk>, joined with the
# unknown characters beside it as NUL's is.
NUL_STAND_IN = "\U0010fffd"
# Hugging Face's pre-tokenizer (WhitespaceSplit, after the model's normalization) splits at U+0085 (NEXT LINE),
# Rust's whitespace; sentencepiece's normalization keeps it, an unknown character: a space is what the fast
# tokenizer sees there.


def read_model(path: str) -> bytes:
    """The serialized sentencepiece model at `path`; VocabularyError where TF Text cannot load it (checked where
    TensorFlow runs eagerly: the run's checks before any step; not in a traced TF1 graph, whose ops would stay)."""
    model = files.read_bytes(path)
    if not tf.executing_eagerly():
        return model
    try:
        _tokenizer(model).vocab_size()
    except (tf.errors.OpError, ValueError) as err:
        raise files.VocabularyError(f"{path}: not a sentencepiece model ({str(err).splitlines()[0]})") from err
    return model


def _tokenizer(model: bytes):
    import tensorflow_text as tf_text

    return tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)


@functools.lru_cache(maxsize=4)
def _pieces(model: bytes) -> Tuple[str, ...]:
    # Read from the model's protobuf in Python (no op, so also while the Transform traces a TF1 graph), once a
    # model: XLM-R's holds 250,000 pieces, and a count of rows asks for its special ids each batch.
    return tuple(files.sentencepiece_pieces(model))


def vocabulary(model: bytes) -> List[str]:
    """The tokens in id order, as XLMRobertaTokenizer numbers them: fairseq's four, the model's pieces from its
    id 3 on (its <unk>, <s> and </s> are fairseq's), <mask>."""
    return list(FAIRSEQ) + list(_pieces(model)[3:]) + [files.MASK]


def special_ids(model: bytes) -> dict:
    """The special tokens' ids, <mask> the last: the vocabulary size minus one."""
    return {**FAIRSEQ, files.MASK: len(_pieces(model)) + OFFSET}


def pieces(text, model: bytes, lstrip: Collection[str] = (), rstrip: Collection[str] = ()) -> tf.RaggedTensor:
    """[batch, pieces] int64 XLM-R ids of `text` ([batch] strings), without <s> and </s>; `lstrip`, `rstrip`:
    frame.by_parts'."""
    tokenizer = _tokenizer(model)
    unk = tokenizer.string_to_id(files.UNK)

    def encode(parts):
        parts = tf.strings.regex_replace(tf.strings.regex_replace(parts, r"\x00", NUL_STAND_IN), r"\x{85}", " ")
        ids = tokenizer.tokenize(parts)
        mapped = tf.where(tf.equal(ids.flat_values, unk), FAIRSEQ[files.UNK], ids.flat_values + OFFSET)
        return ids.with_flat_values(tf.cast(mapped, tf.int64))

    return frame.by_parts(text, special_ids(model), encode, lstrip, rstrip)


def tokenize(
    text, model: bytes, sequence_length: int, lstrip: Collection[str] = (), rstrip: Collection[str] = ()
) -> Tuple[tf.Tensor, tf.Tensor]:
    """([batch, sequence_length] int64 ids `<s> pieces </s>` padded with <pad>, the attention mask) of `text`."""
    return frame.frame(
        pieces(text, model, lstrip, rstrip), sequence_length, FAIRSEQ[files.BOS], FAIRSEQ[files.EOS], FAIRSEQ[files.PAD]
    )
