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
    helpers.patch_env(
        monkeypatch,
        {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password, "MLFLOW_TRACKING_TOKEN": token},
    )


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


WRITER_TOKEN, READER_TOKEN = helpers.TeamMlflowServer.WRITER_TOKEN, helpers.TeamMlflowServer.READER_TOKEN


@pytest.fixture
def tls_env(secure_mlflow_server, monkeypatch):
    """No MLflow client setting but the TLS files the secure server asks for; returns a setter for more."""
    for key in [k for k in os.environ if k.startswith("MLFLOW_TRACKING_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", secure_mlflow_server.tls.ca)
    monkeypatch.setenv("MLFLOW_TRACKING_CLIENT_CERT_PATH", secure_mlflow_server.tls.client_bundle)

    def setenv(**values):
        helpers.patch_env(monkeypatch, {f"MLFLOW_TRACKING_{key}": value for key, value in values.items()})

    return setenv


def test_a_token_over_mutual_tls_may_write(secure_mlflow_server, tls_env):
    from mlflow import MlflowClient

    tls_env(TOKEN=WRITER_TOKEN)
    client = MlflowClient(secure_mlflow_server.uri)
    client.create_experiment("token-check")
    assert tracking.check_tracking(secure_mlflow_server.uri, experiment="token-check") == (
        f"MLflow tracking server {secure_mlflow_server.uri}"
    )
    experiment = client.get_experiment_by_name("token-check")
    assert experiment.tags[tracking.WRITE_CHECK_TAG]
    # The experiment's owner is the token's user: MLflow's permission store says so.
    permission = secure_mlflow_server.admin(
        "/api/3.0/mlflow/users/permissions/get",
        method="GET",
        params={"username": "writer", "resource_type": "experiment", "resource_id": experiment.experiment_id},
    )
    assert permission["permission"] == "MANAGE"


def test_a_wrong_token_is_a_401_and_a_readers_token_a_403(secure_mlflow_server, tls_env):
    from mlflow import MlflowClient

    tls_env(TOKEN=WRITER_TOKEN)
    MlflowClient(secure_mlflow_server.uri).create_experiment("token-owned")
    tls_env(TOKEN="not-a-token-x7")
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(secure_mlflow_server.uri)
    assert "HTTP 401 (Unauthorized) to read experiments: it did not accept the credentials sent (a token " in str(
        err.value
    )
    assert "not-a-token-x7" not in str(err.value)
    tls_env(TOKEN=READER_TOKEN)
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(secure_mlflow_server.uri, experiment="token-owned")
    assert str(err.value).startswith(
        f"MLflow tracking server {secure_mlflow_server.uri} is up but answered HTTP 403 (Forbidden): a token "
        "($MLFLOW_TRACKING_TOKEN) may not write to experiment 'token-owned' (EDIT permission)"
    )


def test_an_untrusted_server_certificate_names_the_setting(secure_mlflow_server, tls_env):
    tls_env(TOKEN=WRITER_TOKEN, SERVER_CERT_PATH=None)
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(secure_mlflow_server.uri, timeout=5)
    assert str(err.value) == (
        f"MLflow tracking server {secure_mlflow_server.uri} is up but its TLS certificate is not trusted "
        "(self-signed certificate in certificate chain); set $MLFLOW_TRACKING_SERVER_CERT_PATH to the "
        "certificate of the authority that signed it (or $MLFLOW_TRACKING_INSECURE_TLS=true to skip the check)"
    )
    tls_env(INSECURE_TLS="true")
    assert tracking.check_tracking(secure_mlflow_server.uri, timeout=5)


def test_a_missing_client_certificate_or_a_wrong_path_names_the_setting(secure_mlflow_server, tls_env):
    tls_env(TOKEN=WRITER_TOKEN, CLIENT_CERT_PATH=None)
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(secure_mlflow_server.uri, timeout=5)
    assert str(err.value).startswith(f"MLflow tracking server {secure_mlflow_server.uri} cannot be reached (")
    assert "if it asks for a client certificate (none was sent), set $MLFLOW_TRACKING_CLIENT_CERT_PATH" in str(
        err.value
    )
    tls_env(SERVER_CERT_PATH="/nonexistent/tfxflow-ca.pem")
    with pytest.raises(tracking.TrackingError) as err:
        tracking.check_tracking(secure_mlflow_server.uri, timeout=5)
    assert str(err.value) == (
        f"MLflow tracking server {secure_mlflow_server.uri}: Could not find a suitable TLS CA certificate "
        "bundle, invalid path: /nonexistent/tfxflow-ca.pem; check $MLFLOW_TRACKING_SERVER_CERT_PATH and "
        "$MLFLOW_TRACKING_CLIENT_CERT_PATH"
    )
