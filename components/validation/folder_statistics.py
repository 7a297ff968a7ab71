"""TFDV statistics of a folder of CSV files that never went through ExampleGen (serving requests, a draft's
data), read as ingestion reads them, for the data gate's skew check, the run page and `infer-schema`."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Iterator

from tfxflow.components import names
from tfxflow.components.ingest import csv_check
from tfxflow.components.validation import drift


def _file_records(path: str) -> Iterator[str]:
    # Through a buffered reader: TF's own line reader drops the "\r" of a "\r\n" inside a quoted value.
    with csv_check.open_csv(path) as stream:
        yield from csv_check.csv_records(stream)


def csv_statistics(data_root: str, schema=None):
    """TFDV statistics of the CSV files in `data_root` after the same checks as ingestion (types from
    `schema` when given, else inferred). Raises csv_check.InputDataError naming what is wrong.

    As TFDV's `generate_statistics_from_csv`, but records are read as ingestion reads them: a byte-order mark
    is not part of the first column's name, and a quoted value may span lines (TFDV's reader splits lines)."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation.coders import csv_decoder

    files = csv_check.csv_files(data_root)
    if not files:
        raise csv_check.InputDataError(f"input data: {data_root}: holds no {names.CSV_FILES}")
    summary = csv_check.check_csv_files(files, csv_check.rules_from_schema(schema) if schema is not None else {})
    options = drift.stats_options(schema, infer_type_from_schema=schema is not None)
    output = os.path.join(tempfile.mkdtemp(prefix="tfxflow-stats-"), "stats.tfrecord")
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | "Files" >> beam.Create(files)
            | "ReadRecords" >> beam.FlatMap(_file_records)
            | "DecodeData" >> csv_decoder.DecodeCSV(column_names=list(summary.header), schema=schema)
            | "GenerateStatistics" >> tfdv.GenerateStatistics(options)
            | "WriteStatistics" >> tfdv.WriteStatisticsToTFRecord(output)
        )
    try:
        return tfdv.load_statistics(output)
    finally:
        shutil.rmtree(os.path.dirname(output), ignore_errors=True)
