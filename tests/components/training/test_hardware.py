"""Device, strategy and precision helpers."""

import json
import os
import re
import subprocess
import sys

import pytest
import tf_keras as keras

from tfxflow.components.training import hardware


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


def _fake_gpus(monkeypatch, details):
    """TensorFlow's device list as a machine with one GPU per entry of `details` (get_device_details' answer)
    would give it: what gpu_compute_capabilities and `auto` read, without a GPU."""
    import tensorflow as tf

    gpus = [tf.config.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(len(details))]
    by_name = {gpu.name: found for gpu, found in zip(gpus, details, strict=True)}
    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: gpus if kind == "GPU" else real(kind))
    monkeypatch.setattr(tf.config.experimental, "get_device_details", lambda device: dict(by_name[device.name]))


@pytest.mark.parametrize(
    "capabilities, expected",
    [
        ([(6, 1)], "float32"),  # Pascal (GTX 1080, P40): no Tensor Cores
        ([(7, 0)], "mixed_float16"),  # Volta (V100): the first with Tensor Cores, the bound itself
        ([(7, 5)], "mixed_float16"),  # Turing (T4)
        ([(8, 0)], "mixed_float16"),  # Ampere (A100): bfloat16 too, but `auto` never picks it
        ([(9, 0), (9, 0)], "mixed_float16"),  # two Hoppers (H100)
        ([(8, 0), (6, 1)], "float32"),  # one old GPU among them: all of them run float32
        ([], "float32"),  # no GPU
    ],
)
def test_auto_precision_follows_the_compute_capability_of_the_gpus_tensorflow_lists(
    monkeypatch, capabilities, expected
):
    _fake_gpus(monkeypatch, [{"compute_capability": cap, "device_name": "NVIDIA fake"} for cap in capabilities])
    assert hardware.gpu_compute_capabilities() == capabilities
    assert hardware.resolve_precision("auto") == expected  # capabilities read from the devices
    assert hardware.resolve_precision("mixed_bfloat16") == "mixed_bfloat16"  # a policy named is kept as it is


def test_a_gpu_that_reports_no_compute_capability_is_left_out(monkeypatch):
    """get_device_details gives {} for a device it knows nothing of: such a GPU counts as none."""
    _fake_gpus(monkeypatch, [{}, {"compute_capability": (8, 0)}])
    assert hardware.gpu_compute_capabilities() == [(8, 0)]
    assert hardware.resolve_precision("auto") == "mixed_float16"
    _fake_gpus(monkeypatch, [{}])
    assert hardware.resolve_precision("auto") == "float32"


# The policy `auto` must choose on each GPU model, written out from NVIDIA's specifications rather than from the
# code's rule: Tensor Cores (Volta and later) make float16 pay; Pascal and older have none.
PRECISION_OF_GPU = {
    "H200": "mixed_float16",
    "H100": "mixed_float16",
    "L40S": "mixed_float16",
    "L40": "mixed_float16",
    "L4": "mixed_float16",
    "A100": "mixed_float16",
    "A10G": "mixed_float16",
    "A10": "mixed_float16",
    "T4": "mixed_float16",
    "V100": "mixed_float16",
    "P100": "float32",
    "P40": "float32",
    "P4": "float32",
    "K80": "float32",
}


def _gpu_models():
    """The model of each GPU this host's TensorFlow lists, from the device's name ("NVIDIA H100 80GB HBM3")."""
    import tensorflow as tf

    names = [
        tf.config.experimental.get_device_details(g).get("device_name", "")
        for g in tf.config.list_physical_devices("GPU")
    ]
    return [next((m for m in re.split(r"[\s-]+", name) if m in PRECISION_OF_GPU), name) for name in names]


def test_auto_precision_on_this_machine_is_what_its_gpus_call_for():
    """On a CPU host float32; on a GPU host the policy its GPU models call for (all of them mixed_float16, or
    float32 when one is older)."""
    models = _gpu_models()
    unknown = [m for m in models if m not in PRECISION_OF_GPU]
    if unknown:
        pytest.skip(f"no expected precision written for {unknown}: add the model to PRECISION_OF_GPU")
    policies = {PRECISION_OF_GPU[m] for m in models}
    expected = "mixed_float16" if policies == {"mixed_float16"} else "float32"
    assert hardware.resolve_precision("auto") == expected


def _has_gpu():
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


@pytest.mark.skipif(
    not _has_gpu(), reason="needs a GPU TensorFlow can see: MirroredStrategy over real GPUs (none on this host)"
)
def test_on_a_gpu_host_the_strategy_mirrors_over_the_gpus_and_nvml_samples_them():
    import tensorflow as tf

    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    strategy = hardware.make_strategy({})
    assert isinstance(strategy, tf.distribute.MirroredStrategy) and strategy.num_replicas_in_sync == len(gpus)
    assert hardware.check_gpus(hardware.HardwareConfig(require_gpus=len(gpus))) == len(gpus)
    sampler = hardware.GpuUtilization()
    try:
        assert sampler.available, "TensorFlow sees a GPU and NVIDIA's libnvidia-ml.so.1 does not load or find it"
        assert 0 <= sampler.sample() <= 100
    finally:
        sampler.close()


class FakeNvml:
    """NVIDIA's libnvidia-ml as GpuUtilization calls it through ctypes: each function returns NVML's status (0:
    success) and writes its answer through the pointer (ctypes.byref) it is given. GPU i (found by index, or by
    the UUID "GPU-i") is `busy[i]` percent busy; with `rounds` ([round][GPU]), its n-th answer is rounds[n][i], and
    after the last round it answers an NVML error (and `done` is set). A GPU in `silent` never answers."""

    def __init__(self, busy, silent=(), rounds=None, init_status=0):
        import threading

        self.busy, self.silent, self.rounds, self.init_status = busy, set(silent), rounds, init_status
        self.calls, self.shutdown, self.done = [0] * len(busy), 0, threading.Event()

    def nvmlInit_v2(self):  # noqa: N802 (NVML's names)
        return self.init_status

    def nvmlShutdown(self):  # noqa: N802
        self.shutdown += 1
        return 0

    def nvmlDeviceGetCount_v2(self, count):  # noqa: N802
        count._obj.value = len(self.busy)
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):  # noqa: N802
        if index.value >= len(self.busy):
            return 2  # NVML_ERROR_INVALID_ARGUMENT
        handle._obj.value = 1000 + index.value
        return 0

    def nvmlDeviceGetHandleByUUID(self, uuid, handle):  # noqa: N802
        index = int(uuid.decode().split("-")[1])
        if index >= len(self.busy):
            return 13  # NVML_ERROR_NOT_FOUND
        handle._obj.value = 1000 + index
        return 0

    def nvmlDeviceGetUtilizationRates(self, handle, utilization):  # noqa: N802
        index = (handle.value or 0) - 1000
        if not 0 <= index < len(self.busy):
            return 2  # NVML_ERROR_INVALID_ARGUMENT: no handle NVML gave
        self.calls[index] += 1
        if index in self.silent:
            return 999  # NVML_ERROR_UNKNOWN
        if self.rounds is None:
            utilization._obj.gpu = self.busy[index]
        elif self.calls[index] <= len(self.rounds):
            utilization._obj.gpu = self.rounds[self.calls[index] - 1][index]
        else:
            self.done.set()
            return 999
        utilization._obj.memory = 7  # memory's share, which the mean must not read
        return 0


def _sampler(monkeypatch, nvml, visible=None, every_s=0.5):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(hardware, "_nvml_library", lambda library=hardware.NVML_LIBRARY: nvml)
    return hardware.GpuUtilization(every_s=every_s)


@pytest.mark.parametrize(
    "visible, silent, expected",
    [
        (None, (), (10 + 40 + 100 + 70) / 4),  # every GPU: 55.0
        ("2,0", (), (100 + 10) / 2),  # CUDA_VISIBLE_DEVICES's GPUs only: 55.0 from two others
        ("1,2", (), (40 + 100) / 2),  # 70.0
        ("GPU-3,1", (), (70 + 40) / 2),  # by UUID: 55.0
        ("3,9,0", (), 70.0),  # CUDA stops at 9, no such GPU
        ("GPU-7,2", (), 100.0),  # a UUID NVML does not find is left out
        (None, (1,), (10 + 100 + 70) / 3),  # a GPU that does not answer is left out of the mean: 60.0
    ],
)
def test_gpu_utilization_is_the_mean_busy_share_of_the_visible_gpus(monkeypatch, visible, silent, expected):
    nvml = FakeNvml([10, 40, 100, 70], silent=silent)
    sampler = _sampler(monkeypatch, nvml, visible)
    assert sampler.available
    assert sampler.sample() == pytest.approx(expected)
    sampler.close()
    assert nvml.shutdown == 1 and not sampler.available


def test_gpu_utilization_samples_nothing_when_nvml_does_not_start_or_answer(monkeypatch):
    assert not _sampler(monkeypatch, FakeNvml([50], init_status=9)).available  # NVML_ERROR_DRIVER_NOT_LOADED
    assert not _sampler(monkeypatch, FakeNvml([50]), visible="-1").available  # no visible GPU
    assert not _sampler(monkeypatch, FakeNvml([50]), visible="GPU-7").available  # none NVML finds
    mute = _sampler(monkeypatch, FakeNvml([50, 60], silent=(0, 1)))
    assert mute.available and mute.sample() is None  # found, and every GPU fails to answer
    mute.start()
    mute.stop()
    assert mute.mean() is None


def test_gpu_utilization_mean_averages_the_samples_of_the_period(monkeypatch):
    """Samples taken on the thread between start and stop: the fake answers 3 rounds, then fails (nothing more
    is sampled), so the mean is exactly theirs."""
    nvml = FakeNvml([0, 0], rounds=[[10, 20], [20, 40], [60, 30]])
    sampler = _sampler(monkeypatch, nvml, every_s=0.001)
    sampler.start()
    assert nvml.done.wait(30)
    sampler.stop()
    assert sampler.mean() == pytest.approx((15 + 30 + 45) / 3)  # the rounds' means: 15, 30 and 45
    sampler.close()
    # A period shorter than one sample: the one taken at stop.
    quick = _sampler(monkeypatch, FakeNvml([30, 90]), every_s=60)
    quick.start()
    quick.stop()
    assert quick.mean() == pytest.approx(60.0)
    quick.close()


def test_policy_is_restored_even_when_training_fails():
    before = keras.mixed_precision.global_policy().name
    with pytest.raises(RuntimeError):
        with hardware.precision_policy("mixed_bfloat16"):
            assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
            raise RuntimeError("trainer failed")
    assert keras.mixed_precision.global_policy().name == before


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
