"""The Kubeflow compile: the spec parses with KFP's protos and holds what a cluster run needs."""

import dataclasses
import importlib.util
import json
import os

import pytest
import yaml
from google.protobuf import json_format
from kfp.kubernetes import kubernetes_executor_config_pb2
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.proto import trainer_pb2
from tfx.utils import import_utils

from tests.pipeline.conftest import IMAGE, kubeflow_config
from tfxflow.components import lane
from tfxflow.pipeline import beam_runners
from tfxflow.pipeline.beam_runners import BeamRunner
from tfxflow.pipeline.config import ConfigError, TrainingConfig
from tfxflow.pipeline.kfp import compiler as kf

# Each step after the ones it must follow; the spec's dependencies must imply this order.
ORDER = [
    "MlflowStart",
    "CsvExampleGen",
    "StatisticsGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "ServingCheck",
    "MlflowRecord",
    "Pusher",
    "MlflowFinish",
]


def _ancestors(tasks: dict, name: str) -> set:
    seen, todo = set(), list(tasks[name].get("dependentTasks", []))
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo += tasks[parent].get("dependentTasks", [])
    return seen


def _executor(spec: dict, step: str) -> dict:
    return spec["deploymentSpec"]["executors"][spec["components"][step]["executorLabel"]]


def test_spec_parses_with_kfp_protos(compiled):
    result, spec, platform, _ = compiled
    parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())  # strict: unknown fields fail
    assert parsed.pipeline_info.name == "tfxflow-taxi"
    assert parsed.schema_version == "2.1.0"
    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
    with open(result.path, encoding="utf-8") as f:
        assert len([d for d in yaml.safe_load_all(f) if d]) == 2  # the spec, then the platform spec


def test_dag_order(compiled):
    _, spec, _, _ = compiled
    tasks = spec["root"]["dag"]["tasks"]
    assert set(ORDER) <= set(tasks)
    for before, after in zip(ORDER, ORDER[1:], strict=False):
        assert before in _ancestors(tasks, after), f"{after} does not wait for {before}"
    assert "EmbeddedSchema" in _ancestors(tasks, "ExampleValidator")
    # The baselines come from a step that reads the serving directory: open-source KFP runs no resolver.
    assert "ServedBaseline" in _ancestors(tasks, "Evaluator") and "ServedBaseline" in _ancestors(tasks, "DataGate")
    assert tasks["Evaluator"]["inputs"]["artifacts"]["baseline_model"]["taskOutputArtifact"] == {
        "producerTask": "ServedBaseline",
        "outputArtifactKey": "model",
    }
    assert tasks["DataGate"]["inputs"]["artifacts"]["baseline_statistics"]["taskOutputArtifact"] == {
        "producerTask": "ServedBaseline",
        "outputArtifactKey": "statistics",
    }
    assert tasks["Pusher"]["inputs"]["artifacts"]["statistics"]["taskOutputArtifact"]["producerTask"] == "StatisticsGen"
    assert not any("resolver" in name for name in tasks)


def test_every_step_runs_the_project_image_through_its_entrypoint(compiled):
    _, spec, _, _ = compiled
    containers = {label: e["container"] for label, e in spec["deploymentSpec"]["executors"].items() if "container" in e}
    assert len(containers) == len(spec["deploymentSpec"]["executors"]) == 14
    for label, container in containers.items():
        assert container["image"] == IMAGE, label
        assert container["command"] == list(kf.ENTRYPOINT), label
        args = container["args"]
        assert args[:2] == ["--tfxflow_lane", f"{lane.name()}:{lane.tfx_version()}"], label
        assert args[2] == "--tfxflow_artifact_types" and json.loads(args[3]), label
        assert "--direct_running_mode=multi_processing" in args and "--direct_num_workers=0" in args


def test_entry_points_and_executor_classes_exist(compiled):
    _, spec, _, _ = compiled
    assert importlib.util.find_spec(kf.ENTRYPOINT[2]) is not None
    assert importlib.util.find_spec("tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor") is not None
    for label, executor in spec["deploymentSpec"]["executors"].items():
        container = executor["container"]
        args = container["args"]
        executor_class = import_utils.import_class_by_path(args[args.index("--executor_class_path") + 1])
        assert hasattr(executor_class, "Do"), label
        # TFX's ExampleGen driver hook is Vertex AI's; open-source KFP ignores it.
        assert "lifecycle" not in container, label


def test_trainer_requests_gpus_and_lands_on_gpu_nodes(compiled):
    _, spec, platform, _ = compiled
    resources = _executor(spec, "Trainer")["container"]["resources"]
    assert resources["accelerator"] == {"type": "nvidia.com/gpu", "count": "2"}
    # The Trainer stops, saying what to check, when its pod sees fewer GPUs than it asked for.
    custom = json.loads(
        spec["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"]
    )
    assert custom["hardware"]["require_gpus"] == 2
    assert resources["cpuLimit"] == resources["cpuRequest"] == 8.0
    assert resources["memoryLimit"] == resources["memoryRequest"] == 32.0
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    trainer = executors[spec["components"]["Trainer"]["executorLabel"]]
    assert trainer["nodeSelector"] == {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    assert trainer["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
    ]
    for step in ("Transform", "Evaluator", "CsvExampleGen"):
        assert _executor(spec, step)["container"]["resources"] == {
            "cpuRequest": 2.0,
            "cpuLimit": 2.0,
            "memoryRequest": 8.0,
            "memoryLimit": 8.0,
        }
        assert (
            spec["components"][step]["executorLabel"] not in executors
            or "nodeSelector" not in executors[spec["components"][step]["executorLabel"]]
        )


def test_platform_config_matches_kfp_kubernetes_proto(compiled):
    _, _, platform, _ = compiled
    for config in platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values():
        # kfp-kubernetes 1.0 predates the tolerations field; everything else must parse strictly.
        without_tolerations = {k: v for k, v in config.items() if k != "tolerations"}
        json_format.ParseDict(without_tolerations, kubernetes_executor_config_pb2.KubernetesExecutorConfig())


def test_runtime_parameters_with_defaults(compiled):
    result, spec, _, _ = compiled
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert set(parameters) == {"data_root", "train_args", "serving_data_root", "allowed_anomaly_types"}
    assert parameters["data_root"] == {
        "parameterType": "STRING",
        "defaultValue": "gs://ml-data/taxi",
        "isOptional": True,
    }
    assert parameters["allowed_anomaly_types"]["defaultValue"] == "FEATURE_TYPE_LOW_NUMBER_VALUES"
    train_args = json_format.Parse(parameters["train_args"]["defaultValue"], trainer_pb2.TrainArgs())
    assert train_args.num_steps == 500
    assert result.parameters["serving_data_root"] == ""
    tasks = spec["root"]["dag"]["tasks"]
    assert tasks["CsvExampleGen"]["inputs"]["parameters"]["input_base"] == {"componentInputParameter": "data_root"}
    assert tasks["Trainer"]["inputs"]["parameters"]["train_args"] == {"componentInputParameter": "train_args"}
    assert tasks["DataGate"]["inputs"]["parameters"]["serving_data_root"] == {
        "componentInputParameter": "serving_data_root"
    }


def test_pipeline_root_schema_and_serving(compiled):
    _, spec, platform, config = compiled
    assert spec["defaultPipelineRoot"] == config.pipeline_root
    tasks = spec["root"]["dag"]["tasks"]
    # The schema travels in the spec: compiling reads no store.
    schema_param = tasks["EmbeddedSchema"]["inputs"]["parameters"]["schema_text"]
    with open(config.schema_path, encoding="utf-8") as source:
        assert schema_param["runtimeValue"]["constant"] == source.read()
    pusher = tasks["Pusher"]["inputs"]["parameters"]["push_destination"]
    assert "/serving/models/taxi" in pusher["runtimeValue"]["constant"]
    assert (
        tasks["ServedBaseline"]["inputs"]["parameters"]["model_base"]["runtimeValue"]["constant"]
        == "/serving/models/taxi"
    )
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in ("Pusher", "ServedBaseline"):
        assert executors[spec["components"][step]["executorLabel"]]["pvcMount"] == [
            {"constant": "tf-serving-models", "mountPath": "/serving"}
        ]


def test_object_store_endpoint_and_credentials_from_the_install(compiled):
    """minio:// locations: every step gets the install's MinIO endpoint, and its credentials from the secret
    KFP's own launcher reads; the spec holds no credential."""
    _, spec, platform, _ = compiled
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step, component in spec["components"].items():
        label = component["executorLabel"]
        container = spec["deploymentSpec"]["executors"][label]["container"]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        if step in kf.TRACKING_STEPS:  # MLflow's own S3 client must not be pointed at MinIO
            assert "AWS_ENDPOINT_URL" not in env, step
            continue
        # KFP 2.16+ (the default 2.17): SeaweedFS, the launcher's DefaultEndpointInMultiUserMode.
        assert env["AWS_ENDPOINT_URL"] == "http://seaweedfs.kubeflow:9000", step
        assert {
            "secretName": "mlpipeline-minio-artifact",
            "keyToEnv": [
                {"secretKey": "accesskey", "envVar": "AWS_ACCESS_KEY_ID"},
                {"secretKey": "secretkey", "envVar": "AWS_SECRET_ACCESS_KEY"},
            ],
        } in executors[label]["secretAsEnv"], step


def test_caching_and_tracking_environment(compiled):
    _, spec, platform, _ = compiled
    tasks = spec["root"]["dag"]["tasks"]
    for name, task in tasks.items():
        if "cachingOptions" in task:
            assert task["cachingOptions"]["enableCache"] is (
                name not in ("MlflowStart", "CsvExampleGen", "ServedBaseline")
            ), name
    assert tasks["MlflowStart"]["inputs"]["parameters"]["run_key"]["runtimeValue"]["constant"] == kf.RUN_KEY
    assert tasks["MlflowStart"]["inputs"]["parameters"]["tracking_uri"]["runtimeValue"]["constant"] == ""
    params = json.loads(tasks["MlflowStart"]["inputs"]["parameters"]["params_json"]["runtimeValue"]["constant"])
    assert params["pipeline"]["orchestrator"] == "kubeflow" and params["train_steps"] == 500
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in spec["components"]:
        label = spec["components"][step]["executorLabel"]
        secrets = [s["secretName"] for s in executors.get(label, {}).get("secretAsEnv", [])]
        tracking = {
            "secretName": "mlflow-tracking",
            "keyToEnv": [
                {"secretKey": "MLFLOW_TRACKING_URI", "envVar": "MLFLOW_TRACKING_URI"},
                {"secretKey": "MLFLOW_TRACKING_TOKEN", "envVar": "MLFLOW_TRACKING_TOKEN"},
            ],
        }
        if step in kf.TRACKING_STEPS:
            assert tracking in executors[label]["secretAsEnv"], step
        else:
            assert "mlflow-tracking" not in secrets, step


def test_plain_tracking_uri_and_no_platform_spec(tmp_path):
    config = kubeflow_config(
        "gs://ml-pipelines/root",
        gpus=0,
        node_selector=(),
        tolerations=(),
        mlflow_secret="",
        mlflow_uri="http://mlflow.mlflow.svc:5000",
        serving_pvc="",
        serving_dir="gs://models/serving",
        trainer_cpu="",
        trainer_memory="",
        step_cpu="",
        step_memory="",
    )
    result = kf.compile_pipeline(config, str(tmp_path / "spec.yaml"))
    spec, platform = kf.load_spec(result.path)
    assert platform == {}  # gs:// only: the pod's own identity (Workload Identity), no secret, no claim
    # The default claim is not mounted when the serving directory is in a bucket.
    with_claim = kf.compile_pipeline(
        dataclasses.replace(config, serving_pvc="tf-serving-models"), str(tmp_path / "claim.yaml")
    )
    assert kf.load_spec(with_claim.path)[1] == {}
    assert "resources" not in _executor(spec, "Trainer")["container"]
    for step in spec["components"]:
        executor = spec["deploymentSpec"]["executors"][spec["components"][step]["executorLabel"]]
        env = executor.get("container", {}).get("env")
        assert env == (
            [{"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow.mlflow.svc:5000"}]
            if step in kf.TRACKING_STEPS
            else None
        ), step


def test_basic_auth_credentials_come_from_the_secret_only(tmp_path):
    keys = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
    config = kubeflow_config("s3://ml/root", mlflow_uri="http://mlflow.mlflow.svc:5000", mlflow_secret_keys=keys)
    spec, platform = kf.load_spec(kf.compile_pipeline(config, str(tmp_path / "spec.yaml")).path)
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in kf.TRACKING_STEPS:
        label = spec["components"][step]["executorLabel"]
        assert {"secretName": "mlflow-tracking", "keyToEnv": [{"secretKey": k, "envVar": k} for k in keys]} in (
            executors[label]["secretAsEnv"]
        ), step
        env = spec["deploymentSpec"]["executors"][label]["container"]["env"]
        assert {"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow.mlflow.svc:5000"} in env, step


def test_credentials_in_the_uri_are_refused_unshown():
    with pytest.raises(ConfigError) as refused:
        kf.check_kubeflow_config(kubeflow_config("s3://ml/root", mlflow_uri="http://alice:hunter2@mlflow:5000"))
    assert "hunter2" not in str(refused.value) and "alice" not in str(refused.value)
    assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in str(refused.value)


def test_untracked_compile_has_no_tracking_steps(tmp_path):
    config = kubeflow_config("s3://ml/root", tracking=False, mlflow_secret="")
    spec, _ = kf.load_spec(kf.compile_pipeline(config, str(tmp_path / "spec.yaml")).path)
    assert not set(kf.TRACKING_STEPS) & set(spec["root"]["dag"]["tasks"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"image": "tfxflow:latest"}, "pinned tag"),
        ({"image": "tfxflow"}, "pinned tag"),
        ({"pipeline_root": "bucket/root"}, "--pipeline-root"),
        ({"pipeline_root": "/mnt/pipelines"}, "launcher stores artifacts only under"),
        ({"mlflow_secret": "", "mlflow_uri": ""}, "--mlflow-uri or --mlflow-secret"),
        ({"serving_dir": "/models"}, "not on the volume"),
        ({"serving_dir": "/serving/models", "serving_pvc": ""}, "--serving-pvc"),
        ({"data_root": "/data/taxi"}, "--data-pvc"),
        ({"data_root": "/elsewhere/taxi", "data_pvc": "taxi-data"}, "not on the volume --data-pvc mounts at /data"),
        ({"data_root": "hdfs://nn/taxi"}, "gs://, s3:// and minio://"),
        ({"mlflow_secret": "Not_A_Name"}, "not a valid Kubernetes object name"),
        ({"mlflow_uri": "http://alice:hunter2@mlflow:5000"}, r"http://\*\*\*@mlflow:5000 carries credentials"),
        ({"mlflow_secret_keys": ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_PASWORD")}, "MLFLOW_TRACKING_PASWORD: not a"),
        ({"mlflow_secret_keys": ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME")}, "needs both"),
        ({"mlflow_secret_keys": ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI")}, "given twice"),
        ({"mlflow_secret_keys": ("MLFLOW_TRACKING_TOKEN",)}, "get no \\$MLFLOW_TRACKING_URI"),
        ({"step_memory": "lots"}, "--step-memory"),
        ({"step_cpu": "two"}, "--step-cpu"),
        (
            {"training": TrainingConfig(init_checkpoint="/data/models/minilm"), "data_pvc": "taxi-data"},
            "--init-checkpoint /data/models/minilm: the Trainer and Transform pods read it, and the compile checks "
            "it: give its gs://, s3:// or minio:// URI",
        ),
    ],
)
def test_config_errors_name_the_flag(overrides, message):
    with pytest.raises(ConfigError, match=message):
        kf.check_kubeflow_config(kubeflow_config("minio://mlpipeline/v2/artifacts", **overrides))


def test_toleration_syntax():
    assert kf.Toleration.parse("gpu=true:NoSchedule").to_dict() == {
        "key": "gpu",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
    assert kf.Toleration.parse("nvidia.com/gpu").to_dict() == {"key": "nvidia.com/gpu", "operator": "Exists"}
    with pytest.raises(ConfigError, match="effect one of"):
        kf.Toleration.parse("gpu:Sometimes")


def test_compile_refuses_what_the_backend_would_and_writes_nothing(tmp_path):
    """A Vertex-style accelerator name compiles with TFX, but KFP's driver makes it the Kubernetes resource name
    of the Trainer's limit, which the API server refuses: the compile stops with the backend's rule."""
    config = kubeflow_config("minio://mlpipeline/v2/artifacts", gpu_resource="NVIDIA_TESLA_T4")
    output = tmp_path / "spec.yaml"
    with pytest.raises(ConfigError) as err:
        kf.compile_pipeline(config, str(output))
    message = str(err.value)
    assert "NVIDIA_TESLA_T4" in message and "accelerator" in message and "driver.go" in message
    assert not output.exists()


def _beam_args_of_every_step(spec: dict) -> dict:
    """{step: the Beam options among its container arguments}."""
    out = {}
    for step, component in spec["components"].items():
        args = spec["deploymentSpec"]["executors"][component["executorLabel"]]["container"]["args"]
        out[step] = [a for a in args if a.startswith("--") and "=" in a]
    return out


def test_flink_and_dataflow_arguments_reach_every_step(tmp_path):
    """The compiled steps carry the preset's exact options (TFX hands the same list to every Beam executor);
    the workers run the steps' image unless another is named."""
    flink = kubeflow_config(
        "gs://ml-artifacts/root",
        beam=BeamRunner(runner="flink", flink_master="flink-jobmanager.flink:8081", parallelism=16, image=IMAGE),
    )
    spec, _ = kf.load_spec(kf.compile_pipeline(flink, str(tmp_path / "flink.yaml")).path)
    expected = [
        "--runner=FlinkRunner",
        "--flink_master=flink-jobmanager.flink:8081",
        "--parallelism=16",
        "--environment_type=DOCKER",
        f"--environment_config={IMAGE}",
        f"--sdk_container_image={IMAGE}",
    ]
    steps = _beam_args_of_every_step(spec)
    assert set(steps) >= {"CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"}
    for step, args in steps.items():
        assert args == expected, step
    dataflow = kubeflow_config(
        "gs://ml-artifacts/root",
        beam=BeamRunner(
            runner="dataflow",
            project="ml-prod-4711",
            region="europe-west4",
            temp_location="gs://ml-tmp/dataflow",
            machine_type="n2-highmem-8",
            image=IMAGE,
        ),
        tracking=False,
        mlflow_secret="",
    )
    spec, _ = kf.load_spec(kf.compile_pipeline(dataflow, str(tmp_path / "dataflow.yaml")).path)
    for step, args in _beam_args_of_every_step(spec).items():
        assert args == [
            "--runner=DataflowRunner",
            "--project=ml-prod-4711",
            "--region=europe-west4",
            "--temp_location=gs://ml-tmp/dataflow",
            "--machine_type=n2-highmem-8",
            f"--sdk_container_image={IMAGE}",
        ], step


def test_default_stays_the_direct_runner_sized_to_the_pod():
    config = kf.check_kubeflow_config(kubeflow_config("minio://mlpipeline/v2/artifacts"))
    named = [beam_runners.IN_PROCESS_WORKERS]  # the workers are the step's process: TFX builds no sdist
    named += [f"--runner={beam_runners.FN_API_RUNNER}"] if lane.direct_runner_tries_prism() else []
    assert config.beam is None and config.beam_pipeline_args == named + [
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=0",
    ]
    # A direct BeamRunner is folded into beam_mode and beam_workers (one source for each setting).
    folded = kf.check_kubeflow_config(
        kubeflow_config(
            "minio://mlpipeline/v2/artifacts", beam=BeamRunner(direct_mode="multi_threading", direct_workers=3)
        )
    )
    assert (folded.beam, folded.beam_mode, folded.beam_workers) == (None, "multi_threading", 3)
    # Workers in the step's own process read the launcher's local copies: any pipeline root will do.
    loopback = kf.check_kubeflow_config(
        kubeflow_config("minio://mlpipeline/v2/artifacts", beam=BeamRunner(runner="portable"))
    )
    assert loopback.beam_pipeline_args == [
        beam_runners.IN_PROCESS_WORKERS,
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=LOOPBACK",
    ]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"pipeline_root": "minio://mlpipeline/v2/artifacts"},
            "--beam-runner flink runs the Beam workers outside the step's pod, .* --pipeline-root .* gs:// URI, got "
            "'minio://mlpipeline/v2/artifacts'",
        ),
        ({"data_root": "/data/taxi", "data_pvc": "taxi-data"}, "--data-root .* gs:// URI, got '/data/taxi'"),
        ({"beam": BeamRunner(runner="flink", image=IMAGE)}, "--beam-runner flink needs --flink-master host:port"),
    ],
)
def test_remote_workers_need_gcs_locations(overrides, message):
    values = {
        "beam": BeamRunner(runner="flink", flink_master="jm:8081", image=IMAGE),
        "pipeline_root": "gs://ml-artifacts/root",
        **overrides,
    }
    with pytest.raises(ConfigError, match=message):
        kf.check_kubeflow_config(kubeflow_config(values.pop("pipeline_root"), **values))


# The launcher's own endpoint for minio:// by release, read from kubeflow/pipelines' tags: `minio-service.kubeflow:9000`
# (objectstore defaultMinioEndpointInMultiUserMode, 2.0.0 to 2.14.x; config/env.go getDefaultMinioSessionInfo with
# DefaultMinioEndpointInMultiUserMode, 2.15.0), `seaweedfs.kubeflow:9000` (DefaultEndpointInMultiUserMode, 2.16.0,
# 2.16.1, 2.17.0 and master after it).
LAUNCHER_ENDPOINTS = {
    **{f"2.{minor}": "minio-service.kubeflow:9000" for minor in (0, 1, 2, 3, 4, 5, 14, 15)},
    **{f"2.{minor}": "seaweedfs.kubeflow:9000" for minor in (16, 17)},
}


@pytest.mark.parametrize("version", sorted(LAUNCHER_ENDPOINTS, key=lambda v: int(v.split(".")[1])))
def test_the_steps_use_the_object_store_of_the_kfp_version_they_run_on(version):
    config = kf.check_kubeflow_config(
        kubeflow_config("minio://mlpipeline/v2/artifacts", data_root="minio://mlpipeline/data", kfp_version=version)
    )
    assert config.endpoint == "http://" + LAUNCHER_ENDPOINTS[version]
    # An endpoint given wins over the version's.
    given = dataclasses.replace(config, s3_endpoint="http://store.example:9000")
    assert given.endpoint == "http://store.example:9000"


def test_kfp_versions_that_were_never_released_are_refused():
    assert set(kf.KFP_VERSIONS) == set(LAUNCHER_ENDPOINTS)
    for version in ("1.8", "2.6", "2.13", "2.18", "3.0", "2.16.1"):
        with pytest.raises(ConfigError, match=f"--kfp-version '{version}': one of 2.0, 2.1,"):
            kf.check_kubeflow_config(kubeflow_config("minio://mlpipeline/v2/artifacts", kfp_version=version))


@pytest.mark.parametrize("endpoint", ["store:9000", "ftp://store:21", "http://", "http://store:9000/path"])
def test_an_s3_endpoint_needs_a_scheme_and_a_host(endpoint):
    with pytest.raises(ConfigError, match="expected http://host"):
        kf.check_kubeflow_config(kubeflow_config("s3://ml/root", s3_endpoint=endpoint))


# sync.py of pipelines-profile-controller (KFP 2.15+): a profile's key may Put/Get/List/Delete only these.
PROFILE_WRITABLE = ("artifacts/", "private-artifacts/{ns}/", "private/{ns}/", "shared/")


@pytest.mark.parametrize(
    "flag, overrides",
    [
        ("--pipeline-root", {"pipeline_root": "minio://mlpipeline/v2/artifacts"}),
        ("--pipeline-root", {"pipeline_root": "minio://mlpipeline/private-artifacts/other-team/v2/artifacts"}),
        ("--data-root", {"data_root": "minio://mlpipeline/data/taxi"}),
        ("--data-root", {"data_root": "minio://mlpipeline/private/team-ab/data"}),  # another profile's
        ("--serving-dir", {"serving_dir": "minio://mlpipeline/serving"}),
        ("--serving-data", {"serving_data_root": "minio://mlpipeline/v2/serving-logs"}),
    ],
)
def test_a_profile_cannot_use_paths_outside_its_own_prefixes(flag, overrides):
    values = dict(
        pipeline_root=kf.profile_root("team-a"),
        data_root="minio://mlpipeline/private/team-a/data/taxi",
        serving_pvc="",
        serving_dir="minio://mlpipeline/shared/serving",
        namespace="team-a",
    )
    values.update(overrides)
    root = values.pop("pipeline_root")
    with pytest.raises(ConfigError) as refused:
        kf.check_kubeflow_config(kubeflow_config(root, **values))
    message = str(refused.value)
    assert message.startswith(f"{flag} '{overrides[next(iter(overrides))]}': profile 'team-a' may only write")
    for prefix in PROFILE_WRITABLE:
        assert "minio://mlpipeline/" in message and prefix.format(ns="team-a") + "*" in message


def test_a_profile_writes_under_its_own_prefixes_and_other_buckets_are_its_own_business():
    for root, data in (
        (kf.profile_root("team-a"), "minio://mlpipeline/private/team-a/data"),
        ("minio://mlpipeline/artifacts/team-a", "minio://mlpipeline/shared/taxi"),
        ("minio://team-a-bucket/v2/artifacts", "s3://elsewhere/data"),  # not the install's shared bucket
    ):
        config = kf.check_kubeflow_config(kubeflow_config(root, data_root=data, namespace="team-a"))
        assert config.pipeline_root == root
    assert kf.profile_root("team-a") == "minio://mlpipeline/private-artifacts/team-a/v2/artifacts"
    # Before KFP 2.15 a profile's pods share the install's key: no prefix is refused.
    shared = kubeflow_config("minio://mlpipeline/v2/artifacts", data_root="minio://mlpipeline/data/taxi")
    for version in ("2.5", "2.14"):
        config = kf.check_kubeflow_config(dataclasses.replace(shared, namespace="team-a", kfp_version=version))
        assert config.pipeline_root == "minio://mlpipeline/v2/artifacts"
    with pytest.raises(ConfigError, match="profile 'team-a' may only write"):
        kf.check_kubeflow_config(dataclasses.replace(shared, namespace="team-a", kfp_version="2.15"))
    with pytest.raises(ConfigError, match="--namespace 'Team_A' is not a valid Kubernetes namespace name"):
        kf.check_kubeflow_config(kubeflow_config(kf.profile_root("Team_A"), namespace="Team_A"))


def test_the_trainer_requires_the_gpus_it_requests_and_may_use():
    from tfxflow.components.training.hardware import HardwareConfig

    config = kubeflow_config("minio://mlpipeline/v2/artifacts", gpus=4)
    assert kf.check_kubeflow_config(config).training.hardware.require_gpus == 4
    narrowed = dataclasses.replace(
        config, training=dataclasses.replace(config.training, hardware=HardwareConfig(visible_gpus=(0, 1)))
    )
    assert kf.check_kubeflow_config(narrowed).training.hardware.require_gpus == 2
    assert kf.check_kubeflow_config(dataclasses.replace(config, gpus=0)).training.hardware.require_gpus == 0


def test_the_evaluator_starts_no_probe_ahead_where_each_step_has_its_own_process(compiled):
    _, spec, _, _ = compiled
    parameters = spec["root"]["dag"]["tasks"]["Evaluator"]["inputs"]["parameters"]
    assert parameters["warm_serving_probe"]["runtimeValue"]["constant"] == 0


def test_a_tuned_pipeline_has_a_tuning_step_on_the_trainers_resources_feeding_its_hyperparameters(tmp_path):
    from tfxflow.pipeline.config import TuningConfig

    config = kubeflow_config(
        "minio://mlpipeline/v2/artifacts", tuning=TuningConfig(tune=True, tune_trials=6, tune_space="width=off")
    )
    result = kf.compile_pipeline(config, str(tmp_path / "tuned.yaml"))
    spec, platform = kf.load_spec(result.path)
    tasks = spec["root"]["dag"]["tasks"]
    assert "Transform" in _ancestors(tasks, "Tuner") and "Tuner" in _ancestors(tasks, "Trainer")
    assert tasks["Trainer"]["inputs"]["artifacts"]["hyperparameters"]["taskOutputArtifact"] == {
        "producerTask": "Tuner",
        "outputArtifactKey": "best_hyperparameters",
    }
    assert tasks["MlflowRecord"]["inputs"]["artifacts"]["tuning"]["taskOutputArtifact"] == {
        "producerTask": "Tuner",
        "outputArtifactKey": "tuner_results",
    }
    parameters = {k: v["runtimeValue"]["constant"] for k, v in tasks["Tuner"]["inputs"]["parameters"].items()}
    assert parameters["trials"] == 6 and parameters["objective"] == "binary_accuracy"
    assert [d["name"] for d in json.loads(parameters["space"])] == ["learning_rate", "dropout", "batch_size"]
    # No home in a pod: the study goes into the step's output.
    assert parameters.get("study_dir", "") == ""
    # A trial trains as the Trainer does: the same GPUs, CPU, memory and nodes.
    tuner_resources = _executor(spec, "Tuner")["container"]["resources"]
    assert tuner_resources == _executor(spec, "Trainer")["container"]["resources"]
    assert tuner_resources["accelerator"] == {"type": "nvidia.com/gpu", "count": "2"}
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    tuner_platform = executors[spec["components"]["Tuner"]["executorLabel"]]
    assert tuner_platform["nodeSelector"] == executors[spec["components"]["Trainer"]["executorLabel"]]["nodeSelector"]
    args = _executor(spec, "Tuner")["container"]["args"]
    assert args[args.index("--executor_class_path") + 1] == "tfxflow.components.tuning.tuner.Executor"


def test_tuning_a_module_files_run_fn_is_refused_naming_both_flags(tmp_path):
    from tfxflow.pipeline.config import TuningConfig
    from tfxflow.pipeline.user_module import inspect

    module = tmp_path / "module.py"
    module.write_text("def run_fn(fn_args):\n    pass\n")
    config = kubeflow_config("minio://b/root", tuning=TuningConfig(tune=True), user_module=inspect(str(module)))
    with pytest.raises(
        ConfigError,
        match=r"--tune searches the built-in Trainer's settings, and --module-file .*"
        r"module.py brings its own run_fn: tune it with a tuner_fn",
    ):
        kf.check_kubeflow_config(config)


def test_a_modules_tuner_fn_compiles_to_tfxs_tuner_with_its_wheel_on_the_object_store(s3_server, monkeypatch, tmp_path):
    """--tune with Google's penguin module: the Tuner step runs TFX's Tuner (the module Tuner's executor) on
    Transform's transformed examples, on the Trainer's resources, its module wheel staged beside the others."""
    import tfx

    from tfxflow.pipeline.config import TuningConfig
    from tfxflow.pipeline.user_module import inspect

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.create_bucket("tuned-module")
    penguin = os.path.join(os.path.dirname(tfx.__file__), "examples", "penguin", "penguin_utils_keras.py")
    config = kubeflow_config(f"minio://{bucket}/root", tuning=TuningConfig(tune=True), user_module=inspect(penguin))
    result = kf.compile_pipeline(config, str(tmp_path / "tuned-module.yaml"))
    spec, _ = kf.load_spec(result.path)
    tasks = spec["root"]["dag"]["tasks"]
    assert tasks["Tuner"]["inputs"]["artifacts"]["examples"]["taskOutputArtifact"] == {
        "producerTask": "Transform",
        "outputArtifactKey": "transformed_examples",
    }
    assert tasks["Trainer"]["inputs"]["artifacts"]["hyperparameters"]["taskOutputArtifact"]["producerTask"] == "Tuner"
    args = _executor(spec, "Tuner")["container"]["args"]
    assert args[args.index("--executor_class_path") + 1] == "tfxflow.components.tuning.module_tuner.Executor"
    assert _executor(spec, "Tuner")["container"]["resources"] == _executor(spec, "Trainer")["container"]["resources"]
    module_path = tasks["Tuner"]["inputs"]["parameters"]["module_path"]["runtimeValue"]["constant"]
    wheel = module_path.split("@", 1)[1]
    assert wheel.startswith(f"minio://{bucket}/root/_wheels/tfx_user_code_tuner-")
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert wheel.split(f"{bucket}/", 1)[1] in keys
