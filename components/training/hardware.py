"""Devices, distribution strategy and precision policy for the Trainer.

Device settings (visible GPUs, memory growth, memory limit, logical CPU replicas) only take effect before
TensorFlow initialises its devices. In a Kubeflow container the Trainer is the first to touch them, so
`run_fn` applies them; with LocalDagRunner every component shares one process and Transform initialises
TensorFlow first, so the local runner applies the same settings when it starts.

TensorFlow is imported inside the functions: the run configuration embeds `HardwareConfig`, and the CLI
must parse flags without paying for a TensorFlow import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from absl import logging

from tfxflow.components.settings import int_list, json_value, setting, strict_fields
from tfxflow.components.training import cluster as cluster_lib

if TYPE_CHECKING:
    import tensorflow as tf

PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
NVML_LIBRARY = "libnvidia-ml.so.1"  # the NVIDIA driver's management library, which nvidia-smi reads
KERAS_ENV = "TF_USE_LEGACY_KERAS"
DEFAULT_STRATEGY = "default"  # describe()'s name for TensorFlow's default strategy (one device, no distribution)


def use_keras_2() -> None:
    """Makes `tf.keras` Keras 2 (tf-keras), what TFX 1.16, tf.Transform and TFMA are built on: a user's module
    file written for TFX (`tf.keras.layers...`, as TFX's own examples are) then runs unchanged, where TensorFlow
    2.16 would give it Keras 3, whose models TFX's steps cannot take. Only before TensorFlow is imported: the
    process's entry points (the CLI, a Kubeflow step) call it first."""
    os.environ.setdefault(KERAS_ENV, "1")


ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_arrow_jemalloc() -> None:
    """Makes jemalloc Arrow's default memory pool, as pyarrow 10 (the compat lane's) has it. pyarrow 13 and later
    default to mimalloc, which keeps what CsvExampleGen's and StatisticsGen's record batches freed: a large run
    then peaks higher and takes longer than with jemalloc. Only before Arrow allocates: the process's entry points
    call it first; a pool the user chose (the variable set) stays."""
    os.environ.setdefault(ARROW_POOL_ENV, "jemalloc")


@dataclasses.dataclass(frozen=True)
class HardwareConfig:
    """How the Trainer uses the machine: the `hardware` section of its `custom_config`, and the CLI's flags."""

    precision: str = setting(
        "auto", choices=PRECISIONS, help="auto: mixed_float16 on GPUs of compute capability >= 7.0, else float32"
    )
    memory_growth: bool = setting(True, flag="--no-memory-growth", help="let TensorFlow reserve all GPU memory")
    gpu_memory_limit_mb: Optional[int] = setting(
        None, type=int, metavar="MB", help="cap each GPU's memory (default: grow as needed)"
    )
    visible_gpus: Optional[Tuple[int, ...]] = setting(  # None: all
        None, parse=int_list, metavar="I,I,...", help="comma-separated GPU indices (default: all)"
    )
    cpu_replicas: int = setting(  # with no GPU, split the CPU into this many logical devices and mirror over them
        1, help="with no GPU, mirror over this many logical CPU devices"
    )
    xla: bool = setting(False, help="compile the train step with XLA (jit_compile)")
    recompute: bool = setting(
        False, help="recompute each Transformer block's activations in the backward pass: less memory, more compute"
    )
    steps_per_execution: int = setting(  # less Python overhead per step
        20, help="batches per tf.function call"
    )
    require_gpus: int = setting(
        0,
        metavar="N",
        help="stop before training when TensorFlow sees fewer GPUs (a Kubeflow Trainer requires its --gpus)",
    )

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got '{self.precision}'")
        if self.cpu_replicas < 1 or self.steps_per_execution < 1:
            raise ValueError("cpu_replicas and steps_per_execution must be >= 1")
        if self.require_gpus < 0:
            raise ValueError("require_gpus must be >= 0")
        if self.gpu_memory_limit_mb is not None and self.gpu_memory_limit_mb < 1:
            raise ValueError("gpu_memory_limit_mb must be >= 1 MB")

    def to_dict(self) -> dict:
        return {f.name: json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HardwareConfig":
        """The inverse of `to_dict`; raises ValueError naming a key it does not know."""
        values = strict_fields(cls, data, "custom_config['hardware']")
        if values.get("visible_gpus") is not None:
            values["visible_gpus"] = tuple(int(i) for i in values["visible_gpus"])
        return cls(**values)


def configure_devices(config: HardwareConfig) -> bool:
    """Applies visible GPUs, memory growth or limit, and logical CPU replicas.

    Returns False (and logs why) when TensorFlow's devices were already initialised in this process.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    try:
        if config.visible_gpus is not None:
            chosen = [gpus[i] for i in config.visible_gpus if i < len(gpus)]
            tf.config.set_visible_devices(chosen + tf.config.list_physical_devices("CPU"))
            gpus = chosen
        for gpu in gpus:
            if config.gpu_memory_limit_mb:
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=config.gpu_memory_limit_mb)]
                )
            elif config.memory_growth:
                tf.config.experimental.set_memory_growth(gpu, True)
        if not gpus and config.cpu_replicas > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(config.cpu_replicas)]
            )
    except RuntimeError as err:  # "... cannot be modified after being initialized"
        logging.info("Device settings left as they are: TensorFlow already initialised its devices (%s)", err)
        return False
    return True


class MissingGpuError(RuntimeError):
    """The Trainer was given fewer GPUs than it requires; the message says what TensorFlow and the node show."""


def check_gpus(config: HardwareConfig, environ: Mapping[str, str] = os.environ) -> int:
    """The GPUs TensorFlow sees; raises MissingGpuError when fewer than `config.require_gpus`. A pod that
    asked for GPUs and sees none (no device plugin on the node, the pod not run with the NVIDIA runtime, an
    image without CUDA) would otherwise train a large model on the CPU for hours before anyone noticed."""
    import tensorflow as tf

    seen = len(tf.config.list_logical_devices("GPU"))
    if seen >= config.require_gpus:
        return seen
    facts = [
        f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r}" if "CUDA_VISIBLE_DEVICES" in environ else "",
        "no /dev/nvidia0 in the container" if not os.path.exists("/dev/nvidia0") else "/dev/nvidia0 present",
        f"the NVIDIA driver library ({NVML_LIBRARY}) does not load" if _nvml_library() is None else "",
        "" if tf.test.is_built_with_cuda() else "this TensorFlow is built without CUDA",
    ]
    raise MissingGpuError(
        f"the Trainer requires {config.require_gpus} GPU(s) and TensorFlow sees {seen} "
        f"({'; '.join(f for f in facts if f)}). On Kubernetes: the node's NVIDIA device plugin, the pod's "
        "NVIDIA runtime (RuntimeClass) and an image with CUDA (tensorflow/tfx:1.16.0 has it). To train on CPUs "
        "instead: compile with --gpus 0 (Kubeflow), or run without --require-gpus (a local run)"
    )


def _nvml_library(library: str = NVML_LIBRARY):
    """The NVIDIA driver's NVML, loaded; None where the driver is not installed."""
    import ctypes

    try:
        return ctypes.CDLL(library)
    except OSError:
        return None


def make_strategy(
    environ: Mapping[str, str] = os.environ, cluster: Optional[cluster_lib.ClusterConfig] = None
) -> "tf.distribute.Strategy":
    """MultiWorkerMirroredStrategy when TF_CONFIG names several workers (its all-reduce and join timeout from
    `cluster`); else MirroredStrategy over the visible GPUs, or over the logical CPUs when there is no GPU and
    there are several (--cpu-replicas); on one CPU device, TensorFlow's default strategy: the same steps without
    a replica to mirror (MirroredStrategy over one device adds its replica and merge machinery to every traced
    step)."""
    import tensorflow as tf

    me = cluster_lib.role(environ)
    if me is not None:
        return cluster_lib.multi_worker_strategy(cluster or cluster_lib.ClusterConfig(), me)
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return tf.distribute.MirroredStrategy([d.name for d in gpus])
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) == 1:
        return tf.distribute.get_strategy()
    return tf.distribute.MirroredStrategy([d.name for d in cpus])


def gpu_compute_capabilities() -> List[Tuple[int, int]]:
    """(major, minor) compute capability of each visible GPU."""
    import tensorflow as tf

    caps = []
    for gpu in tf.config.list_physical_devices("GPU"):
        cap = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if cap:
            caps.append(tuple(cap))
    return caps


def resolve_precision(precision: str, capabilities: Optional[List[Tuple[int, int]]] = None) -> str:
    """`auto`: mixed_float16 when every visible GPU has compute capability >= 7.0 (Tensor Cores), else float32."""
    if precision != "auto":
        return precision
    capabilities = gpu_compute_capabilities() if capabilities is None else capabilities
    if capabilities and all(cap >= (7, 0) for cap in capabilities):
        return "mixed_float16"
    return "float32"


@contextlib.contextmanager
def precision_policy(name: str) -> Iterator[None]:
    """Sets tf-keras' global dtype policy for the block and restores the previous one after, even on error."""
    from tf_keras import mixed_precision

    previous = mixed_precision.global_policy()
    mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        mixed_precision.set_global_policy(previous)


def describe(strategy: "tf.distribute.Strategy", config: HardwareConfig) -> Dict[str, Any]:
    """What the Trainer runs on (strategy, devices, the active dtype policy), for its log and for tracking."""
    import tensorflow as tf
    from tf_keras import mixed_precision

    name = type(strategy).__name__
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        name = "MultiWorkerMirroredStrategy"  # its class is named CollectiveAllReduceStrategy
    if strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy():
        # TensorFlow's default strategy (outside any scope, the one get_strategy gives) lists no devices: it
        # runs on the one device there is.
        name, devices = DEFAULT_STRATEGY, [d.name for d in tf.config.list_logical_devices("CPU")]
    else:
        devices = list(getattr(strategy.extended, "worker_devices", ()))
    return {
        "strategy": name,
        "devices": devices,
        "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
        "replicas": strategy.num_replicas_in_sync,
        "workers": cluster_lib.worker_count(os.environ),
        "precision_policy": mixed_precision.global_policy().name,
        "xla": config.xla,
        "recompute": config.recompute,
        "steps_per_execution": config.steps_per_execution,
    }


def pod_cpus() -> int:
    """The CPUs this container may use: its cgroup CPU limit, else the CPUs it may run on."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="utf-8") as f:  # cgroup v2: "<quota> <period>" or "max ..."
            quota, period = f.read().split()[:2]
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        try:  # cgroup v1
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="utf-8") as f:
                quota = int(f.read())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="utf-8") as f:
                period = int(f.read())
            if quota > 0:
                return max(1, math.ceil(quota / period))
        except (OSError, ValueError):
            pass
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class GpuUtilization:
    """Samples the busy share of each visible NVIDIA GPU through NVML (libnvidia-ml, the library nvidia-smi reads),
    on a thread, every `every_s` seconds: `mean()` is the average of the samples between `start()` and `stop()`
    (at least one), in percent (NVML's `utilization.gpu`: the share of the last sample period in which a kernel
    ran). `available` is False without the driver's library (no NVIDIA GPU): then nothing is sampled.

    The GPUs are those $CUDA_VISIBLE_DEVICES names, by UUID or by index, else all. NVML numbers GPUs in PCI bus
    order, CUDA fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: on a machine of mixed GPU models, name them
    by UUID or set that order, as Kubernetes' device plugin does."""

    def __init__(self, every_s: float = 0.5, library: str = NVML_LIBRARY):
        import ctypes

        self.every_s, self._handles, self._samples = every_s, [], []
        self._thread = self._stop = self._nvml = None
        nvml = _nvml_library(library)
        if nvml is None:
            return
        try:
            if nvml.nvmlInit_v2() != 0:
                return
            self._nvml = nvml
            count = ctypes.c_uint(0)
            if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return
            for device in visible_gpus(count.value):
                handle = ctypes.c_void_p()
                if isinstance(device, int):
                    found = nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(device), ctypes.byref(handle))
                else:
                    found = nvml.nvmlDeviceGetHandleByUUID(device.encode(), ctypes.byref(handle))
                if found == 0:
                    self._handles.append(handle)
        except (OSError, AttributeError):
            self._handles = []

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def sample(self) -> Optional[float]:
        """The mean busy percent of the GPUs now, or None when NVML does not answer."""
        import ctypes

        class Utilization(ctypes.Structure):  # nvml.h's nvmlUtilization_t
            _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

        values = []
        for handle in self._handles:
            found = Utilization()
            if self._nvml.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(found)) == 0:
                values.append(found.gpu)
        return sum(values) / len(values) if values else None

    def start(self) -> None:
        import threading

        self.stop()
        self._samples, self._stop = [], threading.Event()
        if not self.available:
            return

        def run():
            while not self._stop.wait(self.every_s):
                value = self.sample()
                if value is not None:
                    self._samples.append(value)

        self._thread = threading.Thread(target=run, name="gpu-utilization", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling; a period shorter than one sample gets the one taken now."""
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if not self._samples:
                value = self.sample()
                if value is not None:
                    self._samples.append(value)
        self._thread = None

    def mean(self) -> Optional[float]:
        return sum(self._samples) / len(self._samples) if self._samples else None

    def close(self) -> None:
        self.stop()
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml, self._handles = None, []


def visible_gpus(count: int) -> List[Any]:
    """The GPUs this process may use, as NVML finds them: $CUDA_VISIBLE_DEVICES's entries up to the first that is
    not a GPU (CUDA's rule), indexes below `count` as ints, UUIDs ("GPU-...", "MIG-...") as strings; every
    index when it is not set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    found: List[Any] = []
    for part in (p.strip() for p in visible.split(",")):
        if part.isdigit() and int(part) < count:
            found.append(int(part))
        elif part.startswith(("GPU-", "MIG-")):
            found.append(part)
        else:  # "-1", an index beyond the GPUs, "": CUDA sees no GPU from here on
            break
    return found
