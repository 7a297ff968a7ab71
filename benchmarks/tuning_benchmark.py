"""What the tuning step (`tfxflow run --tune`) buys and costs on the bundled taxi data, as users run it: each case
run untuned and tuned in its own home, the eval split's blessing metric (TFMA's, from the run's record) of both,
the Tuner's trials by state and its time against the Trainer's.

Cases: `poor`, a learning rate far too low for the training it gets (1e-5 for 100 steps), tuned over the learning
rate alone; `defaults`, the built-in settings, tuned over the default search space. Each tuned run with the
default workers (`--tune-workers 0`: one per core here) and again with one (`--tune-workers 1`), for what the
second core buys.

    .venv/bin/python -m benchmarks.tuning_benchmark [--trials 8] [--out benchmarks/results/tuning-<date>.json]

`python -m benchmarks.readme_tables FILE` renders the docs' Tuning block from the results.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional

from benchmarks import provenance
from benchmarks.pipeline_benchmark import machine, run_ours
from tfxflow.pipeline.inputs import bundled_taxi_data_root

CASES = {
    "poor": (["--learning-rate", "1e-5", "--train-steps", "100"], ["width=off,dropout=off,batch_size=off"]),
    "defaults": ([], []),
}
METRIC = "binary_accuracy"


def _trials(home: str) -> Optional[Dict[str, Any]]:
    found = sorted(glob.glob(os.path.join(home, "pipeline_root", "Tuner", "tuner_results", "*", "trials.json")))
    if not found:
        return None
    with open(found[-1], encoding="utf-8") as f:
        return json.load(f)


def run_case(name: str, flags: List[str], space: List[str], trials: int, work: str, logs: str) -> Dict[str, Any]:
    taxi = bundled_taxi_data_root()
    untuned = run_ours(f"{name}-untuned", os.path.join(work, f"{name}-untuned"), taxi, flags, logs)
    tune = ["--tune", "--tune-trials", str(trials), *(["--tune-space", *space] if space else [])]
    home = os.path.join(work, f"{name}-tuned")
    tuned = run_ours(f"{name}-tuned", home, taxi, [*flags, *tune], logs)
    one_home = os.path.join(work, f"{name}-tuned-1")
    one = run_ours(f"{name}-tuned-1", one_home, taxi, [*flags, *tune, "--tune-workers", "1"], logs)
    results = _trials(home) or {"trials": []}
    states = [t["state"] for t in results["trials"]]
    return {
        "flags": flags,
        "space": results.get("space", []),
        "untuned": {"returncode": untuned.returncode, "wall_s": untuned.wall_s, METRIC: untuned.metrics.get(METRIC)},
        "tuned": {"returncode": tuned.returncode, "wall_s": tuned.wall_s, METRIC: tuned.metrics.get(METRIC)},
        "tuner_s": tuned.components.get("Tuner", {}).get("seconds"),
        "workers": results.get("workers", 1),
        "one_worker": {
            "returncode": one.returncode,
            METRIC: one.metrics.get(METRIC),
            "tuner_s": one.components.get("Tuner", {}).get("seconds"),
            "trials": len((_trials(one_home) or {"trials": []})["trials"]),
        },
        "trainer_s": tuned.components.get("Trainer", {}).get("seconds"),
        "trials": {s: states.count(s) for s in ("complete", "pruned", "failed")},
        "trial_seconds": [t["seconds"] for t in results["trials"]],
        "best": results.get("best"),
        "objective": results.get("objective"),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8, help="trials per tuned run (default 8)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated of {', '.join(CASES)}")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/tuning-<date>.json)")
    args = parser.parse_args(argv)
    commit = provenance.commit()
    work = tempfile.mkdtemp(prefix="tfxflow-tuning-bench-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    cases = {}
    try:
        for name in [c for c in args.cases.split(",") if c]:
            flags, space = CASES[name]
            cases[name] = case = run_case(name, flags, space, args.trials, work, logs)
            print(
                f"{name}: {METRIC} {case['untuned'][METRIC]} untuned, {case['tuned'][METRIC]} tuned; Tuner "
                f"{case['tuner_s']} s ({case['trials']}), Trainer {case['trainer_s']} s",
                flush=True,
            )
            print(f"  with 1 worker: Tuner {case['one_worker']['tuner_s']} s", flush=True)
            if case["untuned"]["returncode"] or case["tuned"]["returncode"] or case["one_worker"]["returncode"]:
                print(f"a run failed: logs in {logs}", file=sys.stderr)
                return 1
    finally:
        if all(c[k]["returncode"] == 0 for c in cases.values() for k in ("untuned", "tuned", "one_worker")):
            shutil.rmtree(work, ignore_errors=True)
    result = {"commit": commit, "machine": machine(), "trials": args.trials, "metric": METRIC, "cases": cases}
    out = args.out or provenance.new_results_path("tuning")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
