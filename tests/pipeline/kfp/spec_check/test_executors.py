"""Each executor: the container's image, placeholders, resources and accelerator, the importer, artifact types."""

import pytest

from tests.pipeline.kfp.spec_check.specs import (
    assert_caught,
    executor_of,
    make_spec,
)
from tfxflow.pipeline.kfp import spec_check as kfp_check

# (id, change, expected rule, where the problem is)
CASES = [
    (
        "latest",
        lambda s, p: executor_of(s, "Producer")["container"].update(image="r/i:latest"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "no tag",
        lambda s, p: executor_of(s, "Producer")["container"].update(image="registry:5000/ml/i"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "no image",
        lambda s, p: executor_of(s, "Producer")["container"].pop("image"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "untitled output type",
        lambda s, p: s["components"]["Producer"]["outputDefinitions"]["artifacts"]["examples"].update(
            artifactType={"instanceSchema": "type: object\n"}
        ),
        "artifact-type",
        "component Producer",
    ),
    (
        "GCP accelerator name",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"]["accelerator"].update(type="NVIDIA_TESLA_T4"),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "kubernetes.io accelerator",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"]["accelerator"].update(
            type="kubernetes.io/gpu"
        ),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "accelerator count 0",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"]["accelerator"].update(count=0),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "fractional accelerator",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"]["accelerator"].update(resourceCount="0.5"),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "bad cpu quantity",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"].update(resourceCpuLimit="eight"),
        "resources",
        "executor Producer_executor",
    ),
    (
        "request over limit",
        lambda s, p: executor_of(s, "Producer")["container"]["resources"].update(cpuRequest=16.0),
        "resources",
        "executor Producer_executor",
    ),
    (
        "run placeholder in args",
        lambda s, p: executor_of(s, "Producer")["container"]["args"].append("--run={{$.pipeline_job_uuid}}"),
        "placeholder",
        "executor Producer_executor",
    ),
    (
        "undeclared parameter placeholder",
        lambda s, p: executor_of(s, "Producer")["container"]["args"].append("{{$.inputs.parameters['nope']}}"),
        "placeholder",
        "executor Producer_executor",
    ),
    (
        "unsupplied parameter placeholder",
        lambda s, p: (
            s["components"]["Consumer"]["inputDefinitions"]["parameters"].update(
                extra={"parameterType": "STRING", "isOptional": True}
            ),
            executor_of(s, "Consumer")["container"]["args"].append("{{$.inputs.parameters['extra']}}"),
        ),
        "placeholder",
        "task Consumer",
    ),
    (
        "undeclared artifact placeholder",
        lambda s, p: executor_of(s, "Consumer")["container"]["args"].append("{{$.inputs.artifacts['model'].path}}"),
        "placeholder",
        "executor Consumer_executor",
    ),
    (
        "placeholder in env",
        lambda s, p: executor_of(s, "Consumer")["container"]["env"].append(
            {"name": "RUN", "value": "{{$.pipeline_job_uuid}}"}
        ),
        "placeholder",
        "executor Consumer_executor",
    ),
]


@pytest.mark.parametrize("change, rule, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_catches_its_violation(change, rule, where):
    assert_caught(change, rule, where)


def _with_importer(spec: dict, uri_spec: dict, title: str = "tfx.Schema") -> None:
    spec["components"]["Importer"] = {
        "executorLabel": "Importer_executor",
        "outputDefinitions": {"artifacts": {"artifact": {"artifactType": {"schemaTitle": title}}}},
    }
    spec["deploymentSpec"]["executors"]["Importer_executor"] = {
        "importer": {"artifactUri": uri_spec, "typeSchema": {"schemaTitle": title}}
    }
    spec["root"]["dag"]["tasks"]["Importer"] = {"taskInfo": {"name": "Importer"}, "componentRef": {"name": "Importer"}}


@pytest.mark.parametrize(
    "uri_spec, ok",
    [
        ({"constant": "gs://bucket/schema"}, True),
        ({"constant": "s3://bucket/schema"}, True),
        ({"constant": "file:///tmp/schema"}, False),
        ({"constant": "oci://registry/model:1"}, False),
        ({"constant": ""}, False),
        ({"constantValue": {"stringValue": "gs://bucket/schema"}}, False),
        ({"runtimeParameter": "uri"}, False),  # the task does not pass 'uri' from a pipeline parameter
    ],
)
def test_importer_uri(uri_spec, ok):
    spec = make_spec()
    _with_importer(spec, uri_spec)
    problems = kfp_check.check_spec([spec])
    assert [p.rule for p in problems] == ([] if ok else ["importer"]), problems
