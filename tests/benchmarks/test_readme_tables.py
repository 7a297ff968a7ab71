"""The docs' benchmark blocks (README.md and its chapters in docs/) are what benchmarks/readme_tables.py renders
from the results JSON each names: a figure cannot be edited by hand, nor the JSON replaced without the docs."""

import json
import os
import re
import shutil

import pytest

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
    # These ran 1x and 100x without the run with the patches off, the default before 1x, 10x, 40x and 100x.
    assert headers["pipeline-20261204-6.json"].endswith(
        '`make bench ARGS="--scales 1,100 --scale 1000 --no-patches-off"`.'
    )
    assert headers["pipeline-20261204-7.json"].endswith(
        '`make bench ARGS="--scales 1,100 --scale 1000 --no-google --no-tasks --no-patches-off"`.'
    )
    assert headers["pipeline-current-20261205-6.json"].endswith('`make bench ARGS="--scales 1,100 --no-patches-off"`.')
    default = _results("pipeline-current-20261205-6.json")
    default["runs"]["ours-patches-off"] = default["runs"]["ours-cold-1"]
    for scale in (10, 40):
        default["scale_series"].append({**default["scale_series"][-1], "scale": scale})
    default["scale_series"].sort(key=lambda e: e["scale"])
    assert readme_tables.render(default).splitlines()[0].endswith("`make bench`.")


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


def _results_named_before(header: str) -> dict:
    """The results file the docs name last before the table whose header line is `header` (its "The latest run
    (`benchmarks/results/FILE`: ...)"), after checking it names a commit of this history."""
    text = helpers.docs_text()
    named = re.findall(r"`benchmarks/results/([\w.-]+\.json)`", text[: text.index("\n" + header + "\n")])
    assert named, f"no results file named before {header}"
    found = _results(named[-1])
    assert _in_history(found.get("commit", "")), f"{named[-1]}: {found.get('commit')} is not a commit before HEAD"
    return found


def test_the_serving_table_is_its_results_file():
    result = _only_block("serving", readme_tables.serving)
    assert [r["batch"] for r in result["rows"]] == sorted(r["batch"] for r in result["rows"])
    assert set(result["batching_parameters"]) == {
        "max_batch_size",
        "batch_timeout_micros",
        "num_batch_threads",
        "max_enqueued_batches",
    }


def test_the_trainer_table_is_its_results_file():
    result = _only_block("trainer", readme_tables.trainer)
    assert result["google"]["trainer"] == "google taxi_utils_native_keras"
    assert {r["preset"] for r in result["tfxflow"]} == set(result["settings"]["presets"].split(","))


def test_the_serving_and_trainer_blocks_render_what_their_tables_hold():
    """A row per batch size; Google's row first, then every configuration that finished, and the ones that did not
    named below the table."""
    served = readme_tables.serving(
        {
            "commit": "abc",
            "machine": {"date": "2026-01-02", "cpus": 2},
            "rows": [{"batch": 1, "p50_ms": 0.5, "p99_ms": 0.75, "examples_per_s": 2000}],
            "batching_parameters": {"max_batch_size": 1},
        }
    )
    assert "| 1 | 0.50 ms | 0.75 ms | 2,000 |" in served and "(commit abc), 2 CPU cores" in served
    google = {"global_batch": 40, "precision": "float32", "examples_per_s": 1000.0, "eval_accuracy": 0.78}
    runs = [
        {"preset": "default", "precision": "float32", "xla": False, "examples_per_s": 2500.0, "eval_accuracy": 0.88},
        {"preset": "default", "precision": "float32", "xla": True, "error": "did not finish within 90 s"},
    ]
    trained = readme_tables.trainer(
        {
            "machine": {"date": "2026-01-02", "cpu_count": 2, "gpus": [], "tensorflow": "2.16.2"},
            "settings": {"batch_size": 1024, "steps_per_execution": 50, "config_timeout": 90},
            "google": google,
            "tfxflow": runs,
        }
    )
    assert "| Google `taxi_utils_native_keras` (batch 40) | - | float32 | off | 1,000 | 1.0 | 0.7800 |" in trained
    assert "| tfxflow | default | float32 | off | 2,500 | 2.5 | 0.8800 |" in trained
    assert "(no commit recorded)" in trained and "(`--config-timeout`): default float32 with XLA on." in trained


def test_the_text_table_is_its_results_file():
    header = "| preset | params | precision | recompute | examples/s | tokens/s | MFU | peak memory |"
    found = _results_named_before(header)
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
    assert _readme_table(header) == expected


def _only_block(kind: str, render) -> dict:
    """The results file of the docs' one `<!-- kind: FILE -->` block, after checking the block is what `render`
    makes of it and the file names a commit of this history."""
    pattern = re.compile(rf"<!-- {kind}: (\S+) -->\n(.*?)\n<!-- /{kind} -->", re.S)
    blocks = pattern.findall(helpers.docs_text())
    assert len(blocks) == 1, f"the docs need exactly one <!-- {kind}: FILE --> block"
    ((path, shown),) = blocks
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        result = json.load(f)
    assert shown.strip() == render(result).strip(), (
        f"the docs' block differs from `python -m benchmarks.readme_tables {path}`"
    )
    assert _in_history(result.get("commit", "")), f"{path}: {result.get('commit')} is not a commit before HEAD"
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


def test_the_versus_pytorch_block_is_rendered_from_its_results_file_and_held_its_goals():
    """`make bench-text`'s side by side with transformers on PyTorch (benchmarks/text_vs_pytorch.py): the same
    steps on both sides; this project at least the reference's examples/s at fixed width and grouped, at an
    accuracy within two standard errors of the reference's; grouping cut the width fed and raised examples/s;
    peak memory within 2% of the reference's (TensorFlow's libraries hold more at start)."""
    result = _only_block("versus-pytorch", readme_tables.versus_pytorch)
    runs = {(r["side"], r["mode"]): r for r in result["runs"]}
    assert set(runs) == {(side, mode) for side in ("tfxflow", "pytorch") for mode in ("fixed", "grouped")}
    held_out = result["plan"]["held_out_rows"]
    for mode in ("fixed", "grouped"):
        ours, theirs = runs[("tfxflow", mode)], runs[("pytorch", mode)]
        assert ours["steps"] == theirs["steps"] == result["plan"]["steps"]
        assert ours["examples_per_s"] >= theirs["examples_per_s"], mode
        error = (theirs["accuracy"] * (1 - theirs["accuracy"]) / held_out) ** 0.5
        assert ours["accuracy"] >= theirs["accuracy"] - 2 * error, mode
        assert ours["peak_rss_mb"] <= 1.02 * theirs["peak_rss_mb"], mode
    widths = result["plan"]["fed_width_mean"]
    assert widths["grouped"] < 0.85 * widths["fixed"]
    assert runs[("tfxflow", "grouped")]["examples_per_s"] > 1.1 * runs[("tfxflow", "fixed")]["examples_per_s"]


def test_the_readme_tuning_block_is_rendered_from_its_results_file_and_tuning_paid_where_the_settings_were_poor():
    result = _only_block("tuning", readme_tables.tuning)
    poor = result["cases"]["poor"]
    metric = result["metric"]
    assert poor["tuned"][metric] >= poor["untuned"][metric] + 0.05
    for case in result["cases"].values():
        assert sum(case["trials"].values()) == result["trials"]
        assert case["untuned"]["returncode"] == case["tuned"]["returncode"] == 0


def test_the_drift_block_is_rendered_from_its_results_file_and_met_its_goals():
    """The calibration's figures in docs/data-validation.md are what benchmarks/readme_tables.py renders from
    `make bench-drift`'s results, of the shifts benchmarks/drift_calibration.py defines, and what the prose says
    of them holds there: no same-distribution sample refused, each shift a data owner wants to hear about refused
    in every sample from 2,000 rows."""
    from benchmarks import drift_calibration

    result = _only_block("drift", readme_tables.drift)
    defined = [
        {"kind": s.kind, "magnitude": s.magnitude, "should_catch": s.should_catch} for s in drift_calibration.SHIFTS
    ]
    assert result["shifts"] == defined
    assert result["same_distribution"] and not any(s["refused"] for s in result["same_distribution"])
    wanted = [s for s in result["shifted"] if defined[s["shift"]]["should_catch"] and s["size"] >= 2000]
    assert wanted and all(s["refused"] for s in wanted)


def test_the_edge_block_is_rendered_from_its_results_file_and_every_task_published_an_agreeing_model():
    """`make bench-edge`'s figures in docs/evaluation-and-serving.md: each task's run published a float32 model
    within its tolerance of the SavedModel, and an int8 one is smaller where it was published."""
    from tfxflow.components.edge import edge

    result = _only_block("edge", readme_tables.edge_models)
    assert [r["task"] for r in result["edge_runs"]] == ["binary", "multiclass", "regression", "text"]
    for run in result["edge_runs"]:
        published = run["edge"]["published"]
        variants = run["edge"]["variants"]
        assert published[:1] == ["float32"], run["task"]
        for variant in published:
            # Published only within tol x (1 + |value|) on every golden row (components/edge/edge.py).
            assert variants[variant]["published"] and "reason" not in variants[variant]
            assert variants[variant]["tolerance"] == edge.TOLERANCES[variant] and variants[variant]["p50_ms"] > 0
            # And its metric on the eval rows within its margin of the SavedModel's on the same rows.
            scored = variants[variant]["eval"]
            assert abs(scored["value"] - run["edge"]["eval"]["saved_model"]) <= edge.METRIC_MARGINS[variant]
        assert variants["int8"]["bytes"] < variants["float32"]["bytes"]
        # Taxi: those of the 3,726 eval rows with every serving column; text: all 679 (each has both columns).
        assert run["edge"]["eval"]["rows"] >= (1000 if run["task"] != "text" else 679)
    rendered = readme_tables.edge_models(result)
    assert rendered.count("| SavedModel |") == 4 and rendered.count("`model.tflite`") == 4
    text = result["edge_runs"][3]["edge"]
    assert text["text_ops"] == ["FastBertNormalize", "FastWordpieceTokenizeWithOffsets"]
    assert "| text | `model.tflite` |" in rendered and "TF Text's TFLite ops (FastBertNormalize" in rendered


def test_the_edge_block_renders_each_published_variant_and_what_runs_it():
    entry = {
        "file": "model.tflite",
        "bytes": 2048,
        "max_diff": {"scores": 1e-7},
        "p50_ms": 0.25,
        "load_ms": 1.5,
        "eval": {"metric": "binary_accuracy", "value": 0.8125, "gap": 0.0, "margin": 0.001},
    }
    scored = {"rows": 1234, "metric": "binary_accuracy", "saved_model": 0.8125}
    result = {
        "commit": "abc",
        "machine": {"date": "2026-01-02", "cpus": 2},
        "edge_runs": [
            {
                "task": "binary",
                "saved_model": {"bytes": 10240, "p50_ms": 0.75},
                "edge": {
                    "published": ["float32"],
                    "variants": {"float32": entry},
                    "select_tf_ops": ["AsString"],
                    "eval": scored,
                },
            }
        ],
    }
    rendered = readme_tables.edge_models(result)
    assert "| binary | SavedModel | 10 KiB | - | binary_accuracy 0.8125 (1,234 rows) | 0.75 ms | - | TF Serving |" in (
        rendered
    )
    assert "| binary | `model.tflite` | 2 KiB | 1e-07 | 0.8125 | 0.25 ms | 1.5 ms | Select TF ops (AsString) |" in (
        rendered
    )
    assert readme_tables.kind(result) == "edge" and "(commit abc), 2 CPU cores" in rendered
    assert "dropped" not in rendered  # every variant of the run published
    result["edge_runs"][0]["edge"]["variants"]["int8"] = {**entry, "file": "model-int8.tflite", "reason": "far"}
    assert readme_tables.edge_models(result).endswith(
        "Variants the check dropped in these runs:\n\n- binary: `model-int8.tflite` not published: far"
    )
    del result["edge_runs"][0]["edge"]["variants"]["int8"]
    # A model not scored (a module file's) has a dash there.
    del result["edge_runs"][0]["edge"]["eval"], entry["eval"]
    assert "| binary | `model.tflite` | 2 KiB | 1e-07 | - | 0.25 ms |" in readme_tables.edge_models(result)


def _tree(tmp_path, docs, results):
    """A copy of the chapters `docs` and the results files `results` under tmp_path, as the repository has them."""
    os.makedirs(tmp_path / "docs")
    os.makedirs(tmp_path / "benchmarks" / "results")
    for doc in docs:
        shutil.copy(os.path.join(REPO, "docs", doc), tmp_path / "docs" / doc)
    for name in results:
        shutil.copy(os.path.join(REPO, "benchmarks", "results", name), tmp_path / "benchmarks" / "results" / name)
    return tmp_path


def _named_in(doc: str) -> str:
    """The results file of the pipeline block in docs/`doc`."""
    text = open(os.path.join(REPO, "docs", doc), encoding="utf-8").read()
    return re.search(r"<!-- pipeline-benchmark: benchmarks/results/(\S+) -->", text).group(1)


def _block_span(text: str, kind: str):
    start = text.index(f"<!-- {kind}: ")
    return start, text.index(f"<!-- /{kind} -->", start) + len(f"<!-- /{kind} -->")


def test_write_puts_the_block_in_place_of_the_one_of_its_kind_naming_the_new_file(tmp_path):
    root = _tree(tmp_path, ["data-validation.md"], ["drift-20261130.json"])
    result = _results("drift-20261130.json")
    result["shifted"][0]["refused"] = ["fare"]  # a figure of its own: the x1.05 fare 1/20 at 500 rows
    with open(root / "benchmarks" / "results" / "drift-20991231.json", "w", encoding="utf-8") as f:
        json.dump(result, f)
    before = (root / "docs" / "data-validation.md").read_text(encoding="utf-8")

    doc = readme_tables.write_block(str(root / "benchmarks" / "results" / "drift-20991231.json"), root=str(root))

    assert doc == os.path.join("docs", "data-validation.md")
    after = (root / "docs" / "data-validation.md").read_text(encoding="utf-8")
    (start, end), (new_start, new_end) = _block_span(before, "drift"), _block_span(after, "drift")
    assert after[:new_start] == before[:start] and after[new_end:] == before[end:]  # the prose around it stays
    assert after[new_start:new_end] == (
        "<!-- drift: benchmarks/results/drift-20991231.json -->\n" + readme_tables.drift(result) + "\n<!-- /drift -->"
    )
    assert "| fare scaled | x1.05 | 1/20 | 0/20 | 0/20 | fare |" in after


def test_write_replaces_the_pipeline_block_of_the_results_lane(tmp_path):
    compat, current = (_named_in(doc) for doc in ("benchmarks.md", "environment.md"))  # each lane's block's file
    root = _tree(tmp_path, ["benchmarks.md", "environment.md"], [compat, current, "pipeline-current-20261205-5.json"])
    benchmarks_before = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"<!-- pipeline-benchmark: benchmarks/results/{compat} -->" in benchmarks_before

    path = root / "benchmarks" / "results" / "pipeline-current-20261205-5.json"
    assert readme_tables.write_block(str(path), root=str(root)) == os.path.join("docs", "environment.md")

    assert (root / "docs" / "benchmarks.md").read_text(encoding="utf-8") == benchmarks_before  # the compat lane's
    environment = (root / "docs" / "environment.md").read_text(encoding="utf-8")
    assert "<!-- pipeline-benchmark: benchmarks/results/pipeline-current-20261205-5.json -->\n" in environment
    assert readme_tables.render(_results("pipeline-current-20261205-5.json")).strip() in environment


def test_write_refuses_a_results_file_no_block_of_the_docs_takes(tmp_path):
    root = _tree(tmp_path, ["data-validation.md"], ["tuning-20261205-2.json"])
    before = (root / "docs" / "data-validation.md").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="0 <!-- tuning: FILE --> blocks"):
        readme_tables.write_block(str(root / "benchmarks" / "results" / "tuning-20261205-2.json"), root=str(root))
    with pytest.raises(ValueError, match="not under"):  # the docs name files of the repository
        readme_tables.write_block(os.path.join(REPO, "benchmarks", "results", "drift-20261130.json"), root=str(root))
    assert (root / "docs" / "data-validation.md").read_text(encoding="utf-8") == before


def test_the_command_prints_the_block_of_the_files_kind(capsys):
    path = os.path.join(REPO, "benchmarks", "results", "drift-20261130.json")
    assert readme_tables.main(["readme_tables", path]) == 0
    assert capsys.readouterr().out.strip() == readme_tables.drift(_results("drift-20261130.json")).strip()
    # The Transform sample's results back no block of the docs.
    sample = os.path.join(REPO, "benchmarks", "results", "transform-sample-20261204.json")
    assert readme_tables.main(["readme_tables", sample]) == 2
