"""Each executor the tasks run: the container (image, placeholders, resources, accelerator) as the driver and
launcher turn it into a pod, the importer, and the types of the artifacts they write."""

from __future__ import annotations

import re
from typing import Dict, Mapping, Optional, Set, Tuple

from tfxflow.pipeline.kfp.spec_check.rules import (
    PLACEHOLDER,
    RUN_PLACEHOLDERS,
    STORAGE_SCHEMES,
    Rules,
    artifact_title,
    as_dict,
    bucket_problem,
    integer,
    qualified_name_problem,
)

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
_IN_PARAM = re.compile(r"^\{\{\$\.inputs\.parameters\['(.+?)'\]\}\}$")
_ARTIFACT_REF = re.compile(r"^\{\{\$\.(inputs|outputs)\.artifacts\['(.+?)'\]\.(uri|path)\}\}$")
_OUT_PARAM = re.compile(r"^\{\{\$\.outputs\.parameters\['(.+?)'\]\.output_file\}\}$")


class ExecutorRules(Rules):
    """Per component: executors (container.go, importer.go), driver.go initPodSpecPatch, launcher_v2.go."""

    def check_component(self, name: str, component: dict) -> None:
        for key, spec in sorted(as_dict(as_dict(component.get("outputDefinitions")).get("artifacts")).items()):
            self.check_artifact_type(
                f"component {name}", f"output artifact {key!r}", as_dict(as_dict(spec).get("artifactType"))
            )
        label = component.get("executorLabel")
        if not label:
            return
        executor = as_dict(self.executors.get(label))
        if "container" in executor:
            self.check_container(name, component, label, as_dict(executor["container"]))
        elif "importer" in executor:
            self.check_importer(name, component, label, as_dict(executor["importer"]))

    def check_artifact_type(self, where: str, what: str, artifact_type: Mapping) -> None:
        if "schemaUri" in artifact_type and not artifact_title(artifact_type):
            self.add(
                where,
                "artifact-type",
                f"{what} is typed by schemaUri; the launcher fails: 'SchemaUri is unsupported' "
                "(v2/component/launcher_v2.go getArtifactSchema). Fix: use schemaTitle or instanceSchema.",
            )
        elif not artifact_title(artifact_type):
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
        self.check_resources(component, label, as_dict(container.get("resources")))

    def check_placeholders(self, name: str, component: dict, label: str, container: dict) -> None:
        where = f"executor {label}"
        inputs = as_dict(component.get("inputDefinitions"))
        outputs = as_dict(component.get("outputDefinitions"))
        declared = {
            ("inputs", "parameters"): set(as_dict(inputs.get("parameters"))),
            ("inputs", "artifacts"): set(as_dict(inputs.get("artifacts"))),
            ("outputs", "artifacts"): set(as_dict(outputs.get("artifacts"))),
            ("outputs", "parameters"): set(as_dict(outputs.get("parameters"))),
        }
        needed: Set[str] = set()  # input parameters the driver must find in the executor input
        for field in ("command", "args"):
            for arg in container.get(field) or []:
                if not isinstance(arg, str):
                    continue
                conditional = arg.lstrip().startswith('{"IfPresent":')
                for placeholder in PLACEHOLDER.findall(arg):
                    problem = _container_placeholder(placeholder, declared)
                    if problem:
                        self.add(where, "placeholder", f"{field} placeholder {placeholder!r} {problem}")
                    match = _IN_PARAM.match(placeholder)
                    if match and not conditional:
                        needed.add(match.group(1))
        for env in container.get("env") or []:
            value = str(as_dict(env).get("value", ""))
            for placeholder in PLACEHOLDER.findall(value):
                self.add(
                    where,
                    "placeholder",
                    f"env {as_dict(env).get('name')!r} holds {placeholder!r}, which nothing resolves: the "
                    "driver copies env values as they are (v2/driver/driver.go initPodSpecPatch). Fix: pass "
                    "the value as a task input parameter and read it from the executor input.",
                )
        for param in sorted(needed & declared[("inputs", "parameters")]):
            for task_name, task in self.users.get(name, []):
                if param not in as_dict(as_dict(task.get("inputs")).get("parameters")):
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
        accelerator = as_dict(resources.get("accelerator"))
        if accelerator:
            self.check_accelerator(where, accelerator, params)

    def check_accelerator(self, where: str, accelerator: dict, params: Set[str]) -> None:
        # The driver reads resourceType, else the deprecated type; resourceCount, else count when > 0; it sets
        # limits[type] = count only when both are set (v2/driver/driver.go initPodSpecPatch).
        kind = accelerator.get("resourceType") or accelerator.get("type") or ""
        count = accelerator.get("resourceCount") or ""
        if not count:
            legacy = integer(accelerator.get("count", 0))
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

    def check_importer(self, name: str, component: dict, label: str, importer: dict) -> None:
        """v2/component/importer_launcher.go ImportSpecToMLMDArtifact and getOutPutArtifactName."""
        where = f"executor {label}"
        outputs = as_dict(as_dict(component.get("outputDefinitions")).get("artifacts"))
        if len(outputs) != 1:
            self.add(
                where,
                "importer",
                f"the importer's component has {len(outputs)} output artifacts; the importer fails: 'failed to "
                "extract output artifact name from componentOutputSpec' (v2/component/importer_launcher.go "
                "getOutPutArtifactName). Fix: exactly one output artifact.",
            )
        self.check_artifact_type(where, "importer typeSchema", as_dict(importer.get("typeSchema")))
        uri_spec = as_dict(importer.get("artifactUri"))
        if "constant" in uri_spec:
            uri = uri_spec["constant"]
            title = artifact_title(as_dict(importer.get("typeSchema")))
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
                problem = bucket_problem(uri)
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
                given = as_dict(as_dict(task.get("inputs")).get("parameters"))
                if param not in given:
                    answer = f"cannot find parameter {param} in task input to fetch artifact uri"
                elif not as_dict(given[param]).get("componentInputParameter"):
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


def _go_number(value) -> str:
    """Go's %v of a float64: 8.0 -> '8', 0.5 -> '0.5'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return str(int(value)) if value == int(value) else repr(float(value))


def _quantity(text: str) -> Optional[float]:
    """A Kubernetes quantity's value (resource.ParseQuantity's grammar); None when it does not parse."""
    match = _QUANTITY.match(text.strip())
    if not match:
        return None
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * 10 ** int(suffix[1:])
    return number * _QUANTITY_SCALE[suffix]


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


def _extended_resource_problem(name: str) -> Optional[str]:
    """Kubernetes validateContainerResourceName / IsExtendedResourceName for a limit's resource name."""
    if "/" not in name:
        return (
            "has no domain, so Kubernetes takes it for a standard resource and refuses it: 'must be a standard "
            "resource for containers' (NVIDIA_TESLA_T4-style names are Vertex AI's, not Kubernetes')"
        )
    problem = qualified_name_problem(name)
    if problem:
        return f"is not a valid resource name: {problem}"
    if "kubernetes.io/" in name or name.startswith("requests."):
        return "is in the kubernetes.io namespace or starts with 'requests.', which extended resources may not"
    return None
