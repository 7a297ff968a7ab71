"""What a run reads, checked before any work: the data folder's CSV files, the schema and feature config (the
bundled dataset's unless given), and a module file's label as its preprocessing_fn names it."""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Dict, Optional, Tuple

from tfxflow import schemas
from tfxflow.components import names
from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.model.tokenization import WORDPIECE
from tfxflow.components.settings import ConfigError
from tfxflow.pipeline import user_module as user_module_lib
from tfxflow.pipeline.user_module import UserModule


def resolve_module_label(features: FeatureConfig, user_module: Optional[UserModule], schema_path: str) -> FeatureConfig:
    """`features` with the label named as a module file's preprocessing_fn outputs it (user_module.label_name:
    e.g. Google's `species_xf` for a drafted `species_label`), which the Evaluator and the Trainer read; raises
    ConfigError naming the outputs when none of them is the label. Unchanged without a preprocessing_fn, or
    where the function cannot be traced here."""
    if user_module is None or not user_module.preprocessing_fn:
        return features
    label = features.label
    outputs = user_module_lib.preprocessing_outputs(user_module, schema_path, {"features": features.to_dict()})
    if outputs is None:
        return features
    name = user_module_lib.label_name(label.name, label.column, outputs)
    if name is None:
        raise ConfigError(
            f"{features.source}: label '{label.name}' is not a feature the preprocessing_fn of "
            f"{user_module_lib.FLAG} {user_module.path} outputs ({', '.join(outputs)}), and not exactly one of them "
            f"is named for the label's column '{label.column}': name the module's label there "
            f"(label: {{name: ..., column: {label.column}}})"
        )
    return (
        features if name == label.name else dataclasses.replace(features, label=dataclasses.replace(label, name=name))
    )


def bundled_taxi_data_root() -> str:
    """The folder of the Chicago taxi CSV shipped inside the installed tfx package."""
    import tfx  # deferred: importing tfx costs seconds and only a run needs it

    return os.path.join(os.path.dirname(tfx.__file__), "examples", "chicago_taxi_pipeline", "data", "simple")


def bundled_dataset_dir(dataset: str) -> str:
    """`schemas/<dataset>/` from the installed package."""
    return os.path.join(os.path.dirname(schemas.__file__), dataset)


def check_data_root(data_root: str, flag: str = "--data-root") -> Tuple[str, ...]:
    """The CSV files of `data_root`; raises naming the flag and folder when there are none."""
    if not os.path.isdir(data_root):
        raise ConfigError(f"{flag} {data_root}: no such folder")
    found = glob.glob(os.path.join(data_root, names.CSV_PATTERN))
    files = tuple(sorted(path for path in found if names.is_csv_file(path)))
    if not files:
        raise ConfigError(f"{flag} {data_root}: holds no {names.CSV_FILES}")
    return files


def load_schema_and_features(
    dataset: str, schema_path: Optional[str], feature_config_path: Optional[str], roles_required: bool = True
) -> Tuple[str, FeatureConfig]:
    """(absolute schema path, feature config): `schemas/<dataset>/` unless given; checks that the schema exists
    and parses, that the feature config names only its columns and that the label's type suits the task.
    `roles_required`: False when a user's own preprocessing_fn makes the features."""
    dataset_dir = bundled_dataset_dir(dataset)
    schema_path = os.path.abspath(schema_path or os.path.join(dataset_dir, "schema.pbtxt"))
    feature_config_path = os.path.abspath(feature_config_path or os.path.join(dataset_dir, "features.yaml"))
    if not os.path.isfile(schema_path):
        raise ConfigError(f"--schema {schema_path}: no such file")
    features = FeatureConfig.load(feature_config_path, roles_required=roles_required)
    types = schema_types(schema_path)
    features.check_columns(types, f"schema {schema_path}")
    features.check_label_type(types[features.label.column], f"schema {schema_path}")
    features.check_text_types(types, f"schema {schema_path}")
    if features.text and features.text_vocab_file:
        # A relative path is the feature config's neighbour, wherever the run starts.
        path = os.path.join(os.path.dirname(feature_config_path), os.path.expanduser(features.text_vocab_file))
        features = dataclasses.replace(features, text_vocab_file=os.path.abspath(path))
        # lazy: it imports TensorFlow
        from tfxflow.components.model import text

        if features.text_merges_file:
            path = os.path.join(os.path.dirname(feature_config_path), os.path.expanduser(features.text_merges_file))
            features = dataclasses.replace(features, text_merges_file=os.path.abspath(path))
        try:
            if features.tokenization.kind == WORDPIECE:
                text.read_vocabulary(features.text_vocab_file)
            else:
                from tfxflow.components.model.subword import assets as subword

                subword.check_files(features.tokenization, features.text_vocab_file, features.text_merges_file)
        except ValueError as err:  # text's and subword's VocabularyError, which start with the file's path
            merges = features.text_merges_file and str(err).startswith(features.text_merges_file)
            raise ConfigError(
                f"{features.source}: {'text_merges_file' if merges else 'text_vocab_file'}: {err}"
            ) from err
    return schema_path, features


def schema_types(schema_path: str) -> Dict[str, str]:
    """{feature name: INT, FLOAT or BYTES} of a text-format schema, in its order; raises naming the file when it
    does not parse."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    try:
        with open(schema_path, encoding="utf-8") as f:
            text_format.Parse(f.read(), schema)
    except (text_format.ParseError, UnicodeDecodeError) as err:
        raise ConfigError(f"schema {schema_path}: does not parse: {err}") from err
    kinds = {schema_pb2.INT: "INT", schema_pb2.FLOAT: "FLOAT"}
    return {feature.name: kinds.get(feature.type, "BYTES") for feature in schema.feature}


def schema_columns(schema_path: str) -> Tuple[str, ...]:
    """Feature names of a text-format schema; raises naming the file when it does not parse."""
    return tuple(schema_types(schema_path))
