"""Serving benchmark: the pushed model's latency and throughput by batch size, in-process, and the TF Serving
batching parameters they suggest.

    make bench-serving                                   # trains and pushes a model first (about a minute)
    .venv/bin/python -m benchmarks.serving_benchmark --home tfxflow_home   # the newest version pushed there

Each batch size calls the `serving_default` signature (serialized raw tf.Examples from the eval split, as TF
Serving's batching would hand them over) on one thread, as one TF Serving batch thread runs a batch, for about
`--seconds` each after a warm-up call. Prints a table and the derived `batching_parameters.txt`, writes JSON.

The derivation (TF Serving's batching guide: batch only as far as throughput still grows):
- max_batch_size: the smallest measured batch size whose throughput is within 10% of the best;
- batch_timeout_micros: the p50 latency of a batch of 1, so a lone request waits at most about as long as it
  takes to serve, and its latency at most doubles;
- num_batch_threads: the cores the server may use;
- max_enqueued_batches: enough queued batches for one second at the best throughput.
The figures belong to the machine that ran them: run it where TF Serving runs (a GPU node serves far larger
batches per second), and put the printed block into kubeflow/serving/configmap.yaml.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from benchmarks import provenance
from tfxflow.components import names

BATCH_SIZES = (1, 8, 32, 128, 256, 512, 1024)
WITHIN = 0.9  # max_batch_size: the smallest batch with this share of the best throughput


def newest_version(home: str, model: str) -> Optional[str]:
    """The newest version under `<home>/serving/<model>` that holds a whole SavedModel (what TF Serving serves)."""
    from tfxflow.components.serving_dir import served_versions

    base = os.path.join(home, "serving", model)
    versions = served_versions(base)
    return os.path.join(base, str(versions[-1])) if versions else None


def eval_examples(home: str, count: int) -> List[bytes]:
    """Serialized raw tf.Examples of the newest ExampleGen output's eval split under `home`."""
    import glob

    import tensorflow as tf

    runs = sorted(
        glob.glob(os.path.join(home, "pipeline_root", names.EXAMPLE_GEN, "examples", "*")),
        key=lambda p: int(os.path.basename(p)),
    )
    files = sorted(glob.glob(os.path.join(names.split_dir(runs[-1], "eval"), "*")))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP").take(count)]


def measure(signature, examples: List[bytes], batch: int, seconds: float) -> Dict[str, float]:
    """p50/p99 latency (ms) and examples/s of `signature` on batches of `batch` rows, for about `seconds`."""
    import numpy as np
    import tensorflow as tf

    rows = (examples * math.ceil(batch / len(examples)))[:batch]
    request = tf.constant(rows)
    signature(examples=request)  # warm-up: the first call of a shape traces
    latencies: List[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(latencies) < 5:
        started = time.perf_counter()
        signature(examples=request)[names.OUTPUT_KEY].numpy()
        latencies.append(time.perf_counter() - started)
    p50, p99 = np.percentile(latencies, [50, 99])
    return {
        "batch": batch,
        "calls": len(latencies),
        "p50_ms": round(p50 * 1e3, 3),
        "p99_ms": round(p99 * 1e3, 3),
        "examples_per_s": round(batch * len(latencies) / sum(latencies)),
    }


def derive(rows: List[Dict[str, float]], cores: int) -> Dict[str, int]:
    """TF Serving batching parameters from the measured rows (see the module docstring)."""
    best = max(r["examples_per_s"] for r in rows)
    enough = min(r["batch"] for r in rows if r["examples_per_s"] >= WITHIN * best)
    single = next(r for r in rows if r["batch"] == 1)
    return {
        "max_batch_size": int(enough),
        "batch_timeout_micros": int(round(single["p50_ms"] * 1000)),
        "num_batch_threads": int(cores),
        "max_enqueued_batches": int(max(1, math.ceil(best / enough))),
    }


def batching_text(parameters: Dict[str, int]) -> str:
    """The `batching_parameters.txt` TF Serving's `--batching_parameters_file` reads."""
    lines = [f"{name} {{ value: {value} }}" for name, value in parameters.items()]
    return "\n".join(lines + ["pad_variable_length_inputs: true"]) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--home", help="a tfxflow home with a pushed model (default: run the pipeline into a temp folder first)"
    )
    parser.add_argument("--model", default="taxi")
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per batch size")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/serving-<date>.json)")
    args = parser.parse_args(argv)
    home = args.home
    if home is None:
        home = tempfile.mkdtemp(prefix="tfxflow-serving-bench-")
        tfxflow = os.path.join(os.path.dirname(sys.executable), "tfxflow")
        print(f"training and pushing a model into {home} ...", flush=True)
        subprocess.run([tfxflow, "run", "--home", home, "--tracking", "off"], check=True, stdout=subprocess.DEVNULL)
    model_dir = newest_version(home, args.model)
    if model_dir is None:
        print(f"error: no pushed version under {home}/serving/{args.model}", file=sys.stderr)
        return 2

    import tensorflow as tf

    signature = tf.saved_model.load(model_dir).signatures[names.SERVING_SIGNATURE]
    examples = eval_examples(home, 1024)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"model {model_dir}; {len(examples)} eval rows; {cores} cores\n")
    print(f"{'batch':>6} {'p50 ms':>9} {'p99 ms':>9} {'examples/s':>11}")
    rows = []
    for batch in BATCH_SIZES:
        row = measure(signature, examples, batch, args.seconds)
        rows.append(row)
        print(f"{row['batch']:>6} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f} {row['examples_per_s']:>11,}", flush=True)
    parameters = derive(rows, cores)
    print("\nbatching_parameters.txt for this machine:\n" + batching_text(parameters))
    out = args.out or provenance.new_results_path("serving")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "commit": provenance.commit(),
                "machine": {
                    "cpus": cores,
                    "processor": platform.processor() or platform.machine(),
                    "date": datetime.date.today().isoformat(),
                },
                "model": model_dir,
                "rows": rows,
                "batching_parameters": parameters,
            },
            f,
            indent=2,
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
