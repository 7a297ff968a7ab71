"""`compare` on runs of a real MLflow server: differing params, key metrics, the best run, CSV, Markdown, PNG."""

import csv
import io

import pytest
from mlflow import MlflowClient

from tfxflow.pipeline.reports import compare


@pytest.fixture(scope="module")
def mlflow_runs(mlflow_server):
    mlflow_client = MlflowClient(mlflow_server.uri)
    experiment_id = mlflow_client.create_experiment("compare-unit")
    for rate, accuracy, seconds in (("0.001", 0.81, 60.0), ("0.003", 0.86, 58.0), ("0.01", 0.79, 55.0)):
        run = mlflow_client.create_run(experiment_id, tags={"tfxflow.blessed": "yes"})
        for key, value in (("model.learning_rate", rate), ("training.batch_size", "256"), ("code.git_commit", "abc")):
            mlflow_client.log_param(run.info.run_id, key, value)
        mlflow_client.log_metric(run.info.run_id, "eval.binary_accuracy", accuracy)
        mlflow_client.log_metric(run.info.run_id, "baseline.binary_accuracy", 0.8)
        for epoch in (1, 2, 3):
            mlflow_client.log_metric(run.info.run_id, "val.binary_accuracy", accuracy - 0.1 / epoch, step=epoch)
        mlflow_client.log_metric(run.info.run_id, "duration.pipeline", seconds)
        mlflow_client.log_metric(run.info.run_id, "data.rows.train", 11276)
        mlflow_client.set_terminated(run.info.run_id)
        # A run the data gate refused after each: no model, no metric but the anomalies.
        refused = mlflow_client.create_run(experiment_id)
        mlflow_client.log_metric(refused.info.run_id, "data.anomalies", 1)
        mlflow_client.set_terminated(refused.info.run_id, "FAILED")
    return mlflow_client


@pytest.fixture(scope="module")
def three_runs(mlflow_runs):
    loaded = compare.load_runs(mlflow_runs, "compare-unit", last=5)
    assert loaded.skipped == 3  # the refused runs between them
    return loaded.runs


def test_runs_that_did_not_train_are_left_out_and_counted_unless_all(mlflow_runs):
    last_two = compare.load_runs(mlflow_runs, "compare-unit", last=2)
    assert [r.params["model.learning_rate"] for r in last_two.runs] == ["0.003", "0.01"]
    assert last_two.skipped == 2  # the refused runs after each of the two
    everything = compare.load_runs(mlflow_runs, "compare-unit", last=4, include_all=True)
    assert [r.status for r in everything.runs] == ["FINISHED", "FAILED", "FINISHED", "FAILED"]
    assert everything.skipped == 0 and not everything.runs[-1].trained


def test_differing_params_metrics_and_the_best_run(three_runs):
    result = compare.compare(three_runs)
    assert [run.params["model.learning_rate"] for run in result.runs] == ["0.001", "0.003", "0.01"]  # oldest first
    assert result.params == ["model.learning_rate"]
    assert result.metrics == ["eval.binary_accuracy", "data.rows.train", "duration.pipeline"]
    assert result.best_run == three_runs[1].run_id
    text = compare.as_text(result)
    best_line = next(line for line in text.splitlines() if line.startswith(three_runs[1].run_id[:8]))
    assert "0.003" in best_line and "0.8600" in best_line and "11,276" in best_line and best_line.endswith("*")
    # a duration is better when lower; the fastest run is not the most accurate one
    assert compare.compare(three_runs, "duration.pipeline").best_run == three_runs[2].run_id
    assert compare.compare(three_runs[2:], "eval.binary_accuracy").params == []


def test_csv_markdown_and_plot(three_runs, tmp_path):
    result = compare.compare(three_runs)
    rows = list(csv.reader(io.StringIO(compare.as_csv(result))))
    assert rows[0] == [
        "run",
        "status",
        "blessed",
        "pushed",
        "model.learning_rate",
        "eval.binary_accuracy",
        "data.rows.train",
        "duration.pipeline",
        "best",
    ]
    assert [row[4] for row in rows[1:]] == ["0.001", "0.003", "0.01"] and rows[2][-1] == "*"
    markdown = compare.as_markdown(result).splitlines()
    assert markdown[0].startswith("| run | status |") and len(markdown) == 5


def test_the_plot_puts_each_run_beside_its_baseline_and_overlays_the_validation_curves(
    mlflow_runs, three_runs, tmp_path
):
    result = compare.compare(three_runs)
    curves = compare.validation_curves(mlflow_runs, result.runs, "eval.binary_accuracy")
    assert [len(values) for values in curves.values()] == [3, 3, 3]
    assert curves[three_runs[1].run_id] == pytest.approx([0.76, 0.81, 0.86 - 0.1 / 3])
    path = str(tmp_path / "accuracy.png")
    compare.plot(result, "eval.binary_accuracy", path, curves)
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.shape[1] > 2 * image.shape[0]  # two panels side by side
    with pytest.raises(ValueError, match="none of these 3 runs has the metric 'eval.auc'.*eval.binary_accuracy"):
        compare.plot(result, "eval.auc", str(tmp_path / "auc.png"))
    assert compare.baseline_metric("eval.auc") == "baseline.auc" and compare.curve_metric("eval.auc") == "val.auc"
