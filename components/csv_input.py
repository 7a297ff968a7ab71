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
import functools
import gzip
import io
import itertools
import json
import math
import os
import re
import shutil
import tempfile
import threading
import zlib
from typing import Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

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

from tfxflow.components import artifact_files, names, progress, tf_example
from tfxflow.components.errors import DataError
from tfxflow.components.model import tasks
from tfxflow.components.model.features import LabelSpec

MAX_LISTED = 20  # problem groups shown in one message


REPEATED_HEADER = "a row holds the header's names (files joined with their headers?): remove the repeated header line"


class InputDataError(DataError):
    """CSV files that cannot be ingested as they are."""


@dataclasses.dataclass(frozen=True)
class ColumnRule:
    """What the schema says of one column's raw values."""

    type: str  # INT, FLOAT or BYTES
    disallow_nan: bool = False
    disallow_inf: bool = False


@dataclasses.dataclass
class Problem:
    """One kind of problem in one file (and column), with where it first occurs and how often."""

    file: str
    line: int  # 0: the file as a whole
    column: str
    rule: str
    detail: str = ""
    count: int = 1

    def __str__(self) -> str:
        where = self.file + (f" line {self.line:,}" if self.line else "")
        where += f", column '{self.column}'" if self.column else ""
        text = f"{where}: {self.rule}" + (f": {self.detail}" if self.detail else "")
        return text + (f" ({self.count:,} rows in all; the first is shown)" if self.count > 1 else "")


@dataclasses.dataclass
class CsvSummary:
    """What a scan found: rows per file and the label's class counts."""

    header: Tuple[str, ...] = ()
    rows: Dict[str, int] = dataclasses.field(default_factory=dict)
    label_classes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    label_empty: int = 0
    # Multi-class labels outside `label.classes` ({value: rows}, and where the first was) and the classes of
    # each split (streaming ingestion only); a regression label's range.
    label_unknown: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    label_unknown_at: str = ""
    label_split_classes: Dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
    label_min: float = math.inf
    label_max: float = -math.inf
    problems: "collections.OrderedDict[tuple, Problem]" = dataclasses.field(default_factory=collections.OrderedDict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def add(self, file: str, line: int, rule: str, column: str = "", detail: str = "") -> None:
        key = (file, rule, column)
        if key in self.problems:
            self.problems[key].count += 1
        else:
            self.problems[key] = Problem(file, line, column, rule, detail)


def rules_from_schema(schema) -> Dict[str, ColumnRule]:
    """Column rules from a `schema_pb2.Schema`."""
    type_names = {schema_pb2.INT: "INT", schema_pb2.FLOAT: "FLOAT", schema_pb2.BYTES: "BYTES"}
    rules = {}
    for feature in schema.feature:
        domain = feature.float_domain if feature.HasField("float_domain") else None
        rules[feature.name] = ColumnRule(
            type=type_names.get(feature.type, "BYTES"),
            disallow_nan=bool(domain and domain.disallow_nan),
            disallow_inf=bool(domain and domain.disallow_inf),
        )
    return rules


# --- reading a file's bytes --------------------------------------------------------------------------------

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 16  # what the format checks look at: the start of the file
_READ_BYTES = 1 << 13
# A damaged or cut-off gzip stream, as Python's gzip module and zlib report it.
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


class _Gunzipped(gzip.GzipFile):
    """A gzip stream that closes the stream it decompresses."""

    def __init__(self, raw: BinaryIO):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


class _Rest(io.RawIOBase):
    """`head`, then the rest of `stream`; with `cr_lines`, every CR reads as LF (lines that end in CR only)."""

    def __init__(self, head: bytes, stream: BinaryIO, cr_lines: bool):
        super().__init__()
        self._head, self._stream, self._cr_lines = head, stream, cr_lines

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            data, self._head = self._head[: len(buffer)], self._head[len(buffer) :]
        else:
            # Small reads: a cut-off gzip stream raises without returning what it decompressed in that read.
            data = self._stream.read(min(len(buffer), _READ_BYTES))
        if self._cr_lines:
            data = data.replace(b"\r", b"\n")
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


def cr_lines(head: bytes) -> bool:
    """Whether lines end in CR only (classic Mac OS exports): a CR and no LF in the start of the file."""
    return b"\r" in head and b"\n" not in head


def csv_stream(raw: BinaryIO) -> BinaryIO:
    """A CSV file's bytes as the checks read them: gzip-compressed data (whatever the file's name) decompressed,
    and lines that end in CR only read as LF lines. Its `head` is the start of the data (up to HEAD_BYTES);
    a damaged gzip stream raises one of GZIP_ERRORS on reading."""
    if hasattr(raw, "head"):
        return raw  # one already
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(_Readable(raw))
    stream = _Gunzipped(raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
    head = b""
    try:
        while len(head) < HEAD_BYTES:
            chunk = stream.read(min(HEAD_BYTES - len(head), _READ_BYTES))
            if not chunk:
                break
            head += chunk
    except GZIP_ERRORS:
        pass  # the head holds what could be read; reading on raises the error where the data ends
    cr_only = cr_lines(head)
    reader = io.BufferedReader(_Rest(head, stream, cr_only), buffer_size=HEAD_BYTES)
    reader.head = head.replace(b"\r", b"\n") if cr_only else head
    return reader


def open_csv(path: str) -> BinaryIO:
    """`csv_stream` of a local or remote (TFX file system) file."""
    return csv_stream(open(path, "rb") if "://" not in path else fileio.open(path, "rb"))


def is_gzip(path: str) -> bool:
    with open(path, "rb") if "://" not in path else fileio.open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


# What is not CSV text as read here, by the first bytes: (bytes, what it is and what to do).
_NOT_CSV = (
    (
        b"PK\x03\x04",
        "a ZIP archive, not CSV text (an Excel workbook, or zipped files): save the sheet as 'CSV UTF-8 (Comma "
        "delimited)', or unzip the files into the data folder",
    ),
    (b"BZh", "compressed with bzip2, which is not read (gzip is): decompress it, or compress it with gzip"),
    (b"\xfd7zXZ\x00", "compressed with xz, which is not read (gzip is): decompress it, or compress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "compressed with zstd, which is not read (gzip is): decompress it, or compress it with gzip"),
)
_UTF16 = (
    "UTF-16 text, not UTF-8 (Excel's 'Unicode Text' export, whose fields are separated by tabs): save it as "
    "'CSV UTF-8 (Comma delimited)', or convert it with `iconv -f UTF-16 -t UTF-8` and separate the fields with commas"
)
_DELIMITERS = {";": "';'", "\t": "tabs", "|": "'|'"}


def format_problem(head: bytes) -> Optional[str]:
    """What makes a file that starts with `head` (from `csv_stream`) unreadable as comma-separated UTF-8 text, and
    what to do; None when it looks like CSV."""
    for magic, what in _NOT_CSV:
        if head.startswith(magic):
            return what
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) >= 8 and head.count(b"\x00") * 4 > len(head)):
        return _UTF16
    first, _, rest = head.partition(b"\n")
    # Without NUL bytes (the scan names their line): Python's csv module before 3.11 raises on one.
    text = first.replace(b"\x00", b"").decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r")
    if len(next(csv.reader([text]), [])) != 1:
        return None
    for delimiter, name in _DELIMITERS.items():
        if len(next(csv.reader([text], delimiter=delimiter), [])) > 1:
            decimal = re.search(rb"[0-9],[0-9]", rest.partition(b"\n")[0])
            if not decimal:
                return f"its fields are separated by {name}, not commas: export it with ',' as the field delimiter"
            return (
                f"its fields are separated by {name}, not commas (a spreadsheet export with European settings: "
                "numbers there have decimal commas): export it with ',' as the field delimiter and '.' as the "
                "decimal mark"
            )
    return None


# A NUL byte as the scan reads it: a lone surrogate, which no decoded UTF-8 text holds, so the value that held one
# is known after parsing (Python's csv module before 3.11 raises on a NUL, later ones read it as a character).
_NUL = "\udc00"
_NUL_RULE = "NUL byte"
_NUL_WHY = "no CSV export writes one: binary data or a damaged copy; remove it"


def _decoded_lines(name: str, stream: BinaryIO, summary: CsvSummary, nul_line: List[int]) -> Iterator[str]:
    """Text lines of a byte stream; a line that is not UTF-8 is recorded and passed on with replacements. A NUL
    byte is passed on as `_NUL`, `nul_line[0]` the last line that held one (its record names the column)."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark is not part of the header
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            summary.add(
                name,
                number,
                "bytes that are not UTF-8",
                detail=f"{raw[err.start : err.end]!r} at byte {err.start} of the line",
            )
            text = raw.decode("utf-8", errors="replace")
        if "\x00" in text:
            nul_line[0] = number
            text = text.replace("\x00", _NUL)
        yield text


def _shown_nul(value: str, width: int = 40) -> str:
    """A value that holds a NUL byte, as Python writes it, cut to `width` characters around the first one."""
    text = value.replace(_NUL, "\x00")
    start = max(0, text.index("\x00") - width // 2)
    return ("..." if start else "") + repr(text[start : start + width]) + ("..." if start + width < len(text) else "")


def _check_nul(summary: CsvSummary, name: str, line: int, header: Sequence[str], record: Sequence[str]) -> bool:
    """Records each column of `record` whose value holds a NUL byte (the fields past the header's as one);
    whether one does."""
    found = set()
    for index, value in enumerate(record):
        column = header[index] if index < len(header) else ""
        if _NUL in value and column not in found:
            summary.add(name, line, _NUL_RULE, column, f"{_shown_nul(value)} ({_NUL_WHY})")
            found.add(column)
    return bool(found)


# What Arrow's CSV reader (the ingestion) accepts: ASCII digits, no "+", no "_", int64's range; a number may start
# with "+" where the installed Arrow reads it (pyarrow 18 of TFX 1.21 does, 10 of TFX 1.16 does not).
_INTEGER = re.compile(r"\s*-?[0-9]+\s*")
_NUMBER_BODY = r"(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf|infinity|nan)\s*"


@functools.lru_cache(maxsize=None)
def _number() -> "re.Pattern[str]":
    """The FLOAT values Arrow's reader accepts, its sign rule asked of Arrow itself once."""
    try:
        pa_csv.read_csv(io.BytesIO(b"x\n+1\n"), convert_options=pa_csv.ConvertOptions(column_types={"x": pa.float32()}))
        sign = "[-+]?"
    except pa.ArrowInvalid:
        sign = "-?"
    return re.compile(r"\s*" + sign + _NUMBER_BODY, re.IGNORECASE)


def _check_value(summary: CsvSummary, name: str, line: int, column: str, value: str, rule: ColumnRule) -> None:
    if rule.type == "INT":
        if not _INTEGER.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
            summary.add(name, line, "not an integer", column, f"{value!r} (schema type INT)")
        return
    if rule.type == "FLOAT":
        if not _number().fullmatch(value):
            summary.add(name, line, "not a number", column, f"{value!r} (schema type FLOAT)")
            return
        number = float(value)
        if math.isnan(number) and rule.disallow_nan:
            summary.add(name, line, "NaN is not allowed", column, f"{value!r} (schema: float_domain.disallow_nan)")
        elif math.isinf(number) and rule.disallow_inf:
            summary.add(
                name, line, "an infinite value is not allowed", column, f"{value!r} (schema: float_domain.disallow_inf)"
            )


def scan_stream(
    name: str, stream: BinaryIO, summary: CsvSummary, rules: Mapping[str, ColumnRule], label: Optional[LabelSpec] = None
) -> None:
    """Checks one CSV file (header first) and adds what it finds to `summary`."""
    stream = csv_stream(stream)
    problem = format_problem(stream.head)
    if problem:
        summary.add(name, 0, "file format", detail=problem)
        summary.rows[name] = 0
        return
    nul_line = [0]
    reader = csv.reader(_decoded_lines(name, stream, summary, nul_line), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as err:
        summary.add(name, reader.line_num, "malformed header", detail=str(err))
        return
    except GZIP_ERRORS as err:
        summary.add(name, 1, "damaged gzip data", detail=f"{_gzip_reason(err)}; the rest of the file was not read")
        return
    if not header:
        summary.add(name, 0, "empty file", detail="no header row and no data")
        return
    header = tuple(header)
    for index, column in enumerate(header, start=1):
        if _NUL in column:
            summary.add(
                name,
                1,
                "header",
                detail=f"the name of column {index} holds a {_NUL_RULE}: {_shown_nul(column)} ({_NUL_WHY})",
            )
        elif not column.strip():
            summary.add(name, 1, "header", detail=f"column {index} has no name")
        elif header.index(column) != index - 1:
            summary.add(name, 1, "header", column, "the column name appears more than once")
    # The messages that name a column show a NUL byte in its name as Python writes it, not as the byte.
    header = tuple(column.replace(_NUL, "\\x00") for column in header)
    if not summary.header:
        summary.header = header
    elif header != summary.header:
        first = next(iter(summary.rows))
        missing = [c for c in summary.header if c not in header]
        extra = [c for c in header if c not in summary.header]
        summary.add(
            name,
            1,
            "header differs from the first file's",
            detail=(
                f"{first}; missing {missing}, extra {extra}" if missing or extra else f"{first}; columns reordered"
            ),
        )
    typed = [(i, c, rules[c]) for i, c in enumerate(header) if c in rules and rules[c].type != "BYTES"]
    label_sources = label is not None and all(c in header for c in label.raw_columns)
    label_index = header.index(label.column) if label_sources else -1
    label_at = [(c, header.index(c)) for c in label.raw_columns] if label_sources else []
    rows = 0
    end = reader.line_num
    try:
        for record in reader:
            line = reader.line_num - sum(field.count("\n") for field in record)
            end = reader.line_num
            if not record:  # a blank line, as TFX skips it
                continue
            rows += 1
            # Only a record whose lines held a NUL byte is searched for it.
            if nul_line[0] >= line and _check_nul(summary, name, line, header, record):
                continue
            if len(record) != len(header):
                summary.add(
                    name, line, "wrong number of fields", detail=f"{len(record)} fields, the header has {len(header)}"
                )
                continue
            if tuple(record) == header:  # files joined with their headers; in an all-text file it would be a row
                summary.add(name, line, "header repeated", detail=REPEATED_HEADER)
                continue
            for index, column, rule in typed:
                if record[index]:
                    _check_value(summary, name, line, column, record[index], rule)
            if label_sources:
                if not record[label_index]:
                    summary.label_empty += 1
                value = label.evaluate({c: record[i] for c, i in label_at})
                _scan_label(summary, name, line, label, value, not record[label_index])
    except GZIP_ERRORS as err:
        summary.add(
            name, end + 1, "damaged gzip data", detail=f"{_gzip_reason(err)}; the rest of the file was not read"
        )
    except csv.Error as err:
        if "unexpected end of data" in str(err):
            reason = "a quoted field is never closed"
        elif "field larger than field limit" in str(err):  # an open quote swallowing the lines after it
            reason = f"a quoted field is never closed (it runs on past {csv.field_size_limit():,} characters)"
        else:
            reason = str(err)
        summary.add(name, end + 1, "malformed CSV (quotes)", detail=f"{reason}; the rest of the file was not read")
    summary.rows[name] = rows
    if rows == 0 and not any(p.file == name for p in summary.problems.values()):
        summary.add(name, 0, "no data rows", detail="the file holds only a header")


def _gzip_reason(err: BaseException) -> str:
    if isinstance(err, EOFError):
        return "the compressed data ends early (a cut-off transfer or copy?)"
    return f"the compressed data is damaged ({err})"


def _scan_label(summary: CsvSummary, name: str, line: int, label: LabelSpec, value, empty: bool) -> None:
    """Counts one row's label (`LabelSpec.evaluate`) and records what the task does not allow."""
    if label.task == tasks.BINARY:
        summary.label_classes[value] += 1
        return
    if value is None:  # empty, or for regression not a number (the type check names that one)
        if empty:
            need = "a class" if label.task == tasks.MULTICLASS else "a number"
            summary.add(name, line, "label is empty", label.column, f"a {label.task} label needs {need} in every row")
        return
    if label.task == tasks.MULTICLASS:
        summary.label_classes[value] += 1
        if label.classes and value not in label.classes:
            summary.label_unknown[value] += 1
            summary.label_unknown_at = summary.label_unknown_at or f"{name} line {line:,}"
        return
    if not math.isfinite(value):
        summary.add(name, line, "label is not a finite number", label.column, f"{value!r}: a regression target")
    elif label.transform == "log1p" and value <= -1:
        summary.add(
            name, line, "label out of range for label.transform log1p", label.column, f"{value!r}: must be > -1"
        )
    else:
        summary.label_classes["rows"] += 1
        summary.label_min = min(summary.label_min, value)
        summary.label_max = max(summary.label_max, value)


def check_label(summary: CsvSummary, label: Optional[LabelSpec]) -> None:
    """What the label of all the files leaves to learn, per task (see the module docstring)."""
    if label is None or not summary.total_rows or summary.problems:
        return
    if not all(c in summary.header for c in label.raw_columns):
        return  # a missing column is reported by the schema check, which names it
    labelled = sum(summary.label_classes.values())
    # A binary label counts its empty rows as class 0; the other tasks' labels count only rows with a value.
    if (summary.label_empty == labelled) if label.task == tasks.BINARY else not labelled:
        summary.add(
            "all files",
            0,
            "label column is empty",
            label.column,
            f"no row has a value for '{label.column}', so no row has a label",
        )
    elif label.task == tasks.MULTICLASS and summary.label_unknown:
        values = ", ".join(f"{v!r} ({n:,} rows)" for v, n in summary.label_unknown.most_common(MAX_LISTED))
        summary.add(
            "all files",
            0,
            "label values not in label.classes",
            label.column,
            f"{values}; the first at {summary.label_unknown_at}; the feature config lists {list(label.classes)}: "
            "add them there, or remove those rows",
        )
    elif label.task == tasks.REGRESSION and summary.label_min == summary.label_max:
        summary.add(
            "all files",
            0,
            "the label has one value only",
            label.column,
            f"'{label.column}' is {summary.label_min:g} in all {labelled:,} rows: there is nothing to learn",
        )
    elif label.task != tasks.REGRESSION and len(summary.label_classes) == 1:
        ((value, count),) = summary.label_classes.items()
        need = "both classes" if label.task == tasks.BINARY else "at least 2 classes"
        shown = value if label.task == tasks.BINARY else repr(value)
        summary.add(
            "all files",
            0,
            "the label has one class only",
            label.column,
            f"'{label.name}' ({label.describe()}) is {shown} in all {count:,} rows; training needs {need}",
        )
    elif label.task == tasks.MULTICLASS and not label.classes and summary.label_split_classes:
        _check_split_classes(summary, label)


def _check_split_classes(summary: CsvSummary, label: LabelSpec) -> None:
    """Without `label.classes`, the classes are Transform's vocabulary of the training split: a class that only
    another split holds would have no index there."""
    train = summary.label_split_classes.get("train", collections.Counter())
    for split, counts in sorted(summary.label_split_classes.items()):
        unseen = {value: n for value, n in counts.items() if split != "train" and value not in train}
        if unseen:
            values = ", ".join(f"{v!r} ({n:,} rows)" for v, n in sorted(unseen.items())[:MAX_LISTED])
            summary.add(
                "all files",
                0,
                f"label classes only in the {split} split",
                label.column,
                f"{values}: the classes are learned from the training split, where these never occur; list every "
                "class in the feature config's label.classes (then such a class is known and scored), or remove "
                "those rows",
            )


def report(summary: CsvSummary) -> str:
    problems = list(summary.problems.values())
    lines = [
        f"input data: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
        "(nothing was ingested, trained or pushed):"
    ]
    lines += [f"  - {p}" for p in problems[:MAX_LISTED]]
    if len(problems) > MAX_LISTED:
        lines.append(f"  ... and {len(problems) - MAX_LISTED} more")
    return "\n".join(lines)


def check_csv_files(
    paths: Sequence[str], rules: Mapping[str, ColumnRule], label: Optional[LabelSpec] = None, opener=None
) -> CsvSummary:
    """Scans `paths` in order; raises InputDataError listing every problem, else returns the summary."""
    opener = opener or open_csv
    summary = CsvSummary()
    for path in paths:
        with opener(path) as stream:
            scan_stream(path, stream, summary, rules, label)
    check_label(summary, label)
    if summary.problems:
        raise InputDataError(report(summary))
    return summary


# --- streaming ingestion ----------------------------------------------------------------------------------

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


def read_header(stream: BinaryIO) -> Tuple[str, ...]:
    """The first CSV record, a UTF-8 byte-order mark (Excel's "CSV UTF-8") not part of the first name."""
    first = stream.readline()
    while first.count(b'"') % 2:  # a quoted name that spans lines
        more = stream.readline()
        if not more:
            break
        first += more
    text = first.decode("utf-8")
    return tuple(next(csv.reader([text.lstrip("\ufeff")]), []))


class _Refused(Exception):
    """The fast path met something to report: the exact report comes from `check_csv_files`."""


def _label_values(batch, label: LabelSpec) -> Tuple[np.ndarray, int]:
    """The label of each row of `batch` by `LabelSpec.evaluate`'s rules, and how many rows have an empty label
    column. binary: 0/1 int64; multiclass: the values' text (None when empty); regression: float64 (NaN when
    empty). Raises _Refused on what `_scan_label` reports (the scan then names file, line and column)."""

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
    """One split's output of one input file: GZIP TFRecord shards of at most SHARD_ROWS records."""

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
):
    """Reads, checks, encodes, splits and writes one file; returns (rows, its _LabelTally, {split: writer},
    whether a text value spans lines). Raises _Refused on anything `check_csv_files` would
    report, but for a quote left open at the end of the file (Arrow ends the value there)."""
    column_types = {c: pa.type_for_alias(_ARROW_TYPES[kinds[c]]) for c in header}
    checked = [
        (c, r) for c, r in rules.items() if c in header and r.type == "FLOAT" and (r.disallow_nan or r.disallow_inf)
    ]
    labelled = label is not None and all(c in header for c in label.raw_columns)
    writers = {name: _SplitWriter(directory, f"data_tfrecord-{index:05d}") for name, directory in split_dirs.items()}
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


class _Readable(io.RawIOBase):
    """A TFX file (GCS, S3 through TF's filesystems) as the raw stream Arrow reads from."""

    def __init__(self, handle):
        super().__init__()
        self._handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        super().close()


def _open_input(path: str):
    """A local file natively (Arrow reads it without the GIL); a remote one through TFX's file I/O; gzip data
    (whatever the file's name) decompressed by Arrow."""
    if "://" not in path:
        stream = pa.OSFile(path, "rb")
    else:
        stream = io.BufferedReader(_Readable(fileio.open(path, "rb")), buffer_size=BLOCK_BYTES)
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
) -> IngestResult:
    """Streams `files` once (several at a time) into GZIP TFRecord shards of tf.Examples under `split_dirs`
    (split name -> folder), split as TFX's ExampleGen splits with `buckets` (hash buckets per split, in order).
    The column types come from the schema's `rules`; there is no inference pass.

    Checks as `check_csv_files` does in the same pass; on any problem, that scan runs for its exact report and
    InputDataError is raised. Whatever stops it, the split folders are left empty (a retry starts clean).
    Memory per file read is a few Arrow blocks, whatever the file's size.
    """
    for directory in split_dirs.values():
        _empty_folder(directory)
    try:
        return _ingest(files, split_dirs, list(itertools.accumulate(buckets)), rules, label, workers)
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


def _ingest(files, split_dirs, cumulative, rules, label, workers) -> IngestResult:
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
                    _ingest_file, i, path, header, kinds, rules, label, split_dirs, cumulative, workers < _cpus(), stop
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


def _settings(exec_properties: Mapping[str, Any]) -> Tuple[Dict[str, ColumnRule], Optional[LabelSpec]]:
    config = example_gen_pb2.CustomConfig()
    if exec_properties.get("custom_config"):
        proto_utils.json_to_proto(exec_properties["custom_config"], config)
    struct = struct_pb2.Struct()
    if not config.custom_config.Unpack(struct):
        return {}, None
    settings = json_format.MessageToDict(struct)
    schema = schema_pb2.Schema()
    if settings.get("schema_text"):
        text_format.Parse(settings["schema_text"], schema)
    else:
        with fileio.open(settings["schema_path"], "r") as f:
            text_format.Parse(f.read(), schema)
    label = settings.get("label")
    label = LabelSpec.from_dict(label) if label else None
    return rules_from_schema(schema), label


def make_example_gen_config(schema_path: str, label: Optional[LabelSpec], schema_text: str = ""):
    """ExampleGen's `custom_config` proto carrying the checks' settings (read by `Executor`): the schema's
    path, or its text when the steps cannot read the file (Kubeflow)."""
    struct = struct_pb2.Struct()
    struct.update(
        {
            "schema_path": "" if schema_text else schema_path,
            "schema_text": schema_text,
            "label": None if label is None else label.to_dict(),
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
        rules, label = _settings(exec_properties)
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


def csv_files(data_root: str) -> List[str]:
    """The CSV files (`*.csv`, `*.csv.gz`) directly in `data_root`, sorted."""
    return sorted(path for path in fileio.glob(os.path.join(data_root, names.CSV_PATTERN)) if names.is_csv_file(path))


def csv_records(stream: BinaryIO) -> Iterator[str]:
    """The data records of a CSV byte stream after its header, each one line of CSV as Python's csv module
    writes it: a quoted value's line breaks stay inside its record (RFC 4180), a quote inside an unquoted value
    is a character, as the scan and ingestion read them. Blank lines are left out."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")
    reader = csv.reader(text)
    next(reader, None)  # the header
    line = io.StringIO()
    writer = csv.writer(line)  # its "\r\n" terminator makes it quote a value holding a line break
    for row in reader:
        if not row:
            continue
        line.seek(0)
        line.truncate()
        writer.writerow(row)
        yield line.getvalue()[:-2]


def _file_records(path: str) -> Iterator[str]:
    # Through a buffered reader: TF's own line reader drops the "\r" of a "\r\n" inside a quoted value.
    with open_csv(path) as stream:
        yield from csv_records(stream)


def csv_statistics(data_root: str, schema=None):
    """TFDV statistics of the CSV files in `data_root` after the same checks as ingestion (types from
    `schema` when given, else inferred). Raises InputDataError naming what is wrong.

    As TFDV's `generate_statistics_from_csv`, but records are read as ingestion reads them: a byte-order mark
    is not part of the first column's name, and a quoted value may span lines (TFDV's reader splits lines)."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation.coders import csv_decoder

    from tfxflow.components import drift

    files = csv_files(data_root)
    if not files:
        raise InputDataError(f"input data: {data_root}: holds no {names.CSV_FILES}")
    summary = check_csv_files(files, rules_from_schema(schema) if schema is not None else {})
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
