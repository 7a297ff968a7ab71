"""Text columns in the Transform graph: BERT's WordPiece tokenization, so that a served model takes raw text.
The vocabulary is learned from the training split by TF Text's own WordPiece learner (the algorithm of BERT's
vocabulary tools) or is a pretrained model's `vocab.txt`; either way it is a Transform asset,
`<column>_wordpiece`, whose line numbers are the token ids.

Tokenization is BERT's, as the reference tokenizers do it (`Tokenization`): Hugging Face's (`tokenizers`'
BertNormalizer, BertPreTokenizer and WordPiece, the rules of every checkpoint published as a Hugging Face folder)
or google-research/bert's `tokenization.py` (the rules of Google's release checkpoints). Text is cleaned (NUL,
U+FFFD and control characters removed, whitespace made a space), accents stripped (NFD, nonspacing marks
removed) and lower-cased for an uncased model, split on whitespace, punctuation and CJK characters, and each word
split into the longest word pieces of the vocabulary; a word longer than `max_chars_per_word` characters, or one
the vocabulary cannot spell, is [UNK]. Only ops TF Serving 2.16 links are used (TF Text's NormalizeUTF8,
RegexSplitWithOffsets and WordpieceTokenizeWithOffsets, TensorFlow's string ops): TF Text's BertTokenizer itself
lower-cases by NFKC case folding instead, which differs from BERT's on ligatures, full-width forms, a final sigma
and more, and counts a word's length in bytes.

Each text column becomes two [batch, sequence_length] int64 features: the token ids, [CLS] first and [SEP]
last, truncated by slicing (TF Serving 2.16 links TF Text 2.12's ops, which lack RoundRobinTrimmer's) and
padded with [PAD]; and the attention mask, 1 over the tokens and 0 over the padding.
"""

from __future__ import annotations

import collections
import os
import re
import uuid
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfxflow.components import object_store
from tfxflow.components.model.tokenization import GOOGLE, HUGGING_FACE, Tokenization
from tfxflow.components.serving_probe import model_ops, ops_tf_lacks

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
RESERVED = (PAD, UNK, CLS, SEP, MASK)  # the first ids of a learned vocabulary, in this order
ASSET_SUFFIX = "_wordpiece"
# The ops beyond TensorFlow's that TF Serving 2.16.1 has: tensorflow_serving/model_servers/BUILD links
# "@org_tensorflow_text//tensorflow_text:ops_lib" into the server (SUPPORTED_TENSORFLOW_OPS), and
# tensorflow_serving/workspace.bzl pins TF Text v2.12.1, whose ops_lib registers these (tensorflow_text/core/ops/
# *.cc; trimmer_ops.cc, RoundRobinTrimmer's, is not in it).
TF_SERVING_TEXT_OPS = frozenset(
    {
        "CaseFoldUTF8", "ConstrainedSequence", "FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets", "MaxSpanningTree", "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "PhraseTokenize",
        "RegexSplitWithOffsets", "RougeL", "SentenceFragments", "SentenceFragmentsV2", "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp", "SentencepieceOp", "SentencepieceStringToIdOp", "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp", "SentencepieceVocabSizeOp", "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets", "TFText>ByteSplitByOffsets", "TFText>ByteSplitWithOffsets",
        "TFText>FastSentencepieceDetokenize", "TFText>FastSentencepieceTokenize", "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin", "TFText>OffsetsToBoiseTags", "TFText>PhraseDetokenize",
        "TFText>WhitespaceTokenizeWithOffsetsV2", "TokenizerFromLogits", "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets", "WordpieceTokenizeWithOffsets",
    }
)  # fmt: skip
# TensorFlow Decision Forests' inference ops, which TF Serving 2.16.1 links too (model_servers/BUILD:
# "@org_tensorflow_decision_forests//tensorflow_decision_forests/tensorflow/ops/inference:kernel_and_op";
# workspace.bzl pins TF-DF 1.3.0, whose ops/inference/op.cc registers these six).
TF_SERVING_DECISION_FOREST_OPS = frozenset(
    {
        "SimpleMLCreateModelResource", "SimpleMLInferenceLeafIndexOpWithHandle", "SimpleMLInferenceOp",
        "SimpleMLInferenceOpWithHandle", "SimpleMLLoadModelFromPath", "SimpleMLLoadModelFromPathWithHandle",
    }
)  # fmt: skip
MAX_LEARNED_WORDS = 100_000  # distinct words the WordPiece learner reads (the most frequent)


class VocabularyError(ValueError):
    """A given vocabulary that cannot serve: missing, empty, or without the special tokens."""


def load_ops() -> None:
    """Registers TF Text's ops, which a graph with a text column (or a module's preprocessing_fn using TF Text)
    needs before it is loaded: in the Trainer, the Evaluator, the serving check and MLflow's model."""
    import tensorflow_text  # noqa: F401 (registers the ops)


def load_ops_for(model_dir: str) -> bool:
    """Registers TF Text's ops when the SavedModel in `model_dir` uses any (a model with a text column, or a
    module's preprocessing_fn with TF Text). Returns whether it does: by the ops' names, so also in a process
    that registered them already."""
    ops = model_ops(model_dir)  # saved_model.pb read once
    if not ops & TF_SERVING_TEXT_OPS and not ops_tf_lacks(model_dir, ops):
        return False
    load_ops()
    return True


def asset_name(column: str) -> str:
    """The Transform asset that holds a text column's vocabulary."""
    return column + ASSET_SUFFIX


def read_vocabulary(path: str) -> List[str]:
    """A pretrained model's vocab.txt: one token per line, the line number its id (a local path, gs://, s3:// or
    minio://). Raises VocabularyError naming the file when it cannot be read or lacks [PAD], [UNK], [CLS] or
    [SEP]."""
    try:
        if object_store.tf_cannot_read(path):  # s3://, minio://: TensorFlow 2.16 has no S3 file system
            raw = object_store.read_bytes(path)
        else:
            with tf.io.gfile.GFile(path, "rb") as stream:
                raw = stream.read()
    except (FileNotFoundError, tf.errors.NotFoundError) as err:
        raise VocabularyError(f"{path}: vocabulary file not found") from err
    except (OSError, tf.errors.OpError, object_store.ObjectStoreError) as err:
        raise VocabularyError(f"{path}: cannot read it: {err}") from err
    try:
        tokens = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise VocabularyError(f"{path}: not UTF-8 text ({err})") from err
    if tokens and tokens[-1] == "":
        tokens.pop()
    tokens = [t.rstrip("\r") for t in tokens]
    missing = [t for t in (PAD, UNK, CLS, SEP) if t not in tokens]
    if missing:
        raise VocabularyError(f"{path}: a BERT vocabulary needs the tokens {missing} (one token per line)")
    seen, repeated = set(), []
    for number, token in enumerate(tokens, start=1):
        if token in seen:
            repeated.append(f"{token!r} (line {number:,})")
        seen.add(token)
    if repeated:
        raise VocabularyError(f"{path}: tokens listed twice: {', '.join(repeated[:5])}; each id needs its own token")
    return tokens


def special_ids(vocabulary: Optional[Sequence[str]]) -> Tuple[int, int, int]:
    """(pad, cls, sep) ids: a given vocabulary's line numbers, else a learned one's (RESERVED first)."""
    tokens = list(vocabulary) if vocabulary is not None else list(RESERVED)
    return tokens.index(PAD), tokens.index(CLS), tokens.index(SEP)


def count_words(batches: Iterable[Tuple]) -> collections.Counter:
    counts = collections.Counter()
    for batch in batches:
        counts.update(batch[0].tolist())
    return counts


def learn_vocabulary(counts: collections.Counter, vocab_size: int) -> List[str]:
    """TF Text's WordPiece learner over word counts, RESERVED first; at most `vocab_size` tokens."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    words = {(w.decode("utf-8", "replace") if isinstance(w, bytes) else w): c for w, c in counts.items()}
    if not words:
        return list(RESERVED)
    # The learner binary-searches the count a token needs, each probe a full pass over the distinct words. V
    # tokens of count >= t take at least V * t of the corpus' word pieces (about its word count), so the
    # search can start at twice the word count over V rather than at the most frequent word's count; and from
    # 1, as a small corpus needs. The MAX_LEARNED_WORDS most frequent words bound a probe's cost on any corpus.
    upper = max(2, 2 * sum(words.values()) // vocab_size)
    return learner.learn(
        words,
        vocab_size=vocab_size,
        reserved_tokens=list(RESERVED),
        upper_thresh=upper,
        lower_thresh=1,
        max_input_tokens=MAX_LEARNED_WORDS,
    )


def _make_analyzer(filename: str, vocab_size: int, given: Optional[Sequence[str]]):
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam

    class WordPieceVocabulary(tft_beam.experimental.PTransformAnalyzer):
        """Counts the words of every batch and writes the vocabulary file; its path is the one output."""

        def expand(self, pcoll):
            def write(counts):
                tokens = list(given) if given is not None else learn_vocabulary(counts, vocab_size)
                # The file's name is the asset's: the export copies it under that name.
                folder = os.path.join(self.base_temp_dir, uuid.uuid4().hex)
                path = os.path.join(folder, filename)
                tf.io.gfile.makedirs(folder)
                with tf.io.gfile.GFile(path, "w") as f:
                    f.write("\n".join(tokens) + "\n")
                return path.encode()

            return (
                pcoll
                | "Count" >> beam.Map(lambda batch: count_words([batch]))
                | "Sum" >> beam.CombineGlobally(_sum_counters)
                | "Write" >> beam.Map(write)
            )

    return WordPieceVocabulary()


def _sum_counters(counters: Iterable[collections.Counter]) -> collections.Counter:
    total = collections.Counter()
    for counts in counters:
        total.update(counts)
    return total


# BERT's basic tokenizer splits words at whitespace, at punctuation (ASCII's and Unicode's P categories) and around
# every CJK ideograph, keeping the punctuation and ideographs as words. google-research/bert's CJK ranges start
# CJK Extension E at U+2B820, Hugging Face's (tokenizers' normalizers/bert.rs, is_chinese_char) at U+2B920.
_GOOGLE_SPLIT = (
    r"\s+|[!-/]|[:-@]|[\[-`]|[{-~]|[\p{P}]|[\x{4E00}-\x{9FFF}]|[\x{3400}-\x{4DBF}]|[\x{20000}-\x{2A6DF}]"
    r"|[\x{2A700}-\x{2B73F}]|[\x{2B740}-\x{2B81F}]|[\x{2B820}-\x{2CEAF}]|[\x{F900}-\x{FAFF}]|[\x{2F800}-\x{2FA1F}]"
)
# Hugging Face's Unicode tables (Rust's unicode_categories crate) are older than RE2's: U+166D and U+111C9 are
# punctuation in them (So and Mn now), U+1734 a nonspacing mark (Mc now). The other differences are classes too
# large to list here (docs/trainer.md counts them).
_SPLIT = _GOOGLE_SPLIT.replace("2B820", "2B920") + r"|[\x{166D}\x{111C9}]"
_HF_STRIP, _HF_STRIP_KEPT = r"(\x{111C9})|[\p{Mn}\x{1734}]", r"\1"


def split_pattern(tokenization: Tokenization) -> str:
    """The basic tokenizer's word boundaries under `tokenization`'s rules (a regex_split delimiter)."""
    return _GOOGLE_SPLIT if tokenization.rules == GOOGLE else _SPLIT


def keep_pattern(tokenization: Tokenization) -> str:
    """The boundaries kept as words: all but whitespace."""
    return split_pattern(tokenization).split("|", 1)[1]


def clean(text):
    """BERT's _clean_text: NUL, U+FFFD and control and format characters removed, whitespace (and line and
    paragraph separators) a space."""
    text = tf.strings.regex_replace(text, r"[\t\n\r\p{Z}]", " ")
    return tf.strings.regex_replace(text, r"[\x{0}\x{FFFD}\p{C}]", "")


def normalize(text, tokenization: Tokenization):
    """Accents stripped and lower-cased as the rules have it, on cleaned text."""
    import tensorflow_text as tf_text

    def strip(t):
        if tokenization.rules == HUGGING_FACE:
            return tf.strings.regex_replace(tf_text.normalize_utf8(t, "NFD"), _HF_STRIP, _HF_STRIP_KEPT)
        return tf.strings.regex_replace(tf_text.normalize_utf8(t, "NFD"), r"\p{Mn}", "")

    def lower(t):
        if tokenization.rules == HUGGING_FACE:  # Rust's char::to_lowercase: no final sigma
            t = tf.strings.regex_replace(t, "Σ", "σ")
        return tf.strings.lower(t, encoding="utf-8")  # ICU's full lower-casing, as Python's str.lower

    # Hugging Face's BertNormalizer strips accents, then lower-cases; Google's tokenizer the other way round.
    if tokenization.rules == HUGGING_FACE and tokenization.accents_stripped:
        text = strip(text)
    if tokenization.lower_case:
        text = lower(text)
    if tokenization.rules == GOOGLE and tokenization.accents_stripped:
        text = strip(text)
    return text


def _words_of(cleaned, tokenization: Tokenization):
    """[rows, words]: the basic tokenizer's words of cleaned text, a word over `max_chars` characters made [UNK]."""
    import tensorflow_text as tf_text

    words = tf_text.regex_split(
        normalize(cleaned, tokenization), split_pattern(tokenization), keep_pattern(tokenization)
    )
    long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > tokenization.max_chars
    return words.with_flat_values(tf.where(long, UNK, words.flat_values))


def _special_parts(text, tokenization: Tokenization, special: Sequence[str]):
    """(parts [batch, parts], which parts are special tokens): Hugging Face's tokenizers take a special token
    written in the text as that token, before any normalization; google-research/bert's does not."""
    import tensorflow_text as tf_text

    if tokenization.rules != HUGGING_FACE or not special:
        parts = tf.RaggedTensor.from_tensor(text[:, tf.newaxis])
        return parts, tf.zeros_like(parts.flat_values, tf.bool)
    pattern = "|".join(re.escape(token) for token in special)
    parts = tf_text.regex_split(text, pattern, pattern)
    flat = parts.flat_values
    is_special = tf.reduce_any(tf.equal(flat[:, tf.newaxis], tf.constant(list(special))[tf.newaxis]), axis=1)
    return parts, is_special


def words(text, tokenization: Optional[Tokenization] = None):
    """[batch, words] ragged strings: the words the WordPiece learner counts and the tokenizer splits (the
    special tokens written in the text left out); `tokenization` None: the default Tokenization."""
    tokenization = tokenization or Tokenization()
    parts, is_special = _special_parts(clean(text), tokenization, RESERVED)
    found = _words_of(tf.where(is_special, "", parts.flat_values), tokenization)
    return parts.with_flat_values(found).merge_dims(1, 2)


def vocabulary(
    text: tf.Tensor, column: str, vocab_size: int, tokenization: Tokenization, given: Optional[Sequence[str]]
):
    """The path of the column's vocabulary file (a Transform asset, annotated as `asset_name(column)`):
    learned from the words of `text` ([batch] strings) or the `given` tokens."""
    import tensorflow_transform as tft

    (path,) = tft.experimental.ptransform_analyzer(
        [words(text, tokenization).flat_values],
        _make_analyzer(asset_name(column), vocab_size, given),
        [tf.string],
        [[]],
        output_asset_default_values=["\n".join(given if given is not None else RESERVED).encode() + b"\n"],
        name=f"{column}_wordpiece_vocabulary",
    )
    tft.annotate_asset(asset_name(column), asset_name(column))
    return path


def word_pieces(text, table, tokenization: Tokenization, special: Sequence[str] = RESERVED):
    """[batch, pieces] int64 ids of `text` ([batch] strings) by the vocabulary `table` (token -> id), without
    [CLS] and [SEP]: what the checkpoint's own tokenizer gives."""
    import tensorflow_text as tf_text

    parts, is_special = _special_parts(clean(text), tokenization, special)
    flat = parts.flat_values
    # A word of max_chars characters may take four bytes each: the character count is what decides.
    wordpiece = tf_text.WordpieceTokenizer(
        table, token_out_type=tf.int64, unknown_token=UNK, max_bytes_per_word=4 * tokenization.max_chars + 4
    )
    ids = wordpiece.tokenize(_words_of(tf.where(is_special, "", flat), tokenization)).merge_dims(1, 2)
    # A special token's one id, after the (no) pieces of its emptied part.
    specials = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(table.lookup(flat), is_special), tf.cast(is_special, tf.int64)
    )
    return parts.with_flat_values(tf.concat([ids, specials], axis=1)).merge_dims(1, 2)


def tokenize(
    text: tf.Tensor,
    vocab_path,
    sequence_length: int,
    tokenization: Optional[Tokenization] = None,
    given: Optional[Sequence[str]] = None,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """([batch, sequence_length] token ids, the same shape of 0/1 attention mask) of `text` ([batch] strings),
    by `vocab_path` (the `given` tokens', or a learned vocabulary's) and `tokenization` (None: the default)."""
    tokenization = tokenization or Tokenization()
    pad, cls, sep = special_ids(given)
    table = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            vocab_path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
        ),
        default_value=-1,
    )
    special = [token for token in RESERVED if given is None or token in given]
    pieces = word_pieces(text, table, tokenization, special)
    pieces = pieces[:, : sequence_length - 2]  # truncation by slicing
    batch = tf.shape(text, out_type=tf.int64)[0]
    ids = tf.concat(
        [tf.fill([batch, 1], tf.constant(cls, tf.int64)), pieces, tf.fill([batch, 1], tf.constant(sep, tf.int64))],
        axis=1,
    )
    lengths = ids.row_lengths()
    dense = ids.to_tensor(default_value=tf.constant(pad, tf.int64), shape=[None, sequence_length])
    mask = tf.sequence_mask(lengths, sequence_length, dtype=tf.int64)
    return dense, mask


class EdgeTokenizer(NamedTuple):
    """What `edge_tokenize` runs: TF Text's FastBertNormalizer and FastWordpieceTokenizer (a FastBertTokenizer's
    two halves), and {special token written in the text: its id} for Hugging Face's rules."""

    normalizer: Any
    wordpiece: Any
    special: Dict[str, int]
    max_chars: int  # a longer word is [UNK], counted in characters (FastWordpiece counts bytes)
    starts_word: Any  # [vocabulary] int8: 1 where a token is no "##" suffix
    characters: Any  # [vocabulary] int32: a token's characters, its "##" left out
    unknown: int


def edge_tokenizer(vocabulary: Sequence[str], tokenization: Tokenization) -> EdgeTokenizer:
    """The tokenizer of `edge_tokenize`: TF Text's FastBertNormalizer with the served graph's normalization
    (`edge_normalizer`: `clean` and `normalize` tabulated code point by code point; building it takes some
    seconds, once a process for each tokenization) and FastWordpieceTokenizer.

    Its ids are the served graph's but where (docs/evaluation-and-serving.md lists them) a character is one of
    the 256 CJK Extension E ideographs U+2B820..U+2B91F (FastWordpiece splits them off, BERT's tokenizers keep
    them in the word), a word ends in "Σ" under google-research/bert's rules (Python's str.lower gives "ς"
    there), or two spacing marks with a combining class come in falling class order (NFD reorders them).
    tests/components/model/test_edge_text.py holds it to that."""
    import tensorflow_text as tf_text

    from tfxflow.components.model import edge_normalizer

    built = edge_normalizer.build(tokenization, clean, normalize, keep_pattern(tokenization))
    tokens = list(vocabulary)
    special = {t: tokens.index(t) for t in RESERVED if t in tokens} if tokenization.rules == HUGGING_FACE else {}
    # FastWordpiece makes a word over max_bytes_per_word bytes [UNK]: as many as max_chars characters can take,
    # the characters counted after it (as `word_pieces` does).
    return EdgeTokenizer(
        tf_text.FastBertNormalizer(model_buffer=built),
        tf_text.FastWordpieceTokenizer(
            tokens, token_out_type=tf.int64, unknown_token=UNK, max_bytes_per_word=4 * tokenization.max_chars + 4
        ),
        special,
        tokenization.max_chars,
        np.array([not t.startswith("##") for t in tokens], np.int8),
        np.array([len(t) - 2 if t.startswith("##") else len(t) for t in tokens], np.int32),
        tokens.index(UNK),
    )


def _row_of_each(splits, count):
    """The row of each of `count` values of a ragged tensor's `splits` (builtin TFLite ops: no RaggedRange)."""
    # How many rows start at each value (empty rows start where the next does), summed along.
    # In int32: TFLite's builtin UnsortedSegmentSum has no int64 kernel.
    at = tf.cast(splits[1:-1], tf.int32)
    starts = tf.math.unsorted_segment_sum(tf.ones_like(at), at, tf.cast(count, tf.int32) + 1)
    return tf.cast(tf.cumsum(starts)[:count], tf.int64)


def _edge_pieces(text, tokenizer: EdgeTokenizer):
    """(flat piece ids, row splits) of `text`; a special token written in the raw text (its bytes, found by TF
    Text's ByteSplitter, a TFLite custom op) is that token's one id, as Hugging Face's tokenizers take it,
    instead of the pieces "[", "sep", "]" that FastWordpiece makes of it; a word of more than `max_chars`
    characters is one [UNK]."""
    import tensorflow_text as tf_text

    normalized, offsets = tokenizer.normalizer.normalize_with_offsets(text)
    ids, starts, _ = tokenizer.wordpiece.tokenize_with_offsets(normalized)
    flat, splits = ids.flat_values, ids.row_splits
    count = tf.size(flat, out_type=tf.int64)
    rows = _row_of_each(splits, count)
    drop = tf.zeros_like(flat, tf.bool)
    if tokenizer.special:
        # Each piece's start in the raw text (FastBertNormalize's offsets map), then in the flat raw bytes.
        raw = tf.gather(offsets.flat_values, tf.gather(offsets.row_splits, rows) + starts.flat_values)
        data = tf_text.ByteSplitter().split(text)
        raw_bytes = tf.cast(data.flat_values, tf.int32)
        size = tf.size(raw_bytes, out_type=tf.int64)
        at = tf.minimum(tf.gather(data.row_splits, rows) + raw, tf.maximum(size - 1, 0))
        ends = tf.gather(data.row_splits, _row_of_each(data.row_splits, size) + 1)
        for token, token_id in tokenizer.special.items():
            pattern = token.encode("utf-8")
            padded = tf.concat([raw_bytes, tf.fill([len(pattern)], -1)], axis=0)
            found = tf.range(size) + len(pattern) <= ends
            for j, byte in enumerate(pattern):
                found = found & tf.equal(padded[j : j + tf.cast(size, tf.int32)], byte)
            covered = found
            for j in range(1, len(pattern)):
                covered = covered | tf.concat([tf.zeros([j], tf.bool), found], axis=0)[: tf.cast(size, tf.int32)]
            first = tf.gather(tf.concat([found, [False]], 0), at)
            inside = tf.gather(tf.concat([covered, [False]], 0), at)
            flat = tf.where(first, tf.constant(token_id, tf.int64), flat)
            drop = drop | (inside & ~first)
    # A word (a piece that is no "##" suffix and those after it) of more than max_chars characters: one [UNK].
    starts_word = tf.cast(tf.gather(tf.constant(tokenizer.starts_word), flat), tf.int32) > 0  # int8: no Greater
    word = tf.cumsum(tf.cast(starts_word, tf.int32)) - 1
    characters = tf.math.unsorted_segment_sum(
        tf.gather(tf.constant(tokenizer.characters), flat), word, tf.reduce_sum(tf.cast(starts_word, tf.int32))
    )
    long = tf.gather(characters, word) > tokenizer.max_chars
    flat = tf.where(long & starts_word, tf.constant(tokenizer.unknown, tf.int64), flat)
    keep = ~(drop | (long & ~starts_word))
    lengths = tf.math.unsorted_segment_sum(tf.cast(keep, tf.int32), tf.cast(rows, tf.int32), tf.size(splits) - 1)
    lengths = tf.cast(lengths, tf.int64)
    return tf.boolean_mask(flat, keep), tf.concat([tf.zeros([1], tf.int64), tf.cumsum(lengths)], axis=0)


def edge_tokenize(
    text: tf.Tensor, vocabulary: Sequence[str], sequence_length: int, tokenization: Tokenization, tokenizer=None
) -> Tuple[tf.Tensor, tf.Tensor]:
    """`tokenize`'s ([batch, sequence_length] ids, mask) made with ops TFLite runs: `edge_tokenizer`'s (TF
    Text's FastBertNormalize, FastWordpieceTokenizeWithOffsets and ByteSplitWithOffsets, custom ops whose TFLite
    kernels TF Text registers; `tokenizer`: one built already) and builtin ops for the special tokens written in
    the text, words too long in characters, [CLS], [SEP], the truncation and the padding (no
    RaggedTensorToTensor or RaggedRange, which TFLite runs only as Select TF ops)."""
    pad, cls, sep = special_ids(vocabulary)
    flat, splits = _edge_pieces(text, tokenizer or edge_tokenizer(vocabulary, tokenization))
    width = sequence_length - 2
    lengths = tf.minimum(splits[1:] - splits[:-1], width)[:, tf.newaxis]
    column = tf.range(width, dtype=tf.int64)[tf.newaxis, :]
    # Each row's first `width` pieces gathered from the flat values; past a row's end, the pad appended last.
    values = tf.concat([flat, tf.constant([pad], tf.int64)], axis=0)
    past = tf.cast(tf.size(flat), tf.int64)
    kept = tf.gather(values, tf.where(column < lengths, splits[:-1, tf.newaxis] + column, past))
    position = tf.range(sequence_length, dtype=tf.int64)[tf.newaxis, :]
    shifted = tf.concat([tf.fill([tf.shape(kept)[0], 1], tf.constant(cls, tf.int64)), kept], axis=1)
    shifted = tf.concat([shifted, tf.fill([tf.shape(kept)[0], 1], tf.constant(pad, tf.int64))], axis=1)
    ids = tf.where(position == lengths + 1, tf.constant(sep, tf.int64), shifted)
    mask = tf.cast(position <= lengths + 1, tf.int64)
    return ids, mask
