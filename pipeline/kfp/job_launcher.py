"""The Trainer step of a pipeline compiled with `--workers N`: creates the training job (training_job.py) through
the Kubernetes API (kube_api.py), follows it, and ends the step as the job ended.

It copies the chief's log into the step's log, waits for the job to end, and then
- succeeded: hands KFP the chief's executor output file (pipeline/kfp/replica.py), so the step leaves the same
  Model and ModelRun artifacts as the one-pod Trainer;
- failed: ends the step with one line naming the replica that failed first, its exit and its last error line;
- a replica that cannot start (its image cannot be pulled, a secret it names is missing): deletes the job and
  ends the step with one line naming the replica and the reason;
- cancelled (KFP stops the pod: SIGTERM, or the KFP launcher above it dies) or past the template's timeout:
  deletes the job, and its pods with it.

The replicas run as the launcher's own pod does (its service account and image pull secrets), and the job is
owned by that pod, so Kubernetes deletes it with the pod even when the launcher was killed before it could. The
job's name comes from the step's output URI, so a launcher whose pod restarts finds its job again: one still
running is followed, one that succeeded is used, one that failed is replaced.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional, Sequence, TextIO, Tuple

from tfxflow.components import object_store
from tfxflow.pipeline.kfp import job_status, replica, training_job
from tfxflow.pipeline.kfp.entrypoint import INVOCATION_FLAG
from tfxflow.pipeline.kfp.kube_api import Kube
from tfxflow.pipeline.kfp.training_job import JobTemplate, PodIdentity

POLL_S = 5.0
DEADLINE_GRACE_S = 60.0  # past the job's own activeDeadlineSeconds, before the launcher gives up on it
EXIT_CANCELLED = 143
POD_NAME_ENVS = ("KFP_POD_NAME", "HOSTNAME")  # KFP's driver sets the first; Kubernetes the second
PR_SET_PDEATHSIG = 1
OPERATORS = {
    training_job.TFJOB: "the Training Operator v1.9 (its TFJob CRD and controller)",
    training_job.TRAINJOB: "Kubeflow Trainer v2.2 or later and kubeflow/training/tensorflow-runtime.yaml",
}


class Cancelled(BaseException):
    """KFP stopped the step's pod (not an Exception: no handler of one may swallow it)."""


class Launcher:
    """Creates one training job, follows it and reports how it ended; `run` returns the step's exit code."""

    def __init__(
        self,
        template: JobTemplate,
        invocation: Sequence[str],
        kube: Kube,
        out: TextIO = sys.stderr,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
        environ=os.environ,
    ):
        self.template = template
        self.invocation = list(invocation)
        self.executor_input = json.loads(self.invocation[self.invocation.index(INVOCATION_FLAG) + 1])
        self.kube = kube
        self.namespace = template.namespace or kube.namespace()
        self.job_output = replica.job_output_uri(self.executor_input)
        self.name = training_job.job_name(template.pipeline_name, self.job_output)
        self.container = training_job.CONTAINERS[template.kind]
        self.pod_name = next((environ[k] for k in POD_NAME_ENVS if environ.get(k)), "")
        self.out = out
        self.poll_s = poll_s
        self.clock = clock
        self.created = False

    def say(self, text: str) -> None:
        print(f"tfxflow: training job: {text}", file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(f"error: {text}", file=self.out, flush=True)

    @property
    def kind_name(self) -> str:
        return f"{training_job.API[self.template.kind][3]} {self.namespace}/{self.name}"

    def identity(self) -> PodIdentity:
        """The launcher's own pod's identity, when the API finds the pod (not outside a cluster); without it (a role
        that may not read pods) the replicas run as the namespace's default service account, which is said."""
        from kubernetes.client.rest import ApiException

        if not self.pod_name:
            return PodIdentity()
        try:
            return PodIdentity.of_pod(self.kube.pod(self.namespace, self.pod_name))
        except ApiException as err:
            self.say(
                f"the step's own pod {self.pod_name} could not be read ({err.status} {err.reason}): the replicas run "
                "as the namespace's default service account"
            )
            return PodIdentity()

    def manifest(self, identity: Optional[PodIdentity] = None) -> Dict[str, Any]:
        return training_job.manifest(
            self.template, self.name, self.invocation, self.namespace, identity or PodIdentity()
        )

    def start(self) -> None:
        """Creates the job, or takes the one of the same name this step made before its pod restarted."""
        kind = self.template.kind
        identity = self.identity()
        while True:
            if self.kube.create(kind, self.namespace, self.manifest(identity)) is not None:
                self.created = True
                who = f" as {identity.service_account}" if identity.service_account else ""
                self.say(f"created {self.kind_name}: {self.template.workers} workers{who}")
                return
            existing = self.kube.get(kind, self.namespace, self.name)
            if existing is None:
                continue  # deleted in between
            state, _ = job_status.job_state(kind, existing)
            if state == "running" or (state == "succeeded" and object_store.exists(self.job_output)):
                self.created = True
                self.say(f"following {self.kind_name}, which this step created before its pod restarted ({state})")
                return
            if state != "deleting":
                self.say(f"replacing {self.kind_name}, which had {state}")
                self.kube.delete(kind, self.namespace, self.name)
            while self.kube.get(kind, self.namespace, self.name) is not None:
                time.sleep(self.poll_s)

    def _pods(self):
        return self.kube.pods(self.namespace, training_job.pod_selector(self.template.kind, self.name))

    def _chief_pod(self) -> Optional[Tuple[str, str]]:
        """(name, phase) of the chief's pod once its container started."""
        chief = "chief 0" if self.template.kind == training_job.TFJOB else "node 0"
        for pod in self._pods():
            if training_job.replica_of_pod(self.template.kind, pod) == chief:
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Running", "Succeeded", "Failed"):
                    return pod["metadata"]["name"], phase
        return None

    def _follow_chief(self, stop: threading.Event) -> None:
        """Copies the chief's log into the step's; follows it again when the connection drops while it runs."""
        since: Optional[float] = None
        while not stop.is_set():
            try:
                found = self._chief_pod()
                if found:
                    pod, phase = found
                    if since is not None and phase != "Running":
                        return  # it ended while the connection was down: the failure line says how
                    since_s = int(time.monotonic() - since) + 1 if since is not None else None
                    for line in self.kube.follow_log(self.namespace, pod, self.container, since_s):
                        print(f"[chief] {line}", file=self.out, flush=True)
                    since = time.monotonic()
                    if self._chief_pod() != (pod, "Running"):
                        return
            except Exception as err:  # noqa: BLE001 (a log that cannot be read must not end the step)
                self.say(f"the chief's log could not be followed: {err}")
                return
            stop.wait(self.poll_s)

    def wait(self) -> Tuple[str, str]:
        """Polls the job until it ends, a replica cannot start, or the template's timeout (plus grace) passes."""
        deadline = self.clock() + self.template.timeout_s + DEADLINE_GRACE_S if self.template.timeout_s else None
        told = ""
        while True:
            job = self.kube.get(self.template.kind, self.namespace, self.name)
            if job is None:
                return "failed", "the job was deleted while it ran"
            state, message = job_status.job_state(self.template.kind, job)
            if state not in ("running", "deleting"):
                return state, message
            pods = self._pods()
            stuck = job_status.cannot_start(self.template.kind, pods)
            if stuck:
                who, pod, why = stuck
                return "stuck", f"{who} (pod {pod}) cannot start: {why}"
            waiting = job_status.unschedulable(pods)
            if waiting and waiting != told:
                self.say(f"waiting for a node: {waiting}")
            told = waiting or ""
            if deadline is not None and self.clock() > deadline:
                return "timeout", f"still running after {self.template.timeout_s} s"
            time.sleep(self.poll_s)

    def finish(self) -> None:
        """Hands KFP the chief's executor output file (its path is the launcher's, as KFP gave it)."""
        object_store.download(self.job_output, self.executor_input["outputs"]["outputFile"])

    def failure_line(self, message: str) -> str:
        found = job_status.failed_replica(self.template.kind, self._pods())
        if found is None:
            return f"{self.kind_name} failed: {message or 'no replica reported why'}; nothing was pushed"
        who, pod, how = found
        try:
            line = job_status.last_line(self.kube.log(self.namespace, pod, self.container, tail=40))
        except Exception:  # noqa: BLE001 (the replica is named without its log)
            line = ""
        return (
            f"{self.kind_name} failed: {who} (pod {pod}) {how}"
            + (f": {line}" if line else "")
            + ("; nothing was pushed")
        )

    def api_problem(self, err: Exception) -> str:
        """One line for an error of the Kubernetes API: what to install or grant, where that is the cause."""
        from kubernetes.client.rest import ApiException

        host = self.kube.host
        group, version, plural, kind = training_job.API[self.template.kind]
        if not isinstance(err, ApiException):
            return f"training job: the Kubernetes API at {host} could not be reached: {err}"
        try:
            message = json.loads(err.body or "{}").get("message") or err.reason
        except ValueError:
            message = err.reason
        if err.status in (401, 403) and ("cannot" in str(message) or err.status == 401):
            return (
                f"training job: the Kubernetes API at {host} refused the step's service account ({message}): bind "
                f"it the role of kubeflow/training/rbac.yaml in {self.namespace}"
            )
        if err.status == 404:
            return (
                f"training job: the cluster at {host} serves no {group}/{version} {plural}: install "
                f"{OPERATORS[self.template.kind]}"
            )
        return f"training job: the Kubernetes API at {host} refused the {kind} ({err.status}): {message}"

    def stop_job(self, why: str) -> None:
        """Deletes the job this step made, saying so; says how to when the API does not answer."""
        if not self.created:
            return
        try:
            if self.kube.delete(self.template.kind, self.namespace, self.name):
                self.say(f"{why}: deleted {self.kind_name}")
        except Exception as err:  # noqa: BLE001 (the step ends either way; the owner reference backs this up)
            self.say(
                f"{why}: {self.kind_name} could not be deleted ({err}); delete it with `kubectl delete "
                f"{training_job.API[self.template.kind][2]} -n {self.namespace} {self.name}`"
            )

    def run(self) -> int:
        """Creates the job, follows it to its end, and returns the step's exit code."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        stop = threading.Event()
        try:
            return self._run(stop, self.clock())
        except Cancelled:
            self.stop_job("the step was stopped")
            return EXIT_CANCELLED
        except (ApiException, HTTPError) as err:  # the API client's: one line, no traceback
            self.error(self.api_problem(err))
            self.stop_job("the step ends")
            return 1
        except (object_store.ObjectStoreError, OSError) as err:
            self.error(f"{self.kind_name} succeeded, and its chief's output could not be read: {err}")
            return 1
        finally:
            stop.set()

    def _run(self, stop: threading.Event, started: float) -> int:
        self.start()
        following = threading.Thread(target=self._follow_chief, args=(stop,), daemon=True)
        following.start()
        state, message = self.wait()
        if state == "succeeded":
            following.join(timeout=10)
            self.finish()
            self.say(f"{self.kind_name} succeeded in {self.clock() - started:.0f} s")
            return 0
        if state in ("timeout", "stuck"):
            self.stop_job(f"{self.kind_name} {message}" if state == "timeout" else "a replica cannot start")
            if state == "stuck":
                self.error(f"{self.kind_name}: {message}; nothing was pushed")
            else:
                self.error(f"{self.kind_name} {message}; nothing was pushed")
            return 1
        following.join(timeout=5)
        self.error(self.failure_line(message))
        return 1


def _cancel(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second signal must not interrupt the deletion
    raise Cancelled(signum)


def _on_parent_death(signum: int) -> None:
    """Asks Linux for `signum` when the process that started this one ends (KFP's launcher, which does not pass
    SIGTERM on when its pod is stopped)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):
        pass  # not Linux: SIGTERM itself still reaches a launcher that is the pod's process


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    template, invocation = training_job.parse_launcher_args(argv)
    signal.signal(signal.SIGTERM, _cancel)
    _on_parent_death(signal.SIGTERM)
    try:
        kube = Kube()
    except Cancelled:
        sys.exit(EXIT_CANCELLED)
    except Exception as err:  # noqa: BLE001 (one line for the step's log, whatever the client raised)
        print(
            f"error: training job: no Kubernetes API to reach (no service account here, and no kubeconfig): {err}",
            file=sys.stderr,
        )
        sys.exit(1)
    try:
        launcher = Launcher(template, invocation, kube)
    except Cancelled:
        sys.exit(EXIT_CANCELLED)
    except ValueError as err:  # an executor input without an output in an object store
        print(f"error: training job: {err}", file=sys.stderr)
        sys.exit(1)
    sys.exit(launcher.run())


if __name__ == "__main__":
    main()
