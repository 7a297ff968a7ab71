"""The docs' benchmark blocks, rendered from results JSON files: the pipeline benchmark's tables (`make
bench`, benchmarks/pipeline_benchmark.py), the fine-tuning figures of `make bench-text`
(benchmarks/text_benchmark.py), the tuning benchmark's table (`make bench-tuning`), the drift check's
calibration (`make bench-drift`, benchmarks/drift_calibration.py), and the serving and Trainer tables (`make
bench-serving`, `make bench-trainer`). README.md or a chapter in docs/ holds each
between

    <!-- pipeline-benchmark: benchmarks/results/<file>.json -->    (or fine-tuning, tuning, drift, serving, trainer)
    ...
    <!-- /pipeline-benchmark -->                                   (or /fine-tuning, ...)

and tests/benchmarks/test_readme_tables.py checks that they are what this renders from that file:

    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/pipeline-<date>.json
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/text-<date>.json     (<!-- fine-tuning: ... -->)
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/tuning-<date>.json   (<!-- tuning: ... -->)
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/drift-<date>.json    (<!-- drift: ... -->)
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/serving-<date>.json  (<!-- serving: ... -->)
    .venv/bin/python -m benchmarks.readme_tables benchmarks/results/trainer-<date>.json  (<!-- trainer: ... -->)

Each prints the block; with `--write` it puts the block into the doc in place of the block of its kind, the marker
then naming the new file (of the pipeline benchmark's two blocks, the one of the results' lane).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmarks.pipeline_benchmark import DEFAULT_SCALES, PATCHES_OFF_RUN, SCALE_GOALS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
    if PATCHES_OFF_RUN in runs and runs[PATCHES_OFF_RUN]["returncode"] == 0:
        columns.append(("tfxflow cold, `TFXFLOW_PATCHES=off`", runs[PATCHES_OFF_RUN]))
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


def patches_line(result: Dict[str, Any]) -> List[str]:
    """What the library patches save: the cold run with them off against the patched cold runs' median."""
    runs, cold = result["runs"], result["cold"]
    off = runs.get(PATCHES_OFF_RUN)
    if off is None or "ours" not in cold:
        return []
    if off["returncode"] != 0:
        return [f"- with `TFXFLOW_PATCHES=off` the cold run failed ({off['returncode']})"]
    on = runs[cold["ours"]["median_run"]]
    saved = off["wall_s"] - on["wall_s"]
    by_component = sorted(
        (
            (off["components"][c]["seconds"] - on["components"][c]["seconds"], c)
            for c in on["components"]
            if c in off["components"]
        ),
        reverse=True,
    )
    most = [f"{c} {seconds:+.1f} s" for seconds, c in by_component[:3] if seconds > 0]
    return [
        f"- the library patches (`pipeline/patches/`): with `TFXFLOW_PATCHES=off` one cold run took "
        f"{off['wall_s']:.1f} s, {saved:+.1f} s ({saved / on['wall_s']:+.0%}) against the patched median run"
        + (f"; most in {', '.join(most)}" if most else "")
    ]


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
        goal = f" (goal {SCALE_GOALS[e['scale']]:g})" if e["scale"] in SCALE_GOALS and base else ""
        lines.append(
            f"| {e['scale']}x | {e['rows']:,} | {e['wall_s']:.1f} s | {e['rows_per_s']:,} | {factor}{goal} | "
            f"{_megabytes(e.get('peak_pss_mb') or 0)} ({_megabytes(e['peak_rss_mb'])}) |"
        )
    return lines


def scale_components(result: Dict[str, Any]) -> List[str]:
    """Each component's seconds at each scale (ML Metadata's), where several scales ran."""
    series = [e for e in result["scale_series"] if "error" not in e and e.get("components")]
    if len(series) < 2:
        return []
    components: List[str] = []
    for e in series:
        components += [c for c in e["components"] if c not in components]
    lines = ["| component | " + " | ".join(f"{e['scale']}x" for e in series) + " |"]
    lines.append("| --- |" + " ---: |" * len(series))
    for component in components:
        lines.append(f"| {component} | " + " | ".join(_seconds(e, component) for e in series) + " |")
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
    """The arguments that narrowed or widened the default invocation (3 cold runs each side, the default scales,
    the tasks, the run with the patches off, Google's side), read from what it ran."""
    runs, cold = result["runs"], result["cold"]
    scales = [entry["scale"] for entry in result.get("scale_series", [])]
    args = []
    if result.get("repeat", 3) != 3:
        args.append(f"--repeat {result['repeat']}")
    if scales and [s for s in scales if s <= 100] != list(DEFAULT_SCALES):
        args.append(f"--scales {','.join(str(s) for s in scales if s <= 100)}")
    args += [f"--scale {s}" for s in scales if s > 100]
    if "google" not in cold:
        args.append("--no-google")
    if not any(name.startswith("task-") for name in runs):
        args.append("--no-tasks")
    if PATCHES_OFF_RUN not in runs:
        args.append("--no-patches-off")
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
        cold_line(result) + patches_line(result),
        ["Goals:", "", *goal_lines(result)],
        scale_table(result),
        scale_components(result),
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


def _signed_mb(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}{_megabytes(abs(value))}"


def versus_pytorch(result: Dict[str, Any]) -> str:
    """The side-by-side block of `make bench-text`'s second part (benchmarks/text_vs_pytorch.py): each side's
    examples/s, peak and built memory and held-out accuracy on the same batches, at full width and grouped."""
    plan, recipe, machine = result["plan"], result["recipe"], result["machine"]
    runs = {(r["side"], r["mode"]): r for r in result["runs"] if "error" not in r}
    torch = next((r for r in result["runs"] if r["side"] == "pytorch" and "torch" in r), {})
    lines = [
        f"Measured {machine['date']} ({_commit(result)}), {machine['cpus']} CPU cores, no GPU, load average "
        f"{machine['load_average_1m']:.1f} at the end; `make bench-text` (`benchmarks/text_vs_pytorch.py`): "
        f"{plan['checkpoint']} fine-tuned on Debian's package descriptions ({plan['train_rows']:,} training rows, "
        f"{plan['held_out_rows']:,} held out), {plan['steps']} steps of {plan['batch']} "
        f"({plan['epochs']} epoch{'s' if plan['epochs'] > 1 else ''}) "
        f"at sequence length {plan['sequence_length']}, the same batches on both sides, {recipe['threads']} compute "
        f"threads each, examples/s after the first {recipe['warmup_timing_steps']} steps. The reference: "
        f"transformers {torch.get('transformers', '?')} on PyTorch {torch.get('torch', '?')} "
        f"({torch.get('attn_implementation', '?')} attention). Grouped: widths "
        f"{', '.join(str(w) for w in plan['widths'])} (`--length-buckets`); {plan['real_token_share']:.0%} of the "
        "padded tokens are text.",
        "",
        "| side | batches | mean width | examples/s | peak memory | at start | once built | held-out accuracy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["runs"]:
        if "error" in r:
            lines.append(f"| {r['side']} | {r['mode']} | | error: {r['error']} | | | | |")
            continue
        lines.append(
            f"| {r['side']} | {r['mode']} | {plan['fed_width_mean'][r['mode']]:.0f} | {r['examples_per_s']:,.1f} "
            f"| {_megabytes(r['peak_rss_mb'])} | {_megabytes(r['rss_start_mb'])} | {_megabytes(r['rss_built_mb'])} "
            f"| {r['accuracy']:.4f} |"
        )
    ratios = []
    for mode in ("fixed", "grouped"):
        ours, theirs = runs.get(("tfxflow", mode)), runs.get(("pytorch", mode))
        if ours and theirs:
            memory = ours["peak_rss_mb"] - theirs["peak_rss_mb"]
            own = (ours["peak_rss_mb"] - ours["rss_start_mb"]) - (theirs["peak_rss_mb"] - theirs["rss_start_mb"])
            ratios.append(
                f"{mode}: {ours['examples_per_s'] / theirs['examples_per_s']:.2f}x the reference's examples/s, "
                f"peak memory {_signed_mb(memory)} against it ({_signed_mb(own)} above each process's memory at "
                "start, which holds the framework's libraries)"
            )
    if ratios:
        lines += ["", "This project, " + "; ".join(ratios) + "."]
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


# From how many rows the shifts a data owner wants to hear about are to be refused, in drift results from before
# drift_calibration recorded it ("catch_from_rows").
UNRECORDED_CATCH_FROM_ROWS = 2000


def _refused(samples: List[Dict[str, Any]], key: str = "refused") -> int:
    return sum(bool(s[key]) for s in samples)


def _worst(sample: Dict[str, Any]) -> Tuple[str, float]:
    """The comparison nearest its threshold: its feature and distance / threshold (files from before the ratio
    was kept as a number have them as one text, "company 0.82x")."""
    if "worst_ratio" in sample:
        return sample["worst"], sample["worst_ratio"]
    feature, _, ratio = sample["worst"].rpartition(" ")
    return feature, float(ratio.rstrip("x"))


def drift(result: Dict[str, Any]) -> str:
    """The drift block of benchmarks/drift_calibration.py's results: the goals, then per size and draw how many
    same-distribution samples the gate refused (false alarms) beside TFDV's own comparators, then per shift and
    size how many shifted samples it refused (detection), TFDV's comparators beside where the file has them."""
    null, shifted, shifts = result["same_distribution"], result["shifted"], result["shifts"]
    with_tfdv = any(s["tfdv_refused"] is not None for s in null + shifted)
    catch_from = result.get("catch_from_rows", UNRECORDED_CATCH_FROM_ROWS)
    commit = f"at commit `{result['commit']}`" if result.get("commit") else "(no commit recorded)"
    data = f"`{result['data']}`" if result.get("data") else "the bundled taxi file"
    schema = f", schema `{result['schema']}`" if result.get("schema") else ""
    refused = _refused(null)
    tfdv = f" (TFDV's comparators: {_refused(null, 'tfdv_refused'):,})" if with_tfdv else ""
    lines = [
        f"Measured {result['date']} {commit}: {data} ({result['rows']:,} rows{schema}), {len(null):,} "
        f"same-distribution samples and {len(shifted):,} shifted ones.",
        "",
        "Goals:",
        "",
        f"- no same-distribution sample refused: {refused:,} of {len(null):,}{tfdv}: "
        f"**{'met' if not refused else 'NOT met'}**",
    ]
    wanted = [s for s in shifted if shifts[s["shift"]]["should_catch"] and s["size"] >= catch_from]
    if wanted:
        caught = _refused(wanted)
        lines.append(
            f"- every shift marked * refused from {catch_from:,} rows: {caught:,} of {len(wanted):,} samples: "
            f"**{'met' if caught == len(wanted) else 'NOT met'}**"
        )
    lines += [
        "",
        "Same-distribution samples refused (false alarms):",
        "",
        "| rows | draw | samples | refused | refused by TFDV's comparators | largest distance / threshold "
        "| smallest p |",
        "| ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for size in sorted({s["size"] for s in null}):
        for replace in (False, True):
            cell = [s for s in null if s["size"] == size and s["replace"] == replace]
            if not cell:
                continue
            feature, ratio = max((_worst(s) for s in cell), key=lambda found: found[1])
            whole = " (the file)" if not replace and size >= result["rows"] else ""
            lines.append(
                f"| {size:,}{whole} | {'with' if replace else 'without'} replacement | {len(cell)} | "
                f"{_refused(cell)}/{len(cell)} | "
                + (f"{_refused(cell, 'tfdv_refused')}/{len(cell)}" if with_tfdv else "-")
                + f" | {feature} {ratio:.2f}x | {min(s['min_p'] for s in cell):.2g} |"
            )
    if not shifted:
        return "\n".join(lines)
    sizes = sorted({s["size"] for s in shifted})
    columns = [f"{size:,} rows" for size in sizes] + ["refused features"]
    columns += [f"TFDV, {size:,} rows" for size in sizes] if with_tfdv else []
    lines += [
        "",
        "Shifted samples refused (detection; * marks a shift its data owner wants to hear about"
        + ("; TFDV: TFDV's comparators on the same samples" if with_tfdv else "")
        + "):",
        "",
        "| shift | magnitude | " + " | ".join(columns) + " |",
        "| --- | --- |" + " ---: |" * len(sizes) + " --- |" + (" ---: |" * len(sizes) if with_tfdv else ""),
    ]
    for index, shift in enumerate(shifts):
        cells = [[s for s in shifted if s["shift"] == index and s["size"] == size] for size in sizes]
        if not any(cells):
            continue
        features = sorted({f for cell in cells for s in cell for f in s["refused"]})
        row = [shift["kind"], f"{shift['magnitude']}{' *' if shift['should_catch'] else ''}"]
        row += [f"{_refused(cell)}/{len(cell)}" if cell else "-" for cell in cells]
        row.append(", ".join(features) or "-")
        if with_tfdv:
            row += [f"{_refused(cell, 'tfdv_refused')}/{len(cell)}" if cell else "-" for cell in cells]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _commit(result: Dict[str, Any]) -> str:
    return f"commit {result['commit']}" if result.get("commit") else "no commit recorded"


def serving(result: Dict[str, Any]) -> str:
    """`make bench-serving`'s latency and throughput per batch size, and the batching parameters it derived."""
    machine = result["machine"]
    lines = [
        f"Measured {machine['date']} ({_commit(result)}), {machine['cpus']} CPU cores, `serving_default` called "
        "in-process on one thread:",
        "",
        "| batch | p50 | p99 | examples/s |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['batch']} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {r['examples_per_s']:,} |"
        for r in result["rows"]
    ]
    parameters = ", ".join(f"`{k}` {v}" for k, v in result["batching_parameters"].items())
    lines += ["", f"The batching parameters derived for this machine: {parameters}."]
    return "\n".join(lines)


def trainer(result: Dict[str, Any]) -> str:
    """`make bench-trainer`'s examples/s and eval accuracy: Google's taxi trainer, then each configuration of
    this Trainer; the configurations that did not finish within the run's limit are named below the table."""
    machine, settings, google = result["machine"], result["settings"], result["google"]
    gpus = ", ".join(machine["gpus"]) if machine.get("gpus") else "no GPU"
    lines = [
        f"Measured {machine['date']} ({_commit(result)}), {machine['cpu_count']} CPU cores, {gpus}, TensorFlow "
        f"{machine['tensorflow']}; {settings['batch_size']:,} examples per step and {settings['steps_per_execution']} "
        "steps per execution for this Trainer:",
        "",
        "| trainer | preset | precision | XLA | examples/s | x Google | eval accuracy |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
        f"| Google `taxi_utils_native_keras` (batch {google['global_batch']}) | - | {google['precision']} | off | "
        f"{google['examples_per_s']:,.0f} | 1.0 | {google['eval_accuracy']:.4f} |",
    ]
    unfinished = []
    for run in result["tfxflow"]:
        xla = "on" if run["xla"] else "off"
        if "examples_per_s" not in run:
            unfinished.append(f"{run['preset']} {run['precision']} with XLA {xla}")
            continue
        accuracy = run.get("eval_accuracy", run.get("val_accuracy"))
        where = ""  # --gpu and --cpu-workers runs time each configuration in several layouts
        if settings.get("gpu") or run.get("workers", 1) > 1:
            workers = run.get("workers", 1)
            where = f" ({run.get('gpus', 0)} GPUs, {workers} worker{'s' if workers > 1 else ''})"
        lines.append(
            f"| tfxflow{where} | {run['preset']} | {run['precision']} | {xla} | {run['examples_per_s']:,.0f} | "
            f"{run['examples_per_s'] / google['examples_per_s']:.1f} | {accuracy:.4f} |"
        )
    if unfinished:
        lines += [
            "",
            f"Not in the table, as they did not finish within {settings['config_timeout']} s each "
            f"(`--config-timeout`): {', '.join(unfinished)}.",
        ]
    return "\n".join(lines)


def edge_models(result: Dict[str, Any]) -> str:
    """`make bench-edge`'s TFLite models per task: size, agreement with the SavedModel, the task's metric on the
    eval rows, latency at batch 1."""
    from tfxflow.components.edge import edge as edge_lib

    machine = result["machine"]
    lines = [
        f"Measured {machine['date']} ({_commit(result)}), {machine['cpus']} CPU cores: `tfxflow run --tflite` on the "
        "bundled taxi data per task and on Debian's package descriptions (text), each variant checked on the eval "
        "split's golden rows in a process of its own "
        "(components/edge/edge_probe.py) and scored on the eval rows that have every serving column (the "
        "task's default metric, the SavedModel's on the same rows beside it); latency of one row through the "
        "signature, the "
        "SavedModel's from the serving check:",
        "",
        "| task | model | size | max difference | metric on eval rows | p50 at batch 1 | load | runs in |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in result["edge_runs"]:
        saved = run["saved_model"]
        edge = run["edge"]
        scored = edge.get("eval", {})
        metric = "-"
        if "metric" in scored:
            metric = f"{scored['metric']} {scored['saved_model']:.4f} ({scored['rows']:,} rows)"
        lines.append(
            f"| {run['task']} | SavedModel | {saved['bytes'] / 1024:,.0f} KiB | - | {metric} | "
            f"{saved['p50_ms']:.2f} ms | - | TF Serving |"
        )
        runtime = edge_lib.ops_beyond_builtins(edge) or "builtin ops only"
        for variant in edge["published"]:
            entry = edge["variants"][variant]
            gap = max(entry["max_diff"].values())
            value = f"{entry['eval']['value']:.4f}" if "eval" in entry else "-"
            lines.append(
                f"| {run['task']} | `{entry['file']}` | {entry['bytes'] / 1024:,.0f} KiB | {gap:.2g} | {value} | "
                f"{entry['p50_ms']:.2f} ms | {entry['load_ms']:.1f} ms | {runtime} |"
            )
    dropped = [
        f"- {run['task']}: `{entry['file']}` not published: {entry.get('reason', 'no reason recorded')}"
        for run in result["edge_runs"]
        for variant, entry in sorted(run["edge"]["variants"].items())
        if variant not in run["edge"]["published"]
    ]
    if dropped:
        lines += ["", "Variants the check dropped in these runs:", "", *dropped]
    return "\n".join(lines)


def kind(result: Dict[str, Any]) -> str:
    """Which block a results file renders: its marker's name in the docs."""
    if "cases" in result:
        return "tuning"
    if "edge_runs" in result:
        return "edge"
    if "same_distribution" in result:
        return "drift"
    if "versus_pytorch" in result:
        return "versus-pytorch"
    if "fine_tuning" in result:
        return "fine-tuning"
    if "cold" in result:
        return "pipeline-benchmark"
    if "batching_parameters" in result:
        return "serving"
    if "google" in result and "tfxflow" in result:
        return "trainer"
    raise ValueError("no block of the docs is rendered from this file")


RENDERERS: Dict[str, Callable[[Dict[str, Any]], str]] = {
    "pipeline-benchmark": render,
    "fine-tuning": fine_tuning,
    "versus-pytorch": versus_pytorch,
    "tuning": tuning,
    "drift": drift,
    "serving": serving,
    "trainer": trainer,
    "edge": edge_models,
}


def _lane_of(path: str) -> Optional[str]:
    """The lane a results file is of (files from before the lanes are the compat lane's); None without the file."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("machine", {}).get("lane", "compat")


def write_block(path: str, root: str = REPO) -> str:
    """Puts the block rendered from the results file `path` (under `root`) into the doc that holds the block of
    its kind (README.md or a chapter in docs/), in place of that block, its marker then naming `path`; of several
    blocks of its kind (the pipeline benchmark's lanes), the one whose results are of the same lane. Returns the
    doc, relative to `root`."""
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    name = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if name.startswith(".."):
        raise ValueError(f"{path} is not under {root}: the docs name results files of the repository")
    found = kind(result)
    pattern = re.compile(rf"<!-- {found}: (\S+) -->\n.*?\n<!-- /{found} -->", re.S)
    chapters = sorted(f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    docs = [
        d for d in ["README.md", *(os.path.join("docs", f) for f in chapters)] if os.path.exists(os.path.join(root, d))
    ]
    blocks = []
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            blocks += [(doc, match) for match in pattern.finditer(f.read())]
    if len(blocks) > 1:
        lane = result.get("machine", {}).get("lane", "compat")
        blocks = [(doc, m) for doc, m in blocks if _lane_of(os.path.join(root, m.group(1))) == lane]
    if len(blocks) != 1:
        raise ValueError(f"{len(blocks)} <!-- {found}: FILE --> blocks for {name} in {', '.join(docs)}; need one")
    ((doc, match),) = blocks
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        text = f.read()
    block = f"<!-- {found}: {name} -->\n{RENDERERS[found](result).strip()}\n<!-- /{found} -->"
    with open(os.path.join(root, doc), "w", encoding="utf-8") as f:
        f.write(text[: match.start()] + block + text[match.end() :])
    return doc


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.readme_tables", description="Prints the docs' block rendered from a results file."
    )
    parser.add_argument("results", help="a results JSON file under benchmarks/results/")
    parser.add_argument(
        "--write", action="store_true", help="put the block into the doc in place of the block of its kind"
    )
    args = parser.parse_args(argv[1:])
    if args.write:
        try:
            print(f"wrote the block of {args.results} into {write_block(args.results)}")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    with open(args.results, encoding="utf-8") as f:
        result = json.load(f)
    try:
        found = kind(result)
    except ValueError as e:
        print(f"error: {args.results}: {e}", file=sys.stderr)
        return 2
    print(RENDERERS[found](result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
