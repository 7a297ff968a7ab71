"""The scale benchmark's data: N times the taxi rows, streamed to files, with the schema's columns and types."""

import csv
import os

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from benchmarks.scaled_data import write_scaled
from tfxflow.pipeline.inputs import bundled_dataset_dir, bundled_taxi_data_root


def test_scaled_rows_keep_columns_and_types(tmp_path):
    result = write_scaled(2, str(tmp_path), rows_per_file=10_000)
    with open(os.path.join(bundled_taxi_data_root(), "data.csv"), encoding="utf-8", newline="") as f:
        source = list(csv.DictReader(f))
    source_rows = len(source)
    source_fares = {float(r["fare"]) for r in source if r["fare"]}
    assert result["rows"] == 2 * source_rows
    files = sorted(os.listdir(tmp_path))
    assert files == [f"data-{i:03d}.csv" for i in range(result["files"])] and result["files"] == 4
    schema = schema_pb2.Schema()
    with open(os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"), encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    types = {feature.name: feature.type for feature in schema.feature}
    rows = 0
    fares = []
    for name in files:
        with open(tmp_path / name, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            assert set(reader.fieldnames) == set(types)
            for row in reader:
                rows += 1
                for column, value in row.items():
                    if value == "":
                        continue
                    if types[column] == schema_pb2.INT:
                        int(value)
                    elif types[column] == schema_pb2.FLOAT:
                        assert float(value) == float(value)  # not NaN
                fares.append(float(row["fare"]) if row["fare"] else 0.0)
    assert rows == result["rows"]
    assert min(fares) >= 0.0
    assert len(set(fares)) > 2 * len(source_fares)  # jittered: resampled fares take new values
