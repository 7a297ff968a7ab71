"""What `tfxflow run --tflite` leaves in a pushed version (components/edge/edge.py), checked the same way for each
task's run: the published TFLite models run here in TFLite's interpreter on rows of the run's CSV and compared
with the served SavedModel's `serving_raw` (tests/pipeline/test_tasks_e2e.py, test_drift_e2e.py)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfxflow.components import serving_dir
from tfxflow.components.edge import edge


def published(serving, model, version_index=0):
    """The folder of a version pushed under `serving` (a home's serving/) and its edge.json."""
    versions = helpers.pushed_versions(serving, model)
    folder = os.path.join(serving, model, versions[version_index])
    with open(os.path.join(folder, serving_dir.EDGE_DIR, edge.RESULT_FILE), encoding="utf-8") as f:
        return folder, json.load(f)


def raw_columns(folder):
    """The served model's `serving_raw` columns."""
    specs = tf.saved_model.load(folder).signatures["serving_raw"].structured_input_signature[1]
    return sorted(spec.name for spec in specs.values())


def rows_with_every_column(data, columns, count=120, file="data.csv"):
    rows = helpers.read_csv_rows(os.path.join(data, file), 2000)
    return [r for r in rows if all(r[c] != "" for c in columns)][:count]


# The gate holds each variant to its tolerance on the golden rows (eval rows); on other rows the float32 model is
# held to the same (the same arithmetic) and an int8 model to 3 times its own.
UNSEEN_ROWS_FACTOR = {"float32": 1, "int8": 3}


def _value(text: str, dtype):
    return text if dtype == tf.string else int(text) if dtype.is_integer else float(text)


def check_against_saved_model(folder, rows):
    """Each published model answers the served SavedModel's `serving_raw` on `rows` (CSV rows): numbers within
    its tolerance (UNSEEN_ROWS_FACTOR), text equal; returns the float32 model's outputs and the SavedModel's."""
    raw = tf.saved_model.load(folder).signatures["serving_raw"]
    specs = raw.structured_input_signature[1]  # {argument: TensorSpec named by the column}
    values = {arg: [_value(r[spec.name], spec.dtype) for r in rows] for arg, spec in specs.items()}
    expected = {k: v.numpy() for k, v in raw(**{k: tf.constant(values[k], s.dtype) for k, s in specs.items()}).items()}
    feeds = {  # TFLite's signature takes each column by its own name
        spec.name: np.array([v.encode() for v in values[arg]], dtype=object)
        if spec.dtype == tf.string
        else np.array(values[arg], dtype=spec.dtype.as_numpy_dtype)
        for arg, spec in specs.items()
    }
    with open(os.path.join(folder, serving_dir.EDGE_DIR, edge.RESULT_FILE), encoding="utf-8") as f:
        result = json.load(f)
    answers = {}
    for variant in result["published"]:
        tolerance = edge.TOLERANCES[variant] * UNSEEN_ROWS_FACTOR[variant]
        path = os.path.join(folder, serving_dir.EDGE_DIR, edge.FILES[variant])
        answer = _interpreter(path, bool(result.get("text_ops"))).get_signature_runner("serving_raw")(**feeds)
        assert sorted(answer) == sorted(expected)
        for name, want in expected.items():
            if want.dtype.kind in "SO":
                assert (answer[name] == want).all(), (variant, name)
            else:
                np.testing.assert_allclose(answer[name], want, atol=tolerance, rtol=tolerance, err_msg=variant)
        answers[variant] = answer
    return answers["float32"], expected


def _interpreter(path, text_ops):
    """TFLite's interpreter of `path`, with TF Text's TFLite kernels registered for a text model."""
    if not text_ops:
        return tf.lite.Interpreter(model_path=path)
    import tensorflow_text
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    return InterpreterWithCustomOps(
        model_path=path, custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS
    )


def check_result(result, out):
    """float32 published; int8 published and smaller, or dropped for disagreeing (the reason says by how much);
    the summary line is the result's."""
    assert result["published"][:1] == ["float32"], result
    float32, int8 = result["variants"]["float32"], result["variants"]["int8"]
    # 8-bit weights; a text model's edge normalizer (a 1.3 MiB table of strings) is not quantized, and in a small
    # model it is most of the file.
    assert int8["bytes"] < (float32["bytes"] if result.get("text_ops") else 0.8 * float32["bytes"])
    if "int8" not in result["published"]:
        assert int8["reason"].startswith("output '") and " differs by up to " in int8["reason"], int8
        assert not int8["published"]
    assert result["rows"] > 0 and float32["p50_ms"] > 0
    # Each published variant scored the eval rows within its margin of the SavedModel's metric on them.
    scored = result["eval"]
    assert scored["rows"] >= result["rows"] and scored["metric"] in ("binary_accuracy", "accuracy", "r2"), scored
    for variant in result["published"]:
        entry = result["variants"][variant]["eval"]
        assert entry["metric"] == scored["metric"] and entry["gap"] <= edge.METRIC_MARGINS[variant], entry
        assert entry["gap"] == pytest.approx(abs(entry["value"] - scored["saved_model"]), abs=1e-6)
    line = out.split("  edge (TFLite):  ", 1)[1].splitlines()[0]
    assert line == edge.summary_line(result)
