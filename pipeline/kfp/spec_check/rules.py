"""What every group of rules shares: a Problem, the Rules base class (the parsed spec and the problems found in
it), and the value grammars several groups hold values to: placeholders, bucket URIs, Kubernetes names."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Dict, List, Mapping, Optional, Set, Tuple

import yaml

# Task-input constants the driver swaps for run facts, whole value only (v2/driver/resolve.go
# resolveInputParameter). Value: the first backend release that resolves it (git tags holding the commit).
RUN_PLACEHOLDERS = {
    "{{$.pipeline_job_name}}": "2.5.0",
    "{{$.pipeline_job_resource_name}}": "2.5.0",
    "{{$.pipeline_job_uuid}}": "2.5.0",
    "{{$.pipeline_task_name}}": "2.5.0",
    "{{$.pipeline_task_uuid}}": "2.5.0",
    "{{$.pipeline_job_create_time_utc}}": "2.16.0",
    "{{$.pipeline_job_schedule_time_utc}}": "2.16.0",
}
WORKSPACE_PLACEHOLDER = "{{$.workspace_path}}"  # 2.15.0; replaced inside any task-input constant (resolve.go)

# Schemes the pipeline root may use: v2/objectstore/config.go ParseBucketPathToConfig (gs, s3, minio, mem) and
# v2/config/env.go GetStoreSessionInfo (gs, s3, minio); v2/component/launcher_v2.go LocalPathForURI agrees.
BUCKET_PATTERN = re.compile(r"(^[a-z][a-z0-9]+:///?)([^/?]+)(/[^?]*)?(\?.+)?$")
STORAGE_SCHEMES = ("gs://", "s3://", "minio://")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
PLACEHOLDER = re.compile(r"\{\{\$[^{}]*\}\}")
IN_PARAM_ANY = re.compile(r"\{\{\$\.inputs\.parameters\['(.+?)'\]\}\}")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing the KFP backend would refuse, fail on at run time, or silently mishandle."""

    where: str  # e.g. "task Trainer", "executor Trainer_executor", "root parameter data_root"
    rule: str  # short id, e.g. "executor-kind"
    message: str  # what is wrong, what the backend answers (with its source), the fix

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}"


def artifact_title(artifact_type: Mapping) -> Optional[str]:
    """The type name of an artifactType: its schemaTitle, or the `title` in its YAML instanceSchema (how
    v2/metadata/client.go SchemaToArtifactType reads it); None when it has neither."""
    if artifact_type.get("schemaTitle"):
        return str(artifact_type["schemaTitle"])
    schema = artifact_type.get("instanceSchema")
    if not isinstance(schema, str):
        return None
    try:
        parsed = yaml.safe_load(schema)
    except yaml.YAMLError:
        return None
    title = parsed.get("title") if isinstance(parsed, dict) else None
    return str(title) if title else None


class Rules:
    """The parsed spec and the problems found in it; each group of rules is a subclass (verdict.SpecChecker runs
    them all)."""

    def __init__(self, spec: dict, platforms: List[dict]):
        self.spec = spec
        self.platforms = platforms
        self.problems: List[Problem] = []
        self.components: Dict[str, dict] = as_dict(spec.get("components"))
        self.executors: Dict[str, dict] = as_dict(as_dict(spec.get("deploymentSpec")).get("executors"))
        self.refused: Set[str] = set()  # components whose executor the backend refuses
        self.reached: Dict[str, dict] = {}  # component name -> spec, for components some task runs
        self.users: Dict[str, List[Tuple[str, dict]]] = {}  # component name -> [(task name, task)]

    def add(self, where: str, rule: str, message: str) -> None:
        self.problems.append(Problem(where, rule, message))

    def declared_outputs(self, task: Mapping, kind: str) -> Mapping:
        """The outputs of `kind` ("artifacts" or "parameters") the component of `task` declares."""
        component = as_dict(self.components.get(as_dict(task.get("componentRef")).get("name")))
        return as_dict(as_dict(component.get("outputDefinitions")).get(kind))

    @staticmethod
    def input_parameters(component: dict) -> Set[str]:
        return set(as_dict(as_dict(component.get("inputDefinitions")).get("parameters")))

    def check_parameter_ref(self, where: str, what: str, text: str, params: Set[str]) -> bool:
        """True when `text` is a {{$.inputs.parameters['x']}} channel the driver resolves at run time
        (v2/driver/resolve.go resolvePodSpecInputRuntimeParameter); reports x when the component lacks it."""
        match = IN_PARAM_ANY.search(text)
        if not match:
            return False
        if match.group(1) not in params:
            self.add(
                where,
                "placeholder",
                f"{what} reads input parameter {match.group(1)!r}, which the component does not declare; the "
                "driver fails: 'executorInput did not contain container Image input parameter' "
                "(v2/driver/resolve.go resolvePodSpecInputRuntimeParameter). Fix: declare and supply it.",
            )
        return True


def as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value) -> list:
    return value if isinstance(value, list) else []


def camel(name: str) -> str:
    """proto_name -> protoName; protojson accepts both spellings."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def go_quote(text) -> str:
    """Go's %q, as the backend quotes names in its errors."""
    return json.dumps(str(text))


def short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(value) -> Optional[int]:
    """protojson's int64: a JSON integer or a string of one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def bucket_problem(uri: str) -> Optional[str]:
    match = BUCKET_PATTERN.match(uri)
    if not match:
        return "is not a bucket URI: 'unrecognized pipeline root format'"
    if match.group(1) not in STORAGE_SCHEMES:
        return f"uses scheme {match.group(1)!r}: 'unsupported Cloud bucket' / 'unsupported provider'"
    return None


def dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def qualified_name_problem(name: str) -> Optional[str]:
    """Kubernetes IsQualifiedName: [prefix/]name, prefix a DNS subdomain, name at most 63 characters."""
    prefix, slash, base = name.rpartition("/")
    if slash and not dns_subdomain(prefix):
        return f"prefix {prefix!r} is not a DNS-1123 subdomain"
    if not base or len(base) > 63 or not QUALIFIED_PART.match(base):
        return f"{base!r} is not a qualified name (alphanumerics, '-', '_', '.', at most 63)"
    return None
