"""The test helpers that other tests' verdicts rest on."""

import pytest

from tests import helpers


def test_a_snapshot_of_the_serving_folder_changes_with_an_empty_version_folder(tmp_path):
    (tmp_path / "taxi" / "1700000000" / "variables").mkdir(parents=True)
    (tmp_path / "taxi" / "1700000000" / "saved_model.pb").write_bytes(b"graph")
    before = helpers.tree_snapshot(str(tmp_path))
    assert helpers.tree_snapshot(str(tmp_path)) == before
    (tmp_path / "taxi" / "1700000001").mkdir()  # what TF Serving would try to load, and fail on
    assert helpers.tree_snapshot(str(tmp_path)) != before


def test_the_test_servers_turn_off_a_job_runner_mlflow_still_has():
    from mlflow import environment_variables

    name, value = helpers.NO_JOBS
    assert environment_variables.MLFLOW_SERVER_ENABLE_JOB_EXECUTION.name == name
    assert environment_variables.MLFLOW_SERVER_ENABLE_JOB_EXECUTION.default is True  # on unless turned off


@pytest.mark.integration
def test_an_mlflow_server_starts_without_its_job_runner(mlflow_server):
    with open(f"{mlflow_server.folder}/server.log", encoding="utf-8") as f:
        log = f.read()
    assert "Uvicorn running on" in log and "Job executor backend" not in log
    assert mlflow_server.request("GET", "/health", timeout=10).text.strip() == "OK"
