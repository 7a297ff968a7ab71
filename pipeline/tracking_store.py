"""Which MLflow tracking store a run uses, and a check at start that it answers.

The tracking URI is chosen once, at the edge: `--mlflow-uri`, else $MLFLOW_TRACKING_URI, else an embedded
SQLite store under the project's home folder. A run that cannot reach its tracking server stops before any
work, unless tracking is explicitly optional, so no model is pushed untracked by accident.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from typing import MutableMapping, Optional

from tfxflow.components.tracking import mlflow_auth
from tfxflow.components.tracking.tracking_outbox import root_error

TRACKING_ENV = mlflow_auth.TRACKING_URI_ENV
EMBEDDED_DB = os.path.join("mlflow", "mlflow.db")


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message names the URI and what to do."""


def resolve_tracking_uri(flag: Optional[str], environ: MutableMapping[str, str], home: str) -> str:
    """`--mlflow-uri`, else $MLFLOW_TRACKING_URI, else `sqlite:///<home>/mlflow/mlflow.db`; without credentials:
    a user:password in it moves into `environ`'s $MLFLOW_TRACKING_USERNAME/$MLFLOW_TRACKING_PASSWORD, where
    MLflow's client (in this process and the ones it starts) reads them, so no URI shown or stored has them."""
    if flag:
        return mlflow_auth.adopt_uri_credentials(flag, environ)
    if environ.get(TRACKING_ENV):
        return mlflow_auth.adopt_uri_credentials(environ[TRACKING_ENV], environ)
    return "sqlite:///" + os.path.join(os.path.abspath(home), EMBEDDED_DB)


def _request(creds, endpoint: str, timeout: float, method: str = "GET", **kwargs):
    """One request with MLflow's own helper (its credentials, TLS settings and headers), without its retries:
    MLflow's client retries for minutes before it gives up, the check answers within `timeout`."""
    from mlflow.utils.rest_utils import http_request

    return http_request(creds, endpoint, method, max_retries=0, timeout=timeout, raise_on_status=False, **kwargs)


def _refused(shown: str, response, creds, what: str) -> TrackingError:
    """The message for a 401 or 403: the server is up, and what to set or ask for."""
    sent = mlflow_auth.describe_credentials(creds)
    if response.status_code == 401:
        told = (
            "no credentials were sent"
            if sent == "none"
            else f"it did not accept the credentials sent ({sent}): check the password or token"
        )
        return TrackingError(
            f"MLflow tracking server {shown} is up but answered HTTP 401 (Unauthorized) to {what}: {told}; "
            f"set ${mlflow_auth.USERNAME_ENV} and ${mlflow_auth.PASSWORD_ENV} (or ${mlflow_auth.TOKEN_ENV}) "
            "to a user of this server"
        )
    return TrackingError(
        f"MLflow tracking server {shown} is up but answered HTTP 403 (Forbidden): {sent} may not {what}; "
        "ask the server's admin for that permission, or use the credentials of a user who has it"
    )


def _json(response) -> Optional[dict]:
    """The response's JSON object; None where the body is not one."""
    try:
        found = response.json()
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _check_server(uri: str, timeout: float, experiment: Optional[str], model_name: Optional[str]) -> str:
    from mlflow.exceptions import MlflowException

    shown = mlflow_auth.redact_uri(uri)
    advice = "start it, or point --mlflow-uri / $MLFLOW_TRACKING_URI at a running one, or pass --tracking optional"
    clean, user, password = mlflow_auth.split_credentials(uri)
    creds = mlflow_auth.host_creds(clean.rstrip("/"))
    if user is not None:  # callers adopt them into the environment; a URI that still has them wins
        creds.username, creds.password = user, password or ""
    try:
        health = _request(creds, "/health", timeout)
        if health.status_code != 200 or health.text.strip() != "OK":
            raise TrackingError(f"{shown} does not answer like an MLflow tracking server; {advice}")
        search = _request(creds, "/api/2.0/mlflow/experiments/search", timeout, params={"max_results": 1})
        if search.status_code in (401, 403):
            raise _refused(shown, search, creds, "read experiments")
        body = _json(search)
        if search.status_code != 200:
            message = (body or {}).get("message", "")
            raise TrackingError(
                f"MLflow tracking server {shown} is up but answered HTTP {search.status_code} to a search of "
                f"experiments{f' ({message})' if message else ''}; its log says why"
            )
        if body is None:
            raise TrackingError(f"{shown} does not answer like an MLflow tracking server; {advice}")
        _check_write(shown, creds, timeout, experiment, model_name)
    except MlflowException as err:
        raise _unreachable(shown, creds, root_error(err), advice) from None
    return f"MLflow tracking server {shown}"


def _unreachable(shown: str, creds, root: BaseException, advice: str) -> TrackingError:
    """The message for a request that got no HTTP answer: TLS settings named where TLS is why."""
    import ssl

    reason = getattr(root, "reason", None) or root  # urllib3's MaxRetryError, NewConnectionError
    text = str(reason)
    text = text.split(": ", 1)[1] if text.startswith("<") and ": " in text else text
    if isinstance(root, ssl.SSLCertVerificationError):
        return TrackingError(
            f"MLflow tracking server {shown} is up but its TLS certificate is not trusted "
            f"({root.verify_message or text}); set "
            f"${mlflow_auth.SERVER_CERT_ENV} to the certificate of the authority that signed it (or "
            f"${mlflow_auth.INSECURE_TLS_ENV}=true to skip the check)"
        )
    if "invalid path" in text and (creds.server_cert_path or creds.client_cert_path):
        return TrackingError(
            f"MLflow tracking server {shown}: {text}; check ${mlflow_auth.SERVER_CERT_ENV} and "
            f"${mlflow_auth.CLIENT_CERT_ENV}"
        )
    if isinstance(root, (ssl.SSLError, ConnectionResetError)) and creds.host.startswith("https:"):
        # A server that asks for a client certificate closes a connection that brings none.
        sent = f"${mlflow_auth.CLIENT_CERT_ENV} is set" if creds.client_cert_path else "none was sent"
        advice = (
            f"if it asks for a client certificate ({sent}), set ${mlflow_auth.CLIENT_CERT_ENV} to a file with "
            f"the certificate and its key; else {advice}"
        )
    return TrackingError(f"MLflow tracking server {shown} cannot be reached ({text}); {advice}")


WRITE_CHECK_TAG = "tfxflow.write_check"


def _check_write(shown: str, creds, timeout: float, experiment: Optional[str], model_name: Optional[str]) -> None:
    """Writes a harmless tag (the time of the check) on the run's experiment and registered model where they
    exist, with the same permission a run needs there (EDIT): a user who may only read is refused now, before
    any work, rather than by the first tracking step. What does not exist yet is created by the run as its
    owner."""
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    def lookup(endpoint: str, params: dict, what: str) -> dict:
        found = _request(creds, endpoint, timeout, params=params)
        if found.status_code in (401, 403):
            raise _refused(shown, found, creds, f"read {what}")
        return (_json(found) or {}) if found.status_code == 200 else {}

    def tag(endpoint: str, body: dict, what: str) -> None:
        tagged = _request(creds, endpoint, timeout, method="POST", json={**body, "key": WRITE_CHECK_TAG, "value": now})
        if tagged.status_code in (401, 403):
            raise _refused(shown, tagged, creds, f"{what} (EDIT permission)")

    if experiment:
        found = lookup(
            "/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": experiment}, f"experiment '{experiment}'"
        )
        experiment_id = found.get("experiment", {}).get("experiment_id")
        if experiment_id:
            tag(
                "/api/2.0/mlflow/experiments/set-experiment-tag",
                {"experiment_id": experiment_id},
                f"write to experiment '{experiment}'",
            )
    if model_name:
        found = lookup(
            "/api/2.0/mlflow/registered-models/get", {"name": model_name}, f"registered model '{model_name}'"
        )
        if found.get("registered_model"):
            tag(
                "/api/2.0/mlflow/registered-models/set-tag",
                {"name": model_name},
                f"register versions of model '{model_name}'",
            )


def check_tracking(
    uri: str, timeout: float = 10.0, experiment: Optional[str] = None, model_name: Optional[str] = None
) -> str:
    """Raises TrackingError unless the store at `uri` answers; returns a one-line description of it.

    An HTTP server must answer MLflow's /health and its REST API within `timeout` seconds, with the credentials
    MLflow's client would send; given the run's `experiment` and registered `model_name`, the user must be
    allowed to write to those that exist (a harmless tag). A SQLite store's folder is created.
    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme in ("http", "https"):
        return _check_server(uri, timeout, experiment, model_name)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else parsed.path
        folder = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as err:
            raise TrackingError(f"MLflow tracking store {uri}: cannot create {folder} ({err.strerror})") from None
        if not os.access(folder, os.W_OK):
            raise TrackingError(f"MLflow tracking store {uri}: {folder} is not writable")
        seed_sqlite_store(path)
        return f"MLflow SQLite store {path}"
    raise TrackingError(
        f"MLflow tracking URI {mlflow_auth.redact_uri(uri)}: "
        "use http(s):// for a server or sqlite:/// for a local store"
    )


def store_template_path(environ: Optional[MutableMapping[str, str]] = None) -> str:
    """Where the empty SQLite store of the installed MLflow is kept: the user's cache folder
    ($XDG_CACHE_HOME, else ~/.cache), `tfxflow/mlflow-<version>-empty.db`."""
    from importlib.metadata import version

    environ = os.environ if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tfxflow", f"mlflow-{version('mlflow')}-empty.db")


def _make_template(template: str) -> None:
    """An empty store made by MLflow's own code for a new database (its first tables, then every migration),
    before it adds the default experiment: that row names the store's artifact folder, so each store adds its
    own when MLflow first opens it."""
    import sqlalchemy
    from mlflow.store.db import utils as db_utils

    os.makedirs(os.path.dirname(template), exist_ok=True)
    partial = f"{template}.{os.getpid()}.partial"
    engine = sqlalchemy.create_engine(f"sqlite:///{partial}")
    try:
        db_utils._initialize_tables(engine)  # noqa: SLF001 (what MLflow's store runs on a new database)
    finally:
        engine.dispose()
    os.replace(partial, template)  # whole or not at all, also for runs that start at once


def seed_sqlite_store(path: str) -> bool:
    """Starts a new SQLite store at `path` as a copy of the installed MLflow's empty store (store_template_path,
    made once): MLflow otherwise creates the tables and runs every schema migration for each new store, in each
    first run in a new home. An existing store is never touched. Where the cache cannot be
    written or read, MLflow makes the store itself as before. Whether `path` was seeded."""
    import sqlalchemy.exc

    if os.path.exists(path):
        return False
    template = store_template_path()
    copy = f"{path}.{os.getpid()}.partial"
    try:
        if not os.path.exists(template):
            _make_template(template)
        shutil.copyfile(template, copy)
        os.link(copy, path)  # fails where a store appeared meanwhile: that one stays
        return True
    except (OSError, sqlalchemy.exc.SQLAlchemyError):
        return False
    finally:
        for leftover in (copy, f"{template}.{os.getpid()}.partial"):
            if os.path.exists(leftover):
                os.unlink(leftover)
