"""Writes bert_code_points.json: what Hugging Face's BERT tokenization (`tokenizers`' BertNormalizer and
BertPreTokenizer, the Rust code and Unicode tables every Hugging Face BERT checkpoint is tokenized with) makes of
every Unicode scalar value X written inside a word, "a" X "a", uncased (lower-cased, accents stripped) and cased:
the words it splits the text into. tests/components/model/test_code_points.py holds the served graph
(components/model/text.py) to it, code point by code point.

Most characters stay in the word unchanged ("aXa"): those are not written. The others are written as runs of
code points that become the same kind of words, [first, last, kind]: "split" (a word of its own: "a", X, "a"),
"drop" (removed: "aa"), "space" (a space: "a", "a"); and one by one where the character changes:
{code point: the words}.

It needs `tokenizers` (0.23.3 wrote the file in the repository), which the project's tests do not: run it in an
environment of its own, e.g.

    python3.11 -m venv /tmp/reference && /tmp/reference/bin/pip install tokenizers==0.23.3
    /tmp/reference/bin/python tests/data/bert_code_points.py [OUT.json]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAST = 0x10FFFF


def kind(cp, words):
    """'keep', 'split', 'drop', 'space' or None (the character changes) for the words of "a" chr(cp) "a"."""
    x = chr(cp)
    return {
        ("a" + x + "a",): "keep",
        ("a", x, "a"): "split",
        ("aa",): "drop",
        ("a", "a"): "space",
    }.get(tuple(words))


def table(lower_case):
    """{"runs": [[first, last, kind], ...], "changed": {code point: words}} for one casing."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lower_case)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    runs, changed = [], {}
    for cp in range(LAST + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates: not characters
            continue
        words = [w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str("a" + chr(cp) + "a"))]
        found = kind(cp, words)
        if found is None:
            changed[str(cp)] = words
        elif found != "keep":
            if runs and runs[-1][2] == found and runs[-1][1] == cp - 1:
                runs[-1][1] = cp
            else:
                runs.append([cp, cp, found])
    return {"runs": runs, "changed": changed}


def main(argv):
    import tokenizers

    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "bert_code_points.json")
    data = {"tokenizers": tokenizers.__version__, "uncased": table(True), "cased": table(False)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
