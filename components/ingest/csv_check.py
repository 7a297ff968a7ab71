"""The checks CSV files get before a row is ingested, and the exact report when one fails: encoding, format
(gzip, delimiter, quotes), field counts, values against the schema's types and NaN/inf rules, NUL bytes, and the
label per task. A message names file, line, column and rule, and how many rows share the problem.

Ingestion (`csv_input`) reads each file once with Arrow and runs these checks line by line only for a file that
breaks a rule, so the fast path and the report agree on what is wrong.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import functools
import gzip
import io
import math
import os
import re
import zlib
from typing import BinaryIO, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.csv as pa_csv
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.dsl.io import fileio

from tfxflow.components import names
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
        raw = io.BufferedReader(Readable(raw))
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
                scan_label(summary, name, line, label, value, not record[label_index])
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


def scan_label(summary: CsvSummary, name: str, line: int, label: LabelSpec, value, empty: bool) -> None:
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


class Readable(io.RawIOBase):
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
