"""Writes N times the bundled taxi rows: resampled with replacement, numbers jittered, same columns and types.

Streams to disk in files of at most `rows_per_file` rows, so memory stays flat at any scale:

    .venv/bin/python -m benchmarks.scaled_data --scale 100 --out /tmp/taxi-100x
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import time
from typing import Dict, List

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tfxflow.pipeline.inputs import bundled_dataset_dir, bundled_taxi_data_root

# Relative jitter of amounts, absolute jitter of coordinates (about 100 m): new rows, same distributions.
RELATIVE_JITTER = {"fare": 0.02, "tips": 0.02, "trip_miles": 0.02, "trip_seconds": 0.02}
COORDINATES = ("pickup_latitude", "pickup_longitude", "dropoff_latitude", "dropoff_longitude")


def _types(schema_path: str) -> Dict[str, int]:
    schema = schema_pb2.Schema()
    with open(schema_path, encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    return {feature.name: feature.type for feature in schema.feature}


def _jitter(row: Dict[str, str], types: Dict[str, int], rng: random.Random) -> Dict[str, str]:
    out = dict(row)
    for column, scale in RELATIVE_JITTER.items():
        value = row.get(column, "")
        if value:
            jittered = max(0.0, float(value) * (1.0 + rng.gauss(0.0, scale)))
            out[column] = str(int(round(jittered))) if types[column] == schema_pb2.INT else f"{jittered:.2f}"
    for column in COORDINATES:
        if row.get(column):
            out[column] = f"{float(row[column]) + rng.gauss(0.0, 0.001):.6f}"
    return out


def write_scaled(scale: int, out_dir: str, rows_per_file: int = 250_000, seed: int = 7) -> Dict[str, float]:
    """Writes `scale` x the bundled rows into `out_dir`/data-NNN.csv; returns rows, files, bytes and seconds."""
    started = time.monotonic()
    source = os.path.join(bundled_taxi_data_root(), "data.csv")
    types = _types(os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"))
    with open(source, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        columns: List[str] = list(reader.fieldnames or [])
        rows = list(reader)
    os.makedirs(out_dir, exist_ok=True)
    total, rng, files, written = len(rows) * scale, random.Random(seed), 0, 0
    while written < total:
        path = os.path.join(out_dir, f"data-{files:03d}.csv")
        with open(path + ".tmp", "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            for _ in range(min(rows_per_file, total - written)):
                row = rows[rng.randrange(len(rows))]
                writer.writerow(row if scale == 1 else _jitter(row, types, rng))
                written += 1
        os.replace(path + ".tmp", path)
        files += 1
    size = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    return {"rows": written, "files": files, "bytes": size, "seconds": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    args = parser.parse_args()
    result = write_scaled(args.scale, args.out, args.rows_per_file)
    print(
        f"{result['rows']:,} rows in {result['files']} files, {result['bytes'] / 1e6:.0f} MB, "
        f"{result['seconds']:.1f} s -> {args.out}"
    )


if __name__ == "__main__":
    main()
