"""RoBERTa's byte-level BPE in the Transform graph, with TensorFlow's and TF Text's ops only (as KerasHub's
BytePairTokenizer does): Hugging Face's ByteLevel pre-tokenizer (GPT-2's regular expression, rewritten for RE2,
which has no lookahead), each word's UTF-8 bytes as GPT-2's printable characters (bytes_to_unicode), then the
merges of merges.txt, the lowest rank first, until none applies, and each piece's id in vocab.json.

GPT-2's expression splits off contractions ('s 't 're 've 'm 'll 'd), letters, digits and other characters, each
run with at most one leading space, and whitespace: `\\s+(?!\\S)|\\s+`, where a whitespace run before a word leaves
its last character to the word (a space joins it, another whitespace character stands alone). Here the runs
are split off first, the last character of each run before a word moved, and the words split by the rest of
the expression, which never spans whitespace but for that one leading space. Whitespace is Oniguruma's `\\s`,
which Hugging Face's tokenizers use: Unicode's White_Space, not RE2's ASCII `\\s`."""

from __future__ import annotations

from typing import Collection, Dict, List, Mapping, Tuple

import tensorflow as tf

from tfxflow.components.model.subword import frame
from tfxflow.components.model.subword import tokenizer_files as files

_WHITE = frame.WHITESPACE
WHITESPACE_RUN = f"[{_WHITE}]+"
# GPT-2's expression less its whitespace alternatives, on text without whitespace but a leading space.
WORD = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^" + _WHITE + r"\p{L}\p{N}]+"
NO_MERGE = tf.int64.max


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's encoder.py: each byte a printable character, the printable Latin-1 ones themselves."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def special_ids(vocabulary: List[str]) -> Dict[str, int]:
    """The special tokens (<s> <pad> </s> <unk> <mask>) the vocabulary has, with their ids."""
    index = {token: i for i, token in enumerate(vocabulary)}
    return {token: index[token] for token in files.SPECIAL if token in index}


def pre_tokenize(text) -> tf.RaggedTensor:
    """[batch, words] strings: Hugging Face's ByteLevel pre-tokenizer's words of `text` ([batch] strings)."""
    runs = frame.regex_split(text, WHITESPACE_RUN)  # whitespace runs and the text between them
    flat = runs.flat_values
    is_white = tf.strings.regex_full_match(flat, WHITESPACE_RUN)
    position = tf.range(tf.size(flat, out_type=tf.int64)) - tf.gather(runs.row_starts(), runs.value_rowids())
    last = tf.equal(position, tf.gather(runs.row_lengths(), runs.value_rowids()) - 1)
    chars = tf.strings.length(flat, unit="UTF8_CHAR")
    before_word = is_white & ~last  # a run followed by a word: its last character goes
    cut = tf.maximum(chars - 1, 0)
    head = tf.where(before_word, tf.strings.substr(flat, tf.zeros_like(cut), cut, unit="UTF8_CHAR"), flat)
    tail = tf.where(before_word, tf.strings.substr(flat, cut, tf.ones_like(cut), unit="UTF8_CHAR"), "")
    joins = tf.equal(tail, " ")  # a space joins the word after it; another whitespace character is a word of its own
    white = tf.stack([tf.where(is_white, head, ""), tf.where(joins, "", tail)], axis=1)
    spaced = tf.concat([[False], joins], axis=0)[:-1]  # the piece after a joining space
    word_text = tf.where(is_white, "", tf.where(spaced, tf.strings.join([" ", flat]), flat))
    found = frame.regex_split(word_text, WORD)
    words = tf.concat([tf.RaggedTensor.from_tensor(white), found], axis=1)
    words = tf.ragged.boolean_mask(words, tf.not_equal(words, ""))
    return runs.with_flat_values(words).merge_dims(1, 2)


def _merge(symbols: tf.RaggedTensor, ranks: tf.lookup.StaticHashTable) -> tf.RaggedTensor:
    """Each row's symbols merged pair by pair, the pair of lowest rank first (its leftmost place where it occurs
    more than once), until no pair of the row has a rank: Hugging Face's BPE without dropout. A row is set
    aside once it has no pair left to merge, so that each step works on the rows still merging only."""

    def step(values, splits, index, done_values, done_lengths, done_index):
        words = tf.RaggedTensor.from_row_splits(values, splits, validate=False)
        left, right = words[:, :-1], words[:, 1:]
        rank = ranks.lookup(tf.strings.join([left.flat_values, right.flat_values], separator=" "))
        pair_ranks = left.with_flat_values(rank)
        best = tf.reduce_min(pair_ranks, axis=1)  # NO_MERGE for a row without a known pair
        merging = best < NO_MERGE
        # The rows done: set aside with their index.
        done = tf.ragged.boolean_mask(words, ~merging)
        done_values = tf.concat([done_values, done.flat_values], axis=0)
        done_lengths = tf.concat([done_lengths, done.row_lengths()], axis=0)
        done_index = tf.concat([done_index, tf.boolean_mask(index, ~merging)], axis=0)
        # The others: their pair of lowest rank, its first place, merged.
        words, index = tf.ragged.boolean_mask(words, merging), tf.boolean_mask(index, merging)
        pair_ranks, best = tf.ragged.boolean_mask(pair_ranks, merging), tf.boolean_mask(best, merging)
        at = tf.ragged.range(pair_ranks.row_lengths())
        first = tf.reduce_min(tf.where(tf.equal(pair_ranks, tf.expand_dims(best, 1)), at, NO_MERGE), axis=1)
        values = words.flat_values
        where = (words.row_splits[:-1] + first)[:, tf.newaxis]  # the merged pair's left symbol
        joined = tf.strings.join([tf.gather_nd(values, where), tf.gather_nd(values, where + 1)])
        values = tf.tensor_scatter_nd_update(values, where, joined)
        keep = tf.tensor_scatter_nd_update(tf.ones_like(values, tf.bool), where + 1, tf.zeros_like(joined, tf.bool))
        splits = tf.concat([[0], tf.cumsum(words.row_lengths() - 1)], axis=0)
        return tf.boolean_mask(values, keep), splits, index, done_values, done_lengths, done_index

    empty = tf.zeros([0], tf.int64)
    *_, values, lengths, index = tf.while_loop(
        lambda values, splits, index, *done: tf.size(index) > 0,
        step,
        [symbols.flat_values, symbols.row_splits, tf.range(symbols.nrows()), tf.zeros([0], tf.string), empty, empty],
        shape_invariants=[tf.TensorShape([None])] * 6,
    )
    merged = tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
    return tf.gather(merged, tf.argsort(index))


def tables(vocab_path, merges_path) -> Tuple[tf.lookup.StaticHashTable, tf.lookup.StaticHashTable]:
    """(token -> id, "left right" -> rank) from the vocabulary asset (one token a line, the line number its id)
    and merges.txt (the line number the merge's rank)."""

    def table(path, default):
        return tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
            ),
            default_value=default,
        )

    return table(vocab_path, -1), table(merges_path, NO_MERGE)


def pieces(
    text,
    vocab_path,
    merges_path,
    special: Mapping[str, int],
    add_prefix_space: bool = False,
    lstrip: Collection[str] = (),
    rstrip: Collection[str] = (),
):
    """[batch, pieces] int64 ids of `text` ([batch] strings), without <s> and </s>: `special` (token -> id) are
    the special tokens taken as such where written in the text; `add_prefix_space` as the ByteLevel
    pre-tokenizer's (RoBERTa's False); `lstrip`, `rstrip`: frame.by_parts'. A piece the vocabulary lacks is
    dropped, as Hugging Face's BPE without an unknown token does (a byte-level vocabulary has every byte)."""
    vocab, ranks = tables(vocab_path, merges_path)
    mapping = bytes_to_unicode()
    byte_table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([bytes([b]) for b in range(256)]), tf.constant([mapping[b] for b in range(256)])
        ),
        default_value="",
    )

    def encode(parts):
        if add_prefix_space:
            starts = tf.strings.substr(parts, 0, 1)
            parts = tf.where(tf.not_equal(parts, "") & tf.not_equal(starts, " "), tf.strings.join([" ", parts]), parts)
        words = pre_tokenize(parts)
        # Each distinct word merged once.
        distinct, index = tf.unique(words.flat_values)
        symbols = tf.strings.bytes_split(distinct)
        merged = _merge(symbols.with_flat_values(byte_table.lookup(symbols.flat_values)), ranks)
        ids = merged.with_flat_values(vocab.lookup(merged.flat_values))
        ids = tf.ragged.boolean_mask(ids, ids >= 0)
        return words.with_flat_values(tf.gather(ids, index)).merge_dims(1, 2)

    return frame.by_parts(text, special, encode, lstrip, rstrip)


def tokenize(
    text,
    vocab_path,
    merges_path,
    special: Mapping[str, int],
    sequence_length: int,
    add_prefix_space: bool = False,
    lstrip: Collection[str] = (),
    rstrip: Collection[str] = (),
) -> Tuple[tf.Tensor, tf.Tensor]:
    """([batch, sequence_length] int64 ids `<s> pieces </s>` padded with <pad>, the attention mask) of `text`."""
    ids = pieces(text, vocab_path, merges_path, special, add_prefix_space, lstrip, rstrip)
    return frame.frame(ids, sequence_length, special[files.BOS], special[files.EOS], special[files.PAD])
