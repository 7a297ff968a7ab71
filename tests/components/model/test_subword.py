"""The subword tokenizers of components/model/subword/ against Hugging Face's fast tokenizers (AutoTokenizer on
tests/data/hf_families' RoBERTa and XLM-R folders, ids written by tests/data/subword_reference.py): 1,721 strings,
Debian's descriptions, their translations in 14 languages, Chinese customer-service messages and the Unicode where
whitespace, normalization and special tokens differ most."""

import numpy as np
import pytest
import tensorflow as tf

from tests.data.subword_reference import GRAPHEMES, STRIPPED, UNUSUAL, corpus, digest, fuzz, stripping
from tfxflow.components.model.subword import byte_bpe, frame, sentencepiece
from tfxflow.components.model.subword import tokenizer_files as files

DATA = "tests/data"
ROBERTA = f"{DATA}/hf_families/roberta"
XLM_ROBERTA = f"{DATA}/hf_families/xlm-roberta"


@pytest.fixture(scope="module")
def reference():
    data = np.load(f"{DATA}/subword_reference.npz")
    texts = corpus()
    assert str(data["corpus_sha256"]) == digest(texts)  # the texts the ids were written for
    return texts, data


def rows(data, key):
    ids, splits = data[f"{key}_ids"].astype(np.int64), data[f"{key}_splits"]
    return [ids[a:b].tolist() for a, b in zip(splits[:-1], splits[1:], strict=True)]


@pytest.fixture(scope="module")
def roberta_files(tmp_path_factory):
    """(vocabulary asset, merges.txt, special ids) of the RoBERTa folder, as the Transform writes the asset."""
    tokens = files.read_byte_bpe_vocabulary(f"{ROBERTA}/vocab.json")
    path = tmp_path_factory.mktemp("roberta") / "vocab"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path), f"{ROBERTA}/merges.txt", byte_bpe.special_ids(tokens)


def test_xlm_r_ids_are_hugging_faces_fast_tokenizers_on_real_text_in_fifteen_languages(reference):
    texts, data = reference
    assert len(texts) == 1721
    model = sentencepiece.read_model(f"{XLM_ROBERTA}/sentencepiece.bpe.model")
    ours = sentencepiece.pieces(tf.constant(texts), model).to_list()
    theirs = [r[1:-1] for r in rows(data, "xlm_roberta")]  # without <s> and </s>
    assert sum(map(len, theirs)) > 400_000
    differ = [t for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert differ == []  # no remaining difference (docs/text.md)


def test_the_sentencepiece_library_differs_from_the_fast_tokenizer_where_the_docs_say(reference):
    """The rows where the sentencepiece library (what TF Text's op runs) differs from Hugging Face's fast tokenizer:
    U+0085, which the fast tokenizer's WhitespaceSplit takes as whitespace (sentencepiece.py makes it a space), and
    special tokens written in the text, which the library reads as text (frame.by_parts takes them as tokens)."""
    texts, data = reference
    assert [texts[i] for i in data["spm_rows"]] == [UNUSUAL[8], UNUSUAL[10], UNUSUAL[-1]]
    assert all("\x85" in texts[i] for i in data["spm_rows"][:2]) and "<mask>" in texts[data["spm_rows"][2]]
    library = rows(data, "spm")
    fast = rows(data, "xlm_roberta")
    assert all(library[k] != fast[i] for k, i in enumerate(data["spm_rows"]))


def test_roberta_ids_are_hugging_faces_fast_tokenizers_on_real_text_in_fifteen_languages(reference, roberta_files):
    texts, data = reference
    ours = byte_bpe.pieces(tf.constant(texts), *roberta_files).to_list()
    theirs = [r[1:-1] for r in rows(data, "roberta")]
    assert sum(map(len, theirs)) > 300_000
    differ = [t for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert differ == []  # no remaining difference (docs/text.md)


@pytest.fixture(scope="module")
def fuzzed(reference):
    _, data = reference
    strings = fuzz()
    assert str(data["fuzz_sha256"]) == digest(strings)
    return strings, data


def test_roberta_ids_are_hugging_faces_on_3004_random_strings_of_unusual_characters(fuzzed, roberta_files):
    strings, data = fuzzed
    ours = byte_bpe.pieces(tf.constant(strings), *roberta_files).to_list()
    theirs = [r[1:-1] for r in rows(data, "fuzz_roberta")]
    assert [s for s, a, b in zip(strings, ours, theirs, strict=True) if a != b] == []


# A grapheme cluster's extenders: combining marks, ZWNJ, ZWJ, VS16, half-width katakana's voiced marks.
EXTENDERS = "\u200c\u200d\ufe0f\uff9e\uff9f"


def test_xlm_r_differs_from_hugging_faces_fast_tokenizer_only_where_it_normalizes_grapheme_clusters(fuzzed):
    """Hugging Face's Precompiled normalizer maps a grapheme cluster of under 6 bytes by the shortest prefix the
    charsmap holds, the rest dropped (ｃ + U+0301: c), a longer one character by character (ｶﾞ: カ and a combining
    mark, <unk>); the sentencepiece library, which TF Text's op runs and XLM-R was trained with, maps the longest
    match (ć, ガ). On the 3,004 strings the ids differ from the fast tokenizer's on 131, each holding an extender:
    the library's on all 112 of them without U+0085 or NUL (where the ids follow the fast tokenizer)."""
    import unicodedata

    strings, data = fuzzed
    model = sentencepiece.read_model(f"{XLM_ROBERTA}/sentencepiece.bpe.model")
    ours = sentencepiece.pieces(tf.constant(strings), model).to_list()
    theirs = [r[1:-1] for r in rows(data, "fuzz_xlm_roberta")]
    library = [r[1:-1] for r in rows(data, "fuzz_spm")]
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(differ) == 131 and differ[:3] == [0, 1, 2]  # GRAPHEMES' first three
    assert strings[0] == GRAPHEMES[0] and ours[0] != theirs[0]
    assert all(any(unicodedata.category(c) in ("Mn", "Me") or c in EXTENDERS for c in strings[i]) for i in differ)
    plain = [i for i in differ if "\x85" not in strings[i] and "\x00" not in strings[i]]
    assert len(plain) == 112 and all(ours[i] == library[i] for i in plain)
    assert sum(ours[i] == library[i] for i in differ) == 119
    # Everywhere else the library differs from the fast tokenizer, the ids are the fast tokenizer's.
    assert sum(a != b for a, b in zip(library, theirs, strict=True)) == 317


@pytest.mark.parametrize("family", ["roberta", "xlm_roberta"])
def test_a_folders_tokenizer_json_says_which_special_tokens_take_the_whitespace_beside_them(
    reference, tmp_path, family
):
    """roberta-base's and xlm-roberta-base's tokenizer.json give <mask> lstrip: a folder so written (and its
    ByteLevel add_prefix_space true) against Hugging Face's tokenizer of the same tokenizer.json."""
    import shutil

    _, data = reference
    source = ROBERTA if family == "roberta" else XLM_ROBERTA
    names = ["vocab.json", "merges.txt"] if family == "roberta" else ["sentencepiece.bpe.model"]
    for name in names:
        shutil.copy(f"{source}/{name}", tmp_path / name)
    definition = open(f"{source}/tokenizer.json", encoding="utf-8").read()
    (tmp_path / "tokenizer.json").write_text(stripping(definition, add_prefix_space=True), encoding="utf-8")
    folder = files.read_folder_tokenizer(str(tmp_path / names[0]))
    assert folder.lstrip == {"<mask>", "</s>"} and folder.rstrip == {"</s>"}
    if family == "roberta":
        assert folder.add_prefix_space is True
        tokens = files.read_byte_bpe_vocabulary(str(tmp_path / "vocab.json"))
        vocab = tmp_path / "vocab"
        vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
        special = byte_bpe.special_ids(tokens)
        ours = byte_bpe.pieces(
            tf.constant(STRIPPED), str(vocab), str(tmp_path / "merges.txt"), special, True, folder.lstrip, folder.rstrip
        )
    else:
        assert folder.add_prefix_space is None  # a Metaspace pre-tokenizer
        model = sentencepiece.read_model(str(tmp_path / names[0]))
        ours = sentencepiece.pieces(tf.constant(STRIPPED), model, folder.lstrip, folder.rstrip)
    theirs = [r[1:-1] for r in rows(data, f"stripped_{family}")]
    assert ours.to_list() == theirs
    # Without the flags, the space before <mask> is a piece of its own (RoBERTa's Ġ).
    if family == "roberta":
        plain = byte_bpe.pieces(tf.constant(STRIPPED[:1]), str(vocab), str(tmp_path / "merges.txt"), special, True)
        assert plain.to_list()[0] != theirs[0]


def test_the_pre_tokenizer_splits_as_gpt2s_expression_with_unicode_whitespace():
    # What GPT-2's expression gives (Python's `regex` with `\s+(?!\S)|\s+`).
    words = byte_bpe.pre_tokenize(tf.constant(["Hello  world\t\tfoo  's x   ", "don't\u3000 a", "", "a\x00b"]))
    assert words.to_list() == [
        [b"Hello", b" ", b" world", b"\t", b"\t", b"foo", b" ", b" '", b"s", b" x", b"   "],
        [b"don", b"'t", "\u3000".encode(), b" a"],
        [],
        [b"a", b"\x00", b"b"],
    ]


@pytest.mark.parametrize("family", ["roberta", "xlm_roberta"])
def test_sequences_are_framed_truncated_and_padded_as_hugging_faces(reference, roberta_files, family):
    texts, data = reference
    sample = texts[:40] + texts[1700:]
    theirs = rows(data, family)[:40] + rows(data, family)[1700:]
    length = 24
    if family == "roberta":
        ids, mask = byte_bpe.tokenize(tf.constant(sample), *roberta_files, length)
    else:
        model = sentencepiece.read_model(f"{XLM_ROBERTA}/sentencepiece.bpe.model")
        ids, mask = sentencepiece.tokenize(tf.constant(sample), model, length)
    assert ids.shape == mask.shape == (len(sample), length) and ids.dtype == tf.int64
    truncated = 0
    for got, got_mask, full in zip(ids.numpy().tolist(), mask.numpy().tolist(), theirs, strict=True):
        # Hugging Face's truncation=True, max_length=length: the pieces cut, <s> and </s> kept; <pad> is 1.
        want = full if len(full) <= length else full[: length - 1] + [2]
        truncated += len(full) > length
        assert got == want + [1] * (length - len(want))
        assert got_mask == [1] * len(want) + [0] * (length - len(want))
    assert truncated > 30
    assert ids.numpy()[sample.index("")].tolist()[:3] == [0, 2, 1]  # an empty text: <s> </s>


@pytest.mark.parametrize("batch", [[], [""], ["", ""]], ids=["no rows", "an empty text", "empty texts"])
def test_a_batch_without_text_is_framed(roberta_files, batch):
    model = sentencepiece.read_model(f"{XLM_ROBERTA}/sentencepiece.bpe.model")
    for ids, mask in (
        byte_bpe.tokenize(tf.constant(batch, tf.string), *roberta_files, 5),
        sentencepiece.tokenize(tf.constant(batch, tf.string), model, 5),
    ):
        assert ids.numpy().tolist() == [[0, 2, 1, 1, 1]] * len(batch)
        assert mask.numpy().tolist() == [[1, 1, 0, 0, 0]] * len(batch)


def test_xlm_r_ids_follow_fairseqs_numbering():
    model = sentencepiece.read_model(f"{XLM_ROBERTA}/sentencepiece.bpe.model")
    tokens = sentencepiece.vocabulary(model)
    assert tokens[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and tokens[-1] == "<mask>"
    assert len(tokens) == 1500  # the model's vocab_size (config.json)
    assert sentencepiece.special_ids(model)["<mask>"] == 1499
    ids = sentencepiece.pieces(tf.constant(["\U0001f9ea <mask>"]), model).to_list()[0]
    assert ids == [tokens.index("▁"), 3, 1499]  # an unknown character is <unk> (3), not sentencepiece's 0


def test_nul_is_read_on_where_tf_texts_ops_would_stop():
    parts = frame.regex_split(tf.constant(["a\x00b<s>c"]), "<s>")
    assert parts.to_list() == [[b"a\x00b", b"<s>", b"c"]]


def test_a_file_that_cannot_serve_is_named_with_what_is_wrong(tmp_path):
    bad_json = tmp_path / "vocab.json"
    bad_json.write_text('{"<s>": 0, "a": 2}')
    with pytest.raises(files.VocabularyError, match=r"vocab.json: ids must run from 0 to 1 without gaps; 1 is"):
        files.read_byte_bpe_vocabulary(str(bad_json))
    bad_json.write_text('{"a": 0, "b": 1}')
    with pytest.raises(files.VocabularyError, match=r"needs the tokens \['<s>', '</s>', '<pad>'\]"):
        files.read_byte_bpe_vocabulary(str(bad_json))
    bad_json.write_text("[1, 2")
    with pytest.raises(files.VocabularyError, match="vocab.json: not JSON"):
        files.read_byte_bpe_vocabulary(str(bad_json))
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\nĠ t\nabc\n")
    with pytest.raises(files.VocabularyError, match=r"merges.txt: line 3 is not a merge of two tokens"):
        files.read_merges(str(merges))
    with pytest.raises(files.VocabularyError, match="missing.model: tokenizer file not found"):
        sentencepiece.read_model(str(tmp_path / "missing.model"))
    with pytest.raises(files.VocabularyError, match="merges.txt: not a sentencepiece model"):
        sentencepiece.read_model(str(merges))


def test_a_feature_config_names_the_tokenizers_files_and_they_are_checked_before_any_work(tmp_path):
    from tfxflow.components.model.features import FeatureConfig, FeatureConfigError
    from tfxflow.components.settings import ConfigError
    from tfxflow.pipeline import inputs

    base = {"label": {"name": "y_label", "column": "y"}, "text": ["note"]}
    with pytest.raises(FeatureConfigError, match="tokenizer_kind byte_bpe needs text_merges_file"):
        FeatureConfig.from_dict({**base, "tokenizer_kind": "byte_bpe", "text_vocab_file": "vocab.json"})
    with pytest.raises(FeatureConfigError, match="tokenizer_kind sentencepiece needs text_vocab_file"):
        FeatureConfig.from_dict({**base, "tokenizer_kind": "sentencepiece"})
    with pytest.raises(FeatureConfigError, match=r"tokenizer_kind must be one of \['wordpiece', 'sentencepiece'"):
        FeatureConfig.from_dict({**base, "tokenizer_kind": "bpe"})

    schema = tmp_path / "schema.pbtxt"
    schema.write_text('feature { name: "note" type: BYTES } feature { name: "y" type: INT }')
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes(open(f"{ROBERTA}/{name}", "rb").read())
    features = tmp_path / "features.yaml"
    features.write_text(
        "label: {name: y_label, column: y}\ntext: [note]\ntokenizer_kind: byte_bpe\n"
        "text_vocab_file: vocab.json\ntext_merges_file: merges.txt\n"
    )
    _, loaded = inputs.load_schema_and_features("taxi", str(schema), str(features))
    assert loaded.tokenization.kind == "byte_bpe"
    assert (loaded.text_vocab_file, loaded.text_merges_file) == (
        str(tmp_path / "vocab.json"),
        str(tmp_path / "merges.txt"),
    )
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ t h\n")
    with pytest.raises(ConfigError, match=r"features.yaml: text_merges_file: .*merges.txt: line 2 is not a merge"):
        inputs.load_schema_and_features("taxi", str(schema), str(features))
    features.write_text(
        "label: {name: y_label, column: y}\ntext: [note]\ntokenizer_kind: sentencepiece\ntext_vocab_file: vocab.json\n"
    )
    with pytest.raises(ConfigError, match=r"text_vocab_file: .*vocab.json: not a sentencepiece model"):
        inputs.load_schema_and_features("taxi", str(schema), str(features))


def test_an_edge_model_is_refused_for_a_subword_tokenizer_saying_why(tmp_path):
    import dataclasses
    import json

    from tfxflow.components.edge import edge_convert
    from tfxflow.components.model.tokenization import Tokenization

    record = {
        "ids": "note_xf",
        "mask": "note_xf_mask",
        "sequence_length": 16,
        "vocabulary": "note_wordpiece",
        "tokenization": dataclasses.asdict(Tokenization(kind="sentencepiece")),
    }
    (tmp_path / "assets.extra").mkdir()
    (tmp_path / "assets.extra" / "tfxflow_model.json").write_text(json.dumps({"text": {"note": record}}))
    with pytest.raises(
        edge_convert.Unconvertible,
        match="'note': its tokenizer is .*; an edge model tokenizes with TF Text's FastBertTokenizer",
    ):
        edge_convert._text_records(str(tmp_path))
