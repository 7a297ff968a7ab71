"""The feature config: the task, how the label is made, and which raw columns are numeric, categorical or
bucketized.

Both `preprocessing_fn` and the model read this one module. The config travels to the TFX components as
a plain dict (Transform's and Trainer's `custom_config`), so it works unchanged in Kubeflow containers.

The task (components/model/tasks.py) decides what the label is:
- binary: 0/1, from a 0/1 column, `positive_values` of a column, or `column > greater_than` (x `ratio_of`);
- multiclass: the index of the column's value among `classes` (listed, or Transform's vocabulary of the
  training split, most frequent first), string or integer columns;
- regression: the column's number; `transform: log1p` trains on log(1 + label), the signatures answer in the
  label's own units.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping, Optional, Tuple

import yaml

from tfxflow.components.model import tasks
from tfxflow.components.model import tokenization as tokenization_lib

TRANSFORMED_SUFFIX = "_xf"
MISSING_TOKEN = "__missing__"
MISSING_INT = -1


class FeatureConfigError(ValueError):
    """A feature config that is malformed or does not match its schema; the message names file and key."""


@dataclasses.dataclass(frozen=True)
class LabelSpec:
    """How the label is computed from raw columns, per task.

    binary:
    - `greater_than` set: label = column > greater_than (times `ratio_of` when given), e.g. tips > 0.2 * fare.
    - `positive_values` set: label = column's value is one of them (string or integer labels).
    - neither: the column already holds 0/1.
    multiclass: the index of the column's value in `classes` (as text; empty: Transform's vocabulary).
    regression: the column's value; `transform` is the scale the model trains on.
    """

    name: str
    column: str
    ratio_of: Optional[str] = None
    greater_than: Optional[float] = None
    positive_values: Tuple[str, ...] = ()
    task: str = tasks.DEFAULT_TASK
    classes: Tuple[str, ...] = ()
    transform: str = "none"

    @property
    def raw_columns(self) -> Tuple[str, ...]:
        return (self.column,) + ((self.ratio_of,) if self.ratio_of else ())

    def describe(self) -> str:
        """The rule in words, e.g. "tips > 0.2 x fare"."""
        if self.task == tasks.MULTICLASS:
            listed = f" {list(self.classes)}" if self.classes else " (the training split's values)"
            return f"the class in {self.column}:{listed}"
        if self.task == tasks.REGRESSION:
            return self.column + (f" (trained as {self.transform}({self.column}))" if self.transform != "none" else "")
        if self.greater_than is not None:
            return f"{self.column} > {self.greater_than:g}" + (f" x {self.ratio_of}" if self.ratio_of else "")
        if self.positive_values:
            return f"{self.column} in {list(self.positive_values)}"
        return f"{self.column} (0/1)"

    def evaluate(self, row: Mapping[str, str]):
        """The label of one raw CSV row, by the same rules as `preprocessing.make_label`. binary: 0 or 1 (a row
        whose sources are missing or not numbers gets 0); multiclass: the value's text, None when empty;
        regression: the number, None when empty or not a number."""
        value = row.get(self.column, "")
        if self.task == tasks.MULTICLASS:
            return value if value else None
        if self.task == tasks.REGRESSION:
            try:
                return float(value) if value.strip() else None
            except ValueError:
                return None
        if self.greater_than is not None:
            try:
                threshold = self.greater_than * (float(row.get(self.ratio_of, "")) if self.ratio_of else 1.0)
                return int(float(value) > threshold)
            except ValueError:
                return 0
        if self.positive_values:
            return int(value in self.positive_values)
        try:
            return int(float(value)) if value else 0
        except ValueError:
            return 0

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["positive_values"] = list(self.positive_values)
        data["classes"] = list(self.classes)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LabelSpec":
        """The inverse of `to_dict` (the form a component's config carries; not validated again)."""
        return cls(
            **{
                **data,
                "positive_values": tuple(data.get("positive_values") or ()),
                "classes": tuple(data.get("classes") or ()),
            }
        )


ROLES = ("numeric", "categorical", "bucketized", "text")
# Knobs of the transforms, with their types (a YAML value of another type is refused).
KNOBS = {
    "num_buckets": int,
    "vocab_top_k": int,
    "num_oov_buckets": int,
    "sequence_length": int,
    "text_vocab_size": int,
    "text_vocab_file": str,
    "lower_case": bool,
    "strip_accents": bool,
    "tokenizer": str,
    "max_chars_per_word": int,
    "tokenizer_kind": str,
    "text_merges_file": str,
}
# Knobs whose absence (None, or null in the YAML) means "the pretrained checkpoint's, else the default".
OPTIONAL_KNOBS = ("lower_case", "strip_accents", "tokenizer", "max_chars_per_word")
MAX_SEQUENCE_LENGTH = 512  # BERT's positions
# Label keys that belong to one task only; a key of another task is refused, naming both.
TASK_LABEL_KEYS = {
    "greater_than": tasks.BINARY,
    "ratio_of": tasks.BINARY,
    "positive_values": tasks.BINARY,
    "classes": tasks.MULTICLASS,
    "transform": tasks.REGRESSION,
}


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
    """The task, the columns a model uses by role, and the knobs of their transforms.

    `roles_required` (not part of the config's content): the built-in preprocessing_fn reads the roles, so
    at least one column must have one; a user's own preprocessing_fn (a module file) needs only the label."""

    label: LabelSpec
    numeric: Tuple[str, ...] = ()
    categorical: Tuple[str, ...] = ()
    bucketized: Tuple[str, ...] = ()
    text: Tuple[str, ...] = ()
    num_buckets: int = 10
    vocab_top_k: int = 1000
    num_oov_buckets: int = 10
    # Text columns: word pieces per row, [CLS] and [SEP] included; the size of the vocabulary learned from the
    # training split, or a pretrained model's vocab.txt instead; how text is made word pieces (tokenization.py):
    # lower-casing (uncased), accent stripping, the reference tokenizer's rules and its longest word. None: the
    # pretrained checkpoint's (--init-checkpoint), else uncased with Hugging Face's rules.
    sequence_length: int = 128
    text_vocab_size: int = 8000
    text_vocab_file: str = ""
    lower_case: Optional[bool] = None
    strip_accents: Optional[bool] = None
    tokenizer: Optional[str] = None
    max_chars_per_word: Optional[int] = None
    # The tokenizer's kind (tokenization.KINDS): wordpiece, or a pretrained model's sentencepiece (text_vocab_file
    # its sentencepiece.bpe.model) or byte_bpe (text_vocab_file its vocab.json, text_merges_file its merges.txt).
    tokenizer_kind: str = tokenization_lib.WORDPIECE
    text_merges_file: str = ""
    source: str = "<dict>"
    roles_required: bool = dataclasses.field(default=True, compare=False)

    def __post_init__(self):
        features = self.feature_columns
        if not features and self.roles_required:
            raise FeatureConfigError(f"{self.source}: no feature columns (numeric, categorical, bucketized, text)")
        seen = set()
        for column in features:
            if column in seen:
                raise FeatureConfigError(f"{self.source}: column '{column}' is listed under more than one role")
            seen.add(column)
        if self.label.column in seen:
            raise FeatureConfigError(
                f"{self.source}: label column '{self.label.column}' is also a feature; that would leak the label"
            )
        made = [self.transformed_name(c) for c in features] + [self.mask_name(c) for c in self.text]
        if self.label.name in seen or self.label.name in made:
            raise FeatureConfigError(f"{self.source}: label name '{self.label.name}' clashes with a feature")
        if self.label.greater_than is not None and self.label.positive_values:
            raise FeatureConfigError(f"{self.source}: label: set greater_than or positive_values, not both")
        if self.label.ratio_of and self.label.greater_than is None:
            raise FeatureConfigError(f"{self.source}: label: ratio_of needs greater_than")
        if self.label.task not in tasks.TASKS:
            raise FeatureConfigError(f"{self.source}: task must be one of {list(tasks.TASKS)}, got '{self.label.task}'")
        if self.label.transform not in tasks.LABEL_TRANSFORMS:
            raise FeatureConfigError(
                f"{self.source}: label.transform must be one of {list(tasks.LABEL_TRANSFORMS)}, "
                f"got '{self.label.transform}'"
            )
        if self.label.classes:
            repeated = sorted({c for c in self.label.classes if self.label.classes.count(c) > 1})
            if repeated:
                raise FeatureConfigError(f"{self.source}: label.classes lists {repeated} more than once")
            if len(self.label.classes) < 2:
                raise FeatureConfigError(
                    f"{self.source}: label.classes lists {list(self.label.classes)}: a classifier needs at least 2"
                )
            if any(not c for c in self.label.classes):
                raise FeatureConfigError(f"{self.source}: label.classes holds an empty name")
        for knob in ("num_buckets", "vocab_top_k"):
            if getattr(self, knob) < 1:
                raise FeatureConfigError(f"{self.source}: {knob} must be >= 1, got {getattr(self, knob)}")
        if self.num_oov_buckets < 0:
            raise FeatureConfigError(f"{self.source}: num_oov_buckets must be >= 0")
        if not 3 <= self.sequence_length <= MAX_SEQUENCE_LENGTH:
            raise FeatureConfigError(
                f"{self.source}: sequence_length must be between 3 ([CLS], one word piece, [SEP]) and "
                f"{MAX_SEQUENCE_LENGTH}, got {self.sequence_length}"
            )
        if self.text_vocab_size < 100:
            raise FeatureConfigError(f"{self.source}: text_vocab_size must be >= 100, got {self.text_vocab_size}")
        if self.tokenizer is not None and self.tokenizer not in tokenization_lib.TOKENIZER_RULES:
            raise FeatureConfigError(
                f"{self.source}: tokenizer must be one of {list(tokenization_lib.TOKENIZER_RULES)} (the reference "
                f"tokenizer's rules), got {self.tokenizer!r}"
            )
        if self.tokenizer_kind not in tokenization_lib.KINDS:
            raise FeatureConfigError(
                f"{self.source}: tokenizer_kind must be one of {list(tokenization_lib.KINDS)}, "
                f"got {self.tokenizer_kind!r}"
            )
        if self.text and self.tokenizer_kind != tokenization_lib.WORDPIECE and not self.text_vocab_file:
            raise FeatureConfigError(
                f"{self.source}: tokenizer_kind {self.tokenizer_kind} needs text_vocab_file (a pretrained model's "
                "sentencepiece.bpe.model or vocab.json): only WordPiece vocabularies are learned"
            )
        if self.text and self.tokenizer_kind == tokenization_lib.BYTE_BPE and not self.text_merges_file:
            raise FeatureConfigError(f"{self.source}: tokenizer_kind byte_bpe needs text_merges_file (merges.txt)")
        try:
            _ = self.tokenization  # its own rules (e.g. google's strips accents exactly when it lower-cases)
        except ValueError as err:
            raise FeatureConfigError(f"{self.source}: {err}") from err

    @property
    def tokenization(self) -> tokenization_lib.Tokenization:
        """How the text columns are made word pieces: the knobs, uncased with Hugging Face's rules where unset."""
        return tokenization_lib.Tokenization(
            lower_case=True if self.lower_case is None else self.lower_case,
            strip_accents=self.strip_accents,
            rules=self.tokenizer or tokenization_lib.HUGGING_FACE,
            max_chars_per_word=self.max_chars_per_word,
            kind=self.tokenizer_kind,
        )

    @property
    def task(self) -> str:
        return self.label.task

    @property
    def task_spec(self) -> tasks.Task:
        return tasks.spec(self.label.task)

    @property
    def feature_columns(self) -> Tuple[str, ...]:
        return tuple(self.numeric) + tuple(self.categorical) + tuple(self.bucketized) + tuple(self.text)

    @property
    def raw_columns(self) -> Tuple[str, ...]:
        """Every raw column the pipeline reads: features and the label's sources."""
        return tuple(dict.fromkeys(self.feature_columns + self.label.raw_columns))

    @property
    def label_only_columns(self) -> Tuple[str, ...]:
        """Raw columns needed for the label but not as features: absent at serving time."""
        return tuple(c for c in self.label.raw_columns if c not in self.feature_columns)

    @staticmethod
    def transformed_name(column: str) -> str:
        return column + TRANSFORMED_SUFFIX

    @staticmethod
    def mask_name(column: str) -> str:
        """A text column's attention mask (its token ids are `transformed_name`)."""
        return column + TRANSFORMED_SUFFIX + "_mask"

    def to_dict(self) -> dict:
        """The config's content as plain JSON-able data (what `custom_config['features']` carries); the task is
        a top-level key, as in the YAML file."""
        label = self.label.to_dict()
        data = {"task": label.pop("task"), "label": label}
        for key in ROLES:
            data[key] = list(getattr(self, key))
        for key in KNOBS:
            data[key] = getattr(self, key)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>", roles_required: bool = True) -> "FeatureConfig":
        """Builds and validates a config; unknown keys are errors so typos do not pass silently."""
        if not isinstance(data, Mapping):
            raise FeatureConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"source", "roles_required"} | {"task"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FeatureConfigError(f"{source}: unknown key(s) {unknown}; known: {sorted(known)}")
        task = data.get("task", tasks.DEFAULT_TASK)
        if task not in tasks.TASKS:
            raise FeatureConfigError(f"{source}: task must be one of {list(tasks.TASKS)}, got {task!r}")
        label = data.get("label")
        if not isinstance(label, Mapping):
            raise FeatureConfigError(f"{source}: 'label' is required and must be a mapping")
        label_known = {f.name for f in dataclasses.fields(LabelSpec)} - {"task"}
        unknown = sorted(set(label) - label_known)
        if unknown:
            raise FeatureConfigError(f"{source}: label: unknown key(s) {unknown}; known: {sorted(label_known)}")
        for key, owner in TASK_LABEL_KEYS.items():
            if label.get(key) not in (None, [], (), "", "none") and owner != task:
                raise FeatureConfigError(
                    f"{source}: label.{key} applies to task '{owner}', and this config's task is '{task}'"
                    + ("" if "task" in data else " (the default; set task: to change it)")
                )
        for key in ("name", "column"):
            if not isinstance(label.get(key), str) or not label.get(key):
                raise FeatureConfigError(f"{source}: label.{key} is required (a column name)")
        classes = label.get("classes") or ()
        if not isinstance(classes, (list, tuple)) or any(isinstance(c, (list, dict, float)) for c in classes):
            raise FeatureConfigError(
                f"{source}: label.classes must be a list of class values (strings or integers), got {classes!r}"
            )
        greater_than = label.get("greater_than")
        try:
            label_spec = LabelSpec(
                name=label["name"],
                column=label["column"],
                ratio_of=label.get("ratio_of"),
                greater_than=None if greater_than is None else float(greater_than),
                positive_values=tuple(str(v) for v in label.get("positive_values") or ()),
                task=task,
                classes=tuple(str(c) for c in classes),
                transform=str(label.get("transform") or "none"),
            )
        except (TypeError, ValueError) as err:
            raise FeatureConfigError(f"{source}: label: {err}") from err
        kwargs = {"label": label_spec, "source": source, "roles_required": roles_required}
        for key in ROLES:
            columns = data.get(key) or []
            if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
                raise FeatureConfigError(f"{source}: '{key}' must be a list of column names")
            kwargs[key] = tuple(columns)
        for key, kind in KNOBS.items():
            if key in OPTIONAL_KNOBS and key in data and data[key] is None:
                continue
            if key in data:
                if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
                    kind_name = "a string (a path)" if key.endswith("_file") else _KIND_NAMES[kind]
                    raise FeatureConfigError(f"{source}: '{key}' must be {kind_name}, got {data[key]!r}")
                kwargs[key] = data[key]
        return cls(**kwargs)

    @classmethod
    def load(cls, path: str, roles_required: bool = True) -> "FeatureConfig":
        """Reads a YAML (or JSON) feature config file."""
        if not os.path.isfile(path):
            raise FeatureConfigError(f"{path}: feature config file not found")
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise FeatureConfigError(f"{path}: not valid YAML: {err}") from err
        return cls.from_dict(data, source=path, roles_required=roles_required)

    def check_columns(self, available: Iterable[str], where: str) -> None:
        """Raises if a column the config names is not among `available` (a schema's or a CSV's columns)."""
        available = set(available)
        missing = [c for c in self.raw_columns if c not in available]
        if missing:
            raise FeatureConfigError(
                f"{self.source}: column(s) {missing} not found in {where}; it has {sorted(available)}"
            )

    def check_text_types(self, types: Mapping[str, str], where: str) -> None:
        """Raises when a text column is not a string column in `types` ({column: INT, FLOAT or BYTES})."""
        numbers = [c for c in self.text if types.get(c, "BYTES") != "BYTES"]
        if numbers:
            raise FeatureConfigError(
                f"{self.source}: text column(s) {numbers} hold numbers in {where}: a text column holds strings "
                "(a number is numeric, categorical or bucketized)"
            )

    def check_label_type(self, column_type: str, where: str) -> None:
        """Raises when the label column's type (the schema's INT, FLOAT or BYTES) cannot hold this task's label:
        a regression label must be a number, a multi-class label a string or an integer."""
        label = self.label
        if label.task == tasks.REGRESSION and column_type == "BYTES":
            raise FeatureConfigError(
                f"{self.source}: task regression: label.column '{label.column}' holds strings in {where}; a "
                "regression label must be a number (INT or FLOAT): use task: multiclass for named classes"
            )
        if label.task == tasks.MULTICLASS and column_type == "FLOAT":
            raise FeatureConfigError(
                f"{self.source}: task multiclass: label.column '{label.column}' holds floats in {where}; classes "
                "are strings or integers: use task: regression for a numeric target"
            )
        if label.task == tasks.MULTICLASS and column_type == "INT":
            bad = [c for c in label.classes if not _is_integer(c)]
            if bad:
                raise FeatureConfigError(
                    f"{self.source}: label.classes {bad}: '{label.column}' holds integers in {where}, so each "
                    "class must be an integer"
                )


_KIND_NAMES = {int: "an integer", str: "a string", bool: "true or false"}


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def as_config(value: "FeatureConfig | Mapping[str, Any]", roles_required: bool = True) -> FeatureConfig:
    """Accepts a FeatureConfig or its dict form (what TFX components receive in `custom_config`)."""
    if isinstance(value, FeatureConfig):
        return value
    return FeatureConfig.from_dict(value, source="custom_config['features']", roles_required=roles_required)
