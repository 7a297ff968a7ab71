"""The side-by-side fine-tuning benchmark's plan and recipe: both sides read the same batches of the same rows, and
the reference is told the pipeline's own recipe in exactly the keys it reads."""

import numpy as np
import pytest

from benchmarks import text_vs_pytorch
from benchmarks.reference import torch_finetune
from benchmarks.text_benchmark import default_checkpoint


def test_the_reference_is_given_the_pipelines_recipe_in_the_keys_it_reads():
    config = text_vs_pytorch.recipe(default_checkpoint(), steps=130, classes=6, seed=0, threads=2, untimed=5)
    assert set(config) == set(torch_finetune.CONFIG_KEYS)
    # The pipeline's fine-tuning recipe for all-MiniLM-L6-v2 (presets.FINE_TUNING, the folder's own dropout and
    # sentence-transformers' mean pooling), and the 10% warmup of adamw's schedule.
    assert (config["learning_rate"], config["adam_epsilon"], config["clip_norm"]) == (5e-5, 1e-6, 1.0)
    assert (config["hidden_dropout"], config["attention_dropout"], config["head_dropout"]) == (0.1, 0.1, 0.1)
    assert config["pooling"] == "mean" and config["warmup_steps"] == 13 and config["weight_decay"] == 0.01


@pytest.mark.integration
def test_the_plan_holds_the_same_rows_at_fixed_and_grouped_widths(tmp_path):
    path = str(tmp_path / "plan.npz")
    plan = text_vs_pytorch.write_plan(path, default_checkpoint(), 128, 32, 2, 4, seed=0)
    arrays = np.load(path)
    rows, mask = plan["train_rows"], arrays["train_mask"]
    assert plan["steps"] == 2 * (rows // 32) and plan["widths"] == [32, 64, 96, 128]
    for mode in text_vs_pytorch.MODES:
        batches, widths = arrays[f"{mode}_batches"], arrays[f"{mode}_widths"]
        assert batches.shape == (plan["steps"], 32) and batches.min() >= 0 and batches.max() < rows
        # Each batch's width holds its longest row: nothing but padding is cut.
        assert all(mask[b].sum(axis=1).max() <= w for b, w in zip(batches, widths, strict=True))
        # Two epochs of shuffled rows: each row about twice (grouping windows cross the epochs' boundary).
        counts = np.bincount(batches.ravel(), minlength=rows)
        assert counts.max() <= 3 and (counts >= 1).mean() > 0.95, mode
    assert set(arrays["fixed_widths"]) == {128} and set(arrays["grouped_widths"]) <= {32, 64, 96, 128}
    assert plan["fed_width_mean"]["grouped"] < 0.9 * plan["fed_width_mean"]["fixed"]
    held = arrays["eval_batches"]
    assert sorted(held[held >= 0].tolist()) == list(range(plan["held_out_rows"]))  # every held-out row once
