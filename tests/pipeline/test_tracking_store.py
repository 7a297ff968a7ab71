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


def _dump(db: str) -> dict:
    """A SQLite store as {"schema": its CREATE statements, table: its rows}. A statement's lines are sorted: two
    stores MLflow makes itself may list a table's constraints in different orders (its migrations copy tables
    through SQLAlchemy's batch mode, whose order of constraints follows a set)."""
    import sqlite3

    def lines(sql):
        return tuple(sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))

    with sqlite3.connect(db) as connection:
        found = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        schema = sorted((kind, name, table, lines(sql)) for kind, name, table, sql in found)
        tables = [name for kind, name, _, _ in schema if kind == "table"]
        found = {"schema": schema}
        for table in tables:
            found[table] = sorted(map(repr, connection.execute(f'SELECT * FROM "{table}"').fetchall()))
    return found


def _mlflows_own_store(db: str, artifacts: str) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    SqlAlchemyStore(f"sqlite:///{db}", artifacts)._dispose_engine()  # closes the file


def test_a_new_store_is_mlflows_own_empty_store_copied_and_an_existing_one_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    template = tracking.store_template_path()
    assert template.startswith(f"{tmp_path}/cache/tfxflow/mlflow-3.") and template.endswith("-empty.db")
    first, second = (tmp_path / name / "mlflow" / "mlflow.db" for name in ("first", "second"))
    assert tracking.check_tracking(f"sqlite:///{first}") == f"MLflow SQLite store {first}"
    assert os.path.isfile(template) and os.path.isfile(first)
    made = os.stat(template)
    assert tracking.check_tracking(f"sqlite:///{second}") == f"MLflow SQLite store {second}"
    assert (os.stat(template).st_ino, os.stat(template).st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    assert not [n for n in os.listdir(tmp_path / "cache" / "tfxflow") if n.endswith(".partial")]

    # Opened by MLflow, the copy holds what MLflow makes itself for a new store: the same tables, indexes and
    # schema version, and the default experiment with this store's own artifact folder.
    _mlflows_own_store(str(first), str(tmp_path / "first-artifacts"))
    _mlflows_own_store(str(tmp_path / "own.db"), str(tmp_path / "own-artifacts"))
    seeded, own = _dump(str(first)), _dump(str(tmp_path / "own.db"))
    assert seeded["schema"] == own["schema"] and len(own["schema"]) > 40
    assert {t: rows for t, rows in seeded.items() if t != "experiments"} == {
        t: rows for t, rows in own.items() if t != "experiments"
    }
    from mlflow import MlflowClient

    (default,) = MlflowClient(f"sqlite:///{first}").search_experiments()
    assert (default.experiment_id, default.name) == ("0", "Default")
    assert default.artifact_location == f"{tmp_path}/first-artifacts/0"

    # A store that exists is never replaced, not even an empty file.
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"")
    assert tracking.seed_sqlite_store(str(taken)) is False and taken.read_bytes() == b""


def test_without_a_usable_cache_mlflow_makes_the_store_itself(tmp_path, monkeypatch):
    (tmp_path / "not-a-folder").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    db = tmp_path / "home" / "mlflow" / "mlflow.db"
    assert tracking.check_tracking(f"sqlite:///{db}") == f"MLflow SQLite store {db}"
    assert not db.exists() and os.listdir(db.parent) == []  # nothing half-made
    from mlflow import MlflowClient

    assert [e.name for e in MlflowClient(f"sqlite:///{db}").search_experiments()] == ["Default"]


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
