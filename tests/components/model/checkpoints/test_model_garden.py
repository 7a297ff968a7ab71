"""A Model Garden checkpoint made by Model Garden's own converter gives what its BertEncoder computed
(tests/data/model_garden_reference.py)."""

import os

import numpy as np

from tests.components.model.checkpoints.folders import GARDEN, encoder_model, loaded
from tfxflow.components.model import checkpoints, presets


def test_a_model_garden_checkpoint_gives_model_gardens_bert_encoder():
    reference = np.load(os.path.join(GARDEN, "reference.npz"))
    found = checkpoints.locate(os.path.join(GARDEN, "uncased_L-2_H-32_A-4"))
    assert found.kind == checkpoints.MODEL_GARDEN and found.weights.endswith("bert_model.ckpt-1")  # `checkpoint` file
    assert found.encoder == presets.Encoder(2, 32, 4, 128, 64, presets.GELU_TANH)
    assert found.tokenization.max_chars == 400  # Model Garden's tokenization.py
    assert found.has_pooler and found.pooling == "pooler"
    ids, mask = reference["input_ids"].astype(np.int64), reference["attention_mask"].astype(np.int64)
    states, pooled = loaded(encoder_model(found, ids.shape[1]), checkpoints.weights(found))([ids, mask])
    kept = mask.astype(bool)
    np.testing.assert_allclose(states.numpy()[kept], reference["sequence_output"][kept], atol=1e-5, rtol=0)
    np.testing.assert_allclose(pooled.numpy(), reference["pooled_output"], atol=1e-5, rtol=0)
