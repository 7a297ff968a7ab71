"""The CSV check names file, line, column and rule for each kind of bad input, and passes good files."""

import io

import pytest

from components import csv_input
from components.csv_input import ColumnRule, InputDataError
from components.features import LabelSpec

RULES = {"fare": ColumnRule("FLOAT", disallow_nan=True, disallow_inf=True), "tips": ColumnRule("FLOAT"),
         "hour": ColumnRule("INT"), "pay": ColumnRule("BYTES")}
LABEL = LabelSpec(name="big_tipper", column="tips", ratio_of="fare", greater_than=0.2)
HEADER = "fare,tips,hour,pay\n"


def _check(files, label=LABEL):
    """Runs the check over in-memory files {name: text or bytes}."""
    data = {name: content if isinstance(content, bytes) else content.encode() for name, content in files.items()}
    return csv_input.check_csv_files(list(data), RULES, label, opener=lambda name: io.BytesIO(data[name]))


def _error(files, label=LABEL) -> str:
    with pytest.raises(InputDataError) as err:
        _check(files, label)
    return str(err.value)


def test_good_files_pass_with_rows_and_label_classes():
    summary = _check({"a.csv": HEADER + "10,5,3,Cash\n10,0,4,Card\n", "b.csv": HEADER + '10.5,1,23,"Credit, Card"\n'})
    assert summary.rows == {"a.csv": 2, "b.csv": 1}
    assert summary.label_classes == {1: 1, 0: 2}


def test_multiline_quoted_field_is_one_record_and_later_lines_keep_their_numbers():
    message = _error({"m.csv": HEADER + '10,5,3,"Ca\nsh"\n10,0,4,Card\n1,2,x,y\n'})
    assert "m.csv line 5, column 'hour': not an integer: 'x' (schema type INT)" in message


@pytest.mark.parametrize("content,expected", [
    ("", "e.csv: empty file: no header row and no data"),
    (HEADER, "e.csv: no data rows: the file holds only a header"),
    (HEADER + "10,5,3,Cash,extra\n10,0,4\n10,1,2,a\n",
     "e.csv line 2: wrong number of fields: 5 fields, the header has 4 (2 rows in all; the first is shown)"),
    (HEADER + "10,5,3,Cash\nabc,5,3,Cash\n", "e.csv line 3, column 'fare': not a number: 'abc' (schema type FLOAT)"),
    (HEADER + "10,5,4.5,Cash\n", "e.csv line 2, column 'hour': not an integer: '4.5' (schema type INT)"),
    (HEADER + "nan,5,3,Cash\n", "e.csv line 2, column 'fare': NaN is not allowed: 'nan' "
                                "(schema: float_domain.disallow_nan)"),
    (HEADER + "10,5,3,Cash\n-inf,5,3,Cash\n", "e.csv line 3, column 'fare': an infinite value is not allowed: "
                                              "'-inf' (schema: float_domain.disallow_inf)"),
    (HEADER + '10,5,3,"Cash\n10,0,4,Card\n', "e.csv line 2: malformed CSV (quotes): a quoted field is never "
                                            "closed; the rest of the file was not read"),
    (HEADER + '10,5,3,"Ca"sh\n', "e.csv line 2: malformed CSV (quotes): ',' expected after '\"'"),
    (HEADER.encode() + b"10,5,3,Ca\xffsh\n10,0,4,Card\n",
     "e.csv line 2: bytes that are not UTF-8: b'\\xff' at byte 9 of the line"),
    ("fare,tips,fare,\n1,2,3,4\n", "e.csv line 1, column 'fare': header: the column name appears more than once"),
    (HEADER + "10,0,3,Cash\n10,1,4,Card\n", "all files, column 'tips': the label has one class only: "
                                            "'big_tipper' (tips > 0.2 x fare) is 0 in all 2 rows"),
    (HEADER + "10,,3,Cash\n10,,4,Card\n", "all files, column 'tips': label column is empty: no row has a value "
                                          "for 'tips'"),
])
def test_each_kind_of_bad_input_is_named(content, expected):
    message = _error({"e.csv": content})
    assert message.startswith("input data: ")
    assert "(nothing was ingested, trained or pushed)" in message
    assert expected in message


def test_an_open_quote_in_a_long_file_is_named_as_such():
    rows = "".join(f"{i},1,2,Cash\n" for i in range(30000))
    message = _error({"q.csv": HEADER + '10,5,3,"Cash\n' + rows})
    assert "q.csv line 2: malformed CSV (quotes): a quoted field is never closed (it runs on past 131,072 " \
           "characters); the rest of the file was not read" in message


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
    assert message.count("\n  - ") == csv_input.MAX_LISTED
    assert message.endswith("... and 5 more")
