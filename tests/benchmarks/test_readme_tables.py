"""The docs' benchmark blocks (README.md and its chapters in docs/) are what benchmarks/readme_tables.py renders
from the results JSON each names: a figure cannot be edited by hand, nor the JSON replaced without the docs."""

import json
import os
import re

from benchmarks import readme_tables
from tests import helpers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK = re.compile(r"<!-- pipeline-benchmark: (\S+) -->\n(.*?)\n<!-- /pipeline-benchmark -->", re.S)


def test_each_lanes_readme_benchmark_block_is_rendered_from_its_results_file():
    blocks = BLOCK.findall(helpers.docs_text())
    lanes = []
    for path, shown in blocks:
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            result = json.load(f)
        assert shown.strip() == readme_tables.render(result).strip(), (
            f"the docs' block differs from `python -m benchmarks.readme_tables {path}`"
        )
        # What the block stands on: a commit of this repository's history, and every goal with its verdict.
        assert _in_history(result["commit"]), f"{path}: {result['commit']} is not a commit before HEAD"
        assert result["goals"] and all(isinstance(g["met"], bool) for g in result["goals"])
        lanes.append(result["machine"].get("lane", "compat"))  # files from before the lanes are the compat lane's
    assert sorted(lanes) == ["compat", "current"], "the docs need one <!-- pipeline-benchmark: FILE --> per lane"


def _in_history(commit: str) -> bool:
    """`commit` (12 hex digits, `+changes` when the tree had uncommitted changes) is HEAD or one before it."""
    import subprocess

    found = re.fullmatch(r"([0-9a-f]{12})(\+changes)?", commit)
    ancestor = ["git", "-C", REPO, "merge-base", "--is-ancestor", found.group(1) if found else "-", "HEAD"]
    return bool(found) and subprocess.run(ancestor, capture_output=True, check=False).returncode == 0


def test_a_results_file_must_name_a_commit_of_this_history():
    import subprocess

    head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert _in_history(head.stdout.strip()[:12]) and _in_history(head.stdout.strip()[:12] + "+changes")
    assert not _in_history("0123456789ab")  # no such commit
    assert not _in_history("fd1dc2d")  # not the 12 digits a results file records


def test_the_blocks_header_says_how_make_bench_was_run():
    """Read from what the invocation ran: its scales, its sides, its tasks (not a default it did not use)."""
    headers = {
        name: readme_tables.render(_results(name)).splitlines()[0]
        for name in ("pipeline-20261204-6.json", "pipeline-20261204-7.json", "pipeline-current-20261205-6.json")
    }
    assert headers["pipeline-20261204-6.json"].endswith('`make bench ARGS="--scale 1000"`.')
    assert headers["pipeline-20261204-7.json"].endswith('`make bench ARGS="--scale 1000 --no-google --no-tasks"`.')
    assert headers["pipeline-current-20261205-6.json"].endswith("`make bench`.")


def _readme_table(header: str) -> list:
    """The rows of the docs' table whose header line is `header`, as lists of cells."""
    lines = helpers.docs_text().splitlines()
    start = lines.index(header) + 2  # the header, then the alignment row
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _results(name: str) -> dict:
    with open(os.path.join(REPO, "benchmarks", "results", name), encoding="utf-8") as f:
        return json.load(f)


def test_the_serving_table_is_its_results_file():
    found = _results("serving-20261130.json")
    expected = [
        [str(r["batch"]), f"{r['p50_ms']:.2f} ms", f"{r['p99_ms']:.2f} ms", f"{r['examples_per_s']:,}"]
        for r in found["rows"]
    ]
    assert _readme_table("| batch | p50 | p99 | examples/s |") == expected


def test_the_trainer_table_is_its_results_file():
    found = _results("trainer-cpu.json")
    google = found["google"]
    expected = [
        [
            "Google `taxi_utils_native_keras` (batch 40)",
            "-",
            google["precision"],
            "off",
            f"{google['examples_per_s']:,.0f}",
            "1.0",
            f"{google['eval_accuracy']:.4f}",
        ]
    ]
    for run in found["tfxflow"]:
        if "examples_per_s" not in run:  # XLA did not finish compiling: said below the table
            continue
        accuracy = run.get("eval_accuracy", run.get("val_accuracy"))
        expected.append(
            [
                "tfxflow",
                run["preset"],
                run["precision"],
                "on" if run["xla"] else "off",
                f"{run['examples_per_s']:,.0f}",
                f"{run['examples_per_s'] / google['examples_per_s']:.1f}",
                f"{accuracy:.4f}",
            ]
        )
    assert _readme_table("| trainer | preset | precision | XLA | examples/s | x Google | eval accuracy |") == expected


def test_the_text_table_is_its_results_file():
    found = _results("text-20261205.json")
    expected = [
        [
            run["preset"],
            f"{run['parameters'] / 1e6:.1f}M",
            run["precision"],
            "on" if run["recompute"] else "off",
            f"{run['examples_per_s']:.1f}",
            f"{run['tokens_per_s']:,.0f}",
            f"{run['mfu']:.1%}",
            f"{run['peak_memory_mb']:.0f} MB",
        ]
        for run in found["runs"]
    ]
    header = "| preset | params | precision | recompute | examples/s | tokens/s | MFU | peak memory |"
    assert _readme_table(header) == expected


def _only_block(kind: str, render) -> dict:
    """The results file of the docs' one `<!-- kind: FILE -->` block, after checking the block is what `render`
    makes of it."""
    pattern = re.compile(rf"<!-- {kind}: (\S+) -->\n(.*?)\n<!-- /{kind} -->", re.S)
    blocks = pattern.findall(helpers.docs_text())
    assert len(blocks) == 1, f"the docs need exactly one <!-- {kind}: FILE --> block"
    ((path, shown),) = blocks
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        result = json.load(f)
    assert shown.strip() == render(result).strip(), (
        f"the docs' block differs from `python -m benchmarks.readme_tables {path}`"
    )
    return result


def test_the_readme_fine_tuning_block_is_rendered_from_its_results_file_and_chose_the_recipe():
    """The fine-tuning figures are what benchmarks/readme_tables.py renders from the text benchmark's results, and
    the recipe's learning rate (presets.FINE_TUNING) is, at the recipe's epochs, within one standard error of the
    held-out accuracy of the best rate of its sweep within BERT's range."""
    from tfxflow.components.model import presets

    result = _only_block("fine-tuning", readme_tables.fine_tuning)
    recipe = presets.FINE_TUNING
    sweep = {r["learning_rate"]: r for r in result["fine_tuning"]["sweep"] if "error" not in r}
    assert recipe.learning_rate in presets.BERT_LEARNING_RATES and recipe.learning_rate in sweep
    in_range = {
        rate: r["accuracy_by_epoch"][recipe.epochs - 1]
        for rate, r in sweep.items()
        if min(presets.BERT_LEARNING_RATES) <= rate <= max(presets.BERT_LEARNING_RATES)
    }
    held_out = sweep[recipe.learning_rate]["held_out_rows"]
    best = max(in_range.values())
    error = (best * (1 - best) / held_out) ** 0.5
    assert len(in_range) >= 3 and in_range[recipe.learning_rate] >= best - error, (in_range, error)
    # What the pretrained weights bring: above bert-mini from scratch at equal steps and at equal time.
    for scratch in result["fine_tuning"]["from_scratch"]:
        assert in_range[recipe.learning_rate] > scratch["accuracy"], scratch["compared"]


def test_the_readme_tuning_block_is_rendered_from_its_results_file_and_tuning_paid_where_the_settings_were_poor():
    result = _only_block("tuning", readme_tables.tuning)
    assert re.fullmatch(r"[0-9a-f]{12}(\+changes)?", result["commit"])
    poor = result["cases"]["poor"]
    metric = result["metric"]
    assert poor["tuned"][metric] >= poor["untuned"][metric] + 0.05
    for case in result["cases"].values():
        assert sum(case["trials"].values()) == result["trials"]
        assert case["untuned"]["returncode"] == case["tuned"]["returncode"] == 0
