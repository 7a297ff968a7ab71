"""The docs' benchmark blocks, rendered from results JSON files: the pipeline benchmark's tables (`make
bench`, benchmarks/pipeline_benchmark.py) and the fine-tuning figures of `make bench-text`
(benchmarks/text_benchmark.py). README.md or a chapter in docs/ holds each between

    <!-- pipeline-benchmark: benchmarks/results/<file>.json -->    (or <!-- fine-tuning: ... -->)
    ...
    <!-- /pipeline-benchmark -->                                   (or <!-- /fine-tuning -->)

and tests/benchmarks/test_readme_tables.py checks that they are what this renders from that file:

    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/pipeline-<date>.json
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/text-<date>.json
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/tuning-<date>.json   (<!-- tuning: ... -->)
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any, Dict, List, Optional

# The taxi file as each task, its label drafted by infer-schema (benchmarks/pipeline_benchmark.py's TASKS).
TASK_LABELS = {"binary": "tips > 0.2 x fare (`schemas/taxi`)", "multiclass": "payment_type", "regression": "fare"}
TASK_METRICS = {"binary": "binary_accuracy", "multiclass": "accuracy", "regression": "r2"}


def _seconds(run: Optional[Dict[str, Any]], component: str) -> str:
    info = (run or {}).get("components", {}).get(component)
    if info is None:
        return "-"
    return "cached" if info["state"] == "cached" else f"{info['seconds']:.1f} s"


def _megabytes(value: float) -> str:
    return f"{value:,.0f} MB"


def comparison(result: Dict[str, Any]) -> List[str]:
    """Per component: ours (the median cold run, then through TFX's cache) beside Google's (cold, cached)."""
    runs, cold = result["runs"], result["cold"]
    columns = []
    if "ours" in cold:
        columns.append(("tfxflow cold (median run)", runs[cold["ours"]["median_run"]]))
    if "ours-forced" in runs:
        columns.append(("tfxflow via TFX cache", runs["ours-forced"]))
    if "google" in cold:
        columns.append(("Google cold (median run)", runs[cold["google"]["median_run"]]))
    if "google-cached" in runs:
        columns.append(("Google cached", runs["google-cached"]))
    components: List[str] = []
    for _, run in columns:
        components += [c for c in run["components"] if c not in components]
    lines = ["| component | " + " | ".join(name for name, _ in columns) + " |"]
    lines.append("| --- |" + " ---: |" * len(columns))
    for component in components:
        lines.append(f"| {component} | " + " | ".join(_seconds(run, component) for _, run in columns) + " |")
    lines.append("| **whole command** | " + " | ".join(f"**{run['wall_s']:.1f} s**" for _, run in columns) + " |")
    lines.append(
        "| peak memory, proportional (resident) | "
        + " | ".join(
            f"{_megabytes(run.get('peak_pss_mb') or 0)} ({_megabytes(run['peak_rss_mb'])})" for _, run in columns
        )
        + " |"
    )
    lines.append(
        "| eval binary_accuracy | "
        + " | ".join(f"{run['metrics'].get('binary_accuracy', float('nan')):.4f}" for _, run in columns)
        + " |"
    )
    return lines


def cold_line(result: Dict[str, Any]) -> List[str]:
    """The cold runs' spread, each side."""
    cold, lines = result["cold"], []
    for side, label in (("ours", "tfxflow"), ("google", "Google")):
        if side in cold:
            found = cold[side]
            cpu = (
                f"; CPU time of the process tree: median {found['cpu_median_s']:.1f} s"
                if "cpu_median_s" in found
                else ""
            )
            lines.append(
                f"- {label}, {len(found['runs'])} cold runs: median {found['median_s']:.1f} s "
                f"(min {found['min_s']:.1f}, max {found['max_s']:.1f}){cpu}"
            )
    return lines


def goal_lines(result: Dict[str, Any]) -> List[str]:
    return [f"- {g['goal']}: {g['figure']}: **{'met' if g['met'] else 'NOT met'}**" for g in result["goals"]]


def scale_table(result: Dict[str, Any]) -> List[str]:
    series = result["scale_series"]
    if not series:
        return []
    base = next((e["wall_s"] for e in series if e["scale"] == 1), None)
    lines = [
        "| data | rows | whole command | rows/s | x 1x time | peak memory, proportional (resident) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in series:
        if "error" in e:  # its data could not be written
            lines.append(f"| {e['scale']}x | - | not run: {e['error']} | - | - | - |")
            continue
        factor = f"{e['wall_s'] / base:.2f}" if base else "-"
        lines.append(
            f"| {e['scale']}x | {e['rows']:,} | {e['wall_s']:.1f} s | {e['rows_per_s']:,} | {factor} | "
            f"{_megabytes(e.get('peak_pss_mb') or 0)} ({_megabytes(e['peak_rss_mb'])}) |"
        )
    return lines


def task_table(result: Dict[str, Any]) -> List[str]:
    runs, cold = result["runs"], result["cold"]
    rows = [("binary", runs[cold["ours"]["median_run"]] if "ours" in cold else None)]
    rows += [(task, runs.get(f"task-{task}")) for task in ("multiclass", "regression")]
    rows = [(task, run) for task, run in rows if run is not None]
    if len(rows) < 2:
        return []
    lines = ["| task | label | wall | peak memory, proportional | metric |", "| --- | --- | ---: | ---: | --- |"]
    for task, run in rows:
        metric = TASK_METRICS[task]
        lines.append(
            f"| {task} | {TASK_LABELS[task]} | {run['wall_s']:.1f} s | {_megabytes(run.get('peak_pss_mb') or 0)} | "
            f"{metric} {run['metrics'].get(metric, float('nan')):.4f} |"
        )
    return lines


def _lane(machine: Dict[str, Any]) -> str:
    """The lane the figures are of, where the results name it (files from before the lanes do not)."""
    if "lane" not in machine:
        return ""
    return f"the {machine['lane']} lane (TFX {machine['tfx']}, Python {machine['python']}); "


def _bench_args(result: Dict[str, Any]) -> List[str]:
    """The arguments that narrowed or widened the default invocation (3 cold runs each side, 1x and 100x, the
    tasks, Google's side), read from what it ran."""
    runs, cold = result["runs"], result["cold"]
    scales = [entry["scale"] for entry in result.get("scale_series", [])]
    args = []
    if result.get("repeat", 3) != 3:
        args.append(f"--repeat {result['repeat']}")
    if scales and scales[:2] != [1, 100]:
        args.append(f"--scales {','.join(str(s) for s in scales if s <= 100)}")
    args += [f"--scale {s}" for s in scales if s > 100]
    if "google" not in cold:
        args.append("--no-google")
    if not any(name.startswith("task-") for name in runs):
        args.append("--no-tasks")
    if result["run_args"]:
        args.append(f"--run-args '{' '.join(result['run_args'])}'")
    return args


def render(result: Dict[str, Any]) -> str:
    """The benchmark block: the machine and commit, the comparison, the spread, the goals, scales and tasks."""
    machine = result["machine"]
    parts = [
        [
            f"Measured {machine['date']} at commit `{result['commit']}`: {machine['cpus']} CPU cores "
            f"({machine['processor']}), {machine['memory_gb']:g} GiB, no GPU; "
            + _lane(machine)
            + (f'`make bench ARGS="{" ".join(_bench_args(result))}"`' if _bench_args(result) else "`make bench`")
            + "."
        ],
        comparison(result),
        cold_line(result),
        ["Goals:", "", *goal_lines(result)],
        scale_table(result),
        task_table(result),
    ]
    return "\n\n".join("\n".join(part) for part in parts if part)


def fine_tuning(result: Dict[str, Any]) -> str:
    """The fine-tuning block of a text benchmark's results: the learning-rate sweep (held-out accuracy
    after each epoch, speed, MFU), then the recipe's run against bert-mini from scratch at equal steps and time."""
    tuned = result["fine_tuning"]
    sweep = [r for r in tuned["sweep"] if "error" not in r]
    epochs = max(len(r["accuracy_by_epoch"]) for r in sweep)
    name = sweep[0]["name"]
    lines = [
        f"Measured at commit `{result['commit']}`: {result['machine']['cpus']} CPU cores, no GPU; `make bench-text` "
        f"(`benchmarks/text_benchmark.py`): {name} fine-tuned on Debian's package descriptions "
        f"({sweep[0]['train_rows']:,} training rows, {sweep[0]['held_out_rows']:,} held out; sequences of "
        f"{result['sequence_length']}, batches of 32), the recipe's settings but the learning rate:",
        "",
        "| learning rate | " + " | ".join(f"epoch {e + 1}" for e in range(epochs)) + " | examples/s | MFU |",
        "| ---: |" + " ---: |" * (epochs + 2),
    ]
    for r in sweep:
        accuracies = [f"{a:.3f}" for a in r["accuracy_by_epoch"]] + ["-"] * (epochs - len(r["accuracy_by_epoch"]))
        lines.append(
            f"| {r['learning_rate']:g} | "
            + " | ".join(accuracies)
            + f" | {r['examples_per_s']:,.1f} | {r['mfu']:.1%} |"
        )
    scratch = tuned.get("from_scratch") or []
    if scratch:
        default = next(r for r in sweep if r["learning_rate"] == scratch[0]["against"]["learning_rate"])
        used = scratch[0]["against"]["epochs"]
        lines += [
            "",
            "| model | steps of 32 | training | held-out accuracy |",
            "| --- | ---: | ---: | ---: |",
            f"| {name} fine-tuned at {default['learning_rate']:g}, {used} epochs | "
            f"{default['steps_per_epoch'] * used:,} | {sum(default['epoch_s'][:used]):.0f} s | "
            f"{default['accuracy_by_epoch'][used - 1]:.3f} |",
        ]
        for r in scratch:
            lines.append(
                f"| bert-mini from scratch, {r['compared']} | {r['steps']:,} | {r['train_s']:.0f} s | "
                f"{r['accuracy']:.3f} |"
            )
    short = result.get("accuracy") or []
    if short:
        lines += [
            "",
            f"From scratch after {short[0]['steps']} steps of 32 (`--accuracy-steps`), on the same rows: "
            + ", ".join(f"{a['preset']} {a['accuracy']:.3f} ({a['train_s']:.0f} s)" for a in short)
            + ".",
        ]
    return "\n".join(lines)


def tuning(result: Dict[str, Any]) -> str:
    """The tuning block of benchmarks/tuning_benchmark.py's results: per case, the eval split's metric
    untuned and tuned, the trials by state, and the Tuner's time against the Trainer's."""
    metric = result["metric"]
    lines = [
        f"Measured at commit `{result['commit']}`: {result['machine']['cpus']} CPU cores, no GPU, "
        f"{_lane(result['machine'])}`make bench-tuning` (`benchmarks/tuning_benchmark.py`), the bundled taxi data, "
        f"{result['trials']} trials per tuned run:",
        "",
        f"| case | searched | eval {metric} untuned | tuned | gain | trials (complete/pruned/failed) | Tuner | "
        "workers | Tuner, 1 worker | a trial (median) | Trainer | best trial |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, case in result["cases"].items():
        flags = f"`{' '.join(case['flags'])}`" if case["flags"] else "the defaults"
        median = statistics.median(s for s in case["trial_seconds"] if s is not None)
        searched = ", ".join(d["name"] for d in case["space"])
        before, after = case["untuned"][metric], case["tuned"][metric]
        trials = case["trials"]
        best = case["best"] or {"values": {}}
        shown = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["values"].items())
        one_worker = f"{case['one_worker']['tuner_s']:.1f} s" if "one_worker" in case else "not run"
        lines.append(
            f"| {name}: {flags} | {searched} | {before:.4f} | {after:.4f} | {after - before:+.4f} | "
            f"{trials['complete']}/{trials['pruned']}/{trials['failed']} | {case['tuner_s']:.1f} s | "
            f"{case.get('workers', 1)} | {one_worker} | {median:.1f} s | "
            f"{case['trainer_s']:.1f} s | {shown} |"
        )
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        result = json.load(f)
    if "cases" in result:
        print(tuning(result))
    else:
        print(fine_tuning(result) if "fine_tuning" in result else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
