"""A SavedModel this pipeline pushed is a checkpoint: its encoder's record, vocabulary asset and weights."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.components.model.checkpoints.folders import loaded
from tfxflow.components.model import checkpoints, encoder, presets


def test_a_pushed_saved_model_is_a_checkpoint_of_its_record(tmp_path):
    from tfxflow.components import names
    from tfxflow.components.model import tokenization

    spec = presets.Encoder(2, 32, 4, 64, 16, presets.GELU_ERF, 1e-7)
    ids = keras.Input((8,), dtype="int64")
    mask = keras.Input((8,), dtype="int64")
    states = encoder.encoder_states(ids, mask, 40, spec, 0.0, "review_xf")
    trained = keras.Model([ids, mask], encoder.pool(states, mask, spec, presets.MEAN, "review_xf"))
    module = tf.Module()
    module.model_variables = list(trained.variables)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
    (tmp_path / "review_wordpiece").write_text("\n".join(tokens) + "\n")
    module.vocabulary = tf.saved_model.Asset(str(tmp_path / "review_wordpiece"))
    pushed = tmp_path / "pushed" / "3"
    tf.saved_model.save(module, str(pushed))
    record = {
        "task": "binary",
        "encoders": {
            "review_xf": {
                "encoder": spec.to_dict(),
                "vocab_size": 40,
                "tokenization": {
                    "lower_case": False,
                    "strip_accents": None,
                    "rules": "huggingface",
                    "max_chars_per_word": None,
                },
                "pooling": "mean",
                "dropout": 0.1,
            }
        },
    }
    (pushed / names.MODEL_INFO_FILE).parent.mkdir(exist_ok=True)
    (pushed / names.MODEL_INFO_FILE).write_text(json.dumps(record))
    found = checkpoints.locate(str(pushed))
    assert (found.kind, found.encoder, found.vocab_size, found.pooling) == ("saved_model", spec, 40, "mean")
    assert found.tokenization == tokenization.Tokenization(lower_case=False)
    assert found.vocab_file == str(pushed / "assets" / "review_wordpiece") and found.encoder_input == "review_xf"
    weights = checkpoints.weights(found)
    fresh = encoder.encoder_states(ids, mask, 40, spec, 0.0, "body_xf")
    body = keras.Model([ids, mask], encoder.pool(fresh, mask, spec, presets.MEAN, "body_xf"))
    loaded(body, weights, "body_xf")
    rows = np.array([[2, 9, 12, 3, 0, 0, 0, 0]] * 2)
    np.testing.assert_allclose(body([rows, rows != 0]).numpy(), trained([rows, rows != 0]).numpy(), atol=1e-6)
    # A pushed model of a subword tokenizer holds its pieces, not the files its Transform was made from: refused in
    # one line, naming the folder to give instead.
    record["encoders"]["review_xf"]["tokenization"]["kind"] = tokenization.SENTENCEPIECE
    (pushed / names.MODEL_INFO_FILE).write_text(json.dumps(record))
    with pytest.raises(checkpoints.CheckpointError) as refused:
        checkpoints.locate(str(pushed))
    message = str(refused.value)
    assert "tokenizes with a SentencePiece model" in message and "give the Hugging Face folder" in message
    assert "\n" not in message
