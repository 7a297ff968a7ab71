"""CSV ingestion that refuses bad files with a message naming file, line, column and rule.

TFX's CsvExampleGen fails on a malformed file with a Beam traceback ("Invalid CSV line: [...]",
UnicodeDecodeError) and, worse, silently turns a numeric column with one stray string into a string column.
`Executor` scans every input file first, streaming, and raises `InputDataError` listing what is wrong;
only clean files reach the stock CSV executor. The rules come from the curated schema (column types,
`float_domain.disallow_nan/inf`) and the feature config's label (it must not be empty or one class).

The executor runs inside ExampleGen, whose driver fingerprints the input files: changed data is always
scanned again, in LocalDagRunner and in Kubeflow alike.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import math
import os
from typing import Any, BinaryIO, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from absl import logging
from google.protobuf import json_format, struct_pb2, text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.utils import proto_utils

from components.errors import DataError
from components.features import LabelSpec

MAX_LISTED = 20  # problem groups shown in one message


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
    problems: "collections.OrderedDict[tuple, Problem]" = dataclasses.field(
        default_factory=collections.OrderedDict)

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
    names = {schema_pb2.INT: "INT", schema_pb2.FLOAT: "FLOAT", schema_pb2.BYTES: "BYTES"}
    rules = {}
    for feature in schema.feature:
        domain = feature.float_domain if feature.HasField("float_domain") else None
        rules[feature.name] = ColumnRule(
            type=names.get(feature.type, "BYTES"),
            disallow_nan=bool(domain and domain.disallow_nan),
            disallow_inf=bool(domain and domain.disallow_inf))
    return rules


def _decoded_lines(name: str, stream: BinaryIO, summary: CsvSummary) -> Iterator[str]:
    """Text lines of a byte stream; a line that is not UTF-8 is recorded and passed on with replacements."""
    for number, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as err:
            summary.add(name, number, "bytes that are not UTF-8",
                        detail=f"{raw[err.start:err.end]!r} at byte {err.start} of the line")
            yield raw.decode("utf-8", errors="replace")


def _check_value(summary: CsvSummary, name: str, line: int, column: str, value: str, rule: ColumnRule) -> None:
    if rule.type == "INT":
        try:
            int(value)
        except ValueError:
            summary.add(name, line, "not an integer", column, f"{value!r} (schema type INT)")
        return
    if rule.type == "FLOAT":
        try:
            number = float(value)
        except ValueError:
            summary.add(name, line, "not a number", column, f"{value!r} (schema type FLOAT)")
            return
        if math.isnan(number) and rule.disallow_nan:
            summary.add(name, line, "NaN is not allowed", column, f"{value!r} (schema: float_domain.disallow_nan)")
        elif math.isinf(number) and rule.disallow_inf:
            summary.add(name, line, "an infinite value is not allowed", column,
                        f"{value!r} (schema: float_domain.disallow_inf)")


def scan_stream(name: str, stream: BinaryIO, summary: CsvSummary, rules: Mapping[str, ColumnRule],
                label: Optional[LabelSpec] = None) -> None:
    """Checks one CSV file (header first) and adds what it finds to `summary`."""
    reader = csv.reader(_decoded_lines(name, stream, summary), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as err:
        summary.add(name, reader.line_num, "malformed header", detail=str(err))
        return
    if not header:
        summary.add(name, 0, "empty file", detail="no header row and no data")
        return
    header = tuple(header)
    for index, column in enumerate(header, start=1):
        if not column.strip():
            summary.add(name, 1, "header", detail=f"column {index} has no name")
        elif header.index(column) != index - 1:
            summary.add(name, 1, "header", column, "the column name appears more than once")
    if not summary.header:
        summary.header = header
    elif header != summary.header:
        first = next(iter(summary.rows))
        missing = [c for c in summary.header if c not in header]
        extra = [c for c in header if c not in summary.header]
        summary.add(name, 1, "header differs from the first file's", detail=(
            f"{first}; missing {missing}, extra {extra}" if missing or extra else f"{first}; columns reordered"))
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
            if len(record) != len(header):
                summary.add(name, line, "wrong number of fields",
                            detail=f"{len(record)} fields, the header has {len(header)}")
                continue
            for index, column, rule in typed:
                if record[index]:
                    _check_value(summary, name, line, column, record[index], rule)
            if label_sources:
                if not record[label_index]:
                    summary.label_empty += 1
                summary.label_classes[label.evaluate({c: record[i] for c, i in label_at})] += 1
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


def check_label(summary: CsvSummary, label: Optional[LabelSpec]) -> None:
    """A label column that is empty everywhere, or one class only, leaves nothing to learn."""
    if label is None or not summary.total_rows or summary.problems:
        return
    if not all(c in summary.header for c in label.raw_columns):
        return  # a missing column is reported by the schema check, which names it
    labelled = sum(summary.label_classes.values())
    if summary.label_empty == labelled:
        summary.add("all files", 0, "label column is empty", label.column,
                    f"no row has a value for '{label.column}', so no row has a label")
    elif len(summary.label_classes) == 1:
        (value, count), = summary.label_classes.items()
        summary.add("all files", 0, "the label has one class only", label.column,
                    f"'{label.name}' ({label.describe()}) is {value} in all {count:,} rows; "
                    "training needs both classes")


def report(summary: CsvSummary) -> str:
    problems = list(summary.problems.values())
    lines = [f"input data: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
             "(nothing was ingested, trained or pushed):"]
    lines += [f"  - {p}" for p in problems[:MAX_LISTED]]
    if len(problems) > MAX_LISTED:
        lines.append(f"  ... and {len(problems) - MAX_LISTED} more")
    return "\n".join(lines)


def check_csv_files(paths: Sequence[str], rules: Mapping[str, ColumnRule], label: Optional[LabelSpec] = None,
                    opener=None) -> CsvSummary:
    """Scans `paths` in order; raises InputDataError listing every problem, else returns the summary."""
    opener = opener or (lambda path: open(path, "rb"))  # pylint: disable=consider-using-with
    summary = CsvSummary()
    for path in paths:
        with opener(path) as stream:
            scan_stream(path, stream, summary, rules, label)
    check_label(summary, label)
    if summary.problems:
        raise InputDataError(report(summary))
    return summary


# --- the ExampleGen executor -------------------------------------------------------------------------------

def _input_files(exec_properties: Mapping[str, Any]) -> List[str]:
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties["input_config"], input_config)
    files: List[str] = []
    for split in input_config.splits:
        files += sorted(fileio.glob(os.path.join(exec_properties["input_base"], split.pattern)))
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
    label = LabelSpec(**{**label, "positive_values": tuple(label.get("positive_values") or ())}) if label else None
    return rules_from_schema(schema), label


def make_example_gen_config(schema_path: str, label: Optional[LabelSpec], schema_text: str = ""):
    """ExampleGen's `custom_config` proto carrying the checks' settings (read by `Executor`): the schema's
    path, or its text when the steps cannot read the file (Kubeflow)."""
    struct = struct_pb2.Struct()
    struct.update({"schema_path": "" if schema_text else schema_path, "schema_text": schema_text,
                   "label": None if label is None else {**dataclasses.asdict(label),
                                                        "positive_values": list(label.positive_values)}})
    config = example_gen_pb2.CustomConfig()
    config.custom_config.Pack(struct)
    return config


class Executor(csv_executor.Executor):
    """CsvExampleGen's executor, after a scan of every input file (see the module docstring)."""

    def Do(self, input_dict, output_dict, exec_properties):  # pylint: disable=invalid-name
        files = _input_files(exec_properties)
        rules, label = _settings(exec_properties)
        summary = check_csv_files(files, rules, label, opener=lambda path: fileio.open(path, "rb"))
        logging.info("CSV check passed: %d rows in %d file(s); label classes %s",
                     summary.total_rows, len(files), dict(summary.label_classes))
        return super().Do(input_dict, output_dict, exec_properties)


def csv_files(data_root: str) -> List[str]:
    """The `*.csv` files directly in `data_root`, sorted."""
    return sorted(fileio.glob(os.path.join(data_root, "*.csv")))


def csv_statistics(data_root: str, schema=None):
    """TFDV statistics of the CSV files in `data_root` after the same checks as ingestion (types from
    `schema` when given, else inferred). Raises InputDataError naming what is wrong."""
    import tensorflow_data_validation as tfdv

    files = csv_files(data_root)
    if not files:
        raise InputDataError(f"input data: {data_root}: holds no *.csv file")
    check_csv_files(files, rules_from_schema(schema) if schema is not None else {},
                    opener=lambda path: fileio.open(path, "rb"))
    from components import drift

    options = drift.stats_options(schema, infer_type_from_schema=schema is not None)
    return tfdv.generate_statistics_from_csv(os.path.join(data_root, "*.csv"), stats_options=options)
