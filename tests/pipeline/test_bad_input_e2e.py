"""Bad input never reaches training: each case gets one clear message naming file, column or rule, exit
status 2 (configuration) or 3 (data refused), no traceback, and the served model stays as it was.

One good run trains and pushes a model first; every bad case then runs the CLI against the same home, with
tracking off (this module asserts no MLflow record; the refusals' records are tests/pipeline/test_tracking_e2e.py's
and test_drift_e2e.py's). One case per path a refusal takes: ExampleGen's reading of the CSV (every kind of
unreadable value and file, message for message, is tests/components/ingest/test_csv_input.py's, through the same
reader), the data gate's schema and drift checks, and the two export formats named by their cause.
Configuration errors (exit status 2) are tests/pipeline/test_config.py's and tests/pipeline/cli/test_run_command.py's.
"""

import csv
import io
import os

import pytest

from tests import helpers

pytestmark = pytest.mark.e2e

FLAGS = ["--train-steps", "40", "--batch-size", "64", "--eval-every-steps", "20"]
UNTRACKED = ["--tracking", "off"]
DATA_REFUSED = 3


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A home whose serving directory holds one pushed model, and the good data it came from."""
    base = tmp_path_factory.mktemp("bad_input")
    good = helpers.write_taxi_sample(str(base / "good"), rows=1500)
    home = str(base / "home")
    first = helpers.run_cli("run", "--home", home, "--data-root", good, *FLAGS)
    assert first.returncode == 0, first.stderr[-3000:]
    serving = os.path.join(home, "serving")
    assert len(helpers.pushed_versions(serving, "taxi")) == 1
    return {"base": base, "good": good, "csv": os.path.join(good, "data.csv"), "home": home, "serving": serving}


def _set(column, value, every=1):
    def row_fn(i, row):
        if i % every == every - 1:
            row[column] = value
        return row

    return row_fn


def _pad(column, every):
    def row_fn(i, row):
        if i % every == 0 and row[column] == "Cash":
            row[column] = " Cash "
        return row

    return row_fn


def _european(served) -> bytes:
    """The good CSV as a spreadsheet with European settings exports it: ';' between fields, decimal commas."""
    with open(served["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    out = io.StringIO()
    csv.writer(out, delimiter=";").writerows([[v.replace(".", ",") for v in row] for row in rows])
    return out.getvalue().encode()


def _raw(folder, text: bytes, name: str = "data.csv") -> str:
    """`folder` holding one file `name` with `text`; returns the folder."""
    os.makedirs(folder)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(text)
    return folder


# Each case: (build the data folder -> extra CLI args, exit status, substrings the message must contain).
CASES = {
    "missing column": (
        lambda s, d: [
            "--data-root",
            helpers.rewrite_csv(s["csv"], d, columns_fn=lambda c: [x for x in c if x != "trip_miles"]),
        ],
        DATA_REFUSED,
        ["data gate:", "feature 'trip_miles': SCHEMA_MISSING_COLUMN"],
    ),
    "extra column": (
        lambda s, d: [
            "--data-root",
            helpers.rewrite_csv(s["csv"], d, _set("surge", "1.5"), columns_fn=lambda c: c + ["surge"]),
        ],
        DATA_REFUSED,
        ["data gate:", "feature 'surge': SCHEMA_NEW_COLUMN"],
    ),
    "string in a numeric column": (
        lambda s, d: ["--data-root", helpers.rewrite_csv(s["csv"], d, _set("fare", "twelve", every=700))],
        DATA_REFUSED,
        [
            "{d}/data.csv line 701, column 'fare': not a number: 'twelve' (schema type FLOAT) "
            "(2 rows in all; the first is shown)"
        ],
    ),
    "unseen category": (
        lambda s, d: ["--data-root", helpers.rewrite_csv(s["csv"], d, _set("payment_type", "Bitcoin", every=50))],
        DATA_REFUSED,
        ["data gate:", "feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES", "Bitcoin"],
    ),
    "European spreadsheet export": (
        lambda s, d: ["--data-root", _raw(d, _european(s))],
        DATA_REFUSED,
        [
            "{d}/data.csv: file format: its fields are separated by ';', not commas (a spreadsheet export with "
            "European settings: numbers there have decimal commas): export it with ',' as the field delimiter and "
            "'.' as the decimal mark"
        ],
    ),
    "categories padded with spaces": (
        lambda s, d: ["--data-root", helpers.rewrite_csv(s["csv"], d, _pad("payment_type", every=3))],
        DATA_REFUSED,
        [
            "split 'train', feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES: values missing from the "
            "schema's domain: ' Cash ' (",
            "is a known value with spaces around: trim the spaces in the data",
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_with_a_clear_message(served, case):
    build, status, expected = CASES[case]
    folder = str(served["base"] / case.replace(" ", "_"))
    args = build(served, folder)
    before = helpers.tree_snapshot(served["serving"])
    result = helpers.run_cli("run", "--home", served["home"], *args, *FLAGS, *UNTRACKED)
    assert result.returncode == status, (result.stdout[-2000:], result.stderr[-3000:])
    message = result.stderr
    for text in expected:
        assert text.format(d=folder) in message, message
    assert "Traceback" not in message and "Traceback" not in result.stdout
    if status == DATA_REFUSED:
        assert "nothing was" in message and f"serving directory untouched: {served['serving']}" in message
        assert "Transform" not in result.stdout  # nothing after the refusal ran
        assert "pushed:         no; the served model is untouched" in result.stdout
    # The model being served is untouched, file for file.
    assert helpers.tree_snapshot(served["serving"]) == before


def test_serving_data_is_checked_for_skew_and_the_serving_schema(served):
    # Serving requests carry no label; these pay by card only and include a payment type never seen.
    serving_data = helpers.rewrite_csv(
        served["csv"],
        str(served["base"] / "requests"),
        lambda i, row: {**row, "payment_type": "Mobile" if i == 0 else "Credit Card"},
        columns_fn=lambda c: [x for x in c if x != "tips"],
    )
    before = helpers.tree_snapshot(served["serving"])
    result = helpers.run_cli(
        "run",
        "--home",
        served["home"],
        "--data-root",
        served["good"],
        "--serving-data",
        serving_data,
        *FLAGS,
        *UNTRACKED,
    )
    assert result.returncode == DATA_REFUSED, result.stderr[-3000:]
    assert "split 'serving', feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES" in result.stderr
    assert (
        "split 'train vs. serving (skew)', feature 'payment_type': COMPARATOR_L_INFTY_HIGH: L-infinity distance 0."
    ) in result.stderr
    assert "> threshold 0.05 on " in result.stderr
    assert "Next: look at what changed" not in result.stderr  # skew is not answered by a new baseline
    assert "tips" not in result.stderr.split("serving directory untouched")[0]  # the label is not expected there
    assert helpers.tree_snapshot(served["serving"]) == before


def test_allowed_anomaly_types_let_the_run_through(served):
    # Runs last in this module: it trains and pushes a second model.
    folder = helpers.rewrite_csv(
        served["csv"], str(served["base"] / "allowed"), _set("payment_type", "Bitcoin", every=50)
    )
    result = helpers.run_cli(
        "run",
        "--home",
        served["home"],
        "--data-root",
        folder,
        *FLAGS,
        *UNTRACKED,
        "--allow-anomaly",
        "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "data gate:      passed" in result.stdout
    assert "drift vs. the last blessed model's data: 13 features compared" in result.stdout
    assert len(helpers.pushed_versions(served["serving"], "taxi")) == 2
