"""Tracking to a team's MLflow server: `mlflow server --app-name basic-auth` with its runs and users in
PostgreSQL and its artifacts on an S3-compatible store, started on 127.0.0.1.

A user with write access runs the pipeline with credentials in the URI (its registered version, the `champion`
alias, `tfxflow compare`, the champion loaded through `models:/...@champion`, with credentials in MLflow's
environment variables); a user who may only read, and a user who sends none, are refused before any work; and
the password is found nowhere: console, run log, home folder (ML Metadata included), MLflow's database,
the artifact store. On a second server that serves HTTPS only and asks for a client certificate, the writer
runs by bearer token with MLflow's TLS variables.
"""

import os
import urllib.parse

import pytest
from mlflow import MlflowClient

from tests import helpers

pytestmark = pytest.mark.e2e

WRITER, WRITER_PASSWORD = helpers.TeamMlflowServer.WRITER
READER, READER_PASSWORD = helpers.TeamMlflowServer.READER
EXPERIMENT = "team"
FLAGS = ["--train-steps", "40", "--batch-size", "64", "--eval-every-steps", "20", "--experiment", EXPERIMENT]
NO_CREDENTIALS = {"MLFLOW_TRACKING_USERNAME": None, "MLFLOW_TRACKING_PASSWORD": None, "MLFLOW_TRACKING_TOKEN": None}


@pytest.fixture(scope="module")
def team_server(team_mlflow_server):
    return team_mlflow_server


def as_user(user: str, password: str) -> dict:
    return {**NO_CREDENTIALS, "MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}


@pytest.fixture(scope="module")
def written(team_server, tmp_path_factory):
    """The writer's run, with user:password in --mlflow-uri, and `compare` with them in the environment."""
    base = tmp_path_factory.mktemp("team")
    data = helpers.write_taxi_sample(str(base / "data"), rows=2000)
    home = str(base / "home")
    host = team_server.uri.split("://", 1)[1]
    with_password = f"http://{WRITER}:{urllib.parse.quote(WRITER_PASSWORD, safe='')}@{host}"
    run = helpers.run_cli(
        "run", "--home", home, "--data-root", data, "--mlflow-uri", with_password, *FLAGS, env=NO_CREDENTIALS
    )
    assert run.returncode == 0, run.stderr[-3000:]
    compare = helpers.run_cli(
        "compare",
        "--mlflow-uri",
        team_server.uri,
        "--experiment",
        EXPERIMENT,
        "--all",
        timeout=300,
        env=as_user(WRITER, WRITER_PASSWORD),
    )
    return {"home": home, "data": data, "run": run, "compare": compare}


@pytest.fixture
def writer_env(monkeypatch):
    helpers.patch_env(monkeypatch, as_user(WRITER, WRITER_PASSWORD))


def test_the_run_is_tracked_registered_and_champion(written, team_server, writer_env):
    import numpy as np

    mlflow_client = MlflowClient(team_server.uri)
    experiment = mlflow_client.get_experiment_by_name(EXPERIMENT)
    (run,) = mlflow_client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["train_steps"] == "40" and run.data.tags["tfxflow.pushed"] == "yes"
    assert f"mlflow:         run {run.info.run_id} in experiment '{EXPERIMENT}' ({team_server.uri})" in (
        written["run"].stdout
    )
    assert f"mlflow:  MLflow tracking server {team_server.uri}" in written["run"].stdout
    champion = mlflow_client.get_model_version_by_alias("taxi", "champion")
    assert champion.version == "1" and champion.run_id == run.info.run_id
    # The artifacts went through the server to the object store.
    keys = [o["Key"] for o in team_server.s3.client().list_objects_v2(Bucket="team-artifacts")["Contents"]]
    assert any(k.startswith("mlflow/") and k.endswith("/MLmodel") for k in keys), keys[:20]
    assert any(k.endswith("summaries/evaluation.json") for k in keys), keys[:20]
    # `compare` authenticated from the environment.
    assert written["compare"].returncode == 0, written["compare"].stderr[-2000:]
    assert run.info.run_id[:8] in written["compare"].stdout
    # The champion loads through MLflow's registry URI and predicts what the served SavedModel predicts.
    data = os.path.join(written["data"], "data.csv")
    predicted, expected = helpers.champion_and_served_predictions(team_server.uri, data, written["home"])
    assert predicted.shape == (8, 1)
    np.testing.assert_allclose(predicted, expected, rtol=1e-5)


@pytest.fixture(scope="module")
def refused(written, team_server, tmp_path_factory):
    """The reader (default permission READ) and a user who sends no credentials, each in a fresh home."""
    base = tmp_path_factory.mktemp("refused")
    results = {}
    for name, env in (("reader", as_user(READER, READER_PASSWORD)), ("anonymous", NO_CREDENTIALS)):
        home = str(base / name)
        results[name] = (
            home,
            helpers.run_cli(
                "run",
                "--home",
                home,
                "--data-root",
                written["data"],
                "--mlflow-uri",
                team_server.uri,
                *FLAGS,
                timeout=300,
                env=env,
            ),
        )
    return results


def test_a_reader_is_refused_before_any_work(refused, team_server, writer_env):
    home, result = refused["reader"]
    assert result.returncode == 2, result.stderr[-2000:]
    assert (
        f"error: MLflow tracking server {team_server.uri} is up but answered HTTP 403 (Forbidden): "
        f"user '{READER}' may not write to experiment '{EXPERIMENT}' (EDIT permission)"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.exists(os.path.join(home, "pipeline_root"))
    assert not os.path.exists(os.path.join(home, "serving"))
    experiment = MlflowClient(team_server.uri).get_experiment_by_name(EXPERIMENT)
    assert len(MlflowClient(team_server.uri).search_runs([experiment.experiment_id])) == 1


def test_no_credentials_get_a_401_that_names_what_to_set(refused, team_server):
    home, result = refused["anonymous"]
    assert result.returncode == 2
    assert (
        f"error: MLflow tracking server {team_server.uri} is up but answered HTTP 401 (Unauthorized) to read "
        "experiments: no credentials were sent; set $MLFLOW_TRACKING_USERNAME and $MLFLOW_TRACKING_PASSWORD"
    ) in result.stderr
    assert "start it" not in result.stderr
    assert not os.path.exists(os.path.join(home, "pipeline_root"))


def test_the_password_is_nowhere(written, refused, team_server, postgres_server):
    secrets = [WRITER_PASSWORD, urllib.parse.quote(WRITER_PASSWORD, safe=""), READER_PASSWORD]
    consoles = {"run": written["run"], "compare": written["compare"], **{k: v[1] for k, v in refused.items()}}
    for name, result in consoles.items():
        for secret in secrets:
            assert secret not in result.stdout + result.stderr, name
    homes = [written["home"], *(home for home, _ in refused.values())]
    files = [os.path.join(root, f) for home in homes for root, _, names in os.walk(home) for f in names]
    assert any(f.endswith(".log") for f in files) and any(f.endswith("metadata.sqlite") for f in files)
    for path in files:
        with open(path, "rb") as f:
            content = f.read()
        for secret in secrets:
            assert secret.encode() not in content, path
    # ML Metadata keeps the tracking URI the components were given: without its user-info.
    with open(os.path.join(written["home"], "metadata", "metadata.sqlite"), "rb") as f:
        assert team_server.uri.encode() in f.read()
    for database in team_server.databases:
        dump = postgres_server.dump(database)
        assert dump and not any(secret in dump for secret in secrets), database
    s3 = team_server.s3.client()
    for entry in s3.list_objects_v2(Bucket="team-artifacts")["Contents"]:
        body = s3.get_object(Bucket="team-artifacts", Key=entry["Key"])["Body"].read()
        assert not any(secret.encode() in body for secret in secrets), entry["Key"]


@pytest.fixture(scope="module")
def token_run(secure_mlflow_server, tmp_path_factory):
    """The writer's run by bearer token, against the server that serves HTTPS only and asks for a client
    certificate: MLflow's TLS settings in the environment, as a team sets them."""
    base = tmp_path_factory.mktemp("secure")
    server = secure_mlflow_server
    env = {
        **NO_CREDENTIALS,
        "MLFLOW_TRACKING_TOKEN": server.WRITER_TOKEN,
        "MLFLOW_TRACKING_SERVER_CERT_PATH": server.tls.ca,
        "MLFLOW_TRACKING_CLIENT_CERT_PATH": server.tls.client_bundle,
    }
    data = helpers.write_taxi_sample(str(base / "data"), rows=2000)
    home = str(base / "home")
    run = helpers.run_cli("run", "--home", home, "--data-root", data, "--mlflow-uri", server.uri, *FLAGS, env=env)
    return {"home": home, "run": run, "env": env}


def test_a_run_by_token_over_mutual_tls_is_tracked_and_registered(token_run, secure_mlflow_server, monkeypatch):
    server = secure_mlflow_server
    result = token_run["run"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"mlflow:  MLflow tracking server {server.uri}" in result.stdout
    helpers.patch_env(monkeypatch, token_run["env"])
    client = MlflowClient(server.uri)
    (run,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["tfxflow.pushed"] == "yes"
    assert client.get_model_version_by_alias("taxi", "champion").run_id == run.info.run_id
    keys = [o["Key"] for o in server.s3.client().list_objects_v2(Bucket=server.bucket)["Contents"]]
    assert any(k.endswith("/MLmodel") for k in keys), keys[:20]
    # The token is a credential like a password: nowhere in the console or the home folder.
    token = server.WRITER_TOKEN
    assert token not in result.stdout + result.stderr
    for root, _, names in os.walk(token_run["home"]):
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                assert token.encode() not in f.read(), os.path.join(root, name)
