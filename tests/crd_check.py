"""Checks an object against a published CustomResourceDefinition (tests/kubeflow/data/crds/, upstream files) as
the Kubernetes API server does on create: the version's OpenAPI v3 schema, with unknown fields refused (the
server would prune them, silently dropping a setting; `kubectl` refuses them), plus the CEL rules
(`x-kubernetes-validations`) that apply on create, evaluated by the rule texts the CRDs hold. A rule this file
does not know is a problem, not a pass, so a newer CRD cannot be half-checked."""

from __future__ import annotations

import copy
import functools
import os
import re
from typing import Any, Callable, Dict, List

import jsonschema
import yaml

CRDS = os.path.join(os.path.dirname(__file__), "kubeflow", "data", "crds")
FILES = {
    "TFJob": "kubeflow.org_tfjobs.yaml",
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
    "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml",
}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_MATCHES = re.compile(r"^self(?:\.metadata\.name)?\.matches\('(.+)'\)$")


def _cel(rule: str) -> Callable[[Any], bool]:
    """A Python predicate for one of the CEL rule texts the CRDs hold (on create; transition rules pass)."""
    rule = " ".join(rule.split())
    if rule == "self == oldSelf":
        return lambda value: True  # a transition rule: only updates are checked
    match = _MATCHES.match(rule)
    if match:
        pattern = re.compile(match.group(1))
        if rule.startswith("self.metadata.name"):
            return lambda value: bool(pattern.match(value["metadata"]["name"]))
        return lambda value: bool(pattern.match(value))
    if rule == "size(self.metadata.name) <= 63":
        return lambda value: len(value["metadata"]["name"]) <= 63
    match = re.match(r"^self == '' \|\| self\.matches\('(.+)'\)$", rule)
    if match:
        pattern = re.compile(match.group(1))
        return lambda value: value == "" or bool(pattern.match(value))
    match = re.match(r"^self >= (\d+)$", rule)
    if match:
        return lambda value: value >= int(match.group(1))
    match = re.match(r"^self in \[(.+)\]$", rule)
    if match:
        allowed = {item.strip().strip("'") for item in match.group(1).split(",")}
        return lambda value: value in allowed
    match = re.match(r"^has\(self\.(\w+)\)$", rule)
    if match:
        return lambda value: match.group(1) in value
    if rule.startswith("[has(self.torch), has(self.mpi)"):
        sources = ("torch", "mpi", "jax", "xgboost", "flux")
        return lambda value: sum(s in value for s in sources) <= 1
    if rule.startswith("self.templates.all(t, !has(t.metadata.namespace)"):
        return lambda value: all("namespace" not in (t.get("metadata") or {}) for t in value.get("templates", []))
    if rule.startswith("!(has(self.startupPolicy)"):
        return lambda value: "startupPolicy" not in value or "successPolicy" not in value
    raise KeyError(rule)


@functools.lru_cache(maxsize=None)
def schema(kind: str) -> Dict[str, Any]:
    """The served version's openAPIV3Schema of `kind`'s CRD, closed to unknown fields."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(os.path.join(CRDS, FILES[kind]), encoding="utf-8") as f:
        crd = yaml.load(f, Loader=loader)
    assert crd["spec"]["names"]["kind"] == kind
    version = next(v for v in crd["spec"]["versions"] if v.get("served") and v.get("storage"))
    return _closed(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        if (
            node.get("type") == "object"
            and "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)
    return node


def _rules(node: Dict[str, Any], value: Any, path: str, problems: List[str]) -> None:
    for rule in node.get("x-kubernetes-validations") or []:
        try:
            ok = _cel(rule["rule"])(value)
        except KeyError:
            problems.append(f"{path or '.'}: CEL rule not evaluated here: {rule['rule']}")
            continue
        if not ok:
            problems.append(f"{path or '.'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for key, child in (node.get("properties") or {}).items():
            if key in value:
                _rules(child, value[key], f"{path}.{key}", problems)
    elif isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            _rules(node["items"], item, f"{path}[{i}]", problems)


def problems(obj: Dict[str, Any], kind: str) -> List[str]:
    """What the API server would refuse in `obj` (empty: accepted)."""
    found = []
    if obj.get("kind") != kind:
        found.append(f"kind: expected {kind}, got {obj.get('kind')}")
    name = (obj.get("metadata") or {}).get("name", "")
    if not DNS_1035.match(name) or len(name) > 63:  # TFJob's webhook; TrainJob's CEL rules say the same
        found.append(f"metadata.name '{name}' is not a DNS-1035 label of at most 63 characters")
    validator = jsonschema.Draft7Validator(schema(kind))
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        found.append(f"{where or '.'}: {error.message[:300]}")
    _rules(schema(kind), obj, "", found)
    if kind == "TFJob":
        found += tfjob_webhook(obj)
    return found


REPLICA_TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")


def tfjob_webhook(obj: Dict[str, Any]) -> List[str]:
    """The Training Operator's validating webhook for TFJobs (v1.9.4, pkg/webhooks/tensorflow/tfjob_webhook.go
    `validateTFReplicaSpecs`; the defaulting webhook CamelCases the replica types first), and the documented values
    of the policies the CRD leaves as open strings."""
    found = []
    replicas = (obj.get("spec") or {}).get("tfReplicaSpecs")
    if not replicas:
        return ["spec.tfReplicaSpecs: Required value"]
    for rtype, replica in replicas.items():
        if rtype.capitalize() not in {t.capitalize() for t in REPLICA_TYPES}:
            found.append(f"spec.tfReplicaSpecs.{rtype}: not a TFJob replica type {REPLICA_TYPES}")
        containers = (((replica or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            found.append(f"spec.tfReplicaSpecs.{rtype}.template.spec.containers: must be specified")
        for i, container in enumerate(containers):
            if not container.get("image"):
                found.append(f"spec.tfReplicaSpecs.{rtype}.template.spec.containers[{i}].image: must be required")
        if containers and not any(c.get("name") == "tensorflow" for c in containers):
            found.append(f"spec.tfReplicaSpecs.{rtype}: must have at least one container with name tensorflow")
        policy = replica.get("restartPolicy")
        # not the webhook's: the values the API documents (the CRD leaves the string open)
        if policy not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            found.append(f"spec.tfReplicaSpecs.{rtype}.restartPolicy: {policy!r} is not a restart policy")
    chiefs = sum(t.capitalize() in ("Chief", "Master") for t in replicas)  # replica types, as the webhook counts
    if chiefs > 1:
        found.append("spec.tfReplicaSpecs: must not have more than 1 Chief or Master role")
    clean = ((obj.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy")
    if clean not in (None, "All", "Running", "None"):
        found.append(f"spec.runPolicy.cleanPodPolicy: {clean!r} is not a clean-pod policy")
    return found
