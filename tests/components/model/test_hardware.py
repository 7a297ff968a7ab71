"""Device, strategy and precision helpers."""

import json
import os
import subprocess
import sys

import pytest
import tf_keras as keras

from tfxflow.components.model import hardware


@pytest.mark.parametrize(
    "precision, capabilities, expected",
    [
        ("auto", [(8, 0), (9, 0)], "mixed_float16"),
        ("auto", [(8, 0), (6, 1)], "float32"),
        ("auto", [], "float32"),
        ("mixed_bfloat16", [], "mixed_bfloat16"),
        ("float32", [(9, 0)], "float32"),
    ],
)
def test_precision_resolution(precision, capabilities, expected):
    assert hardware.resolve_precision(precision, capabilities) == expected


def test_auto_precision_on_this_cpu_machine_is_float32():
    assert hardware.resolve_precision("auto") == "float32"


def test_policy_is_restored_even_when_training_fails():
    before = keras.mixed_precision.global_policy().name
    with pytest.raises(RuntimeError):
        with hardware.precision_policy("mixed_bfloat16"):
            assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
            raise RuntimeError("trainer failed")
    assert keras.mixed_precision.global_policy().name == before


def test_worker_count_reads_tf_config():
    cluster = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
    assert hardware.worker_count({"TF_CONFIG": json.dumps(cluster)}) == 2
    assert hardware.worker_count({}) == 1


def test_config_validation_and_round_trip():
    config = hardware.HardwareConfig(precision="mixed_float16", visible_gpus=(0, 2), gpu_memory_limit_mb=4096)
    assert hardware.HardwareConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="precision must be one of"):
        hardware.HardwareConfig(precision="fp8")
    with pytest.raises(ValueError, match="gpu_memory_limit_mb"):
        hardware.HardwareConfig(gpu_memory_limit_mb=0)


def test_unknown_key_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"custom_config\['hardware'\]: unknown key\(s\) \['precison'\]"):
        hardware.HardwareConfig.from_dict({"precison": "float32"})


@pytest.mark.integration
def test_a_trainer_that_requires_gpus_stops_where_tensorflow_sees_none():
    """What a Kubeflow Trainer pod without its GPUs says, before any training: asked for one more GPU than this
    machine has."""
    import tensorflow as tf

    seen = len(tf.config.list_logical_devices("GPU"))
    assert hardware.check_gpus(hardware.HardwareConfig(require_gpus=seen)) == seen
    with pytest.raises(hardware.MissingGpuError) as refused:
        hardware.check_gpus(hardware.HardwareConfig(require_gpus=seen + 1), environ={"CUDA_VISIBLE_DEVICES": "7"})
    message = str(refused.value)
    assert message.startswith(f"the Trainer requires {seen + 1} GPU(s) and TensorFlow sees {seen} (")
    assert "CUDA_VISIBLE_DEVICES='7'" in message and "/dev/nvidia0" in message
    if not seen:  # this machine: no device node, no driver library
        assert "no /dev/nvidia0 in the container" in message and "libnvidia-ml.so.1" in message
    assert "compile with --gpus 0 (Kubeflow), or run without --require-gpus" in message
    with pytest.raises(ValueError, match="require_gpus must be >= 0"):
        hardware.HardwareConfig(require_gpus=-1)


ARROW_POOL_SCRIPT = """
import os, sys
from tfxflow.pipeline.cli import main
try:
    main.main(["--help"])  # the console script's start, as every command has it
except SystemExit:
    pass
import pyarrow as pa
print(os.environ["ARROW_DEFAULT_MEMORY_POOL"], pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize("chosen, expected", [(None, "jemalloc"), ("system", "system")], ids=["default", "user's"])
def test_the_cli_gives_arrow_jemalloc_unless_the_user_chose_a_pool(chosen, expected):
    """pyarrow 13+ defaults to mimalloc, which kept 340 MB more of a 100x run's freed batches (use_arrow_jemalloc)."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run(
        [sys.executable, "-c", ARROW_POOL_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == [expected, expected]
