"""Fixtures shared by every test package."""

import os

import pytest

from tests import helpers

# Session fixtures that start a real server on 127.0.0.1 or run Transform on data: a test using one is an
# integration test (not in `make test-fast`) without marking it again.
INTEGRATION_FIXTURES = frozenset(
    {
        "mlflow_server",
        "s3_server",
        "postgres_server",
        "team_mlflow_server",
        "secure_mlflow_server",
        "tiny_transform",
        "task_transforms",
        "task_models",
    }
)


def pytest_collection_modifyitems(items):
    for item in items:
        if INTEGRATION_FIXTURES.intersection(item.fixturenames) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _mlflow_client_settings_unchanged():
    """MLflow's client settings ($MLFLOW_TRACKING_*) are as they were after each test: code under test may set
    credentials there (that is where they belong), and a test that lets them outlive it changes who later tests
    are to every MLflow server."""
    before = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_TRACKING_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_TRACKING_")}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the test left MLflow's client settings changed: {changed}"


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real `mlflow server` on a free port of 127.0.0.1, stopped at the end of the session."""
    server = helpers.MlflowServer(str(tmp_path_factory.mktemp("mlflow_server"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on a free port of 127.0.0.1, stopped at the end of the session."""
    server = helpers.S3Server(str(tmp_path_factory.mktemp("s3_server"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster on a free port of 127.0.0.1, removed at the end of the session."""
    server = helpers.PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def team_mlflow_server(postgres_server, s3_server, tmp_path_factory):
    """`mlflow server --app-name basic-auth` on PostgreSQL and S3 (helpers.TeamMlflowServer), with a user who
    may write (`WRITER`) and one who, by the default permission, may only read (`READER`)."""
    server = helpers.TeamMlflowServer(
        str(tmp_path_factory.mktemp("team_mlflow")), postgres_server, s3_server, "team-artifacts"
    ).start()
    for user, password in (server.WRITER, server.READER):
        server.create_user(user, password)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def secure_mlflow_server(postgres_server, s3_server, tmp_path_factory):
    """helpers.TeamMlflowServer over HTTPS only, asking for a client certificate (`server.tls`), where a bearer
    token authenticates too: WRITER_TOKEN as the writer, READER_TOKEN as the reader."""
    folder = tmp_path_factory.mktemp("secure_mlflow")
    team = helpers.TeamMlflowServer
    tokens = {team.WRITER_TOKEN: team.WRITER[0], team.READER_TOKEN: team.READER[0]}
    server = helpers.TeamMlflowServer(
        str(folder / "server"),
        postgres_server,
        s3_server,
        "secure-artifacts",
        tls=helpers.TlsFiles.create(str(folder / "tls")),
        tokens=tokens,
    ).start()
    for user, password in (server.WRITER, server.READER):
        server.create_user(user, password)
    yield server
    server.stop()
