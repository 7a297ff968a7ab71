"""Text end to end through the CLI, as a user runs it: Debian's package descriptions (every one spans lines in
its quoted CSV value) and their archive sections, `infer-schema`'s drafts unchanged, a pushed model that answers
raw text through every signature, with the default text model and with a BERT preset; its figures are
scikit-learn's on the served model's own answers.

The runs are independent (one home each) and run on the session's pool of long runs (tests/conftest.py's
`long_runs`).
"""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as sk

from tests import helpers
from tests.pipeline.test_tasks_e2e import _draft, _eval_split, _mlflow_metrics, _ok, _run, _served, _training_info

pytestmark = pytest.mark.e2e

DEBIAN = os.path.join(os.path.dirname(__file__), "..", "data", "debian_packages.csv")


def _debian(base, name, *extra):
    data = base / f"{name}-data"
    data.mkdir()
    shutil.copy(DEBIAN, data / "packages.csv")
    schema, features = _draft(str(data), str(base / f"{name}-draft"), "section")
    home = str(base / f"{name}-home")
    result = _run(home, str(data), schema, features, *extra, dataset=name)
    return {"data": str(data), "schema": schema, "features": features, "home": home, "result": result}


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    return {
        "default": lambda: _debian(base, "debian"),
        # A Transformer from scratch on 2,137 descriptions: 4 layers of 256, AdamW with warmup, short rows.
        "bert_mini": lambda: _debian(
            base, "bert", "--model-preset", "bert-mini", "--train-steps", "150", "--batch-size", "32"
        ),
    }


@pytest.fixture(scope="module")
def runs(long_runs):
    return long_runs.results("text")


# Loads a registered model through MLflow's pyfunc in a process of its own, as `mlflow models serve` does: nothing
# there imports TF Text before the model is read. argv: tracking URI, model URI; stdin: hex-encoded tf.Examples.
PYFUNC_PREDICT = """
import base64, json, sys
import mlflow, numpy as np
mlflow.set_tracking_uri(sys.argv[1])
examples = [base64.urlsafe_b64encode(bytes.fromhex(h)).decode() for h in json.load(sys.stdin)]
print(json.dumps(np.asarray(mlflow.pyfunc.load_model(sys.argv[2]).predict(np.array(examples, dtype=object))).tolist()))
"""


def _pyfunc_predict(home, model_uri, examples):
    done = subprocess.run(
        [sys.executable, "-c", PYFUNC_PREDICT, f"sqlite:///{home}/mlflow/mlflow.db", model_uri],
        input=json.dumps([e.hex() for e in examples]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return np.array(json.loads(done.stdout.strip().splitlines()[-1]))


def _descriptions(count):
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        return [row for _, row in zip(range(count), csv.DictReader(f), strict=False)]


def _check_text_run(run, model, min_accuracy):
    with open(run["features"], encoding="utf-8") as f:
        drafted = f.read()
    assert "text:\n  - description  # free text: " in drafted and "task: multiclass" in drafted
    _ok(run["result"])
    out = run["result"].stdout
    assert "rows read:      eval " in out and "2,816 read" in out  # one row per description, over its lines
    assert "serving check:  passed" in out and "with TF Text's ops" in out
    model_dir, _ = _served(run["home"], model)
    import tensorflow_text  # noqa: F401 (the served graph tokenizes with TF Text's ops)

    loaded = tf.saved_model.load(model_dir)
    assert {"serving_default", "serving_raw", "transform_features"} <= set(loaded.signatures)
    rows = _eval_split(run["home"])
    labels = loaded.signatures["transform_features"](examples=tf.constant(rows))["section_label"].numpy()
    answer = loaded.signatures["serving_default"](examples=tf.constant(rows))
    predicted = answer["scores"].numpy().argmax(axis=1)
    metrics, tags = _mlflow_metrics(run["home"], model)
    assert metrics["eval.accuracy"] == pytest.approx(sk.accuracy_score(labels, predicted), abs=1e-6)
    assert metrics["eval.accuracy"] >= min_accuracy
    # serving_raw takes the raw text as TF Serving's REST API hands it: {"description": "...", "package": ...}.
    raw = loaded.signatures["serving_raw"]
    assert sorted(raw.structured_input_signature[1]) == ["description", "package"]
    described = _descriptions(8)
    by_raw = raw(
        description=tf.constant([r["description"] for r in described]),
        package=tf.constant([r["package"] for r in described]),
    )
    examples = helpers.serialize_examples(described, run["schema"], drop=("section",))
    by_examples = loaded.signatures["serving_default"](examples=tf.constant(examples))
    np.testing.assert_allclose(by_raw["scores"].numpy(), by_examples["scores"].numpy(), atol=1e-5)
    # MLflow's registered model answers the same in a fresh process.
    registered = _pyfunc_predict(run["home"], f"models:/{model}@champion", examples)
    np.testing.assert_allclose(registered, by_examples["scores"].numpy(), atol=1e-5)
    info = _training_info(run["home"])
    assert info["text_columns"] == ["description"] and info["sequence_length"] == 128
    return info


def test_text_from_drafts_pushes_a_model_that_answers_raw_text(runs):
    info = _check_text_run(runs["default"], "debian", min_accuracy=0.75)
    assert info["preset"] == "default" and info["optimizer"] == "adam"
    assert 6000 < info["text_vocabulary"]["description_xf"] <= 10000  # learned from the training split


def test_a_bert_preset_trains_and_serves_the_same_way(runs):
    info = _check_text_run(runs["bert_mini"], "bert", min_accuracy=0.5)
    assert info["preset"] == "bert-mini" and info["optimizer"] == "adamw"
    assert 4e6 < info["parameters"] < 7e6  # 4 layers of 256 (3.2M) and ~9,000 word pieces of 256
