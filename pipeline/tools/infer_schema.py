"""`tfxflow infer-schema`: a starting schema, statistics and feature config from a user's CSV, for curation.

With `--label`, the draft's task follows the label column's values, and its comment says which and why:
strings, or integers of at most MAX_CLASS_VALUES distinct values, are classes (binary when there are two,
multiclass otherwise, every class listed); floats, or integers of more distinct values, are a number to
predict (regression). The drafts run unchanged.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from typing import Any, Dict, List, Optional, Sequence

from tfxflow.components.model.text_lengths import ColumnValues
from tfxflow.components.validation import drift
from tfxflow.pipeline.config import ConfigError
from tfxflow.pipeline.inputs import check_data_root

SCHEMA_FILE = "schema.pbtxt"
INFERRED_FILE = "inferred_schema.pbtxt"
STATISTICS_FILE = "statistics.pb"
FEATURES_FILE = "features.yaml"
MAX_CATEGORICAL_INT_VALUES = 50  # integer columns with more distinct values are drafted as numeric
MIN_PRESENT_SHARE = 0.01  # a column with a value in fewer rows is left out of the features draft
MAX_CLASS_VALUES = 20  # an integer label with at most this many distinct values is drafted as classes
MAX_LISTED_CLASSES = 1000  # a label of more distinct strings is drafted without its class list
# The label's classes, the share of distinct values that makes text and the text's lengths are drawn from a
# column's first MAX_VALUE_ROWS non-empty rows (column_values), as many as Transform's analyzers read by default
# (--transform-max-rows): enough for those drafts, and it keeps memory (at most that many distinct values) and
# time (the files' first rows, not terabytes of text) bounded. The drafts say so when a column holds more.
MAX_VALUE_ROWS = 200_000
_BLOCK_BYTES = 1 << 20  # Arrow's default block: a batch of the streaming reader
# A string column is free text (the `text` role: word pieces) when its values are this long on average, mostly
# distinct and mostly of several words: holding a space, or, in a script written without spaces between words
# (Chinese, Japanese, Thai, Lao, Khmer, Myanmar), holding at least MIN_TEXT_UNSPACED_CHARS of its characters
# (BERT makes each CJK character a word of its own); else it is categorical (a vocabulary of whole values), as
# are short names in those scripts (北京, 上海, 家用电器).
MIN_TEXT_BYTES = 20
MIN_TEXT_DISTINCT = 0.5
MIN_TEXT_SPACED = 0.5  # the share of values of several words, spaced or not
MIN_TEXT_UNSPACED_CHARS = 8
_UNSPACED_SCRIPT = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
)  # Thai, Lao, Myanmar, Khmer, Hiragana, Katakana, CJK ideographs (BMP, extensions, compatibility)
# Two-valued labels whose positive class is the one that says yes (else the rarer value is).
AFFIRMATIVE = ("1", "yes", "y", "true", "t", "positive", "pos")
DRAFT_NOTE = (
    "# A draft to curate. Every feature but the label has drift and skew comparators (docs/data-validation.md,\n"
    "# Drift and skew): remove them from columns that change by design (timestamps, ids, dates), and set each\n"
    "# threshold to the change you would want to hear about.\n"
)


@dataclasses.dataclass
class InferResult:
    rows: int
    columns: Dict[str, str]  # name -> FLOAT/INT/BYTES
    written: List[str]
    kept: List[str]  # files that existed and were left alone
    task: Optional[TaskDraft] = None  # drafted for the label
    texts: Dict[str, str] = dataclasses.field(default_factory=dict)  # free-text columns, and why
    sequence_length: Optional[int] = None  # drafted from the text columns' lengths (`lengths`)
    lengths: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {column: text_lengths.Lengths}


@dataclasses.dataclass(frozen=True)
class TaskDraft:
    """The task drafted for a label column, the label's keys for it, and why, in words."""

    task: str
    why: str
    label_lines: Sequence[str] = ()  # YAML lines under `label:` besides name and column
    categorical: bool = False  # an integer label whose values are classes (the schema says so for TFDV)


def _yaml_value(text: str) -> str:
    """`text` as a YAML scalar that reads back as the same string (quoted when YAML would read it otherwise)."""
    import yaml

    # allow_unicode: class names in any script read as written (else "\u4F18..." escapes)
    dumped = yaml.safe_dump(text, default_style=None, allow_unicode=True).strip()
    if dumped.endswith("\n..."):
        dumped = dumped[: -len("\n...")]
    if "\n" not in dumped:
        return dumped.splitlines()[0]
    return yaml.safe_dump(text, default_style='"', allow_unicode=True).strip()


def column_values(data_root: str, column: str, max_rows: Optional[int] = None) -> ColumnValues:
    """{value: rows} of a column's first `max_rows` (MAX_VALUE_ROWS) non-empty cells over the CSV files of
    `data_root` (in file order, `bounded` when it reached them), values as their text, read as ingestion reads
    them (quoted line breaks are data), a batch at a time: what it holds and reads stays within the bound,
    however large the files."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.ingest import csv_check

    max_rows = MAX_VALUE_ROWS if max_rows is None else max_rows
    counts = ColumnValues()
    rows = 0
    for path in csv_check.csv_files(data_root):
        with csv_check.open_csv(path) as stream:
            header = csv_check.read_header(stream)
        with (
            csv_check.open_csv(path) as stream,
            pa_csv.open_csv(
                stream,
                read_options=pa_csv.ReadOptions(column_names=list(header), skip_rows=1, block_size=_BLOCK_BYTES),
                parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                convert_options=pa_csv.ConvertOptions(
                    include_columns=[column],
                    column_types={column: pa.string()},
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=True,
                ),
            ) as reader,
        ):
            for batch in reader:
                values = batch.column(column).drop_null()[: max_rows - rows]
                counts.update(values.to_pylist())
                rows += len(values)
                if rows >= max_rows:
                    counts.bounded = True
                    return counts
    return counts


def text_columns(data_root: str, schema, statistics, label_column: Optional[str]) -> Dict[str, str]:
    """{column: why, in words} of the string columns that look like free text (MIN_TEXT_* above)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    lengths = {
        (stats.path.step[0] if stats.path.step else stats.name): stats.string_stats.avg_length
        for stats in statistics.datasets[0].features
        if stats.HasField("string_stats")
    }
    found = {}
    for feature in schema.feature:
        name = feature.name
        if feature.type != schema_pb2.BYTES or name == label_column or lengths.get(name, 0) < MIN_TEXT_BYTES:
            continue
        counts = column_values(data_root, name)
        rows = sum(counts.values())
        spaced = sum(n for value, n in counts.items() if any(c.isspace() for c in value.strip()))
        unspaced = sum(
            n
            for value, n in counts.items()
            if not any(c.isspace() for c in value.strip())
            and len(_UNSPACED_SCRIPT.findall(value)) >= MIN_TEXT_UNSPACED_CHARS
        )
        if rows and len(counts) >= MIN_TEXT_DISTINCT * rows and spaced + unspaced >= MIN_TEXT_SPACED * rows:
            found[name] = (
                f"free text: {lengths[name]:.0f} bytes on average, {len(counts) / rows:.0%} of values distinct, "
                f"{spaced / rows:.0%} with spaces"
            )
            if unspaced:
                found[name] += (
                    f", {unspaced / rows:.0%} of {MIN_TEXT_UNSPACED_CHARS}+ characters of a script written without "
                    "spaces (Chinese, Japanese, Thai)"
                )
            if counts.bounded:
                found[name] += f" (in its first {rows:,} rows)"
    return found


def draft_sequence_length(data_root: str, columns: Sequence[str], checkpoint=None):
    """(sequence_length, {column: text_lengths.Lengths}, comment lines saying how it was drafted) for the text
    `columns`: each column's 95th percentile of word pieces plus [CLS] and [SEP], rounded up to a multiple of
    8, at least 16, at most the checkpoint's positions (else the feature config's most); the longest of the
    columns' drafts. Counted in the `checkpoint`'s own word pieces (checkpoints.Checkpoint), else in words."""
    if not columns:
        return 128, {}, []
    # lazy: they import TensorFlow
    from tfxflow.components.model import features as features_lib
    from tfxflow.components.model import text, text_lengths, tokenization

    subword_files = None
    if checkpoint is not None:
        vocabulary, tokenizer = None, checkpoint.tokenization
        if tokenizer.kind == tokenization.WORDPIECE:
            vocabulary = text.read_vocabulary(checkpoint.vocab_file)
        else:
            subword_files = (checkpoint.vocab_file, checkpoint.merges_file)
        # A feature config's sequence_length is at most MAX_SEQUENCE_LENGTH, whatever the checkpoint's positions.
        most = min(checkpoint.encoder.max_positions, features_lib.MAX_SEQUENCE_LENGTH)
        positions = checkpoint.encoder.max_positions
        unit = f"word pieces of {checkpoint.name}'s tokenizer"
        limit = f"at most the checkpoint's {most} positions" if most == positions else f"at most {most}"
    else:
        vocabulary, tokenizer, unit = None, tokenization.Tokenization(), "words"
        most = features_lib.MAX_SEQUENCE_LENGTH
        limit = f"at most {most}"
    lengths = {
        column: text_lengths.measure(
            column_values(data_root, column), tokenizer, vocabulary, unit, subword_files=subword_files
        )
        for column in columns
    }
    drafted = max(found.draft(most) for found in lengths.values())
    lines = [
        "sequence_length: word pieces per row, [CLS] and [SEP] included; a longer row is cut (its last pieces",
        f"dropped). Drafted from the data: the 95th percentile + 2, a multiple of 8, at least 16, {limit}.",
        "A run prints how many rows its sequence_length cuts (tfxflow: text column ...: N of M rows ...).",
    ]
    for column, found in lengths.items():
        lines.append(f"{column}: {found.describe()};")
        lines.append(f"  {found.cut_text(drafted)} would be cut")
    if checkpoint is None:
        lines += [
            "Counted in words (the default tokenization's): the vocabulary learned from the training split spells",
            "a word in one word piece or more, so rows may be longer; infer-schema --init-checkpoint PATH counts",
            "a checkpoint's own word pieces.",
        ]
    return drafted, lengths, lines


def draft_task(column: str, column_type: str, counts: collections.Counter) -> TaskDraft:
    """The task for a label column of the schema's `column_type` (INT, FLOAT, BYTES) holding `counts` (a
    ColumnValues says whether they are its first rows only, and the draft says so)."""
    distinct = len(counts)
    rows = sum(counts.values())
    bounded = isinstance(counts, ColumnValues) and counts.bounded
    first = f" in its first {rows:,} rows" if bounded else ""
    if column_type == "FLOAT" or (column_type == "INT" and distinct > MAX_CLASS_VALUES):
        values = sorted(float(v) for v in counts)
        kind = (
            "floats" if column_type == "FLOAT" else f"integers, {distinct:,} distinct values (over {MAX_CLASS_VALUES})"
        )
        why = f"'{column}' holds {kind} from {values[0]:g} to {values[-1]:g}{first}: a number to predict"
        lines = ["transform: none  # or log1p: train on log(1 + label), for a long tail of large values (all > -1)"]
        return TaskDraft("regression", why, lines)
    described = "strings" if column_type == "BYTES" else "integers"
    if distinct == 2:
        ordered = sorted(counts, key=lambda v: (float(v) if column_type == "INT" else 0, v))
        if column_type == "INT" and set(counts) == {"0", "1"}:
            return TaskDraft("binary", f"'{column}' holds 0 and 1{first}: yes/no, 1 the positive class", (), True)
        affirmative = [v for v in ordered if v.strip().lower() in AFFIRMATIVE]
        if affirmative:
            positive, reason = affirmative[0], "it says yes"
        else:
            positive = min(ordered, key=lambda v: (counts[v], ordered.index(v)))
            reason = f"the rarer value, {counts[positive]:,} of {'the first ' if bounded else ''}{rows:,} rows"
        why = (
            f"'{column}' holds 2 {described}, {ordered[0]!r} and {ordered[1]!r}{first}: yes/no, the positive class "
            f"{positive!r} ({reason})"
        )
        return TaskDraft("binary", why, (f"positive_values: [{_yaml_value(positive)}]",), column_type == "INT")
    ordered = sorted(counts, key=(lambda v: (float(v), v)) if column_type == "INT" else None)
    if distinct < 2:
        why = f"'{column}' holds one value only ({ordered[0]!r} if any){first}: a classifier needs two; check the data"
        return TaskDraft("binary", why, (), column_type == "INT")
    why = f"'{column}' holds {distinct:,} distinct {described}{first}: one of {distinct:,} classes"
    if distinct > MAX_LISTED_CLASSES:
        note = f"# more than {MAX_LISTED_CLASSES:,} classes: the training split's values (Transform's vocabulary)"
        return TaskDraft("multiclass", why, (note,), column_type == "INT")
    listed = "classes:  # every value in the data; a value not listed is refused at ingestion"
    if bounded:
        listed = f"classes:  # every value of the first {rows:,} rows; add later ones: a value not listed is refused"
    return TaskDraft(
        "multiclass",
        why,
        (listed, *(f"  - {v if column_type == 'INT' else _yaml_value(v)}" for v in ordered)),
        column_type == "INT",
    )


def _feature_config_draft(
    schema,
    statistics,
    label_column: Optional[str],
    task: Optional[TaskDraft] = None,
    texts: Optional[Dict[str, str]] = None,
    length_lines: Sequence[str] = (),
    sequence_length: int = 128,
) -> str:
    """A features.yaml draft: the task and label (`task`), floats and wide-ranged integers numeric; free text
    (`texts`: {column: why}) text; other strings and integers spanning fewer than MAX_CATEGORICAL_INT_VALUES
    values (hours, weekdays, codes) categorical; a column with a value in fewer than MIN_PRESENT_SHARE of the
    rows left out, in a comment."""
    texts = texts or {}
    from tensorflow_metadata.proto.v0 import schema_pb2

    spans, present = {}, {}
    rows = max(int(statistics.datasets[0].num_examples), 1)
    for stats in statistics.datasets[0].features:
        name = stats.path.step[0] if stats.path.step else stats.name
        common = stats.num_stats.common_stats if stats.HasField("num_stats") else stats.string_stats.common_stats
        present[name] = int(common.num_non_missing)
        if stats.HasField("num_stats"):
            spans[name] = stats.num_stats.max - stats.num_stats.min
    numeric, categorical, text, left_out = [], [], [], []
    for feature in schema.feature:
        if feature.name == label_column:
            continue
        if feature.name in texts:
            text.append(feature.name)
            continue
        if present.get(feature.name, rows) < MIN_PRESENT_SHARE * rows:
            left_out.append(f"{feature.name} ({present.get(feature.name, 0):,} of {rows:,} rows have a value)")
            continue
        if feature.type == schema_pb2.FLOAT:
            numeric.append(feature.name)
        elif feature.type == schema_pb2.INT and spans.get(feature.name, 0) >= MAX_CATEGORICAL_INT_VALUES:
            numeric.append(feature.name)
        else:
            categorical.append(feature.name)

    def block(key: str, names: List[str], notes: Optional[Dict[str, str]] = None) -> str:
        if not names:
            return f"{key}: []\n"
        notes = notes or {}
        return f"{key}:\n" + "".join(f"  - {n}" + (f"  # {notes[n]}" if n in notes else "") + "\n" for n in names)

    label = label_column or "LABEL_COLUMN"
    if task is None:
        task_lines = (
            "task: binary  # binary (0/1), multiclass (one of K classes) or regression (a number)\n"
            "label:\n"
            f"  name: {label}_label\n"
            f"  column: {label}\n"
            "  # the column holds 0/1; else set positive_values: [...] or greater_than: N (with ratio_of: COLUMN)\n"
        )
    else:
        task_lines = (
            f"task: {task.task}  # {task.why}\n"
            "label:\n"
            f"  name: {_yaml_value(label + '_label')}\n"
            f"  column: {_yaml_value(label)}\n" + "".join(f"  {line}\n" for line in task.label_lines)
        )
    return (
        "# Drafted by `tfxflow infer-schema`: check each column's role before training.\n"
        + "".join(f"# left out, almost always empty: {text}\n" for text in left_out)
        + task_lines
        + block("numeric", numeric)
        + block("categorical", categorical)
        + "bucketized: []\n"
        + (
            block("text", text, texts)
            + "".join(f"# {line}\n" for line in length_lines)
            + f"sequence_length: {sequence_length}\n"
            "# the vocabulary learned from the training split (without --init-checkpoint)\n"
            "text_vocab_size: 8000\n"
            "# To fine-tune a pretrained encoder, run with --init-checkpoint <its folder>: its vocabulary, casing and\n"
            "# tokenizer come with it (leave text_vocab_file and lower_case out).\n"
            if text
            else ""
        )
    )


def allow_empty_cells(schema, statistics) -> None:
    """A column with empty cells may have no value in a row. TFDV infers `value_count { min: 1 }` from the CSV
    (where an empty cell is a missing feature), but ingestion writes an empty cell as TFX's CsvExampleGen does,
    a feature with an empty list, which that minimum would refuse in every run."""
    missing = {
        (stats.path.step[0] if stats.path.step else stats.name)
        for stats in statistics.datasets[0].features
        if (
            stats.num_stats.common_stats if stats.HasField("num_stats") else stats.string_stats.common_stats
        ).num_missing
    }
    for feature in schema.feature:
        if feature.name in missing and feature.HasField("value_count"):
            feature.value_count.ClearField("min")


def draft_comparators(
    schema, label_column: Optional[str], task: Optional[TaskDraft] = None, texts: Sequence[str] = ()
) -> None:
    """Gives every feature but the label and free text (`texts`) a drift and a skew comparator: Jensen-Shannon
    divergence for numbers, L-infinity distance for strings, at drift.DEFAULT_COMPARATORS' thresholds. The
    label (absent at serving: no skew) gets a drift comparator by its task: its classes' shares, or its
    number's distribution."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    for feature in schema.feature:
        if feature.name in texts:  # nearly every value is new: shares of whole values say nothing
            continue
        categorical = feature.type == schema_pb2.BYTES or feature.int_domain.is_categorical
        name, threshold = drift.DEFAULT_COMPARATORS["categorical" if categorical else "numeric"]
        if feature.name == label_column:
            if task is not None:
                getattr(feature.drift_comparator, name).threshold = threshold
            continue
        for comparator in (feature.drift_comparator, feature.skew_comparator):
            getattr(comparator, name).threshold = threshold


def infer(
    data_root: str,
    out_dir: str,
    label_column: Optional[str] = None,
    force: bool = False,
    init_checkpoint: Optional[str] = None,
) -> InferResult:
    """Checks the CSV files of `data_root`, computes TFDV statistics, infers a schema, and writes into
    `out_dir`: statistics.pb, inferred_schema.pbtxt (always), schema.pbtxt (with drift and skew comparators)
    and features.yaml (drafts to curate; an existing curated file is kept unless `force`). With
    `label_column` the label is marked absent at serving (environments TRAINING and SERVING). The text
    columns' `sequence_length` is drafted from their lengths (`draft_sequence_length`), in the word pieces of
    the `init_checkpoint`'s tokenizer when one is given."""
    import tensorflow_data_validation as tfdv
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.validation import folder_statistics

    check_data_root(data_root)
    checkpoint = None
    if init_checkpoint:
        from tfxflow.components.model import checkpoints  # lazy: it imports TensorFlow

        try:
            checkpoint = checkpoints.locate(init_checkpoint)
        except checkpoints.CheckpointError as err:
            raise ConfigError(str(err)) from err
    statistics = folder_statistics.csv_statistics(data_root)
    # As TFX's SchemaGen infers (infer_feature_shape=True): a column with a value in every row gets a fixed shape
    # of one, read as a dense tensor (what TFX's own module files expect); one with empty cells has none (a
    # VarLen, sparse tensor) and keeps a value count without a minimum (allow_empty_cells).
    schema = tfdv.infer_schema(statistics, infer_feature_shape=True)
    columns = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    task = None
    if label_column is not None:
        if label_column not in columns:
            raise ConfigError(f"--label {label_column}: no such column in {data_root}; it has {sorted(columns)}")
        schema.default_environment.extend(["TRAINING", "SERVING"])
        label_feature = next(f for f in schema.feature if f.name == label_column)
        label_feature.not_in_environment.append("SERVING")
        task = draft_task(label_column, columns[label_column], column_values(data_root, label_column))
    os.makedirs(out_dir, exist_ok=True)
    header = (
        f"# Inferred by TFDV from {data_root} ({statistics.datasets[0].num_examples:,} rows) by "
        "`tfxflow infer-schema`.\n"
    )
    written, kept = [], []

    def write(name: str, content: bytes, always: bool = False) -> None:
        path = os.path.join(out_dir, name)
        if os.path.exists(path) and not (always or force):
            kept.append(path)
            return
        with open(path + ".tmp", "wb") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
        written.append(path)

    write(STATISTICS_FILE, statistics.SerializeToString(), always=True)
    write(INFERRED_FILE, (header + text_format.MessageToString(schema)).encode("utf-8"), always=True)
    allow_empty_cells(schema, statistics)
    if task is not None and task.categorical:  # TFDV then counts the label's classes (drift on their shares)
        label_feature.int_domain.is_categorical = True
    texts = text_columns(data_root, schema, statistics, label_column)
    draft_comparators(schema, label_column, task, texts)
    write(SCHEMA_FILE, (header + DRAFT_NOTE + text_format.MessageToString(schema)).encode("utf-8"))
    sequence_length, lengths, length_lines = draft_sequence_length(data_root, list(texts), checkpoint)
    draft = _feature_config_draft(schema, statistics, label_column, task, texts, length_lines, sequence_length)
    write(FEATURES_FILE, draft.encode("utf-8"))
    return InferResult(
        rows=statistics.datasets[0].num_examples,
        columns=columns,
        written=written,
        kept=kept,
        task=task,
        texts=texts,
        sequence_length=sequence_length if texts else None,
        lengths=lengths,
    )
