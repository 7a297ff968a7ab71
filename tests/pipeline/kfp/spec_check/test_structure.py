"""The spec as a whole: its fields, version and name, the components its tasks reach and their kind of executor,
the root's parameters and the pipeline root."""

import pytest

from tests.pipeline.kfp.spec_check.specs import (
    assert_caught,
    make_spec,
    problems_after,
    rename_task,
    task_of,
)
from tfxflow.pipeline.kfp import spec_check as kfp_check

# (id, change, expected rule, where the problem is)
CASES = [
    ("schema 2.0.0", lambda s, p: s.update(schemaVersion="2.0.0"), "schema-version", "pipeline"),
    ("unknown field", lambda s, p: s.update(pipelineJob={}), "spec-format", "pipeline"),
    ("name upper case", lambda s, p: s["pipelineInfo"].update(name="TFX_Taxi"), "pipeline-name", "pipeline"),
    ("name empty", lambda s, p: s["pipelineInfo"].update(name=""), "pipeline-name", "pipeline"),
    # apiserver/common/utils.go pipelineNamePattern: no '.', no '_', at most 128 characters.
    ("name with a dot", lambda s, p: s["pipelineInfo"].update(name="tfxflow.taxi"), "pipeline-name", "pipeline"),
    ("name too long", lambda s, p: s["pipelineInfo"].update(name="t" * 129), "pipeline-name", "pipeline"),
    (
        "resolver",
        lambda s, p: s["deploymentSpec"]["executors"].update(
            Producer_executor={"resolver": {"outputArtifactQueries": {}}}
        ),
        "executor-kind",
        "executor Producer_executor",
    ),
    (
        "custom job",
        lambda s, p: s["deploymentSpec"]["executors"].update(Consumer_executor={"customJob": {}}),
        "executor-kind",
        "executor Consumer_executor",
    ),
    (
        "missing executor",
        lambda s, p: s["components"]["Consumer"].update(executorLabel="Nope_executor"),
        "executor-label",
        "component Consumer",
    ),
    (
        "missing component",
        lambda s, p: task_of(s, "Consumer")["componentRef"].update(name="Nope"),
        "component-ref",
        "task Consumer",
    ),
    ("file pipeline root", lambda s, p: s.update(defaultPipelineRoot="file:///tmp/root"), "pipeline-root", "pipeline"),
    ("local pipeline root", lambda s, p: s.update(defaultPipelineRoot="/mnt/root"), "pipeline-root", "pipeline"),
]


@pytest.mark.parametrize("change, rule, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_catches_its_violation(change, rule, where):
    assert_caught(change, rule, where)


def test_refused_executor_is_reported_once():
    """A resolver task must go; its other faults (here an Argo-invalid name) would only add noise."""

    def change(spec, platform):
        rename_task(spec, "Producer", "latest_blessed_model_resolver")
        spec["deploymentSpec"]["executors"]["Producer_executor"] = {"resolver": {"outputArtifactQueries": {}}}

    assert [p.rule for p in problems_after(change)] == ["executor-kind"]


@pytest.mark.parametrize(
    "kind, default, ok",
    [
        ("STRING", "x", True),
        ("STRING", 5, False),
        ("NUMBER_INTEGER", 6.0, True),
        ("NUMBER_INTEGER", 2.5, False),
        ("NUMBER_INTEGER", "5", False),
        ("NUMBER_DOUBLE", 1, True),
        ("BOOLEAN", True, True),
        ("BOOLEAN", 1, False),
        ("LIST", [1], True),
        ("LIST", "[1]", False),
        ("STRUCT", {"a": 1}, True),
        (None, "x", False),
    ],
)
def test_root_parameter_default_matches_its_type(kind, default, ok):
    spec = make_spec()
    spec["root"]["inputDefinitions"]["parameters"]["extra"] = {"parameterType": kind, "defaultValue": default}
    if kind is None:
        del spec["root"]["inputDefinitions"]["parameters"]["extra"]["parameterType"]
    problems = kfp_check.check_spec([spec])
    assert [p.rule for p in problems] == ([] if ok else ["root-parameter"]), problems
    assert all(p.where == "root parameter extra" for p in problems)
