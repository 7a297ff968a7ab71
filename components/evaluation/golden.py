"""The eval rows that the checks after the Evaluator replay (golden rows), and what the Evaluator's own model
answers for them: the serving check and EdgeExport compare their models' answers with these."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Sequence, Tuple

from tfx import types
from tfx.types import artifact_utils

from tfxflow.components import names


def golden_rows(
    example_files: Sequence[str], columns: Sequence[str], keep: Sequence[str], count: int
) -> Tuple[List[bytes], List[Dict[str, Any]], List[int]]:
    """Up to `count` eval rows, those with one value in every one of `columns` first: as serialized
    tf.Examples holding only the `keep` columns (what a client sends: no label); as JSON instances of
    `columns`, for the rows that have them all; and those rows' indices."""
    import tensorflow as tf

    # lazy: it imports tf.Transform
    from tfxflow.components.model import export

    examples, instances, instance_rows = [], [], []
    rows, complete = export.sample_rows(example_files, columns, count)
    for i, (row, whole) in enumerate(zip(rows, complete, strict=True)):
        example = tf.train.Example.FromString(row)
        feature = example.features.feature
        if whole:
            instances.append(instance_of(example, columns))
            instance_rows.append(i)
        for name in [n for n in feature if n not in keep]:
            del feature[name]
        examples.append(example.SerializeToString(deterministic=True))
    return examples, instances, instance_rows


def instance_of(example, columns: Sequence[str]) -> Dict[str, Any]:
    """A tf.Example that has one value in every one of `columns` as a JSON instance: {column: value}, text as str."""
    # lazy: it imports tf.Transform
    from tfxflow.components.model import export

    instance = {}
    for column in columns:
        value = export.feature_values(example.features.feature[column])[0]
        instance[column] = value.decode("utf-8") if isinstance(value, bytes) else value
    return instance


def eval_files(input_dict: Dict[str, List[types.Artifact]]) -> List[str]:
    """The file pattern of `input_dict["examples"]`'s eval split: where golden rows are read."""
    examples = artifact_utils.get_single_instance(input_dict["examples"])
    return [os.path.join(artifact_utils.get_split_uri([examples], "eval"), "*")]


def golden_sources(input_dict: Dict[str, List[types.Artifact]]):
    """(the schema of `input_dict["schema"]`, `eval_files`): what golden rows are read with."""
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    schema_uri = artifact_utils.get_single_uri(input_dict["schema"])
    schema = io_utils.parse_pbtxt_file(os.path.join(schema_uri, "schema.pbtxt"), schema_pb2.Schema())
    return schema, eval_files(input_dict)


def evaluated_signature(eval_config_json: str) -> str:
    """The signature the Evaluator calls: its eval config's, else `serving_default`. Read as JSON (protobuf's
    field names or their camelCase) without TFMA, which takes seconds to import."""
    config = json.loads(eval_config_json)
    spec = (config.get("modelSpecs") or config.get("model_specs") or [{}])[0]
    return spec.get("signatureName") or spec.get("signature_name") or names.SERVING_SIGNATURE


def evaluator_predictions(model_dir: str, eval_config_json: str, examples: Sequence[bytes]) -> Dict[str, Any]:
    """Every output of the Evaluator's model for `examples`, by name: the SavedModel loaded by TFMA with the
    Evaluator's eval config, called through the signature it evaluates. Numbers as float64 [rows, k] arrays,
    text as [rows, k] arrays of str."""
    import tensorflow as tf
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2 as tfma_config
    from tensorflow_model_analysis.utils import model_util

    eval_config = json_format.Parse(eval_config_json, tfma_config.EvalConfig())
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=eval_config)
    model = shared.model_loader.construct_fn()
    predict = model_util.get_callable(model, evaluated_signature(eval_config_json))
    output = predict(tf.constant(list(examples)))
    if not isinstance(output, dict):
        output = {"output_0": output}
    return {name: _as_array(value.numpy(), len(examples)) for name, value in sorted(output.items())}


def _as_array(values, rows: int):
    """Numbers as float64, text as str, shaped [rows, k]."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype.kind in "SO":
        return np.vectorize(lambda v: v.decode("utf-8") if isinstance(v, bytes) else str(v), otypes=[object])(
            values
        ).reshape(rows, -1)
    return values.astype(np.float64).reshape(rows, -1)
