"""The TFLite tokenizer (text.edge_tokenize, its normalizer components/model/edge_normalizer.py) against the served
graph (text.tokenize) and Hugging Face's `tokenizers`, on Chinese customer-service messages (tests/data/
chinese_intents.py) with a vocabulary laid out as bert-base-chinese's, full-width punctuation and currency signs,
control characters, mojibake and special tokens written in the text: in TensorFlow and through the TFLite converter
and interpreter with TF Text's kernels; and code point by code point."""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from tests.data import chinese_intents
from tfxflow.components import lane
from tfxflow.components.model import edge_normalizer, text
from tfxflow.components.model.tokenization import GOOGLE, Tokenization

LENGTH = 64
# Full-width punctuation, currency signs, compatibility forms NFKC case folding would change and BERT's do not.
PUNCTUATION = "，。？！：；（）【】《》“”‘’、～…—·￥¥＄€£％＃＆＠ア"
ODD = [
    "价格：￥99…（含税）～满100减10！",
    "ＶＩＰ会员１２月，ｉＰｈｏｎｅ　手机壳",
    "don\u00e2\u0080\u0099t work\u00e2\u0080\u0094订单\u0085取消",  # UTF-8 read as Latin-1: C1 controls in the words
    "退款\x00到账\x07了吗\x1b[0m？\u200b谢谢\u00ad\ufeff",  # C0 controls, zero-width and format characters
    "客服\ue000你好\ufffd，请\u202e回复",  # private use, replacement character, bidi override
    "ﬁne ™ ² ½ ß Ǆ",  # folded by NFKC case folding, kept by BERT's lower-casing
    "Straße İstanbul ΟΔΟΣ Ｅ＝ｍｃ²",
    "ア" * 40 + " " + "x" * 100 + " " + "x" * 101 + " " + "é" * 60 + " " + "ア" * 101,  # 100 characters, not bytes
    "𠀀𪜀𫝀\U0002b820\U0002b91f\U0002b920好",  # CJK Extensions B, C, D, E (edges), F
]
SPECIAL = ["订单[SEP]退款", "[CLS] 你好 [MASK]", "[sep] [ SEP]"]


def vocabulary():
    """bert-base-chinese's layout: [PAD], [unused1-99], [UNK] [CLS] [SEP] [MASK], then the characters (full-width
    punctuation, ASCII, every character of the data set, lower-cased as BERT's uncased tokenizer does), their
    ## forms, and a few Latin words."""
    chars = sorted(set(chinese_intents.characters()) | set(PUNCTUATION) | {chr(c) for c in range(0x21, 0x7F)})
    chars = sorted({c.lower() for c in chars if not c.isspace()})
    words = [
        "iphone",
        "wifi",
        "app",
        "vip",
        "sf",
        "express",
        "ems",
        "paypal",
        "thanks",
        "hi",
        "no",
        "don",
        "work",
        "οδος",
        "οδοσ",
    ]
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return tokens + chars + ["##" + c for c in chars] + words + ["##" + w for w in words[:4]]


def messages():
    return [m for m, _, _, _ in chinese_intents.records(400, seed=7)] + ODD


def _reference(tokens, lower_case=True):
    """Hugging Face's BERT tokenizer over `tokens` (BertNormalizer, BertPreTokenizer, WordPiece)."""
    import tokenizers
    from tokenizers import models, normalizers, pre_tokenizers

    reference = tokenizers.Tokenizer(
        models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    reference.normalizer = normalizers.BertNormalizer(lowercase=lower_case)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    reference.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return reference


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    tokens = vocabulary()
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return tokens, path


def _ids(rows, length=LENGTH):
    """`rows` of piece ids as the served graph lays them out: [CLS] ... [SEP], padded with 0."""
    out = []
    for ids in rows:
        kept = [101] + ids[: length - 2] + [102]
        out.append(kept + [0] * (length - len(kept)))
    return np.array(out)


def test_chinese_messages_are_hugging_faces_ids_in_the_served_graph_and_at_the_edge(chinese):
    """400 messages and the odd texts: the served graph's ids are Hugging Face's, and so are the edge tokenizer's
    (TF Text's FastBertTokenizer with the served normalization), where TF Text's own normalizer would have
    made "，" "," and "…" "...": every message differs then."""
    import tensorflow_text as tf_text

    tokens, path = chinese
    texts = messages()
    tokenization = Tokenization()
    theirs = _ids([e.ids for e in _reference(tokens).encode_batch(texts, add_special_tokens=False)])
    served = text.tokenize(tf.constant(texts), path, LENGTH, tokenization, tokens)[0].numpy()
    edge = text.edge_tokenize(tf.constant(texts), tokens, LENGTH, tokenization)[0].numpy()
    unknown = tokens.index("[UNK]")
    assert (theirs == unknown).sum() < 0.01 * (theirs > 0).sum()  # the vocabulary covers the messages
    differ = [t for t, a, b in zip(texts, served, theirs, strict=True) if (a != b).any()]
    assert differ == []
    # The edge's one difference here: FastWordpiece splits CJK Extension E's first 256 ideographs off.
    differ = [t for t, a, b in zip(texts, edge, theirs, strict=True) if (a != b).any()]
    assert differ == [ODD[-1]]
    folded = text.edge_tokenizer(tokens, tokenization)._replace(
        normalizer=tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=True)
    )
    own = text.edge_tokenize(tf.constant(texts[:400]), tokens, LENGTH, tokenization, folded)[0].numpy()
    assert sum((a != b).any() for a, b in zip(own, theirs[:400], strict=True)) > 300


@pytest.mark.parametrize(
    "tokenization",
    [Tokenization(lower_case=False), Tokenization(lower_case=False, strip_accents=True), Tokenization(rules=GOOGLE)],
    ids=["cased", "cased-accents-stripped", "google"],
)
def test_the_edge_gives_the_served_ids_under_every_tokenization(chinese, tokenization):
    """Cased, accents stripped without lower-casing (TF Text's own normalizers have no such model) and
    google-research/bert's rules: the edge's ids are the served graph's on the messages and the odd texts but
    the CJK Extension E row (Hugging Face's rules) and a word's final Σ (Google's: Python's str.lower gives ς)."""
    tokens, path = chinese
    texts = messages()
    served = text.tokenize(tf.constant(texts), path, LENGTH, tokenization, tokens)[0].numpy()
    edge = text.edge_tokenize(tf.constant(texts), tokens, LENGTH, tokenization)[0].numpy()
    differ = [t for t, a, b in zip(texts, served, edge, strict=True) if (a != b).any()]
    assert differ == ([ODD[6]] if tokenization.rules == GOOGLE else [ODD[-1]])


def test_special_tokens_written_in_the_text_are_those_tokens_at_the_edge_too(chinese):
    """Hugging Face's tokenizer (and the served graph) take "[SEP]" written in the text as that token, before
    normalization, "[sep]" not; FastWordpiece sees "[", "sep", "]", which the edge makes [SEP] by the raw bytes."""
    tokens, path = chinese
    texts = SPECIAL + ["[SEP]", "[UNK][MASK]x[PAD]", "a[SE", "P]b", "", "订[CLS]"]
    tokenization = Tokenization()
    theirs = _ids([e.ids for e in _reference(tokens).encode_batch(texts, add_special_tokens=False)])
    served = text.tokenize(tf.constant(texts), path, LENGTH, tokenization, tokens)[0].numpy()
    edge = text.edge_tokenize(tf.constant(texts), tokens, LENGTH, tokenization)[0].numpy()
    assert (served == theirs).all()
    assert served[0][1:5].tolist() == [tokens.index("订"), tokens.index("单"), 102, tokens.index("退")]
    assert (edge == theirs).all()


@pytest.mark.integration
def test_the_tflite_model_tokenizes_as_the_served_graph(chinese, tmp_path):
    """edge_tokenize converted by TFLite's converter (TF Text's ops as custom ops) and run by the interpreter
    with TF Text's registered kernels, row by row: the served graph's ids and mask."""
    import tensorflow_text
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    tokens, path = chinese
    tokenization = Tokenization()
    tokenizer = text.edge_tokenizer(tokens, tokenization)

    class Edge(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, texts):
            ids, mask = text.edge_tokenize(texts, tokens, LENGTH, tokenization, tokenizer)
            return {"ids": ids, "mask": mask}

    module = Edge()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    converter.allow_custom_ops = True
    model = converter.convert()
    interpreter = InterpreterWithCustomOps(
        model_content=model, custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS
    )
    runner = interpreter.get_signature_runner()
    texts = messages()[:40] + ODD[:-1] + SPECIAL
    served = text.tokenize(tf.constant(texts), path, LENGTH, tokenization, tokens)
    for row, message in enumerate(texts):
        answer = runner(texts=np.array([message.encode()], dtype=object))
        np.testing.assert_array_equal(answer["ids"][0], served[0][row].numpy(), err_msg=message)
        np.testing.assert_array_equal(answer["mask"][0], served[1][row].numpy(), err_msg=message)


def test_the_edge_normalizer_is_the_served_normalization_on_every_code_point():
    """FastBertNormalize with the built model maps each of the 1,112,064 code points as the served graph's
    clean and normalize do, but for the characters it puts spaces around; FastWordpiece then splits off
    exactly the served graph's punctuation and CJK ideographs, and CJK Extension E's first 256 ideographs."""
    import tensorflow_text as tf_text

    tokenization = Tokenization()
    points = edge_normalizer.code_points()
    assert len(points) == 1_112_064
    mapping = edge_normalizer.served_mapping(tokenization, text.clean, text.normalize)
    keep = text.keep_pattern(tokenization)
    built = edge_normalizer.build(tokenization, text.clean, text.normalize, keep)
    normalizer = tf_text.FastBertNormalizer(model_buffer=built)
    out = normalizer.normalize(tf.constant([chr(cp) for cp in points])).numpy()
    differ = {cp: o.decode() for cp, o in zip(points, out, strict=True) if o.decode() != mapping.get(cp, chr(cp))}
    spaced = {cp for cp, o in differ.items() if o == f" {mapping.get(cp, chr(cp))} "}
    # 50 punctuation characters newer than TF Text 2.16's ICU (2.21's knows them), and U+166D and U+111C9,
    # punctuation in Hugging Face's tables (So and Mn in TensorFlow's)
    assert set(differ) == spaced and len(spaced) == (52 if lane.name() == lane.COMPAT else 2)
    categories = {unicodedata.category(chr(cp)) for cp in spaced - {0x166D, 0x111C9}}
    assert categories - {"Cn"} <= {"Po", "Pd", "Ps", "Pe"}
    assert ord("，") not in mapping and mapping[ord("Ａ")] == "ａ" and mapping[0x85] == "" and mapping[0xA0] == " "
    splits, spaces = edge_normalizer.edge_pretokenization()
    served = edge_normalizer.served_splits(keep)
    # TF Text 2.21's ICU (Unicode 16) also knows 13 punctuation characters that RE2's and Hugging Face's tables do
    # not: the edge splits them off, the served graph keeps them in the word (docs/evaluation-and-serving.md).
    newer = {0x1B4E, 0x1B4F, 0x1B7F, 0x10D6E, 0x113D4, 0x113D5, 0x113D7, 0x113D8, 0x11BE1, 0x16D6D, 0x16D6E, 0x16D6F}
    newer = set() if lane.name() == lane.COMPAT else newer | {0x1E5FF}
    assert splits - served == set(range(0x2B820, 0x2B920)) | newer
    assert served - splits == spaced
    assert all(mapping.get(cp, chr(cp)) in ("", " ") for cp in spaces)  # whitespace is a space or removed before


def test_the_one_normalization_that_is_not_code_point_by_code_point():
    """NFD orders combining marks by their class: the nonspacing ones are removed after it, but 23 spacing marks
    with a class (viramas, Hangul tone marks U+302E/F, musical symbols U+1D165..U+1D172) stay, so two of them in
    falling class order are reordered by the served graph (and Hugging Face) and not by the table."""
    import tensorflow_text as tf_text

    tokenization = Tokenization()
    built = edge_normalizer.build(tokenization, text.clean, text.normalize, text.keep_pattern(tokenization))
    normalizer = tf_text.FastBertNormalizer(model_buffer=built)
    texts = ["a\U0001d16d\U0001d165a", "a\U0001d165\U0001d16da", "é\u0323\u0301Ä"]
    served = [t.decode() for t in text.normalize(text.clean(tf.constant(texts)), tokenization).numpy()]
    edge = [t.decode() for t in normalizer.normalize(tf.constant(texts)).numpy()]
    assert served == ["a\U0001d165\U0001d16da", "a\U0001d165\U0001d16da", "ea"]
    assert edge == [texts[0], served[1], served[2]]


def test_the_normalizer_trie_maps_every_key_and_nothing_else():
    """The Darts-clone double array read by TF Text's kernel: keys of 1 to 4 bytes, values of 31 bits."""
    import tensorflow_text as tf_text

    mapping = {0x41: "x", 0xE9: "", 0x4E00: "一一", 0x1F600: " 😀 ", 0x10FFFF: "end", 0: "zero"}
    normalizer = tf_text.FastBertNormalizer(model_buffer=edge_normalizer.model_buffer(mapping, False))
    probe = [chr(cp) for cp in (*mapping, 0x42, 0xE8, 0x4E01, 0x1F601, 0x10FFFE)]
    out = [o.decode() for o in normalizer.normalize(tf.constant(["a" + c + "b" for c in probe])).numpy()]
    assert out == ["a" + mapping.get(ord(c), c) + "b" for c in probe]
