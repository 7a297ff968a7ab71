"""End-to-end benchmark: this pipeline against Google's `taxi_pipeline_native_keras`, cold and cached, on the
same data and machine in one invocation, then a scale series at 1x, 10x and 100x the bundled taxi rows, and one
cold run per task on the same taxi file: multi-class (the payment type) and regression (the fare), each from
`infer-schema`'s drafts, beside the binary default.

Each run is a subprocess (the `tfxflow` CLI, or Google's pipeline with LocalDagRunner and
TF_USE_LEGACY_KERAS=1); its peak resident memory is the largest sum over its process tree, sampled every
0.2 s; per-component times come from ML Metadata. Prints a table and writes JSON:

    make bench                       # all of it (about 12 minutes on 2 cores)
    make bench ARGS="--scale 1000"   # 1x, 100x and 1000x (15M rows): about 40 minutes
    .venv/bin/python -m benchmarks.pipeline_benchmark --scales 1,10 --out /tmp/bench.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

import psutil

from tfxflow.components import names
from tfxflow.pipeline.config import bundled_taxi_data_root
from tfxflow.pipeline.reports import run_record as report_lib

TFXFLOW = os.path.join(os.path.dirname(sys.executable), "tfxflow")
GOOGLE_PIPELINE = "chicago_taxi_native_keras"
# The example's own module-level paths point at ~/taxi; its data and module file ship beside it in the wheel.
GOOGLE_SCRIPT = """
import os, sys
from tfx.examples.chicago_taxi_pipeline import taxi_pipeline_native_keras as taxi
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
home, example = sys.argv[1], os.path.dirname(taxi.__file__)
LocalDagRunner().run(taxi._create_pipeline(
    pipeline_name=taxi._pipeline_name, pipeline_root=home + "/pipeline_root",
    data_root=os.path.join(example, "data", "simple"), module_file=os.path.join(example, "taxi_utils_native_keras.py"),
    serving_model_dir=home + "/serving", metadata_path=home + "/metadata.db",
    beam_pipeline_args=taxi._beam_pipeline_args))
"""


@dataclasses.dataclass
class Measured:
    name: str
    wall_s: float
    peak_rss_mb: float
    returncode: int
    components: Dict[str, Dict[str, object]]
    metrics: Dict[str, float]
    rows: Dict[str, int]
    log: str
    peak_rss_mb_by_component: Dict[str, float] = dataclasses.field(default_factory=dict)


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for p in [process] + process.children(recursive=True):
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a worker that exited between listing and reading
            pass
    return total


def run_measured(
    name: str, cmd: List[str], env: Dict[str, str], log_path: str, metadata_path: str, pipeline_name: str
) -> Measured:
    """Runs `cmd`, sampling its process tree's memory; reads the run's components and metrics from MLMD."""
    peak, done, timeline = [0], threading.Event(), []
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        watched = psutil.Process(proc.pid)

        def sample() -> None:
            while not done.is_set():
                try:
                    rss = _tree_rss(watched)
                except psutil.Error:
                    return
                peak[0] = max(peak[0], rss)
                timeline.append((time.time(), rss))
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode = proc.wait()
        done.set()
        sampler.join()
    wall = time.monotonic() - started
    run = report_lib.read_run(metadata_path, pipeline_name)
    components = (
        {} if run is None else {c.name: {"state": c.state, "seconds": round(c.seconds, 1)} for c in run.components}
    )
    metrics = {} if run is None else {k: round(v, 4) for k, v in run.metrics.items() if "." not in k}
    return Measured(
        name,
        round(wall, 1),
        round(peak[0] / 2**20),
        returncode,
        components,
        metrics,
        {} if run is None else run.rows,
        log_path,
        _peak_by_component(metadata_path, timeline),
    )


def _peak_by_component(metadata_path: str, timeline: List[tuple]) -> Dict[str, float]:
    """The peak process-tree memory while each component ran (LocalDagRunner logs "Component X is running.")."""
    import glob
    import re

    logs = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(metadata_path)), "logs", "run-*.log")))
    if not logs or not timeline:
        return {}
    starts = []
    with open(logs[-1], encoding="utf-8", errors="replace") as f:
        for line in f:
            match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d+) INFO absl: Component (\S+) is running\.", line)
            if match:
                moment = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                starts.append((moment + int(match.group(2)) / 1000, match.group(3)))
    peaks: Dict[str, float] = {}
    for i, (start, component) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else float("inf")
        inside = [rss for moment, rss in timeline if start <= moment < end]
        if inside:
            peaks[component] = round(max(inside) / 2**20)
    return peaks


def run_ours(name: str, home: str, data_root: str, extra: List[str], logs: str, dataset: str = "taxi") -> Measured:
    env = dict(os.environ)
    cmd = [TFXFLOW, "run", "--home", home, "--data-root", data_root, "--tracking", "off", *extra]
    return run_measured(
        name,
        cmd,
        env,
        os.path.join(logs, f"{name}.log"),
        os.path.join(home, "metadata", "metadata.sqlite"),
        f"tfxflow-{dataset}",
    )


# The taxi file as each task, its label drafted by infer-schema: (task, label column).
TASKS = (("multiclass", "payment_type"), ("regression", "fare"))


def run_task(task: str, label: str, work: str, extra: List[str], logs: str) -> Measured:
    """infer-schema's drafts for `label` on the taxi file, run unchanged and cold."""
    out = os.path.join(work, f"draft-{task}")
    subprocess.run(
        [TFXFLOW, "infer-schema", "--data-root", bundled_taxi_data_root(), "--out", out, "--label", label],
        check=True,
        capture_output=True,
    )
    drafts = ["--schema", os.path.join(out, "schema.pbtxt"), "--feature-config", os.path.join(out, "features.yaml")]
    return run_ours(
        f"task-{task}",
        os.path.join(work, f"task-{task}"),
        bundled_taxi_data_root(),
        [*drafts, "--dataset", task, *extra],
        logs,
        dataset=task,
    )


def task_lines(results: Dict[str, Measured]) -> List[str]:
    """One line per task: its label, wall time, peak memory and its blessing metric (the binary default's run
    is the cold run of ours)."""
    from tfxflow.components.model import tasks

    rows = [("binary", "tips > 0.2 x fare", results.get("ours-cold"))]
    rows += [(task, label, results.get(f"task-{task}")) for task, label in TASKS]
    lines = [f"{'task':<11} {'label':<18} {'wall':>8} {'peak RSS':>10}  metric"]
    for task, label, measured in rows:
        if measured is None:
            continue
        metric = tasks.spec(task).default_metric
        value = measured.metrics.get(metric, float("nan"))
        lines.append(
            f"{task:<11} {label:<18} {measured.wall_s:6.1f} s {measured.peak_rss_mb:7.0f} MB  {metric} {value:.4f}"
        )
    return lines


def run_google(name: str, home: str, logs: str) -> Measured:
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
    os.makedirs(home, exist_ok=True)
    return run_measured(
        name,
        [sys.executable, "-c", GOOGLE_SCRIPT, home],
        env,
        os.path.join(logs, f"{name}.log"),
        os.path.join(home, "metadata.db"),
        GOOGLE_PIPELINE,
    )


def _machine() -> Dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }


def _table(results: Dict[str, Measured], columns: List[str]) -> str:
    names: List[str] = []
    for key in columns:
        for component in results[key].components:
            if component not in names:
                names.append(component)
    width = max(len(n) for n in names + ["total wall"]) + 2
    lines = [f"{'':<{width}}" + "".join(f"{c:>16}" for c in columns)]
    for component in names:
        cells = []
        for key in columns:
            info = results[key].components.get(component)
            cells.append(
                "-" if info is None else f"{info['seconds']:.1f} s" + (" c" if info["state"] == "cached" else "")
            )
        lines.append(f"{component:<{width}}" + "".join(f"{c:>16}" for c in cells))
    lines.append(f"{'total wall':<{width}}" + "".join(f"{results[k].wall_s:>14.1f} s" for k in columns))
    lines.append(f"{'peak RSS':<{width}}" + "".join(f"{results[k].peak_rss_mb:>13.0f} MB" for k in columns))
    for metric in ("binary_accuracy", "auc"):
        lines.append(
            f"{metric:<{width}}" + "".join(f"{results[k].metrics.get(metric, float('nan')):>16.4f}" for k in columns)
        )
    return "\n".join(lines)


def _example_gen_rate(entry: dict) -> Optional[float]:
    """ExampleGen's rows per second per core used (it reads up to one file per core at a time)."""
    seconds = (entry["components"].get(names.EXAMPLE_GEN) or {}).get("seconds")
    if not seconds:
        return None
    cores = max(1, min(os.cpu_count() or 1, entry.get("files", 1)))
    return entry["rows"] / seconds / cores


def _goals(results: Dict[str, Measured], series: List[dict]) -> List[str]:
    """Each goal of the benchmark with the figure that decides it."""

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    ours, lines = results["ours-cold"], []
    accuracy = ours.metrics.get("binary_accuracy", 0.0)
    if "google-cold" in results and results["google-cold"].returncode == 0:
        google = results["google-cold"]
        ratio = ours.wall_s / google.wall_s
        google_accuracy = google.metrics.get("binary_accuracy", 0.0)
        lines.append(
            f"1x wall: ours {ours.wall_s:.1f} s / Google {google.wall_s:.1f} s = {ratio:.2f} (goal <= 0.50): "
            f"{verdict(ratio <= 0.5)}"
        )
        lines.append(
            f"1x accuracy: ours {accuracy:.4f}, Google {google_accuracy:.4f} (goal >= Google's and >= "
            f"0.834): {verdict(accuracy >= max(google_accuracy, 0.834))}"
        )
    else:
        lines.append(f"1x accuracy: {accuracy:.4f} (goal >= 0.896): {verdict(accuracy >= 0.896)}")
    if "ours-cached" in results:
        cached = results["ours-cached"].wall_s / ours.wall_s
        forced = results["ours-forced"].wall_s / ours.wall_s
        lines.append(
            f"re-run, nothing changed: {results['ours-cached'].wall_s:.1f} s = {cached:.0%} of cold (goal < "
            f"10%): {verdict(cached < 0.1)}; through TFX's cache (--force): {forced:.0%}"
        )
    by_scale = {e["scale"]: e for e in series if e["returncode"] == 0}
    base, hundred = by_scale.get(1), by_scale.get(100)
    if hundred and base:
        factor = hundred["wall_s"] / base["wall_s"]
        top_name, top_s = max(((n, c["seconds"]) for n, c in hundred["components"].items()), key=lambda kv: kv[1])
        share = top_s / hundred["wall_s"]
        lines.append(
            f"100x wall: {factor:.1f} x the 1x run (goal <= 4): {verdict(factor <= 4)}; peak RSS "
            f"{hundred['peak_rss_mb']:.0f} MB (goal < 1536): {verdict(hundred['peak_rss_mb'] < 1536)}; "
            f"largest component {top_name} {share:.0%} of the wall (goal <= 60%): {verdict(share <= 0.6)}"
        )
    thousand = by_scale.get(1000)
    if thousand and hundred:
        factor = thousand["wall_s"] / hundred["wall_s"]
        lines.append(
            f"1000x wall: {factor:.1f} x the 100x run (goal <= 12): {verdict(factor <= 12)}; peak RSS "
            f"{thousand['peak_rss_mb']:.0f} MB (goal < 2048): {verdict(thousand['peak_rss_mb'] < 2048)}"
        )
    rates = [(e["scale"], _example_gen_rate(e)) for e in series if e["scale"] > 1 and _example_gen_rate(e)]
    if rates:
        slowest = min(rate for _, rate in rates)
        lines.append(
            "ExampleGen rows/s per core: "
            + ", ".join(f"{scale}x {rate:,.0f}" for scale, rate in rates)
            + f" (goal >= 50,000): {verdict(slowest >= 50_000)}"
        )
    peaks = [(e["scale"], e["peak_rss_mb_by_component"].get(names.EXAMPLE_GEN)) for e in series]
    peaks = [(scale, mb) for scale, mb in peaks if mb]
    if len(peaks) > 1:
        lines.append(
            "ExampleGen peak RSS by scale: "
            + ", ".join(f"{scale}x {mb:.0f} MB" for scale, mb in peaks)
            + " (memory independent of the input size)"
        )
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1,10,100", help="comma-separated multiples of the taxi rows")
    parser.add_argument(
        "--scale",
        type=int,
        help="one large scale, measured beside 1x and 100x (no Google run, "
        "no cached re-runs): e.g. --scale 1000 (15M rows, 2 GB of CSV)",
    )
    parser.add_argument("--no-google", action="store_true", help="skip Google's pipeline")
    parser.add_argument("--no-tasks", action="store_true", help="skip the multi-class and regression runs")
    parser.add_argument("--work", help="folder for homes, data and logs (default: a temp folder, removed)")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/pipeline-<date>.json)")
    parser.add_argument("--run-args", default="", help="extra `tfxflow run` flags for every run of ours")
    args = parser.parse_args(argv)
    scales = [int(s) for s in args.scales.split(",") if s.strip()]
    if args.scale:
        scales, args.no_google = sorted({1, 100, args.scale}), True
    work = args.work or tempfile.mkdtemp(prefix="tfxflow-bench-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    extra = args.run_args.split()
    results: Dict[str, Measured] = {}

    def report(result: Measured) -> None:
        status = "ok" if result.returncode == 0 else f"FAILED ({result.returncode}), see {result.log}"
        shown = next((m for m in ("binary_accuracy", "accuracy", "r2") if m in result.metrics), "binary_accuracy")
        print(
            f"  {result.name:<16} {result.wall_s:8.1f} s  peak {result.peak_rss_mb:6.0f} MB  "
            f"{shown} {result.metrics.get(shown, float('nan')):.4f}  {status}",
            flush=True,
        )
        results[result.name] = result

    print(f"tfxflow benchmark: work folder {work}", flush=True)
    report(run_ours("ours-cold", os.path.join(work, "ours-1x"), bundled_taxi_data_root(), extra, logs))
    if not args.scale:
        # Nothing changed: the CLI answers from its last-run record. --force goes through TFX's cache instead.
        report(run_ours("ours-cached", os.path.join(work, "ours-1x"), bundled_taxi_data_root(), extra, logs))
        report(
            run_ours("ours-forced", os.path.join(work, "ours-1x"), bundled_taxi_data_root(), extra + ["--force"], logs)
        )
    if not args.no_google:
        report(run_google("google-cold", os.path.join(work, "google"), logs))
        report(run_google("google-cached", os.path.join(work, "google"), logs))
    if not args.no_tasks and not args.scale:
        for task, label in TASKS:
            report(run_task(task, label, work, extra, logs))
    series = []
    for scale in scales:
        if scale == 1:
            measured = results["ours-cold"]
            rows, files = sum(measured.rows.values()), 1
        else:
            from benchmarks.scaled_data import write_scaled

            data = os.path.join(work, f"data-{scale}x")
            written = write_scaled(scale, data)
            print(
                f"  data {scale}x: {written['rows']:,} rows, {written['bytes'] / 1e6:.0f} MB in "
                f"{written['seconds']:.0f} s",
                flush=True,
            )
            measured = run_ours(f"ours-{scale}x", os.path.join(work, f"ours-{scale}x"), data, extra, logs)
            report(measured)
            rows, files = int(written["rows"]), int(written["files"])
            shutil.rmtree(data, ignore_errors=True)
        series.append(
            {
                "scale": scale,
                "rows": rows,
                "files": files,
                "wall_s": measured.wall_s,
                "rows_per_s": round(rows / measured.wall_s),
                "peak_rss_mb": measured.peak_rss_mb,
                "returncode": measured.returncode,
                "components": measured.components,
                "metrics": measured.metrics,
                "peak_rss_mb_by_component": measured.peak_rss_mb_by_component,
            }
        )

    columns = [k for k in ("ours-cold", "ours-forced", "google-cold", "google-cached") if k in results]
    print("\n" + _table(results, columns))
    print("\n" + "\n".join(_goals(results, series)))
    if any(name.startswith("task-") for name in results):
        print("\n" + "\n".join(task_lines(results)))
    print(f"\n{'scale':>6} {'rows':>11} {'wall':>9} {'rows/s':>9} {'peak RSS':>10} {'x 1x wall':>10}")
    base = series[0]["wall_s"] if series and series[0]["scale"] == 1 else None
    for entry in series:
        factor = f"{entry['wall_s'] / base:.1f}" if base else "-"
        top = sorted(entry["peak_rss_mb_by_component"].items(), key=lambda kv: -kv[1])[:2]
        factor += "   peak in " + ", ".join(f"{name} {mb:.0f} MB" for name, mb in top) if top else ""
        print(
            f"{entry['scale']:>5}x {entry['rows']:>11,} {entry['wall_s']:>7.1f} s {entry['rows_per_s']:>9,} "
            f"{entry['peak_rss_mb']:>7.0f} MB {factor:>10}"
        )
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", f"pipeline-{datetime.date.today():%Y%m%d}.json"
    )
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "machine": _machine(),
                "run_args": extra,
                "runs": {k: dataclasses.asdict(v) for k, v in results.items()},
                "scale_series": series,
            },
            f,
            indent=2,
        )
    print(f"\nwrote {out}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.returncode == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
