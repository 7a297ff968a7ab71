"""CSV ingestion: one streaming pass that writes TFX's tf.Examples, and refuses bad files with a message naming
file, line, column and rule.

TFX's CsvExampleGen fails on a malformed file with a Beam traceback ("Invalid CSV line: [...]",
UnicodeDecodeError), silently turns a numeric column with one stray string into a string column, and holds
every example in memory before it writes one. `Executor` reads each file once with Arrow's C++ reader and the
schema's types (`ingest`), checks it in the same pass and writes the splits; a file that breaks a rule is
scanned line by line (`check_csv_files`) for the exact report, and nothing is kept. The rules come from the
curated schema (column types, `float_domain.disallow_nan/inf`) and the feature config's label, per task: a binary
label must not be empty everywhere or one class; a multi-class label needs a class in every row, among
`label.classes` when they are listed, and no class that only the eval split holds when they are not; a
regression label needs a finite number in every row (above -1 for `transform: log1p`) and more than one value.

The executor runs inside ExampleGen, whose driver fingerprints the input files: changed data is always
scanned again, in LocalDagRunner and in Kubeflow alike.
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import dataclasses
import io
import itertools
import json
import math
import os
import re
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from absl import logging
from google.protobuf import json_format, struct_pb2, text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.utils import proto_utils

from tfxflow.components import artifact_files, names, progress
from tfxflow.components.ingest import tf_example
from tfxflow.components.ingest.csv_check import (
    GZIP_ERRORS,
    REPEATED_HEADER,
    ColumnRule,
    CsvSummary,
    InputDataError,
    Readable,
    check_csv_files,
    check_label,
    format_problem,
    is_gzip,
    open_csv,
    read_header,
    report,
    rules_from_schema,
    scan_stream,
)
from tfxflow.components.model import tasks
from tfxflow.components.model.features import LabelSpec

# Arrow's CSV reader parses and converts in C++; blocks of this size bound each reader's memory.
BLOCK_BYTES = 4 << 20
SHARD_ROWS = 500_000  # rows per output file and split: gzip is not splittable, so readers get several files
ROWS_FILE = "ingest.json"  # at the Examples artifact's root, beside the Split-* folders
_ARROW_TYPES = {"INT": "int64", "FLOAT": "float64", "BYTES": "string"}


@dataclasses.dataclass
class IngestResult:
    """What ingestion read and wrote: rows per input file, rows per split, output files per split."""

    rows_read: Dict[str, int]
    split_rows: Dict[str, int]
    split_files: Dict[str, int]
    label_classes: Dict[str, int]
    label_range: Optional[Tuple[float, float]] = None  # a regression label's smallest and largest value

    @property
    def total_read(self) -> int:
        return sum(self.rows_read.values())

    def to_dict(self) -> Dict[str, Any]:
        return {
            "rows_read": self.total_read,
            "files": len(self.rows_read),
            "split_rows": self.split_rows,
            "split_files": self.split_files,
            "label_classes": self.label_classes,
            **({"label_range": list(self.label_range)} if self.label_range else {}),
            "rows_read_per_file": self.rows_read,
        }


def record_rows(examples, result: IngestResult) -> None:
    """Keeps the counts with the Examples artifact (a file the next steps read, and custom properties)."""
    with fileio.open(os.path.join(examples.uri, ROWS_FILE), "w") as f:
        f.write(json.dumps(result.to_dict(), indent=2))
    examples.set_int_custom_property("rows_read", result.total_read)
    examples.set_string_custom_property("split_rows", json.dumps(result.split_rows, sort_keys=True))


def read_rows(examples_uri: str) -> Optional[Dict[str, Any]]:
    """The counts `record_rows` kept, or None for Examples written by another ExampleGen."""
    return artifact_files.read_json(examples_uri, ROWS_FILE)


class _Refused(Exception):
    """The fast path met something to report: the exact report comes from `check_csv_files`."""


def _label_values(batch, label: LabelSpec) -> Tuple[np.ndarray, int]:
    """The label of each row of `batch` by `LabelSpec.evaluate`'s rules, and how many rows have an empty label
    column. binary: 0/1 int64; multiclass: the values' text (None when empty); regression: float64 (NaN when
    empty). Raises _Refused on what `scan_label` reports (the scan then names file, line and column)."""

    def numeric(array) -> bool:
        return pa.types.is_integer(array.type) or pa.types.is_floating(array.type)

    column = batch.column(label.column)
    empty = column.null_count
    if label.task == tasks.MULTICLASS:
        text = column.cast(pa.string())
        if empty:
            raise _Refused(f"{label.column}: empty label")
        if label.classes and not pc.all(pc.is_in(text, value_set=pa.array(list(label.classes)))).as_py():
            raise _Refused(f"{label.column}: a label value not in label.classes")
        return np.asarray(text.to_pylist(), dtype=object), empty
    if label.task == tasks.REGRESSION:
        values = np.asarray(column.cast(pa.float64()).fill_null(np.nan), np.float64)
        if empty or not np.isfinite(values).all() or (label.transform == "log1p" and (values <= -1).any()):
            raise _Refused(f"{label.column}: an empty, infinite or out-of-range label")
        return values, empty
    ratio = batch.column(label.ratio_of) if label.ratio_of else None
    if label.greater_than is not None and numeric(column) and (ratio is None or numeric(ratio)):
        threshold = label.greater_than
        if ratio is not None:
            threshold = pc.multiply(ratio.cast(pa.float64()), label.greater_than)
        values = pc.fill_null(pc.greater(column.cast(pa.float64()), threshold), False)
        values = np.asarray(values, np.int64)
    elif label.positive_values:
        text = column.cast(pa.string()).fill_null("")
        values = np.asarray(pc.is_in(text, value_set=pa.array(list(label.positive_values))), np.int64)
    elif label.greater_than is None and numeric(column):
        values = np.asarray(column.cast(pa.float64()).fill_null(0.0))
        values = np.where(np.isfinite(values), values, 0.0).astype(np.int64)  # NaN or inf: not a label, 0
    else:  # a text label column (or ratio): the scan's rule, row by row
        columns = {c: batch.column(c).to_pylist() for c in label.raw_columns}
        values = np.asarray(
            [
                label.evaluate({c: "" if v is None else str(v) for c, v in zip(columns, row, strict=True)})
                for row in zip(*columns.values(), strict=True)
            ],
            np.int64,
        )
    return values, empty


@dataclasses.dataclass
class _LabelTally:
    """One file's labels: classes per split (binary and multi-class), or a regression label's range."""

    splits: Dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
    empty: int = 0
    low: float = math.inf
    high: float = -math.inf

    def add(self, label: LabelSpec, values: np.ndarray, empty: int, splits: np.ndarray, names: Sequence[str]):
        self.empty += empty
        if label.task == tasks.REGRESSION:
            if len(values):
                self.low, self.high = min(self.low, float(values.min())), max(self.high, float(values.max()))
            self.splits.setdefault("all", collections.Counter())["rows"] += len(values)
            return
        for i, name in enumerate(names):
            chosen = values[splits == i]
            if label.task == tasks.BINARY:
                classes, count = np.unique(chosen, return_counts=True)
                self.splits.setdefault(name, collections.Counter()).update(
                    {int(c): int(n) for c, n in zip(classes, count, strict=True)}
                )
            else:
                self.splits.setdefault(name, collections.Counter()).update(chosen.tolist())

    def total(self) -> collections.Counter:
        counts: collections.Counter = collections.Counter()
        for split in self.splits.values():
            counts.update(split)
        return counts


class _SplitWriter:
    """One split's output of one input file: `ways` sequences of GZIP TFRecord shards of at most SHARD_ROWS
    records each, every batch of records divided among them (so that several training workers each read files
    of their own, however few rows there are)."""

    def __init__(self, directory: str, prefix: str, ways: int = 1):
        self.lanes = [_ShardSequence(directory, prefix if ways == 1 else f"{prefix}-{w:03d}") for w in range(ways)]

    @property
    def paths(self) -> List[str]:
        return [path for lane in self.lanes for path in lane.paths]

    @property
    def rows(self) -> int:
        return sum(lane.rows for lane in self.lanes)

    def write(self, records) -> None:
        ways = len(self.lanes)
        if ways == 1:
            self.lanes[0].write(records)
            return
        size = len(records)
        for w, lane in enumerate(self.lanes):
            start, end = size * w // ways, size * (w + 1) // ways
            if end > start:
                lane.write(records.slice(start, end - start))

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()


class _ShardSequence:
    """GZIP TFRecord shards of at most SHARD_ROWS records, one after the other."""

    def __init__(self, directory: str, prefix: str):
        self.directory, self.prefix = directory, prefix
        self.paths: List[str] = []
        self.rows = 0
        self._file = self._writer = None

    def write(self, records) -> None:
        while len(records):
            if self._writer is None or self._writer.records >= SHARD_ROWS:
                self.close()
                path = os.path.join(self.directory, f"{self.prefix}-{len(self.paths):04d}.gz.part")
                self.paths.append(path)
                self._file = fileio.open(path, "wb")
                self._writer = tf_example.TFRecordGzipWriter(self._file)
            room = SHARD_ROWS - self._writer.records
            self._writer.write(records.slice(0, room))
            self.rows += min(room, len(records))
            records = records.slice(room)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._file.close()
            self._writer = self._file = None


def _ingest_file(
    index: int,
    path: str,
    header: Tuple[str, ...],
    kinds: Mapping[str, str],
    rules: Mapping[str, ColumnRule],
    label: Optional[LabelSpec],
    split_dirs: Mapping[str, str],
    buckets: Sequence[int],
    use_threads: bool,
    stop: threading.Event,
    ways: int = 1,
):
    """Reads, checks, encodes, splits and writes one file; returns (rows, its _LabelTally, {split: writer},
    whether a text value spans lines). Raises _Refused on anything `check_csv_files` would
    report, but for a quote left open at the end of the file (Arrow ends the value there)."""
    column_types = {c: pa.type_for_alias(_ARROW_TYPES[kinds[c]]) for c in header}
    checked = [
        (c, r) for c, r in rules.items() if c in header and r.type == "FLOAT" and (r.disallow_nan or r.disallow_inf)
    ]
    labelled = label is not None and all(c in header for c in label.raw_columns)
    writers = {
        name: _SplitWriter(directory, f"data_tfrecord-{index:05d}", ways) for name, directory in split_dirs.items()
    }
    split_names = list(split_dirs)
    tally = _LabelTally()
    rows = 0
    spanning = False  # a text value holds a line break (a quoted value over lines, or a quote never closed)
    text_columns = [c for c in header if kinds[c] == "BYTES"]
    try:
        with _open_input(path) as stream:
            # Arrow reads lines that end in CR only as it reads LF lines.
            reader = pa_csv.open_csv(
                stream,
                read_options=pa_csv.ReadOptions(block_size=BLOCK_BYTES, use_threads=use_threads),
                # Quoted line breaks are data, as TFX's reader takes them.
                parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                # Only an empty cell is missing: "NA" is text and "nan" a number, as in TFX.
                convert_options=pa_csv.ConvertOptions(
                    column_types=column_types,
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=True,
                ),
            )
            for batch in reader:
                if stop.is_set():
                    break
                for column, rule in checked:
                    values = batch.column(column)
                    if (rule.disallow_nan and pc.any(pc.is_nan(values)).as_py()) or (
                        rule.disallow_inf and pc.any(pc.is_inf(values)).as_py()
                    ):
                        raise _Refused(f"{column}: NaN or infinite value")
                # Arrow reads a NUL byte into a string (its number conversion refuses one): the scan names it.
                if any(_holds_nul(batch.column(c)) for c in text_columns):
                    raise _Refused(f"{path}: a NUL byte in a value")
                if text_columns and _holds_header(batch, header, text_columns):
                    raise _Refused(f"{path}: {REPEATED_HEADER}")
                if not spanning:
                    spanning = any(pc.any(pc.match_substring(batch.column(c), "\n")).as_py() for c in text_columns)
                if labelled:
                    values, empty = _label_values(batch, label)
                examples = tf_example.encode(batch, kinds)
                splits = tf_example.split_buckets(examples, buckets)
                if labelled:
                    tally.add(label, values, empty, splits, split_names)
                for i, name in enumerate(split_names):
                    writers[name].write(examples.filter(pa.array(splits == i)))
                rows += batch.num_rows
                progress.advance(batch.num_rows)
    except (pa.ArrowInvalid, UnicodeDecodeError) as err:
        raise _Refused(_arrow_message(path, header, err)) from err
    except OSError as err:
        if not str(err).startswith(("Truncated compressed stream", "zlib inflate failed")):
            raise  # the disk, not the data
        raise _Refused(f"{path}: damaged gzip data ({err})") from err
    finally:
        for writer in writers.values():
            writer.close()
    if not rows:
        raise _Refused(f"{path}: no data rows")
    return rows, tally, writers, spanning


def _holds_header(batch, header: Sequence[str], text_columns: Sequence[str]) -> bool:
    """Whether a row of `batch` holds the header's names in every column. Only text columns can hold a name (a
    number column refuses one, unless the name is a number), so they are compared first and the rest only where
    all of them matched."""
    rows = None
    for column in text_columns:
        same = pc.fill_null(pc.equal(batch.column(column), column), False)
        rows = same if rows is None else pc.and_(rows, same)
        if not pc.any(rows).as_py():
            return False
    for column in header:
        if column not in text_columns:
            same = pc.fill_null(pc.equal(pc.cast(batch.column(column), pa.string()), column), False)
            rows = pc.and_(rows, same)
    return bool(pc.any(rows).as_py())


def _holds_nul(array: pa.Array) -> bool:
    """Whether a string array's values hold a NUL byte: one pass over its data buffer, where they lie end to end
    (a search per value, as `pc.match_substring` does, costs some 20 times more)."""
    offsets, data = array.buffers()[1:3]
    if not len(array) or data is None:
        return False
    start, end = np.frombuffer(offsets, np.int32)[[array.offset, array.offset + len(array)]]
    return not np.frombuffer(data, np.uint8)[start:end].all()


def _open_input(path: str):
    """A local file natively (Arrow reads it without the GIL); a remote one through TFX's file I/O; gzip data
    (whatever the file's name) decompressed by Arrow."""
    if "://" not in path:
        stream = pa.OSFile(path, "rb")
    else:
        stream = io.BufferedReader(Readable(fileio.open(path, "rb")), buffer_size=BLOCK_BYTES)
    return pa.CompressedInputStream(stream, "gzip") if is_gzip(path) else stream


def _arrow_message(path: str, header: Sequence[str], err: Exception) -> str:
    """Arrow's reason, with the column's name for its "CSV column #N"."""
    text = str(err).splitlines()[0]
    match = re.match(r"In CSV column #(\d+): (.*)", text)
    if match and int(match.group(1)) < len(header):
        return f"{path}, column '{header[int(match.group(1))]}': {match.group(2)}"
    return f"{path}: {text}"


def _kinds(header: Sequence[str], rules: Mapping[str, ColumnRule]) -> Dict[str, str]:
    """Each column's tf.Example type: the schema's; a column the schema does not know is text (the gate
    reports it as a new column)."""
    return {c: rules[c].type if c in rules else "BYTES" for c in header}


def _cpus() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def ingest(
    files: Sequence[str],
    split_dirs: Mapping[str, str],
    buckets: Sequence[int],
    rules: Mapping[str, ColumnRule],
    label: Optional[LabelSpec] = None,
    workers: Optional[int] = None,
    min_files: int = 1,
) -> IngestResult:
    """Streams `files` once (several at a time) into GZIP TFRecord shards of tf.Examples under `split_dirs`
    (split name -> folder), split as TFX's ExampleGen splits with `buckets` (hash buckets per split, in order).
    The column types come from the schema's `rules`; there is no inference pass. Each split is written in at
    least `min_files` files (when it has as many rows): one per training worker.

    Checks as `check_csv_files` does in the same pass; on any problem, that scan runs for its exact report and
    InputDataError is raised. Whatever stops it, the split folders are left empty (a retry starts clean).
    Memory per file read is a few Arrow blocks, whatever the file's size.
    """
    for directory in split_dirs.values():
        _empty_folder(directory)
    try:
        return _ingest(files, split_dirs, list(itertools.accumulate(buckets)), rules, label, workers, min_files)
    except BaseException:
        for directory in split_dirs.values():
            _empty_folder(directory)
        raise


def _scan_finds_problems(path: str, rules: Mapping[str, ColumnRule]) -> bool:
    summary = CsvSummary()
    with open_csv(path) as stream:
        scan_stream(path, stream, summary, rules)
    return bool(summary.problems)


def _empty_folder(directory: str) -> None:
    if fileio.exists(directory):
        fileio.rmtree(directory)
    fileio.makedirs(directory)


def _read_headers(files: Sequence[str]) -> Optional[Tuple[str, ...]]:
    """The header all files share, or None when one is unreadable, empty, differs or repeats a name."""
    headers = []
    for path in files:
        with open_csv(path) as stream:
            try:
                if format_problem(stream.head):
                    return None
                headers.append(read_header(stream))
            except (UnicodeDecodeError, csv.Error, *GZIP_ERRORS):
                return None
    reference = headers[0]
    if (
        not reference
        or any(h != reference for h in headers)
        or len(set(reference)) != len(reference)
        or not all(c.strip() for c in reference)
        or any("\x00" in c for c in reference)  # Python's csv module reads one from 3.11 on
    ):
        return None
    return reference


def _ingest(files, split_dirs, cumulative, rules, label, workers, min_files=1) -> IngestResult:
    header = _read_headers(files)
    refusal = None if header else "the header rows differ between files, or name no column or one twice"
    results = {}
    if header:
        kinds = _kinds(header, rules)
        workers = max(1, min(workers or _cpus(), len(files)))
        stop = threading.Event()
        progress.start("rows")
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {
                pool.submit(
                    _ingest_file,
                    i,
                    path,
                    header,
                    kinds,
                    rules,
                    label,
                    split_dirs,
                    cumulative,
                    workers < _cpus(),
                    stop,
                    -(-min_files // len(files)),  # each file's share of the files a split needs
                ): path
                for i, path in enumerate(files)
            }
            try:
                for future in concurrent.futures.as_completed(futures):
                    try:
                        results[futures[future]] = future.result()
                    except _Refused as err:
                        refusal = refusal or str(err)
                        stop.set()
            except BaseException:
                stop.set()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    if refusal is not None:
        # The exact report: file, line, column and rule, as the scan finds them.
        check_csv_files(files, rules, label)
        raise InputDataError("input data: 1 problem (nothing was ingested, trained or pushed):\n  - " + refusal)
    summary = CsvSummary(header=header)
    for path in files:
        rows, tally = results[path][:2]
        summary.rows[os.path.basename(path)] = rows
        summary.label_classes.update(tally.total())
        summary.label_empty += tally.empty
        summary.label_min, summary.label_max = min(summary.label_min, tally.low), max(summary.label_max, tally.high)
        if label is not None and label.task == tasks.MULTICLASS:
            for split, counts in tally.splits.items():
                summary.label_split_classes.setdefault(split, collections.Counter()).update(counts)
    check_label(summary, label)
    # Arrow closes a quote left open at the end of a file: the rest of the file becomes one value. A file with
    # a line break inside a value is scanned line by line to tell that from a value that spans lines.
    spanning = [path for path in files if results[path][3]]
    if summary.problems or any(_scan_finds_problems(path, rules) for path in spanning):
        # The exact report (an open quote explains a one-class label); else the label's.
        check_csv_files(files, rules, label)
        raise InputDataError(report(summary))
    split_rows, split_files = {}, {}
    for name, directory in split_dirs.items():
        parts = [p for path in files for p in results[path][2][name].paths]
        if not parts:  # as TFX's writer: one empty file, so readers of the split find one
            parts = [os.path.join(directory, "empty.gz.part")]
            with fileio.open(parts[0], "wb") as stream:
                tf_example.TFRecordGzipWriter(stream).close()
        for i, part in enumerate(parts):
            fileio.rename(part, os.path.join(directory, f"data_tfrecord-{i:05d}-of-{len(parts):05d}.gz"))
        split_rows[name] = sum(results[path][2][name].rows for path in files)
        split_files[name] = len(parts)
    return IngestResult(
        rows_read=dict(summary.rows),
        split_rows=split_rows,
        split_files=split_files,
        label_classes={str(k): v for k, v in sorted(summary.label_classes.items())},
        label_range=(summary.label_min, summary.label_max)
        if label is not None and label.task == tasks.REGRESSION
        else None,
    )


# --- the ExampleGen executor -------------------------------------------------------------------------------


def _input_files(exec_properties: Mapping[str, Any]) -> List[str]:
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties["input_config"], input_config)
    files: List[str] = []
    for split in input_config.splits:
        found = fileio.glob(os.path.join(exec_properties["input_base"], split.pattern))
        files += sorted(path for path in found if names.is_csv_file(path))
    return files


def _settings(exec_properties: Mapping[str, Any]) -> Tuple[Dict[str, ColumnRule], Optional[LabelSpec], int]:
    """(the schema's column rules, the label, the files each split needs at least)."""
    config = example_gen_pb2.CustomConfig()
    if exec_properties.get("custom_config"):
        proto_utils.json_to_proto(exec_properties["custom_config"], config)
    struct = struct_pb2.Struct()
    if not config.custom_config.Unpack(struct):
        return {}, None, 1
    settings = json_format.MessageToDict(struct)
    schema = schema_pb2.Schema()
    if settings.get("schema_text"):
        text_format.Parse(settings["schema_text"], schema)
    else:
        with fileio.open(settings["schema_path"], "r") as f:
            text_format.Parse(f.read(), schema)
    label = settings.get("label")
    label = LabelSpec.from_dict(label) if label else None
    return rules_from_schema(schema), label, int(settings.get("min_files", 1))


def make_example_gen_config(schema_path: str, label: Optional[LabelSpec], schema_text: str = "", min_files: int = 1):
    """ExampleGen's `custom_config` proto carrying the checks' settings (read by `Executor`): the schema's
    path, or its text when the steps cannot read the file (Kubeflow); and with several training workers the
    files each split needs at least (absent for one: its output and cache stay as they were)."""
    struct = struct_pb2.Struct()
    struct.update(
        {
            "schema_path": "" if schema_text else schema_path,
            "schema_text": schema_text,
            "label": None if label is None else label.to_dict(),
            **({"min_files": min_files} if min_files > 1 else {}),
        }
    )
    config = example_gen_pb2.CustomConfig()
    config.custom_config.Pack(struct)
    return config


class Executor(base_beam_executor.BaseBeamExecutor):
    """ExampleGen's executor: streams every CSV file once (see `ingest`), writes the splits and records the
    row counts; a file that breaks a rule is refused with the exact message of `check_csv_files`."""

    def Do(self, input_dict, output_dict, exec_properties):
        self._log_startup(input_dict, output_dict, exec_properties)
        files = _input_files(exec_properties)
        if not files:
            raise InputDataError(f"input data: {exec_properties['input_base']}: holds no {names.CSV_FILES}")
        rules, label, min_files = _settings(exec_properties)
        output_config = example_gen_pb2.Output()
        proto_utils.json_to_proto(exec_properties["output_config"], output_config)
        splits = [(s.name, s.hash_buckets) for s in output_config.split_config.splits]
        if not splits or output_config.split_config.partition_feature_name:
            raise ValueError(
                "this ExampleGen splits the rows of its input by hash buckets: give "
                "output_config.split_config.splits, without partition_feature_name"
            )
        examples = artifact_utils.get_single_instance(output_dict["examples"])
        examples.split_names = artifact_utils.encode_split_names([name for name, _ in splits])
        result = ingest(
            files,
            {name: artifact_utils.get_split_uri([examples], name) for name, _ in splits},
            [buckets for _, buckets in splits],
            rules,
            label,
            min_files=min_files,
        )
        record_rows(examples, result)
        examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(examples, "tfrecords_gzip")
        logging.info(
            "CSV ingested: %d rows from %d file(s); rows per split %s; label classes %s",
            result.total_read,
            len(result.rows_read),
            result.split_rows,
            result.label_classes,
        )
