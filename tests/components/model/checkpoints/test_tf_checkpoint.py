"""A Google BERT release (TF1 names, no `checkpoint` state file) of the MiniLM weights reads as its folder or its
prefix, and gives the Hugging Face folder's weights through the other layout."""

import os

import numpy as np

from tfxflow.components.model import checkpoints, presets


def test_a_google_release_reads_as_its_folder_or_its_prefix(release, minilm, minilm_weights):
    assert not os.path.exists(os.path.join(release, "checkpoint"))  # as Google's zips
    for path in (release, os.path.join(release, "bert_model.ckpt")):
        found = checkpoints.locate(path)
        assert found.kind == checkpoints.GOOGLE_BERT and found.name == "uncased_L-6_H-384_A-12"
        assert found.weights == os.path.join(release, "bert_model.ckpt")
        # google-research/bert's modeling.py: "gelu" is the tanh approximation; layer norms of 1e-12.
        assert found.encoder == presets.Encoder(6, 384, 12, 1536, 512, presets.GELU_TANH, 1e-12)
        assert found.tokenization.rules == "google" and found.tokenization.max_chars == 200
        assert found.casing_from == "the release name uncased_L-6_H-384_A-12" and found.tokenization.lower_case
        assert (found.pooling, found.vocab_size, found.parameters) == ("pooler", 30522, minilm.parameters)
    weights = checkpoints.weights(checkpoints.locate(release))
    assert sorted(weights) == sorted(minilm_weights)
    for key, value in minilm_weights.items():  # the same weights, through the other layout
        np.testing.assert_allclose(weights[key], value, rtol=0, atol=1e-6, err_msg=key)
