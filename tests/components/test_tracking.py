"""Helpers of the MLflow tracking components, against a real `mlflow server`."""

from mlflow import MlflowClient

from components.tracking import artifact_location, flatten, metric_name, served_version


def test_served_version_finds_a_push_that_is_registered_already(mlflow_server):
    mlflow_client = MlflowClient(mlflow_server.uri)
    assert served_version(mlflow_client, "no-such-model", "1700000000") is None
    mlflow_client.create_registered_model("served-unit")
    run = mlflow_client.create_run(mlflow_client.create_experiment("served-unit"))
    version = mlflow_client.create_model_version("served-unit", source=f"runs:/{run.info.run_id}/model",
                                                 run_id=run.info.run_id,
                                                 tags={"tfxflow.pushed_version": "1700000000"})
    assert served_version(mlflow_client, "served-unit", "1700000000") == version.version
    assert served_version(mlflow_client, "served-unit", "1700000001") is None


def test_params_are_flattened_to_strings_and_metric_names_cleaned():
    assert flatten({"training": {"batch_size": 256, "units": [128, 64]}, "seed": 1}) == {
        "training.batch_size": "256", "training.units": "[128, 64]", "seed": "1"}
    assert metric_name("payment_type=Credit Card,hour=3") == "payment_type_Credit Card_hour_3"


def test_embedded_store_artifacts_live_beside_it():
    assert artifact_location("sqlite:////h/mlflow/mlflow.db") == "file:///h/mlflow/artifacts"
    assert artifact_location("http://127.0.0.1:5000") is None
