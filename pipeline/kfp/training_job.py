"""The training job a compiled pipeline's Trainer step creates when it trains on several workers: a Training
Operator v1 `TFJob` (a Chief and N-1 Workers; the operator gives each pod its TF_CONFIG), or a Trainer v2
`TrainJob` on this project's ClusterTrainingRuntime (kubeflow/training/), whose pods build their TF_CONFIG from
JobSet's host names and their completion index (`tfxflow.pipeline.kfp.replica`).

Every replica runs the step image's entry point with the one-pod Trainer's own arguments and the replica flag
(`entrypoint.REPLICA_FLAG`): it reads its inputs from the pipeline root itself, and the chief writes the outputs
there (pipeline/kfp/entrypoint.py). `JobTemplate` is what the compiler knows (image, environment, resources,
placement); the launcher (`job_launcher.py`) adds the invocation, which only the running step has.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tfxflow.pipeline.kfp.replica import JOBSET_NAME_ENV, NODE_JOB, NODES_ENV, REPLICA_FLAG

TFJOB = "tfjob"
TRAINJOB = "trainjob"
KINDS = (TFJOB, TRAINJOB)
# (group, version, plural, kind) of each job's custom resource
API = {
    TFJOB: ("kubeflow.org", "v1", "tfjobs", "TFJob"),
    TRAINJOB: ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"),
}
CONTAINER = "tensorflow"  # the operator's default container name: it adds TF_CONFIG and the port to this one
# the container of each kind's pods that trains (a TrainJob's is the runtime's `node`)
CONTAINERS = {TFJOB: CONTAINER, TRAINJOB: "node"}
PORT = 2222  # the operator's default port (its name is tfjob-port)
PORT_NAME = "tfjob-port"
RUNTIME = "tfxflow-tensorflow"  # kubeflow/training/tensorflow-runtime.yaml's ClusterTrainingRuntime
PATCH_MANAGER = "tfxflow.dev/launcher"  # who owns the TrainJob's runtime patch
LAUNCHER_MODULE = "tfxflow.pipeline.kfp.job_launcher"
ENTRYPOINT = ("python", "-m", "tfxflow.pipeline.kfp.entrypoint")
JOB_FLAG = "--tfxflow_training_job"
# Istio's sidecar (injected in multi-user Kubeflow's profile namespaces) keeps a finished replica's pod running
# and sits between the workers' collective connections.
POD_ANNOTATIONS = {"sidecar.istio.io/inject": "false"}
FINISHED_TTL_S = 86400  # finished jobs (and their pods, logs included) stay a day for inspection
NAME_MAX = 40  # pods are <name>-worker-<i> and services the same: 63-character DNS labels with room to spare
LABEL = "tfxflow.dev/job"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclasses.dataclass(frozen=True)
class JobTemplate:
    """What the compiler puts into the launcher's arguments: the job kind, its replicas, and what every replica's
    pod gets (the one-pod Trainer's image, environment, secrets, resources and placement)."""

    kind: str
    workers: int
    image: str
    env: Tuple[Mapping[str, Any], ...] = ()  # Kubernetes EnvVar objects (value, or valueFrom.secretKeyRef)
    resources: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)  # limits, requests
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Tuple[Mapping[str, str], ...] = ()
    namespace: str = ""  # empty: the launcher's own
    timeout_s: int = 0  # 0: none; else the job's activeDeadlineSeconds and the launcher's own limit
    runtime: str = RUNTIME  # TrainJob's ClusterTrainingRuntime
    pipeline_name: str = "tfxflow"  # the stem of the job's name

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"training job kind must be one of {KINDS}, got '{self.kind}'")
        if self.workers < 2:
            raise ValueError(f"a training job has at least 2 workers, got {self.workers}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobTemplate":
        data = json.loads(text)
        data["env"] = tuple(data.get("env", ()))
        data["tolerations"] = tuple(data.get("tolerations", ()))
        return cls(**data)


def job_name(pipeline_name: str, seed: str) -> str:
    """A DNS-1035 name for the job of one Trainer execution: the pipeline's name, cut, and a hash of `seed` (the
    execution's output URI, the same when the launcher's pod restarts, so it finds its job again)."""
    stem = re.sub(r"[^a-z0-9-]+", "-", pipeline_name.lower()).strip("-")
    stem = re.sub(r"^[^a-z]+", "", stem)[: NAME_MAX - 17].rstrip("-") or "tfxflow"
    return f"{stem}-train-{hashlib.sha256(seed.encode('utf-8')).hexdigest()[:10]}"


def replica_command(invocation: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(command, args) of every replica: the entry point with the replica flag and the step's own arguments."""
    return list(ENTRYPOINT), [REPLICA_FLAG, *invocation]


@dataclasses.dataclass(frozen=True)
class PodIdentity:
    """What the replicas take from the launcher's own pod: its service account (the cloud identity and the
    registry credentials a KFP step has), its image pull secrets, and the pod itself as the job's owner, so the
    job goes when the step's pod is deleted even if the launcher could not delete it."""

    service_account: str = ""
    pull_secrets: Tuple[str, ...] = ()
    owner: Optional[Mapping[str, str]] = None  # {"name", "uid"} of the launcher's pod

    @classmethod
    def of_pod(cls, pod: Optional[Mapping[str, Any]]) -> "PodIdentity":
        if not pod:
            return cls()
        spec, metadata = pod.get("spec") or {}, pod.get("metadata") or {}
        owner = {"name": metadata["name"], "uid": metadata["uid"]} if metadata.get("uid") else None
        return cls(
            service_account=spec.get("serviceAccountName") or "",
            pull_secrets=tuple(s["name"] for s in spec.get("imagePullSecrets") or [] if s.get("name")),
            owner=owner,
        )

    def pod_spec(self) -> Dict[str, Any]:
        spec: Dict[str, Any] = {}
        if self.service_account:
            spec["serviceAccountName"] = self.service_account
        if self.pull_secrets:
            spec["imagePullSecrets"] = [{"name": name} for name in self.pull_secrets]
        return spec

    def metadata(self, name: str) -> Dict[str, Any]:
        metadata: Dict[str, Any] = {"labels": {LABEL: name}}
        if self.owner:
            metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", **self.owner}]
        return metadata


def _container(template: JobTemplate, invocation: Sequence[str], name: str) -> Dict[str, Any]:
    command, args = replica_command(invocation)
    container: Dict[str, Any] = {"name": name, "image": template.image, "command": command, "args": args}
    if template.env:
        container["env"] = [dict(e) for e in template.env]
    if template.resources:
        container["resources"] = {k: dict(v) for k, v in template.resources.items()}
    return container


def _pod_spec(template: JobTemplate, container: Dict[str, Any], identity: PodIdentity) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"containers": [container], **identity.pod_spec()}
    if template.node_selector:
        spec["nodeSelector"] = dict(template.node_selector)
    if template.tolerations:
        spec["tolerations"] = [dict(t) for t in template.tolerations]
    return spec


def tfjob(
    template: JobTemplate, name: str, invocation: Sequence[str], namespace: str, identity: PodIdentity = PodIdentity()
) -> Dict[str, Any]:
    """A TFJob: one Chief and workers-1 Workers, never restarted by the operator (a replica that fails fails the
    job, the launcher names it, and the step's retry resumes from the Trainer's backup)."""
    container = _container(template, invocation, CONTAINER)
    container["ports"] = [{"containerPort": PORT, "name": PORT_NAME}]

    def replica(count: int) -> Dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "metadata": {"annotations": dict(POD_ANNOTATIONS), "labels": {LABEL: name}},
                "spec": _pod_spec(template, copy.deepcopy(container), identity),
            },
        }

    run_policy: Dict[str, Any] = {
        "cleanPodPolicy": "Running",  # a failed job's other replicas stop; finished pods keep their logs
        "ttlSecondsAfterFinished": FINISHED_TTL_S,
    }
    if template.timeout_s:
        run_policy["activeDeadlineSeconds"] = template.timeout_s
    spec = {"runPolicy": run_policy, "tfReplicaSpecs": {"Chief": replica(1), "Worker": replica(template.workers - 1)}}
    return _object(TFJOB, name, namespace, identity, spec)


def trainjob(
    template: JobTemplate, name: str, invocation: Sequence[str], namespace: str, identity: PodIdentity = PodIdentity()
) -> Dict[str, Any]:
    """A TrainJob (Trainer v2.2+: placement through `runtimePatches`) of `workers` nodes on the project's
    ClusterTrainingRuntime; node 0 is the chief. Its nodes build TF_CONFIG from the variables it sets
    (pipeline/kfp/replica.py), as Trainer v2 gives TensorFlow none."""
    group = API[TRAINJOB][0]
    command, args = replica_command(invocation)
    env = [dict(e) for e in template.env] + [
        {"name": NODES_ENV, "value": str(template.workers)},
        {"name": JOBSET_NAME_ENV, "value": name},
    ]
    trainer: Dict[str, Any] = {
        "image": template.image,
        "command": command,
        "args": args,
        "env": env,
        "numNodes": template.workers,
    }
    if template.resources:
        trainer["resourcesPerNode"] = {k: dict(v) for k, v in template.resources.items()}
    pod: Dict[str, Any] = {"metadata": {"annotations": dict(POD_ANNOTATIONS), "labels": {LABEL: name}}}
    placement = {k: v for k, v in _pod_spec(template, {}, identity).items() if k != "containers"}
    if placement:
        pod["spec"] = placement
    spec: Dict[str, Any] = {
        "runtimeRef": {"name": template.runtime, "kind": "ClusterTrainingRuntime", "apiGroup": group},
        "trainer": trainer,
        "runtimePatches": [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {"replicatedJobs": [{"name": NODE_JOB, "template": {"spec": {"template": pod}}}]}
                    }
                },
            }
        ],
    }
    if template.timeout_s:
        spec["activeDeadlineSeconds"] = template.timeout_s
    return _object(TRAINJOB, name, namespace, identity, spec)


def _object(kind: str, name: str, namespace: str, identity: PodIdentity, spec: Dict[str, Any]) -> Dict[str, Any]:
    group, version, _, kind_name = API[kind]
    return {
        "apiVersion": f"{group}/{version}",
        "kind": kind_name,
        "metadata": {"name": name, "namespace": namespace, **identity.metadata(name)},
        "spec": spec,
    }


def manifest(
    template: JobTemplate, name: str, invocation: Sequence[str], namespace: str, identity: PodIdentity = PodIdentity()
) -> Dict[str, Any]:
    """The job's manifest, of the template's kind."""
    return (tfjob if template.kind == TFJOB else trainjob)(template, name, invocation, namespace, identity)


def launcher_args(template: JobTemplate, invocation: Sequence[str]) -> List[str]:
    """The compiled Trainer step's arguments when it launches a job: the template, then the step's own."""
    return [JOB_FLAG, template.to_json(), "--", *invocation]


def parse_launcher_args(argv: Sequence[str]) -> Tuple[JobTemplate, List[str]]:
    """The inverse of `launcher_args`."""
    argv = list(argv)
    if len(argv) < 3 or argv[0] != JOB_FLAG or argv[2] != "--":
        raise ValueError(f"expected {JOB_FLAG} <template> -- <the Trainer's arguments>, got {argv[:3]}")
    return JobTemplate.from_json(argv[1]), argv[3:]


def replica_of_pod(kind: str, pod: Mapping[str, Any]) -> Optional[str]:
    """A job pod's replica in words ("chief 0", "worker 1"; a TrainJob's node i is "node i"), from its labels."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if kind == TFJOB:
        rtype = labels.get("training.kubeflow.org/replica-type")
        index = labels.get("training.kubeflow.org/replica-index")
    else:
        rtype = "node" if labels.get("jobset.sigs.k8s.io/replicatedjob-name") == NODE_JOB else None
        # the node (job-index is always 0); the label from Kubernetes 1.28, the annotation before
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        index = labels.get(COMPLETION_INDEX) or annotations.get(COMPLETION_INDEX)
    if rtype is None or index is None:
        return None
    return f"{rtype.lower()} {index}"


def pod_selector(kind: str, name: str) -> str:
    """The label selector of a job's pods."""
    if kind == TFJOB:
        return f"training.kubeflow.org/job-name={name}"
    return f"jobset.sigs.k8s.io/jobset-name={name}"
