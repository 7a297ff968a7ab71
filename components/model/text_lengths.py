"""How long a text column's rows are in word pieces, counted before any pipeline runs: `infer-schema` drafts
`sequence_length` from it, and a run says how many rows its `sequence_length` cuts.

With a vocabulary (a checkpoint's, or the feature config's `text_vocab_file`) the count is exact: the word
pieces `text.word_pieces` makes, the tokenizer of the Transform graph, in eager TensorFlow. Without one (the
vocabulary is learned from the training split later, by Transform) it is the row's words (`text.words`): a
learned word-piece vocabulary spells each word in one piece or more, so words are a lower bound, close for a
vocabulary of the data's frequent words and for CJK text (every ideograph a word of one piece).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Dict, Iterable, Optional, Sequence, Tuple

MAX_ROWS = 20_000  # rows counted: a column's first ones, in file order
RUN_MAX_ROWS = 5 * MAX_ROWS  # rows a run counts at its start (cut_lines)
DRAFT_PERCENTILE = 0.95  # the drafted sequence_length holds this share of rows whole
DRAFT_MULTIPLE = 8
DRAFT_MIN = 16
SPECIAL_PIECES = 2  # [CLS] and [SEP]
_BATCH = 1024


class ColumnValues(collections.Counter):
    """A column's {value: rows}; `bounded` when counting stopped at a row bound: the column's first rows, in
    file order, and maybe not all of them."""

    bounded: bool = False


@dataclasses.dataclass(frozen=True)
class Lengths:
    """{pieces per row, without [CLS] and [SEP]: rows}, over `rows` of the column's `total` rows (of its first
    `total` rows when `bounded`: the column may hold more); `unit` says what was counted, `exact` whether it is
    the tokenizer's own count."""

    counts: Dict[int, int]
    unit: str
    exact: bool
    total: int
    bounded: bool = False

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def percentile(self, share: float) -> int:
        """The least length that `share` of the rows are at most (nearest rank); 0 without rows."""
        need, seen = math.ceil(share * self.rows), 0
        for length in sorted(self.counts):
            seen += self.counts[length]
            if seen >= need:
                return length
        return 0

    def over(self, sequence_length: int) -> int:
        """Rows cut at `sequence_length` (theirs and [CLS] and [SEP] do not fit)."""
        return sum(n for length, n in self.counts.items() if length + SPECIAL_PIECES > sequence_length)

    def draft(self, max_positions: int) -> int:
        """The 95th percentile plus [CLS] and [SEP], rounded up to a multiple of 8, at least 16, at most
        `max_positions`."""
        length = self.percentile(DRAFT_PERCENTILE) + SPECIAL_PIECES
        return min(max(DRAFT_MIN, -(-length // DRAFT_MULTIPLE) * DRAFT_MULTIPLE), max_positions)

    def describe(self) -> str:
        """e.g. "median 24, p95 41, max 60 word pieces ... over 2,999 rows"."""
        if self.bounded:
            sample = f"the first {self.rows:,} rows"
        elif self.rows < self.total:
            sample = f"the first {self.rows:,} of {self.total:,} rows"
        else:
            sample = f"{self.rows:,} rows"
        top = max(self.counts) if self.counts else 0
        return (
            f"median {self.percentile(0.5)}, p95 {self.percentile(DRAFT_PERCENTILE)}, max {top} {self.unit} "
            f"per row over {sample}"
        )

    def cut_text(self, sequence_length: int) -> str:
        """e.g. "37 of 2,999 rows (1.2%) longer than sequence_length 64", "of the first 2,999 rows" when they are
        not the whole column."""
        over = self.over(sequence_length)
        bound = "" if self.exact else "at least "
        rows = f"the first {self.rows:,}" if self.bounded or self.rows < self.total else f"{self.rows:,}"
        return (
            f"{bound}{over:,} of {rows} rows ({over / max(self.rows, 1):.1%}) longer than sequence_length "
            f"{sequence_length}"
        )


def sample(values: collections.Counter, max_rows: int = MAX_ROWS) -> Tuple[Sequence[str], Sequence[int]]:
    """(distinct values, rows of each) of a {value: rows} count, the first `max_rows` rows of it."""
    kept, weights, left = [], [], max_rows
    for value, n in values.items():
        if left <= 0:
            break
        kept.append(value)
        weights.append(min(n, left))
        left -= weights[-1]
    return kept, weights


def piece_counts(
    values: Sequence[str], tokenization, vocabulary: Optional[Sequence[str]] = None, subword_files=None
) -> Iterable[int]:
    """Each value's word pieces by `vocabulary` and `tokenization` ([CLS] and [SEP] not counted), or its words
    without a vocabulary; a subword tokenizer's pieces by its `subword_files` (vocabulary, merges) where
    `tokenization.kind` is one."""
    import tensorflow as tf

    from tfxflow.components.model import text

    if subword_files is not None:
        from tfxflow.components.model.subword import assets

        count = assets.piece_counter(tokenization, *subword_files)
        try:
            for start in range(0, len(values), _BATCH):
                yield from count(tf.constant(list(values[start : start + _BATCH]))).row_lengths().numpy().tolist()
        finally:
            count.close()
        return

    table = None
    if vocabulary is not None:
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(vocabulary)), tf.range(len(vocabulary), dtype=tf.int64)
            ),
            default_value=-1,
        )
        special = [token for token in text.RESERVED if token in set(vocabulary)]
    for start in range(0, len(values), _BATCH):
        batch = tf.constant(list(values[start : start + _BATCH]))
        if table is None:
            found = text.words(batch, tokenization)
        else:
            found = text.word_pieces(batch, table, tokenization, special)
        yield from found.row_lengths().numpy().tolist()


def measure(
    values: collections.Counter,
    tokenization,
    vocabulary: Optional[Sequence[str]] = None,
    unit: Optional[str] = None,
    max_rows: int = MAX_ROWS,
    subword_files=None,
) -> Lengths:
    """The Lengths of a column's {value: rows} (a ColumnValues says whether they are its first rows only): word
    pieces by `vocabulary` or a subword tokenizer's `subword_files` (its `unit` in words, e.g. "word pieces of
    bert-base-chinese's vocabulary"), else words."""
    kept, weights = sample(values, max_rows)
    counts: collections.Counter = collections.Counter()
    for length, n in zip(piece_counts(kept, tokenization, vocabulary, subword_files), weights, strict=True):
        counts[length] += n
    exact = vocabulary is not None or subword_files is not None
    return Lengths(
        dict(counts),
        unit or ("word pieces" if exact else "words"),
        exact=exact,
        total=sum(values.values()),
        bounded=isinstance(values, ColumnValues) and values.bounded,
    )


def cut_lines(features, values_of, max_rows: int = RUN_MAX_ROWS) -> list:
    """A line per text column of `features` (a FeatureConfig, its vocabulary and tokenization resolved, as a
    run has them): how many of its rows (`values_of(column)`: {value: rows}, a ColumnValues when bounded) are
    longer than its sequence_length and cut, in the vocabulary's word pieces (a checkpoint's or
    text_vocab_file), else at least, in words."""
    from tfxflow.components.model import text, tokenization

    vocabulary, subword_files = None, None
    if features.tokenizer_kind != tokenization.WORDPIECE:
        subword_files = (features.text_vocab_file, features.text_merges_file)
    elif features.text_vocab_file:
        vocabulary = text.read_vocabulary(features.text_vocab_file)
    lines = []
    for column in features.text:
        found = measure(
            values_of(column), features.tokenization, vocabulary, max_rows=max_rows, subword_files=subword_files
        )
        counted = "" if found.bounded or found.rows == found.total else f"; {found.total:,} rows in all"
        how = (
            "word pieces of its vocabulary"
            if found.exact
            else "counted in words: the vocabulary learned from the training split may spell a word in more pieces"
        )
        lines.append(f"text column {column}: {found.cut_text(features.sequence_length)} are cut ({how}{counted})")
    return lines
