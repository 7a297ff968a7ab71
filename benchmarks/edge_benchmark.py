"""Edge benchmark: what `tfxflow run --tflite` publishes for each task on the bundled taxi data and for a text
model, and how it compares with the served SavedModel.

    make bench-edge                       # four runs (binary, multi-class, regression, text), about 5 minutes

Binary runs the curated taxi schema; multi-class (payment_type) and regression (fare) run infer-schema's drafts,
as `make bench` does; text runs infer-schema's draft of Debian's package descriptions (tests/data: their
archive section from the description and the package name). Each run converts its blessed model
(components/edge/edge.py), checks it on the eval split's golden rows and scores it on the eval rows in a process of
its own and publishes it in the pushed version; this reads the version's `edge.json` and the ServingCheck's
figures for the SavedModel, prints a table and writes JSON (benchmarks/results/edge-<date>.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

from benchmarks import provenance

TASKS = (("binary", None), ("multiclass", "payment_type"), ("regression", "fare"), ("text", "section"))
DEBIAN = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "debian_packages.csv")
TFXFLOW = os.path.join(os.path.dirname(sys.executable), "tfxflow")


def _run(task: str, label: Optional[str], work: str) -> Dict[str, Any]:
    """One run of `task` with --tflite; what its pushed version's edge.json and the serving check say."""
    from tfxflow.components import serving_dir
    from tfxflow.components.edge import edge
    from tfxflow.pipeline.inputs import bundled_taxi_data_root
    from tfxflow.pipeline.reports import run_record

    home = os.path.join(work, task)
    args = [TFXFLOW, "run", "--home", home, "--tracking", "off", "--tflite"]
    model = "taxi"
    if label is not None:
        data = bundled_taxi_data_root()
        if task == "text":
            data = os.path.join(work, "debian-data")
            os.makedirs(data, exist_ok=True)
            shutil.copy(DEBIAN, os.path.join(data, "packages.csv"))
        out = os.path.join(work, f"draft-{task}")
        subprocess.run(
            [TFXFLOW, "infer-schema", "--data-root", data, "--out", out, "--label", label],
            check=True,
            capture_output=True,
        )
        args += ["--data-root", data, "--dataset", task]
        args += ["--schema", f"{out}/schema.pbtxt", "--feature-config", f"{out}/features.yaml"]
        model = task
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"task": task, "returncode": done.returncode, "error": done.stderr.strip().splitlines()[-1:]}
    base = os.path.join(home, "serving", model)
    version = str(serving_dir.served_versions(base)[-1])
    with open(os.path.join(base, version, serving_dir.EDGE_DIR, edge.RESULT_FILE), encoding="utf-8") as f:
        result = json.load(f)
    metadata = os.path.join(home, "metadata", "metadata.sqlite")
    record = run_record.read_run(metadata, f"tfxflow-{model}")
    check = record.serving_check or {}
    seconds = {c.name: c.seconds for c in record.components}
    return {
        "task": task,
        "returncode": 0,
        "edge": result,
        "saved_model": {
            "bytes": sum(
                os.path.getsize(os.path.join(d, n))
                for d, _, files in os.walk(os.path.join(base, version))
                if serving_dir.EDGE_DIR not in d
                for n in files
            ),
            "p50_ms": (check.get("latency_ms") or {}).get("p50"),
        },
        "edge_export_s": seconds.get("EdgeExport"),
    }


def table(runs: List[Dict[str, Any]]) -> List[str]:
    lines = [
        f"{'task':<11} {'variant':<8} {'KiB':>6} {'max diff':>9} {'eval metric':>22} {'p50 ms':>7} {'load ms':>8}  "
        "runtime"
    ]
    for run in runs:
        if run["returncode"] != 0:
            lines.append(f"{run['task']:<11} failed: {run['error']}")
            continue
        for variant in run["edge"]["published"]:
            entry = run["edge"]["variants"][variant]
            gap = max(entry["max_diff"].values())
            scored = entry.get("eval", {})
            metric = f"{scored['metric']} {scored['value']:.4f}" if scored else "-"
            lines.append(
                f"{run['task']:<11} {variant:<8} {entry['bytes'] / 1024:>6.0f} {gap:>9.2g} {metric:>22} "
                f"{entry['p50_ms']:>7.2f} {entry['load_ms']:>8.1f}  {entry['runtime']}"
            )
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/edge-<date>.json)")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="tfxflow-edge-bench-")
    runs = []
    for task, label in TASKS:
        print(f"{task}: running with --tflite in {work}/{task} ...", flush=True)
        runs.append(_run(task, label, work))
    print("\n".join(table(runs)))
    out = args.out or provenance.new_results_path("edge")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "commit": provenance.commit(),
                "machine": {
                    "cpus": os.cpu_count(),
                    "processor": platform.processor() or platform.machine(),
                    "date": datetime.date.today().isoformat(),
                },
                "edge_runs": runs,
            },
            f,
            indent=2,
        )
    print(f"wrote {out}")
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
