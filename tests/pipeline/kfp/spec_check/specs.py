"""A minimal valid compiled spec and platform spec, and the helpers the tests of each group of rules edit them
with."""

from tfxflow.pipeline.kfp import spec_check as kfp_check

EXAMPLES = "title: tfx.Examples\ntype: object\n"
MODEL = "title: tfx.Model\ntype: object\n"
IMAGE = "registry.example.com/ml/tfxflow:0.1.0"


def container(**extra) -> dict:
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
                "Producer_executor": container(
                    resources={
                        "accelerator": {"type": "nvidia.com/gpu", "count": "1"},
                        "cpuLimit": 8.0,
                        "memoryLimit": 32.0,
                    }
                ),
                "Consumer_executor": container(env=[{"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow:5000"}]),
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


def task_of(spec: dict, name: str) -> dict:
    return spec["root"]["dag"]["tasks"][name]


def executor_of(spec: dict, name: str) -> dict:
    return spec["deploymentSpec"]["executors"][f"{name}_executor"]


def k8s_of(platform: dict, name: str) -> dict:
    return platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][f"{name}_executor"]


def rename_task(spec: dict, old: str, new: str) -> None:
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


def assert_caught(change, rule: str, where: str) -> None:
    """`change` makes exactly one problem, of `rule`, at `where`, and its message says what the backend answers
    and the fix."""
    problems = problems_after(change)
    assert [p.rule for p in problems] == [rule], problems
    assert problems[0].where.startswith(where), problems[0]
    assert len(problems[0].message) > 40
