"""The callbacks of the Trainer's fit: each epoch's throughput, TensorBoard (and a profiler trace), early
stopping, and BackupAndRestore's backup, mirrored to an object store TF cannot write."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras as keras
from absl import logging

from tfxflow.components import object_store
from tfxflow.components.training import hardware as hardware_lib

# What Throughput adds to each epoch's metrics (not the model's own).
TELEMETRY = ("step_ms", "examples_per_s", "tokens_per_s", "gpu_peak_memory_mb", "gpu_utilization_percent")


class Throughput(keras.callbacks.Callback):
    """Adds each epoch's training speed to its logs, so TensorBoard, the history (training_info.json) and MLflow
    carry it: `step_ms`, `examples_per_s`, `tokens_per_s` (text models: examples x sequence length) and, on a
    GPU, `gpu_peak_memory_mb` (TensorFlow's allocator peak of the first GPU during the epoch) and
    `gpu_utilization_percent` (NVML's busy share of the visible GPUs, sampled twice a second). The time is the
    training part of the epoch, up to its validation."""

    def __init__(self, examples_per_step: int, steps_per_epoch: int, sequence_length: int = 0):
        super().__init__()
        self.examples_per_step, self.steps_per_epoch = examples_per_step, steps_per_epoch
        self.sequence_length = sequence_length
        self._gpu = bool(tf.config.list_logical_devices("GPU"))
        self._utilization = hardware_lib.GpuUtilization() if self._gpu else None
        self._start = self._trained = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")
            self._utilization.start()
        self._start, self._trained = time.perf_counter(), None

    def on_test_begin(self, logs=None):
        if self._start is not None and self._trained is None:
            self._trained = time.perf_counter() - self._start
            if self._utilization is not None:
                self._utilization.stop()

    def on_train_end(self, logs=None):
        if self._utilization is not None:
            self._utilization.close()

    def on_epoch_end(self, epoch, logs=None):
        if self._utilization is not None:
            self._utilization.stop()
        if logs is None or self._start is None:
            return
        seconds = self._trained or (time.perf_counter() - self._start)
        logs["step_ms"] = 1000 * seconds / self.steps_per_epoch
        logs["examples_per_s"] = self.examples_per_step * self.steps_per_epoch / seconds
        if self.sequence_length:
            logs["tokens_per_s"] = logs["examples_per_s"] * self.sequence_length
        if self._gpu:
            logs["gpu_peak_memory_mb"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
            busy = self._utilization.mean()
            if busy is not None:
                logs["gpu_utilization_percent"] = busy


def profile_executions(steps: Tuple[int, int], steps_per_execution: int) -> Tuple[int, int]:
    """TensorBoard's profile_batch counts calls of the train function, each `steps_per_execution` steps: the
    calls that hold training steps `steps` (first, last; (0, 0): none)."""
    if steps == (0, 0):
        return steps
    return tuple(math.ceil(step / steps_per_execution) for step in steps)


def make_callbacks(
    log_dir: str,
    backup_dir: Optional[str],
    patience: int,
    extra: Sequence[keras.callbacks.Callback] = (),
    throughput: Optional[Throughput] = None,
    profile_steps: Tuple[int, int] = (0, 0),
) -> List[keras.callbacks.Callback]:
    """The epoch's throughput first (the others see it in the logs), TensorBoard in the run directory (with a
    profiler trace of the steps `profile_steps`, first to last, when set), early stopping on the eval split, and
    backup for resumption."""
    callbacks: List[keras.callbacks.Callback] = [throughput] if throughput is not None else []
    callbacks.append(keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch", profile_batch=profile_steps))
    if patience > 0:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience, restore_best_weights=True, verbose=0)
        )
    if backup_dir:
        # Saves after every epoch and deletes the backup once training completes.
        callbacks.append(keras.callbacks.BackupAndRestore(backup_dir=backup_dir))
    return callbacks + list(extra)


def backup_dir_for(backup_root: Optional[str], key: Mapping[str, Any]) -> Optional[str]:
    """A folder under `backup_root` named by what the training depends on, so a retried Trainer with the
    same inputs and settings finds its backup and a different one never does."""
    if not backup_root:
        return None
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return os.path.join(backup_root, digest)


class BackupMirror(keras.callbacks.Callback):
    """Copies BackupAndRestore's local folder to an object store after every epoch (TF has no S3 file
    system), so a Trainer pod that is retried resumes from the store. Runs after BackupAndRestore's save."""

    def __init__(self, local_dir: str, remote_dir: str):
        super().__init__()
        self.local_dir, self.remote_dir = local_dir, remote_dir

    def on_epoch_end(self, epoch, logs=None):
        if not os.path.isdir(self.local_dir):
            return
        local = object_store.list_files(self.local_dir)
        # The checkpoint index files last: a pod killed mid-copy leaves the previous epoch's index pointing at
        # the previous epoch's files, which are still there; those go once the new index is up.
        for rel in sorted(local, key=lambda r: os.path.basename(r) == "checkpoint"):
            object_store.upload(os.path.join(self.local_dir, rel), f"{self.remote_dir}/{rel}")
        for rel in set(object_store.list_files(self.remote_dir)) - set(local):
            object_store.delete(f"{self.remote_dir}/{rel}")


def local_backup(backup_dir: Optional[str], scratch: str) -> Tuple[Optional[str], List[keras.callbacks.Callback]]:
    """The folder BackupAndRestore writes and the callbacks that keep it: `backup_dir` itself on a file system
    TF can write (local, mounted, gs://), else a folder under `scratch` restored from and mirrored to it."""
    if not object_store.tf_cannot_read(backup_dir):
        return backup_dir, []
    local = os.path.join(scratch, "backup")
    if object_store.exists(backup_dir):
        object_store.download(backup_dir, local)
        logging.info("Trainer backup restored from %s", backup_dir)
    return local, [BackupMirror(local, backup_dir)]
