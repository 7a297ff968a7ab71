"""The text benchmark's figures: training FLOPs from BERT's own arithmetic, and one configuration measured."""

import pytest

from benchmarks import text_benchmark


def test_training_flops_are_six_per_parameter_and_token_plus_attention():
    import tf_keras as keras

    from tests.components.model.test_encoder import BERT_VOCAB, bert_parameters, encoder_model

    model = encoder_model("bert-base", BERT_VOCAB, length=128)
    dense = bert_parameters(12, 768, BERT_VOCAB) - (BERT_VOCAB + 512) * 768  # without the two embedding tables
    expected = 128 * (6 * dense + 12 * 12 * 768 * 128)
    assert text_benchmark.training_flops_per_example(model, 12, 768, 128) == expected
    # per sequence of 128: BERT-Base's 6 x 85.6M dense parameters x 128 tokens, and 1.8e9 for attention
    assert expected == pytest.approx(6.58e10 + 1.81e9, rel=0.001)
    assert isinstance(model, keras.Model)


@pytest.mark.integration
def test_one_configuration_reports_throughput_utilization_and_memory():
    spec = {
        "preset": "bert-tiny",
        "precision": "float32",
        "recompute": True,
        "xla": False,
        "gpus": 0,
        "batch": 8,
        "steps": 2,
        "warmup": 1,
        "vocab": 500,
    }
    result = text_benchmark._in_process(spec)
    assert "error" not in result, result
    assert result["examples_per_s"] > 0 and result["tokens_per_s"] == pytest.approx(result["examples_per_s"] * 128)
    assert result["peak_memory_mb"] > 0 and result["parameters"] > 4e5
    lines = text_benchmark.table([result], {"float32": result["train_flops_per_s"] * 4}).splitlines()
    assert lines[2].startswith("| bert-tiny |") and "| 25.0% |" in lines[2]
