"""`tfxflow infer-schema`: a starting schema, statistics and feature config from a user's CSV, for curation."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional

SCHEMA_FILE = "schema.pbtxt"
INFERRED_FILE = "inferred_schema.pbtxt"
STATISTICS_FILE = "statistics.pb"
FEATURES_FILE = "features.yaml"
MAX_CATEGORICAL_INT_VALUES = 50  # integer columns with more distinct values are drafted as numeric
DRAFT_NOTE = (
    "# A draft to curate. Every feature but the label has drift and skew comparators (README: Drift and skew):\n"
    "# remove them from columns that change by design (timestamps, ids, dates), and set each threshold to the\n"
    "# change you would want to hear about.\n"
)


@dataclasses.dataclass
class InferResult:
    rows: int
    columns: Dict[str, str]  # name -> FLOAT/INT/BYTES
    written: List[str]
    kept: List[str]  # files that existed and were left alone


def _feature_config_draft(schema, statistics, label_column: Optional[str]) -> str:
    """A features.yaml draft: floats and wide-ranged integers numeric; strings and integers spanning fewer
    than MAX_CATEGORICAL_INT_VALUES values (hours, weekdays, codes) categorical."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    spans = {}
    for stats in statistics.datasets[0].features:
        if stats.HasField("num_stats"):
            spans[stats.path.step[0] if stats.path.step else stats.name] = stats.num_stats.max - stats.num_stats.min
    numeric, categorical = [], []
    for feature in schema.feature:
        if feature.name == label_column:
            continue
        if feature.type == schema_pb2.FLOAT:
            numeric.append(feature.name)
        elif feature.type == schema_pb2.INT and spans.get(feature.name, 0) >= MAX_CATEGORICAL_INT_VALUES:
            numeric.append(feature.name)
        else:
            categorical.append(feature.name)

    def block(key: str, names: List[str]) -> str:
        return f"{key}: []\n" if not names else f"{key}:\n" + "".join(f"  - {n}\n" for n in names)

    label = label_column or "LABEL_COLUMN"
    return (
        "# Drafted by `tfxflow infer-schema`: check each column's role before training.\n"
        "label:\n"
        f"  name: {label}_label\n"
        f"  column: {label}\n"
        "  # the column holds 0/1; else set positive_values: [...] or greater_than: N (with ratio_of: COLUMN)\n"
        + block("numeric", numeric)
        + block("categorical", categorical)
        + "bucketized: []\n"
    )


def draft_comparators(schema, label_column: Optional[str]) -> None:
    """Gives every feature but the label a drift and a skew comparator: Jensen-Shannon divergence for numbers,
    L-infinity distance for strings, at drift.DEFAULT_COMPARATORS' thresholds."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    from tfxflow.components import drift

    for feature in schema.feature:
        if feature.name == label_column:
            continue
        name, threshold = drift.DEFAULT_COMPARATORS["categorical" if feature.type == schema_pb2.BYTES else "numeric"]
        for comparator in (feature.drift_comparator, feature.skew_comparator):
            getattr(comparator, name).threshold = threshold


def infer(data_root: str, out_dir: str, label_column: Optional[str] = None, force: bool = False) -> InferResult:
    """Checks the CSV files of `data_root`, computes TFDV statistics, infers a schema, and writes into
    `out_dir`: statistics.pb, inferred_schema.pbtxt (always), schema.pbtxt (with drift and skew comparators)
    and features.yaml (drafts to curate; an existing curated file is kept unless `force`). With
    `label_column` the label is marked absent at serving (environments TRAINING and SERVING)."""
    import tensorflow_data_validation as tfdv
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    from tfxflow.components import csv_input
    from tfxflow.pipeline.config import ConfigError, check_data_root

    check_data_root(data_root)
    statistics = csv_input.csv_statistics(data_root)
    schema = tfdv.infer_schema(statistics, infer_feature_shape=False)
    columns = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    if label_column is not None:
        if label_column not in columns:
            raise ConfigError(f"--label {label_column}: no such column in {data_root}; it has {sorted(columns)}")
        schema.default_environment.extend(["TRAINING", "SERVING"])
        next(f for f in schema.feature if f.name == label_column).not_in_environment.append("SERVING")
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
    draft_comparators(schema, label_column)
    write(SCHEMA_FILE, (header + DRAFT_NOTE + text_format.MessageToString(schema)).encode("utf-8"))
    write(FEATURES_FILE, _feature_config_draft(schema, statistics, label_column).encode("utf-8"))
    return InferResult(rows=statistics.datasets[0].num_examples, columns=columns, written=written, kept=kept)
