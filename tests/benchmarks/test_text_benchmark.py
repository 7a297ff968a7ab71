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


def _row(preset, precision, replicas, flops, **extra):
    return {
        "preset": preset,
        "precision": precision,
        "recompute": False,
        "replicas": replicas,
        "gpus": replicas,
        "parameters": 4.4e6,
        "examples_per_s": 100.0,
        "tokens_per_s": 12800.0,
        "train_flops_per_s": flops,
        "peak_memory_mb": 512.0,
        **extra,
    }


def test_utilization_is_the_flops_over_the_peak_of_the_policys_dtype_times_the_replicas():
    """Model FLOPs utilization from known figures, against the hand value of each row."""
    peaks = {"float32": 1.0e12, "bfloat16": 4.0e12, "float16": 8.0e12}
    rows = [
        _row("bert-tiny", "float32", 1, 3.0e11),  # 3e11 / 1e12: 30.0%
        _row("bert-mini", "mixed_bfloat16", 1, 1.0e12),  # over bfloat16's 4e12: 25.0% (over float32's: 100%)
        _row("bert-base", "mixed_float16", 2, 4.0e12),  # over 2 x float16's 8e12: 25.0% (one GPU's: 50%)
        _row("bert-base", "float32", 4, 6.0e11),  # 6e11 / (4 x 1e12): 15.0%
        _row("bert-large", "mixed_bfloat16", 0, 8.0e11),  # no replica count (CPU): one device, 20.0%
        {"preset": "bert-large", "precision": "float32", "recompute": True, "error": "out of memory"},
    ]
    lines = text_benchmark.table(rows, peaks).splitlines()
    mfu = [line.split("|")[10].strip() for line in lines[2:7]]
    assert mfu == ["30.0%", "25.0%", "25.0%", "15.0%", "20.0%"]
    assert [r["mfu"] for r in rows[:5]] == pytest.approx([0.30, 0.25, 0.25, 0.15, 0.20])
    assert lines[7].startswith("| bert-large | | float32 | True | | | | error: out of memory |")
    # A peak not measured (float16 on a CPU run) falls back to float32's.
    lines = text_benchmark.table([_row("bert-mini", "mixed_float16", 1, 2.5e11)], {"float32": 1.0e12}).splitlines()
    assert lines[2].split("|")[10].strip() == "25.0%"


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
    assert result["replicas"] == 1 and result["examples_per_s"] == pytest.approx(result["batch"] / result["step_s"])
    # Training FLOPs by hand: bert-tiny's 2 layers of 128, less its two embedding tables (500 word pieces and 512
    # positions of 128), 6 per parameter and token, and attention's 12 x 2 x 128 x 128 per token.
    per_example = 128 * (6 * (result["parameters"] - (500 + 512) * 128) + 12 * 2 * 128 * 128)
    assert result["train_flops_per_s"] == pytest.approx(per_example * result["examples_per_s"], rel=1e-9)
    peak = 1.0e10  # FLOP/s; the MFU by hand from the figures above
    expected = per_example * result["examples_per_s"] / peak
    lines = text_benchmark.table([result], {"float32": peak}).splitlines()
    assert lines[2].startswith("| bert-tiny |") and f"| {expected:.1%} |" in lines[2]


@pytest.mark.integration
def test_two_workers_train_one_configuration_together():
    """The multi-worker variant (`--gpu` with two or more GPUs; `--cpu-workers` here): two processes on loopback
    with MultiWorkerMirroredStrategy, whose replicas and global batch count both."""
    spec = {
        "preset": "bert-tiny",
        "precision": "float32",
        "recompute": False,
        "xla": False,
        "gpus": 0,
        "workers": 2,
        "batch": 4,
        "steps": 2,
        "warmup": 1,
        "vocab": 500,
    }
    result = text_benchmark._in_workers(spec, timeout=600)
    assert "error" not in result, result
    assert result["replicas"] == 2 and result["workers"] == 2
    assert result["examples_per_s"] == pytest.approx(2 * result["batch"] / result["step_s"])
    (line,) = text_benchmark.table([result], {"float32": 1.0e10}).splitlines()[2:]
    assert line.split("|")[7].strip() == "2"  # the workers column
