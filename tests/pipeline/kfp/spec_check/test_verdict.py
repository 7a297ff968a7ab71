"""The check as callers use it: a valid spec and its variants admitted, a file read or refused, the report, the
input left as it was, and the project's own compile admitted."""

import copy
import subprocess

import pytest
import yaml

from tests.pipeline.kfp.spec_check.specs import executor_of, make_platform, make_spec, problems_after, task_of
from tfxflow.pipeline.kfp import spec_check as kfp_check


def test_valid_spec_is_admitted():
    assert kfp_check.check_spec([make_spec(), make_platform()]) == []
    assert kfp_check.check_spec([make_spec()]) == []


def test_valid_variants_are_admitted():
    def change(spec, platform):
        accelerator = executor_of(spec, "Producer")["container"]["resources"]["accelerator"]
        accelerator.clear()
        accelerator.update(resourceType="amd.com/gpu", resourceCount="2")  # the fields newer SDKs write
        executor_of(spec, "Producer")["container"]["image"] = "registry.example.com/ml/tfxflow@sha256:" + "a" * 64
        executor_of(spec, "Consumer")["container"]["args"] += [
            "--base",
            "{{$.inputs.parameters['count']}}",
            "--out",
            "{{$.outputs.artifacts['x'].uri}}",
        ]
        spec["components"]["Consumer"]["outputDefinitions"] = {
            "artifacts": {"x": {"artifactType": {"schemaTitle": "system.Artifact"}}}
        }
        spec["components"]["Consumer"]["inputDefinitions"]["artifacts"]["examples"]["artifactType"] = {
            "schemaTitle": "tfx.Examples"
        }  # same type as the producer's instanceSchema title
        spec["defaultPipelineRoot"] = "minio://mlpipeline/v2/artifacts"
        task_of(spec, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"]["constant"] = (
            "{{$.pipeline_task_name}}"
        )

    assert problems_after(change) == []


def test_check_file(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("---\n" + yaml.safe_dump(make_spec()) + "---\n" + yaml.safe_dump(make_platform()))
    assert kfp_check.check_file(str(good)) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"}))
    with pytest.raises(ValueError, match="bad.yaml.*not a KFP pipeline spec"):
        kfp_check.check_file(str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("root: [unclosed\n")
    with pytest.raises(ValueError, match="broken.yaml"):
        kfp_check.check_file(str(broken))


def test_format_problems():
    assert "admitted" in kfp_check.format_problems("spec.yaml", [])
    problems = problems_after(lambda s, p: s.update(schemaVersion="2.0.0"))
    report = kfp_check.format_problems("spec.yaml", problems)
    assert report.splitlines()[0] == "spec.yaml: 1 problem for the KFP backend:"
    assert "[schema-version] pipeline" in report and "2.1.0" in report


def test_check_spec_does_not_change_its_input():
    spec, platform = make_spec(), make_platform()
    before = copy.deepcopy((spec, platform))
    kfp_check.check_spec([spec, platform])
    assert (spec, platform) == before


COMPILE = [
    "kubeflow",
    "compile",
    "--image",
    "r/i:1",
    "--pipeline-root",
    "gs://b/r",
    "--data-root",
    "gs://b/d",
    "--serving-pvc",
    "tf-serving-models",
    "--mlflow-uri",
    "http://mlflow:5000",
]


CLUSTER = [
    "--gpus",
    "2",
    "--node-selector",
    "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
    "--toleration",
    "nvidia.com/gpu:NoSchedule",
    "--toleration",
    "dedicated=ml:NoExecute",
    "--mlflow-secret",
    "mlflow-tracking",
    "--mlflow-secret-key",
    "MLFLOW_TRACKING_URI",
    "--mlflow-secret-key",
    "MLFLOW_TRACKING_TOKEN",
]


@pytest.mark.e2e
@pytest.mark.parametrize("extra", [[], CLUSTER], ids=["defaults", "gpu-node-secret"])
def test_real_compile_is_admitted(tmp_path, extra):
    """The project's own compile passes every rule of the offline check."""
    from tests import helpers  # imports TensorFlow: only for this slow test

    output = tmp_path / "spec.yaml"
    done = subprocess.run(
        [helpers.TFXFLOW, *COMPILE, *extra, "--output", str(output)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    problems = kfp_check.check_file(str(output))
    assert problems == [], kfp_check.format_problems(str(output), problems)
