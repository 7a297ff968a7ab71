"""Fixtures shared by the pipeline tests."""

import os

import pytest

from tfxflow.components.model.features import FeatureConfig
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline import inputs
from tfxflow.pipeline.kfp import compiler as kf
from tfxflow.pipeline.kfp import entrypoint

IMAGE = "registry.example.com/ml/tfxflow:0.1.0"

# tests/kfp_harness.py's LocalKfp(fork_steps=...) for compiled steps run on this machine: each step's process is
# forked from one that ran the entry point's image check (Keras 2 chosen, every module a step names imported).
FORK_STEPS = {kf.ENTRYPOINT[2]: (entrypoint.CHECK_IMAGE_FLAG,)}


def kubeflow_config(root: str, **overrides) -> kf.KubeflowConfig:
    """A Kubeflow config for the bundled taxi dataset with its pipeline root at `root`."""
    dataset_dir = inputs.bundled_dataset_dir("taxi")
    values = dict(
        pipeline_name="tfxflow-taxi",
        model_name="taxi",
        image=IMAGE,
        pipeline_root=root,
        data_root="gs://ml-data/taxi",
        serving_dir="/serving/models",
        schema_path=os.path.join(dataset_dir, "schema.pbtxt"),
        features=FeatureConfig.load(os.path.join(dataset_dir, "features.yaml")),
        training=config_lib.TrainingConfig(train_steps=500),
        gpus=2,
        node_selector=(("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),),
        tolerations=(kf.Toleration.parse("nvidia.com/gpu:NoSchedule"), kf.Toleration.parse("dedicated=ml:NoExecute")),
        trainer_cpu="8",
        trainer_memory="32G",
        mlflow_secret="mlflow-tracking",
        mlflow_secret_keys=("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN"),
        serving_pvc="tf-serving-models",
        allowed_anomaly_types=("FEATURE_TYPE_LOW_NUMBER_VALUES",),
    )
    values.update(overrides)
    return kf.KubeflowConfig(**values)


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """(compile result, pipeline spec, platform spec, config) of the taxi pipeline compiled for Kubeflow."""
    folder = tmp_path_factory.mktemp("kubeflow")
    config = kubeflow_config("minio://mlpipeline/v2/artifacts")
    result = kf.compile_pipeline(config, str(folder / "tfxflow-taxi.yaml"))
    spec, platform = kf.load_spec(result.path)
    return result, spec, platform, config
