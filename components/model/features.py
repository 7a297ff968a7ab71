"""The feature config: which raw columns are numeric, categorical, bucketized, and how the label is made.

Both `preprocessing_fn` and the model read this one module. The config travels to the TFX components as
a plain dict (Transform's and Trainer's `custom_config`), so it works unchanged in Kubeflow containers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping, Optional, Tuple

import yaml

TRANSFORMED_SUFFIX = "_xf"
MISSING_TOKEN = "__missing__"
MISSING_INT = -1


class FeatureConfigError(ValueError):
    """A feature config that is malformed or does not match its schema; the message names file and key."""


@dataclasses.dataclass(frozen=True)
class LabelSpec:
    """How the binary label is computed from raw columns.

    - `greater_than` set: label = column > greater_than (times `ratio_of` when given), e.g. tips > 0.2 * fare.
    - `positive_values` set: label = column's value is one of them (string or integer labels).
    - neither: the column already holds 0/1.
    """

    name: str
    column: str
    ratio_of: Optional[str] = None
    greater_than: Optional[float] = None
    positive_values: Tuple[str, ...] = ()

    @property
    def raw_columns(self) -> Tuple[str, ...]:
        return (self.column,) + ((self.ratio_of,) if self.ratio_of else ())

    def describe(self) -> str:
        """The rule in words, e.g. "tips > 0.2 x fare"."""
        if self.greater_than is not None:
            return f"{self.column} > {self.greater_than:g}" + (f" x {self.ratio_of}" if self.ratio_of else "")
        if self.positive_values:
            return f"{self.column} in {list(self.positive_values)}"
        return f"{self.column} (0/1)"

    def evaluate(self, row: Mapping[str, str]) -> int:
        """The label of one raw CSV row, by the same rules as `preprocessing.make_label`: a row whose
        sources are missing or not numbers gets 0."""
        value = row.get(self.column, "")
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


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
    """The columns a model uses, by role, and the knobs of their transforms."""

    label: LabelSpec
    numeric: Tuple[str, ...] = ()
    categorical: Tuple[str, ...] = ()
    bucketized: Tuple[str, ...] = ()
    num_buckets: int = 10
    vocab_top_k: int = 1000
    num_oov_buckets: int = 10
    source: str = "<dict>"

    def __post_init__(self):
        features = self.feature_columns
        if not features:
            raise FeatureConfigError(f"{self.source}: no feature columns (numeric, categorical, bucketized)")
        seen = set()
        for column in features:
            if column in seen:
                raise FeatureConfigError(f"{self.source}: column '{column}' is listed under more than one role")
            seen.add(column)
        if self.label.column in seen:
            raise FeatureConfigError(
                f"{self.source}: label column '{self.label.column}' is also a feature; that would leak the label"
            )
        if self.label.name in seen or any(self.transformed_name(c) == self.label.name for c in features):
            raise FeatureConfigError(f"{self.source}: label name '{self.label.name}' clashes with a feature")
        if self.label.greater_than is not None and self.label.positive_values:
            raise FeatureConfigError(f"{self.source}: label: set greater_than or positive_values, not both")
        if self.label.ratio_of and self.label.greater_than is None:
            raise FeatureConfigError(f"{self.source}: label: ratio_of needs greater_than")
        for knob in ("num_buckets", "vocab_top_k"):
            if getattr(self, knob) < 1:
                raise FeatureConfigError(f"{self.source}: {knob} must be >= 1, got {getattr(self, knob)}")
        if self.num_oov_buckets < 0:
            raise FeatureConfigError(f"{self.source}: num_oov_buckets must be >= 0")

    @property
    def feature_columns(self) -> Tuple[str, ...]:
        return tuple(self.numeric) + tuple(self.categorical) + tuple(self.bucketized)

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

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data.pop("source")
        data["label"]["positive_values"] = list(self.label.positive_values)
        for key in ("numeric", "categorical", "bucketized"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> "FeatureConfig":
        """Builds and validates a config; unknown keys are errors so typos do not pass silently."""
        if not isinstance(data, Mapping):
            raise FeatureConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FeatureConfigError(f"{source}: unknown key(s) {unknown}; known: {sorted(known)}")
        label = data.get("label")
        if not isinstance(label, Mapping):
            raise FeatureConfigError(f"{source}: 'label' is required and must be a mapping")
        label_known = {f.name for f in dataclasses.fields(LabelSpec)}
        unknown = sorted(set(label) - label_known)
        if unknown:
            raise FeatureConfigError(f"{source}: label: unknown key(s) {unknown}; known: {sorted(label_known)}")
        for key in ("name", "column"):
            if not isinstance(label.get(key), str) or not label.get(key):
                raise FeatureConfigError(f"{source}: label.{key} is required (a column name)")
        greater_than = label.get("greater_than")
        try:
            label_spec = LabelSpec(
                name=label["name"],
                column=label["column"],
                ratio_of=label.get("ratio_of"),
                greater_than=None if greater_than is None else float(greater_than),
                positive_values=tuple(str(v) for v in label.get("positive_values") or ()),
            )
        except (TypeError, ValueError) as err:
            raise FeatureConfigError(f"{source}: label: {err}") from err
        kwargs = {"label": label_spec, "source": source}
        for key in ("numeric", "categorical", "bucketized"):
            columns = data.get(key) or []
            if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
                raise FeatureConfigError(f"{source}: '{key}' must be a list of column names")
            kwargs[key] = tuple(columns)
        for key in ("num_buckets", "vocab_top_k", "num_oov_buckets"):
            if key in data:
                if not isinstance(data[key], int) or isinstance(data[key], bool):
                    raise FeatureConfigError(f"{source}: '{key}' must be an integer, got {data[key]!r}")
                kwargs[key] = data[key]
        return cls(**kwargs)

    @classmethod
    def load(cls, path: str) -> "FeatureConfig":
        """Reads a YAML (or JSON) feature config file."""
        if not os.path.isfile(path):
            raise FeatureConfigError(f"{path}: feature config file not found")
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise FeatureConfigError(f"{path}: not valid YAML: {err}") from err
        return cls.from_dict(data, source=path)

    def check_columns(self, available: Iterable[str], where: str) -> None:
        """Raises if a column the config names is not among `available` (a schema's or a CSV's columns)."""
        available = set(available)
        missing = [c for c in self.raw_columns if c not in available]
        if missing:
            raise FeatureConfigError(
                f"{self.source}: column(s) {missing} not found in {where}; it has {sorted(available)}"
            )


def as_config(value: "FeatureConfig | Mapping[str, Any]") -> FeatureConfig:
    """Accepts a FeatureConfig or its dict form (what TFX components receive in `custom_config`)."""
    if isinstance(value, FeatureConfig):
        return value
    return FeatureConfig.from_dict(value, source="custom_config['features']")
