"""Choosing the tracking store, and the check at start that it answers."""

import os

import pytest

from tests import helpers
from tfxflow.pipeline import tracking_store as tracking


def test_uri_flag_then_environment_then_embedded_sqlite(tmp_path):
    home = str(tmp_path / "home")
    env = {"MLFLOW_TRACKING_URI": "http://mlflow.team:5000"}
    assert tracking.resolve_tracking_uri("http://flag:1", env, home) == "http://flag:1"
    assert tracking.resolve_tracking_uri(None, env, home) == "http://mlflow.team:5000"
    assert tracking.resolve_tracking_uri(None, {}, home) == f"sqlite:///{home}/mlflow/mlflow.db"


def test_embedded_store_folder_is_created(tmp_path):
    uri = tracking.resolve_tracking_uri(None, {}, str(tmp_path / "home"))
    assert tracking.check_tracking(uri) == f"MLflow SQLite store {tmp_path}/home/mlflow/mlflow.db"
    assert os.path.isdir(tmp_path / "home" / "mlflow")


def test_a_running_server_passes(mlflow_server):
    assert tracking.check_tracking(mlflow_server.uri) == f"MLflow tracking server {mlflow_server.uri}"


def test_an_unreachable_server_is_one_clear_error():
    uri = f"http://127.0.0.1:{helpers.free_port()}"
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(uri, timeout=2)
    message = str(err.value)
    assert message.startswith(f"MLflow tracking server {uri} cannot be reached (")
    assert "Connection refused" in message and "--tracking optional" in message


def test_an_unknown_scheme_is_refused():
    with pytest.raises(tracking.TrackingError, match="use http"):
        tracking.check_tracking("ftp://example/mlflow")
