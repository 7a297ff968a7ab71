"""TF Serving manifests: a GPU pod with server-side batching that serves what the Pusher writes to the claim."""

import os
import re

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from pipeline.cli import _parser

SERVING = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "kubeflow",
                       "serving")
# The fields of tensorflow_serving's BatchingParameters proto (session_bundle_config.proto).
BATCHING_FIELDS = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads",
                   "thread_pool_name", "allowed_batch_sizes", "pad_variable_length_inputs"}


def _manifests() -> dict:
    with open(os.path.join(SERVING, "kustomization.yaml"), encoding="utf-8") as f:
        kustomization = yaml.safe_load(f)
    found = {}
    for name in kustomization["resources"]:
        with open(os.path.join(SERVING, name), encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                found[doc["kind"]] = doc
    return found


def _flags(container: dict) -> dict:
    return dict(arg[2:].split("=", 1) for arg in container["args"])


def test_gpu_pod_with_batching():
    manifests = _manifests()
    assert set(manifests) == {"PersistentVolumeClaim", "ConfigMap", "Deployment", "Service"}
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    (container,) = pod["containers"]
    assert container["image"].endswith("-gpu")
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    flags = _flags(container)
    assert flags["enable_batching"] == "true"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_dir, batching_name = os.path.split(flags["batching_parameters_file"])
    config_volume = volumes[mounts[config_dir]["name"]]
    configmap = manifests["ConfigMap"]
    assert config_volume["configMap"]["name"] == configmap["metadata"]["name"]
    batching = configmap["data"][batching_name]
    fields = set(re.findall(r"^(\w+)", batching, re.M))
    assert fields and fields <= BATCHING_FIELDS, fields - BATCHING_FIELDS
    assert int(re.search(r"max_batch_size \{ value: (\d+) \}", batching).group(1)) >= 1


def test_serves_the_pushed_models_from_the_claim_the_pusher_writes():
    manifests = _manifests()
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flags = _flags(container)
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(manifests["ConfigMap"]["data"][os.path.basename(flags["model_config_file"])], config)
    (model,) = config.model_config_list.config

    # The compile defaults with --serving-pvc: Pusher writes <mount>/models/<model-name>/<version>/.
    args = _parser().parse_args(["kubeflow", "compile", "--image", "r/i:1", "--pipeline-root", "gs://b/r",
                                 "--data-root", "gs://b/d", "--serving-pvc", "tf-serving-models"])
    assert model.base_path == f"{args.serving_mount}/models/{args.dataset}"
    assert model.name == args.dataset
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    claim_volume = next(v for v in pod["volumes"] if "persistentVolumeClaim" in v)
    assert claim_volume["persistentVolumeClaim"]["claimName"] == args.serving_pvc
    assert manifests["PersistentVolumeClaim"]["metadata"]["name"] == args.serving_pvc
    assert "ReadWriteMany" in manifests["PersistentVolumeClaim"]["spec"]["accessModes"]
    mount = mounts[claim_volume["name"]]
    assert mount["mountPath"] == args.serving_mount and mount["readOnly"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == f"/v1/models/{model.name}"
