"""A bearer-token `authorization_function` for `mlflow server --app-name basic-auth`, as teams plug one in
behind single sign-on: `Authorization: Bearer <token>` maps to a user of MLflow's user store (whose permissions
then apply); anything else goes to MLflow's own basic auth.

The tokens are read from the JSON object {token: username} in the file $TFXFLOW_TEST_TOKENS_FILE. Imported
by the server process only (tests.helpers.TeamMlflowServer with `tokens=`).
"""

from __future__ import annotations

import functools
import json
import os

from flask import Response, request
from werkzeug.datastructures import Authorization

TOKENS_FILE_ENV = "TFXFLOW_TEST_TOKENS_FILE"


@functools.lru_cache(maxsize=1)
def _tokens() -> dict:
    with open(os.environ[TOKENS_FILE_ENV], encoding="utf-8") as f:
        return json.load(f)


def authenticate_request() -> "Authorization | Response":
    """A known bearer token authenticates as its user; a wrong one gets a 401; otherwise basic auth."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        # Imported here: the test process imports this module for its names, the server for this function.
        from mlflow.server.auth import authenticate_request_basic_auth

        return authenticate_request_basic_auth()
    username = _tokens().get(token.strip())
    if username is None:
        return Response("Invalid token", 401, {"WWW-Authenticate": 'Bearer realm="mlflow"'})
    return Authorization("bearer", {"username": username})
