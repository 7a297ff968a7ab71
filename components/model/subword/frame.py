"""What the subword tokenizers share in the Transform graph: the special tokens written in the text taken as those
tokens (as Hugging Face's tokenizers take their added tokens, before any normalization), and the frame of a
sequence: `<s> pieces </s>`, truncated to the sequence length and padded, with its attention mask."""

from __future__ import annotations

import re
from typing import Callable, Collection, Mapping, Tuple

import tensorflow as tf

# TF Text's regex_split reads its input up to the first NUL (as a C string). A noncharacter stands for NUL while
# text is split and NUL is put back after: only a text holding U+10FFFF itself is split as if that were NUL.
NUL_STAND_IN = "\U0010ffff"
# Unicode's White_Space: Rust's char::is_whitespace and Oniguruma's \s, which Hugging Face's tokenizers use (RE2's
# \s is ASCII's).
WHITESPACE = r"\t\n\x0B\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"


def regex_split(text, pattern: str) -> tf.RaggedTensor:
    """tf_text.regex_split(text, pattern, pattern) (the matches kept as parts), NUL kept."""
    import tensorflow_text as tf_text

    parts = tf_text.regex_split(tf.strings.regex_replace(text, r"\x00", NUL_STAND_IN), pattern, pattern)
    return parts.with_flat_values(tf.strings.regex_replace(parts.flat_values, NUL_STAND_IN, "\x00"))


def by_parts(
    text, special: Mapping[str, int], encode: Callable, lstrip: Collection[str] = (), rstrip: Collection[str] = ()
) -> tf.RaggedTensor:
    """[batch, pieces] int64 ids of `text` ([batch] strings): `encode` ([n] strings -> [n, pieces] int64 ids) of
    the text between the `special` tokens (token -> id) written in it, each of those one id; a token of `lstrip`
    (`rstrip`) takes the whitespace on its left (right) with it, as a tokenizer.json's added token of that flag."""
    text = tf.convert_to_tensor(text, tf.string)
    if not special:
        return encode(text)
    tokens = sorted(special, key=len, reverse=True)  # the longest first where one holds another
    white = f"[{WHITESPACE}]*"
    pattern = "|".join((white if t in lstrip else "") + re.escape(t) + (white if t in rstrip else "") for t in tokens)
    parts = regex_split(text, pattern)
    flat = parts.flat_values
    bare = tf.strings.regex_replace(flat, f"^[{WHITESPACE}]+|[{WHITESPACE}]+$", "") if lstrip or rstrip else flat
    ids = tf.constant([special[t] for t in tokens], tf.int64)
    hits = tf.equal(bare[:, tf.newaxis], tf.constant(tokens)[tf.newaxis])
    is_special = tf.reduce_any(hits, axis=1)
    encoded = encode(tf.where(is_special, "", flat))
    # A special token's one id, after the (no) pieces of its emptied part.
    special_ids = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(tf.gather(ids, tf.argmax(tf.cast(hits, tf.int32), axis=1)), is_special),
        tf.cast(is_special, tf.int64),
    )
    return parts.with_flat_values(tf.concat([encoded, special_ids], axis=1)).merge_dims(1, 2)


def frame(pieces: tf.RaggedTensor, sequence_length: int, bos: int, eos: int, pad: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """([batch, sequence_length] int64 ids `bos pieces eos`, the pieces cut to sequence_length - 2 as Hugging
    Face's truncation does, padded with `pad`; the 0/1 attention mask of the same shape)."""
    pieces = pieces[:, : sequence_length - 2]
    batch = pieces.nrows()
    ids = tf.concat(
        [tf.fill([batch, 1], tf.constant(bos, tf.int64)), pieces, tf.fill([batch, 1], tf.constant(eos, tf.int64))],
        axis=1,
    )
    dense = ids.to_tensor(default_value=tf.constant(pad, tf.int64), shape=[None, sequence_length])
    mask = tf.sequence_mask(ids.row_lengths(), sequence_length, dtype=tf.int64)
    return dense, mask
