"""The pipeline benchmark's summary of its runs: the median and spread of the cold runs, the goals each decided
by its figure, and the README's tables rendered from the results JSON (benchmarks/readme_tables.py)."""

import dataclasses
import json
import os
import re
import sys

import pytest

from benchmarks import readme_tables
from benchmarks.pipeline_benchmark import (
    PEAK_GOAL_MB,
    TASKS,
    Measured,
    cold_summary,
    goals,
    machine,
    run_measured,
    spread,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_results_name_the_lane_and_its_tfx():
    import importlib.metadata

    import tensorflow as tf

    found = machine()
    assert found["tfx"] == importlib.metadata.version("tfx")
    # The lane is the installed stack's: TFX 1.16 with TF 2.16, or TFX 1.21 with TF 2.21.
    expected = {"compat": ("1.16.", "2.16."), "current": ("1.21.", "2.21.")}[found["lane"]]
    assert found["tfx"].startswith(expected[0]) and tf.__version__.startswith(expected[1])


def _run(name, wall, metrics, pss=1400.0, returncode=0, components=None, cpu=0.0):
    return dataclasses.asdict(
        Measured(name, wall, pss + 300, returncode, components or {}, metrics, {}, "", {}, pss, cpu)
    )


def _summary(ours_walls, google_walls, hundred_wall=150.0, hundred_pss=1500.0):
    runs = {}
    for i, wall in enumerate(ours_walls, 1):
        components = {"Transform": {"state": "complete", "seconds": wall / 3}}
        runs[f"ours-cold-{i}"] = _run(f"ours-cold-{i}", wall, {"binary_accuracy": 0.8964}, components=components)
    for i, wall in enumerate(google_walls, 1):
        runs[f"google-cold-{i}"] = _run(f"google-cold-{i}", wall, {"binary_accuracy": 0.79}, pss=2900.0)
    runs["ours-cached"] = _run("ours-cached", 0.9, {"binary_accuracy": 0.8964})
    runs["ours-forced"] = _run(
        "ours-forced", 20.0, {"binary_accuracy": 0.8964}, components={"Transform": {"state": "cached", "seconds": 0}}
    )
    runs["task-multiclass"] = _run("task-multiclass", 48.0, {"accuracy": 0.9686})
    runs["task-regression"] = _run("task-regression", 54.0, {"r2": 0.8744})
    cold = {side: cold_summary(runs, side) for side in ("ours", "google")}
    median = runs[cold["ours"]["median_run"]]
    series = [
        {"scale": 1, "run": median["name"], "rows": 15002, "files": 1, "wall_s": median["wall_s"],
         "rows_per_s": round(15002 / median["wall_s"]), "peak_rss_mb": median["peak_rss_mb"],
         "peak_pss_mb": median["peak_pss_mb"], "returncode": 0, "components": median["components"],
         "metrics": median["metrics"], "peak_rss_mb_by_component": {}},
        {"scale": 100, "run": "ours-100x", "rows": 1500200, "files": 6, "wall_s": hundred_wall,
         "rows_per_s": round(1500200 / hundred_wall), "peak_rss_mb": hundred_pss + 300, "peak_pss_mb": hundred_pss,
         "returncode": 0, "components": {"CsvExampleGen": {"state": "complete", "seconds": 10.0}}, "metrics": {},
         "peak_rss_mb_by_component": {}},
    ]  # fmt: skip
    summary = {
        "commit": "0123456789ab",
        "machine": {"cpus": 2, "memory_gb": 24.0, "processor": "AMD EPYC", "python": "3.10.13", "date": "2026-12-02"},
        "run_args": [],
        "repeat": len(ours_walls),
        "runs": runs,
        "cold": cold,
        "scale_series": series,
    }
    summary["goals"] = goals(summary)
    return summary


def test_the_cold_runs_median_and_spread_decide_the_ratio_goal():
    assert spread([40.0, 70.0, 38.0]) == {"median_s": 40.0, "min_s": 38.0, "max_s": 70.0}
    # An even count's median is the lower middle run's own time: the table's "median run" column is that run.
    assert spread([50.0, 40.0]) == {"median_s": 40.0, "min_s": 40.0, "max_s": 50.0}
    # One slow run of ours (70 s) does not decide: the median (40 s) against Google's median (130 s) does.
    summary = _summary([40.0, 70.0, 38.0], [150.0, 120.0, 130.0])
    assert summary["cold"]["ours"]["median_run"] == "ours-cold-1"
    assert summary["cold"]["google"]["median_run"] == "google-cold-3"
    (ratio,) = [g for g in summary["goals"] if g["goal"].startswith("1x cold")]
    assert ratio["figure"] == "40.0 s / 130.0 s = 0.31" and ratio["met"] is True
    slower = _summary([45.0, 46.0, 47.0], [130.0, 130.0, 130.0])
    (ratio,) = [g for g in slower["goals"] if g["goal"].startswith("1x cold")]
    assert ratio["figure"] == "46.0 s / 130.0 s = 0.35" and ratio["met"] is False


def test_a_failed_cold_run_is_left_out_of_the_spread():
    summary = _summary([40.0, 41.0], [130.0])
    summary["runs"]["ours-cold-2"]["returncode"] = 1
    assert cold_summary(summary["runs"], "ours")["runs"] == ["ours-cold-1"]


def test_memory_and_scale_goals_use_the_proportional_peak_of_the_tree():
    summary = _summary([40.0, 41.0, 42.0], [130.0], hundred_wall=190.0, hundred_pss=PEAK_GOAL_MB + 1)
    by_goal = {g["goal"]: g for g in summary["goals"]}
    assert by_goal["1x peak memory of the process tree <= 1536 MB (proportional)"]["met"] is True
    hundred = by_goal["100x peak memory of the process tree <= 1536 MB (proportional)"]
    assert hundred["met"] is False and hundred["figure"] == "1,537 MB (resident sets summed: 1,837 MB)"
    assert (
        by_goal["100x wall <= 4 x the 1x wall"]["figure"] == "190.0 s / 41.0 s = 4.63"
        and not by_goal["100x wall <= 4 x the 1x wall"]["met"]
    )
    assert by_goal["unchanged re-run < 10% of the cold run"]["met"] is True


def test_each_scale_is_held_to_its_own_multiple_of_the_1x_wall():
    summary = _summary([40.0, 41.0, 42.0], [130.0])
    one = summary["scale_series"][0]
    for scale, wall in ((10, 61.0), (40, 103.0)):  # 1.49 (met) and 2.51 (not met)
        entry = {**one, "scale": scale, "run": f"ours-{scale}x", "wall_s": wall, "rows_per_s": round(15002 / wall)}
        summary["scale_series"].insert(-1, entry)
    by_goal = {g["goal"]: g for g in goals(summary)}
    assert by_goal["10x wall <= 1.5 x the 1x wall"] == {
        "goal": "10x wall <= 1.5 x the 1x wall",
        "figure": "61.0 s / 41.0 s = 1.49",
        "met": True,
    }
    assert by_goal["40x wall <= 2.5 x the 1x wall"]["figure"] == "103.0 s / 41.0 s = 2.51"
    assert by_goal["40x wall <= 2.5 x the 1x wall"]["met"] is False
    text = readme_tables.render({**summary, "goals": goals(summary)})
    assert "| 40x | 15,002 | 103.0 s | 146 | 2.51 (goal 2.5) |" in text
    # Each component's seconds at each scale, in one table.
    assert "| component | 1x | 10x | 40x | 100x |" in text
    assert "| CsvExampleGen | - | - | - | 10.0 s |" in text and "| Transform | 13.7 s | 13.7 s | 13.7 s | - |" in text


def test_the_block_says_what_the_library_patches_save():
    summary = _summary([40.0, 41.0, 42.0], [130.0])
    components = {"Transform": {"state": "complete", "seconds": 25.7}}
    summary["runs"]["ours-patches-off"] = _run(
        "ours-patches-off", 53.0, {"binary_accuracy": 0.8959}, components=components
    )
    text = readme_tables.render(summary)
    # Beside the cold median run, per component, and the difference in one line.
    assert "| component | tfxflow cold (median run) | tfxflow cold, `TFXFLOW_PATCHES=off` |" in text
    assert "| Transform | 13.7 s | 25.7 s |" in text
    assert (
        "- the library patches (`pipeline/patches/`): with `TFXFLOW_PATCHES=off` one cold run took 53.0 s, "
        "+12.0 s (+29%) against the patched median run; most in Transform +12.0 s"
    ) in text
    summary["runs"]["ours-patches-off"]["returncode"] = 1
    assert "- with `TFXFLOW_PATCHES=off` the cold run failed (1)" in readme_tables.render(summary)


def test_the_readme_block_renders_every_table_from_the_json():
    summary = _summary([40.0, 70.0, 38.0], [150.0, 120.0, 130.0])
    text = readme_tables.render(summary)
    assert text.startswith("Measured 2026-12-02 at commit `0123456789ab`: 2 CPU cores (AMD EPYC), 24 GiB")
    assert "| Transform | 13.3 s | cached | - |" in text  # Google's runs in this summary have no components
    assert "| **whole command** | **40.0 s** | **20.0 s** | **130.0 s** |" in text
    assert "- tfxflow, 3 cold runs: median 40.0 s (min 38.0, max 70.0)" in text
    assert "- 1x cold, median wall: ours <= 0.33 x Google's (stretch 0.25): 40.0 s / 130.0 s = 0.31: **met**" in text
    assert "| 100x | 1,500,200 | 150.0 s | 10,001 | 3.75 (goal 4) | 1,500 MB (1,800 MB) |" in text
    assert [task for task, _ in TASKS] == ["multiclass", "regression"]
    tasks = [line for line in text.splitlines() if re.match(r"\| (binary|multiclass|regression) \|", line)]
    assert [line.split(" | ")[0] for line in tasks] == ["| binary", "| multiclass", "| regression"]
    assert tasks[1].endswith("| accuracy 0.9686 |") and tasks[2].endswith("| r2 0.8744 |")


def test_a_failed_or_unmeasured_figure_never_meets_its_goal():
    summary = _summary([40.0, 41.0, 42.0], [130.0])
    summary["runs"]["ours-cached"]["returncode"] = 1
    summary["runs"]["google-cold-1"]["metrics"] = {}
    summary["scale_series"].append({"scale": 1000, "returncode": 1, "error": "[Errno 28] No space left on device"})
    by_goal = {g["goal"]: g for g in goals(summary)}
    assert by_goal["unchanged re-run < 10% of the cold run"]["met"] is False
    accuracy = by_goal["1x accuracy at least Google's"]
    assert accuracy["met"] is False and accuracy["figure"].endswith("vs none recorded")
    thousand = by_goal["1000x peak memory of the process tree <= 1536 MB (proportional)"]
    assert thousand == {
        "goal": "1000x peak memory of the process tree <= 1536 MB (proportional)",
        "figure": "not run: [Errno 28] No space left on device",
        "met": False,
    }
    summary["goals"] = goals(summary)
    assert "| 1000x | - | not run: [Errno 28] No space left on device | - | - | - |" in readme_tables.render(summary)


# Busy for `seconds` of its own CPU time (not wall time, which a loaded machine stretches).
BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end:\n    pass\n"


def test_a_runs_cpu_time_counts_the_processes_it_waited_for_and_not_its_sleep(tmp_path):
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {BUSY.format(seconds=0.6)!r}], check=True)\n"
        + BUSY.format(seconds=0.4)
        + "time.sleep(1.0)\n"
    )
    log, no_store = str(tmp_path / "busy.log"), str(tmp_path / "no.db")
    measured = run_measured("busy", [sys.executable, "-c", script], dict(os.environ), log, no_store, "x")
    assert measured.returncode == 0 and measured.components == {}
    # The child's 0.6 s and its own 0.4 s (plus the interpreters' starts), not the second of sleep.
    assert 1.0 <= measured.cpu_s < 1.6 and measured.wall_s >= 2.0  # one after the other


def test_the_cpu_times_are_shown_beside_the_ratio_without_deciding_it():
    summary = _summary([40.0, 70.0, 38.0], [150.0, 120.0, 130.0])
    for name, cpu in (("ours-cold-1", 60.0), ("ours-cold-2", 90.0), ("ours-cold-3", 55.0)):
        summary["runs"][name]["cpu_s"] = cpu
    for i, cpu in enumerate((250.0, 200.0, 240.0), 1):
        summary["runs"][f"google-cold-{i}"]["cpu_s"] = cpu
    summary["cold"] = {side: cold_summary(summary["runs"], side) for side in ("ours", "google")}
    assert (summary["cold"]["ours"]["cpu_median_s"], summary["cold"]["google"]["cpu_median_s"]) == (60.0, 240.0)
    summary["goals"] = goals(summary)
    (ratio,) = [g for g in summary["goals"] if g["goal"].startswith("1x cold")]
    assert ratio["figure"] == "40.0 s / 130.0 s = 0.31 (CPU time 60.0 s / 240.0 s = 0.25)" and ratio["met"] is True
    text = readme_tables.render(summary)
    cold_line = (
        "- tfxflow, 3 cold runs: median 40.0 s (min 38.0, max 70.0); CPU time of the process tree: median 60.0 s"
    )
    assert cold_line in text
    # A run measured before CPU times were recorded leaves them out rather than showing 0.
    summary["runs"]["google-cold-2"]["cpu_s"] = 0.0
    assert "cpu_median_s" not in cold_summary(summary["runs"], "google")


def test_the_results_name_the_commit_the_runs_started_from(tmp_path, monkeypatch):
    from benchmarks import pipeline_benchmark, provenance

    heads = iter(["0123456789ab", "ba9876543210"])  # a commit made while the runs go on
    monkeypatch.setattr(provenance, "commit", lambda: next(heads))

    def run_ours(name, home, data_root, extra, logs, env_extra=None, dataset="taxi"):
        wall = 0.3 if name == "ours-cached" else 40.0
        return Measured(name, wall, 1700.0, 0, {}, {"binary_accuracy": 0.8964}, {}, "", {}, 1400.0, 50.0)

    monkeypatch.setattr(pipeline_benchmark, "run_ours", run_ours)
    out = tmp_path / "result.json"
    args = ["--repeat", "1", "--scales", "1", "--no-google", "--no-tasks", "--work", str(tmp_path), "--out", str(out)]
    args.append("--no-patches-off")
    assert pipeline_benchmark.main(args) == 0
    result = json.loads(out.read_text())
    assert result["commit"] == "0123456789ab" and result["runs"]["ours-cold-1"]["cpu_s"] == 50.0


@pytest.mark.parametrize(("accuracy", "met"), [(0.8943, True), (0.8915, True), (0.8910, False)])
def test_without_googles_side_accuracy_is_held_to_the_reference_within_one_standard_error(accuracy, met):
    summary = _summary([40.0, 41.0, 42.0], [])
    for name in ("ours-cold-1", "ours-cold-2", "ours-cold-3"):
        summary["runs"][name]["metrics"]["binary_accuracy"] = accuracy
    summary["cold"]["google"] = None
    (goal,) = [g for g in goals(summary) if g["goal"].startswith("1x accuracy")]
    assert goal["goal"] == "1x accuracy as before (0.8964, less one standard error: 0.8914)"
    assert goal["met"] is met and goal["figure"] == f"{accuracy:.4f}"


def test_a_runs_cpu_time_leaves_out_an_earlier_child_reaped_meanwhile(tmp_path):
    import subprocess
    import time

    # A busy child whose Popen object is dropped before it ends: subprocess keeps it to reap on the next Popen,
    # which is the measured run's own start.
    subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=1.0)])
    time.sleep(2.5)  # it has ended: a zombie waiting to be reaped
    log, no_store = str(tmp_path / "quick.log"), str(tmp_path / "no.db")
    measured = run_measured("quick", [sys.executable, "-c", "pass"], dict(os.environ), log, no_store, "x")
    assert measured.returncode == 0 and measured.cpu_s < 0.5
