"""End-to-end benchmark: this pipeline as users run it (the defaults: MLflow tracking to the home's embedded
store, the serving check on) against Google's `taxi_pipeline_native_keras`, on the same data and machine in one
invocation, each cold run several times (median and spread, runs of the two alternating); then an unchanged
re-run, a re-run through TFX's cache, one cold run with the library patches off (TFXFLOW_PATCHES=off), one cold
run per task on the same taxi file: multi-class (the payment type) and regression (the fare), each from
`infer-schema`'s drafts, beside the binary default; then a scale series (10x, 40x and 100x the bundled taxi rows;
1000x with --scale 1000).

Each run is a subprocess (the `tfxflow` CLI, or Google's pipeline with LocalDagRunner and
TF_USE_LEGACY_KERAS=1). Its peak memory is sampled every 0.2 s over its process tree (the serving check's
TensorFlow process included) two ways: the sum of resident sets (a page of a shared library counts once per
process that maps it) and the sum of proportional set sizes (such a page shared among processes counts once in
all: what a memory limit on the tree sees), and its CPU time is the user and system time of the process and of the
processes it waited for (the serving check's, Beam's workers): beside the wall time, it tells a busy machine
(steal time, a neighbour) from slower code. Per-component times come from ML Metadata. Prints a table and the
goals, and writes JSON with the commit and the machine; `python -m benchmarks.readme_tables FILE` renders the
docs' tables from it:

    make bench                       # 1x (3 cold runs each side), 10x to 100x, the tasks: 30 to 50 minutes on 2 cores
    make bench ARGS="--scale 1000"   # adds 1000x (15M rows): 18 to 35 minutes more
    .venv/bin/python -m benchmarks.pipeline_benchmark --repeat 1 --scales 1 --no-tasks --out /tmp/bench.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import psutil

from benchmarks import provenance
from tfxflow.components import lane, names
from tfxflow.pipeline.inputs import bundled_taxi_data_root
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
    peak_pss_mb: float = 0.0
    cpu_s: float = 0.0  # user + system time of the process tree (0: not measured)


def _tree_memory(process: psutil.Process) -> Tuple[int, int]:
    """(sum of resident sets, sum of proportional set sizes) over `process` and its descendants, in bytes."""
    rss = pss = 0
    for p in [process] + process.children(recursive=True):
        try:
            info = p.memory_full_info()
        except psutil.Error:  # a worker that exited between listing and reading
            continue
        rss, pss = rss + info.rss, pss + info.pss
    return rss, pss


def _wait_counting_cpu(proc: subprocess.Popen) -> Tuple[int, float]:
    """Waits for `proc`: its exit status, and the user + system seconds of it and of the children it waited for.
    os.wait4 counts that one process's tree; the difference of this process's RUSAGE_CHILDREN would also count
    any earlier child that a new Popen reaps meanwhile (subprocess collects the zombies of Popen objects gone)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def run_measured(
    name: str, cmd: List[str], env: Dict[str, str], log_path: str, metadata_path: str, pipeline_name: str
) -> Measured:
    """Runs `cmd`, sampling its process tree's memory; reads the run's components and metrics from MLMD."""
    peak, peak_pss, done, timeline = [0], [0], threading.Event(), []
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        watched = psutil.Process(proc.pid)

        def sample() -> None:
            while not done.is_set():
                try:
                    rss, pss = _tree_memory(watched)
                except psutil.Error:
                    return
                peak[0], peak_pss[0] = max(peak[0], rss), max(peak_pss[0], pss)
                timeline.append((time.time(), rss))
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode, cpu = _wait_counting_cpu(proc)
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
        round(peak_pss[0] / 2**20),
        round(cpu, 1),
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


def run_ours(
    name: str,
    home: str,
    data_root: str,
    extra: List[str],
    logs: str,
    env_extra: Optional[Dict[str, str]] = None,
    dataset: str = "taxi",
) -> Measured:
    env = dict(os.environ, **(env_extra or {}))
    # The defaults, as users run it: tracking to the home's embedded MLflow store, the serving check on.
    cmd = [TFXFLOW, "run", "--home", home, "--data-root", data_root, *extra]
    return run_measured(
        name,
        cmd,
        env,
        os.path.join(logs, f"{name}.log"),
        os.path.join(home, "metadata", "metadata.sqlite"),
        f"tfxflow-{dataset}",
    )


# One cold 1x run with every library patch off (pipeline/patches/): what they save, beside the cold runs.
PATCHES_OFF_RUN = "ours-patches-off"

# The taxi file as each task, its label drafted by infer-schema: (task, label column).
TASKS = (("multiclass", "payment_type"), ("regression", "fare"))


def run_task(task: str, label: str, work: str, extra: List[str], logs: str) -> Measured:
    """infer-schema's drafts for `label` on the taxi file, run unchanged and cold."""
    out = os.path.join(work, f"draft-{task}")
    drafted = subprocess.run(
        [TFXFLOW, "infer-schema", "--data-root", bundled_taxi_data_root(), "--out", out, "--label", label],
        capture_output=True,
        text=True,
        check=False,
    )
    if drafted.returncode != 0:  # a failed run of the benchmark's, not the end of it
        log = os.path.join(logs, f"task-{task}.log")
        with open(log, "w", encoding="utf-8") as f:
            f.write(drafted.stdout + drafted.stderr)
        return Measured(f"task-{task}", 0.0, 0.0, drafted.returncode, {}, {}, {}, log)
    drafts = ["--schema", os.path.join(out, "schema.pbtxt"), "--feature-config", os.path.join(out, "features.yaml")]
    return run_ours(
        f"task-{task}",
        os.path.join(work, f"task-{task}"),
        bundled_taxi_data_root(),
        [*drafts, "--dataset", task, *extra],
        logs,
        dataset=task,
    )


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


def machine() -> Dict[str, object]:
    import re

    model = ""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            model = found.group(1).strip() if found else ""
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "processor": model or platform.processor() or platform.machine(),
        "python": platform.python_version(),
        # Which stack the figures are of (docs/environment.md): the compat lane's goals apply to both.
        "lane": lane.name(),
        "tfx": importlib.metadata.version("tfx"),
        "date": datetime.date.today().isoformat(),
    }


def spread(values: List[float]) -> Dict[str, float]:
    """Median (the lower middle value of an even count: a run's own time), min and max of `values`."""
    ordered = sorted(values)
    median = ordered[(len(ordered) - 1) // 2]
    return {"median_s": round(median, 1), "min_s": round(ordered[0], 1), "max_s": round(ordered[-1], 1)}


def median_run(runs: Dict[str, Dict[str, Any]], names_: List[str]) -> str:
    """The name of the run whose wall time is the median of `names_` (the lower middle one of an even count)."""
    ordered = sorted(names_, key=lambda name: runs[name]["wall_s"])
    return ordered[(len(ordered) - 1) // 2]


def cold_summary(runs: Dict[str, Dict[str, Any]], prefix: str) -> Optional[Dict[str, Any]]:
    """The cold runs named `<prefix>-cold-<i>` that succeeded: their wall times' spread, the median run's
    name, the largest peaks among them and, when each was measured, the median of their CPU times."""
    names_ = [n for n, r in runs.items() if n.startswith(f"{prefix}-cold-") and r["returncode"] == 0]
    if not names_:
        return None
    cpu = [runs[n].get("cpu_s", 0.0) for n in names_]
    return {
        **spread([runs[n]["wall_s"] for n in names_]),
        "runs": sorted(names_),
        "median_run": median_run(runs, names_),
        "peak_rss_mb": max(runs[n]["peak_rss_mb"] for n in names_),
        "peak_pss_mb": max(runs[n].get("peak_pss_mb", 0.0) for n in names_),
        **({"cpu_median_s": spread(cpu)["median_s"]} if all(cpu) else {}),
    }


def _example_gen_rate(entry: dict) -> Optional[float]:
    """ExampleGen's rows per second per core used (it reads up to one file per core at a time)."""
    seconds = (entry["components"].get(names.EXAMPLE_GEN) or {}).get("seconds")
    if not seconds:
        return None
    cores = max(1, min(os.cpu_count() or 1, entry.get("files", 1)))
    return entry["rows"] / seconds / cores


# The goals `make bench` checks: a cold run at most a third of Google's time (the stretch a quarter), the
# process tree's peak within 1.5 GiB at every scale, each scale's wall within its multiple of the 1x wall (the
# fixed cost of a run is paid once: 10x within 1.5x, 40x within 2.5x, 100x within 4x), 1000x within 5x the 100x.
RATIO_GOAL, RATIO_STRETCH = 0.33, 0.25
PEAK_GOAL_MB = 1536
SCALE_GOALS = {10: 1.5, 40: 2.5, 100: 4.0}
THOUSAND_GOAL = 5.0
DEFAULT_SCALES = (1, 10, 40, 100)
# Without Google's side, accuracy is held to the 1x figure less one standard error of an accuracy near it
# on the taxi eval split's 3,726 rows (0.0050): a smaller gap is one the eval split cannot tell from its sampling
# noise. The exact figure failed on run-to-run variation (identical cold runs: 0.8943 to 0.8959).
REFERENCE_ACCURACY, REFERENCE_EVAL_ROWS = 0.8964, 3726
REFERENCE_TOLERANCE = math.sqrt(REFERENCE_ACCURACY * (1 - REFERENCE_ACCURACY) / REFERENCE_EVAL_ROWS)


def goals(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Each goal with the figure that decides it: [{"goal", "figure", "met"}], from the results JSON."""
    runs, series, found = result["runs"], result["scale_series"], []
    ours, google = result["cold"].get("ours"), result["cold"].get("google")
    if ours is None:
        return [{"goal": "1x cold run of ours succeeds", "figure": "every cold run failed", "met": False}]
    accuracy = runs[ours["median_run"]]["metrics"].get("binary_accuracy", 0.0)
    if google is not None:
        ratio = ours["median_s"] / google["median_s"]
        cpu = ""
        if "cpu_median_s" in ours and "cpu_median_s" in google:  # beside the goal's wall times, not deciding it
            cpu_ours, cpu_google = ours["cpu_median_s"], google["cpu_median_s"]
            cpu = f" (CPU time {cpu_ours:.1f} s / {cpu_google:.1f} s = {cpu_ours / cpu_google:.2f})"
        found.append(
            {
                "goal": f"1x cold, median wall: ours <= {RATIO_GOAL} x Google's (stretch {RATIO_STRETCH})",
                "figure": f"{ours['median_s']:.1f} s / {google['median_s']:.1f} s = {ratio:.2f}{cpu}",
                "met": ratio <= RATIO_GOAL,
            }
        )
        google_accuracy = runs[google["median_run"]]["metrics"].get("binary_accuracy")
        found.append(
            {
                "goal": "1x accuracy at least Google's",
                "figure": f"binary_accuracy {accuracy:.4f} vs "
                + ("none recorded" if google_accuracy is None else f"{google_accuracy:.4f}"),
                "met": google_accuracy is not None and accuracy >= google_accuracy,
            }
        )
    else:
        floor = REFERENCE_ACCURACY - REFERENCE_TOLERANCE
        found.append(
            {
                "goal": f"1x accuracy as before ({REFERENCE_ACCURACY}, less one standard error: {floor:.4f})",
                "figure": f"{accuracy:.4f}",
                "met": accuracy >= floor,
            }
        )
    if "ours-cached" in runs:
        cached = runs["ours-cached"]["wall_s"] / ours["median_s"]
        failed = runs["ours-cached"]["returncode"] != 0
        found.append(
            {
                "goal": "unchanged re-run < 10% of the cold run",
                "figure": f"{runs['ours-cached']['wall_s']:.1f} s = {cached:.0%}" + (" (it failed)" if failed else ""),
                "met": not failed and cached < 0.1,
            }
        )
    by_scale = {e["scale"]: e for e in series if e["returncode"] == 0}
    for entry in series:
        goal = f"{entry['scale']}x peak memory of the process tree <= {PEAK_GOAL_MB} MB (proportional)"
        if "error" in entry:  # its data could not be written
            found.append({"goal": goal, "figure": f"not run: {entry['error']}", "met": False})
            continue
        peak = entry.get("peak_pss_mb") or entry["peak_rss_mb"]
        figure = f"{peak:,.0f} MB (resident sets summed: {entry['peak_rss_mb']:,.0f} MB)"
        failed = entry["returncode"] != 0
        found.append(
            {
                "goal": goal,
                "figure": figure + (" (the run failed)" if failed else ""),
                "met": not failed and peak <= PEAK_GOAL_MB,
            }
        )
    base, hundred, thousand = by_scale.get(1), by_scale.get(100), by_scale.get(1000)
    for scale, limit in SCALE_GOALS.items():
        if base and scale in by_scale:
            factor = by_scale[scale]["wall_s"] / base["wall_s"]
            found.append(
                {
                    "goal": f"{scale}x wall <= {limit:g} x the 1x wall",
                    "figure": f"{by_scale[scale]['wall_s']:.1f} s / {base['wall_s']:.1f} s = {factor:.2f}",
                    "met": factor <= limit,
                }
            )
    if hundred and thousand:
        factor = thousand["wall_s"] / hundred["wall_s"]
        found.append(
            {
                "goal": f"1000x wall <= {THOUSAND_GOAL:g} x the 100x wall",
                "figure": f"{factor:.2f}",
                "met": factor <= THOUSAND_GOAL,
            }
        )
    rates = [(e["scale"], _example_gen_rate(e)) for e in by_scale.values() if e["scale"] > 1 and _example_gen_rate(e)]
    if rates:
        found.append(
            {
                "goal": "CsvExampleGen >= 50,000 rows/s per core",
                "figure": ", ".join(f"{scale}x {rate:,.0f}" for scale, rate in rates),
                "met": min(rate for _, rate in rates) >= 50_000,
            }
        )
    return found


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="cold runs of each side at 1x (default 3)")
    parser.add_argument(
        "--scales",
        default=",".join(str(s) for s in DEFAULT_SCALES),
        help="comma-separated multiples of the taxi rows (default %(default)s)",
    )
    parser.add_argument("--scale", type=int, help="one more, larger scale: e.g. --scale 1000 (15M rows, 1.8 GB)")
    parser.add_argument("--no-google", action="store_true", help="skip Google's pipeline")
    parser.add_argument("--no-tasks", action="store_true", help="skip the multi-class and regression runs")
    parser.add_argument("--no-patches-off", action="store_true", help="skip the cold 1x run with TFXFLOW_PATCHES=off")
    parser.add_argument("--work", help="folder for homes, data and logs (default: a temp folder, removed)")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/pipeline-<date>.json)")
    parser.add_argument("--run-args", default="", help="extra `tfxflow run` flags for every run of ours")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    scales = sorted(
        {int(s) for s in args.scales.split(",") if s.strip()} | {1} | ({args.scale} if args.scale else set())
    )
    # The code measured is the checkout's as the runs start, whatever is committed while they run.
    measured_commit = provenance.commit()
    work = args.work or tempfile.mkdtemp(prefix="tfxflow-bench-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    extra = args.run_args.split()
    results: Dict[str, Measured] = {}

    def report(result: Measured) -> None:
        status = "ok" if result.returncode == 0 else f"FAILED ({result.returncode}), see {result.log}"
        shown = next((m for m in ("binary_accuracy", "accuracy", "r2") if m in result.metrics), "binary_accuracy")
        print(
            f"  {result.name:<16} {result.wall_s:8.1f} s  peak {result.peak_pss_mb:6.0f} MB "
            f"({result.peak_rss_mb:,.0f} MB resident)  CPU {result.cpu_s:6.1f} s  "
            f"{shown} {result.metrics.get(shown, float('nan')):.4f}  "
            f"{status}",
            flush=True,
        )
        results[result.name] = result

    print(f"tfxflow benchmark: work folder {work}", flush=True)
    taxi = bundled_taxi_data_root()
    # Alternating, so that a machine that slows down or speeds up meanwhile weighs on both sides alike.
    for i in range(1, args.repeat + 1):
        report(run_ours(f"ours-cold-{i}", os.path.join(work, f"ours-1x-{i}"), taxi, extra, logs))
        if not args.no_google:
            report(run_google(f"google-cold-{i}", os.path.join(work, f"google-{i}"), logs))
    if not args.no_patches_off:  # what the library patches save: the libraries' own code, the same run
        off = {"TFXFLOW_PATCHES": "off"}
        report(run_ours(PATCHES_OFF_RUN, os.path.join(work, "ours-1x-patches-off"), taxi, extra, logs, off))
    # Nothing changed: the CLI answers from its last-run record. --force goes through TFX's cache instead.
    report(run_ours("ours-cached", os.path.join(work, "ours-1x-1"), taxi, extra, logs))
    report(run_ours("ours-forced", os.path.join(work, "ours-1x-1"), taxi, extra + ["--force"], logs))
    if not args.no_google:
        report(run_google("google-cached", os.path.join(work, "google-1"), logs))
    if not args.no_tasks:
        for task, label in TASKS:
            report(run_task(task, label, work, extra, logs))
    runs = {k: dataclasses.asdict(v) for k, v in results.items()}
    cold = {side: cold_summary(runs, side) for side in ("ours", "google")}
    series = []
    for scale in scales:
        if scale == 1:
            if cold["ours"] is None:
                continue
            # The median cold run's time, the largest peak of the cold runs.
            measured = dataclasses.replace(
                results[cold["ours"]["median_run"]],
                peak_rss_mb=cold["ours"]["peak_rss_mb"],
                peak_pss_mb=cold["ours"]["peak_pss_mb"],
            )
            rows, files = sum(measured.rows.values()), 1
        else:
            from benchmarks.scaled_data import write_scaled

            data = os.path.join(work, f"data-{scale}x")
            try:
                written = write_scaled(scale, data)
            except OSError as err:  # e.g. a full disk at 1000x: the runs so far are still written
                print(f"  data {scale}x could not be written: {err}", flush=True)
                shutil.rmtree(data, ignore_errors=True)
                series.append({"scale": scale, "returncode": 1, "error": str(err)})
                continue
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
                "run": measured.name,
                "rows": rows,
                "files": files,
                "wall_s": measured.wall_s,
                "rows_per_s": round(rows / measured.wall_s),
                "peak_rss_mb": measured.peak_rss_mb,
                "peak_pss_mb": measured.peak_pss_mb,
                "returncode": measured.returncode,
                "components": measured.components,
                "metrics": measured.metrics,
                "peak_rss_mb_by_component": measured.peak_rss_mb_by_component,
            }
        )
    summary = {
        "commit": measured_commit,
        "machine": machine(),
        "run_args": extra,
        "repeat": args.repeat,
        "runs": {k: dataclasses.asdict(v) for k, v in results.items()},
        "cold": {side: found for side, found in cold.items() if found is not None},
        "scale_series": series,
    }
    out = args.out or provenance.new_results_path("pipeline")
    os.makedirs(os.path.dirname(out), exist_ok=True)

    def write() -> None:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)

    write()  # the runs are kept whatever happens below
    from benchmarks import readme_tables

    summary["goals"] = goals(summary)
    write()
    print("\n" + readme_tables.render(summary))
    print(f"\nwrote {out}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    failed = [r.name for r in results.values() if r.returncode != 0]
    missed = [g["goal"] for g in summary["goals"] if not g["met"]]
    if failed:
        print(f"failed runs: {', '.join(failed)}")
    if missed:
        print(f"goals not met: {len(missed)} of {len(summary['goals'])}")
    return 0 if not failed and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
