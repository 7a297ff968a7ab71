"""The offline KFP admission check: each rule catches its violation; a valid spec and the real compile pass."""

import copy
import subprocess

import pytest
import yaml

from tfxflow.pipeline.kfp import spec_check as kfp_check

EXAMPLES = "title: tfx.Examples\ntype: object\n"
MODEL = "title: tfx.Model\ntype: object\n"
IMAGE = "registry.example.com/ml/tfxflow:0.1.0"


def _container(**extra) -> dict:
    return {
        "container": {
            "image": IMAGE,
            "command": ["python", "-m", "tfxflow.pipeline.kfp.entrypoint"],
            "args": ["{{$}}"],
            **extra,
        }
    }


def make_spec() -> dict:
    """A minimal valid two-task spec: Producer (GPU, reads a pipeline parameter) -> Consumer."""
    return {
        "pipelineInfo": {"name": "tfxflow-test"},
        "schemaVersion": "2.1.0",
        "sdkVersion": "tfx-1.16.0",
        "defaultPipelineRoot": "gs://bucket/root",
        "components": {
            "Producer": {
                "executorLabel": "Producer_executor",
                "inputDefinitions": {
                    "parameters": {
                        "input_base": {"parameterType": "STRING"},
                        "run_key": {"parameterType": "STRING"},
                        "splits": {"parameterType": "NUMBER_INTEGER"},
                    }
                },
                "outputDefinitions": {
                    "artifacts": {"examples": {"artifactType": {"instanceSchema": EXAMPLES}}},
                    "parameters": {"count": {"parameterType": "NUMBER_INTEGER"}},
                },
            },
            "Consumer": {
                "executorLabel": "Consumer_executor",
                "inputDefinitions": {
                    "artifacts": {"examples": {"artifactType": {"instanceSchema": EXAMPLES}}},
                    "parameters": {"count": {"parameterType": "NUMBER_DOUBLE"}},
                },
            },
        },
        "deploymentSpec": {
            "executors": {
                "Producer_executor": _container(
                    resources={
                        "accelerator": {"type": "nvidia.com/gpu", "count": "1"},
                        "cpuLimit": 8.0,
                        "memoryLimit": 32.0,
                    }
                ),
                "Consumer_executor": _container(env=[{"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow:5000"}]),
            }
        },
        "root": {
            "inputDefinitions": {
                "parameters": {
                    "data_root": {"parameterType": "STRING", "defaultValue": "gs://bucket/data", "isOptional": True}
                }
            },
            "dag": {
                "tasks": {
                    "Producer": {
                        "taskInfo": {"name": "Producer"},
                        "componentRef": {"name": "Producer"},
                        "cachingOptions": {"enableCache": True},
                        "inputs": {
                            "parameters": {
                                "input_base": {"componentInputParameter": "data_root"},
                                "run_key": {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}},
                                "splits": {"runtimeValue": {"constant": 2.0}},
                            }
                        },
                    },
                    "Consumer": {
                        "taskInfo": {"name": "Consumer"},
                        "componentRef": {"name": "Consumer"},
                        "dependentTasks": ["Producer"],
                        "inputs": {
                            "artifacts": {
                                "examples": {
                                    "taskOutputArtifact": {"producerTask": "Producer", "outputArtifactKey": "examples"}
                                }
                            },
                            "parameters": {
                                "count": {
                                    "taskOutputParameter": {"producerTask": "Producer", "outputParameterKey": "count"}
                                }
                            },
                        },
                    },
                }
            },
        },
    }


def make_platform() -> dict:
    """The Kubernetes platform spec of `make_spec`: a GPU node for Producer, a secret and a PVC for Consumer."""
    return {
        "platforms": {
            "kubernetes": {
                "deploymentSpec": {
                    "executors": {
                        "Producer_executor": {
                            "nodeSelector": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
                            "tolerations": [
                                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
                            ],
                        },
                        "Consumer_executor": {
                            "secretAsEnv": [
                                {
                                    "secretName": "mlflow-tracking",
                                    "keyToEnv": [{"secretKey": "MLFLOW_TRACKING_URI", "envVar": "MLFLOW_TRACKING_URI"}],
                                }
                            ],
                            "pvcMount": [{"constant": "tf-serving-models", "mountPath": "/serving"}],
                        },
                    }
                }
            }
        }
    }


def problems_after(change) -> list:
    """The problems of the valid spec and platform spec after `change(spec, platform)` edits them."""
    spec, platform = make_spec(), make_platform()
    change(spec, platform)
    return kfp_check.check_spec([spec, platform])


def _task(spec: dict, name: str) -> dict:
    return spec["root"]["dag"]["tasks"][name]


def _executor(spec: dict, name: str) -> dict:
    return spec["deploymentSpec"]["executors"][f"{name}_executor"]


def _k8s(platform: dict, name: str) -> dict:
    return platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][f"{name}_executor"]


def _rename_task(spec: dict, old: str, new: str) -> None:
    tasks = spec["root"]["dag"]["tasks"]
    tasks[new] = tasks.pop(old)
    for task in tasks.values():
        task["dependentTasks"] = [new if d == old else d for d in task.get("dependentTasks", [])]
        for source in [
            *task.get("inputs", {}).get("artifacts", {}).values(),
            *task.get("inputs", {}).get("parameters", {}).values(),
        ]:
            for kind in ("taskOutputArtifact", "taskOutputParameter"):
                if source.get(kind, {}).get("producerTask") == old:
                    source[kind]["producerTask"] = new


def test_valid_spec_is_admitted():
    assert kfp_check.check_spec([make_spec(), make_platform()]) == []
    assert kfp_check.check_spec([make_spec()]) == []


def test_valid_variants_are_admitted():
    def change(spec, platform):
        accelerator = _executor(spec, "Producer")["container"]["resources"]["accelerator"]
        accelerator.clear()
        accelerator.update(resourceType="amd.com/gpu", resourceCount="2")  # the fields newer SDKs write
        _executor(spec, "Producer")["container"]["image"] = "registry.example.com/ml/tfxflow@sha256:" + "a" * 64
        _executor(spec, "Consumer")["container"]["args"] += [
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
        _task(spec, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"]["constant"] = (
            "{{$.pipeline_task_name}}"
        )

    assert problems_after(change) == []


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
        "root with runAsNonRoot",
        lambda s, p: _k8s(p, "Consumer").update(securityContext={"runAsUser": 0, "runAsNonRoot": True}),
        "security-context",
        "platform executor Consumer_executor",
    ),
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
        lambda s, p: _task(s, "Consumer")["componentRef"].update(name="Nope"),
        "component-ref",
        "task Consumer",
    ),
    (
        "latest",
        lambda s, p: _executor(s, "Producer")["container"].update(image="r/i:latest"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "no tag",
        lambda s, p: _executor(s, "Producer")["container"].update(image="registry:5000/ml/i"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "no image",
        lambda s, p: _executor(s, "Producer")["container"].pop("image"),
        "image-pinned",
        "executor Producer_executor",
    ),
    (
        "unknown dependency",
        lambda s, p: _task(s, "Consumer").update(dependentTasks=["Producer", "Nope"]),
        "dag-edge",
        "task Consumer",
    ),
    (
        "unknown producer",
        lambda s, p: _task(s, "Consumer")["inputs"]["artifacts"]["examples"]["taskOutputArtifact"].update(
            producerTask="Nope"
        ),
        "dag-edge",
        "task Consumer",
    ),
    (
        "unknown output key",
        lambda s, p: _task(s, "Consumer")["inputs"]["artifacts"]["examples"]["taskOutputArtifact"].update(
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
        lambda s, p: _task(s, "Consumer")["inputs"].pop("artifacts"),
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
        "untitled output type",
        lambda s, p: s["components"]["Producer"]["outputDefinitions"]["artifacts"]["examples"].update(
            artifactType={"instanceSchema": "type: object\n"}
        ),
        "artifact-type",
        "component Producer",
    ),
    (
        "unknown output parameter",
        lambda s, p: _task(s, "Consumer")["inputs"]["parameters"]["count"]["taskOutputParameter"].update(
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
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"]["input_base"].update(componentInputParameter="nope"),
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
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"].pop("splits"),
        "parameter-input",
        "task Producer",
    ),
    (
        "string constant for an integer",
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"]["splits"]["runtimeValue"].update(constant="2"),
        "parameter-type",
        "task Producer",
    ),
    (
        "deprecated constantValue",
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"]["splits"].update(
            runtimeValue={"constantValue": {"intValue": 2}}
        ),
        "parameter-input",
        "task Producer",
    ),
    ("cycle", lambda s, p: _task(s, "Producer").update(dependentTasks=["Consumer"]), "dag-cycle", "task"),
    ("task name with _", lambda s, p: _rename_task(s, "Consumer", "my_consumer"), "task-name", "task my_consumer"),
    ("task name with a leading digit", lambda s, p: _rename_task(s, "Consumer", "2nd"), "task-name", "task 2nd"),
    (
        "pre-cache check",
        lambda s, p: _executor(s, "Producer")["container"].update(lifecycle={"preCacheCheck": {"command": ["python"]}}),
        "pre-cache-check",
        "task Producer",
    ),
    ("file pipeline root", lambda s, p: s.update(defaultPipelineRoot="file:///tmp/root"), "pipeline-root", "pipeline"),
    ("local pipeline root", lambda s, p: s.update(defaultPipelineRoot="/mnt/root"), "pipeline-root", "pipeline"),
    (
        "GCP accelerator name",
        lambda s, p: _executor(s, "Producer")["container"]["resources"]["accelerator"].update(type="NVIDIA_TESLA_T4"),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "kubernetes.io accelerator",
        lambda s, p: _executor(s, "Producer")["container"]["resources"]["accelerator"].update(type="kubernetes.io/gpu"),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "accelerator count 0",
        lambda s, p: _executor(s, "Producer")["container"]["resources"]["accelerator"].update(count=0),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "fractional accelerator",
        lambda s, p: _executor(s, "Producer")["container"]["resources"]["accelerator"].update(resourceCount="0.5"),
        "accelerator",
        "executor Producer_executor",
    ),
    (
        "bad cpu quantity",
        lambda s, p: _executor(s, "Producer")["container"]["resources"].update(resourceCpuLimit="eight"),
        "resources",
        "executor Producer_executor",
    ),
    (
        "request over limit",
        lambda s, p: _executor(s, "Producer")["container"]["resources"].update(cpuRequest=16.0),
        "resources",
        "executor Producer_executor",
    ),
    (
        "run placeholder in args",
        lambda s, p: _executor(s, "Producer")["container"]["args"].append("--run={{$.pipeline_job_uuid}}"),
        "placeholder",
        "executor Producer_executor",
    ),
    (
        "undeclared parameter placeholder",
        lambda s, p: _executor(s, "Producer")["container"]["args"].append("{{$.inputs.parameters['nope']}}"),
        "placeholder",
        "executor Producer_executor",
    ),
    (
        "unsupplied parameter placeholder",
        lambda s, p: (
            s["components"]["Consumer"]["inputDefinitions"]["parameters"].update(
                extra={"parameterType": "STRING", "isOptional": True}
            ),
            _executor(s, "Consumer")["container"]["args"].append("{{$.inputs.parameters['extra']}}"),
        ),
        "placeholder",
        "task Consumer",
    ),
    (
        "undeclared artifact placeholder",
        lambda s, p: _executor(s, "Consumer")["container"]["args"].append("{{$.inputs.artifacts['model'].path}}"),
        "placeholder",
        "executor Consumer_executor",
    ),
    (
        "placeholder in env",
        lambda s, p: _executor(s, "Consumer")["container"]["env"].append(
            {"name": "RUN", "value": "{{$.pipeline_job_uuid}}"}
        ),
        "placeholder",
        "executor Consumer_executor",
    ),
    (
        "embedded run placeholder",
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"].update(
            constant="run-{{$.pipeline_job_uuid}}"
        ),
        "placeholder",
        "task Producer",
    ),
    (
        "unknown run placeholder",
        lambda s, p: _task(s, "Producer")["inputs"]["parameters"]["run_key"]["runtimeValue"].update(
            constant="{{$.pipeline_job_id}}"
        ),
        "placeholder",
        "task Producer",
    ),
    (
        "platform label",
        lambda s, p: p["platforms"]["kubernetes"]["deploymentSpec"]["executors"].update(Nope_executor={}),
        "platform-spec",
        "platform executor Nope_executor",
    ),
    (
        "platform field",
        lambda s, p: _k8s(p, "Consumer").update(secretsAsEnv=[]),
        "platform-spec",
        "platform executor Consumer_executor",
    ),
    (
        "platform document",
        lambda s, p: p["platforms"]["kubernetes"].update(executors={}),
        "platform-spec",
        "platform spec",
    ),
    (
        "secret without name",
        lambda s, p: _k8s(p, "Consumer")["secretAsEnv"][0].pop("secretName"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "secret without key",
        lambda s, p: _k8s(p, "Consumer")["secretAsEnv"][0]["keyToEnv"][0].pop("secretKey"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "bad env name",
        lambda s, p: _k8s(p, "Consumer")["secretAsEnv"][0]["keyToEnv"][0].update(envVar="1 bad"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "pvc without mount path",
        lambda s, p: _k8s(p, "Consumer")["pvcMount"][0].pop("mountPath"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc without claim",
        lambda s, p: _k8s(p, "Consumer")["pvcMount"][0].pop("constant"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc name upper case",
        lambda s, p: _k8s(p, "Consumer")["pvcMount"][0].update(constant="Serving_Models"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc on a KFP mount",
        lambda s, p: _k8s(p, "Consumer")["pvcMount"][0].update(mountPath="/gcs"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "node selector key",
        lambda s, p: _k8s(p, "Producer")["nodeSelector"]["labels"].update({"bad key": "x"}),
        "node-selector",
        "platform executor Producer_executor",
    ),
    (
        "toleration Exists with value",
        lambda s, p: _k8s(p, "Producer")["tolerations"][0].update(value="x"),
        "toleration",
        "platform executor Producer_executor",
    ),
    (
        "toleration effect",
        lambda s, p: _k8s(p, "Producer")["tolerations"][1].update(effect="NoRun"),
        "toleration",
        "platform executor Producer_executor",
    ),
]


@pytest.mark.parametrize("change, rule, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_catches_its_violation(change, rule, where):
    problems = problems_after(change)
    assert [p.rule for p in problems] == [rule], problems
    assert problems[0].where.startswith(where), problems[0]
    assert len(problems[0].message) > 40  # says what the backend answers and the fix


def test_refused_executor_is_reported_once():
    """A resolver task must go; its other faults (here an Argo-invalid name) would only add noise."""

    def change(spec, platform):
        _rename_task(spec, "Producer", "latest_blessed_model_resolver")
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
