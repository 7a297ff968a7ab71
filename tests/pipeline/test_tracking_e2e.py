"""Every pipeline run is an MLflow run on a real `mlflow server`: params, curves, eval metrics, tags,
artifacts, durations, and the MLflow run id recorded in ML Metadata; an unreachable server stops the run."""

import importlib.metadata
import json
import os

import pytest
from mlflow import MlflowClient

from tests import helpers
from tfxflow.pipeline.reports import run_record as report

pytestmark = pytest.mark.e2e

FLAGS = [
    "--train-steps",
    "40",
    "--batch-size",
    "64",
    "--eval-every-steps",
    "20",
    "--experiment",
    "e2e",
    "--slice-by",
    "payment_type",
]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """This module's own `mlflow server`: its tests count the registry's versions of `taxi` and read its
    `champion`, which the session's shared server also gets from other taxi runs (the faults scenario's)."""
    server = helpers.MlflowServer(str(tmp_path_factory.mktemp("tracking_mlflow"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tracked_runs(mlflow_server, tmp_path_factory):
    base = tmp_path_factory.mktemp("tracked")
    data = helpers.write_taxi_sample(str(base / "data"), rows=1500)
    home = str(base / "home")
    results = [
        helpers.run_cli(
            "run",
            "--home",
            home,
            "--data-root",
            data,
            "--mlflow-uri",
            mlflow_server.uri,
            "--learning-rate",
            rate,
            *FLAGS,
        )
        for rate in ("0.001", "0.003")
    ]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    mlflow_client = MlflowClient(mlflow_server.uri)
    experiment = mlflow_client.get_experiment_by_name("e2e")
    runs = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    return {"home": home, "results": results, "client": mlflow_client, "runs": runs}


def test_each_pipeline_run_is_one_finished_mlflow_run_with_its_params(tracked_runs):
    runs = tracked_runs["runs"]
    assert len(runs) == 2
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert [r.data.params["model.learning_rate"] for r in runs] == ["0.001", "0.003"]
    params = runs[0].data.params
    assert params["train_steps"] == "40" and params["training.batch_size"] == "64"
    assert params["trainer.replicas"] == "1" and params["trainer.precision_policy"] == "float32"
    assert params["versions.tfx"] == importlib.metadata.version("tfx") and len(params["data.schema_sha256"]) == 16
    assert params["data.root"].endswith("/data")
    for run, result in zip(runs, tracked_runs["results"], strict=True):
        assert f"mlflow:         run {run.info.run_id} in experiment 'e2e'" in result.stdout


def test_curves_eval_metrics_rows_and_durations(tracked_runs):
    mlflow_client, run = tracked_runs["client"], tracked_runs["runs"][0]
    history = mlflow_client.get_metric_history(run.info.run_id, "val.loss")
    assert [m.step for m in history] == [1, 2]  # 40 steps, validated every 20
    assert all(m.value > 0 for m in history)
    metrics = run.data.metrics
    assert metrics["data.rows.train"] + metrics["data.rows.eval"] == 1500
    assert metrics["data.anomalies"] == 0
    assert 0.5 < metrics["eval.binary_accuracy"] <= 1.0
    assert metrics["eval.example_count"] == metrics["data.rows.eval"]
    # per slice: one series per payment type
    assert metrics["eval_slice.payment_type_Cash.example_count"] > 0
    assert 0 <= metrics["eval_slice.payment_type_Cash.binary_accuracy"] <= 1
    assert metrics["duration.Transform"] > 1 and metrics["duration.pipeline"] > metrics["duration.Transform"]
    # The second run reuses ExampleGen, statistics, schema and Transform from the cache.
    assert tracked_runs["runs"][1].data.metrics["components.cached"] >= 4


def test_tags_artifacts_and_the_link_to_ml_metadata(tracked_runs, tmp_path):
    mlflow_client, runs, home = tracked_runs["client"], tracked_runs["runs"], tracked_runs["home"]
    versions = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    tags = runs[0].data.tags
    assert tags["tfxflow.blessed"] == "yes" and tags["tfxflow.pushed"] == "yes"
    assert tags["tfxflow.pushed_version"] == versions[0]
    assert tags["tfxflow.model_uri"].startswith(os.path.join(home, "pipeline_root", "Trainer", "model"))
    folder = mlflow_client.download_artifacts(runs[0].info.run_id, "summaries", str(tmp_path))
    with open(os.path.join(folder, "evaluation.json"), encoding="utf-8") as f:
        evaluation = json.load(f)
    assert evaluation["overall"]["binary_accuracy"] == pytest.approx(runs[0].data.metrics["eval.binary_accuracy"])
    schema = mlflow_client.download_artifacts(runs[0].info.run_id, "data/schema.pbtxt", str(tmp_path))
    with open(schema, encoding="utf-8") as f:
        assert 'name: "payment_type"' in f.read()
    anomalies = mlflow_client.download_artifacts(runs[0].info.run_id, "data/anomalies.txt", str(tmp_path))
    with open(anomalies, encoding="utf-8") as f:
        assert f.read() == "no anomalies\n"
    # ML Metadata holds each pipeline run's MLflow run id (MlflowStart's output).
    metadata = os.path.join(home, "metadata", "metadata.sqlite")
    pipeline_runs = report.run_ids(report.open_store(metadata), "tfxflow-taxi")
    recorded = []
    for run_id in pipeline_runs:
        artifact = report.read_run(metadata, "tfxflow-taxi", run_id).component("MlflowStart").outputs["run_id"][0]
        with open(artifact.uri, encoding="utf-8") as f:
            recorded.append(f.read())
    assert recorded == [r.info.run_id for r in runs]


def test_blessed_pushed_models_are_registered_and_the_alias_is_on_the_served_version(tracked_runs, mlflow_server):
    import numpy as np

    mlflow_client, runs, home = tracked_runs["client"], tracked_runs["runs"], tracked_runs["home"]
    served = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    versions = sorted(mlflow_client.search_model_versions("name='taxi'"), key=lambda v: int(v.version))
    assert [v.version for v in versions] == ["1", "2"]
    assert [v.run_id for v in versions] == [r.info.run_id for r in runs]
    assert [v.tags["tfxflow.pushed_version"] for v in versions] == served
    champion = mlflow_client.get_model_version_by_alias("taxi", "champion")
    assert champion.version == "2" and champion.tags["tfxflow.pushed_version"] == served[-1]
    # The registered model loads through MLflow's pyfunc and predicts what the served SavedModel predicts.
    data = os.path.join(os.path.dirname(home), "data", "data.csv")
    predicted, expected = helpers.champion_and_served_predictions(mlflow_server.uri, data, home)
    assert predicted.shape == (8, 1)
    np.testing.assert_allclose(predicted, expected, rtol=1e-5)


def test_compare_shows_the_differing_param_and_both_metrics(tracked_runs, mlflow_server, tmp_path):
    markdown = str(tmp_path / "runs.md")
    result = helpers.run_cli(
        "compare",
        "--mlflow-uri",
        mlflow_server.uri,
        "--experiment",
        "e2e",
        "--last",
        "2",
        "--markdown",
        markdown,
        "--plot",
        str(tmp_path / "accuracy.png"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "model.learning_rate" in lines[0] and "eval.binary_accuracy" in lines[0]
    for run, rate in zip(tracked_runs["runs"], ("0.001", "0.003"), strict=True):
        row = next(line for line in lines if line.startswith(run.info.run_id[:8]))
        assert rate in row and f"{run.data.metrics['eval.binary_accuracy']:.4f}" in row
    assert sum(line.rstrip().endswith("*") for line in lines[2:4]) == 1
    with open(markdown, encoding="utf-8") as f:
        assert "| model.learning_rate |" in f.read()
    assert os.path.getsize(tmp_path / "accuracy.png") > 1000
    # The plot's baseline bar: the second run was judged against the first run's blessed model; the first had none.
    first, second = (run.data.metrics for run in tracked_runs["runs"])
    assert "baseline.binary_accuracy" not in first and 0.5 < second["baseline.binary_accuracy"] <= 1


def test_an_unreachable_server_stops_before_any_work(tmp_path):
    uri = f"http://127.0.0.1:{helpers.free_port()}"
    data = helpers.write_taxi_sample(str(tmp_path / "data"), rows=100)
    result = helpers.run_cli(
        "run", "--home", str(tmp_path / "home"), "--data-root", data, "--mlflow-uri", uri, *FLAGS, timeout=300
    )
    assert result.returncode == 2
    assert f"error: MLflow tracking server {uri} cannot be reached (" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "home" / "pipeline_root")
    assert not os.path.exists(tmp_path / "home" / "serving")


def test_optional_tracking_runs_untracked_when_the_server_is_down(tmp_path):
    uri = f"http://127.0.0.1:{helpers.free_port()}"
    header_only = tmp_path / "data"
    header_only.mkdir()
    with open(
        os.path.join(helpers.write_taxi_sample(str(tmp_path / "sample"), rows=1), "data.csv"), encoding="utf-8"
    ) as f:
        (header_only / "data.csv").write_text(f.readline())
    result = helpers.run_cli(
        "run",
        "--home",
        str(tmp_path / "home"),
        "--data-root",
        str(header_only),
        "--mlflow-uri",
        uri,
        "--tracking",
        "optional",
        *FLAGS,
        timeout=300,
    )
    # The warning comes first; the run goes on untracked (and here stops at the header-only file).
    assert f"warning: MLflow tracking server {uri} cannot be reached" in result.stderr
    assert "the run is not tracked (--tracking optional)" in result.stderr
    assert "mlflow:  off (the store did not answer)" in result.stdout
    assert result.returncode == 3 and "no data rows" in result.stderr
