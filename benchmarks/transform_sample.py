"""Does Transform's analysis sample (`--transform-max-rows`, components/training/transform.py) cost model quality? The
pipeline on scaled taxi data (20x: 300,040 rows), each seed twice from a cold home: Transform analyzing every
training row, and analyzing every k-th of them (default: a bound of 40,000, every 6th of the 225,000 training
rows: 37,550 analyzed, fewer than the 100,000 the default bound of 200,000 leaves at least). The same eval split
(the Evaluator's same sample) judges both. Prints each run's metrics and Transform's time, and per metric the mean
of each side and of the paired differences with their spread; writes JSON with the commit and the machine:

    make bench-transform-sample                     # 3 seeds x 2, about 8 minutes on 2 cores
    make bench-transform-sample ARGS="--seeds 1,2,3,4,5 --max-rows 20000"
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
from typing import Dict, List, Optional

from benchmarks import provenance
from benchmarks.pipeline_benchmark import Measured, machine, run_ours
from benchmarks.scaled_data import write_scaled

METRICS = ("binary_accuracy", "auc", "precision", "recall")


def compare(runs: Dict[str, Measured], seeds: List[int]) -> Dict[str, Dict[str, float]]:
    """Per metric: the mean over seeds of the whole-split side, of the sampled side, and of their paired
    differences (sampled - whole) with the smallest and largest difference."""
    out = {}
    for metric in METRICS:
        whole = [runs[f"all-{s}"].metrics.get(metric) for s in seeds]
        sampled = [runs[f"sample-{s}"].metrics.get(metric) for s in seeds]
        if any(v is None for v in whole + sampled):
            continue
        diffs = [b - a for a, b in zip(whole, sampled, strict=True)]
        out[metric] = {
            "all_mean": round(statistics.fmean(whole), 4),
            "sample_mean": round(statistics.fmean(sampled), 4),
            "diff_mean": round(statistics.fmean(diffs), 4),
            "diff_min": round(min(diffs), 4),
            "diff_max": round(max(diffs), 4),
        }
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=20, help="multiple of the taxi rows (default 20)")
    parser.add_argument("--max-rows", type=int, default=40_000, help="the sampled side's --transform-max-rows")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds (default 1,2,3)")
    parser.add_argument("--work", help="folder for homes, data and logs (default: a temp folder, removed)")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/transform-sample-<date>.json)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    measured_commit = provenance.commit()
    work = args.work or tempfile.mkdtemp(prefix="tfxflow-transform-sample-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    data = os.path.join(work, "data")
    written = write_scaled(args.scale, data)
    print(f"data {args.scale}x: {written['rows']:,} rows; work folder {work}", flush=True)
    runs: Dict[str, Measured] = {}
    for seed in seeds:
        for side, bound in (("all", 0), ("sample", args.max_rows)):
            name = f"{side}-{seed}"
            flags = ["--seed", str(seed), "--transform-max-rows", str(bound), "--tracking", "off"]
            result = run_ours(name, os.path.join(work, name), data, flags, logs)
            runs[name] = result
            transform = result.components.get("Transform", {}).get("seconds", float("nan"))
            shown = "  ".join(f"{m} {result.metrics.get(m, float('nan')):.4f}" for m in METRICS)
            status = "ok" if result.returncode == 0 else f"FAILED ({result.returncode}), see {result.log}"
            print(f"  {name:<10} {result.wall_s:7.1f} s  Transform {transform:6.1f} s  {shown}  {status}", flush=True)
    failed = [r.name for r in runs.values() if r.returncode != 0]
    summary = {
        "commit": measured_commit,
        "machine": machine(),
        "scale": args.scale,
        "rows": written["rows"],
        "max_rows": args.max_rows,
        "seeds": seeds,
        "runs": {k: dataclasses.asdict(v) for k, v in runs.items()},
        "comparison": {} if failed else compare(runs, seeds),
    }
    print("\nmetric            all (mean)  sample (mean)  sample - all: mean [min, max]")
    for metric, c in summary["comparison"].items():
        print(
            f"  {metric:<16} {c['all_mean']:10.4f}  {c['sample_mean']:13.4f}  "
            f"{c['diff_mean']:+.4f} [{c['diff_min']:+.4f}, {c['diff_max']:+.4f}]"
        )
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", f"transform-sample-{datetime.date.today():%Y%m%d}.json"
    )
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(f"\nwrote {out}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        print(f"failed runs: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
