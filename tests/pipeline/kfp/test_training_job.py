"""The training job of a pipeline compiled with several workers (pipeline/kfp/training_job.py), held to the CRDs
the Training Operator v1.9 and Kubeflow Trainer v2 publish (tests/kubeflow/data/crds/, upstream files) and to the
one-pod Trainer step it stands for."""

import dataclasses
import json
import os

import pytest
import yaml

from tests import crd_check
from tests.pipeline.conftest import kubeflow_config
from tfxflow.components import names
from tfxflow.components.training.cluster import ClusterConfig
from tfxflow.pipeline.kfp import compiler as kf
from tfxflow.pipeline.kfp import replica, training_job
from tfxflow.pipeline.kfp.training_job import JobTemplate

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RUNTIME = os.path.join(REPO, "kubeflow", "training", "tensorflow-runtime.yaml")
INVOCATION = ["--executor_class_path", "x.Executor", "--json_serialized_invocation_args", "{{$}}"]


def _template(**overrides) -> JobTemplate:
    values = dict(
        kind="tfjob",
        workers=4,
        image="registry.example.com/ml/tfxflow:0.1.0",
        env=(
            {"name": "AWS_ENDPOINT_URL", "value": "http://seaweedfs.kubeflow:9000"},
            {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "store", "key": "accesskey"}}},
        ),
        resources={"limits": {"cpu": "8", "memory": "32G", "nvidia.com/gpu": "2"}, "requests": {"cpu": "8"}},
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
        timeout_s=3600,
        pipeline_name="Taxi_Tips.Daily",
    )
    values.update(overrides)
    return JobTemplate(**values)


def test_a_tfjob_is_a_chief_and_workers_valid_against_the_operators_crd():
    name = training_job.job_name("Taxi_Tips.Daily", "minio://mlpipeline/v2/artifacts/run/Trainer/u/model")
    job = training_job.manifest(_template(), name, INVOCATION, "ml-team")
    assert crd_check.problems(job, "TFJob") == []
    assert name.startswith("taxi-tips-daily-train-") and len(name) <= training_job.NAME_MAX
    spec = job["spec"]
    # No backoffLimit: with restartPolicy Never nothing restarts, and the operator's backoff path would word the
    # failure without the replica (common/job.go).
    assert spec["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": training_job.FINISHED_TTL_S,
        "activeDeadlineSeconds": 3600,
    }
    chief, workers = spec["tfReplicaSpecs"]["Chief"], spec["tfReplicaSpecs"]["Worker"]
    assert (chief["replicas"], workers["replicas"]) == (1, 3)
    for replica_spec in (chief, workers):
        assert replica_spec["restartPolicy"] == "Never"
        pod = replica_spec["template"]
        assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        (container,) = pod["spec"]["containers"]
        # The operator adds TF_CONFIG to the container of this name, and reads the port of this name.
        assert container["name"] == "tensorflow" and container["ports"] == [
            {"containerPort": 2222, "name": "tfjob-port"}
        ]
        assert container["command"] == ["python", "-m", "tfxflow.pipeline.kfp.entrypoint"]
        assert container["args"] == [replica.REPLICA_FLAG, *INVOCATION]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    # Each replica its own copy: YAML would otherwise write anchors and aliases.
    assert "&id" not in yaml.safe_dump(job)


def test_a_trainjob_on_the_projects_runtime_is_valid_against_trainer_v2s_crds():
    name = training_job.job_name("taxi", "seed")
    job = training_job.manifest(_template(kind="trainjob"), name, INVOCATION, "ml-team")
    assert crd_check.problems(job, "TrainJob") == []
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 4 and trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "2"
    # What a node builds its TF_CONFIG from (Trainer v2 gives TensorFlow none).
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env[replica.NODES_ENV] == "4" and env[replica.JOBSET_NAME_ENV] == name
    (patch,) = job["spec"]["runtimePatches"]
    (target,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert target["name"] == replica.NODE_JOB
    assert target["template"]["spec"]["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    with open(RUNTIME, encoding="utf-8") as f:
        runtime = yaml.safe_load(f)
    assert crd_check.problems(runtime, "ClusterTrainingRuntime") == []
    assert runtime["metadata"]["name"] == job["spec"]["runtimeRef"]["name"] == training_job.RUNTIME
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == replica.NODE_JOB  # the job the TrainJob patches and the pods' label name
    assert node["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    (container,) = node["template"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == training_job.CONTAINERS["trainjob"]


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="3"), "'3' is not of type 'integer'"),
        (lambda j: j["spec"]["runPolicy"].update(cleanPodPolicies="All"), "'cleanPodPolicies' was unexpected"),
        (lambda j: j["metadata"].update(name="Taxi_train"), "is not a DNS-1035 label"),
        (
            lambda j: j["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0].update(name="main"),
            "must have at least one container with name tensorflow",
        ),
        (lambda j: j["spec"]["tfReplicaSpecs"].update(Master=j["spec"]["tfReplicaSpecs"]["Chief"]), "more than 1"),
    ],
)
def test_the_crd_check_refuses_what_the_api_server_would(change, problem):
    job = training_job.manifest(_template(), "taxi-train-0", INVOCATION, "ml-team")
    change(job)
    assert any(problem in p for p in crd_check.problems(job, "TFJob")), crd_check.problems(job, "TFJob")


def test_a_trainjob_field_trainer_v2_2_removed_is_refused():
    job = training_job.manifest(_template(kind="trainjob"), "taxi-train-0", INVOCATION, "ml-team")
    job["spec"]["podSpecOverrides"] = []  # v2.0's field: v2.2 replaced it with runtimePatches
    assert any("'podSpecOverrides' was unexpected" in p for p in crd_check.problems(job, "TrainJob"))


def test_the_launcher_arguments_round_trip():
    template = _template()
    assert training_job.parse_launcher_args(training_job.launcher_args(template, INVOCATION)) == (template, INVOCATION)
    with pytest.raises(ValueError):
        training_job.parse_launcher_args(INVOCATION)
    with pytest.raises(ValueError):
        _template(workers=1)


@pytest.fixture(scope="module")
def two_specs(tmp_path_factory):
    """The same pipeline compiled for one Trainer pod and for a TFJob of three workers."""
    folder = tmp_path_factory.mktemp("workers")
    config = kubeflow_config("minio://mlpipeline/v2/artifacts", mlflow_secret="", tracking=False)
    one = kf.load_spec(kf.compile_pipeline(config, str(folder / "one.yaml")).path)
    training = dataclasses.replace(config.training, cluster=ClusterConfig(workers=3))
    several = kf.load_spec(
        kf.compile_pipeline(dataclasses.replace(config, training=training), str(folder / "3.yaml")).path
    )
    return config, one, several


def _trainer(spec):
    pipeline, platform = spec
    executor = pipeline["components"][pipeline["root"]["dag"]["tasks"][names.TRAINER]["componentRef"]["name"]]
    label = executor["executorLabel"]
    executors = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    return pipeline["deploymentSpec"]["executors"][label]["container"], executors.get(label, {})


def _custom_config(spec) -> dict:
    inputs = spec[0]["root"]["dag"]["tasks"][names.TRAINER]["inputs"]["parameters"]
    return json.loads(inputs["custom_config"]["runtimeValue"]["constant"])


@pytest.mark.integration
@pytest.mark.current_lane  # the lane's TFX writes the Trainer step the launcher wraps
def test_the_compiled_trainer_step_launches_the_one_pod_trainers_invocation(two_specs):
    config, one, several = two_specs
    one_pod, one_platform = _trainer(one)
    launcher, launcher_platform = _trainer(several)
    assert launcher["command"] == ["python", "-m", training_job.LAUNCHER_MODULE]
    template, invocation = training_job.parse_launcher_args(launcher["args"])
    # Every replica runs what the one-pod step ran, with the same image.
    assert invocation == one_pod["args"] and template.image == launcher["image"] == one_pod["image"]
    assert (template.kind, template.workers, template.pipeline_name) == ("tfjob", 3, config.pipeline_name)
    # The GPUs, the Trainer's CPU and memory and its placement go to every replica, not to the launcher's pod.
    assert one_pod["resources"]["accelerator"] == {"type": "nvidia.com/gpu", "count": "2"}
    assert "accelerator" not in launcher["resources"]
    assert launcher["resources"]["cpuLimit"] == float(config.step_cpu)
    assert template.resources == {
        "limits": {"cpu": "8", "memory": "32G", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "8", "memory": "32G"},
    }
    assert template.node_selector == dict(config.node_selector)
    assert list(template.tolerations) == one_platform["tolerations"]
    assert "nodeSelector" not in launcher_platform and "tolerations" not in launcher_platform
    # The store's endpoint and secret reach the replicas as the launcher's pod gets them.
    assert {"name": "AWS_ENDPOINT_URL", "value": config.endpoint} in template.env
    (secret,) = launcher_platform["secretAsEnv"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in template.env if "valueFrom" in e}
    assert refs == {p["envVar"]: {"name": secret["secretName"], "key": p["secretKey"]} for p in secret["keyToEnv"]}
    # One Trainer with several workers: the cluster section of its custom_config (the one pod's has none).
    assert _custom_config(several)["cluster"]["workers"] == 3 and "cluster" not in _custom_config(one)
