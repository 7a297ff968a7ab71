"""Credentials in a tracking URI: split off, moved where MLflow's client reads them, never shown."""

import pytest

from tfxflow.components.tracking import mlflow_auth


@pytest.mark.parametrize(
    "uri, clean, user, password",
    [
        ("http://alice:s3cr%40t@mlflow.team:5000/", "http://mlflow.team:5000/", "alice", "s3cr@t"),
        ("https://alice@mlflow.team", "https://mlflow.team", "alice", None),
        ("http://mlflow.team:5000", "http://mlflow.team:5000", None, None),
        ("sqlite:////home/a@b/mlflow.db", "sqlite:////home/a@b/mlflow.db", None, None),
    ],
)
def test_split_credentials(uri, clean, user, password):
    assert mlflow_auth.split_credentials(uri) == (clean, user, password)


def test_redacted_uri_keeps_host_and_path_only():
    assert mlflow_auth.redact_uri("http://alice:hunter2@mlflow.team:5000/x") == "http://***@mlflow.team:5000/x"
    assert mlflow_auth.redact_uri("http://mlflow.team:5000") == "http://mlflow.team:5000"
    assert mlflow_auth.redact_uri(None) == ""


def test_credentials_move_to_the_environment_mlflow_reads():
    environ = {"MLFLOW_TRACKING_URI": "http://bob:pw@other:1"}
    assert mlflow_auth.adopt_uri_credentials("http://alice:hunter2@mlflow.team:5000", environ) == (
        "http://mlflow.team:5000"
    )
    assert environ == {
        "MLFLOW_TRACKING_URI": "http://other:1",
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": "hunter2",
    }


def test_mlflow_host_creds_carry_every_client_setting(monkeypatch):
    """The variables named in CLIENT_ENV (the keys the Kubeflow compiler lets a secret set) are those MLflow's own
    client reads (the pinned version's names), and each reaches the credentials."""
    from mlflow import environment_variables as mlflow_env

    for name in mlflow_auth.CLIENT_ENV:
        assert getattr(mlflow_env, name).name == name
    values = {
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": "hunter2",
        "MLFLOW_TRACKING_TOKEN": "tok",
        "MLFLOW_TRACKING_SERVER_CERT_PATH": "/ca.pem",
        "MLFLOW_TRACKING_CLIENT_CERT_PATH": "/client.pem",
        "MLFLOW_TRACKING_INSECURE_TLS": "false",
    }
    assert set(mlflow_auth.CLIENT_ENV) == {mlflow_auth.TRACKING_URI_ENV, *values}
    for name in mlflow_auth.CLIENT_ENV:
        if name in values:
            monkeypatch.setenv(name, values[name])
    creds = mlflow_auth.host_creds("https://mlflow.team")
    assert (creds.username, creds.password, creds.token) == ("alice", "hunter2", "tok")
    assert (creds.server_cert_path, creds.client_cert_path, creds.verify) == ("/ca.pem", "/client.pem", "/ca.pem")
    assert mlflow_auth.describe_credentials(creds) == "user 'alice'"
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
    assert mlflow_auth.describe_credentials(mlflow_auth.host_creds("https://mlflow.team")) == (
        "a token ($MLFLOW_TRACKING_TOKEN)"
    )
