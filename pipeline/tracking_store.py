"""Which MLflow tracking store a run uses, and a check at start that it answers.

The tracking URI is chosen once, at the edge: `--mlflow-uri`, else $MLFLOW_TRACKING_URI, else an embedded
SQLite store under the project's home folder. A run that cannot reach its tracking server stops before any
work, unless tracking is explicitly optional, so no model is pushed untracked by accident.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Mapping, Optional

TRACKING_ENV = "MLFLOW_TRACKING_URI"
EMBEDDED_DB = os.path.join("mlflow", "mlflow.db")


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message names the URI and what to do."""


def resolve_tracking_uri(flag: Optional[str], environ: Mapping[str, str], home: str) -> str:
    """`--mlflow-uri`, else $MLFLOW_TRACKING_URI, else `sqlite:///<home>/mlflow/mlflow.db`."""
    if flag:
        return flag
    if environ.get(TRACKING_ENV):
        return environ[TRACKING_ENV]
    return "sqlite:///" + os.path.join(os.path.abspath(home), EMBEDDED_DB)


def _get(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # http(s) only, checked below
        return response.read()


def check_tracking(uri: str, timeout: float = 5.0) -> str:
    """Raises TrackingError unless the store at `uri` answers; returns a one-line description of it.

    An HTTP server must answer MLflow's /health and its REST API within `timeout` seconds (MLflow's own client
    retries for minutes before it gives up). A SQLite store's folder is created.
    """
    parsed = urllib.parse.urlparse(uri)
    advice = "start it, or point --mlflow-uri / $MLFLOW_TRACKING_URI at a running one, or pass --tracking optional"
    if parsed.scheme in ("http", "https"):
        base = uri.rstrip("/")
        try:
            health = _get(f"{base}/health", timeout).decode("utf-8", "replace").strip()
            search = json.loads(_get(f"{base}/api/2.0/mlflow/experiments/search?max_results=1", timeout))
        except urllib.error.HTTPError as err:
            raise TrackingError(
                f"MLflow tracking server {uri} answered HTTP {err.code} ({err.reason}); {advice}"
            ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise TrackingError(f"MLflow tracking server {uri} cannot be reached ({reason}); {advice}") from None
        except ValueError:
            raise TrackingError(f"{uri} does not answer like an MLflow tracking server; {advice}") from None
        if health != "OK" or not isinstance(search, dict):
            raise TrackingError(f"{uri} does not answer like an MLflow tracking server; {advice}")
        return f"MLflow tracking server {uri}"
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else parsed.path
        folder = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as err:
            raise TrackingError(f"MLflow tracking store {uri}: cannot create {folder} ({err.strerror})") from None
        if not os.access(folder, os.W_OK):
            raise TrackingError(f"MLflow tracking store {uri}: {folder} is not writable")
        return f"MLflow SQLite store {path}"
    raise TrackingError(f"MLflow tracking URI {uri}: use http(s):// for a server or sqlite:/// for a local store")
