"""A stand-in Kubernetes API server with the Training Operator v1's TFJob controller, on 127.0.0.1, for the
Trainer step's launcher (pipeline/kfp/job_launcher.py) and the compiled pipeline's runs.

It is written from the operator's source (kubeflow/trainer at v1.9.4: pkg/controller.v1/tensorflow/
tensorflow.go `genTFConfigJSONStr`, tfjob_controller.go `UpdateJobStatus`, common/pod.go, common/job.go) and
the CRD it publishes (tests/kubeflow/data/crds/), not from this project's code. What it serves:
- `POST/GET/DELETE /apis/kubeflow.org/v1/namespaces/{ns}/tfjobs[/{name}]`: a created TFJob is checked against
  the CRD's OpenAPI schema (`crd_check.py`; a refusal is the API server's 422 Invalid) and the operator's
  webhook rules (a `tensorflow` container per replica, one Chief at most), then each replica runs as a local
  process: pod `{job}-{type}-{index}`, the labels the operator sets, the container's command and args (a first
  `python` replaced by `FakeKube(python=...)`), its env (values, and secretKeyRef from `secrets`; with a
  missing one the pod stays Pending, its container waiting with CreateContainerConfigError, without a log), and
  TF_CONFIG as the operator writes it (cluster of every replica type, task, "environment": "cloud").
- Status as the operator keeps it: conditions Created, Running, Succeeded (the Chief decides) or Failed
  ("TFJob {ns}/{name} has failed because {n} {Type} replica(s) failed.", restartPolicy Never), replicaStatuses,
  startTime, completionTime; runPolicy.activeDeadlineSeconds ("Job {name} has failed because it was active
  longer than specified deadline"); cleanPodPolicy Running/All stop the other replicas when the job ends.
- `GET /api/v1/namespaces/{ns}/pods?labelSelector=k=v` and `.../pods/{name}/log` (`follow`, `tailLines`), with
  the fields the kubernetes client requires of a container status.
- `DELETE` kills the job's processes (SIGTERM, then SIGKILL after `grace_s`), as the garbage collector deletes
  the pods its owner references tie to the job.

Where it differs from a cluster: TF_CONFIG names `127.0.0.1:<free port>` instead of `{job}-{type}-{i}.{ns}.svc:
2222` (no cluster DNS here), and each pod's own file system is a folder (TFXFLOW_KFP_LOCAL_ROOT, the pod's
launcher root); restart policies other than Never, PS and Evaluator replicas and suspend are refused with 501;
TTL, owner references (the garbage collector), scheduling and image pulls (a pod starts at once), a deleted pod's
grace period in the lists (it leaves them at once) and authentication are not emulated. TrainJobs are not run (the
CRD check applies to them).
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from typing import Dict, List, Mapping, Optional, Tuple

from tests import crd_check

TFJOBS = ("kubeflow.org", "v1", "tfjobs")
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
CONTAINER = "tensorflow"
ORDER = ("Chief", "Worker")  # the operator's replica types this stand-in runs


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Pod:
    def __init__(self, name: str, namespace: str, labels: Dict[str, str], image: str, log_path: str):
        self.name, self.namespace, self.labels, self.image = name, namespace, labels, image
        self.log_path = log_path
        self.process: Optional[subprocess.Popen] = None
        self.phase = "Pending"
        self.exit_code: Optional[int] = None
        self.reason = ""
        self.started = ""
        self.finished = ""
        self.waiting = ""  # e.g. CreateContainerConfigError
        self.waiting_message = ""

    def poll(self) -> None:
        if self.process is None or self.exit_code is not None:
            return
        code = self.process.poll()
        if code is None:
            return
        self.exit_code = 128 - code if code < 0 else code  # a signal: the container runtime's 128+n
        self.phase = "Succeeded" if self.exit_code == 0 else "Failed"
        self.reason = "Completed" if self.exit_code == 0 else "Error"
        self.finished = _now()

    def to_dict(self) -> dict:
        status: dict = {"name": CONTAINER, "image": self.image, "imageID": "", "ready": self.phase == "Running"}
        status["restartCount"] = 0
        if self.exit_code is not None:
            status["state"] = {
                "terminated": {
                    "exitCode": self.exit_code,
                    "reason": self.reason,
                    "startedAt": self.started,
                    "finishedAt": self.finished,
                }
            }
        elif self.waiting:
            status["state"] = {"waiting": {"reason": self.waiting, "message": self.waiting_message}}
        elif self.phase == "Running":
            status["state"] = {"running": {"startedAt": self.started}}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(self.labels)},
            "status": {"phase": self.phase, "containerStatuses": [status]},
        }

    def stop(self, grace_s: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class _Job:
    def __init__(self, body: dict, pods: List[Tuple[str, int, _Pod]]):
        self.body = body
        self.pods = pods  # (replica type, index, pod)
        self.deleted: List[_Pod] = []  # pods the operator deleted when the job ended (cleanPodPolicy)
        self.status: dict = {"conditions": [], "replicaStatuses": {}}
        self.started = time.monotonic()
        self.finished = False

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.body["metadata"]["namespace"]

    def condition(self, kind: str, message: str) -> None:
        reason = f"TFJob{kind}"
        for existing in self.status["conditions"]:
            if existing["type"] == "Running" and kind in ("Succeeded", "Failed"):
                existing["status"] = "False"
        self.status["conditions"].append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastUpdateTime": _now(),
                "lastTransitionTime": _now(),
            }
        )

    def to_dict(self) -> dict:
        return {**self.body, "status": self.status}


class FakeKube:
    """The stand-in API server; `kubeconfig(path)` writes a kubeconfig that points the kubernetes client at it.

    `python`: replaces a container command's first `python`; `base_env`: the environment every pod starts with
    (the image's, here this process's); `secrets`: {secret: {key: value}}; `workdir`: pods' logs and file
    systems; `kill_when`: (pod name ending, log text), the pod whose log shows the text is killed (SIGKILL, as
    the kubelet's OOM killer or a lost node ends a container); `modules`: {module: module run instead} for
    `python -m` commands (a test's stand-in replica)."""

    def __init__(
        self,
        workdir: str,
        python: str = "python",
        base_env: Optional[Mapping[str, str]] = None,
        secrets: Optional[Mapping[str, Mapping[str, str]]] = None,
        grace_s: float = 10.0,
        tick_s: float = 0.2,
        modules: Optional[Mapping[str, str]] = None,
        kill_when: Optional[Tuple[str, str]] = None,
    ):
        self.workdir = workdir
        self.python = python
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
        self.grace_s = grace_s
        self.kill_when = kill_when  # (pod name ending, log text): SIGKILL that pod's process once its log has it
        self.killed: List[str] = []
        self.modules = dict(modules or {})  # `python -m A` runs `python -m B` instead (a test's stand-in replica)
        self.tick_s = tick_s
        self.jobs: Dict[Tuple[str, str], _Job] = {}
        self.static_pods: Dict[Tuple[str, str], dict] = {}  # pods no job made (a step's own), by (namespace, name)
        self.created: List[dict] = []  # every accepted body, in order
        self.requests: List[Tuple[str, str]] = []  # (method, path)
        self.lock = threading.RLock()
        self._server: Optional[http.server.ThreadingHTTPServer] = None
        self._stop = threading.Event()

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self) -> "FakeKube":
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

            def do_DELETE(self):
                fake._handle(self, "DELETE")

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        threading.Thread(target=self._control, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            for job in self.jobs.values():
                for pod in [p for _, _, p in job.pods] + job.deleted:
                    pod.stop(1.0)
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, path: str, namespace: str = "default") -> str:
        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
            "users": [{"name": "launcher", "user": {"token": "stand-in"}}],
            "contexts": [
                {"name": "stand-in", "context": {"cluster": "stand-in", "user": "launcher", "namespace": namespace}}
            ],
            "current-context": "stand-in",
        }
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        return path

    def add_pod(self, pod: dict) -> None:
        """A pod no job made, e.g. the launcher's own, which it reads its identity from."""
        self.static_pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod

    # -- HTTP ----------------------------------------------------------------------------------------------
    def _send(self, handler, code: int, body: dict) -> None:
        data = json.dumps(body).encode("utf-8")
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _status(self, handler, code: int, reason: str, message: str) -> None:
        self._send(
            handler,
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": reason,
                "message": message,
                "code": code,
            },
        )

    def _handle(self, handler, method: str) -> None:
        parsed = urllib.parse.urlparse(handler.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        parts = [p for p in parsed.path.split("/") if p]
        self.requests.append((method, parsed.path))
        body = None
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            body = json.loads(handler.rfile.read(length) or b"null")
        try:
            if parts[:1] == ["apis"] and len(parts) >= 6 and parts[3] == "namespaces":
                self._custom(handler, method, tuple(parts[1:3]) + (parts[5],), parts[4], parts[6:], body)
            elif parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
                self._pods(handler, method, parts[3], parts[5:], query)
            else:
                self._status(handler, 404, "NotFound", f"no route for {parsed.path}")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _custom(self, handler, method, resource, namespace, rest, body) -> None:
        if resource not in (TFJOBS, TRAINJOBS):
            return self._status(handler, 404, "NotFound", f"the server could not find the resource {resource}")
        with self.lock:
            if method == "POST" and not rest:
                return self._create(handler, resource, namespace, body)
            key = (namespace, rest[0]) if rest else None
            job = self.jobs.get(key) if key else None
            if job is None or (resource, job.body["kind"]) not in ((TFJOBS, "TFJob"), (TRAINJOBS, "TrainJob")):
                return self._status(handler, 404, "NotFound", f'{resource[2]} "{rest[0] if rest else ""}" not found')
            if method == "GET":
                return self._send(handler, 200, job.to_dict())
            if method == "DELETE":
                del self.jobs[key]
        if method == "DELETE":
            for pod in [p for _, _, p in job.pods] + job.deleted:
                pod.stop(self.grace_s)
            return self._send(handler, 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self._status(handler, 405, "MethodNotAllowed", method)

    def _create(self, handler, resource, namespace, body) -> None:
        kind = "TFJob" if resource == TFJOBS else "TrainJob"
        problems = crd_check.problems(body, kind)
        if problems:
            return self._status(handler, 422, "Invalid", f"{kind}.{resource[0]} is invalid: " + "; ".join(problems))
        name = body["metadata"]["name"]
        body = json.loads(json.dumps(body))
        body["metadata"]["namespace"] = namespace
        if (namespace, name) in self.jobs:
            return self._status(handler, 409, "AlreadyExists", f'{resource[2]}.{resource[0]} "{name}" already exists')
        if kind == "TrainJob":
            return self._status(handler, 501, "NotImplemented", "the stand-in does not run TrainJobs")
        problems = self._unsupported(body)
        if problems:
            return self._status(handler, 501, "NotImplemented", "; ".join(problems))
        job = _Job(body, [])
        job.condition("Created", f"TFJob {name} is created.")
        self.jobs[(namespace, name)] = job
        self.created.append(body)
        self._start_pods(job)
        self._send(handler, 201, job.to_dict())

    @staticmethod
    def _unsupported(body: dict) -> List[str]:
        spec = body["spec"]
        problems = []
        for rtype, replica in spec["tfReplicaSpecs"].items():
            if rtype not in ORDER:
                problems.append(f"replica type {rtype} is not emulated")
            if replica.get("restartPolicy", "Never") != "Never":
                problems.append(f"{rtype}: restartPolicy {replica['restartPolicy']} is not emulated")
            containers = replica["template"]["spec"]["containers"]
            if not any(c["name"] == CONTAINER for c in containers):  # the operator's webhook
                problems.append(f"{rtype}: must have at least one container with name tensorflow")
        if spec["tfReplicaSpecs"].get("Chief", {}).get("replicas", 1) > 1:
            problems.append("must not have more than 1 Chief or Master role")
        if (spec.get("runPolicy") or {}).get("suspend"):
            problems.append("suspend is not emulated")
        return problems

    # -- the operator -----------------------------------------------------------------------------------------
    def _start_pods(self, job: _Job) -> None:
        spec = job.body["spec"]["tfReplicaSpecs"]
        ports = {(t, i): _free_port() for t in ORDER if t in spec for i in range(spec[t].get("replicas", 1))}
        cluster = {
            t.lower(): [f"127.0.0.1:{ports[(t, i)]}" for i in range(spec[t].get("replicas", 1))]
            for t in ORDER
            if t in spec
        }
        for rtype in ORDER:
            if rtype not in spec:
                continue
            for index in range(spec[rtype].get("replicas", 1)):
                name = f"{job.name}-{rtype.lower()}-{index}"
                labels = {
                    **(spec[rtype]["template"].get("metadata", {}).get("labels") or {}),
                    "training.kubeflow.org/operator-name": "tfjob-controller",
                    "training.kubeflow.org/job-name": job.name,
                    "training.kubeflow.org/replica-type": rtype.lower(),
                    "training.kubeflow.org/replica-index": str(index),
                }
                if rtype == "Chief":
                    labels["training.kubeflow.org/job-role"] = "master"
                container = next(c for c in spec[rtype]["template"]["spec"]["containers"] if c["name"] == CONTAINER)
                folder = os.path.join(self.workdir, job.namespace, name)
                os.makedirs(folder, exist_ok=True)
                pod = _Pod(name, job.namespace, labels, container["image"], os.path.join(folder, "log"))
                job.pods.append((rtype, index, pod))
                tf_config = {
                    "cluster": cluster,
                    "task": {"type": rtype.lower(), "index": index},
                    "environment": "cloud",
                }
                self._run(pod, container, folder, json.dumps(tf_config))

    def _env(self, container: dict) -> Tuple[Dict[str, str], str]:
        env = {}
        for var in container.get("env") or []:
            if "value" in var:
                env[var["name"]] = var["value"]
                continue
            ref = (var.get("valueFrom") or {}).get("secretKeyRef") or {}
            value = self.secrets.get(ref.get("name"), {}).get(ref.get("key"))
            if value is None:
                if ref.get("optional"):
                    continue
                return env, f'secret "{ref.get("name")}" or its key "{ref.get("key")}" not found'
            env[var["name"]] = value
        return env, ""

    def _run(self, pod: _Pod, container: dict, folder: str, tf_config: str) -> None:
        env, missing = self._env(container)
        if missing:  # the kubelet keeps such a pod Pending, its container waiting, without a log
            pod.waiting, pod.waiting_message = "CreateContainerConfigError", missing
            return
        command = list(container.get("command") or []) + list(container.get("args") or [])
        if command and command[0] in ("python", "python3"):
            command[0] = self.python
            if command[1:2] == ["-m"] and command[2] in self.modules:
                command[2] = self.modules[command[2]]
        root = os.path.join(folder, "root")
        os.makedirs(root, exist_ok=True)
        full_env = {
            **self.base_env,
            **env,
            "TF_CONFIG": tf_config,
            "TFXFLOW_KFP_LOCAL_ROOT": root,
            "HOSTNAME": pod.name,
        }
        log = open(pod.log_path, "wb")
        pod.process = subprocess.Popen(
            command, env=full_env, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        pod.phase, pod.started = "Running", _now()

    def _control(self) -> None:
        while not self._stop.wait(self.tick_s):
            with self.lock:
                for job in list(self.jobs.values()):
                    self._reconcile(job)

    def _reconcile(self, job: _Job) -> None:
        if job.finished:
            return
        for _, _, pod in job.pods:
            pod.poll()
            self._kill_if_due(pod)
        counts: Dict[str, Dict[str, int]] = {}
        for rtype, _, pod in job.pods:
            entry = counts.setdefault(rtype, {})
            key = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(pod.phase)
            if key:
                entry[key] = entry.get(key, 0) + 1
        job.status["replicaStatuses"] = counts
        job.status.setdefault("startTime", _now())
        run_policy = job.body["spec"].get("runPolicy") or {}
        deadline = run_policy.get("activeDeadlineSeconds")
        name, ns = job.name, job.namespace
        decider = "Chief" if "Chief" in counts else "Worker"
        failed = next(((t, c["failed"]) for t, c in counts.items() if c.get("failed")), None)
        replicas = job.body["spec"]["tfReplicaSpecs"][decider].get("replicas", 1)
        if failed:
            job.condition("Failed", f"TFJob {ns}/{name} has failed because {failed[1]} {failed[0]} replica(s) failed.")
        elif counts.get(decider, {}).get("succeeded", 0) == replicas:
            job.condition("Succeeded", f"TFJob {ns}/{name} successfully completed.")
        elif deadline and time.monotonic() - job.started > deadline:
            job.condition("Failed", f"Job {name} has failed because it was active longer than specified deadline")
        else:
            if counts.get(decider, {}).get("active") and not any(
                c["type"] == "Running" for c in job.status["conditions"]
            ):
                job.condition("Running", f"TFJob {ns}/{name} is running.")
            return
        job.finished = True
        job.status["completionTime"] = _now()
        # The operator deletes these pods (DeletePodsAndServices): they leave the pod list, their processes stop.
        policy = run_policy.get("cleanPodPolicy", "None")
        deleted = [
            entry
            for entry in job.pods
            if policy == "All" or (policy == "Running" and entry[2].phase in ("Running", "Pending"))
        ]
        for entry in deleted:
            job.pods.remove(entry)
            job.deleted.append(entry[2])
            threading.Thread(target=entry[2].stop, args=(self.grace_s,), daemon=True).start()

    def _kill_if_due(self, pod: _Pod) -> None:
        if not self.kill_when or pod.exit_code is not None or pod.process is None or pod.name in self.killed:
            return
        ending, text = self.kill_when
        if pod.name.endswith(ending) and os.path.exists(pod.log_path):
            with open(pod.log_path, encoding="utf-8", errors="replace") as f:
                if text in f.read():
                    os.killpg(pod.process.pid, signal.SIGKILL)
                    self.killed.append(pod.name)

    # -- pods -------------------------------------------------------------------------------------------------
    def _all_pods(self, namespace: str) -> List[_Pod]:
        with self.lock:
            return [pod for job in self.jobs.values() if job.namespace == namespace for _, _, pod in job.pods]

    def _pods(self, handler, method, namespace, rest, query) -> None:
        if method != "GET":
            return self._status(handler, 405, "MethodNotAllowed", method)
        if not rest:
            selector = dict(p.split("=", 1) for p in query.get("labelSelector", "").split(",") if "=" in p)
            items = [
                pod.to_dict()
                for pod in self._all_pods(namespace)
                if all(pod.labels.get(k) == v for k, v in selector.items())
            ]
            return self._send(handler, 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
        if (namespace, rest[0]) in self.static_pods and not rest[1:]:
            return self._send(handler, 200, self.static_pods[(namespace, rest[0])])
        pod = next((p for p in self._all_pods(namespace) if p.name == rest[0]), None)
        if pod is None:
            return self._status(handler, 404, "NotFound", f'pods "{rest[0]}" not found')
        if rest[1:] == ["log"]:
            if query.get("container", CONTAINER) != CONTAINER:
                return self._status(handler, 400, "BadRequest", f"container {query['container']} is not valid")
            if pod.process is None:
                return self._status(
                    handler,
                    400,
                    "BadRequest",
                    f'container "{CONTAINER}" in pod "{pod.name}" is waiting to start: {pod.waiting or "Pending"}',
                )
            return self._log(handler, pod, query)
        return self._send(handler, 200, pod.to_dict())

    def _log(self, handler, pod: _Pod, query) -> None:
        def read() -> bytes:
            try:
                with open(pod.log_path, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return b""

        if query.get("follow", "").lower() != "true":  # the python client sends True
            data = read()
            if query.get("tailLines"):
                data = b"\n".join(data.splitlines()[-int(query["tailLines"]) :]) + b"\n"
            handler.send_response(200)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        while True:
            pod.poll()
            done = pod.exit_code is not None or pod.process is None
            data = read()
            if len(data) > sent:
                chunk = data[sent:]
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
                sent = len(data)
            if done or self._stop.is_set():
                break
            time.sleep(self.tick_s)
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
