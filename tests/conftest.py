"""Fixtures shared by every test package."""

import pytest

from tests import helpers


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
