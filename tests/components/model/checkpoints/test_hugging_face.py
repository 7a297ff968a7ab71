"""A Hugging Face folder read as Hugging Face reads it: the real all-MiniLM-L6-v2 folder described by its own
files, its encoder giving what Hugging Face's `BertModel` and sentence-transformers compute
(tests/data/minilm_reference.py ran them), and every kind of folder that cannot serve refused before any work with
one line naming the file."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.components.model.checkpoints.folders import DATA, MINILM, encoder_model, hugging_face_copy, loaded
from tfxflow.components.model import checkpoints, presets, text
from tfxflow.components.model.checkpoints import CheckpointError

TOLERANCE = 1e-4  # float32 against PyTorch's float32 (the bound)


def test_a_hugging_face_folder_is_described_by_its_own_files(minilm):
    assert minilm.kind == checkpoints.HUGGING_FACE and minilm.name == "all-MiniLM-L6-v2"  # README.md's title
    assert minilm.encoder == presets.Encoder(
        layers=6, hidden=384, heads=12, intermediate=1536, max_positions=512, activation="gelu"
    )
    assert minilm.encoder.head_size == 32 and minilm.vocab_size == 30522
    assert minilm.tokenization.lower_case and minilm.tokenization.accents_stripped
    assert minilm.casing_from == "tokenizer_config.json (do_lower_case)"
    assert minilm.tokenization.max_chars == 100  # tokenizer.json's max_input_chars_per_word
    assert (minilm.pooling, minilm.pooling_from) == ("mean", "1_Pooling/config.json: mean of the tokens")
    assert minilm.has_pooler  # the weights hold BERT's pooler too
    assert (minilm.hidden_dropout, minilm.attention_dropout, minilm.head_dropout) == (0.1, 0.1, 0.1)
    # Hugging Face counts 22,713,216 with the token-type table, which is folded into the positions here.
    assert minilm.parameters == 22_713_216 - 2 * 384
    assert minilm.describe() == "all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters)"
    assert minilm.vocab_file == os.path.join(MINILM, "vocab.txt")
    assert os.path.join(MINILM, "1_Pooling", "config.json") in minilm.files
    assert checkpoints.Checkpoint.from_dict(json.loads(json.dumps(minilm.to_dict()))) == minilm


def test_the_encoder_gives_hugging_faces_bert_model_on_the_real_checkpoint(minilm, minilm_weights):
    reference = np.load(os.path.join(DATA, "minilm_reference.npz"))
    ids, mask = reference["input_ids"].astype(np.int64), reference["attention_mask"]
    assert len(ids) >= 50
    # The Transform graph's tokenization gives Hugging Face's ids, [CLS], [SEP] and padding included.
    from tests.data.minilm_reference import sentences

    ours, our_mask = text.tokenize(
        tf.constant(sentences()),
        minilm.vocab_file,
        ids.shape[1],
        minilm.tokenization,
        text.read_vocabulary(minilm.vocab_file),
    )
    np.testing.assert_array_equal(ours.numpy(), ids)
    np.testing.assert_array_equal(our_mask.numpy().astype(bool), mask)
    model = loaded(encoder_model(minilm, ids.shape[1]), minilm_weights)
    states, pooled = model([ids, mask.astype(np.int64)])
    np.testing.assert_allclose(states.numpy()[mask], reference["hidden_states"], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(pooled.numpy(), reference["pooler_output"], atol=TOLERANCE, rtol=0)
    # The checkpoint's own pooling (sentence-transformers' mean of the tokens), before its Normalize module.
    mean = loaded(encoder_model(minilm, ids.shape[1], presets.MEAN), minilm_weights)([ids, mask.astype(np.int64)])[1]
    mean = mean.numpy() / np.linalg.norm(mean.numpy(), axis=1, keepdims=True)
    np.testing.assert_allclose(mean, reference["sentence_embedding"], atol=TOLERANCE, rtol=0)


def _config(**changes):
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        return json.dumps({**json.load(f), **changes})


def _truncated():
    with open(os.path.join(MINILM, "model.safetensors"), "rb") as f:
        return f.read(50_000_000)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"model.safetensors": None, "pytorch_model.bin": b"torch"},
            r"holds PyTorch's pytorch_model.bin and no model.safetensors; .* Convert it once in that folder, with "
            r"PyTorch and safetensors installed: python -c .*safetensors.torch.*save_file",
        ),
        ({"model.safetensors": None}, "config.json is there, and no model.safetensors with the weights"),
        ({"model.safetensors": _truncated()}, r"model.safetensors is truncated: tensor '.*' ends at byte"),
        ({"model.safetensors": b"\x01\x00"}, r"model.safetensors is truncated \(2 bytes\): not a safetensors file"),
        (
            {"config.json": _config(model_type="deberta")},
            "config.json's model_type is 'deberta': DeBERTa's disentangled attention",
        ),
        ({"config.json": _config(hidden_act="swish")}, r"config.json's hidden_act 'swish' is none of"),
        ({"config.json": _config(num_hidden_layers=4)}, r"the weights hold more layers than config.json's .* 4"),
        (
            {"config.json": _config(intermediate_size=1024)},
            r"does not fit its own config: 'block_0/up/kernel' is \[384, 1536\], the config's architecture makes "
            r"it \[384, 1024\]",
        ),
        ({"config.json": _config(num_attention_heads=5)}, "hidden size 384 is not a multiple of 5 heads"),
        ({"config.json": "{not json"}, "config.json is not JSON"),
        ({"vocab.txt": None}, "has no vocab.txt"),
        (
            {"vocab.txt": "[PAD]\nthe\n"},
            r"vocab.txt: a BERT vocabulary needs the tokens \['\[UNK\]', '\[CLS\]', '\[SEP\]'\]",
        ),
        (
            {"vocab.txt": "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(30522)])},
            "vocab.txt has 30,526 word pieces and the word embeddings 30,522 rows",
        ),
        ({"config.json": _config(vocab_size="abc")}, r"config.json's vocab_size is 'abc', not an integer >= 1"),
        ({"config.json": _config(layer_norm_eps=[1e-12])}, r"config.json's layer_norm_eps is \[1e-12\], not a number"),
        ({"config.json": _config(classifier_dropout=1.5)}, r"config.json's classifier_dropout is 1.5, not a number in"),
        ({"config.json": _config(num_hidden_layers=True)}, "config.json's num_hidden_layers is True, not an integer"),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": "false"})},
            "tokenizer_config.json's do_lower_case is 'false', not true or false",
        ),
        (
            {"tokenizer_config.json": json.dumps({"tokenizer_class": "BertJapaneseTokenizer"})},
            "tokenizer_config.json's tokenizer_class is 'BertJapaneseTokenizer'; BERT's WordPiece tokenizer",
        ),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": True, "tokenize_chinese_chars": False})},
            "tokenizer_config.json's tokenize_chinese_chars is false",
        ),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": True, "never_split": ["[X]"]})},
            "tokenizer_config.json's never_split lists words",
        ),
        (
            {"tokenizer.json": json.dumps({"normalizer": {"type": "Sequence"}, "model": {"type": "WordPiece"}})},
            r"tokenizer.json's normalizer, pre-tokenizer and model are \('Sequence', None, 'WordPiece'\)",
        ),
        (
            {"modules.json": json.dumps([{"type": "sentence_transformers.models.Pooling", "path": ""}])},
            "modules.json's Pooling module has the path '', not a folder of it",
        ),
        ({"modules.json": json.dumps({"not": "a list"})}, r"modules.json holds dict, not a JSON list"),
        (
            {
                "model.safetensors": None,
                "model.safetensors.index.json": json.dumps({"weight_map": {"a": "../outside.safetensors"}}),
            },
            "model.safetensors.index.json names '../outside.safetensors', which is no file of the folder",
        ),
        ({"model.safetensors": b"\x02\x00\x00\x00\x00\x00\x00\x00[]"}, "the safetensors header is not a JSON object"),
        (
            {"1_Pooling__config.json": json.dumps({"pooling_mode_max_tokens": True})},
            r"asks for \['pooling_mode_max_tokens'\]",
        ),
    ],
)
def test_a_checkpoint_that_cannot_serve_is_refused_naming_the_file(tmp_path, changes, message):
    folder = hugging_face_copy(str(tmp_path / "model"), **changes)
    with pytest.raises(CheckpointError, match=message) as caught:
        checkpoints.locate(folder)
    assert str(caught.value).startswith(f"--init-checkpoint {folder}: ") and "\n" not in str(caught.value)
