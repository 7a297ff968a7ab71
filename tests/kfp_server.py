"""A Kubeflow Pipelines API server for tests: the v2beta1 REST endpoints `kfp.Client` calls for experiments,
pipeline upload, runs and recurring runs, on 127.0.0.1, with its state in memory and every request recorded."""

from __future__ import annotations

import dataclasses
import email.parser
import http.server
import itertools
import json
import threading
import urllib.parse
from typing import Dict, List, Optional

API = "/apis/v2beta1"


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: Dict[str, str]
    headers: Dict[str, str]
    body: Optional[dict] = None
    files: Dict[str, bytes] = dataclasses.field(default_factory=dict)


def _matches(item: dict, filter_json: Optional[str]) -> bool:
    if not filter_json:
        return True
    for predicate in json.loads(filter_json).get("predicates", []):
        if predicate.get("operation") not in ("EQUALS", 1) or item.get(predicate["key"]) != predicate["stringValue"]:
            return False
    return True


class FakeKfp:
    """State and request log of the fake API; `url` is its endpoint."""

    def __init__(self):
        self.requests: List[Request] = []
        self.experiments: Dict[str, dict] = {}
        self.pipelines: Dict[str, dict] = {}
        self.versions: Dict[str, dict] = {}
        self.version_files: Dict[str, bytes] = {}
        self.runs: Dict[str, dict] = {}
        self.recurring_runs: Dict[str, dict] = {}
        self._ids = itertools.count(1)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeKfp":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    def calls(self, method: str, path_suffix: str) -> List[Request]:
        return [r for r in self.requests if r.method == method and r.path.endswith(path_suffix)]

    # Each handler returns (status, JSON body).
    def handle(self, request: Request):
        path, q = request.path[len(API) :], request.query
        if request.method == "GET" and path == "/healthz":
            return 200, {"multi_user": False}
        if path == "/experiments":
            if request.method == "POST":
                exp = dict(request.body, experiment_id=self.new_id("exp"))
                self.experiments[exp["experiment_id"]] = exp
                return 200, exp
            return 200, {"experiments": [e for e in self.experiments.values() if _matches(e, q.get("filter"))]}
        if path == "/pipelines" and request.method == "GET":
            return 200, {"pipelines": [p for p in self.pipelines.values() if _matches(p, q.get("filter"))]}
        if path == "/pipelines/upload":
            pipeline = {
                "pipeline_id": self.new_id("pipeline"),
                "display_name": q["name"],
                "description": q.get("description", ""),
            }
            self.pipelines[pipeline["pipeline_id"]] = pipeline
            self._add_version(pipeline["pipeline_id"], q["name"], request.files["uploadfile"])
            return 200, pipeline
        if path == "/pipelines/upload_version":
            return 200, self._add_version(q["pipelineid"], q["name"], request.files["uploadfile"])
        if path.startswith("/pipelines/") and path.count("/") == 2 and request.method == "GET":
            pipeline = self.pipelines.get(path.split("/")[2])
            return (200, pipeline) if pipeline else (404, {"error": "pipeline not found", "code": 5})
        if path.startswith("/pipelines/") and path.endswith("/versions"):
            pipeline_id = path.split("/")[2]
            return 200, {
                "pipeline_versions": [
                    v
                    for v in self.versions.values()
                    if v["pipeline_id"] == pipeline_id and _matches(v, q.get("filter"))
                ]
            }
        if path == "/runs" and request.method == "POST":
            run = dict(request.body, run_id=self.new_id("run"), state="PENDING")
            self.runs[run["run_id"]] = run
            return 200, run
        if path == "/recurringruns":
            if request.method == "POST":
                job = dict(request.body, recurring_run_id=self.new_id("recurring"), status="ENABLED")
                self.recurring_runs[job["recurring_run_id"]] = job
                return 200, job
            found = [
                j
                for j in self.recurring_runs.values()
                if j["experiment_id"] == q.get("experiment_id") and _matches(j, q.get("filter"))
            ]
            # The list field is camel-cased in the real API (kfp_server_api's attribute map), unlike the others.
            return 200, {"recurringRuns": found, "total_size": len(found)}
        if path.startswith("/recurringruns/") and request.method == "DELETE":
            job_id = path.split("/")[2]
            if self.recurring_runs.pop(job_id, None) is None:
                return 404, {"error": f"recurring run {job_id} not found", "code": 5}
            return 200, {}
        return 404, {"error": f"no route {request.method} {request.path}", "code": 5}

    def _add_version(self, pipeline_id: str, name: str, content: bytes) -> dict:
        version = {"pipeline_id": pipeline_id, "pipeline_version_id": self.new_id("version"), "display_name": name}
        self.versions[version["pipeline_version_id"]] = version
        self.version_files[version["pipeline_version_id"]] = content
        return version

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _serve(self):
                parsed = urllib.parse.urlparse(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query).items()}
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = Request(self.command, parsed.path, query, dict(self.headers.items()))
                content_type = self.headers.get("Content-Type", "")
                if content_type.startswith("multipart/form-data"):
                    message = email.parser.BytesParser().parsebytes(
                        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
                    )
                    for part in message.get_payload():
                        request.files[part.get_param("name", header="content-disposition")] = part.get_payload(
                            decode=True
                        )
                elif raw:
                    request.body = json.loads(raw)
                fake.requests.append(request)
                status, body = fake.handle(request)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args):  # keep pytest's output clean
                pass

        return Handler
