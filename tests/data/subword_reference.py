"""Writes subword_reference.npz: the token ids Hugging Face's fast tokenizers (AutoTokenizer, what a user of a
Hugging Face folder gets) give on real text with the tokenizers of hf_families/roberta (a byte-level BPE saved by
RobertaTokenizerFast: vocab.json, merges.txt, tokenizer.json) and hf_families/xlm-roberta (a sentencepiece unigram
model, sentencepiece.bpe.model, converted by XLMRobertaTokenizer to tokenizer.json), for the parity tests of
components/model/subword/ (tests/components/model/test_subword.py):

- `<family>_ids`, `<family>_splits` (roberta, xlm_roberta): the ids of `corpus()`, <s> and </s> included, not
  truncated, flattened (uint16) with their row splits;
- `spm_rows`, `spm_ids`, `spm_splits`: the sentencepiece library's own ids, mapped as XLM-R's, of the rows where
  they differ from the fast tokenizer's;
- `corpus_sha256`: the corpus' digest, so that the test knows it reads the same texts;
- `fuzz_<family>_ids`, `fuzz_<family>_splits`, `fuzz_spm_ids`, `fuzz_spm_splits`, `fuzz_sha256`: the same of
  `fuzz()`, the library's ids on every row;
- `stripped_<family>_ids`, `stripped_<family>_splits`: the ids of STRIPPED by the folder's tokenizer.json made
  `stripping()`.

It needs transformers, tokenizers and sentencepiece, which the project's lock does not hold: run it in an
environment of its own, e.g.

    python3.11 -m venv /tmp/reference && /tmp/reference/bin/pip install transformers tokenizers sentencepiece
    /tmp/reference/bin/python -m tests.data.subword_reference [OUT.npz]    # from the repository's root
"""

import csv
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = {"roberta": "roberta", "xlm_roberta": "xlm-roberta"}  # key in the npz: folder under hf_families
# Where normalization and pre-tokenization have most to do: whitespace runs, Unicode spaces, compatibility forms,
# contractions, control characters, special tokens written in the text.
UNUSUAL = [
    "",
    " ",
    "   ",
    "a  b   c\t\td \n\n e",
    "ends with spaces   ",
    "  leading spaces",
    "don't it's we'll they've I'm you'd she's 's  's",
    "DON'T IT'S",
    "a\u00a0b\u2009c\u2028d\u202fe\u3000f\u1680g\u205fh\u0085i",
    "a\u2029b\u2000c\u200ad\u180ee\u200bf\x1cg\x1dh\x1ei\x1fj\x0bk\x0cl",
    "a \u00a0b \u3000 c\u3000 d  \u0085e \x85",
    "NUL\x00\x00twice \x00 alone\x00",
    "ﬁne ﬂow ＦＵＬＬ ｗｉｄｔｈ １２３ ½ № ℃ Ⅻ",
    "tab\there\vvertical\fform\rreturn",
    "NUL\x00in\x00side \x07bell \ufffdreplacement \ue000private",
    "zero\u200bwidth\u200djoiner soft\u00adhyphen bidi\u200e",
    "combining e\u0301 a\u0308 and composed é ä",
    "日本語のテキスト 中文文本 한국어 ｶﾀｶﾅ",
    "emoji 😀👍🏽 done",
    "numbers 1234567 3.14159 1,000,000",
    "<s> a </s> b <mask> c <pad> <unk> x<mask>y",
]


# Where Hugging Face's fast tokenizer (tokenizers' Precompiled normalizer, by grapheme cluster) and the
# sentencepiece library (by longest match) normalize differently: half-width katakana with a voiced mark, NFD
# Vietnamese with two marks, a compatibility character followed by a combining mark, ZWJ or variation selector.
GRAPHEMES = [
    "ｶﾞｿﾘﾝ ﾊﾟｿｺﾝ ﾃﾞｰﾀ",
    "Vie\u0323\u0302t Nam, tie\u0302\u0301ng Vie\u0323\u0302t",
    "ｃ\u0301 Ａ\u0308pfel ²\u200d ³\u0308 ⅻ\u0301 ﬁ\u0301 e\u0301\u0301",
    "❤\ufe0f ☺\ufe0f 1\ufe0f\u20e3 👍\u200d❤\ufe0f",
]
# Random strings of the characters where tokenizers differ most (no special tokens: the library reads them as text).
POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:'\"!?-_()[]{}<>/\\@#$%^&*+=~`|")
    + list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\u180e")
    + list("\u200b\u200c\u200d\u2060\ufeff\x00\x01\x07\x7f\x80\x9f\ufffd\ue000\U000f0000")
    + list("éèàüöäßçñøåæœÉÀÜÖÄ\u0301\u0308\u0327\u0303ﬁﬂﬀﬃＡＢＣａｂｃ１２３！？（）½¼¾²³¹№℃™®©Ⅻⅻ")
    + list("日本語中文文本한국어ｶﾀｶﾅﾞﾟ漢字😀👍🏽🇩🇪❤\ufe0fΑΒΓαβγΣσςОДСодс▁Ġ")
    + ["'s", "'t", "'re", "  ", "   ", "...", "---"]
)


# Special tokens written with whitespace beside them, for a tokenizer.json whose <mask> strips the whitespace on its
# left (as roberta-base's and xlm-roberta-base's do) and whose </s> strips both sides.
STRIPPED = [
    "a <mask> b",
    "a   <mask>   b",
    "a\t\u3000<mask>b",
    "<mask> x",
    " <mask>",
    "x </s>  y",
    "x<mask>y",
    "a <s> b <pad> c",
    "Hello world <mask>.",
]


def stripping(definition: str, add_prefix_space: bool) -> str:
    """A tokenizer.json's text with <mask> lstrip, </s> lstrip and rstrip, and ByteLevel's add_prefix_space."""
    import json

    data = json.loads(definition)
    for token in data["added_tokens"]:
        token["lstrip"] = token["content"] in ("<mask>", "</s>")
        token["rstrip"] = token["content"] == "</s>"
    if data["pre_tokenizer"]["type"] == "ByteLevel":
        data["pre_tokenizer"]["add_prefix_space"] = add_prefix_space
    return json.dumps(data, ensure_ascii=False)


def fuzz():
    """GRAPHEMES and 3,000 random strings of up to 30 of POOL's items (seeded)."""
    import random

    rng = random.Random(7)
    return GRAPHEMES + ["".join(rng.choice(POOL) for _ in range(rng.randint(0, 30))) for _ in range(3000)]


def corpus():
    """700 of Debian's English descriptions, 700 of their translations (14 languages), 300 Chinese customer-service
    messages (chinese_intents.py, seed 0) and UNUSUAL."""
    from tests.data import chinese_intents

    with open(os.path.join(HERE, "debian_packages.csv"), newline="", encoding="utf-8") as f:
        english = [r["description"] for r in csv.DictReader(f)][:700]
    with open(os.path.join(HERE, "debian_translations.csv"), newline="", encoding="utf-8") as f:
        translated = [r["description"] for r in csv.DictReader(f)][:700]
    chinese = [message for message, _ in chinese_intents.rows(300, seed=0)]
    return english + translated + chinese + UNUSUAL


def digest(texts):
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()


def flatten(rows):
    import numpy as np

    splits = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    return np.array([i for r in rows for i in r], dtype=np.uint16), splits  # the vocabularies hold 1,500 ids


def spm_ids(folder, texts):
    """The sentencepiece library's pieces, mapped as XLM-R's fairseq ids (transformers' XLMRobertaTokenizer)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "sentencepiece.bpe.model"))
    rows = []
    for text in texts:
        ids = [3 if i == processor.unk_id() else i + 1 for i in processor.encode(text)]
        rows.append([0] + ids + [2])
    return rows


def main(argv):
    import numpy as np
    import transformers

    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "subword_reference.npz")
    folders = {key: os.path.join(HERE, "hf_families", name) for key, name in FAMILIES.items()}
    texts = corpus()
    arrays = {"corpus_sha256": np.array(digest(texts))}
    for family, folder in folders.items():
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        assert tokenizer.is_fast, family
        rows = tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
        arrays[f"{family}_ids"], arrays[f"{family}_splits"] = flatten(rows)
    # Only the rows where the sentencepiece library differs from the fast tokenizer.
    fast = tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
    library = spm_ids(folders["xlm_roberta"], texts)
    rows = [i for i, (a, b) in enumerate(zip(fast, library, strict=True)) if a != b]
    arrays["spm_rows"] = np.array(rows, dtype=np.int32)
    arrays["spm_ids"], arrays["spm_splits"] = flatten([library[i] for i in rows])
    import tokenizers

    for family, folder in folders.items():
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tokenizer = tokenizers.Tokenizer.from_str(stripping(f.read(), add_prefix_space=True))
        rows = [e.ids for e in tokenizer.encode_batch(STRIPPED)]
        arrays[f"stripped_{family}_ids"], arrays[f"stripped_{family}_splits"] = flatten(rows)
    strings = fuzz()
    arrays["fuzz_sha256"] = np.array(digest(strings))
    for family, folder in folders.items():
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        rows = tokenizer(strings, add_special_tokens=True, truncation=False)["input_ids"]
        arrays[f"fuzz_{family}_ids"], arrays[f"fuzz_{family}_splits"] = flatten(rows)
    arrays["fuzz_spm_ids"], arrays["fuzz_spm_splits"] = flatten(spm_ids(folders["xlm_roberta"], strings))
    np.savez_compressed(out, **arrays)
    print(out, {k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
    main(sys.argv)
