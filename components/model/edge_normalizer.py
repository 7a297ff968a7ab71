"""The TFLite tokenizer's normalization made the served graph's: a FastBertNormalizer model built code point by
code point from `text.clean` and `text.normalize` themselves.

TF Text's FastBertNormalize (a custom op with a TFLite kernel) maps each code point of its input to a string
looked up in a table, its model: a flatbuffer (fast_bert_normalizer_model.fbs) of a Darts-clone double-array
trie from a code point's UTF-8 bytes to an (offset, length) in a pool of replacement strings. TF Text's own
models fold by NFKC case folding and turn control characters into spaces; this one holds, for every code point,
what the served graph's cleaning and normalization make of it alone, so the two agree wherever BERT's
normalization works code point by code point: everywhere for Hugging Face's rules (NFD's canonical reordering
moves only combining marks, and those marks are removed; Rust's char::to_lowercase has no context), all but a
word's final "Σ" for google-research/bert's (Python's str.lower gives "ς" there).

A character the served graph splits off as punctuation where FastWordpiece's pre-tokenization (ICU's
u_ispunct, ASCII's symbols, its fixed CJK ranges, ICU's White_Space) keeps it in the word is given spaces
around it, so that the edge splits it off too. The converse (a character FastWordpiece splits and the served
graph does not) cannot be undone by a normalizer: `edge_splits_only` names those characters.
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, FrozenSet, List, Sequence, Tuple

LAST_CODE_POINT = 0x10FFFF
# fast_bert_normalizer.h's encoding of a trie value: bit 30 "differs from the input", the pool offset in bits
# 6-29, the UTF-8 length of the replacement in bits 0-5.
_DIFFERENT = 0x40000000
_LENGTH_BITS = 6
_MAX_LENGTH = (1 << _LENGTH_BITS) - 1
_MAX_OFFSET = (1 << (32 - 2 - _LENGTH_BITS)) - 1
_SEARCH = 1024  # free units a node's first-fit search tries before taking a fresh block


def code_points() -> List[int]:
    """Every Unicode scalar value (surrogates are not characters and cannot be UTF-8)."""
    return [cp for cp in range(LAST_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF]


def served_mapping(tokenization, clean: Callable, normalize: Callable) -> Dict[int, str]:
    """{code point: what the served graph's cleaning and normalization (`text.clean`, `text.normalize`) make of
    it}, for those it changes."""
    import tensorflow as tf

    points = code_points()
    chars = [chr(cp) for cp in points]
    out = normalize(clean(tf.constant(chars)), tokenization).numpy()
    return {cp: o.decode("utf-8") for cp, c, o in zip(points, chars, out, strict=True) if o != c.encode()}


def served_splits(keep: str) -> FrozenSet[int]:
    """The code points the served graph's basic tokenizer makes words of their own (`keep`: its
    `text.keep_pattern`)."""
    import tensorflow as tf

    points = code_points()
    found = tf.strings.regex_full_match(tf.constant([chr(cp) for cp in points]), keep).numpy()
    return frozenset(cp for cp, hit in zip(points, found, strict=True) if hit)


def edge_pretokenization() -> Tuple[FrozenSet[int], FrozenSet[int]]:
    """(the code points FastWordpiece splits off as words of their own, those it takes as whitespace), probed
    through its kernel: "a", the character, "a" with a vocabulary of "a" and "##a" alone."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    points = [cp for cp in code_points() if cp != ord("a")]
    tokenizer = tf_text.FastWordpieceTokenizer(["a", "##a", "[UNK]"], token_out_type=tf.string)
    pieces = tokenizer.tokenize(tf.constant(["a" + chr(cp) + "a" for cp in points]))
    lengths = pieces.row_lengths().numpy()
    split = frozenset(cp for cp, n in zip(points, lengths, strict=True) if n == 3)
    space = frozenset(cp for cp, n in zip(points, lengths, strict=True) if n == 2)
    return split, space


def _trie(keys: Sequence[Tuple[bytes, int]]) -> List[int]:
    """A Darts-clone double array (darts.h's unit layout, read by TF Text's darts_clone_trie_wrapper.h) of
    `keys` (UTF-8 bytes, none empty, none with a 0 byte) to values below 2**31.

    Each node's children lie at `base ^ label`, the leaf (its value) at `base ^ 0`, a base used by one node
    only, so a byte that is no child lands on a unit of another label; every base's block of 256 units is
    inside the array, so no traversal reads past it."""
    root: dict = {}
    for key, value in keys:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units = [0] * 256
    used = bytearray(256)
    used[0] = 1
    bases = set()
    queue = [(root, 0)]
    search_from = 1
    while queue:
        node, position = queue.pop()
        labels = sorted(label for label in node if label is not None)
        needed = ([0] if None in node else []) + labels
        while search_from < len(used) and used[search_from]:
            search_from += 1
        base, candidate = None, search_from
        for _ in range(_SEARCH):  # first fit near the start; else a fresh block at the end
            if candidate >= len(used):
                break
            if not used[candidate]:
                trial = candidate ^ needed[0]
                if trial not in bases and all(
                    trial ^ label >= len(used) or not used[trial ^ label] for label in needed
                ):
                    base = trial
                    break
            candidate += 1
        if base is None:
            base = len(used)
        end = (base | 0xFF) + 1
        if end > len(units):
            units.extend([0] * (end - len(units)))
            used.extend(bytearray(end - len(used)))
        bases.add(base)
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the normalizer's trie is too large for Darts-clone's offsets")
        units[position] |= (offset << 10) | (0x100 if None in node else 0)
        used[base] = 1  # a base's own unit too, leaf or not: the free-unit search may then skip it
        for label in needed:
            used[base ^ label] = 1
        if None in node:
            units[base] = node[None] | 0x80000000
        for label in labels:
            units[base ^ label] = label
            queue.append((node[label], base ^ label))
    return units


@functools.lru_cache(maxsize=8)
def build(tokenization, clean: Callable, normalize: Callable, keep: str) -> bytes:
    """The FastBertNormalizerModel of `tokenization` (a Tokenization): the served graph's cleaning and
    normalization of each code point (`text.clean`, `text.normalize`, `text.keep_pattern`), with spaces
    around a character the served graph splits off and FastWordpiece would not. Tabulating every code point
    through TensorFlow takes some seconds: built once a process for each tokenization."""
    mapping = served_mapping(tokenization, clean, normalize)
    splits, _ = edge_pretokenization()
    alone = served_splits(keep) - splits
    for cp in alone | {cp for cp, out in mapping.items() if any(ord(c) in alone for c in out)}:
        mapping[cp] = "".join(f" {c} " if ord(c) in alone else c for c in mapping.get(cp, chr(cp)))
    return model_buffer(mapping, tokenization.lower_case)


def model_buffer(mapping: Dict[int, str], lower_case: bool) -> bytes:
    """A FastBertNormalizerModel flatbuffer mapping each code point of `mapping` to its string."""
    import flatbuffers
    import numpy as np

    pool = bytearray()
    offsets: Dict[bytes, int] = {}
    keys, zero = [], 0
    for cp in sorted(mapping):
        replacement = mapping[cp].encode("utf-8")
        data = _DIFFERENT
        if replacement:
            if len(replacement) > _MAX_LENGTH:
                raise ValueError(f"U+{cp:04X} normalizes to {len(replacement)} bytes, past {_MAX_LENGTH}")
            if replacement not in offsets:
                offsets[replacement] = len(pool)
                pool += replacement
            if offsets[replacement] > _MAX_OFFSET:
                raise ValueError("the normalizer's string pool is too large")
            data |= len(replacement) | offsets[replacement] << _LENGTH_BITS
        if cp == 0:
            zero = data  # a trie cannot hold the empty key: the model keeps NUL's value apart
        else:
            keys.append((chr(cp).encode("utf-8"), data))
    units = _trie(keys)
    builder = flatbuffers.Builder(4 * len(units) + len(pool) + 1024)
    trie = builder.CreateNumpyVector(np.asarray(units, dtype=np.uint32))
    strings = builder.CreateNumpyVector(np.frombuffer(bytes(pool) or b"\0", dtype=np.uint8))
    builder.StartObject(4)  # fields in fast_bert_normalizer_model.fbs's order
    builder.PrependBoolSlot(0, lower_case, False)
    builder.PrependUOffsetTRelativeSlot(1, trie, 0)
    builder.PrependInt32Slot(2, zero, 0)
    builder.PrependUOffsetTRelativeSlot(3, strings, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
