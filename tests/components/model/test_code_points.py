"""The served graph's tokenization (components/model/text.py) against Hugging Face's, code point by code point:
every Unicode scalar value X in "a" X "a", uncased and cased, its words as tests/data/bert_code_points.json holds
them (written by tests/data/bert_code_points.py with `tokenizers` 0.23.3)."""

import json
import os

import pytest
import tensorflow as tf

from tfxflow.components import lane
from tfxflow.components.model import edge_normalizer, text
from tfxflow.components.model.tokenization import GOOGLE, HUGGING_FACE, Tokenization

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "data", "bert_code_points.json")
# Where TensorFlow's Unicode tables (RE2's and ICU's) and those of Hugging Face's Rust crates disagree; the
# documentation (docs/evaluation-and-serving.md) lists them.
DIFFERENCES = {
    "uncased": {"drop/keep": 438, "split/keep": 127, "keep/changed": 95},
    "cased": {"drop/keep": 20, "split/keep": 127},
}
if lane.name() != lane.COMPAT:
    # TF 2.21's ICU (Unicode 16) decomposes 21 letters of scripts newer than the Rust crates' tables too (Tulu-Tigalari,
    # Gurung Khema, Kirat Rai: U+11383..U+113C8, U+16121..U+16128, U+16D68..U+16D6A, ...): NFD splits them.
    DIFFERENCES["uncased"]["changed/keep"] = 21


def _kind(cp, words):
    x = chr(cp)
    return {("a" + x + "a",): "keep", ("a", x, "a"): "split", ("aa",): "drop", ("a", "a"): "space"}.get(
        tuple(words), "changed"
    )


def _expected(table):
    found = {}
    for first, last, kind in table["runs"]:
        for cp in range(first, last + 1):
            found[cp] = {"split": ["a", chr(cp), "a"], "drop": ["aa"], "space": ["a", "a"]}[kind]
    found.update({int(cp): words for cp, words in table["changed"].items()})
    return found


@pytest.fixture(scope="module")
def reference():
    with open(REFERENCE, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_the_served_words_are_hugging_faces_on_every_code_point_but_where_unicode_tables_differ(reference, casing):
    """1,112,064 code points: the served graph's words are Hugging Face's but on the characters whose Unicode
    data differ between TensorFlow's tables and the Rust crates' (newer marks and format characters removed,
    newer punctuation split off, newer letters not lower-cased), counted in DIFFERENCES."""
    points = edge_normalizer.code_points()
    expected = _expected(reference[casing])
    tokenization = Tokenization(lower_case=casing == "uncased")
    found = text.words(tf.constant(["a" + chr(cp) + "a" for cp in points]), tokenization).to_list()
    counts = {}
    for cp, words in zip(points, found, strict=True):
        words = [w.decode() for w in words]
        want = expected.get(cp, ["a" + chr(cp) + "a"])
        if words != want:
            key = f"{_kind(cp, words)}/{_kind(cp, want)}"
            key = key if key in DIFFERENCES[casing] else "other"
            counts[key] = counts.get(key, 0) + 1
            assert not 0x2B820 <= cp <= 0x2B91F and cp < 0x30000  # CJK and its edges: Hugging Face's ranges
    assert counts == DIFFERENCES[casing]


# is_chinese_char's ranges: tokenizers' src/normalizers/bert.rs (0.22 and 0.23) and google-research/bert's
# tokenization.py `_is_chinese_char`; they differ in CJK Extension E's start.
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F)]
CJK += [(0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
RANGES = {HUGGING_FACE: CJK + [(0x2B920, 0x2CEAF)], GOOGLE: CJK + [(0x2B820, 0x2CEAF)]}


def test_the_cjk_ranges_are_the_reference_tokenizers_at_their_edges(reference):
    """Each range's first and last ideograph and their neighbours outside: a word of its own exactly inside the
    rules' ranges, and for Hugging Face's rules the words of bert_code_points.json."""
    edges = sorted(
        {cp + step for lo, hi in RANGES[HUGGING_FACE] + RANGES[GOOGLE] for cp in (lo, hi) for step in (-1, 0, 1)}
    )
    uncased = _expected(reference["uncased"])
    texts = ["a" + chr(cp) + "a" for cp in edges]
    for rules in (HUGGING_FACE, GOOGLE):
        found = text.words(tf.constant(texts), Tokenization(rules=rules)).to_list()
        for cp, words in zip(edges, found, strict=True):
            words = [w.decode() for w in words]
            inside = any(lo <= cp <= hi for lo, hi in RANGES[rules])
            assert (len(words) == 3) == inside, (rules, hex(cp), words)  # U+F900 and on: NFD's unified forms
            if rules == HUGGING_FACE:
                assert words == uncased.get(cp, ["a" + chr(cp) + "a"]), hex(cp)
    assert uncased[0x2B920] == ["a", chr(0x2B920), "a"] and 0x2B91F not in uncased and 0x2B820 not in uncased
