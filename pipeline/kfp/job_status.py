"""How a training job stands, read from its object and its pods as the Kubernetes API returns them (dicts): ended
or not, which replica failed first and how, which cannot start and why. No API calls here (job_launcher.py)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple

from tfxflow.pipeline.kfp import training_job

# The condition that ends each kind of job: (succeeded, failed)
FINAL_CONDITIONS = {training_job.TFJOB: ("Succeeded", "Failed"), training_job.TRAINJOB: ("Complete", "Failed")}
SIGNALS = {9: "SIGKILL", 15: "SIGTERM", 6: "SIGABRT", 11: "SIGSEGV"}
# A container waiting for one of these does not start until someone changes the job or the cluster.
CANNOT_START = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
)


def job_state(kind: str, job: Mapping[str, Any]) -> Tuple[str, str]:
    """("succeeded" | "failed" | "deleting" | "running", the deciding condition's message) of a job object."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "deleting", ""
    succeeded, failed = FINAL_CONDITIONS[kind]
    for condition in reversed((job.get("status") or {}).get("conditions") or []):
        if condition.get("status") != "True":
            continue
        if condition.get("type") == succeeded:
            return "succeeded", condition.get("message", "")
        if condition.get("type") == failed:
            return "failed", condition.get("message", "") or condition.get("reason", "")
    return "running", ""


def _container_status(kind: str, pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == training_job.CONTAINERS[kind]:
            return status
    return {}


def describe_exit(terminated: Mapping[str, Any]) -> str:
    """ "exited with 1", "was killed by SIGKILL (exit code 137), OOMKilled" and the like, from a container's
    terminated state."""
    code = int(terminated.get("exitCode", 0))
    signal_name = SIGNALS.get(code - 128) if code > 128 else None
    words = f"was killed by {signal_name} (exit code {code})" if signal_name else f"exited with {code}"
    reason = terminated.get("reason")
    if reason and reason not in ("Error", "Completed"):
        words += f", {reason}"
    return words


def failed_replica(kind: str, pods: Sequence[Mapping[str, Any]]) -> Optional[Tuple[str, str, str]]:
    """(replica in words, pod name, how it ended) of the replica whose container failed first; None if none did.

    Pods being deleted (the operator stops the others once one failed) are not counted. finishedAt has whole
    seconds: within one, a replica that was killed (SIGKILL, OOMKilled) goes first, as the others then fail
    because the collective lost it."""
    failures = []
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        status = _container_status(kind, pod)
        terminated = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
        if not terminated or int(terminated.get("exitCode", 0)) == 0:
            continue
        killed = int(terminated["exitCode"]) == 137 or terminated.get("reason") == "OOMKilled"
        name = pod["metadata"]["name"]
        who = training_job.replica_of_pod(kind, pod) or name
        failures.append((str(terminated.get("finishedAt") or ""), not killed, who, name, describe_exit(terminated)))
    if not failures:
        return None
    _, _, who, name, how = min(failures)
    return who, name, how


def cannot_start(kind: str, pods: Sequence[Mapping[str, Any]]) -> Optional[Tuple[str, str, str]]:
    """(replica in words, pod name, reason: message) of a replica whose container cannot start (its image cannot
    be pulled, a secret or key it names is missing); None when none is stuck so."""
    for pod in pods:
        waiting = (_container_status(kind, pod).get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in CANNOT_START:
            name = pod["metadata"]["name"]
            message = waiting.get("message", "")
            words = f"{waiting['reason']}: {message}" if message else waiting["reason"]
            return training_job.replica_of_pod(kind, pod) or name, name, words
    return None


def unschedulable(pods: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """The scheduler's message for a pod it has no node for yet (too few GPUs, a taint not tolerated); None when
    every pod has one."""
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return f"{pod['metadata']['name']}: {condition.get('message') or condition.get('reason', '')}"
    return None


def last_line(log: str) -> str:
    """The last line of a log that says something: the last error line if there is one, else the last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error:" in line or "Trainer " in line:
            return line
    return lines[-1] if lines else ""
