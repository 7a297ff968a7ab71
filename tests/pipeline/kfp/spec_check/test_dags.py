"""Each DAG's tasks: names, kinds, edges, cycles, and every input's source and type."""

import pytest

from tests.pipeline.kfp.spec_check.specs import (
    MODEL,
    assert_caught,
    executor_of,
    rename_task,
    task_of,
)

# (id, change, expected rule, where the problem is)
CASES = [
    (
        "unknown dependency",
        lambda s, p: task_of(s, "Consumer").update(dependentTasks=["Producer", "Nope"]),
        "dag-edge",
        "task Consumer",
    ),
    (
        "unknown producer",
        lambda s, p: task_of(s, "Consumer")["inputs"]["artifacts"]["examples"]["taskOutputArtifact"].update(
            producerTask="Nope"
        ),
        "dag-edge",
        "task Consumer",
    ),
    (
        "unknown output key",
        lambda s, p: task_of(s, "Consumer")["inputs"]["artifacts"]["examples"]["taskOutputArtifact"].update(
            outputArtifactKey="nope"
        ),
        "dag-edge",
        "task Consumer",
    ),
    (
        "undeclared input artifact",
        lambda s, p: s["components"]["Consumer"]["inputDefinitions"].pop("artifacts"),
        "artifact-input",
        "task Consumer",
    ),
    (
        "missing input artifact",
        lambda s, p: task_of(s, "Consumer")["inputs"].pop("artifacts"),
        "artifact-input",
        "task Consumer",
    ),
    (
        "artifact type",
        lambda s, p: s["components"]["Consumer"]["inputDefinitions"]["artifacts"]["examples"].update(
            artifactType={"instanceSchema": MODEL}
        ),
        "artifact-type",
        "task Consumer",
    ),
    (
        "unknown output parameter",
        lambda s, p: task_of(s, "Consumer")["inputs"]["parameters"]["count"]["taskOutputParameter"].update(
            outputParameterKey="nope"
        ),
        "dag-edge",
        "task Consumer",
    ),
    (
        "output parameter type",
        lambda s, p: s["components"]["Consumer"]["inputDefinitions"]["parameters"]["count"].update(
            parameterType="BOOLEAN"
        ),
        "parameter-type",
        "task Consumer",
    ),
    (
        "undeclared pipeline parameter",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"]["input_base"].update(
            componentInputParameter="nope"
        ),
        "parameter-input",
        "task Producer",
    ),
    (
        "optional pipeline parameter without default",
        lambda s, p: s["root"]["inputDefinitions"]["parameters"]["data_root"].pop("defaultValue"),
        "parameter-input",
        "task Producer",
    ),
    (
        "required input not supplied",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"].pop("splits"),
        "parameter-input",
        "task Producer",
    ),
    (
        "string constant for an integer",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"]["splits"]["runtimeValue"].update(constant="2"),
        "parameter-type",
        "task Producer",
    ),
    (
        "deprecated constantValue",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"]["splits"].update(
            runtimeValue={"constantValue": {"intValue": 2}}
        ),
        "parameter-input",
        "task Producer",
    ),
    ("cycle", lambda s, p: task_of(s, "Producer").update(dependentTasks=["Consumer"]), "dag-cycle", "task"),
    ("task name with _", lambda s, p: rename_task(s, "Consumer", "my_consumer"), "task-name", "task my_consumer"),
    ("task name with a leading digit", lambda s, p: rename_task(s, "Consumer", "2nd"), "task-name", "task 2nd"),
    (
        "pre-cache check",
        lambda s, p: executor_of(s, "Producer")["container"].update(
            lifecycle={"preCacheCheck": {"command": ["python"]}}
        ),
        "pre-cache-check",
        "task Producer",
    ),
    (
        "embedded run placeholder",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"].update(
            constant="run-{{$.pipeline_job_uuid}}"
        ),
        "placeholder",
        "task Producer",
    ),
    (
        "unknown run placeholder",
        lambda s, p: task_of(s, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"].update(
            constant="{{$.pipeline_job_id}}"
        ),
        "placeholder",
        "task Producer",
    ),
]


@pytest.mark.parametrize("change, rule, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_catches_its_violation(change, rule, where):
    assert_caught(change, rule, where)
