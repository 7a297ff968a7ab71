"""Credentials for an MLflow tracking server, handled the way MLflow's own client handles them.

MLflow's client reads $MLFLOW_TRACKING_USERNAME/$MLFLOW_TRACKING_PASSWORD (basic auth), $MLFLOW_TRACKING_TOKEN
(bearer), $MLFLOW_TRACKING_INSECURE_TLS, $MLFLOW_TRACKING_SERVER_CERT_PATH and $MLFLOW_TRACKING_CLIENT_CERT_PATH
(TLS). A user:password in the URI is moved into the first two at the edge, so the URI that is shown, logged,
stored in ML Metadata, passed to components or compiled into a spec never carries a credential; `redact_uri` is
the one way a URI is shown.

Imports nothing heavy: the CLI and the Kubeflow compiler use it.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import MutableMapping, Optional, Tuple

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
USERNAME_ENV = "MLFLOW_TRACKING_USERNAME"
PASSWORD_ENV = "MLFLOW_TRACKING_PASSWORD"
TOKEN_ENV = "MLFLOW_TRACKING_TOKEN"
INSECURE_TLS_ENV = "MLFLOW_TRACKING_INSECURE_TLS"
SERVER_CERT_ENV = "MLFLOW_TRACKING_SERVER_CERT_PATH"
CLIENT_CERT_ENV = "MLFLOW_TRACKING_CLIENT_CERT_PATH"
# What a tracking step's environment may take from a Kubernetes secret (the Kubeflow compiler checks keys).
CLIENT_ENV = (
    TRACKING_URI_ENV,
    USERNAME_ENV,
    PASSWORD_ENV,
    TOKEN_ENV,
    INSECURE_TLS_ENV,
    SERVER_CERT_ENV,
    CLIENT_CERT_ENV,
)
REDACTED = "***"


def split_credentials(uri: str) -> Tuple[str, Optional[str], Optional[str]]:
    """(the URI without user-info, user, password); user and password are None where the URI has none."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme not in ("http", "https") or "@" not in parsed.netloc:
        return uri, None, None
    userinfo, _, hostport = parsed.netloc.rpartition("@")
    user, has_password, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit(parsed._replace(netloc=hostport))
    return clean, urllib.parse.unquote(user), urllib.parse.unquote(password) if has_password else None


def redact_uri(uri: Optional[str]) -> str:
    """`uri` with any user-info replaced by ***: the only form in which a tracking URI is shown or stored."""
    if not uri:
        return uri or ""
    clean, user, password = split_credentials(uri)
    if user is None and password is None:
        return uri
    parsed = urllib.parse.urlsplit(clean)
    return urllib.parse.urlunsplit(parsed._replace(netloc=f"{REDACTED}@{parsed.netloc}"))


def adopt_uri_credentials(uri: str, environ: MutableMapping[str, str] = os.environ) -> str:
    """Moves a user:password in `uri` into $MLFLOW_TRACKING_USERNAME/$MLFLOW_TRACKING_PASSWORD of `environ`
    (where MLflow's client reads them, here and in the processes it starts) and returns `uri` without them.
    A $MLFLOW_TRACKING_URI holding them is replaced by the clean URI too."""
    clean, user, password = split_credentials(uri)
    if user is not None:
        environ[USERNAME_ENV] = user
        environ[PASSWORD_ENV] = password or ""
    if environ.get(TRACKING_URI_ENV):
        environ[TRACKING_URI_ENV] = split_credentials(environ[TRACKING_URI_ENV])[0]
    return clean


def host_creds(uri: str):
    """MLflow's own host credentials for `uri` (environment, ~/.mlflow/credentials, TLS settings)."""
    from mlflow.utils.credentials import get_default_host_creds

    return get_default_host_creds(uri)


def describe_credentials(creds) -> str:
    """Which credentials a request carried, without their values: "user 'alice'", 'a token (...)' or 'none'."""
    if creds.username and creds.password:
        return f"user '{creds.username}'"
    if creds.token:
        return f"a token (${TOKEN_ENV})"
    return "none"
