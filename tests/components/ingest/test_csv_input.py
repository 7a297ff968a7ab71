"""The CSV check names file, line, column and rule for each kind of bad input, and passes good files."""

import csv
import gzip
import io

import pytest

from tfxflow.components.ingest import csv_check, csv_input
from tfxflow.components.ingest.csv_input import ColumnRule, InputDataError
from tfxflow.components.model.features import LabelSpec
from tfxflow.components.validation import folder_statistics

RULES = {
    "fare": ColumnRule("FLOAT", disallow_nan=True, disallow_inf=True),
    "tips": ColumnRule("FLOAT"),
    "hour": ColumnRule("INT"),
    "pay": ColumnRule("BYTES"),
}
LABEL = LabelSpec(name="big_tipper", column="tips", ratio_of="fare", greater_than=0.2)
HEADER = "fare,tips,hour,pay\n"


def _check(files, label=LABEL, rules=None):
    """Runs the check over in-memory files {name: text or bytes}."""
    data = {name: content if isinstance(content, bytes) else content.encode() for name, content in files.items()}
    return csv_check.check_csv_files(list(data), rules or RULES, label, opener=lambda name: io.BytesIO(data[name]))


def _error(files, label=LABEL, rules=None) -> str:
    with pytest.raises(InputDataError) as err:
        _check(files, label, rules)
    return str(err.value)


def test_good_files_pass_with_rows_and_label_classes():
    summary = _check({"a.csv": HEADER + "10,5,3,Cash\n10,0,4,Card\n", "b.csv": HEADER + '10.5,1,23,"Credit, Card"\n'})
    assert summary.rows == {"a.csv": 2, "b.csv": 1}
    assert summary.label_classes == {1: 1, 0: 2}


def test_multiline_quoted_field_is_one_record_and_later_lines_keep_their_numbers():
    message = _error({"m.csv": HEADER + '10,5,3,"Ca\nsh"\n10,0,4,Card\n1,2,x,y\n'})
    assert "m.csv line 5, column 'hour': not an integer: 'x' (schema type INT)" in message


@pytest.mark.parametrize(
    "content,expected",
    [
        ("", "e.csv: empty file: no header row and no data"),
        (HEADER, "e.csv: no data rows: the file holds only a header"),
        (
            HEADER + "10,5,3,Cash,extra\n10,0,4\n10,1,2,a\n",
            "e.csv line 2: wrong number of fields: 5 fields, the header has 4 (2 rows in all; the first is shown)",
        ),
        (
            HEADER + "10,5,3,Cash\nabc,5,3,Cash\n",
            "e.csv line 3, column 'fare': not a number: 'abc' (schema type FLOAT)",
        ),
        (HEADER + "10,5,4.5,Cash\n", "e.csv line 2, column 'hour': not an integer: '4.5' (schema type INT)"),
        (
            HEADER + "nan,5,3,Cash\n",
            "e.csv line 2, column 'fare': NaN is not allowed: 'nan' (schema: float_domain.disallow_nan)",
        ),
        (
            HEADER + "10,5,3,Cash\n-inf,5,3,Cash\n",
            "e.csv line 3, column 'fare': an infinite value is not allowed: '-inf' (schema: float_domain.disallow_inf)",
        ),
        (
            HEADER + '10,5,3,"Cash\n10,0,4,Card\n',
            "e.csv line 2: malformed CSV (quotes): a quoted field is never closed; the rest of the file was not read",
        ),
        (HEADER + '10,5,3,"Ca"sh\n', "e.csv line 2: malformed CSV (quotes): ',' expected after '\"'"),
        (
            HEADER.encode() + b"10,5,3,Ca\xffsh\n10,0,4,Card\n",
            "e.csv line 2: bytes that are not UTF-8: b'\\xff' at byte 9 of the line",
        ),
        ("fare,tips,fare,\n1,2,3,4\n", "e.csv line 1, column 'fare': header: the column name appears more than once"),
        (
            HEADER + "10,0,3,Cash\n10,1,4,Card\n",
            "all files, column 'tips': the label has one class only: "
            "'big_tipper' (tips > 0.2 x fare) is 0 in all 2 rows",
        ),
        (
            HEADER + "10,,3,Cash\n10,,4,Card\n",
            "all files, column 'tips': label column is empty: no row has a value for 'tips'",
        ),
    ],
)
def test_each_kind_of_bad_input_is_named(content, expected):
    message = _error({"e.csv": content})
    assert message.startswith("input data: ")
    assert "(nothing was ingested, trained or pushed)" in message
    assert expected in message


def test_an_open_quote_in_a_long_file_is_named_as_such():
    rows = "".join(f"{i},1,2,Cash\n" for i in range(30000))
    message = _error({"q.csv": HEADER + '10,5,3,"Cash\n' + rows})
    assert (
        "q.csv line 2: malformed CSV (quotes): a quoted field is never closed (it runs on past 131,072 "
        "characters); the rest of the file was not read" in message
    )


def test_nan_passes_where_the_schema_allows_it():
    assert _check({"n.csv": HEADER + "10,nan,3,Cash\n10,5,4,Card\n"}).rows == {"n.csv": 2}


def test_files_with_different_headers_name_both_files_and_the_columns():
    message = _error({"a.csv": HEADER + "10,5,3,Cash\n", "b.csv": "fare,tips,hour\n10,0,4\n"})
    assert "b.csv line 1: header differs from the first file's: a.csv; missing ['pay'], extra []" in message


def test_label_rule_with_positive_values_and_one_class():
    label = LabelSpec(name="default", column="pay", positive_values=("Cash",))
    message = _error({"p.csv": HEADER + "10,5,3,Card\n10,0,4,Card\n"}, label)
    assert "'default' (pay in ['Cash']) is 0 in all 2 rows" in message


def test_long_reports_are_cut_with_a_count():
    bad = HEADER + "".join(f"{i},x,{i},a,{'b' * (i % 2)}\n" for i in range(3))
    files = {f"f{i}.csv": bad for i in range(25)}
    message = _error(files)
    assert message.count("\n  - ") == csv_check.MAX_LISTED
    assert message.endswith("... and 5 more")


# --- streaming ingestion: the same refusals, the same examples and splits as TFX's CsvExampleGen ------------


def _cut_gzip() -> bytes:
    """A gzip-compressed CSV file cut off half-way, as an interrupted transfer leaves it."""
    rows = "".join(f"{i % 97}.5,{i % 7},{i % 24},Cash\n" for i in range(20000))
    data = gzip.compress((HEADER + rows).encode(), mtime=0)
    return data[: len(data) // 2]


def _xz(data: bytes) -> bytes:
    import lzma

    return lzma.compress(data)


def _zstd(data: bytes) -> bytes:
    """A Zstandard frame, as the `zstd` tool writes it (Arrow's codec writes the standard format)."""
    import pyarrow as pa

    return pa.compress(data, codec="zstd", asbytes=True)


NUL_WHY = "(no CSV export writes one: binary data or a damaged copy; remove it)"


def _ingest(tmp_path, files, label=LABEL, rules=None):
    paths = []
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths.append(str(path))
    out = tmp_path / "examples"
    dirs = {"train": str(out / "Split-train"), "eval": str(out / "Split-eval")}
    return csv_input.ingest(paths, dirs, [3, 1], rules or RULES, label), dirs


@pytest.mark.parametrize(
    "content,expected",
    [
        (
            HEADER + "10,5,3,Cash,extra\n10,0,4\n10,1,2,a\n",
            "e.csv line 2: wrong number of fields: 5 fields, the header has 4 (2 rows in all; the first is shown)",
        ),
        (
            HEADER + "10,5,3,Cash\nabc,5,3,Cash\n",
            "e.csv line 3, column 'fare': not a number: 'abc' (schema type FLOAT)",
        ),
        (HEADER + "10,5,3,Cash\n-inf,5,3,Cash\n", "e.csv line 3, column 'fare': an infinite value is not allowed"),
        (HEADER + '10,5,3,"Cash\n10,0,4,Card\n', "e.csv line 2: malformed CSV (quotes): a quoted field is never "),
        (HEADER.encode() + b"10,5,3,Ca\xffsh\n10,0,4,Card\n", "e.csv line 2: bytes that are not UTF-8"),
        ("fare,tips,fare,\n1,2,3,4\n", "e.csv line 1, column 'fare': header: the column name appears more than once"),
        ("", "e.csv: empty file"),
        (HEADER, "e.csv: no data rows"),
        (HEADER + "10,0,3,Cash\n10,1,4,Card\n", "the label has one class only"),
        # What exports and transfers produce: the cause named, and what to do.
        (
            "fare;tips;hour;pay\n10,5;5;3;Cash\n",
            "e.csv: file format: its fields are separated by ';', not commas (a spreadsheet export with European "
            "settings: numbers there have decimal commas): export it with ',' as the field delimiter and '.' as "
            "the decimal mark",
        ),
        (
            "fare\ttips\thour\tpay\n10\t5\t3\tCash\n",
            "e.csv: file format: its fields are separated by tabs, not commas: export it with ',' as the field "
            "delimiter",
        ),
        (
            ("\ufeff" + HEADER.replace(",", "\t") + "10\t5\t3\tCash\n").encode("utf-16-le"),
            "e.csv: file format: UTF-16 text, not UTF-8 (Excel's 'Unicode Text' export, whose fields are separated "
            "by tabs): save it as 'CSV UTF-8 (Comma delimited)', or convert it with `iconv -f UTF-16 -t UTF-8`",
        ),
        (b"PK\x03\x04\x14\x00\x06\x00" + bytes(200), "e.csv: file format: a ZIP archive, not CSV text"),
        (b"BZh91AY&SY" + bytes(100), "e.csv: file format: compressed with bzip2, which is not read (gzip is)"),
        (
            _cut_gzip(),
            "damaged gzip data: the compressed data ends early (a cut-off transfer or copy?); the rest of the file "
            "was not read",
        ),
        (
            "fare|tips|hour|pay\n10|5|3|Cash\n",
            "e.csv: file format: its fields are separated by '|', not commas: export it with ',' as the field "
            "delimiter",
        ),
        (
            _xz((HEADER + "10,5,3,Cash\n10,0,4,Card\n").encode()),
            "e.csv: file format: compressed with xz, which is not read (gzip is): decompress it, or compress it "
            "with gzip",
        ),
        (
            _zstd((HEADER + "10,5,3,Cash\n10,0,4,Card\n").encode()),
            "e.csv: file format: compressed with zstd, which is not read (gzip is): decompress it, or compress it "
            "with gzip",
        ),
        # Files joined with their headers: the second header is named as such, not as names in number columns.
        (
            HEADER + "10,5,3,Cash\n" + HEADER + "10,0,4,Card\n",
            f"e.csv line 3: header repeated: {csv_check.REPEATED_HEADER}",
        ),
        # A NUL byte: Arrow reads one into a text value; Python's csv module stops at one before 3.11.
        (
            HEADER + "10,5,3,Cash\n10,0,4,Ca\x00rd\n11,1,4,\x00\n",
            f"e.csv line 3, column 'pay': NUL byte: 'Ca\\x00rd' {NUL_WHY} (2 rows in all; the first is shown)",
        ),
        (HEADER + "10,5,3,Cash\n1\x000,0,4,Card\n", f"e.csv line 3, column 'fare': NUL byte: '1\\x000' {NUL_WHY}"),
        (
            HEADER + '10,5,3,"Ca\nsh\x00"\n10,0,4,Card\n',
            f"e.csv line 2, column 'pay': NUL byte: 'Ca\\nsh\\x00' {NUL_WHY}",
        ),
        (
            HEADER + "10,0,4,Card\n10,5,3," + "x" * 100 + "\x00" + "y" * 100 + "\n",
            f"e.csv line 3, column 'pay': NUL byte: ...'{'x' * 20}\\x00{'y' * 19}'... {NUL_WHY}",
        ),
        (
            HEADER + "10,5,3,Cash,x\x00,\x00\n10,0,4,Card\n",
            "input data: 1 problem (nothing was ingested, trained or pushed):\n"
            f"  - e.csv line 2: NUL byte: 'x\\x00' {NUL_WHY}",
        ),
        (
            "fare,tips,hour,pa\x00y\n10,5,3,Cash\n10,0,4,Card\n",
            f"e.csv line 1: header: the name of column 4 holds a NUL byte: 'pa\\x00y' {NUL_WHY}",
        ),
    ],
)
def test_ingestion_refuses_what_the_scan_refuses_and_keeps_nothing(tmp_path, content, expected):
    """Each content is refused by both paths with the same report: the line-by-line scan, and the streaming
    ingestion the pipeline runs (which hands over to the scan for the exact words once it finds a problem)."""
    import os

    scanned = _error({"e.csv": content})
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path, {"e.csv": content})
    assert expected in scanned
    assert str(err.value).replace(f"{tmp_path}{os.sep}", "") == scanned
    assert not [p for p in (tmp_path / "examples").rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    "rules,content,line",
    [
        # All text: every value of a header line is a valid value; a later header in a later block too.
        ({"text": ColumnRule("BYTES"), "intent": ColumnRule("BYTES")}, "", 2),
        ({"text": ColumnRule("BYTES"), "intent": ColumnRule("BYTES")}, "hi,greet\n" * 3000, 3002),
        # A number column whose name is a number reads the repeated header as a number.
        ({"2024": ColumnRule("INT"), "pay": ColumnRule("BYTES")}, "2023,Cash\n", 3),
    ],
    ids=["all-text", "all-text-later-block", "number-named-column"],
)
def test_a_repeated_header_is_refused_by_both_paths_where_its_names_are_valid_values(
    tmp_path, monkeypatch, rules, content, line
):
    """`content`: the rows between the header and its repeat at `line`."""
    monkeypatch.setattr(csv_input, "BLOCK_BYTES", 1 << 10)
    header = ",".join(rules) + "\n"
    data = header + content + header + ",".join(["2023" if c == "2024" else "bye" for c in rules]) + "\n"
    files = {"t.csv": data}
    scanned = _error(files, label=None, rules=rules)
    assert f"t.csv line {line:,}: header repeated: {csv_check.REPEATED_HEADER}" in scanned
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path, files, label=None, rules=rules)
    assert str(err.value).replace(f"{tmp_path}/", "") == scanned
    assert not [p for p in (tmp_path / "examples").rglob("*") if p.is_file()]


def test_a_row_like_the_header_but_in_one_column_is_data(tmp_path):
    rules = {"text": ColumnRule("BYTES"), "intent": ColumnRule("BYTES")}
    files = {"t.csv": "text,intent\ntext,greet\nhi,intent\n"}
    assert _check(files, label=None, rules=rules).rows == {"t.csv": 2}
    result, _ = _ingest(tmp_path, files, label=None, rules=rules)
    assert result.total_read == 2


def test_a_nul_byte_in_a_later_block_is_refused_with_its_line(tmp_path, monkeypatch):
    """Arrow reads a file in blocks: a NUL byte in any of them is found, and named by the scan."""
    monkeypatch.setattr(csv_input, "BLOCK_BYTES", 1 << 10)
    rows = "".join(f"{10 + i % 7},{i % 5},{i % 24},Cash\n" for i in range(2000))
    files = {"b.csv": HEADER + rows + "10,0,4,Ca\x00rd\n"}
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path, files)
    assert f"b.csv line 2,002, column 'pay': NUL byte: 'Ca\\x00rd' {NUL_WHY}" in str(err.value)
    assert str(err.value).replace(f"{tmp_path}/", "") == _error(files)
    assert not [p for p in (tmp_path / "examples").rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    "row,expected",
    [
        ("10,5,+3,Cash", "line 2, column 'hour': not an integer: '+3'"),
        ("10,5,1_000,Cash", "line 2, column 'hour': not an integer: '1_000'"),
        ("10,5,99999999999999999999,Cash", "line 2, column 'hour': not an integer"),
        ("1_0.5,5,3,Cash", "line 2, column 'fare': not a number: '1_0.5'"),
    ],
)
def test_values_python_would_read_but_the_reader_does_not_are_named_with_their_line(tmp_path, row, expected):
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path, {"p.csv": HEADER + row + "\n10,0,4,Card\n"})
    assert "p.csv " + expected in str(err.value)


def test_a_number_with_a_plus_sign_is_read_exactly_where_arrow_reads_it(tmp_path):
    """pyarrow 18 (TFX 1.21's lane) reads "+10" as 10.0, pyarrow 10 refuses it: the scan's rule is Arrow's."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    try:
        pa_csv.read_csv(
            io.BytesIO(b"x\n+10\n"), convert_options=pa_csv.ConvertOptions(column_types={"x": pa.float32()})
        )
        arrow_reads_it = True
    except pa.ArrowInvalid:
        arrow_reads_it = False
    row = "+10,5,3,Cash"
    if not arrow_reads_it:
        with pytest.raises(InputDataError) as err:
            _ingest(tmp_path, {"p.csv": HEADER + row + "\n10,0,4,Card\n"})
        assert "p.csv line 2, column 'fare': not a number: '+10'" in str(err.value)
        return
    import tensorflow as tf

    _, dirs = _ingest(tmp_path, {"p.csv": HEADER + row + "\n11,0,4,Card\n"})
    fares = sorted(
        tf.train.Example.FromString(record.numpy()).features.feature["fare"].float_list.value[0]
        for directory in dirs.values()
        for record in tf.data.TFRecordDataset(tf.io.gfile.glob(directory + "/*.gz"), compression_type="GZIP")
    )
    assert fares == [10.0, 11.0]
    # The scan (which names what ingestion refuses) takes it too: the error is the other row's alone.
    (tmp_path / "again").mkdir()
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path / "again", {"p.csv": HEADER + row + "\n10,0,+4,Card\n"})
    assert "line 3, column 'hour': not an integer: '+4'" in str(err.value) and "fare" not in str(err.value)


def test_numbers_the_reader_takes_pass_with_their_values(tmp_path):
    import math

    import tensorflow as tf

    result, dirs = _ingest(tmp_path, {"n.csv": HEADER + " 10 ,5,3 ,Cash\n1e1,0,-4,Card\n.5,Infinity,4,Card\n"})
    assert result.total_read == 3
    rows = []
    for directory in dirs.values():
        for record in tf.data.TFRecordDataset(tf.io.gfile.glob(directory + "/*.gz"), compression_type="GZIP"):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            rows.append(
                (
                    feature["fare"].float_list.value[0],
                    feature["tips"].float_list.value[0],
                    feature["hour"].int64_list.value[0],
                    feature["pay"].bytes_list.value[0].decode(),
                )
            )
    assert sorted(rows) == [(0.5, math.inf, 4, "Card"), (10.0, 0.0, -4, "Card"), (10.0, 5.0, 3, "Cash")]


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    import tensorflow as tf

    result, dirs = _ingest(tmp_path, {"excel.csv": b"\xef\xbb\xbf" + (HEADER + "10,5,3,Cash\n10,0,4,Card\n").encode()})
    assert result.total_read == 2
    records = [
        r.numpy()
        for d in dirs.values()
        for r in tf.data.TFRecordDataset(tf.io.gfile.glob(d + "/*.gz"), compression_type="GZIP")
    ]
    keys = {k for r in records for k in tf.train.Example.FromString(r).features.feature}
    assert keys == {"fare", "tips", "hour", "pay"}
    # The line-by-line scan (the exact report of a bad file) reads it the same way.
    assert _check({"excel.csv": b"\xef\xbb\xbf" + (HEADER + "10,5,3,Cash\n10,0,4,Card\n").encode()}).header == (
        "fare",
        "tips",
        "hour",
        "pay",
    )


def test_counts_shards_and_label_classes_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_input, "SHARD_ROWS", 40)
    rows = "".join(f"{10 + i % 7},{i % 5},{i % 24},{'Cash' if i % 3 else 'Card'}\n" for i in range(300))
    first_100 = "".join(rows.splitlines(keepends=True)[:100])
    result, dirs = _ingest(tmp_path, {"a.csv": HEADER + rows, "b.csv": HEADER + first_100})
    assert result.rows_read == {"a.csv": 300, "b.csv": 100}
    assert sum(result.split_rows.values()) == result.total_read
    assert 0.6 < result.split_rows["train"] / result.total_read < 0.9  # 3 of 4 hash buckets
    for split in dirs:
        names = sorted(p.name for p in (tmp_path / "examples" / f"Split-{split}").iterdir())
        assert len(names) == result.split_files[split] >= 2
        assert names[0] == f"data_tfrecord-00000-of-{len(names):05d}.gz"
    assert set(result.label_classes) == {"0", "1"}
    assert sum(result.label_classes.values()) == result.total_read


def test_a_split_that_gets_no_row_has_one_empty_file(tmp_path):
    import tensorflow as tf

    result, dirs = _ingest(tmp_path, {"one.csv": HEADER + "10,5,3,Cash\n"}, label=None)
    assert sorted(result.split_rows.values()) == [0, 1]
    for split, directory in dirs.items():
        files = tf.io.gfile.glob(directory + "/*")
        assert len(files) == 1 and files[0].endswith("data_tfrecord-00000-of-00001.gz")
        records = list(tf.data.TFRecordDataset(files, compression_type="GZIP"))
        assert len(records) == result.split_rows[split]


def test_a_text_label_column_is_counted_by_the_scans_rule(tmp_path):
    label = LabelSpec(name="cash", column="pay", positive_values=("Cash",))
    rules = dict(RULES, pay=ColumnRule("BYTES"))
    result, _ = _ingest(tmp_path, {"t.csv": HEADER + "10,5,3,Cash\n10,0,4,Card\n11,1,4,Cash\n"}, label, rules)
    assert result.label_classes == {"0": 1, "1": 2}
    ratio = LabelSpec(name="big", column="tips", ratio_of="pay", greater_than=0.2)  # a text ratio column
    (tmp_path / "r").mkdir()
    result, _ = _ingest(tmp_path / "r", {"t.csv": HEADER + "10,5,3,2\n10,0,4,x\n"}, ratio, rules)
    assert result.label_classes == {"0": 1, "1": 1}


def _taxi_rules():
    from tfxflow.components.validation.schema import parse_schema
    from tfxflow.pipeline.inputs import load_schema_and_features

    schema_path, features = load_schema_and_features("taxi", None, None)
    with open(schema_path, encoding="utf-8") as f:
        return csv_check.rules_from_schema(parse_schema(f.read())), features.label


def _examples(root, split):
    import collections
    import os

    import tensorflow as tf

    files = tf.io.gfile.glob(os.path.join(root, f"Split-{split}", "*.gz"))
    return collections.Counter(
        tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
        for r in tf.data.TFRecordDataset(files, compression_type="GZIP")
    )


@pytest.fixture(scope="module")
def tfx_taxi_examples(tmp_path_factory):
    """TFX's own CsvExampleGen executor (Beam, type inference) on the bundled taxi CSV: {split: examples}."""
    import json

    from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts

    from tfxflow.pipeline.inputs import bundled_taxi_data_root

    theirs = standard_artifacts.Examples()
    theirs.uri = str(tmp_path_factory.mktemp("tfx"))
    tfx_csv.Executor().Do(
        {},
        {"examples": [theirs]},
        {
            "input_base": bundled_taxi_data_root(),
            "input_config": json.dumps({"splits": [{"name": "single_split", "pattern": "*.csv"}]}),
            "output_config": json.dumps(
                {
                    "split_config": {
                        "splits": [{"name": "train", "hash_buckets": 3}, {"name": "eval", "hash_buckets": 1}]
                    }
                }
            ),
            "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        },
    )
    return {split: _examples(theirs.uri, split) for split in ("train", "eval")}


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


# How exports and transfers deliver the same table: (file name, bytes of the taxi CSV -> bytes).
DELIVERED = {
    "plain": ("data.csv", lambda data: data),
    "gzip-compressed .csv.gz": ("data.csv.gz", _gzip),
    "gzip data in a file named .csv": ("data.csv", _gzip),
    "lines ending in CR only (classic Mac OS)": ("data.csv", lambda data: data.replace(b"\n", b"\r")),
    "CRLF lines, gzip-compressed": ("data.csv.gz", lambda data: _gzip(data.replace(b"\n", b"\r\n"))),
}


@pytest.mark.integration
@pytest.mark.parametrize("delivered", list(DELIVERED))
def test_examples_and_splits_are_those_of_tfx_csv_example_gen_on_the_taxi_data(tmp_path, tfx_taxi_examples, delivered):
    """The streaming ingestion of the taxi CSV, however it was delivered, writes the tf.Examples TFX's
    CsvExampleGen writes from the plain file, in the same splits; the line-by-line scan counts the same rows."""
    import glob
    import os

    from tfxflow.pipeline.inputs import bundled_taxi_data_root

    name, transform = DELIVERED[delivered]
    (source,) = glob.glob(os.path.join(bundled_taxi_data_root(), "*.csv"))
    with open(source, "rb") as f:
        data = transform(f.read())
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / name).write_bytes(data)
    rules, label = _taxi_rules()
    ours = str(tmp_path / "ours")
    files = csv_check.csv_files(str(folder))
    assert files == [str(folder / name)]
    result = csv_input.ingest(files, {s: f"{ours}/Split-{s}" for s in ("train", "eval")}, [3, 1], rules, label)
    for split in ("train", "eval"):
        got = _examples(ours, split)
        assert sum(got.values()) == result.split_rows[split] > 1000
        assert got == tfx_taxi_examples[split], split
    assert csv_check.check_csv_files(files, rules, label).total_rows == result.total_read


@pytest.mark.integration
@pytest.mark.parametrize("workers", [2, 3])
def test_a_file_per_training_worker_holds_the_examples_tfx_writes(tmp_path, tfx_taxi_examples, workers):
    """With several training workers each split is written in a file per worker (tf.data's FILE sharding then
    gives each its own), holding together what TFX's CsvExampleGen writes, in rows as even as a division."""
    import glob
    import os

    import tensorflow as tf

    from tfxflow.pipeline.inputs import bundled_taxi_data_root

    files = glob.glob(os.path.join(bundled_taxi_data_root(), "*.csv"))
    rules, label = _taxi_rules()
    ours = str(tmp_path / "ours")
    result = csv_input.ingest(
        files, {s: f"{ours}/Split-{s}" for s in ("train", "eval")}, [3, 1], rules, label, min_files=workers
    )
    for split in ("train", "eval"):
        written = sorted(glob.glob(f"{ours}/Split-{split}/*.gz"))
        assert [os.path.basename(f) for f in written] == [
            f"data_tfrecord-{i:05d}-of-{workers:05d}.gz" for i in range(workers)
        ]
        assert result.split_files[split] == workers
        assert _examples(ours, split) == tfx_taxi_examples[split], split
        rows = [sum(1 for _ in tf.data.TFRecordDataset(f, compression_type="GZIP")) for f in written]
        assert sum(rows) == result.split_rows[split] and max(rows) - min(rows) <= 1, rows


@pytest.mark.integration
def test_statistics_of_a_folder_read_the_header_without_a_byte_order_mark(tmp_path):
    """Serving-data statistics and `infer-schema` read as ingestion does: a byte-order mark, gzip data and lines
    that end in CR only included."""
    from tfxflow.components.validation.schema import parse_schema

    (tmp_path / "a.csv").write_bytes(b"\xef\xbb\xbf" + (HEADER + "10,5,3,Cash\n12,0,4,Card\n").encode())
    (tmp_path / "b.csv").write_text(HEADER + "11,1,5,Cash\n")
    (tmp_path / "c.csv.gz").write_bytes(gzip.compress((HEADER + "13,2,6,Card\n").encode()))
    (tmp_path / "d.csv").write_bytes((HEADER + "14,3,7,Card\n15,3,8,Card\n").replace("\n", "\r").encode())
    schema = parse_schema(
        'feature { name: "fare" type: FLOAT } feature { name: "tips" type: FLOAT } '
        'feature { name: "hour" type: INT } feature { name: "pay" type: BYTES }'
    )
    statistics = folder_statistics.csv_statistics(str(tmp_path), schema).datasets[0]
    assert statistics.num_examples == 6
    assert sorted(f.path.step[0] for f in statistics.features) == ["fare", "hour", "pay", "tips"]


MULTILINE = (
    'text,category\r\n"Hello,\r\nmy card was charged twice",billing\r\n'
    '"He said ""it broke""\nand left\n\nagain",support\r\n'
    "plain line,support\r\n"
    '"",billing\r\n'
    'a 5\'10" shelf says "hi",support\r\n'  # quotes inside an unquoted value are characters
    '"line one\nline two",net\r\n'  # a line break alone: the record quotes it again
)


def test_records_are_those_of_pythons_csv_reader_with_line_breaks_inside():
    records = list(csv_check.csv_records(io.BytesIO(MULTILINE.encode())))
    theirs = list(csv.reader(io.StringIO(MULTILINE, newline="")))[1:]
    assert [next(csv.reader([r])) for r in records] == theirs
    assert theirs[1] == ['He said "it broke"\nand left\n\nagain', "support"]


@pytest.mark.integration
def test_statistics_count_a_value_over_lines_as_one_row(tmp_path):
    (tmp_path / "t.csv").write_bytes(MULTILINE.encode())
    statistics = folder_statistics.csv_statistics(str(tmp_path)).datasets[0]
    assert statistics.num_examples == 6
    text = next(f for f in statistics.features if f.path.step[0] == "text")
    values = [r[0] for r in csv.reader(io.StringIO(MULTILINE, newline=""))][1:]
    # TFDV's string statistics over the values Python's csv module reads (the empty one is missing)
    assert text.string_stats.avg_length == pytest.approx(sum(map(len, values)) / 5)
    assert text.string_stats.common_stats.num_non_missing == 5


def test_a_quoted_value_over_two_lines_is_one_value(tmp_path):
    import tensorflow as tf

    result, dirs = _ingest(tmp_path, {"m.csv": HEADER + '10,5,3,"Ca\nsh"\n10,0,4,Card\n'})
    assert result.total_read == 2
    values = {
        tf.train.Example.FromString(r.numpy()).features.feature["pay"].bytes_list.value[0]
        for d in dirs.values()
        for r in tf.data.TFRecordDataset(tf.io.gfile.glob(d + "/*"), compression_type="GZIP")
    }
    assert values == {b"Ca\nsh", b"Card"}


PAY = LabelSpec(name="pay_label", column="pay", task="multiclass", classes=("Cash", "Card"))
FARE = LabelSpec(name="fare_label", column="fare", task="regression")


def _both_paths(tmp_path, files, label):
    """The refusal of the line-by-line scan and of the streaming ingestion (which must say the same)."""
    scanned = _error(files, label)
    with pytest.raises(InputDataError) as err:
        _ingest(tmp_path, files, label)
    return scanned, str(err.value)


def test_a_multiclass_label_counts_its_classes_as_text_on_both_paths(tmp_path):
    files = {"m.csv": HEADER + "10,5,3,Cash\n10,0,4,Card\n11,1,4,Cash\n"}
    assert _check(files, PAY).label_classes == {"Cash": 2, "Card": 1}
    result, _ = _ingest(tmp_path, files, PAY)
    assert result.label_classes == {"Card": 1, "Cash": 2}
    hours = LabelSpec(name="hour_label", column="hour", task="multiclass", classes=("3", "4"))
    assert _check(files, hours).label_classes == {"3": 1, "4": 2}  # integer classes as their text


def test_multiclass_values_outside_the_listed_classes_are_named_with_their_rows(tmp_path):
    files = {"m.csv": HEADER + "10,5,3,Cash\n10,0,4,Pcard\n11,1,4,Cash\n12,1,4,Pcard\n12,1,4,Dispute\n"}
    for message in _both_paths(tmp_path, files, PAY):
        assert (
            "all files, column 'pay': label values not in label.classes: 'Pcard' (2 rows), 'Dispute' (1 rows); "
            "the first at "
        ) in message
        assert (
            "m.csv line 3; the feature config lists ['Cash', 'Card']: add them there, or remove those rows" in message
        )


def test_an_empty_multiclass_or_regression_label_is_refused_with_its_line(tmp_path):
    files = {"m.csv": HEADER + "10,5,3,Cash\n10,0,4,\n11,1,4,Cash\n"}
    for message in _both_paths(tmp_path, files, PAY):
        assert "m.csv line 3, column 'pay': label is empty: a multiclass label needs a class in every row" in message
    (tmp_path / "r").mkdir()
    files = {"r.csv": HEADER + "10,5,3,Cash\n,0,4,Card\n"}
    for message in _both_paths(tmp_path / "r", files, FARE):
        assert "r.csv line 3, column 'fare': label is empty: a regression label needs a number in every row" in message


def test_a_regression_label_that_cannot_be_learned_is_refused(tmp_path):
    constant = {"c.csv": HEADER + "10,5,3,Cash\n10,0,4,Card\n10,1,4,Cash\n"}
    for message in _both_paths(tmp_path, constant, FARE):
        assert "column 'fare': the label has one value only: 'fare' is 10 in all 3 rows" in message
    (tmp_path / "i").mkdir()
    rules = dict(RULES, fare=ColumnRule("FLOAT"))
    infinite = {"i.csv": HEADER + "10,5,3,Cash\ninf,0,4,Card\n"}
    message = _error(infinite, FARE)
    assert "i.csv line 3, column 'fare': label is not a finite number: inf" in message
    logged = LabelSpec(name="fare_label", column="fare", task="regression", transform="log1p")
    (tmp_path / "l").mkdir()
    negative = {"l.csv": HEADER + "10,5,3,Cash\n-1,0,4,Card\n"}
    with pytest.raises(
        InputDataError,
        match="l.csv line 3, column 'fare': label out of range for label.transform log1p: -1.0: must be > -1",
    ):
        _ingest(tmp_path / "l", negative, logged, rules)


def test_a_regression_label_records_its_range(tmp_path):
    result, _ = _ingest(tmp_path, {"r.csv": HEADER + "10,5,3,Cash\n12.5,0,4,Card\n7,1,4,Cash\n"}, FARE)
    assert result.label_range == (7.0, 12.5) and result.to_dict()["label_range"] == [7.0, 12.5]


def test_a_class_only_the_eval_split_holds_is_refused_when_classes_are_not_listed(tmp_path):
    """Without label.classes the classes are the training split's vocabulary: a class only the eval split holds
    would have no index. Rows go to a split by a hash of their bytes (3 of 4 buckets: train)."""
    unlisted = LabelSpec(name="pay_label", column="pay", task="multiclass")
    rows = "".join(f"{10 + i},{i % 5},{i % 24},{'Cash' if i % 2 else 'Card'}\n" for i in range(40))
    result, dirs = _ingest(tmp_path, {"a.csv": HEADER + rows}, unlisted)
    assert result.label_classes == {"Card": 20, "Cash": 20}
    # One row of a new class, in a split decided by its hash: refused exactly when it falls in eval.
    for fare in range(1000, 1040):
        (tmp_path / str(fare)).mkdir()
        files = {"a.csv": HEADER + rows + f"{fare},1,1,Dispute\n"}
        try:
            result, dirs = _ingest(tmp_path / str(fare), files, unlisted)
        except InputDataError as err:
            assert "column 'pay': label classes only in the eval split: 'Dispute' (1 rows)" in str(err)
            assert "list every class in the feature config's label.classes" in str(err)
            break
        assert result.label_classes["Dispute"] == 1  # it fell in train: known to the vocabulary
    else:
        pytest.fail("no row of the new class fell in the eval split")
    listed = LabelSpec(name="pay_label", column="pay", task="multiclass", classes=("Cash", "Card", "Dispute"))
    (tmp_path / "listed").mkdir()
    result, _ = _ingest(tmp_path / "listed", files, listed)
    assert result.label_classes["Dispute"] == 1  # listed: known and scored wherever it falls
