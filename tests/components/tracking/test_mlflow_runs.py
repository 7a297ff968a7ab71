"""A pipeline run's MLflow run: params and metric names as MLflow takes them, where an embedded store keeps its
artifacts, the pipeline run's key, and the tracking URI with its credentials."""

import os

import pytest

from tfxflow.components.tracking.mlflow_runs import artifact_location, flatten, metric_name, resolve_uri, run_key_for


def test_params_are_flattened_to_strings_and_metric_names_cleaned():
    assert flatten({"training": {"batch_size": 256, "units": [128, 64]}, "seed": 1}) == {
        "training.batch_size": "256",
        "training.units": "[128, 64]",
        "seed": "1",
    }
    assert metric_name("payment_type=Credit Card,hour=3") == "payment_type_Credit Card_hour_3"


def test_embedded_store_artifacts_live_beside_it():
    assert artifact_location("sqlite:////h/mlflow/mlflow.db") == "file:///h/mlflow/artifacts"
    assert artifact_location("http://127.0.0.1:5000") is None


def test_run_key_falls_back_to_the_execution_folder_when_kfp_leaves_the_placeholder():
    assert run_key_for("20261129-203511-1a2b3c4d", "/root/MlflowStart/run_id/7/value") == "20261129-203511-1a2b3c4d"
    run_one = run_key_for("{{$.pipeline_job_uuid}}", "minio://mlpipeline/v2/artifacts/p/run-1/MlflowStart/run_id")
    retry = run_key_for("", "minio://mlpipeline/v2/artifacts/p/run-1/MlflowStart/run_id")
    run_two = run_key_for("{{$.pipeline_job_uuid}}", "minio://mlpipeline/v2/artifacts/p/run-2/MlflowStart/run_id")
    assert run_one == retry and run_one.startswith("uri-") and run_two != run_one


def test_tracking_uri_comes_from_the_environment_when_the_parameter_is_empty(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.mlflow.svc:5000")
    assert resolve_uri("") == "http://mlflow.mlflow.svc:5000"
    assert resolve_uri("sqlite:////data/mlflow.db") == "sqlite:////data/mlflow.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(ValueError, match="MLFLOW_TRACKING_URI"):
        resolve_uri("")


def test_credentials_in_the_containers_uri_move_to_mlflows_variables():
    """A Kubeflow secret may hold the URI with user:password: the steps' MLflow calls get them from the
    variables MLflow's client reads, and nothing MLflow shows (its errors print the URL) carries them."""
    from unittest import mock

    # patch.dict restores the whole environment, the variables the code under test adds included.
    with mock.patch.dict(os.environ, {"MLFLOW_TRACKING_URI": "http://alice:hunter2@mlflow.mlflow.svc:5000"}):
        os.environ.pop("MLFLOW_TRACKING_USERNAME", None)
        os.environ.pop("MLFLOW_TRACKING_PASSWORD", None)
        assert resolve_uri("") == "http://mlflow.mlflow.svc:5000"
        assert os.environ["MLFLOW_TRACKING_URI"] == "http://mlflow.mlflow.svc:5000"
        credentials = (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"])
        assert credentials == ("alice", "hunter2")
