"""The model registry's helpers: a push found registered already, MLflow's fluent API put back."""

import os

from mlflow import MlflowClient

from tfxflow.components.tracking.model_registry import fluent_api_at, served_version


def test_served_version_finds_a_push_that_is_registered_already(mlflow_server):
    mlflow_client = MlflowClient(mlflow_server.uri)
    assert served_version(mlflow_client, "no-such-model", "1700000000") is None
    mlflow_client.create_registered_model("served-unit")
    run = mlflow_client.create_run(mlflow_client.create_experiment("served-unit"))
    version = mlflow_client.create_model_version(
        "served-unit",
        source=f"runs:/{run.info.run_id}/model",
        run_id=run.info.run_id,
        tags={"tfxflow.pushed_version": "1700000000"},
    )
    assert served_version(mlflow_client, "served-unit", "1700000000") == version.version
    assert served_version(mlflow_client, "served-unit", "1700000001") is None


def test_the_fluent_api_is_put_back_with_its_variables():
    """Logging the model points MLflow's process-wide fluent API at the run's server; after it, this process
    (LocalDagRunner runs every component in it) resolves MLflow URIs as before."""
    from unittest import mock

    import mlflow

    with mock.patch.dict(os.environ, {"MLFLOW_TRACKING_URI": "sqlite:////tmp/tfxflow-before.db"}):
        os.environ.pop("MLFLOW_REGISTRY_URI", None)
        before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
        with fluent_api_at("http://127.0.0.1:1"):
            assert (mlflow.get_tracking_uri(), mlflow.get_registry_uri()) == ("http://127.0.0.1:1",) * 2
            assert os.environ["MLFLOW_REGISTRY_URI"] == "http://127.0.0.1:1"
        assert (mlflow.get_tracking_uri(), mlflow.get_registry_uri()) == before
        assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:////tmp/tfxflow-before.db"
        assert "MLFLOW_REGISTRY_URI" not in os.environ
