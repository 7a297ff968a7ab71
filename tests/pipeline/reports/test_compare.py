"""`compare` on runs of a real MLflow server: differing params, key metrics, the best run, CSV, Markdown, PNG."""

import csv
import io

import pytest
from mlflow import MlflowClient

from tfxflow.pipeline.reports import compare


@pytest.fixture(scope="module")
def three_runs(mlflow_server):
    mlflow_client = MlflowClient(mlflow_server.uri)
    experiment_id = mlflow_client.create_experiment("compare-unit")
    for rate, accuracy, seconds in (("0.001", 0.81, 60.0), ("0.003", 0.86, 58.0), ("0.01", 0.79, 61.0)):
        run = mlflow_client.create_run(experiment_id, tags={"tfxflow.blessed": "yes"})
        for key, value in (("model.learning_rate", rate), ("training.batch_size", "256"), ("code.git_commit", "abc")):
            mlflow_client.log_param(run.info.run_id, key, value)
        mlflow_client.log_metric(run.info.run_id, "eval.binary_accuracy", accuracy)
        mlflow_client.log_metric(run.info.run_id, "duration.pipeline", seconds)
        mlflow_client.log_metric(run.info.run_id, "data.rows.train", 11276)
        mlflow_client.set_terminated(run.info.run_id)
    return compare.load_runs(mlflow_client, "compare-unit", last=5)


def test_differing_params_metrics_and_the_best_run(three_runs):
    result = compare.compare(three_runs)
    assert [run.params["model.learning_rate"] for run in result.runs] == ["0.001", "0.003", "0.01"]  # oldest first
    assert result.params == ["model.learning_rate"]
    assert result.metrics == ["eval.binary_accuracy", "data.rows.train", "duration.pipeline"]
    assert result.best_run == three_runs[1].run_id
    text = compare.as_text(result)
    best_line = next(line for line in text.splitlines() if line.startswith(three_runs[1].run_id[:8]))
    assert "0.003" in best_line and "0.8600" in best_line and "11,276" in best_line and best_line.endswith("*")
    # a duration is better when lower
    assert compare.compare(three_runs, "duration.pipeline").best_run == three_runs[1].run_id
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
    path = str(tmp_path / "accuracy.png")
    compare.plot(result, "eval.binary_accuracy", path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no run has the metric 'eval.auc'"):
        compare.plot(result, "eval.auc", str(tmp_path / "auc.png"))
