"""ServingCheck: a real trained model loaded in a TensorFlow-only process, golden requests through both
signatures compared with TFMA's loading of the same model, latency measured; and models that must not be
pushed (a signature that disagrees, a model that does not load, a label among a signature's inputs)."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format, text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_model_analysis.proto import config_pb2 as tfma_config
from tfx.types import standard_artifacts

from tfxflow.components import lane
from tfxflow.components.evaluation import golden
from tfxflow.components.model import export, model_info
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.serving import serving_check
from tfxflow.components.training.fit import train
from tfxflow.components.training.train_params import TrainParams
from tfxflow.pipeline.config import EvaluationConfig
from tfxflow.pipeline.definition import eval_config

pytestmark = pytest.mark.integration

SCHEMA = """
feature { name: "x1" type: FLOAT }
feature { name: "x2" type: FLOAT }
feature { name: "city" type: BYTES }
feature { name: "score" type: FLOAT }
feature { name: "y" type: INT not_in_environment: "SERVING" }
default_environment: "TRAINING"
default_environment: "SERVING"
"""
# A request to a model that does not load (its saved_model.pb is not one), for `model_dir`.
BROKEN_REQUEST = {
    "signatures": ["serving_default"],
    "outputs": ["probabilities"],
    "examples_b64": [],
    "instances": [],
    "latency_calls": 1,
    "seconds": 0.1,
    "batch_sizes": [1],
}


def _artifacts(base, model_dir, raw_eval_files):
    """Model, Examples (the eval split holds the raw rows, label included, as ExampleGen writes them), Schema
    and an output InfraBlessing, laid out as TFX lays them out."""
    model = standard_artifacts.Model()
    model.uri = os.path.join(base, "model")
    shutil.copytree(model_dir, os.path.join(model.uri, "Format-Serving"))
    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(base, "examples")
    examples.split_names = json.dumps(["eval"])
    os.makedirs(os.path.join(examples.uri, "Split-eval"))
    for i, name in enumerate(raw_eval_files):
        shutil.copy(name, os.path.join(examples.uri, "Split-eval", f"data-{i}.gz"))
    schema = standard_artifacts.Schema()
    schema.uri = os.path.join(base, "schema")
    os.makedirs(schema.uri)
    with open(os.path.join(schema.uri, "schema.pbtxt"), "w", encoding="utf-8") as f:
        f.write(SCHEMA)
    blessing = standard_artifacts.InfraBlessing()
    blessing.uri = os.path.join(base, "blessing")
    os.makedirs(blessing.uri)
    return model, examples, schema, blessing


def _check(tiny, base, model_dir, max_latency_ms=0.0, golden_rows=16):
    model, examples, schema, blessing = _artifacts(base, model_dir, tf.io.gfile.glob(tiny["raw_eval"][0]))
    config = tiny["config"]
    serving_check.Executor().Do(
        {"model": [model], "examples": [examples], "schema": [schema]},
        {"blessing": [blessing]},
        {
            "features": json.dumps(config.to_dict()),
            "eval_config": json_format.MessageToJson(eval_config(EvaluationConfig(), config)),
            "tolerance": serving_check.DEFAULT_TOLERANCE,
            "max_latency_ms": max_latency_ms,
            "golden_rows": golden_rows,
        },
    )
    return blessing, serving_check.read_result(blessing.uri)


@pytest.fixture(scope="module")
def trained(tiny_transform, tmp_path_factory):
    """A model trained on the tiny Transform output and exported with its three signatures."""
    folder = tmp_path_factory.mktemp("serving_check")
    model, _, _ = train(
        tiny_transform["config"],
        tiny_transform["output"],
        tiny_transform["train"],
        tiny_transform["eval"],
        train_steps=40,
        eval_steps=0,
        model_params=model_lib.ModelParams(hidden_units=(16,), learning_rate=0.01),
        train_params=TrainParams(batch_size=32, eval_every_steps=10, early_stopping_patience=0),
        log_dir=str(folder / "logs"),
    )
    export_dir = str(folder / "export")
    export.export_serving_model(model, tiny_transform["output"], tiny_transform["config"], export_dir)
    blessing, result = _check(tiny_transform, str(folder / "check"), export_dir)
    return {"export_dir": export_dir, "blessing": blessing, "result": result, "folder": folder}


def test_a_trained_model_serves_in_a_tensorflow_only_process(trained, tiny_transform):
    result, blessing = trained["result"], trained["blessing"]
    assert result["reasons"] == [] and result["blessed"] is True
    assert blessing.get_int_custom_property("blessed") == 1 and blessing.get_string_custom_property("reason") == ""
    # Loaded without this project, TFX, tensorflow-transform or TFMA, nor Keras: TensorFlow imported without it,
    # as in a model server (TensorFlow's own import takes tf_keras where it can).
    assert result["foreign_modules"] == [] and result["tensorflow"] == tf.__version__
    assert result["modules_of_tensorflow"] == []
    # The serving_raw signature takes the four feature columns with the schema's types; no label.
    raw = result["signatures"]["serving_raw"]["inputs"]
    assert {name: info["dtype"] for name, info in raw.items()} == {
        "x1": "float32",
        "x2": "float32",
        "city": "string",
        "score": "float32",
    }
    assert list(result["signatures"]["serving_default"]["inputs"]) == ["examples"]
    # 16 golden rows through both signatures: the probabilities of TFMA's loading of the model, which are
    # real probabilities, not constants.
    assert list(result["expected"]) == ["probabilities"]
    expected = np.array(result["expected"]["probabilities"])
    assert expected.shape == (16, 1) and ((expected > 0) & (expected < 1)).all() and expected.std() > 1e-3
    for name in ("serving_default", "serving_raw"):
        np.testing.assert_allclose(
            result["predictions"][name]["probabilities"], expected, atol=serving_check.DEFAULT_TOLERANCE
        )
        assert result["max_abs_difference"][name] <= serving_check.DEFAULT_TOLERANCE
    # The same rows through the model in this process give them too.
    rows, _, _ = golden.golden_rows(
        tiny_transform["raw_eval"], tiny_transform["config"].feature_columns, ["x1", "x2", "city", "score"], 16
    )
    assert all("y" not in tf.train.Example.FromString(e).features.feature for e in rows)
    here = tf.saved_model.load(trained["export_dir"]).signatures["serving_default"](examples=tf.constant(rows))
    np.testing.assert_allclose(here["probabilities"].numpy(), expected, atol=1e-6)
    # Figures: latency of 200 single requests (a small model's all fit in LATENCY_SECONDS), throughput per batch size.
    assert result["latency_ms"]["calls"] == serving_check.LATENCY_CALLS
    assert 0 < result["latency_ms"]["p50"] <= result["latency_ms"]["p99"]
    assert [t["batch"] for t in result["throughput"]] == list(serving_check.BATCH_SIZES)
    assert all(t["examples_per_s"] > 0 for t in result["throughput"])
    assert blessing.get_float_custom_property("p99_ms") == result["latency_ms"]["p99"]
    figures = serving_check.figures(result)
    assert figures["latency_p99_ms"] == result["latency_ms"]["p99"] and "rows_per_s.batch_256" in figures


def test_a_model_over_the_latency_bound_is_not_pushed(trained, tiny_transform):
    schema = text_format.Parse(SCHEMA, schema_pb2.Schema())
    result = dict(trained["result"])
    bound = result["latency_ms"]["p99"] / 2
    reasons = serving_check.verdict(
        result,
        {k: np.array(v) for k, v in result["expected"].items()},
        serving_check.serving_columns(schema),
        ["x1", "x2", "city", "score", "y"],
        serving_check.DEFAULT_TOLERANCE,
        bound,
    )
    assert len(reasons) == 1 and "over --max-latency-ms" in reasons[0] and f"{bound:g}" in reasons[0]
    assert (
        serving_check.verdict(
            result,
            {k: np.array(v) for k, v in result["expected"].items()},
            serving_check.serving_columns(schema),
            ["x1", "x2", "city", "score", "y"],
            serving_check.DEFAULT_TOLERANCE,
            0.0,
        )
        == []
    )


class _Disagreeing(tf.Module):
    """serving_raw answers 0.1 more than serving_default: what a raw-input path that parses differently from
    the tf.Example path would do."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(self, examples):
        parsed = tf.io.parse_example(examples, {"x1": tf.io.FixedLenFeature([], tf.float32)})
        return {"probabilities": tf.reshape(tf.sigmoid(parsed["x1"]), [-1, 1])}

    @tf.function(
        input_signature=[
            {"x1": tf.TensorSpec([None], tf.float32, name="x1"), "y": tf.TensorSpec([None], tf.int64, name="y")}
        ]
    )
    def serve_raw(self, features):
        return {"probabilities": tf.reshape(tf.sigmoid(features["x1"]) + 0.1, [-1, 1])}


def test_a_disagreeing_signature_that_takes_the_label_is_not_pushed(trained, tiny_transform):
    module = _Disagreeing()
    export_dir = str(trained["folder"] / "disagreeing")
    tf.saved_model.save(
        module, export_dir, signatures={"serving_default": module.serve_examples, "serving_raw": module.serve_raw}
    )
    # Golden rows need a value in x1 and y: the label column is among this model's raw inputs.
    tiny = dict(
        tiny_transform,
        config=FeatureConfig.from_dict(
            {"label": {"name": "label", "column": "city", "positive_values": ["a"]}, "numeric": ["x1", "y"]}
        ),
    )
    blessing, result = _check(tiny, str(trained["folder"] / "check-disagreeing"), export_dir)
    assert blessing.get_int_custom_property("blessed") == 0 and result["blessed"] is False
    reasons = result["reasons"]
    assert "signature 'serving_raw' takes 'y', absent at serving (schema: not in the SERVING environment)" in reasons
    (disagrees,) = [r for r in reasons if "disagrees" in r]
    assert disagrees.startswith("'serving_raw' disagrees with the Evaluator's model by 0.1")
    assert result["max_abs_difference"]["serving_default"] <= 1e-6
    assert blessing.get_string_custom_property("reason") == "; ".join(reasons)


def test_a_model_that_does_not_load_gets_the_loaders_error(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    result = serving_check.run_probe({**BROKEN_REQUEST, "model_dir": str(broken)})
    assert "error" in result and "load_s" not in result
    (reason,) = serving_check.verdict(result, {"probabilities": np.zeros((0, 1))}, {}, [], 1e-5, 0.0)
    assert reason.startswith("does not serve: ") and result["error"] in reason


def test_a_slow_models_single_requests_stop_at_the_latency_budget_after_the_least_calls(tmp_path):
    class Slow(tf.Module):  # about ten milliseconds a call: 20 products of 256 x 256 matrices, one after another
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def serve(self, x):
            m = tf.fill([256, 256], 1e-3)
            m = tf.while_loop(lambda i, m: i < 20, lambda i, m: (i + 1, tf.tanh(tf.matmul(m, m) + 0.5)), (0, m))[1]
            return {"y": x + tf.reduce_sum(m) * 0.0}

    slow = Slow()
    tf.saved_model.save(slow, str(tmp_path / "slow"), signatures={"serving_default": slow.serve})
    request = {
        **BROKEN_REQUEST,
        "model_dir": str(tmp_path / "slow"),
        "outputs": [],
        "instances": [{"x": 1.0}, {"x": 2.0}],
        "instance_rows": [0, 1],
        "latency_calls": 100_000,
        "latency_seconds": 0.2,
        "min_latency_calls": 4,
    }
    result = serving_check.run_probe(request)
    assert result["predictions"]["serving_default"]["y"] == [[1.0], [2.0]]
    calls, p50 = result["latency_ms"]["calls"], result["latency_ms"]["p50"]
    # At least the least calls; past them, no call starts after the budget: at most one call beyond it.
    assert 4 <= calls <= max(4, int(200 / p50) + 2), (calls, p50)
    # Without a budget, every call asked for.
    result = serving_check.run_probe({**request, "latency_calls": 7, "latency_seconds": None})
    assert result["latency_ms"]["calls"] == 7


def test_what_this_process_freed_goes_back_to_the_system_as_the_probe_gets_its_request(monkeypatch):
    """Handing the probe its request gives this process's freed memory back first (tests/components/test_memory.py),
    before the probe's process loads the model beside this one."""
    order = []

    class Input:
        closed = False

        def write(self, data):
            order.append(data.decode().strip())

        def flush(self):
            pass

        def close(self):
            self.closed = True

    def started(*args, **kwargs):
        order.append("started")
        process = _Exited()
        process.stdin = Input()
        return process

    monkeypatch.setattr(serving_check, "give_back_free_memory", lambda: order.append("given back"))
    monkeypatch.setattr(serving_check.subprocess, "Popen", started)
    with serving_check.started_probe() as probe:
        assert order == ["started"]  # nothing is given back before the request goes
        probe.send({"model_dir": "m"})
        assert order == ["started", "given back", "go"]  # given back before the probe loads the model


class _Exited:
    """A process that has ended, as subprocess.Popen returns it."""

    stdin = type("Closed", (), {"closed": True})()

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


def test_signature_rules_against_the_serving_environment():
    columns = {"x1": "float32", "city": "string"}
    examples = {"inputs": {"examples": {"dtype": "string"}}}
    ok = {
        "serving_default": examples,
        "serving_raw": {"inputs": {"x1": {"dtype": "float32"}, "city": {"dtype": "string"}}},
    }
    assert serving_check.check_signatures(ok, columns, ["x1", "city", "y"]) == []
    bad = {
        "serving_default": examples,
        "serving_raw": {"inputs": {"x1": {"dtype": "int64"}, "zip": {"dtype": "string"}}},
    }
    assert serving_check.check_signatures(bad, columns, ["x1", "city", "y"]) == [
        "signature 'serving_raw' takes 'x1' as int64; the schema's type is float32",
        "signature 'serving_raw' takes 'zip', not a column of the schema",
    ]
    assert serving_check.check_signatures({"serving_default": examples}, columns, []) == [
        "no 'serving_raw' signature (the model has serving_default)"
    ]


def test_serving_columns_follow_the_taxi_schema_environments():
    from tfxflow.pipeline.inputs import load_schema_and_features

    path, _ = load_schema_and_features("taxi", None, None)
    schema = text_format.Parse(open(path, encoding="utf-8").read(), schema_pb2.Schema())
    columns = serving_check.serving_columns(schema)
    assert "tips" not in columns and {"fare", "trip_miles", "company"} <= set(columns)
    assert columns["fare"] == "float32" and columns["company"] == "string" and columns["trip_start_hour"] == "int64"


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_a_model_of_each_task_serves_every_output_as_the_evaluators(task_models, task, tmp_path):
    model = task_models[task]
    tiny = model["tiny"]
    blessing, result = _check(tiny, str(tmp_path / "check"), model["export_dir"])
    assert result["reasons"] == [] and result["blessed"] is True, result["reasons"]
    outputs = {"multiclass": ["classes", "scores"], "regression": ["predictions"]}[task]
    assert sorted(result["expected"]) == outputs
    for signature in ("serving_default", "serving_raw"):
        assert sorted(result["predictions"][signature]) == outputs
        assert result["max_abs_difference"][signature] <= serving_check.DEFAULT_TOLERANCE
    if task == "multiclass":
        assert result["predictions"]["serving_raw"]["classes"][0] == ["low", "mid", "high"]
        scores = np.array(result["expected"]["scores"])
        np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)
    else:
        predictions = np.array(result["expected"]["predictions"])
        assert 15 < predictions.mean() < 30 and predictions.std() > 1  # in the label's units (about 22 +- 4)


class _Renamed(tf.Module):
    """serving_raw answers other class names than serving_default: a raw path built with another vocabulary."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(self, examples):
        parsed = tf.io.parse_example(examples, {"x1": tf.io.FixedLenFeature([], tf.float32)})
        scores = tf.nn.softmax(tf.stack([parsed["x1"], -parsed["x1"]], axis=1))
        return {"scores": scores, "classes": tf.tile(tf.constant([["a", "b"]]), [tf.shape(scores)[0], 1])}

    @tf.function(input_signature=[{"x1": tf.TensorSpec([None], tf.float32, name="x1")}])
    def serve_raw(self, features):
        scores = tf.nn.softmax(tf.stack([features["x1"], -features["x1"]], axis=1))
        return {"scores": scores, "classes": tf.tile(tf.constant([["b", "a"]]), [tf.shape(scores)[0], 1])}


def test_other_class_names_from_one_signature_are_not_pushed(trained, tiny_transform):
    module = _Renamed()
    export_dir = str(trained["folder"] / "renamed")
    tf.saved_model.save(
        module, export_dir, signatures={"serving_default": module.serve_examples, "serving_raw": module.serve_raw}
    )
    tiny = dict(
        tiny_transform,
        config=FeatureConfig.from_dict(
            {"task": "multiclass", "label": {"name": "label", "column": "city"}, "numeric": ["x1"]}
        ),
    )
    _, result = _check(tiny, str(trained["folder"] / "check-renamed"), export_dir)
    (reason,) = result["reasons"]
    assert reason.startswith("'serving_raw' answers other 'classes' than the Evaluator's model on golden row 0")
    assert "(['b', 'a'] vs ['a', 'b'])" in reason
    assert result["max_abs_difference"] == {"serving_default": 0.0, "serving_raw": 0.0}  # the scores agree


def test_rows_without_every_column_are_golden_rows_of_serving_default_only(tmp_path):
    """Golden rows come first from rows with every column (serving_raw takes one value per column), then from the
    others, which serving_default takes as they are; a serving_raw without any such row is noted, not refused."""
    path = str(tmp_path / "rows.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for i in range(6):
            feature = {"x1": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)]))}
            if i % 3 == 0:  # rows 0 and 3 have both columns
                feature["city"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a"]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    examples, instances, rows = golden.golden_rows([path], ["x1", "city"], ["x1", "city"], 4)
    assert len(examples) == 4 and rows == [0, 1] and instances == [{"x1": 0.0, "city": "a"}, {"x1": 3.0, "city": "a"}]
    result = {
        "signatures": {"serving_default": {"inputs": {"examples": {"dtype": "string"}}}, "serving_raw": {"inputs": {}}},
        "predictions": {"serving_default": {"p": [[0.1], [0.2]]}, "serving_raw": {"skipped": "no golden row ..."}},
        "answered_rows": {"serving_default": [0, 1]},
    }
    assert serving_check.verdict(result, {"p": np.array([[0.1], [0.2]])}, {}, [], 1e-5, 0.0) == []
    assert result["notes"] == ["'serving_raw' not compared: no golden row ..."]


def test_the_probe_is_asked_for_the_outputs_of_the_signature_the_evaluator_calls(trained, tmp_path):
    # Read from saved_model.pb before anything loads the model: the probe starts while TFMA loads it.
    model_dir = trained["export_dir"]
    assert model_info.signature_outputs(model_dir, "serving_default") == ["probabilities"]
    assert model_info.signature_outputs(model_dir, "no_such_signature") == []
    (tmp_path / "saved_model.pb").write_bytes(b"not a SavedModel")
    assert model_info.signature_outputs(str(tmp_path), "serving_default") == []
    assert model_info.signature_outputs(str(tmp_path / "missing"), "serving_default") == []
    config = tfma_config.EvalConfig(model_specs=[tfma_config.ModelSpec(signature_name="serving_raw", label_key="y")])
    assert golden.evaluated_signature(json_format.MessageToJson(config)) == "serving_raw"
    assert golden.evaluated_signature(json_format.MessageToJson(tfma_config.EvalConfig())) == "serving_default"
    as_fields = json_format.MessageToJson(config, preserving_proto_field_name=True)
    assert golden.evaluated_signature(as_fields) == "serving_raw"


def test_the_eval_config_names_the_model_type_tfma_finds_for_the_built_in_export(trained, tiny_transform):
    """The built-in eval config tells TFMA the model type, so TFMA does not load the model as Keras first to
    find out: it must be what TFMA's own test finds for the exported model."""
    from tensorflow_model_analysis.utils import model_util

    spec = eval_config(EvaluationConfig(), tiny_transform["config"]).model_specs[0]
    found = model_util.get_model_type(tfma_config.ModelSpec(signature_name=spec.signature_name), trained["export_dir"])
    assert spec.model_type == found == tfma.TF_GENERIC


def test_the_probe_process_has_no_keras_and_registers_tf_texts_ops_from_their_libraries(tmp_path):
    """In the probe's interpreter Keras cannot be imported (a model needing it fails as in TF Serving), and TF
    Text's ops are registered from the package's op libraries without importing its Python API."""
    import subprocess
    import sys

    script = (
        "import json, sys; from tfxflow.components import serving_probe as p; p.mark_absent(); "
        "import tensorflow as tf; from tensorflow.python.framework import op_def_registry as r; "
        "ops = ('WordpieceTokenizeWithOffsets', 'RougeL'); before = [r.get(o) is None for o in ops]; "
        "libraries = p.load_text_ops(); "
        "failed = ''\ntry:\n import tf_keras\nexcept ImportError as err:\n failed = type(err).__name__\n"
        "print(json.dumps([before, [r.get(o) is not None for o in ops], len(libraries), failed, "
        "sorted({m.split('.')[0] for m, v in sys.modules.items() if v is not None} & {'tf_keras', 'keras', "
        "'tensorflow_text', 'googleapiclient'})]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300)
    before, registered, libraries, failed, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    # A tokenizer's op (python/ops) and ROUGE-L's (python/metrics), both among TF Serving's text ops.
    assert before == [True, True] and registered == [True, True] and libraries >= 20
    assert failed == "ModuleNotFoundError" and loaded == []


def test_a_probe_started_ahead_is_the_one_the_check_takes_over(tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    made = []
    probe_class = serving_check._Probe
    monkeypatch.setattr(serving_check, "_Probe", lambda: made.append(probe_class()) or made[-1])
    try:
        assert serving_check.warm_probe() is True
        assert serving_check.warm_probe() is False  # one waits already
        result = serving_check.run_probe({**BROKEN_REQUEST, "model_dir": str(broken)})
    finally:
        serving_check.discard_warm_probe()
    (warm,) = made  # the check started none of its own
    assert "error" in result and "load_s" not in result
    assert warm.process.returncode == 0 and not os.path.exists(warm.folder)


def test_a_probe_started_for_a_check_that_never_comes_leaves_by_itself():
    probe = serving_check._Probe()
    try:
        probe.process.stdin.close()  # its caller ended without a go: the input ends
        assert probe.process.wait(timeout=120) == 0
        assert not os.path.exists(probe.result_path)
    finally:
        probe.close()
    assert not os.path.exists(probe.folder)
    assert serving_check.warm_probe() is True
    folder = serving_check._warm.folder
    process = serving_check._warm.process
    serving_check.discard_warm_probe()  # the run failed before its check: ended, and its folder removed
    assert process.poll() is not None and not os.path.exists(folder) and serving_check._warm is None


# Trains a small TF Decision Forests model in a process of its own (TF-DF imports Keras and registers its ops where
# it is imported) and saves it: argv: the folder. Prints the model's own answers for XS.
FOREST = """
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, pandas as pd, tensorflow as tf
import tensorflow_decision_forests as tfdf
rng = np.random.default_rng(0)
x = rng.normal(size=400).astype("float32")
frame = pd.DataFrame({"x": x, "y": (x + rng.normal(scale=0.3, size=400) > 0).astype("int64")})
model = tfdf.keras.GradientBoostedTreesModel(num_trees=10, verbose=0)
model.fit(tfdf.keras.pd_dataframe_to_tf_dataset(frame, label="y"), verbose=0)
model.save(sys.argv[1])
xs = np.array(json.loads(sys.argv[2]), dtype="float32")
print(json.dumps(model.predict({"x": xs}, verbose=0).tolist()))
"""


def _probe_saved_by(script, folder, xs, *args):
    """The probe's result on the model `script` saves to `folder` in a process of its own (argv: the folder, `args`,
    then `xs` as JSON; it prints its model's own answers for them), given each x as an instance; and those answers."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, folder, *args, json.dumps(xs)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = np.array(json.loads(done.stdout.strip().splitlines()[-1]))
    request = {
        "model_dir": folder,
        "examples_b64": [],
        "instances": [{"x": x} for x in xs],
        "instance_rows": list(range(len(xs))),
        "outputs": [],
        "signatures": ["serving_default"],
        "latency_calls": 5,
        "seconds": 0.05,
        "batch_sizes": [1],
    }
    return serving_check.run_probe(request), expected


@pytest.mark.integration
@pytest.mark.skipif(
    lane.name() == lane.CURRENT,
    reason="the current lane has no TF-DF: no release is built against TF 2.21 (docs/environment.md, what differs)",
)
def test_a_tf_decision_forests_model_serves_with_the_inference_ops_tf_serving_links(tmp_path):
    """TF Serving 2.16.1 links TF-DF 1.3.0's six inference ops: a TF-DF model (as a module file's run_fn trains)
    loads in the probe with TF-DF's own op library, without its Python package, and is not refused."""
    from tfxflow.components.model import text

    xs = [-2.0, -0.5, 0.0, 0.4, 1.5, 3.0]
    result, expected = _probe_saved_by(FOREST, str(tmp_path / "forest"), xs)
    assert "error" not in result, result.get("traceback", result)
    assert result["op_libraries"] == ["tensorflow_decision_forests"]
    assert set(result["ops_beyond_tensorflow"]) <= text.TF_SERVING_DECISION_FOREST_OPS
    assert {"SimpleMLCreateModelResource", "SimpleMLInferenceOpWithHandle"} <= set(result["ops_beyond_tensorflow"])
    assert result["foreign_modules"] == []  # its op library, not its Python package (which imports Keras)
    (output,) = result["predictions"]["serving_default"]
    answered = np.array(result["predictions"]["serving_default"][output])
    np.testing.assert_allclose(answered, expected, atol=1e-6)
    assert answered.min() < 0.2 and answered.max() > 0.8  # the trees' own answers, not a constant
    reasons = serving_check.verdict(
        result, {output: expected}, {"x": "float32"}, ["x", "y"], 1e-5, 0.0, required=("serving_default",)
    )
    assert reasons == []


# A Keras 3 model (`import keras`, as a user's module file may bring) saved as an attribute of a tf.Module, as
# Google's modules save a tf-keras model; with TRACK, its tf.Variables are tracked beside it. argv: the folder,
# TRACK or not, the inputs. Prints the model's own answers.
KERAS3 = """
import json, sys
import keras, numpy as np, tensorflow as tf
assert keras.__version__.startswith("3."), keras.__version__
keras.utils.set_random_seed(0)
inputs = keras.Input(shape=(1,), name="x")
hidden = keras.layers.Dense(4, activation="tanh")(inputs)
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(hidden))

class Served(tf.Module):
    def __init__(self):
        super().__init__()
        self.model = model
        if sys.argv[2] == "TRACK":
            self.model_variables = [variable.value for variable in model.variables]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(self, x):
        return {"outputs": self.model(tf.reshape(x, [-1, 1]))}

served = Served()
tf.saved_model.save(served, sys.argv[1], signatures={"serving_default": served.serve})
xs = np.array(json.loads(sys.argv[3]), dtype="float32").reshape(-1, 1)
print(json.dumps(model.predict(xs, verbose=0).tolist()))
"""


@pytest.mark.integration
def test_a_keras_3_model_tf_servings_loader_cannot_restore_is_refused_and_its_fix_is_served(tmp_path):
    """TF Serving loads a SavedModel with TensorFlow's session loader, as the probe does: a Keras 3 model saved as a
    tf.Module's attribute loads in TensorFlow 2 but its variables are not found there (the SavedModel holds Keras 3's
    wrappers); tracking its tf.Variables beside it (tests/data/keras3_taxi_module.py) is served."""

    xs = [-2.0, -0.5, 0.0, 0.4, 1.5, 3.0]
    results = {how: _probe_saved_by(KERAS3, str(tmp_path / how), xs, how) for how in ("ATTRIBUTE", "TRACK")}
    refused, _ = results["ATTRIBUTE"]
    # The cause, not TensorFlow's "Graph execution error:" header.
    assert refused["predictions"]["serving_default"]["error"].startswith(
        "FailedPreconditionError: Could not find variable dense"
    )
    assert serving_check.verdict(refused, {}, {"x": "float32"}, ["x"], 1e-5, 0.0, required=("serving_default",))
    served, expected = results["TRACK"]
    answered = np.array(served["predictions"]["serving_default"]["outputs"])
    np.testing.assert_allclose(answered, expected, atol=1e-6)
    assert answered.std() > 0
    assert (
        serving_check.verdict(
            served, {"outputs": expected}, {"x": "float32"}, ["x"], 1e-5, 0.0, required=("serving_default",)
        )
        == []
    )
