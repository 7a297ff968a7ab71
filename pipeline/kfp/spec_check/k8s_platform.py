"""The Kubernetes platform spec: its shape (the API server drops one it does not recognise, the compiler refuses
unknown fields), and each executor's config as the driver patches it into the pod: secrets, volumes, node
selectors, tolerations, security context."""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from tfxflow.pipeline.kfp.spec_check.rules import (
    QUALIFIED_PART,
    Rules,
    as_dict,
    as_list,
    camel,
    dns_subdomain,
    go_quote,
    integer,
    qualified_name_problem,
)

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

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_ARGO_PARAM = re.compile(r"^[-a-zA-Z0-9_]+$")  # Argo validate.go paramOrArtifactNameRegex

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


class PlatformRules(Rules):
    """v2_template.go IsPlatformSpecWithKubernetesConfig, argocompiler/spec_patch.go AddKubernetesSpec,
    v2/driver/k8s.go extendPodSpecPatch."""

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
            platforms = as_dict(document.get("platforms"))
            unknown = [k for k in document if k != "platforms"]
            kubernetes = as_dict(platforms.get("kubernetes"))
            unknown += [
                f"platforms.kubernetes.{k}"
                for k in kubernetes
                if camel(k) not in ("deploymentSpec", "platform", "config", "pipelineConfig")
            ]
            deployment = as_dict(kubernetes.get("deploymentSpec") or kubernetes.get("deployment_spec"))
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
            for label, config in sorted(as_dict(deployment.get("executors")).items()):
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
                self.check_executor_config(where, label_users[label], as_dict(config))

    def check_executor_config(self, where: str, component: str, config: dict) -> None:
        unknown = list(_unknown_fields(config, "KubernetesExecutorConfig", ""))
        if unknown:
            self.add(
                where,
                "platform-spec",
                f"unknown field(s) {unknown}; run creation fails: 'failed to unmarshal kubernetes spec for "
                f"component {go_quote(component)}' (argocompiler/spec_patch.go AddKubernetesSpec, strict protojson). "
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
        params = set(as_dict(as_dict(self.spec.get("root")).get("inputDefinitions")).get("parameters") or {})
        volumes: List[Tuple[str, str, str]] = []  # (rule, volume name, mount path) the config adds to the pod
        policy = config.get("imagePullPolicy")
        if policy and policy not in ("Always", "Never", "IfNotPresent"):
            self.add(
                where,
                "platform-spec",
                f"imagePullPolicy {policy!r}; the driver fails: 'unsupported value ... should be one of "
                "'Always', 'Never' or 'IfNotPresent'' (v2/driver/k8s.go extendPodSpecPatch). Fix: one of those.",
            )
        security = as_dict(config.get("securityContext"))
        if integer(security.get("runAsUser")) == 0 and security.get("runAsNonRoot") is True:
            self.add(
                where,
                "security-context",
                "securityContext sets runAsUser 0 with runAsNonRoot true; the pod never starts: released "
                "backends (up to 2.17.0) create it and the kubelet refuses it (CreateContainerConfigError: "
                "container has runAsNonRoot and image will run as root), KFP master's driver refuses it first "
                "('runAsUser=0 (root) is not allowed: runAsNonRoot is true', v2/driver/k8s.go "
                "extendPodSpecPatch). Fix: a non-root runAsUser (the tfxflow image's is 1000).",
            )
        for entry in as_list(config.get("secretAsEnv")):
            self.check_secret_env(where, as_dict(entry), params)
        for entry in as_list(config.get("secretAsVolume")):
            entry = as_dict(entry)
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
        for entry in as_list(config.get("pvcMount")):
            volumes += self.check_pvc_mount(where, as_dict(entry), params)
        selector = as_dict(config.get("nodeSelector"))
        for key, value in sorted(as_dict(selector.get("labels")).items()):
            problem = qualified_name_problem(str(key)) or _label_value_problem(value)
            if problem:
                self.add(
                    where,
                    "node-selector",
                    f"nodeSelector {key}={value!r}: {problem}; Kubernetes refuses the pod when the task starts "
                    "(v2/driver/k8s.go extendPodSpecPatch copies the labels). Fix: a valid label key and "
                    "value.",
                )
        for entry in as_list(config.get("tolerations")):
            problem = _toleration_problem(as_dict(entry))
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
        elif name and not dns_subdomain(str(name)):
            self.add(
                where,
                "secret-env",
                f"secretName {name!r} is not a valid Secret name (DNS-1123 subdomain: lower case, digits, '-', "
                "'.'); Kubernetes refuses the pod's secretKeyRef. Fix: the Secret's real name.",
            )
        mappings = as_list(entry.get("keyToEnv"))
        if not mappings:
            self.add(
                where,
                "secret-env",
                "secretAsEnv has no keyToEnv entries, so the driver adds no variable at all (v2/driver/k8s.go "
                "extendPodSpecPatch loops over keyToEnv). Fix: list {secretKey, envVar} pairs.",
            )
        for mapping in mappings:
            mapping = as_dict(mapping)
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
        name_parameter = as_dict(entry.get("pvcNameParameter"))
        constant = entry.get("constant")
        if name_parameter:
            constant = as_dict(name_parameter.get("runtimeValue")).get("constant")
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
        ref = as_dict(spec).get("componentInputParameter")
        if ref and ref not in params:
            self.add(
                where,
                "platform-spec",
                f"{field} reads pipeline parameter {ref!r}, which the pipeline does not declare; the driver "
                f"fails: 'parent DAG does not have input parameter {ref}' (v2/driver/resolve.go "
                "resolveInputParameter via k8s.go). Fix: declare it in root.inputDefinitions.parameters.",
            )


def _unknown_fields(value, message: str, path: str) -> Iterator[str]:
    fields = _K8S_MESSAGES[message]
    for key, item in as_dict(value).items():
        name = camel(key)
        if name not in fields:
            yield f"{path}{key}"
            continue
        child = fields[name]
        if child:
            for element in item if isinstance(item, list) else [item]:
                yield from _unknown_fields(element, child, f"{path}{key}.")


def _label_value_problem(value) -> Optional[str]:
    if not isinstance(value, str):
        return f"value {value!r} is not a string"
    if value and (len(value) > 63 or not QUALIFIED_PART.match(value)):
        return f"value {value!r} is not a label value (alphanumerics, '-', '_', '.', at most 63)"
    return None


def _toleration_problem(toleration: dict) -> Optional[str]:
    """Kubernetes validateTolerations."""
    if "tolerationJson" in toleration:
        return None  # resolved at run time
    key, operator = toleration.get("key", ""), toleration.get("operator", "") or "Equal"
    value, effect = toleration.get("value", ""), toleration.get("effect", "")
    if key and qualified_name_problem(str(key)):
        return f"key: {qualified_name_problem(str(key))}"
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
