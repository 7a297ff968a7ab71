"""A checkpoint's casing: what its tokenizer's files say, which its vocabulary must agree with, else what its
vocabulary shows."""

import json

import pytest

from tests.components.model.checkpoints.folders import hugging_face_copy
from tfxflow.components.model import checkpoints
from tfxflow.components.model.checkpoints import CheckpointError


def test_the_casing_is_the_tokenizers_and_must_be_its_vocabularys(tmp_path):
    upper = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nThe\n"
    folder = hugging_face_copy(str(tmp_path / "m"), **{"vocab.txt": upper})  # do_lower_case: true
    with pytest.raises(CheckpointError, match="tokenizer_config.json .* says uncased, and its vocabulary holds upper"):
        checkpoints.locate(folder)
    cased = hugging_face_copy(
        str(tmp_path / "cased"), **{"vocab.txt": upper, "tokenizer_config.json": json.dumps({"do_lower_case": False})}
    )
    found = checkpoints.locate(cased)
    assert not found.tokenization.lower_case and not found.tokenization.accents_stripped
    # Without tokenizer_config.json: tokenizer.json's BertNormalizer; without either, the vocabulary.
    normalizer = hugging_face_copy(str(tmp_path / "normalizer"), **{"tokenizer_config.json": None})
    found = checkpoints.locate(normalizer)
    assert found.tokenization.lower_case and found.casing_from == "tokenizer.json (BertNormalizer) (do_lower_case)"
    bare = hugging_face_copy(str(tmp_path / "bare"), **{"tokenizer_config.json": None, "tokenizer.json": None})
    found = checkpoints.locate(bare)
    assert found.tokenization.lower_case and found.casing_from == "its vocabulary (no upper-case word pieces)"
    assert found.tokenization.max_chars == 100  # Hugging Face's default without tokenizer.json
