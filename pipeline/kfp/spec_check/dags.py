"""Each DAG's tasks as the backend compiles and runs them: task names Argo accepts, task kinds, edges and cycles,
and every input parameter and artifact: its source, and its type as the driver resolves it."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

from tfxflow.pipeline.kfp.spec_check.rules import (
    PLACEHOLDER,
    RUN_PLACEHOLDERS,
    WORKSPACE_PLACEHOLDER,
    Rules,
    artifact_title,
    as_dict,
    go_quote,
    short,
)

_ARGO_TASK = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")  # Argo validate.go workflowFieldNameFmt


class DagRules(Rules):
    """Per DAG: argocompiler/dag.go, Argo validate.go validateDAG, v2/driver/resolve.go resolveInputs."""

    def check_dag(self, name: str, component: dict) -> None:
        tasks = {k: as_dict(v) for k, v in as_dict(as_dict(component.get("dag")).get("tasks")).items()}
        where_dag = "root DAG" if name == "root" else f"component {name}"
        if not tasks:
            self.add(
                where_dag,
                "dag",
                "the DAG has no tasks; run creation fails: 'DAG ... must contain one or more non-exit tasks' "
                "(argocompiler/dag.go DAG). Fix: add tasks.",
            )
            return
        inputs = as_dict(component.get("inputDefinitions"))
        for task_name, task in sorted(tasks.items()):
            ref = as_dict(task.get("componentRef")).get("name")
            if ref in self.refused or ref not in self.components:
                continue  # already reported; the task must go or change component, so more detail is noise
            self.check_task(task_name, task, as_dict(self.components[ref]), tasks, inputs)
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
        executor = as_dict(self.executors.get(label)) if label else {}
        if "artifactIterator" in task:
            self.add(
                where,
                "task-kind",
                "artifactIterator is not supported; run creation fails: 'artifact iterator not implemented "
                "yet' (argocompiler/dag.go DAG). Fix: iterate over parameters or drop the loop.",
            )
        if "importer" in executor and as_dict(task.get("triggerPolicy")).get("condition"):
            self.add(
                where,
                "task-kind",
                "an importer task with triggerPolicy.condition; run creation fails: 'triggerPolicy.condition "
                "on importer task is not supported' (argocompiler/dag.go task). Fix: drop the condition.",
            )
        if as_dict(as_dict(executor.get("container")).get("lifecycle")).get("preCacheCheck") and as_dict(
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
        task_inputs = as_dict(task.get("inputs"))
        self.check_parameter_inputs(where, as_dict(task_inputs.get("parameters")), component, tasks, parent)
        self.check_artifact_inputs(where, as_dict(task_inputs.get("artifacts")), component, tasks, parent)

    def check_parameter_inputs(
        self, where: str, given: dict, component: dict, tasks: Dict[str, dict], parent: dict
    ) -> None:
        declared = as_dict(as_dict(component.get("inputDefinitions")).get("parameters"))
        parent_params = as_dict(parent.get("parameters"))
        for key, spec in sorted(declared.items()):
            spec = as_dict(spec)
            if key not in given and not spec.get("isOptional") and "defaultValue" not in spec:
                self.add(
                    where,
                    "parameter-input",
                    f"input parameter {key!r} is required by the component but the task does not supply it; "
                    f"the driver fails: 'neither value nor default value provided for non-optional parameter "
                    f'"{key}"\' (v2/driver/resolve.go resolveInputs). Fix: supply it or give it a default.',
                )
        for key, source in sorted(given.items()):
            source = as_dict(source)
            target = as_dict(declared.get(key))
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
                origin = as_dict(parent_params[ref])
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
                output = as_dict(source["taskOutputParameter"])
                producer, out_key = output.get("producerTask"), output.get("outputParameterKey")
                if producer not in tasks:
                    self.add(
                        where,
                        "dag-edge",
                        f"input parameter {key!r} comes from task {producer!r}, which is not in this DAG; run "
                        f"creation fails: 'unknown producer task {go_quote(producer)} in DAG' (argocompiler/dag.go "
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
                    _type_kind(as_dict(produced[out_key]).get("parameterType")),
                    want,
                    f"output {out_key!r} of task {producer!r}",
                )
            elif "runtimeValue" in source:
                runtime = as_dict(source["runtimeValue"])
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
                self.check_kind(where, key, _value_kind(value), want, f"constant {short(value)}")
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
        for placeholder in PLACEHOLDER.findall(value.replace(WORKSPACE_PLACEHOLDER, "")):
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
        declared = as_dict(as_dict(component.get("inputDefinitions")).get("artifacts"))
        for key, spec in sorted(declared.items()):
            if key not in given and not as_dict(spec).get("isOptional"):
                self.add(
                    where,
                    "artifact-input",
                    f"input artifact {key!r} is required by the component but the task does not supply it; "
                    "the driver passes no artifact (v2/driver/resolve.go resolveInputs) and the executor "
                    "finds none. Fix: wire it to a producer or mark it isOptional.",
                )
        for key, source in sorted(given.items()):
            source = as_dict(source)
            if key not in declared:
                self.add(
                    where,
                    "artifact-input",
                    f"input artifact {key!r} is not declared by the component; the driver resolves and the "
                    "launcher downloads it (v2/driver/resolve.go resolveInputs) but the executor's "
                    "inputDefinitions do not list it. Fix: declare it or drop it.",
                )
            if "taskOutputArtifact" in source:
                output = as_dict(source["taskOutputArtifact"])
                producer, out_key = output.get("producerTask"), output.get("outputArtifactKey")
                if producer not in tasks:
                    self.add(
                        where,
                        "dag-edge",
                        f"input artifact {key!r} comes from task {producer!r}, which is not in this DAG; run "
                        f"creation fails: 'unknown producer task {go_quote(producer)} in DAG' (argocompiler/dag.go "
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
                have = artifact_title(as_dict(as_dict(produced[out_key]).get("artifactType")))
                want = artifact_title(as_dict(as_dict(declared.get(key)).get("artifactType")))
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
                if ref not in as_dict(parent.get("artifacts")):
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


def _upstream(task: dict) -> Set[str]:
    """The tasks `task` waits for: dependentTasks plus the producers of its inputs (argocompiler/dag.go)."""
    names = {d for d in task.get("dependentTasks") or [] if isinstance(d, str)}
    inputs = as_dict(task.get("inputs"))
    for kind, field in (("parameters", "taskOutputParameter"), ("artifacts", "taskOutputArtifact")):
        for source in as_dict(inputs.get(kind)).values():
            producer = as_dict(as_dict(source).get(field)).get("producerTask")
            if producer:
                names.add(producer)
    return names
