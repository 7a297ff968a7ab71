"""Offline admission check of a compiled KFP pipeline spec against the open-source KFP 2.x backend.

`tfxflow kubeflow compile` writes a PipelineSpec (and a Kubernetes platform spec). Uploading it parses it and
checks little more than its schema version and name; the backend compiles it into an Argo workflow when a run or
recurring run is created, and its driver and launcher resolve inputs, pod settings and placeholders when each task
starts. This module applies those rules offline, so a
spec the backend would refuse, fail at run time, or silently mishandle is caught before it reaches a cluster.

Every rule cites its source in kubeflow/pipelines (snapshot 7b70c7b, paths under backend/src/ unless said
otherwise); rules on names come from Argo Workflows (workflow/validate/validate.go, which the API server runs on
the compiled workflow in resource/resource_manager.go CreateRun) or from Kubernetes pod validation (the pod the
driver patches is refused when it is created). When a problem bites is said in its message:
- upload: apiserver/template/v2_template.go NewV2SpecTemplate;
- run creation: v2_template.go RunWorkflow/ScheduledWorkflow -> v2/compiler/argocompiler Compile -> Argo validation;
- task start: v2/driver, v2/component (launcher), Kubernetes.

Not checkable offline: run-time parameter values, the pipeline root the run really uses (the backend ignores
`defaultPipelineRoot`: v2/driver/root_dag.go takes the run's runtimeConfig.pipelineRoot, else the namespace's
kfp-launcher ConfigMap, else minio://mlpipeline/v2/artifacts, v2/config/env.go), object-store credentials, and
whether images, secrets, PVCs, node labels and GPUs exist in the cluster.
"""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import yaml

SCHEMA_VERSION = "2.1.0"  # apiserver/template/template.go SCHEMA_VERSION_2_1_0, the only one accepted

# PipelineSpec fields (api/v2alpha1/pipeline_spec.proto); protojson refuses others at upload.
SPEC_FIELDS = (
    "pipelineInfo",
    "deploymentSpec",
    "sdkVersion",
    "schemaVersion",
    "components",
    "root",
    "defaultPipelineRoot",
)

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

# Mounts and volumes the compiler gives every executor pod (v2/compiler/argocompiler/container.go
# addContainerExecutorTemplate; v2/component/constants.go); a user mount or volume reusing one is refused by
# Kubernetes ("must be unique").
RESERVED_MOUNTS = ("/kfp-launcher", "/gcs", "/s3", "/minio", "/.local", "/.cache", "/.config", "/kfp-workspace")
RESERVED_VOLUMES = (
    "kfp-launcher",
    "gcs-scratch",
    "s3-scratch",
    "minio-scratch",
    "dot-local-scratch",
    "dot-cache-scratch",
    "dot-config-scratch",
    "kfp-workspace",
)

PARAMETER_KINDS = {
    "STRING": str,
    "NUMBER_INTEGER": int,
    "NUMBER_DOUBLE": float,
    "BOOLEAN": bool,
    "LIST": list,
    "STRUCT": dict,
}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_ARGO_TASK = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")  # Argo validate.go workflowFieldNameFmt
_ARGO_PARAM = re.compile(r"^[-a-zA-Z0-9_]+$")  # Argo validate.go paramOrArtifactNameRegex
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_QUANTITY_SCALE = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_PLACEHOLDER = re.compile(r"\{\{\$[^{}]*\}\}")
_IN_PARAM = re.compile(r"^\{\{\$\.inputs\.parameters\['(.+?)'\]\}\}$")
_IN_PARAM_ANY = re.compile(r"\{\{\$\.inputs\.parameters\['(.+?)'\]\}\}")
_ARTIFACT_REF = re.compile(r"^\{\{\$\.(inputs|outputs)\.artifacts\['(.+?)'\]\.(uri|path)\}\}$")
_OUT_PARAM = re.compile(r"^\{\{\$\.outputs\.parameters\['(.+?)'\]\.output_file\}\}$")

# KubernetesExecutorConfig and the messages under it (kubernetes_platform/proto/kubernetes_executor_config.proto):
# message -> {json field name: message of its items, or None for scalars, maps and Structs}. AddKubernetesSpec
# (v2/compiler/argocompiler/spec_patch.go) unmarshals with protojson, which refuses unknown fields.
_K8S_MESSAGES: Dict[str, Dict[str, Optional[str]]] = {
    "KubernetesExecutorConfig": {
        "secretAsVolume": "SecretAsVolume",
        "secretAsEnv": "SecretAsEnv",
        "pvcMount": "PvcMount",
        "nodeSelector": "NodeSelector",
        "podMetadata": "PodMetadata",
        "imagePullSecret": "ImagePullSecret",
        "imagePullPolicy": None,
        "configMapAsVolume": "ConfigMapAsVolume",
        "configMapAsEnv": "ConfigMapAsEnv",
        "activeDeadlineSeconds": None,
        "fieldPathAsEnv": "FieldPathAsEnv",
        "tolerations": "Toleration",
        "genericEphemeralVolume": "GenericEphemeralVolume",
        "nodeAffinity": "NodeAffinityTerm",
        "podAffinity": "PodAffinityTerm",
        "enabledSharedMemory": "EnabledSharedMemory",
        "emptyDirMounts": "EmptyDirMount",
        "securityContext": "SecurityContext",
        "initContainers": "InitContainer",
    },
    "SecretAsVolume": {"secretName": None, "mountPath": None, "optional": None, "secretNameParameter": "Input"},
    "SecretAsEnv": {
        "secretName": None,
        "keyToEnv": "SecretKeyToEnvMap",
        "optional": None,
        "secretNameParameter": "Input",
    },
    "SecretKeyToEnvMap": {"secretKey": None, "envVar": None},
    "PvcMount": {
        "taskOutputParameter": "TaskOutput",
        "constant": None,
        "componentInputParameter": None,
        "mountPath": None,
        "pvcNameParameter": "Input",
        "subPath": None,
    },
    "NodeSelector": {"labels": None, "nodeSelectorJson": "Input"},
    "PodMetadata": {"labels": None, "annotations": None},
    "ImagePullSecret": {"secretName": None, "secretNameParameter": "Input"},
    "ConfigMapAsVolume": {
        "configMapName": None,
        "mountPath": None,
        "optional": None,
        "configMapNameParameter": "Input",
    },
    "ConfigMapAsEnv": {
        "configMapName": None,
        "keyToEnv": "ConfigMapKeyToEnvMap",
        "configMapNameParameter": "Input",
        "optional": None,
    },
    "ConfigMapKeyToEnvMap": {"configMapKey": None, "envVar": None},
    "FieldPathAsEnv": {"name": None, "fieldPath": None},
    "Toleration": {
        "key": None,
        "operator": None,
        "value": None,
        "effect": None,
        "tolerationSeconds": None,
        "tolerationJson": "Input",
    },
    "GenericEphemeralVolume": {
        "volumeName": None,
        "mountPath": None,
        "accessModes": None,
        "size": None,
        "defaultStorageClass": None,
        "storageClassName": None,
        "metadata": "PodMetadata",
    },
    "SelectorRequirement": {"key": None, "operator": None, "values": None},
    "NodeAffinityTerm": {
        "matchExpressions": "SelectorRequirement",
        "matchFields": "SelectorRequirement",
        "weight": None,
        "nodeAffinityJson": "Input",
    },
    "PodAffinityTerm": {
        "matchPodExpressions": "SelectorRequirement",
        "matchPodLabels": None,
        "topologyKey": None,
        "namespaces": None,
        "matchNamespaceExpressions": "SelectorRequirement",
        "matchNamespaceLabels": None,
        "weight": None,
        "anti": None,
    },
    "EnabledSharedMemory": {"volumeName": None, "size": None},
    "SecurityContext": {"runAsUser": None, "runAsGroup": None, "runAsNonRoot": None},
    "EmptyDirMount": {"volumeName": None, "mountPath": None, "medium": None, "sizeLimit": None},
    "InitContainer": {
        "name": None,
        "image": None,
        "command": None,
        "args": None,
        "env": "InitEnvVar",
        "volumeMounts": "InitVolumeMount",
        "restartPolicy": None,
        "resources": "InitResources",
    },
    "InitEnvVar": {"name": None, "value": None},
    "InitVolumeMount": {"volumeName": None, "mountPath": None},
    "InitResources": {"requests": None, "limits": None},
    # ml_pipelines.TaskInputsSpec.InputParameterSpec and its TaskOutputParameterSpec (pipeline_spec.proto)
    "Input": {
        "componentInputParameter": None,
        "taskOutputParameter": "TaskOutput",
        "runtimeValue": None,
        "taskFinalStatus": None,
        "parameterExpressionSelector": None,
    },
    "TaskOutput": {"producerTask": None, "outputParameterKey": None},
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing the KFP backend would refuse, fail on at run time, or silently mishandle."""

    where: str  # e.g. "task Trainer", "executor Trainer_executor", "root parameter data_root"
    rule: str  # short id, e.g. "executor-kind"
    message: str  # what is wrong, what the backend answers (with its source), the fix

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}"


def check_file(path: str) -> List[Problem]:
    """Every problem of the compiled file at `path`; ValueError when it is not a KFP pipeline spec."""
    try:
        with open(path, encoding="utf-8") as f:
            documents = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not a KFP pipeline spec: invalid YAML: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the compiled spec: {e}") from e
    try:
        return check_spec(documents)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def check_spec(documents: Sequence[dict]) -> List[Problem]:
    """Every problem of a compiled spec given as its YAML documents (PipelineSpec, optional platform spec);
    empty when the backend admits and runs it as written. ValueError when no document is a pipeline spec."""
    specs = [d for d in documents if isinstance(d, dict) and "root" in d]
    if not specs:
        raise ValueError(
            "not a KFP pipeline spec: no YAML document has a 'root' component "
            "(expected the output of `tfxflow kubeflow compile`)"
        )
    problems = []
    if len(specs) > 1:
        problems.append(
            Problem(
                "pipeline",
                "spec-format",
                "more than one pipeline spec in the file; upload refuses it with 'multiple pipeline "
                "specs provided' (apiserver/template/v2_template.go NewV2SpecTemplate). Fix: keep "
                "one.",
            )
        )
    platforms = [d for d in documents if isinstance(d, dict) and "platforms" in d]
    checker = _Checker(specs[0], platforms)
    checker.run()
    return problems + checker.problems


def format_problems(path: str, problems: Sequence[Problem]) -> str:
    """A readable multi-line report of `check_file(path)`."""
    if not problems:
        return f"{path}: admitted: no problems the KFP backend would refuse or mishandle"
    lines = [f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''} for the KFP backend:"]
    for problem in problems:
        lines.append(f"  [{problem.rule}] {problem.where}")
        lines.append(
            textwrap.fill(
                problem.message,
                width=110,
                initial_indent=" " * 6,
                subsequent_indent=" " * 6,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines)


def _artifact_title(artifact_type: Mapping) -> Optional[str]:
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


PIPELINE_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,127}$"  # apiserver/common/utils.go pipelineNamePattern


class _Checker:
    """Runs the rules on one spec; collects Problems in `problems`."""

    def __init__(self, spec: dict, platforms: List[dict]):
        self.spec = spec
        self.platforms = platforms
        self.problems: List[Problem] = []
        self.components: Dict[str, dict] = _mapping(spec.get("components"))
        self.executors: Dict[str, dict] = _mapping(_mapping(spec.get("deploymentSpec")).get("executors"))
        self.refused: Set[str] = set()  # components whose executor the backend refuses
        self.reached: Dict[str, dict] = {}  # component name -> spec, for components some task runs
        self.users: Dict[str, List[Tuple[str, dict]]] = {}  # component name -> [(task name, task)]

    def add(self, where: str, rule: str, message: str) -> None:
        self.problems.append(Problem(where, rule, message))

    def declared_outputs(self, task: Mapping, kind: str) -> Mapping:
        """The outputs of `kind` ("artifacts" or "parameters") the component of `task` declares."""
        component = _mapping(self.components.get(_mapping(task.get("componentRef")).get("name")))
        return _mapping(_mapping(component.get("outputDefinitions")).get(kind))

    def run(self) -> None:
        self.check_document()
        root = _mapping(self.spec.get("root"))
        self.walk("root", root)
        for name, component in self.reached.items():
            if name not in self.refused:
                self.check_component(name, component)
        self.check_dag("root", root)
        for name, component in self.reached.items():
            if "dag" in component and name not in self.refused:
                self.check_dag(name, component)
        self.check_root_parameters(root)
        self.check_pipeline_root()
        self.check_platform()

    # upload: apiserver/template/v2_template.go NewV2SpecTemplate

    def check_document(self) -> None:
        unknown = [k for k in self.spec if k not in SPEC_FIELDS and _camel(k) not in SPEC_FIELDS]
        if unknown:
            self.add(
                "pipeline",
                "spec-format",
                f"unknown PipelineSpec field(s) {unknown}; upload refuses it with 'invalid v2 pipeline spec: "
                "unknown field' (protojson in apiserver/template/v2_template.go NewV2SpecTemplate). Fix: drop "
                "them.",
            )
        version = self.spec.get("schemaVersion")
        if version != SCHEMA_VERSION:
            self.add(
                "pipeline",
                "schema-version",
                f"schemaVersion is {version!r}; upload refuses it: 'KFP only supports schema version "
                f"{SCHEMA_VERSION}' (apiserver/template/v2_template.go NewV2SpecTemplate). Fix: compile with a "
                f"KFP SDK/TFX that emits {SCHEMA_VERSION}.",
            )
        name = _mapping(self.spec.get("pipelineInfo")).get("name")
        if not name or not isinstance(name, str):
            self.add(
                "pipeline",
                "pipeline-name",
                "pipelineInfo.name is empty; upload answers 'no pipeline spec is provided' / 'name is empty' "
                "(apiserver/template/template.go isPipelineSpec, v2_template.go NewV2SpecTemplate). Fix: name "
                "the pipeline.",
            )
            return
        if not re.search(r"[a-z0-9]", name):
            self.add(
                "pipeline",
                "pipeline-name",
                f"pipelineInfo.name {name!r} has no lower-case letter or digit; upload refuses it: 'name "
                "should consist of lower case alphanumeric characters' (v2_template.go NewV2SpecTemplate). Fix: "
                "use a lower-case DNS name such as 'tfxflow-taxi'.",
            )
            return
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", name):
            self.add(
                "pipeline",
                "pipeline-name",
                f"pipelineInfo.name {name!r} does not match {PIPELINE_NAME_PATTERN}; upload refuses it: "
                "'pipeline's name must contain only lowercase alphanumeric characters or '-' and must start "
                "with alphanumeric characters' (or be at most 128 characters) (apiserver/common/utils.go "
                "ValidatePipelineName, from resource_manager.go CreatePipelineAndPipelineVersion). Fix: "
                "--pipeline-name with lower-case letters, digits and '-'.",
            )

    # run creation: v2/compiler/visitor.go Accept/dfs and argocompiler/dag.go task

    def walk(self, name: str, component: dict, seen: Optional[Set[str]] = None) -> None:
        """Visits the components the tasks of DAG `name` run, like visitor.go dfs."""
        seen = seen if seen is not None else {name}
        for task_name, task in sorted(_mapping(_mapping(component.get("dag")).get("tasks")).items()):
            task = _mapping(task)
            ref = _mapping(task.get("componentRef")).get("name")
            if not ref:
                self.add(
                    f"task {task_name}",
                    "component-ref",
                    "componentRef.name is empty; run creation fails: 'component ref name is empty' "
                    "(v2/compiler/visitor.go dfs). Fix: name the component the task runs.",
                )
                continue
            if ref not in self.components:
                self.add(
                    f"task {task_name}",
                    "component-ref",
                    f"componentRef {ref!r} is not in components; run creation fails: 'cannot find component "
                    f"ref name={_q(ref)}' (v2/compiler/visitor.go dfs). Fix: add the component or fix the name.",
                )
                continue
            self.users.setdefault(ref, []).append((task_name, task))
            if ref in seen:
                continue
            seen.add(ref)
            sub = _mapping(self.components[ref])
            self.reached[ref] = sub
            label = sub.get("executorLabel")
            if label:
                self.check_executor_kind(ref, label)
            elif "dag" in sub:
                self.walk(ref, sub, seen)
            else:
                self.refused.add(ref)
                self.add(
                    f"component {ref}",
                    "executor-label",
                    "the component has neither executorLabel nor dag; run creation fails: 'unknown component "
                    "implementation' (v2/compiler/visitor.go dfs). Fix: give it an executor.",
                )

    def check_executor_kind(self, component: str, label: str) -> None:
        executor = self.executors.get(label)
        if executor is None:
            self.refused.add(component)
            self.add(
                f"component {component}",
                "executor-label",
                f"executorLabel {label!r} is not in deploymentSpec.executors; run creation fails: "
                f"'executor(label={_q(label)}) not found in deployment config' (v2/compiler/visitor.go dfs). "
                "Fix: add the executor or fix the label.",
            )
            return
        if "container" in executor or "importer" in executor:
            return
        self.refused.add(component)
        kind = next(iter(executor), "none") if isinstance(executor, dict) else type(executor).__name__
        self.add(
            f"executor {label}",
            "executor-kind",
            f"a {kind!r} executor (component {component}); open-source KFP runs only container and importer "
            f"executors: run creation fails with 'executor(label={_q(label)}): non-container and non-importer "
            "executor not implemented' (v2/compiler/visitor.go dfs; argocompiler/argo.go Resolver and "
            "dag.go task: 'resolver executors not implemented', 'custom job executors is Google Cloud only'). "
            "Fix: drop the task or replace it with a container component (for a TFX Resolver, e.g. a "
            "container step that queries MLMD itself).",
        )

    # per component: executors (container.go, importer.go), driver.go initPodSpecPatch, launcher_v2.go

    def check_component(self, name: str, component: dict) -> None:
        for key, spec in sorted(_mapping(_mapping(component.get("outputDefinitions")).get("artifacts")).items()):
            self.check_artifact_type(
                f"component {name}", f"output artifact {key!r}", _mapping(_mapping(spec).get("artifactType"))
            )
        label = component.get("executorLabel")
        if not label:
            return
        executor = _mapping(self.executors.get(label))
        if "container" in executor:
            self.check_container(name, component, label, _mapping(executor["container"]))
        elif "importer" in executor:
            self.check_importer(name, component, label, _mapping(executor["importer"]))

    def check_artifact_type(self, where: str, what: str, artifact_type: Mapping) -> None:
        if "schemaUri" in artifact_type and not _artifact_title(artifact_type):
            self.add(
                where,
                "artifact-type",
                f"{what} is typed by schemaUri; the launcher fails: 'SchemaUri is unsupported' "
                "(v2/component/launcher_v2.go getArtifactSchema). Fix: use schemaTitle or instanceSchema.",
            )
        elif not _artifact_title(artifact_type):
            self.add(
                where,
                "artifact-type",
                f"{what} has no type title (schemaTitle, or 'title:' in instanceSchema); recording it crashes "
                "the launcher: 'No title specified' (v2/metadata/client.go SchemaToArtifactType). Fix: give "
                "the artifact type a title such as tfx.Examples.",
            )

    def check_container(self, name: str, component: dict, label: str, container: dict) -> None:
        where = f"executor {label}"
        image = container.get("image")
        if not image or not isinstance(image, str):
            self.add(
                where,
                "image-pinned",
                "the container has no image; Kubernetes refuses the pod: 'spec.containers[0].image: Required "
                "value' (v2/driver/driver.go initPodSpecPatch copies it). Fix: set the project image.",
            )
        elif not self.check_parameter_ref(where, "image", image, self.input_parameters(component)):
            digest = "@" in image
            tag = image.rsplit("/", 1)[-1].partition(":")[2] if not digest else ""
            if not digest and tag in ("", "latest"):
                self.add(
                    where,
                    "image-pinned",
                    f"image {image!r} is not pinned (no tag, or ':latest'); the backend runs it, but its cache "
                    "key holds the image string, not its content (v2/driver/cache.go getFingerPrint), so a "
                    "cached step keeps the results of whatever ':latest' was, and each pod may pull a different "
                    "build. Fix: use repo/name:version or repo/name@sha256:digest.",
                )
        self.check_placeholders(name, component, label, container)
        self.check_resources(component, label, _mapping(container.get("resources")))

    def check_placeholders(self, name: str, component: dict, label: str, container: dict) -> None:
        where = f"executor {label}"
        inputs = _mapping(component.get("inputDefinitions"))
        outputs = _mapping(component.get("outputDefinitions"))
        declared = {
            ("inputs", "parameters"): set(_mapping(inputs.get("parameters"))),
            ("inputs", "artifacts"): set(_mapping(inputs.get("artifacts"))),
            ("outputs", "artifacts"): set(_mapping(outputs.get("artifacts"))),
            ("outputs", "parameters"): set(_mapping(outputs.get("parameters"))),
        }
        needed: Set[str] = set()  # input parameters the driver must find in the executor input
        for field in ("command", "args"):
            for arg in container.get(field) or []:
                if not isinstance(arg, str):
                    continue
                conditional = arg.lstrip().startswith('{"IfPresent":')
                for placeholder in _PLACEHOLDER.findall(arg):
                    problem = _container_placeholder(placeholder, declared)
                    if problem:
                        self.add(where, "placeholder", f"{field} placeholder {placeholder!r} {problem}")
                    match = _IN_PARAM.match(placeholder)
                    if match and not conditional:
                        needed.add(match.group(1))
        for env in container.get("env") or []:
            value = str(_mapping(env).get("value", ""))
            for placeholder in _PLACEHOLDER.findall(value):
                self.add(
                    where,
                    "placeholder",
                    f"env {_mapping(env).get('name')!r} holds {placeholder!r}, which nothing resolves: the "
                    "driver copies env values as they are (v2/driver/driver.go initPodSpecPatch). Fix: pass "
                    "the value as a task input parameter and read it from the executor input.",
                )
        for param in sorted(needed & declared[("inputs", "parameters")]):
            for task_name, task in self.users.get(name, []):
                if param not in _mapping(_mapping(task.get("inputs")).get("parameters")):
                    self.add(
                        f"task {task_name}",
                        "placeholder",
                        f"the container reads {{{{$.inputs.parameters['{param}']}}}} but the task does not "
                        f"supply '{param}'; the driver fails: 'parameter \"{param}\" not found in executor "
                        "input' (v2/driver/util.go resolveInputParameterPlaceholders; component defaults are "
                        "added later, by the launcher). Fix: give the task that input.",
                    )

    def check_resources(self, component: dict, label: str, resources: dict) -> None:
        """CPU, memory and accelerator, as v2/driver/driver.go initPodSpecPatch and getPodResource turn them into
        the pod's limits and requests."""
        where = f"executor {label}"
        params = self.input_parameters(component)
        values: Dict[str, float] = {}
        for new, old, unit in (
            ("resourceCpuLimit", "cpuLimit", ""),
            ("resourceCpuRequest", "cpuRequest", ""),
            ("resourceMemoryLimit", "memoryLimit", "G"),
            ("resourceMemoryRequest", "memoryRequest", "G"),
        ):
            if resources.get(new):
                text = str(resources[new])
            elif resources.get(old):
                text = f"{_go_number(resources[old])}{unit}"  # the driver formats the old double with %v
            else:
                continue
            if self.check_parameter_ref(where, f"resources.{new}", text, params):
                continue
            quantity = _quantity(text)
            if quantity is None:
                self.add(
                    where,
                    "resources",
                    f"resources {new}/{old} gives {text!r}, not a Kubernetes quantity; the driver fails: "
                    "'failed to init podSpecPatch' (v2/driver/driver.go getPodResource, ParseQuantity). Fix: "
                    "use e.g. '8', '500m', '32G', '16Gi'.",
                )
            elif quantity <= 0:
                self.add(
                    where,
                    "resources",
                    f"resources {new}/{old} is {text!r}; Kubernetes refuses non-positive limits and requests "
                    "when the pod is created. Fix: drop it or make it positive.",
                )
            else:
                values[new] = quantity
        for kind in ("Cpu", "Memory"):
            request, limit = values.get(f"resource{kind}Request"), values.get(f"resource{kind}Limit")
            if request is not None and limit is not None and request > limit:
                self.add(
                    where,
                    "resources",
                    f"the {kind.lower()} request is above its limit; Kubernetes refuses the pod: 'must be less "
                    "than or equal to the limit'. Fix: raise the limit or lower the request.",
                )
        accelerator = _mapping(resources.get("accelerator"))
        if accelerator:
            self.check_accelerator(where, accelerator, params)

    def check_accelerator(self, where: str, accelerator: dict, params: Set[str]) -> None:
        # The driver reads resourceType, else the deprecated type; resourceCount, else count when > 0; it sets
        # limits[type] = count only when both are set (v2/driver/driver.go initPodSpecPatch).
        kind = accelerator.get("resourceType") or accelerator.get("type") or ""
        count = accelerator.get("resourceCount") or ""
        if not count:
            legacy = _integer(accelerator.get("count", 0))
            if legacy is None:
                self.add(
                    where,
                    "accelerator",
                    f"accelerator.count {accelerator.get('count')!r} is not an integer; run creation fails "
                    "unmarshalling the deployment spec (v2/compiler/visitor.go GetDeploymentConfig). Fix: "
                    "an integer such as 1.",
                )
                return
            count = str(legacy) if legacy > 0 else ""
        if not kind or not count:
            self.add(
                where,
                "accelerator",
                f"accelerator {accelerator!r} lacks a {'type' if not kind else 'count >= 1'}: the driver "
                "then requests no accelerator at all, silently (v2/driver/driver.go initPodSpecPatch). Fix: "
                "set both, e.g. type 'nvidia.com/gpu' and count 1.",
            )
            return
        if not self.check_parameter_ref(where, "accelerator type", str(kind), params):
            problem = _extended_resource_problem(str(kind))
            if problem:
                self.add(
                    where,
                    "accelerator",
                    f"accelerator type {kind!r} {problem}. The driver uses it verbatim as the Kubernetes "
                    "resource name of the limit (v2/driver/driver.go initPodSpecPatch), so Kubernetes refuses "
                    "the pod and the task fails when it starts. Fix: a device plugin's resource name such as "
                    "'nvidia.com/gpu' or 'amd.com/gpu' (GPU models go in a node selector, e.g. "
                    "nvidia.com/gpu.product).",
                )
        if not self.check_parameter_ref(where, "accelerator count", str(count), params):
            value = _quantity(str(count))
            if value is None or value < 1 or value != int(value):
                self.add(
                    where,
                    "accelerator",
                    f"accelerator count {count!r} is not a whole number >= 1; extended resources take whole "
                    "numbers: the driver fails parsing it or Kubernetes refuses the pod (v2/driver/driver.go "
                    "initPodSpecPatch). Fix: an integer such as 1.",
                )

    @staticmethod
    def input_parameters(component: dict) -> Set[str]:
        return set(_mapping(_mapping(component.get("inputDefinitions")).get("parameters")))

    def check_parameter_ref(self, where: str, what: str, text: str, params: Set[str]) -> bool:
        """True when `text` is a {{$.inputs.parameters['x']}} channel the driver resolves at run time
        (v2/driver/resolve.go resolvePodSpecInputRuntimeParameter); reports x when the component lacks it."""
        match = _IN_PARAM_ANY.search(text)
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

    def check_importer(self, name: str, component: dict, label: str, importer: dict) -> None:
        """v2/component/importer_launcher.go ImportSpecToMLMDArtifact and getOutPutArtifactName."""
        where = f"executor {label}"
        outputs = _mapping(_mapping(component.get("outputDefinitions")).get("artifacts"))
        if len(outputs) != 1:
            self.add(
                where,
                "importer",
                f"the importer's component has {len(outputs)} output artifacts; the importer fails: 'failed to "
                "extract output artifact name from componentOutputSpec' (v2/component/importer_launcher.go "
                "getOutPutArtifactName). Fix: exactly one output artifact.",
            )
        self.check_artifact_type(where, "importer typeSchema", _mapping(importer.get("typeSchema")))
        uri_spec = _mapping(importer.get("artifactUri"))
        if "constant" in uri_spec:
            uri = uri_spec["constant"]
            title = _artifact_title(_mapping(importer.get("typeSchema")))
            if not isinstance(uri, str) or not uri:
                problem = "is empty: 'empty Artifact URI constant value'"
            elif uri.startswith("oci://"):
                problem = (
                    None
                    if title == "system.Model"
                    else f"is an oci:// URI for a {title} artifact: 'the {title} artifact type does not support "
                    "OCI registries'"
                )
            else:
                problem = _bucket_problem(uri)
            if problem:
                self.add(
                    where,
                    "importer",
                    f"artifactUri {uri!r} {problem} (v2/component/importer_launcher.go "
                    "ImportSpecToMLMDArtifact, v2/objectstore/config.go ParseProviderFromPath). Fix: a "
                    f"{', '.join(STORAGE_SCHEMES)} URI.",
                )
        elif uri_spec.get("runtimeParameter"):
            param = uri_spec["runtimeParameter"]
            for task_name, task in self.users.get(name, []):
                given = _mapping(_mapping(task.get("inputs")).get("parameters"))
                if param not in given:
                    answer = f"cannot find parameter {param} in task input to fetch artifact uri"
                elif not _mapping(given[param]).get("componentInputParameter"):
                    answer = "error resolving artifact URI: parent DAG does not have input parameter"
                else:
                    continue
                self.add(
                    f"task {task_name}",
                    "importer",
                    f"the importer takes its URI from input parameter {param!r}, which it reads only as a "
                    f"componentInputParameter of the task; the importer fails: '{answer}' "
                    "(v2/component/importer_launcher.go ImportSpecToMLMDArtifact). Fix: wire it to a pipeline "
                    "parameter, or use artifactUri.constant.",
                )
        else:
            self.add(
                where,
                "importer",
                "artifactUri has neither 'constant' nor 'runtimeParameter' (the deprecated constantValue is "
                "not read); the importer fails: 'artifact uri not provided' (v2/component/importer_launcher.go "
                "ImportSpecToMLMDArtifact). Fix: artifactUri.constant.",
            )

    # per DAG: argocompiler/dag.go, Argo validate.go validateDAG, v2/driver/resolve.go resolveInputs

    def check_dag(self, name: str, component: dict) -> None:
        tasks = {k: _mapping(v) for k, v in _mapping(_mapping(component.get("dag")).get("tasks")).items()}
        where_dag = "root DAG" if name == "root" else f"component {name}"
        if not tasks:
            self.add(
                where_dag,
                "dag",
                "the DAG has no tasks; run creation fails: 'DAG ... must contain one or more non-exit tasks' "
                "(argocompiler/dag.go DAG). Fix: add tasks.",
            )
            return
        inputs = _mapping(component.get("inputDefinitions"))
        for task_name, task in sorted(tasks.items()):
            ref = _mapping(task.get("componentRef")).get("name")
            if ref in self.refused or ref not in self.components:
                continue  # already reported; the task must go or change component, so more detail is noise
            self.check_task(task_name, task, _mapping(self.components[ref]), tasks, inputs)
        self.check_cycles(tasks)

    def check_task(self, name: str, task: dict, component: dict, tasks: Dict[str, dict], parent: dict) -> None:
        where = f"task {name}"
        # Argo names the DAG tasks '<task>' and '<task>-driver' and validates them (validate.go validateDAG):
        # alphanumerics and '-', at most 128 characters, no leading digit once 'depends' is used (always, here).
        if not _ARGO_TASK.match(name):
            answer = (
                "name must consist of alpha-numeric characters or '-', and must start with an alpha-numeric character"
            )
        elif name[0].isdigit():
            answer = "name cannot begin with a digit when using either 'depends' or 'dependencies'"
        elif len(name) + len("-driver") > 128:
            answer = f"'{name}-driver' is invalid: must be no more than 128 characters"
        else:
            answer = ""
        if answer:
            self.add(
                where,
                "task-name",
                f"task name {name!r} is not a valid Argo DAG task name; run creation fails: 'templates.root."
                f"tasks ... {answer}' (Argo workflow/validate/validate.go validateDAG, on the tasks "
                "argocompiler/dag.go names '<task>' and '<task>-driver'). Fix: letters, digits and '-', "
                "starting with a letter, at most 121 characters (for TFX: the component id).",
            )
        label = component.get("executorLabel")
        executor = _mapping(self.executors.get(label)) if label else {}
        if "artifactIterator" in task:
            self.add(
                where,
                "task-kind",
                "artifactIterator is not supported; run creation fails: 'artifact iterator not implemented "
                "yet' (argocompiler/dag.go DAG). Fix: iterate over parameters or drop the loop.",
            )
        if "importer" in executor and _mapping(task.get("triggerPolicy")).get("condition"):
            self.add(
                where,
                "task-kind",
                "an importer task with triggerPolicy.condition; run creation fails: 'triggerPolicy.condition "
                "on importer task is not supported' (argocompiler/dag.go task). Fix: drop the condition.",
            )
        if _mapping(_mapping(executor.get("container")).get("lifecycle")).get("preCacheCheck") and _mapping(
            task.get("cachingOptions")
        ).get("enableCache"):
            self.add(
                where,
                "pre-cache-check",
                "the executor has a lifecycle.preCacheCheck (TFX's ExampleGen driver, which fingerprints the "
                "input files) and the task is cached; open-source KFP never runs preCacheCheck (nothing in "
                "backend/src reads it) and keys the cache on parameters and image only (v2/driver/cache.go "
                "getFingerPrint), so new files under the same path reuse the old output. Fix: "
                "cachingOptions.enableCache false for this task.",
            )
        for dep in task.get("dependentTasks") or []:
            if dep not in tasks:
                self.add(
                    where,
                    "dag-edge",
                    f"dependentTasks names {dep!r}, which is not a task of this DAG; run creation fails: "
                    f"'templates.root.tasks.{name}-driver dependency {dep!r} not defined' (Argo "
                    "validate.go validateDAG on argocompiler/dag.go depends). Fix: name an existing task.",
                )
        task_inputs = _mapping(task.get("inputs"))
        self.check_parameter_inputs(where, _mapping(task_inputs.get("parameters")), component, tasks, parent)
        self.check_artifact_inputs(where, _mapping(task_inputs.get("artifacts")), component, tasks, parent)

    def check_parameter_inputs(
        self, where: str, given: dict, component: dict, tasks: Dict[str, dict], parent: dict
    ) -> None:
        declared = _mapping(_mapping(component.get("inputDefinitions")).get("parameters"))
        parent_params = _mapping(parent.get("parameters"))
        for key, spec in sorted(declared.items()):
            spec = _mapping(spec)
            if key not in given and not spec.get("isOptional") and "defaultValue" not in spec:
                self.add(
                    where,
                    "parameter-input",
                    f"input parameter {key!r} is required by the component but the task does not supply it; "
                    f"the driver fails: 'neither value nor default value provided for non-optional parameter "
                    f'"{key}"\' (v2/driver/resolve.go resolveInputs). Fix: supply it or give it a default.',
                )
        for key, source in sorted(given.items()):
            source = _mapping(source)
            target = _mapping(declared.get(key))
            want = target.get("parameterType")
            if key not in declared:
                self.add(
                    where,
                    "parameter-input",
                    f"input parameter {key!r} is not declared by the component; the driver passes it "
                    "unchecked (v2/driver/resolve.go resolveInputs) but the executor's inputDefinitions do not "
                    "list it, which no KFP compiler emits. Fix: declare it or drop it.",
                )
            if "componentInputParameter" in source:
                ref = source["componentInputParameter"]
                if ref not in parent_params:
                    self.add(
                        where,
                        "parameter-input",
                        f"input parameter {key!r} reads {ref!r}, which the pipeline (parent DAG) does not "
                        f"declare; the driver fails: 'parent DAG does not have input parameter {ref}' "
                        "(v2/driver/resolve.go resolveInputParameter). Fix: declare it in "
                        "root.inputDefinitions.parameters.",
                    )
                    continue
                origin = _mapping(parent_params[ref])
                if origin.get("isOptional") and origin.get("defaultValue") is None and not target.get("isOptional"):
                    self.add(
                        where,
                        "parameter-input",
                        f"input parameter {key!r} reads optional pipeline parameter {ref!r}, which has no "
                        "default; a run that leaves it out gives the task null and the driver fails: 'the "
                        "resolved input parameter is null' (argocompiler/argo.go Compile, v2/driver/resolve.go "
                        "resolveInputs). Fix: give the pipeline parameter a defaultValue.",
                    )
                self.check_kind(
                    where, key, _type_kind(origin.get("parameterType")), want, f"pipeline parameter {ref!r}"
                )
            elif "taskOutputParameter" in source:
                output = _mapping(source["taskOutputParameter"])
                producer, out_key = output.get("producerTask"), output.get("outputParameterKey")
                if producer not in tasks:
                    self.add(
                        where,
                        "dag-edge",
                        f"input parameter {key!r} comes from task {producer!r}, which is not in this DAG; run "
                        f"creation fails: 'unknown producer task {_q(producer)} in DAG' (argocompiler/dag.go "
                        "addImplicitDependencies). Fix: name an existing task.",
                    )
                    continue
                produced = self.declared_outputs(tasks[producer], "parameters")
                if out_key not in produced:
                    self.add(
                        where,
                        "dag-edge",
                        f"input parameter {key!r} reads output parameter {out_key!r} of task {producer!r}, "
                        "which its component does not declare; the driver resolves it to nothing and the "
                        "task fails (v2/driver/resolve.go resolveUpstreamParameters). Fix: use a declared "
                        "output parameter.",
                    )
                    continue
                self.check_kind(
                    where,
                    key,
                    _type_kind(_mapping(produced[out_key]).get("parameterType")),
                    want,
                    f"output {out_key!r} of task {producer!r}",
                )
            elif "runtimeValue" in source:
                runtime = _mapping(source["runtimeValue"])
                if "constant" not in runtime:
                    self.add(
                        where,
                        "parameter-input",
                        f"input parameter {key!r} has runtimeValue {sorted(runtime)} but no 'constant' (the "
                        "deprecated constantValue is not read); the driver fails: 'param runtime value spec "
                        "of type ... not implemented' (v2/driver/resolve.go resolveInputParameter). Fix: "
                        "runtimeValue.constant.",
                    )
                    continue
                value = runtime["constant"]
                if isinstance(value, str):
                    self.check_constant_placeholders(where, key, value)
                self.check_kind(where, key, _value_kind(value), want, f"constant {_short(value)}")
            elif "taskFinalStatus" in source:
                continue
            else:
                self.add(
                    where,
                    "parameter-input",
                    f"input parameter {key!r} has no known source {sorted(source)}; the driver fails: "
                    "'parameter spec of type ... not implemented yet' (v2/driver/resolve.go "
                    "resolveInputParameter). Fix: componentInputParameter, taskOutputParameter or "
                    "runtimeValue.constant.",
                )

    def check_kind(self, where: str, key: str, have: Optional[str], want: Optional[str], origin: str) -> None:
        """The driver's type check on a resolved input (v2/driver/resolve.go resolveInputs,
        handleParamTypeValidationAndConversion): STRING takes anything (turned into text), others need their kind."""
        if not want or want == "STRING" or have is None:
            return
        accepted = {
            "NUMBER_INTEGER": "number",
            "NUMBER_DOUBLE": "number",
            "BOOLEAN": "bool",
            "LIST": "list",
            "STRUCT": "struct",
            "TASK_FINAL_STATUS": "struct",
            "TASK_CONFIG": "struct",
        }.get(want)
        if have == "null":
            self.add(
                where,
                "parameter-type",
                f"input parameter {key!r} ({want}) gets null from {origin}; the driver fails: 'got null for "
                f'input parameter "{key}"\' (v2/driver/resolve.go resolveInputs). Fix: a {want} value.',
            )
        elif accepted and have != accepted:
            self.add(
                where,
                "parameter-type",
                f"input parameter {key!r} is {want} but {origin} is a {have}; the driver fails: 'input "
                f'parameter "{key}" type mismatch: expect {want}, got {have}\' (v2/driver/resolve.go '
                f"resolveInputs; strings are not parsed). Fix: a {accepted} value, or make the input STRING.",
            )

    def check_constant_placeholders(self, where: str, key: str, value: str) -> None:
        for placeholder in _PLACEHOLDER.findall(value.replace(WORKSPACE_PLACEHOLDER, "")):
            if placeholder in RUN_PLACEHOLDERS and placeholder != value:
                problem = (
                    "is resolved only when it is the whole value (the driver compares the constant with "
                    "it, v2/driver/resolve.go resolveInputParameter)"
                )
            elif placeholder in RUN_PLACEHOLDERS:
                continue
            else:
                problem = (
                    f"is not one the driver resolves in a task input (v2/driver/resolve.go "
                    f"resolveInputParameter knows {sorted(RUN_PLACEHOLDERS)} and {WORKSPACE_PLACEHOLDER})"
                )
            self.add(
                where,
                "placeholder",
                f"input parameter {key!r} holds {placeholder!r}, which {problem}; the task receives the text "
                "as it is. Fix: use a supported placeholder as the whole constant.",
            )

    def check_artifact_inputs(
        self, where: str, given: dict, component: dict, tasks: Dict[str, dict], parent: dict
    ) -> None:
        declared = _mapping(_mapping(component.get("inputDefinitions")).get("artifacts"))
        for key, spec in sorted(declared.items()):
            if key not in given and not _mapping(spec).get("isOptional"):
                self.add(
                    where,
                    "artifact-input",
                    f"input artifact {key!r} is required by the component but the task does not supply it; "
                    "the driver passes no artifact (v2/driver/resolve.go resolveInputs) and the executor "
                    "finds none. Fix: wire it to a producer or mark it isOptional.",
                )
        for key, source in sorted(given.items()):
            source = _mapping(source)
            if key not in declared:
                self.add(
                    where,
                    "artifact-input",
                    f"input artifact {key!r} is not declared by the component; the driver resolves and the "
                    "launcher downloads it (v2/driver/resolve.go resolveInputs) but the executor's "
                    "inputDefinitions do not list it. Fix: declare it or drop it.",
                )
            if "taskOutputArtifact" in source:
                output = _mapping(source["taskOutputArtifact"])
                producer, out_key = output.get("producerTask"), output.get("outputArtifactKey")
                if producer not in tasks:
                    self.add(
                        where,
                        "dag-edge",
                        f"input artifact {key!r} comes from task {producer!r}, which is not in this DAG; run "
                        f"creation fails: 'unknown producer task {_q(producer)} in DAG' (argocompiler/dag.go "
                        "addImplicitDependencies). Fix: name an existing task.",
                    )
                    continue
                produced = self.declared_outputs(tasks[producer], "artifacts")
                if out_key not in produced:
                    self.add(
                        where,
                        "dag-edge",
                        f"input artifact {key!r} reads output {out_key!r} of task {producer!r}, which its "
                        f"component does not declare; the driver fails: 'cannot find output artifact key "
                        f"{out_key!r} in producer task' (v2/driver/resolve.go resolveUpstreamArtifacts). Fix: "
                        "use a declared output.",
                    )
                    continue
                have = _artifact_title(_mapping(_mapping(produced[out_key]).get("artifactType")))
                want = _artifact_title(_mapping(_mapping(declared.get(key)).get("artifactType")))
                if have and want and have != want and "system.Artifact" not in (have, want):
                    self.add(
                        where,
                        "artifact-type",
                        f"input artifact {key!r} is {want} but task {producer!r} output {out_key!r} is "
                        f"{have}; the backend does not compare types (v2/driver/resolve.go "
                        f"resolveUpstreamArtifacts passes the producer's artifact as it is), so the executor "
                        f"gets a {have} where it expects a {want}. Fix: wire the right output.",
                    )
            elif "componentInputArtifact" in source:
                ref = source["componentInputArtifact"]
                if ref not in _mapping(parent.get("artifacts")):
                    self.add(
                        where,
                        "artifact-input",
                        f"input artifact {key!r} reads DAG input artifact {ref!r}, which the DAG does not "
                        f"declare; the driver fails: 'parent DAG does not have input artifact {ref}' "
                        "(v2/driver/resolve.go resolveInputArtifact). Fix: wire it to a producer task.",
                    )
            else:
                self.add(
                    where,
                    "artifact-input",
                    f"input artifact {key!r} has no known source {sorted(source)}; the driver fails: "
                    "'artifact spec of type ... not implemented yet' (v2/driver/resolve.go "
                    "resolveInputArtifact). Fix: taskOutputArtifact or componentInputArtifact.",
                )

    def check_cycles(self, tasks: Dict[str, dict]) -> None:
        """Argo's verifyNoCycles (validate.go) on dependentTasks plus the producers the compiler adds
        (argocompiler/dag.go addImplicitDependencies)."""
        graph = {name: sorted(_upstream(task) & set(tasks)) for name, task in tasks.items()}
        state: Dict[str, int] = {}  # 1: on the current path, 2: done
        reported: Set[frozenset] = set()

        def visit(name: str, path: List[str]) -> None:
            state[name] = 1
            for dep in graph[name]:
                if state.get(dep) == 1:
                    cycle = path[path.index(dep) :] + [dep]
                    if frozenset(cycle) not in reported:
                        reported.add(frozenset(cycle))
                        self.add(
                            f"task {dep}",
                            "dag-cycle",
                            f"dependency cycle {' -> '.join(cycle)}; run creation fails: 'templates.root.tasks "
                            "dependency cycle detected' (Argo validate.go verifyNoCycles). Fix: break the "
                            "cycle.",
                        )
                elif dep not in state:
                    visit(dep, path + [dep])
            state[name] = 2

        for name in sorted(graph):
            if name not in state:
                visit(name, [name])

    # root parameters: apiserver/template/v2_template.go validatePipelineJobInputs, argocompiler/argo.go Compile

    def check_root_parameters(self, root: dict) -> None:
        for name, spec in sorted(_mapping(_mapping(root.get("inputDefinitions")).get("parameters")).items()):
            spec = _mapping(spec)
            where = f"root parameter {name}"
            kind = spec.get("parameterType")
            if kind not in PARAMETER_KINDS:
                answer = (
                    "requires type TASK_FINAL_STATUS, which is invalid for root component"
                    if kind == "TASK_FINAL_STATUS"
                    else "has unspecified type"
                )
                self.add(
                    where,
                    "root-parameter",
                    f"parameterType is {kind!r}; a run that sets it is refused: 'input parameter {name} "
                    f"{answer}' (apiserver/template/v2_template.go validatePipelineJobInputs). Fix: one of "
                    f"{sorted(PARAMETER_KINDS)}.",
                )
                continue
            if "defaultValue" not in spec:
                continue
            value = spec["defaultValue"]
            if not _matches_type(value, kind):
                self.add(
                    where,
                    "root-parameter",
                    f"defaultValue {_short(value)} is not a {kind}; the API server checks only values a run "
                    "passes (apiserver/template/v2_template.go validatePipelineJobInputs), so a run that relies "
                    "on the default hands the tasks a value of the wrong type (argocompiler/argo.go Compile "
                    "copies it as it is; v2/driver/resolve.go then refuses it for non-STRING inputs). Fix: a "
                    f"{kind} default.",
                )

    def check_pipeline_root(self) -> None:
        root = self.spec.get("defaultPipelineRoot")
        if root is None:
            return
        problem = _bucket_problem(root) if isinstance(root, str) and root else "is empty"
        if problem:
            self.add(
                "pipeline",
                "pipeline-root",
                f"defaultPipelineRoot {root!r} {problem}: outputs could not be uploaded (v2/objectstore/"
                "config.go ParseBucketPathToConfig, v2/config/env.go GetStoreSessionInfo, "
                "v2/component/launcher_v2.go LocalPathForURI); the root DAG driver fails when a run uses it. "
                f"Fix: a {', '.join(STORAGE_SCHEMES)} URI with a bucket. Note the backend never reads this "
                "field: pass it as the run's pipeline_root (v2/driver/root_dag.go).",
            )

    # platform spec: v2_template.go IsPlatformSpecWithKubernetesConfig, argocompiler/spec_patch.go
    # AddKubernetesSpec, v2/driver/k8s.go extendPodSpecPatch

    def check_platform(self) -> None:
        if len(self.platforms) > 1:
            self.add(
                "platform spec",
                "platform-spec",
                "more than one platform spec document; upload refuses it: 'multiple platform specs provided' "
                "(apiserver/template/v2_template.go NewV2SpecTemplate). Fix: merge them.",
            )
        label_users = {c.get("executorLabel"): n for n, c in self.reached.items() if c.get("executorLabel")}
        for document in self.platforms:
            platforms = _mapping(document.get("platforms"))
            unknown = [k for k in document if k != "platforms"]
            kubernetes = _mapping(platforms.get("kubernetes"))
            unknown += [
                f"platforms.kubernetes.{k}"
                for k in kubernetes
                if _camel(k) not in ("deploymentSpec", "platform", "config", "pipelineConfig")
            ]
            deployment = _mapping(kubernetes.get("deploymentSpec") or kubernetes.get("deployment_spec"))
            unknown += [f"platforms.kubernetes.deploymentSpec.{k}" for k in deployment if k != "executors"]
            if unknown or "kubernetes" not in platforms:
                what = f"has unknown field(s) {unknown}" if unknown else "has no platforms.kubernetes"
                self.add(
                    "platform spec",
                    "platform-spec",
                    f"the platform spec {what}; the API server then does not take it for a Kubernetes "
                    "platform spec and drops it without a word, with every secret, mount and node setting in "
                    "it (apiserver/template/v2_template.go IsPlatformSpecWithKubernetesConfig). Fix: "
                    "{'platforms': {'kubernetes': {'deploymentSpec': {'executors': {label: {...}}}}}}.",
                )
            for label, config in sorted(_mapping(deployment.get("executors")).items()):
                where = f"platform executor {label}"
                if label not in self.executors:
                    self.add(
                        where,
                        "platform-spec",
                        f"executor {label!r} is not in deploymentSpec.executors; the compiler only looks up the "
                        "labels components use (v2/compiler/visitor.go dfs), so this config is ignored "
                        "silently. Fix: use the executor label of the component it is for.",
                    )
                    continue
                if label not in label_users:
                    continue  # no task runs it: the backend never reads it
                self.check_executor_config(where, label_users[label], _mapping(config))

    def check_executor_config(self, where: str, component: str, config: dict) -> None:
        unknown = list(_unknown_fields(config, "KubernetesExecutorConfig", ""))
        if unknown:
            self.add(
                where,
                "platform-spec",
                f"unknown field(s) {unknown}; run creation fails: 'failed to unmarshal kubernetes spec for "
                f"component {_q(component)}' (argocompiler/spec_patch.go AddKubernetesSpec, strict protojson). "
                "Fix: use the KubernetesExecutorConfig fields (kfp-kubernetes).",
            )
        if not _ARGO_PARAM.match(component):
            self.add(
                where,
                "component-name",
                f"component {component!r} has a Kubernetes config, stored as workflow argument "
                f"'kubernetes-{component}'; run creation fails: 'spec.arguments.parameters[..].name ... "
                "Parameter/Artifact name must consist of alpha-numeric characters, '_' or '-'' "
                "(argocompiler/argo.go saveKubernetesSpec, Argo validate.go validateArguments). Fix: rename "
                "the component.",
            )
        params = set(_mapping(_mapping(self.spec.get("root")).get("inputDefinitions")).get("parameters") or {})
        volumes: List[Tuple[str, str, str]] = []  # (rule, volume name, mount path) the config adds to the pod
        policy = config.get("imagePullPolicy")
        if policy and policy not in ("Always", "Never", "IfNotPresent"):
            self.add(
                where,
                "platform-spec",
                f"imagePullPolicy {policy!r}; the driver fails: 'unsupported value ... should be one of "
                "'Always', 'Never' or 'IfNotPresent'' (v2/driver/k8s.go extendPodSpecPatch). Fix: one of those.",
            )
        security = _mapping(config.get("securityContext"))
        if _integer(security.get("runAsUser")) == 0 and security.get("runAsNonRoot") is True:
            self.add(
                where,
                "security-context",
                "securityContext sets runAsUser 0 with runAsNonRoot true; the pod never starts: released "
                "backends (up to 2.17.0) create it and the kubelet refuses it (CreateContainerConfigError: "
                "container has runAsNonRoot and image will run as root), KFP master's driver refuses it first "
                "('runAsUser=0 (root) is not allowed: runAsNonRoot is true', v2/driver/k8s.go "
                "extendPodSpecPatch). Fix: a non-root runAsUser (the tfxflow image's is 1000).",
            )
        for entry in _list(config.get("secretAsEnv")):
            self.check_secret_env(where, _mapping(entry), params)
        for entry in _list(config.get("secretAsVolume")):
            entry = _mapping(entry)
            name = entry.get("secretName")
            if not name and not entry.get("secretNameParameter"):
                self.add(
                    where,
                    "secret-volume",
                    "secretAsVolume has no secretName; the driver fails: 'missing either SecretName or "
                    "SecretNameParameter for secret volume' (v2/driver/k8s.go extendPodSpecPatch). Fix: name "
                    "the secret.",
                )
            elif name:
                volumes.append(("secret-volume", str(name), str(entry.get("mountPath", ""))))
        for entry in _list(config.get("pvcMount")):
            volumes += self.check_pvc_mount(where, _mapping(entry), params)
        selector = _mapping(config.get("nodeSelector"))
        for key, value in sorted(_mapping(selector.get("labels")).items()):
            problem = _qualified_name_problem(str(key)) or _label_value_problem(value)
            if problem:
                self.add(
                    where,
                    "node-selector",
                    f"nodeSelector {key}={value!r}: {problem}; Kubernetes refuses the pod when the task starts "
                    "(v2/driver/k8s.go extendPodSpecPatch copies the labels). Fix: a valid label key and "
                    "value.",
                )
        for entry in _list(config.get("tolerations")):
            problem = _toleration_problem(_mapping(entry))
            if problem:
                self.add(
                    where,
                    "toleration",
                    f"toleration {entry!r}: {problem}; Kubernetes refuses the pod when the task starts "
                    "(v2/driver/k8s.go extendPodSpecPatch copies it). Fix: key[=value]:effect with operator "
                    "Exists or Equal and effect NoSchedule, PreferNoSchedule or NoExecute.",
                )
        seen: Set[str] = set()
        for rule, volume, mount in volumes:
            # v2/driver/k8s.go names the pod volume after the claim or secret, and volume names are DNS-1123 labels.
            if not _DNS_LABEL.match(volume) or len(volume) > 63:
                self.add(
                    where,
                    rule,
                    f"{'claim' if rule == 'pvc-mount' else 'secret'} name {volume!r} is not a DNS-1123 label "
                    "(lower case, digits, '-', at most 63); the driver also uses it as the pod volume's name "
                    "(v2/driver/k8s.go extendPodSpecPatch, makeVolumeMountPatch), so Kubernetes refuses the "
                    "pod. Fix: rename it.",
                )
            elif volume in RESERVED_VOLUMES or volume in seen:
                self.add(
                    where,
                    rule,
                    f"volume name {volume!r} (the claim or secret name) is already a volume of the pod; "
                    "Kubernetes refuses it: 'spec.volumes[..].name: Duplicate value' (argocompiler/container.go "
                    "adds its own volumes, v2/driver/k8s.go names volumes after the claim). Fix: mount each "
                    "one once and avoid the names " + ", ".join(RESERVED_VOLUMES) + ".",
                )
            seen.add(volume)
            if mount.rstrip("/") in RESERVED_MOUNTS:
                self.add(
                    where,
                    rule,
                    f"mountPath {mount!r} is a path KFP already mounts in every executor pod; Kubernetes "
                    "refuses it: 'mountPath: Invalid value: must be unique' (argocompiler/container.go "
                    "addContainerExecutorTemplate). Fix: another path, e.g. /serving.",
                )

    def check_secret_env(self, where: str, entry: dict, params: Set[str]) -> None:
        name = entry.get("secretName")
        if not name and not entry.get("secretNameParameter"):
            self.add(
                where,
                "secret-env",
                "secretAsEnv has no secretName; the driver fails: 'missing either SecretName or "
                "SecretNameParameter for secret environment variable' (v2/driver/k8s.go extendPodSpecPatch). "
                "Fix: name the secret.",
            )
        elif name and not _dns_subdomain(str(name)):
            self.add(
                where,
                "secret-env",
                f"secretName {name!r} is not a valid Secret name (DNS-1123 subdomain: lower case, digits, '-', "
                "'.'); Kubernetes refuses the pod's secretKeyRef. Fix: the Secret's real name.",
            )
        mappings = _list(entry.get("keyToEnv"))
        if not mappings:
            self.add(
                where,
                "secret-env",
                "secretAsEnv has no keyToEnv entries, so the driver adds no variable at all (v2/driver/k8s.go "
                "extendPodSpecPatch loops over keyToEnv). Fix: list {secretKey, envVar} pairs.",
            )
        for mapping in mappings:
            mapping = _mapping(mapping)
            key, env = mapping.get("secretKey"), mapping.get("envVar")
            if not key or not _SECRET_KEY.match(str(key)):
                self.add(
                    where,
                    "secret-env",
                    f"keyToEnv secretKey {key!r} is not a valid Secret key ([-._a-zA-Z0-9]+); Kubernetes "
                    "refuses the pod (v2/driver/k8s.go extendPodSpecPatch copies it). Fix: the key in the "
                    "Secret's data.",
                )
            if not env or not _ENV_NAME.match(str(env)):
                self.add(
                    where,
                    "secret-env",
                    f"keyToEnv envVar {env!r} is not a valid environment variable name; Kubernetes refuses the "
                    "pod (v2/driver/k8s.go extendPodSpecPatch copies it). Fix: e.g. MLFLOW_TRACKING_URI.",
                )
        self.check_name_parameter(where, "secretNameParameter", entry.get("secretNameParameter"), params)

    def check_pvc_mount(self, where: str, entry: dict, params: Set[str]) -> List[Tuple[str, str, str]]:
        """v2/driver/k8s.go makeVolumeMountPatch: the claim name comes from pvcNameParameter, else the deprecated
        constant, taskOutputParameter or componentInputParameter; it also names the pod volume."""
        mount = entry.get("mountPath")
        if not mount:
            self.add(
                where,
                "pvc-mount",
                "pvcMount has no mountPath; the driver fails: 'failed to mount volume, missing mountpath or pvc "
                "name' (v2/driver/k8s.go makeVolumeMountPatch). Fix: set mountPath.",
            )
        elif not str(mount).startswith("/"):
            self.add(
                where,
                "pvc-mount",
                f"mountPath {mount!r} is relative; the container runtime refuses non-absolute mount "
                "destinations, so the pod does not start. Fix: an absolute path, e.g. /serving.",
            )
        name_parameter = _mapping(entry.get("pvcNameParameter"))
        constant = entry.get("constant")
        if name_parameter:
            constant = _mapping(name_parameter.get("runtimeValue")).get("constant")
            self.check_name_parameter(where, "pvcNameParameter", name_parameter, params)
        elif entry.get("componentInputParameter"):
            self.check_name_parameter(
                where, "componentInputParameter", {"componentInputParameter": entry["componentInputParameter"]}, params
            )
        elif not constant and not entry.get("taskOutputParameter"):
            self.add(
                where,
                "pvc-mount",
                "pvcMount names no claim (pvcNameParameter, constant, componentInputParameter or "
                "taskOutputParameter); the driver fails: 'volume mount: volume name not provided' "
                "(v2/driver/k8s.go makeVolumeMountPatch). Fix: name the PersistentVolumeClaim.",
            )
            return []
        if constant is None:
            return []  # resolved at run time
        return [("pvc-mount", str(constant), str(mount or ""))]

    def check_name_parameter(self, where: str, field: str, spec, params: Set[str]) -> None:
        ref = _mapping(spec).get("componentInputParameter")
        if ref and ref not in params:
            self.add(
                where,
                "platform-spec",
                f"{field} reads pipeline parameter {ref!r}, which the pipeline does not declare; the driver "
                f"fails: 'parent DAG does not have input parameter {ref}' (v2/driver/resolve.go "
                "resolveInputParameter via k8s.go). Fix: declare it in root.inputDefinitions.parameters.",
            )


# helpers


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _camel(name: str) -> str:
    """proto_name -> protoName; protojson accepts both spellings."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _unknown_fields(value, message: str, path: str) -> Iterator[str]:
    fields = _K8S_MESSAGES[message]
    for key, item in _mapping(value).items():
        name = _camel(key)
        if name not in fields:
            yield f"{path}{key}"
            continue
        child = fields[name]
        if child:
            for element in item if isinstance(item, list) else [item]:
                yield from _unknown_fields(element, child, f"{path}{key}.")


def _q(text) -> str:
    """Go's %q, as the backend quotes names in its errors."""
    return json.dumps(str(text))


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _go_number(value) -> str:
    """Go's %v of a float64: 8.0 -> '8', 0.5 -> '0.5'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return str(int(value)) if value == int(value) else repr(float(value))


def _integer(value) -> Optional[int]:
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


def _quantity(text: str) -> Optional[float]:
    """A Kubernetes quantity's value (resource.ParseQuantity's grammar); None when it does not parse."""
    match = _QUANTITY.match(text.strip())
    if not match:
        return None
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * 10 ** int(suffix[1:])
    return number * _QUANTITY_SCALE[suffix]


def _value_kind(value) -> str:
    """The protobuf Value kind a YAML value becomes."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "struct"


def _type_kind(parameter_type: Optional[str]) -> Optional[str]:
    """The Value kind a parameter of this type holds; None when unknown."""
    return {
        "STRING": "string",
        "NUMBER_INTEGER": "number",
        "NUMBER_DOUBLE": "number",
        "BOOLEAN": "bool",
        "LIST": "list",
        "STRUCT": "struct",
    }.get(parameter_type or "")


def _matches_type(value, kind: str) -> bool:
    if kind == "NUMBER_INTEGER":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == int(value)
    if kind == "NUMBER_DOUBLE":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, PARAMETER_KINDS[kind])


def _upstream(task: dict) -> Set[str]:
    """The tasks `task` waits for: dependentTasks plus the producers of its inputs (argocompiler/dag.go)."""
    names = {d for d in task.get("dependentTasks") or [] if isinstance(d, str)}
    inputs = _mapping(task.get("inputs"))
    for kind, field in (("parameters", "taskOutputParameter"), ("artifacts", "taskOutputArtifact")):
        for source in _mapping(inputs.get(kind)).values():
            producer = _mapping(_mapping(source).get(field)).get("producerTask")
            if producer:
                names.add(producer)
    return names


def _container_placeholder(placeholder: str, declared: Mapping[Tuple[str, str], Set[str]]) -> Optional[str]:
    """What is wrong with a placeholder in a container's command or args; None when the backend resolves it
    (v2/component/launcher_v2.go getPlaceholders and compileCmdAndArgs, v2/driver/util.go resolveContainerArgs)."""
    if placeholder == "{{$}}":
        return None
    match = _IN_PARAM.match(placeholder)
    if match:
        side, kind, name = "inputs", "parameters", match.group(1)
    elif _ARTIFACT_REF.match(placeholder):
        side, name = _ARTIFACT_REF.match(placeholder).group(1, 2)
        kind = "artifacts"
    elif _OUT_PARAM.match(placeholder):
        side, kind, name = "outputs", "parameters", _OUT_PARAM.match(placeholder).group(1)
    else:
        hint = (
            " (it is resolved only as a whole task-input constant: pass it through an input parameter)"
            if placeholder in RUN_PLACEHOLDERS
            else ""
        )
        return (
            f"is not one the launcher resolves{hint}; the container gets the text as it is "
            "(v2/component/launcher_v2.go getPlaceholders). Fix: use {{$}}, {{$.inputs.parameters['x']}}, "
            "{{$.inputs|outputs.artifacts['x'].uri|path}} or {{$.outputs.parameters['x'].output_file}}."
        )
    if name in declared[(side, kind)]:
        return None
    failure = (
        "the driver fails: 'parameter not found in executor input' (v2/driver/util.go "
        "resolveInputParameterPlaceholders)"
        if (side, kind) == ("inputs", "parameters")
        else "the container gets the text as it is (v2/component/launcher_v2.go getPlaceholders)"
    )
    return (
        f"names {side[:-1]} {kind[:-1]} {name!r}, which the component does not declare; {failure}. Fix: declare "
        "it in the component's " + ("inputDefinitions." if side == "inputs" else "outputDefinitions.") + kind
    )


def _bucket_problem(uri: str) -> Optional[str]:
    match = BUCKET_PATTERN.match(uri)
    if not match:
        return "is not a bucket URI: 'unrecognized pipeline root format'"
    if match.group(1) not in STORAGE_SCHEMES:
        return f"uses scheme {match.group(1)!r}: 'unsupported Cloud bucket' / 'unsupported provider'"
    return None


def _dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def _qualified_name_problem(name: str) -> Optional[str]:
    """Kubernetes IsQualifiedName: [prefix/]name, prefix a DNS subdomain, name at most 63 characters."""
    prefix, slash, base = name.rpartition("/")
    if slash and not _dns_subdomain(prefix):
        return f"prefix {prefix!r} is not a DNS-1123 subdomain"
    if not base or len(base) > 63 or not _QUALIFIED_PART.match(base):
        return f"{base!r} is not a qualified name (alphanumerics, '-', '_', '.', at most 63)"
    return None


def _label_value_problem(value) -> Optional[str]:
    if not isinstance(value, str):
        return f"value {value!r} is not a string"
    if value and (len(value) > 63 or not _QUALIFIED_PART.match(value)):
        return f"value {value!r} is not a label value (alphanumerics, '-', '_', '.', at most 63)"
    return None


def _extended_resource_problem(name: str) -> Optional[str]:
    """Kubernetes validateContainerResourceName / IsExtendedResourceName for a limit's resource name."""
    if "/" not in name:
        return (
            "has no domain, so Kubernetes takes it for a standard resource and refuses it: 'must be a standard "
            "resource for containers' (NVIDIA_TESLA_T4-style names are Vertex AI's, not Kubernetes')"
        )
    problem = _qualified_name_problem(name)
    if problem:
        return f"is not a valid resource name: {problem}"
    if "kubernetes.io/" in name or name.startswith("requests."):
        return "is in the kubernetes.io namespace or starts with 'requests.', which extended resources may not"
    return None


def _toleration_problem(toleration: dict) -> Optional[str]:
    """Kubernetes validateTolerations."""
    if "tolerationJson" in toleration:
        return None  # resolved at run time
    key, operator = toleration.get("key", ""), toleration.get("operator", "") or "Equal"
    value, effect = toleration.get("value", ""), toleration.get("effect", "")
    if key and _qualified_name_problem(str(key)):
        return f"key: {_qualified_name_problem(str(key))}"
    if not key and operator != "Exists":
        return "an empty key needs operator Exists"
    if operator not in ("Exists", "Equal"):
        return f"operator {operator!r} is not Exists or Equal"
    if operator == "Exists" and value:
        return "operator Exists takes no value"
    if operator == "Equal" and _label_value_problem(value):
        return str(_label_value_problem(value))
    if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        return f"effect {effect!r} is not NoSchedule, PreferNoSchedule or NoExecute"
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        return "tolerationSeconds needs effect NoExecute"
    return None
