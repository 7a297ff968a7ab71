"""What `tfxflow run --tflite` leaves in a pushed version (components/edge.py), checked the same way for each
task's run: the published TFLite models run here in TFLite's interpreter on rows of the run's CSV and compared
with the served SavedModel's `serving_raw` (tests/pipeline/test_tasks_e2e.py, test_drift_e2e.py)."""

import json
import os

import numpy as np
import tensorflow as tf

from tests import helpers
from tfxflow.components import edge, pusher


def published(home, model, version_index=0):
    """The pushed version's folder and its edge.json."""
    versions = helpers.pushed_versions(os.path.join(home, "serving"), model)
    folder = os.path.join(home, "serving", model, versions[version_index])
    with open(os.path.join(folder, pusher.EDGE_DIR, edge.RESULT_FILE), encoding="utf-8") as f:
        return folder, json.load(f)


def raw_columns(folder):
    """The served model's `serving_raw` columns."""
    return sorted(tf.saved_model.load(folder).signatures["serving_raw"].structured_input_signature[1])


def rows_with_every_column(data, columns, count=120):
    rows = helpers.read_csv_rows(os.path.join(data, "data.csv"), 2000)
    return [r for r in rows if all(r[c] != "" for c in columns)][:count]


def check_against_saved_model(folder, rows):
    """The published float32 and int8 models answer the served SavedModel's `serving_raw` on `rows` within their
    tolerances; returns the float32 model's outputs and the SavedModel's."""
    raw = tf.saved_model.load(folder).signatures["serving_raw"]
    specs = raw.structured_input_signature[1]
    values = {
        name: [r[name] if spec.dtype == tf.string else float(r[name]) for r in rows] for name, spec in specs.items()
    }
    expected = {k: v.numpy() for k, v in raw(**{k: tf.constant(values[k], s.dtype) for k, s in specs.items()}).items()}
    feeds = {
        name: np.array([v.encode() for v in values[name]], dtype=object)
        if spec.dtype == tf.string
        else np.array(values[name], dtype=spec.dtype.as_numpy_dtype)
        for name, spec in specs.items()
    }
    answers = {}
    for variant, tolerance in edge.TOLERANCES.items():
        path = os.path.join(folder, pusher.EDGE_DIR, edge.FILES[variant])
        answer = tf.lite.Interpreter(model_path=path).get_signature_runner("serving_raw")(**feeds)
        assert sorted(answer) == sorted(expected)
        for name, want in expected.items():
            if want.dtype.kind in "SO":
                assert (answer[name] == want).all(), (variant, name)
            else:
                np.testing.assert_allclose(answer[name], want, atol=tolerance, rtol=tolerance, err_msg=variant)
        answers[variant] = answer
    return answers["float32"], expected


def check_result(result, out):
    assert result["published"] == ["float32", "int8"], result
    float32, int8 = result["variants"]["float32"], result["variants"]["int8"]
    assert int8["bytes"] < 0.8 * float32["bytes"]  # 8-bit weights
    assert result["rows"] > 0 and float32["p50_ms"] > 0
    line = out.split("  edge (TFLite):  ", 1)[1].splitlines()[0]
    assert line == edge.summary_line(result)
