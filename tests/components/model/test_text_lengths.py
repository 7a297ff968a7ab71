"""Rows' lengths in word pieces as the reference tokenizer (Hugging Face's `tokenizers`, BertWordPieceTokenizer
of a checkpoint's vocab.txt) counts them, and the rows a sequence_length cuts."""

import collections
import os

import pytest

from tests.components.model.checkpoints.folders import MINILM
from tests.data import chinese_intents
from tfxflow.components.model import text_lengths
from tfxflow.components.model.features import FeatureConfig

pytestmark = pytest.mark.integration


def _config(**extra):
    data = {"task": "multiclass", "label": {"name": "y", "column": "intent"}, "text": ["message"], **extra}
    return FeatureConfig.from_dict(data, source="features.yaml")


def test_a_run_counts_the_rows_its_sequence_length_cuts_in_the_vocabularys_word_pieces():
    from tokenizers import BertWordPieceTokenizer

    vocab = os.path.join(MINILM, "vocab.txt")
    messages = [m for m, _ in chinese_intents.rows(500, seed=3)]
    reference = BertWordPieceTokenizer(vocab, lowercase=True)
    pieces = [len(reference.encode(m).ids) for m in messages]  # [CLS] and [SEP] included
    values = collections.Counter(messages)
    config = _config(sequence_length=24, text_vocab_file=vocab)
    cut = sum(n > 24 for n in pieces)
    assert 0 < cut < 500
    (line,) = text_lengths.cut_lines(config, lambda column: values)
    assert line == (
        f"text column message: {cut} of 500 rows ({cut / 500:.1%}) longer than sequence_length 24 are cut "
        "(word pieces of its vocabulary)"
    )
    (sampled,) = text_lengths.cut_lines(config, lambda column: values, max_rows=100)
    first = sum(n > 24 for n in pieces[:100])
    assert sampled.startswith(f"text column message: {first} of the first 100 rows") and "; 500 rows in all" in sampled


def test_without_a_vocabulary_the_count_is_a_lower_bound_in_words():
    values = collections.Counter({"请问我的订单123什么时候发货？谢谢": 3, "退款": 1})  # 16 words, and 2
    (line,) = text_lengths.cut_lines(_config(sequence_length=17), lambda column: values)
    assert line.startswith("text column message: at least 3 of 4 rows (75.0%) longer than sequence_length 17")
    assert "counted in words" in line
