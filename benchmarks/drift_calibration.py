"""Calibration of the data gate's drift check on the Chicago taxi data (`make bench-drift`).

Baseline: the statistics of the whole taxi CSV's training split, as the default run's StatisticsGen computes
them. Against it, for each size from 500 rows to the whole file:

- same-distribution data: random rows of the same file, drawn with and without replacement; every refusal is
  a false alarm;
- real shifts of several kinds and magnitudes: a numeric column scaled, the trip start hour shifted, a
  payment type's share changed, a company vanishing.

Each sample is split like ExampleGen splits (3 of 4 hash buckets of a row's content go to training), its
training split gets TFDV statistics with the options the pipeline uses, and `components.drift` gives the
gate's verdict with the curated schema's comparators. The same samples also go through TFDV's own
comparators (`tfdv.validate_statistics(previous_statistics=...)`, thresholds as the schema had them before
this check: Jensen-Shannon 0.1, L-infinity 0.1 and 0.2) for comparison. Writes JSON with the commit
(benchmarks/results/drift-<date>.json by default) and prints the docs' block rendered from it
(`python -m benchmarks.readme_tables FILE`, docs/data-validation.md): the goals, then the tables.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import multiprocessing
import os
import sys
import time
import zlib
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from benchmarks import provenance, readme_tables
from tfxflow.components.validation import drift
from tfxflow.pipeline.inputs import bundled_dataset_dir, bundled_taxi_data_root

SCHEMA_PATH = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
TRAIN_BUCKETS, ALL_BUCKETS = 3, 4  # SplitConfig's defaults: train 3, eval 1
CATCH_FROM_ROWS = 2000  # the goal: each shift marked should_catch is refused from this many rows
# TFDV's comparator thresholds as the curated schema had them before the common-bins check.
TFDV_THRESHOLDS = {
    "fare": 0.1,
    "trip_miles": 0.1,
    "trip_seconds": 0.1,
    "trip_start_hour": 0.1,
    "payment_type": 0.1,
    "company": 0.2,
}


def taxi_csv() -> str:
    return os.path.join(bundled_taxi_data_root(), "data.csv")


def read_strings(path: str) -> pd.DataFrame:
    """The CSV as strings, empty cells as ""."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def train_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows ExampleGen's hash split would put in training: a hash of the row's content, 3 buckets of 4."""
    keys = np.fromiter(
        (zlib.crc32("\x1f".join(row).encode()) for row in frame.itertuples(index=False, name=None)),
        dtype=np.uint64,
        count=len(frame),
    )
    return frame[(keys % ALL_BUCKETS) < TRAIN_BUCKETS]


def record_batch(frame: pd.DataFrame, schema):
    """The rows as the Arrow batch TFDV reads from tf.Examples: one-value lists typed by the schema, empty
    cells as missing features."""
    import pyarrow as pa
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {f.name: f.type for f in schema.feature}
    arrays = []
    for column in frame.columns:
        kind = types.get(column, schema_pb2.BYTES)
        convert, arrow_type = {schema_pb2.INT: (int, pa.int64()), schema_pb2.FLOAT: (float, pa.float32())}.get(
            kind, (str.encode, pa.binary())
        )
        arrays.append(
            pa.array([[convert(v)] if v != "" else None for v in frame[column].to_numpy()], type=pa.list_(arrow_type))
        )
    return pa.RecordBatch.from_arrays(arrays, list(frame.columns))


def statistics(frame: pd.DataFrame, schema):
    """TFDV statistics of the training split of `frame`, with the pipeline's options."""
    from tensorflow_data_validation.statistics.stats_impl import generate_statistics_in_memory

    return generate_statistics_in_memory(record_batch(train_rows(frame), schema), drift.stats_options())


def _number_column(values: pd.Series, fn: Callable[[float], float], fmt: str) -> pd.Series:
    return values.map(lambda v: v if v == "" else fmt % fn(float(v)))


@dataclasses.dataclass(frozen=True)
class Shift:
    """A change to the data a sample is drawn from: `population` filters the file, `change` edits a sample."""

    kind: str
    magnitude: str
    should_catch: bool  # a change its data owner would want to hear about
    population: Callable[[pd.DataFrame], pd.DataFrame] = lambda frame: frame
    change: Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame] = lambda frame, rng: frame


def _scale(column: str, factor: float) -> Callable:
    def change(frame, rng):
        frame = frame.copy()
        frame[column] = _number_column(frame[column], lambda v: v * factor, "%.2f")
        return frame

    return change


def _shift_hours(hours: int) -> Callable:
    def change(frame, rng):
        frame = frame.copy()
        frame["trip_start_hour"] = _number_column(frame["trip_start_hour"], lambda v: (v + hours) % 24, "%d")
        frame["trip_start_timestamp"] = _number_column(frame["trip_start_timestamp"], lambda v: v + 3600 * hours, "%d")
        return frame

    return change


def _move_share(points: float, source: str = "Credit Card", target: str = "Cash") -> Callable:
    def change(frame, rng):
        frame = frame.copy()
        candidates = np.flatnonzero(frame["payment_type"].to_numpy() == source)
        moved = rng.choice(candidates, size=min(len(candidates), int(round(points * len(frame)))), replace=False)
        frame.iloc[moved, frame.columns.get_loc("payment_type")] = target
        return frame

    return change


def _without(column: str, value: str) -> Callable:
    return lambda frame: frame[frame[column] != value]


SHIFTS = [
    Shift("fare scaled", "x1.05", False, change=_scale("fare", 1.05)),
    Shift("fare scaled", "x1.1", False, change=_scale("fare", 1.1)),
    Shift("fare scaled", "x1.25", True, change=_scale("fare", 1.25)),
    Shift("trip_miles scaled", "x1.1", False, change=_scale("trip_miles", 1.1)),
    Shift("trip_miles scaled", "x1.609 (km)", True, change=_scale("trip_miles", 1.609)),
    Shift("trip start shifted", "+1 h", False, change=_shift_hours(1)),
    Shift("trip start shifted", "+3 h", True, change=_shift_hours(3)),
    Shift("trip start shifted", "+6 h", True, change=_shift_hours(6)),
    Shift("Credit Card -> Cash", "5 points", False, change=_move_share(0.05)),
    Shift("Credit Card -> Cash", "10 points", True, change=_move_share(0.10)),
    Shift("Credit Card -> Cash", "20 points", True, change=_move_share(0.20)),
    Shift("company vanishes", "Northwest (3.7%)", False, population=_without("company", "Northwest Management LLC")),
    Shift("company vanishes", "Dispatch (10.9%)", True, population=_without("company", "Dispatch Taxi Affiliation")),
    Shift(
        "company vanishes",
        "Taxi Affiliation (34.5%)",
        True,
        population=_without("company", "Taxi Affiliation Services"),
    ),
]

# Shared with the worker processes (fork): set once by `main`.
_STATE: Dict[str, object] = {}


def tfdv_refuses(current, baseline, schema) -> bool:
    """Whether TFDV's own drift comparators, at TFDV_THRESHOLDS, find `current` drifted from `baseline`."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

    old = type(schema)()
    old.CopyFrom(schema)
    for feature in old.feature:
        feature.ClearField("drift_comparator")
        if feature.name in TFDV_THRESHOLDS:
            comparator = feature.drift_comparator
            if feature.type == schema_pb2.BYTES:
                comparator.infinity_norm.threshold = TFDV_THRESHOLDS[feature.name]
            else:
                comparator.jensen_shannon_divergence.threshold = TFDV_THRESHOLDS[feature.name]
    result = tfdv.validate_statistics(current, old, previous_statistics=baseline)
    return any(
        anomalies_pb2.AnomalyInfo.Type.Name(reason.type).startswith("COMPARATOR_")
        for info in result.anomaly_info.values()
        for reason in info.reason
    )


def judge(task: tuple) -> dict:
    """One sample: (shift index or -1, size, with replacement, seed) -> the gate's verdict and TFDV's."""
    shift_index, size, replace, seed = task
    frame, schema, baseline = _STATE["frame"], _STATE["schema"], _STATE["baseline"]
    rng = np.random.default_rng(seed)
    shift = SHIFTS[shift_index] if shift_index >= 0 else None
    population = shift.population(frame) if shift else frame
    rows = (
        rng.choice(len(population), size=size, replace=replace)
        if (replace or size < len(population))
        else np.arange(len(population))
    )
    sample = population.iloc[rows]
    if shift:
        sample = shift.change(sample, rng)
    current = statistics(sample, schema)
    comparisons, _ = drift.compare_statistics(baseline, current, schema, "drift")
    refused = sorted({c.feature for c in comparisons if c.shifted})
    worst = max(comparisons, key=lambda c: c.value / c.threshold)
    return {
        "shift": shift_index,
        "size": size,
        "replace": replace,
        "refused": refused,
        "worst": worst.feature,
        "worst_ratio": worst.value / worst.threshold,
        "min_p": min(c.p_value for c in comparisons),
        "tfdv_refused": tfdv_refuses(current, baseline, schema) if _STATE["tfdv"] else None,
    }


def _run(tasks: Sequence[tuple], workers: int) -> List[dict]:
    if workers <= 1:
        return [judge(t) for t in tasks]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(judge, tasks, chunksize=4))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default="500,1000,2000,5000,15002", help="rows per sample, comma-separated (15002: the whole file)"
    )
    parser.add_argument("--shift-sizes", default="500,2000,5000", help="rows per shifted sample")
    parser.add_argument(
        "--resamples", type=int, default=100, help="same-distribution samples per size and per kind of draw"
    )
    parser.add_argument("--shift-samples", type=int, default=20, help="samples per shift, magnitude and size")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-tfdv", action="store_true", help="skip TFDV's own comparators")
    parser.add_argument(
        "--data",
        help="a CSV file to check for false alarms instead of the taxi data (the "
        "shifts are the taxi data's: they are skipped)",
    )
    parser.add_argument("--schema", default=SCHEMA_PATH, help="the schema whose comparators are calibrated")
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/drift-<date>.json)")
    args = parser.parse_args(argv)
    from tfx.utils import io_utils

    # The code measured is the checkout's as the samples start, whatever is committed while they run.
    measured_commit = provenance.commit()
    started = time.monotonic()
    schema = io_utils.SchemaReader().read(args.schema)
    frame = read_strings(args.data or taxi_csv())
    _STATE.update(frame=frame, schema=schema, baseline=statistics(frame, schema), tfdv=not args.no_tfdv)
    sizes = [int(s) for s in args.sizes.split(",")]
    shift_sizes = [int(s) for s in args.shift_sizes.split(",")]
    seed = iter(range(10**9))
    null_tasks = [
        (-1, size, replace, next(seed))
        for size in sizes
        for replace in (False, True)
        for _ in range(args.resamples if (replace or size < len(frame)) else 1)
    ]
    shifts = [] if args.data else list(range(len(SHIFTS)))
    shift_tasks = [
        (i, size, False, next(seed)) for i in shifts for size in shift_sizes for _ in range(args.shift_samples)
    ]
    print(
        f"drift calibration: {args.data or 'taxi data'} ({len(frame):,} rows), schema {args.schema}; "
        f"{len(null_tasks)} same-distribution samples, {len(shift_tasks)} shifted ones, {args.workers} workers",
        flush=True,
    )
    results = _run(null_tasks + shift_tasks, args.workers)
    null, shifted = results[: len(null_tasks)], results[len(null_tasks) :]

    result = {
        "commit": measured_commit,
        "date": f"{datetime.date.today()}",
        "data": args.data,  # None: the bundled taxi file
        "schema": None if args.schema == SCHEMA_PATH else args.schema,
        "rows": len(frame),
        "false_refusal_rate": drift.FALSE_REFUSAL_RATE,
        "catch_from_rows": CATCH_FROM_ROWS,
        "shifts": [
            dataclasses.asdict(s, dict_factory=lambda kv: {k: v for k, v in kv if not callable(v)}) for s in SHIFTS
        ],
        "same_distribution": null,
        "shifted": shifted,
    }
    out = args.out or provenance.new_results_path("drift")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print("\n" + readme_tables.drift(result))
    print(f"\n{time.monotonic() - started:.0f} s; wrote {out}")
    missed = [
        r for r in shifted if SHIFTS[r["shift"]].should_catch and r["size"] >= CATCH_FROM_ROWS and not r["refused"]
    ]
    return 1 if any(r["refused"] for r in null) or missed else 0


if __name__ == "__main__":
    sys.exit(main())
