"""`column_values` reads a column's first rows only, a batch at a time, and what is drafted or printed from
them says they are the first rows."""

import collections
import csv

import pyarrow.csv as pa_csv
import pytest

from tfxflow.components.model import text_lengths
from tfxflow.pipeline.tools import infer_schema as schema_tool

ROWS = 1000


def _message(i):
    return f"order {i} is late" + ("\nplease help" if i % 7 == 0 else "")


def _row(i):
    """A message (every 7th over two lines, every 3rd the one of the row before, every 11th empty) and a label
    of 3 values."""
    message = "" if i % 11 == 0 else _message(i - 1 if i % 3 == 0 else i)
    return [message, ("spam", "ham", "eggs")[i % 3]]


@pytest.fixture()
def data(tmp_path):
    """Two CSV files of ROWS rows in all, and the rows as Python's csv module reads them back."""
    rows = [_row(i) for i in range(ROWS)]
    for name, part in (("a.csv", rows[:300]), ("b.csv", rows[300:])):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["message", "label"])
            writer.writerows(part)
    read = []
    for name in ("a.csv", "b.csv"):
        with open(tmp_path / name, newline="", encoding="utf-8") as f:
            read += list(csv.reader(f))[1:]
    assert read == rows and sum("\n" in m for m, _ in rows) > 50
    return str(tmp_path), rows


@pytest.fixture()
def read_rows(monkeypatch):
    """[rows of each batch the streaming reader gave], its blocks small enough to stop between batches."""
    batches = []
    opened = pa_csv.open_csv

    class Counted:
        def __init__(self, reader):
            self.reader = reader

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.reader.__exit__(*exc)

        def __iter__(self):
            for batch in self.reader:
                batches.append(batch.num_rows)
                yield batch

    monkeypatch.setattr(pa_csv, "open_csv", lambda *args, **kwargs: Counted(opened(*args, **kwargs)))
    monkeypatch.setattr(schema_tool, "_BLOCK_BYTES", 1024)
    return batches


def _first(rows, column, n):
    cells = [row[column] for row in rows if row[column]]
    return collections.Counter(cells[:n])


def test_a_column_is_read_only_to_the_bound(monkeypatch, data, read_rows):
    data_root, rows = data
    monkeypatch.setattr(schema_tool, "MAX_VALUE_ROWS", 100)
    counts = schema_tool.column_values(data_root, "message")
    expected = _first(rows, 0, 100)
    assert counts == expected and list(counts) == list(expected)  # counts and first-seen order
    assert counts.bounded and sum(counts.values()) == 100
    assert any("\n" in value for value in counts) and max(counts.values()) == 2
    # The rows up to the 100th value (the 110th: every 11th is empty), and the rest of that batch only.
    assert len(read_rows) > 1 and sum(read_rows[:-1]) < 110 <= sum(read_rows) < 200

    across = schema_tool.column_values(data_root, "message", max_rows=400)  # a.csv's 300 rows, then b.csv's
    assert across == _first(rows, 0, 400) and across.bounded
    whole = schema_tool.column_values(data_root, "message", max_rows=5000)
    assert whole == _first(rows, 0, ROWS) and not whole.bounded and sum(whole.values()) == ROWS - 91


def test_the_first_rows_are_said_to_be_the_first(monkeypatch, data):
    data_root, rows = data
    monkeypatch.setattr(schema_tool, "MAX_VALUE_ROWS", 100)
    labels = schema_tool.column_values(data_root, "label")
    assert labels == _first(rows, 1, 100) and labels.bounded
    draft = schema_tool.draft_task("label", "BYTES", labels)
    assert draft.why == "'label' holds 3 distinct strings in its first 100 rows: one of 3 classes"
    assert draft.label_lines[0].startswith("classes:  # every value of the first 100 rows; add later ones")
    whole = schema_tool.draft_task("label", "BYTES", collections.Counter(labels))
    assert whole.why == "'label' holds 3 distinct strings: one of 3 classes"

    lengths = text_lengths.Lengths({4: 80, 6: 20}, "words", exact=False, total=100, bounded=True)
    assert lengths.describe() == "median 4, p95 6, max 6 words per row over the first 100 rows"
    assert lengths.cut_text(7) == "at least 20 of the first 100 rows (20.0%) longer than sequence_length 7"
    whole_lengths = text_lengths.Lengths({4: 80, 6: 20}, "words", exact=False, total=100)
    assert whole_lengths.cut_text(7) == "at least 20 of 100 rows (20.0%) longer than sequence_length 7"
    assert whole_lengths.describe().endswith("over 100 rows")


def test_a_run_says_its_count_is_of_the_first_rows(monkeypatch, data):
    from tfxflow.components.model.features import FeatureConfig

    data_root, rows = data
    config = FeatureConfig.from_dict(
        {"task": "multiclass", "label": {"name": "y", "column": "label"}, "text": ["message"], "sequence_length": 6},
        source="features.yaml",
    )
    (line,) = text_lengths.cut_lines(config, lambda column: schema_tool.column_values(data_root, column, 100))
    first = [m for m, _ in rows if m][:100]
    # "order N is late" is 4 words, 6 with [CLS] and [SEP]; a second line adds 2 words
    over = sum("\n" in m for m in first)
    assert over > 0
    assert line == (
        f"text column message: at least {over} of the first 100 rows ({over / 100:.1%}) longer than "
        "sequence_length 6 are cut (counted in words: the vocabulary learned from the training split may spell "
        "a word in more pieces)"
    )
