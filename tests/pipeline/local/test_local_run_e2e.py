"""The whole pipeline with LocalDagRunner, through the `tfxflow` CLI, on a sample of the taxi data."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfxflow.components.model.features import FeatureConfig
from tfxflow.pipeline.inputs import bundled_dataset_dir
from tfxflow.pipeline.local.runner import NAME_WIDTH
from tfxflow.pipeline.reports import run_record as report

pytestmark = [pytest.mark.e2e, pytest.mark.current_lane]

TRANSFORM_MAX_ROWS = 500  # of about 1,500 training rows: Transform analyzes every 3rd
TRAIN_FLAGS = [
    "--train-steps",
    "120",
    "--batch-size",
    "64",
    "--eval-every-steps",
    "60",
    "--transform-max-rows",
    str(TRANSFORM_MAX_ROWS),
]
EVAL_MAX_ROWS = 200  # of about 500 eval rows: the Evaluator judges every 3rd
UPSTREAM = ("CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "DataGate", "Transform", "Trainer")


@pytest.fixture(scope="module")
def taxi_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("taxi")
    data = helpers.write_taxi_sample(str(base / "data"), rows=2000)
    home = str(base / "home")
    args = ["run", "--home", home, "--data-root", data, *TRAIN_FLAGS, "--eval-max-rows", str(EVAL_MAX_ROWS)]
    # A machine's first run: no empty MLflow store in the cache yet, so this run makes it (pipeline/tracking_store.py).
    first = helpers.run_cli(*args, env={"XDG_CACHE_HOME": str(base / "cache")})
    serving = helpers.tree_snapshot(os.path.join(home, "serving"))
    unchanged = helpers.run_cli(*args)
    after_unchanged = {
        "serving": helpers.tree_snapshot(os.path.join(home, "serving")),
        "runs": report.run_ids(report.open_store(os.path.join(home, "metadata", "metadata.sqlite")), "tfxflow-taxi"),
    }
    second = helpers.run_cli(*args, "--force")
    return {
        "home": home,
        "data": data,
        "first": first,
        "second": second,
        "unchanged": unchanged,
        "serving_after_first": serving,
        "after_unchanged": after_unchanged,
    }


def test_identical_rerun_is_answered_without_starting_tfx(taxi_runs):
    unchanged = taxi_runs["unchanged"]
    assert unchanged.returncode == 0, unchanged.stderr[-3000:]
    first_run = report.run_ids(
        report.open_store(os.path.join(taxi_runs["home"], "metadata", "metadata.sqlite")), "tfxflow-taxi"
    )[0]
    assert f"tfxflow: pipeline tfxflow-taxi is up to date: nothing changed since run {first_run}" in unchanged.stdout
    assert "binary_accuracy 0." in unchanged.stdout and "pushed:         version " in unchanged.stdout
    assert taxi_runs["after_unchanged"]["runs"] == [first_run]  # no pipeline run, nothing pushed
    assert taxi_runs["after_unchanged"]["serving"] == taxi_runs["serving_after_first"]


def test_first_run_succeeds_and_reports_each_component(taxi_runs):
    first = taxi_runs["first"]
    assert first.returncode == 0, first.stderr[-3000:]
    for component in UPSTREAM + ("Evaluator", "Pusher"):
        assert f"{component:<{NAME_WIDTH}} ran" in first.stdout
    assert "rows read:      " in first.stdout and "binary_accuracy" in first.stdout
    assert "blessed:        yes" in first.stdout
    # The example of a progress line is this run's (the defaults: tracking on, drift check on).
    with open(os.path.join(os.path.dirname(helpers.__file__), os.pardir, "docs", "running.md"), encoding="utf-8") as f:
        counter = re.search(r"`(\[\d+/\d+\]) Transform \.\.\. ", f.read()).group(1)
    assert f"{counter} {'Transform':<{NAME_WIDTH}} ran" in first.stdout
    assert "data gate:      passed" in first.stdout
    # The Trainer's line: model, steps and devices, and the last epoch's speed (training_info.json's).
    assert re.search(
        r"training:       default \([\d,]+ parameters\), 120 steps of 64 on the CPU, float32", first.stdout
    )
    assert re.search(r"last epoch: [\d,]+ examples/s, [\d.]+ ms a step", first.stdout)
    # ExampleGen's counts, checked by the gate against StatisticsGen's; the Evaluator's bounded sample.
    run = report.read_run(os.path.join(taxi_runs["home"], "metadata", "metadata.sqlite"), "tfxflow-taxi")
    eval_rows = run.rows["eval"]
    assert (
        f"row counts: 2,000 read = train {run.rows['train']:,}, eval {eval_rows:,} written = StatisticsGen's"
        in first.stdout
    )
    every = -(-eval_rows // EVAL_MAX_ROWS)
    sampled = -(-eval_rows // every)
    assert run.eval_sample == {"eval": {"rows": eval_rows, "every": every, "sampled": sampled}}
    assert int(run.metrics["example_count"]) == sampled
    assert f"on a sample of {sampled:,} of the {eval_rows:,} eval rows (every 3rd)" in first.stdout
    # Transform's analyzers on a sample of the training split, recorded on its graph and in the summary.
    train_rows = run.rows["train"]
    every = -(-train_rows // TRANSFORM_MAX_ROWS)
    sampled = -(-train_rows // every)
    assert run.analyze_sample == {"train": {"rows": train_rows, "every": every, "sampled": sampled}}
    nth = {2: "2nd", 3: "3rd", 4: "4th"}[every]
    assert (
        f"transform:      analyzed a sample of {sampled:,} of the {train_rows:,} train rows (every {nth}) "
        "(--transform-max-rows)" in first.stdout
    )
    # The serving check: loaded in a TensorFlow-only process, golden rows agree with the Evaluator's model.
    assert f"{'ServingCheck':<{NAME_WIDTH}} ran" in first.stdout
    assert "serving check:  passed" in first.stdout
    assert "golden rows vs. the Evaluator's model: max difference serving_default 0, serving_raw 0" in first.stdout
    check = run.serving_check
    assert check["blessed"] and check["foreign_modules"] == [] and check["golden_rows"] == 64
    assert (
        f"p50 {check['latency_ms']['p50']:.2f} ms, p99 {check['latency_ms']['p99']:.2f} ms at batch 1" in first.stdout
    )
    # Library chatter goes to the run's log file, not the console.
    assert "INFO" not in first.stdout and "Traceback" not in first.stderr
    # Nor MLflow's lines as it makes its first store, nor TensorFlow's native ones as it loads.
    assert not re.search(r"INFO|alembic|Unable to register", first.stderr), first.stderr[-3000:]
    assert os.listdir(os.path.join(os.path.dirname(taxi_runs["home"]), "cache", "tfxflow"))  # made by this run


def test_pushed_model_loads_from_the_serving_dir_and_predicts_raw_examples(taxi_runs):
    serving = os.path.join(taxi_runs["home"], "serving")
    versions = helpers.pushed_versions(serving, "taxi")
    assert versions and all(v.isdigit() for v in versions)
    model_dir = os.path.join(serving, "taxi", versions[-1])
    assert os.path.isfile(os.path.join(model_dir, "saved_model.pb"))
    assert os.path.isdir(os.path.join(model_dir, "variables"))

    rows = helpers.read_csv_rows(os.path.join(taxi_runs["data"], "data.csv"), 50)
    schema = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
    loaded = tf.saved_model.load(model_dir)
    # Serving requests carry no label column.
    serving_examples = helpers.serialize_examples(rows, schema, drop=("tips",))
    probabilities = loaded.signatures["serving_default"](examples=tf.constant(serving_examples))["probabilities"]
    probabilities = probabilities.numpy()
    assert probabilities.shape == (50, 1) and probabilities.dtype == np.float32
    assert np.all(np.isfinite(probabilities)) and np.all((probabilities >= 0) & (probabilities <= 1))
    assert probabilities.std() > 0  # not a constant

    # serving_raw takes one tensor per feature column (TF Serving's JSON API) and agrees with serving_default.
    features = FeatureConfig.load(os.path.join(bundled_dataset_dir("taxi"), "features.yaml"))
    raw = loaded.signatures["serving_raw"]
    specs = raw.structured_input_signature[1]
    assert set(specs) == set(features.feature_columns)
    complete = [i for i, r in enumerate(rows) if all(r[c] != "" for c in features.feature_columns)][:10]
    assert complete
    tensors = {
        c: tf.constant(
            [
                float(rows[i][c])
                if specs[c].dtype == tf.float32
                else int(float(rows[i][c]))
                if specs[c].dtype == tf.int64
                else rows[i][c]
                for i in complete
            ],
            dtype=specs[c].dtype,
        )
        for c in specs
    }
    np.testing.assert_allclose(raw(**tensors)["probabilities"].numpy(), probabilities[complete], rtol=1e-5)

    # TF Serving's warmup records (real eval rows, both signatures, batches of 1 and 8) replay on the model.
    from tensorflow_serving.apis import prediction_log_pb2

    warmup = [
        prediction_log_pb2.PredictionLog.FromString(r.numpy()).predict_log.request
        for r in tf.data.TFRecordDataset(os.path.join(model_dir, "assets.extra", "tf_serving_warmup_requests"))
    ]
    assert sorted(r.model_spec.signature_name for r in warmup) == ["serving_default"] * 2 + ["serving_raw"] * 2
    for request in warmup:
        inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
        out = loaded.signatures[request.model_spec.signature_name](**inputs)["probabilities"].numpy()
        assert out.shape[0] in (1, 8) and np.all((out >= 0) & (out <= 1))

    # transform_features (used by TFMA) derives the label from the raw columns.
    transformed = loaded.signatures["transform_features"](
        examples=tf.constant(helpers.serialize_examples(rows, schema))
    )
    expected = [int(float(r["tips"]) > 0.2 * float(r["fare"])) for r in rows]
    assert transformed["big_tipper"].numpy().tolist() == expected


def test_forced_second_run_is_served_from_the_cache(taxi_runs):
    second = taxi_runs["second"]
    assert second.returncode == 0, second.stderr[-3000:]
    metadata = os.path.join(taxi_runs["home"], "metadata", "metadata.sqlite")
    store = report.open_store(metadata)
    runs = report.run_ids(store, "tfxflow-taxi")
    assert len(runs) == 2
    first, latest = (report.read_run(metadata, "tfxflow-taxi", run_id) for run_id in runs)
    for component in UPSTREAM:
        assert first.component(component).state == "done"
        if component == "DataGate":
            continue
        assert latest.component(component).state == "cached", component
        assert f"{component:<{NAME_WIDTH}} cached" in second.stdout
    # The gate runs again: a model is blessed now, so it compares the data with that model's data.
    assert latest.component("DataGate").state == "done"
    assert "drift: no blessed model yet, nothing to compare with" in taxi_runs["first"].stdout
    assert "drift vs. the last blessed model's data: 13 features compared" in second.stdout
    assert "distance 0.0000 (threshold" in second.stdout or "divergence 0.0000 (threshold" in second.stdout
    # A cached Trainer hands on the same model artifact.
    assert latest.component("Trainer").outputs["model"][0].id == first.component("Trainer").outputs["model"][0].id


def test_runs_are_tracked_in_the_embedded_mlflow_store(taxi_runs):
    from mlflow import MlflowClient

    store = os.path.join(taxi_runs["home"], "mlflow", "mlflow.db")
    mlflow_client = MlflowClient(f"sqlite:///{store}")
    experiment = mlflow_client.get_experiment_by_name("tfxflow-taxi")
    # artifacts beside the store, not in ./mlruns of whatever folder the run started in
    assert experiment.artifact_location == "file://" + os.path.join(taxi_runs["home"], "mlflow", "artifacts")
    runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert os.listdir(os.path.join(taxi_runs["home"], "mlflow", "artifacts"))
    assert all(r.data.tags["tfxflow.pushed"] == "yes" for r in runs)
    assert runs[0].data.metrics["components.cached"] == 0 and runs[1].data.metrics["components.cached"] >= 6


def test_a_model_over_the_latency_bound_is_not_pushed(taxi_runs):
    home = taxi_runs["home"]
    before = helpers.tree_snapshot(os.path.join(home, "serving"))
    slow = helpers.run_cli(
        "run",
        "--home",
        home,
        "--data-root",
        taxi_runs["data"],
        *TRAIN_FLAGS,
        "--eval-max-rows",
        str(EVAL_MAX_ROWS),
        "--max-latency-ms",
        "0.001",
    )
    assert slow.returncode == 0, slow.stderr[-3000:]
    assert "blessed:        yes" in slow.stdout and "serving check:  FAILED (not pushed)" in slow.stdout
    assert "over --max-latency-ms 0.001" in slow.stdout and "(bound 0.001 ms)" in slow.stdout
    assert "pushed:         no (the serving check failed); the served model is untouched" in slow.stdout
    assert helpers.tree_snapshot(os.path.join(home, "serving")) == before
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(f"sqlite:///{os.path.join(home, 'mlflow', 'mlflow.db')}")
    (latest,) = mlflow_client.search_runs(
        [mlflow_client.get_experiment_by_name("tfxflow-taxi").experiment_id],
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    assert latest.data.tags["tfxflow.serving_check"] == "failed"
    assert "over --max-latency-ms 0.001" in latest.data.tags["tfxflow.serving_check_failed_because"]
    assert latest.data.tags["tfxflow.pushed"] == "no" and latest.data.metrics["serving.latency_p99_ms"] > 0.001


def test_rollback_serves_the_previous_model_and_the_next_run_does_not_push_it_again(taxi_runs):
    """A different model is pushed, rolled back; the same command again trains nothing new (cached Trainer),
    and its model, blessed again, is not pushed."""
    home = taxi_runs["home"]
    other = [
        "run",
        "--home",
        home,
        "--data-root",
        taxi_runs["data"],
        *TRAIN_FLAGS,
        "--eval-max-rows",
        str(EVAL_MAX_ROWS),
        "--learning-rate",
        "0.003",
        "--max-regression",
        "1",
    ]
    pushed = helpers.run_cli(*other)
    assert pushed.returncode == 0 and "pushed:         version " in pushed.stdout, pushed.stderr[-3000:]
    serving = os.path.join(home, "serving", "taxi")
    bad = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")[-1]
    rolled = helpers.run_cli("rollback", "--home", home, "--reason", "e2e: the new model misbehaves")
    assert rolled.returncode == 0, rolled.stderr[-3000:]
    versions = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    served = versions[-1]
    assert int(served) > int(bad) and bad in versions  # a new, highest version; the bad one stays, unserved
    from tfxflow.components.serving.pusher import model_fingerprint

    first_version = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")[0]
    assert model_fingerprint(os.path.join(serving, served)) == model_fingerprint(os.path.join(serving, first_version))
    again = helpers.run_cli(*other)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{'Trainer':<{NAME_WIDTH}} cached" in again.stdout
    assert f"pushed:         no (this model is the one rolled back from version {bad} on " in again.stdout
    assert "e2e: the new model misbehaves; train a new model" in again.stdout
    assert helpers.pushed_versions(os.path.join(home, "serving"), "taxi")[-1] == served
    # This run's blessing of the rolled-back model was revoked after it: the next baseline is the served model.
    run = report.read_run(os.path.join(home, "metadata", "metadata.sqlite"), "tfxflow-taxi")
    blessing = report.first_output(run.component("Evaluator"), "blessing")
    store = report.open_store(os.path.join(home, "metadata", "metadata.sqlite"))
    [blessing] = store.get_artifacts_by_id([blessing.id])
    assert blessing.custom_properties["blessed"].int_value == 0
    assert "e2e: the new model misbehaves" in blessing.custom_properties["tfxflow_rolled_back"].string_value
