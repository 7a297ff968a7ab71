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


def test_credentials_in_the_uri_move_to_mlflow_variables(tmp_path):
    environ = {}
    uri = tracking.resolve_tracking_uri("http://alice:p%40ss@mlflow.team:5000", environ, str(tmp_path))
    assert uri == "http://mlflow.team:5000"
    assert environ == {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "p@ss"}


def test_an_unresolvable_host_in_a_uri_with_credentials_is_shown_redacted():
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking("http://alice:hunter2@tfxflow-no-such-host.invalid:5000", timeout=2)
    assert str(err.value).startswith("MLflow tracking server http://***@tfxflow-no-such-host.invalid:5000 cannot be")
    assert "hunter2" not in str(err.value) and "alice" not in str(err.value)


def _as(monkeypatch, user=None, password=None, token=None):
    for key, value in (
        ("MLFLOW_TRACKING_USERNAME", user),
        ("MLFLOW_TRACKING_PASSWORD", password),
        ("MLFLOW_TRACKING_TOKEN", token),
    ):
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


def test_an_authenticated_server_without_credentials_is_a_401_naming_what_to_set(team_mlflow_server, monkeypatch):
    _as(monkeypatch)
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(team_mlflow_server.uri)
    assert str(err.value) == (
        f"MLflow tracking server {team_mlflow_server.uri} is up but answered HTTP 401 (Unauthorized) to read "
        "experiments: no credentials were sent; set $MLFLOW_TRACKING_USERNAME and $MLFLOW_TRACKING_PASSWORD "
        "(or $MLFLOW_TRACKING_TOKEN) to a user of this server"
    )


def test_a_wrong_password_is_a_401_that_names_the_user_only(team_mlflow_server, monkeypatch):
    user, _ = team_mlflow_server.WRITER
    _as(monkeypatch, user, "wrong-password-x1")
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(team_mlflow_server.uri)
    assert f"did not accept the credentials sent (user '{user}')" in str(err.value)
    assert "wrong-password-x1" not in str(err.value)


def test_credentials_in_the_uri_pass_and_are_not_shown(team_mlflow_server, monkeypatch):
    import urllib.parse

    _as(monkeypatch)
    user, password = team_mlflow_server.WRITER
    host = team_mlflow_server.uri.split("://", 1)[1]
    uri = f"http://{user}:{urllib.parse.quote(password, safe='')}@{host}"
    assert tracking.check_tracking(uri) == f"MLflow tracking server http://***@{host}"


def test_a_reader_may_not_write_to_an_existing_experiment_or_model(team_mlflow_server, monkeypatch):
    from mlflow import MlflowClient

    _as(monkeypatch, *team_mlflow_server.WRITER)
    writer = MlflowClient(team_mlflow_server.uri)
    writer.create_experiment("store-check")
    writer.create_registered_model("store-check-model")
    assert tracking.check_tracking(team_mlflow_server.uri, experiment="store-check", model_name="store-check-model")
    experiment = writer.get_experiment_by_name("store-check")
    assert experiment.tags[tracking.WRITE_CHECK_TAG]  # the harmless write the check made
    _as(monkeypatch, *team_mlflow_server.READER)
    for experiment, model, what in (
        ("store-check", None, "write to experiment 'store-check' (EDIT permission)"),
        ("store-check-new", "store-check-model", "register versions of model 'store-check-model' (EDIT permission)"),
    ):
        with pytest.raises(tracking.TrackingError) as err:
            tracking.check_tracking(team_mlflow_server.uri, experiment=experiment, model_name=model)
        assert str(err.value).startswith(
            f"MLflow tracking server {team_mlflow_server.uri} is up but answered HTTP 403 (Forbidden): "
            f"user 'reader' may not {what}"
        )
    # What does not exist yet, the run creates as its owner: nothing to refuse.
    assert tracking.check_tracking(team_mlflow_server.uri, experiment="store-check-new", model_name="new-model")
