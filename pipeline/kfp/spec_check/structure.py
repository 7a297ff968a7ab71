"""The spec as a whole: its fields, schema version and name (checked at upload), the components its tasks reach
and whether the backend runs their kind of executor, the root's parameters and the pipeline root."""

from __future__ import annotations

import re
from typing import Optional, Set

from tfxflow.pipeline.kfp.spec_check.rules import (
    STORAGE_SCHEMES,
    Rules,
    as_dict,
    bucket_problem,
    camel,
    go_quote,
    short,
)

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

PARAMETER_KINDS = {
    "STRING": str,
    "NUMBER_INTEGER": int,
    "NUMBER_DOUBLE": float,
    "BOOLEAN": bool,
    "LIST": list,
    "STRUCT": dict,
}
PIPELINE_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,127}$"  # apiserver/common/utils.go pipelineNamePattern


class StructureRules(Rules):
    """Upload (apiserver/template/v2_template.go NewV2SpecTemplate), the visit of the components at run creation
    (v2/compiler/visitor.go), the root's parameters and the pipeline root."""

    # upload: apiserver/template/v2_template.go NewV2SpecTemplate

    def check_document(self) -> None:
        unknown = [k for k in self.spec if k not in SPEC_FIELDS and camel(k) not in SPEC_FIELDS]
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
        name = as_dict(self.spec.get("pipelineInfo")).get("name")
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
        for task_name, task in sorted(as_dict(as_dict(component.get("dag")).get("tasks")).items()):
            task = as_dict(task)
            ref = as_dict(task.get("componentRef")).get("name")
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
                    f"ref name={go_quote(ref)}' (v2/compiler/visitor.go dfs). Fix: add the component or fix the name.",
                )
                continue
            self.users.setdefault(ref, []).append((task_name, task))
            if ref in seen:
                continue
            seen.add(ref)
            sub = as_dict(self.components[ref])
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
                f"'executor(label={go_quote(label)}) not found in deployment config' (v2/compiler/visitor.go dfs). "
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
            f"executors: run creation fails with 'executor(label={go_quote(label)}): non-container and non-importer "
            "executor not implemented' (v2/compiler/visitor.go dfs; argocompiler/argo.go Resolver and "
            "dag.go task: 'resolver executors not implemented', 'custom job executors is Google Cloud only'). "
            "Fix: drop the task or replace it with a container component (for a TFX Resolver, e.g. a "
            "container step that queries MLMD itself).",
        )

    # root parameters: apiserver/template/v2_template.go validatePipelineJobInputs, argocompiler/argo.go Compile

    def check_root_parameters(self, root: dict) -> None:
        for name, spec in sorted(as_dict(as_dict(root.get("inputDefinitions")).get("parameters")).items()):
            spec = as_dict(spec)
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
                    f"defaultValue {short(value)} is not a {kind}; the API server checks only values a run "
                    "passes (apiserver/template/v2_template.go validatePipelineJobInputs), so a run that relies "
                    "on the default hands the tasks a value of the wrong type (argocompiler/argo.go Compile "
                    "copies it as it is; v2/driver/resolve.go then refuses it for non-STRING inputs). Fix: a "
                    f"{kind} default.",
                )

    def check_pipeline_root(self) -> None:
        root = self.spec.get("defaultPipelineRoot")
        if root is None:
            return
        problem = bucket_problem(root) if isinstance(root, str) and root else "is empty"
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


def _matches_type(value, kind: str) -> bool:
    if kind == "NUMBER_INTEGER":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == int(value)
    if kind == "NUMBER_DOUBLE":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, PARAMETER_KINDS[kind])
