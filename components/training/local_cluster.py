"""Several Trainer workers on this machine: one process each (a chief and `workers - 1` workers, each a fresh
TensorFlow runtime with its own TF_CONFIG on loopback), running the Trainer's executor on the same inputs
(`worker.py`). This process relays their logs and waits; when one fails, the others are stopped and the
step fails naming the worker, its exit and its last error line.

On two cores several processes prove that the workers train one model together, not that they are faster.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Type

from absl import logging
from tfx import types
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import json_utils

from tfxflow.components.training import cluster as cluster_lib

WORKER_MODULE = "tfxflow.components.training.worker"
STOP_GRACE_S = 10  # a stopped worker's time to exit before it is killed
ABORTED = "Collective ops is aborted"  # TensorFlow's error in the workers that outlive a failed one


class WorkerFailed(RuntimeError):
    """A Trainer worker ended with an error; the message names it, its exit and its last error line."""


def free_ports(count: int) -> List[int]:
    """`count` TCP ports free on loopback now."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_configs(ports: Sequence[int]) -> List[Dict[str, Any]]:
    """Each process's TF_CONFIG: the first the chief, the others workers, as a TFJob's Chief and Workers."""
    addresses = [f"127.0.0.1:{port}" for port in ports]
    cluster = {"chief": addresses[:1], **({"worker": addresses[1:]} if len(addresses) > 1 else {})}
    configs = [{"cluster": cluster, "task": {"type": "chief", "index": 0}}]
    configs += [{"cluster": cluster, "task": {"type": "worker", "index": i}} for i in range(len(addresses) - 1)]
    return configs


def device_env(index: int, workers: int, gpus: int) -> Dict[str, str]:
    """The GPUs worker `index` sees: an equal share of this machine's when there are at least as many as
    workers; else all of them, shared (their memory grows as needed)."""
    if gpus < workers:
        return {}
    share = gpus // workers
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in range(index * share, (index + 1) * share))}


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def last_error(lines: Sequence[str]) -> str:
    """The line of a worker's log that says what went wrong: the last one naming an error, else its last."""
    for line in reversed(lines):
        text = line.strip()
        if text and ("Error" in text or any(words in text for words in cluster_lib.JOIN_FAILURES)):
            return text[-400:]
    return next((line.strip()[-400:] for line in reversed(lines) if line.strip()), "(no output)")


class _Worker:
    def __init__(self, name: str, process: subprocess.Popen, log_path: str):
        self.name, self.process, self.log_path = name, process, log_path
        self.tail: Deque[str] = collections.deque(maxlen=200)
        self.relay = threading.Thread(target=self._relay, name=f"trainer-{name}", daemon=True)
        self.relay.start()

    def _relay(self) -> None:
        with open(self.log_path, "w", encoding="utf-8") as log:
            for line in self.process.stdout:
                log.write(line)
                self.tail.append(line)
                logging.info("[Trainer %s] %s", self.name, line.rstrip())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()


def train(
    executor_class: Type,
    input_dict: Dict[str, List[types.Artifact]],
    output_dict: Dict[str, List[types.Artifact]],
    exec_properties: Dict[str, Any],
    config: cluster_lib.ClusterConfig,
    tmp_dir: str,
    gpus: Optional[int] = None,
) -> None:
    """Runs `executor_class` in `config.workers` processes on loopback and waits for them; raises WorkerFailed
    naming the first worker that failed (the others are stopped). The invocation is written to `tmp_dir`."""
    invocation = os.path.join(tmp_dir, "trainer-invocation.json")
    with open(invocation, "w", encoding="utf-8") as f:
        json.dump(
            {
                "executor_class": f"{executor_class.__module__}.{executor_class.__qualname__}",
                "input_dict": artifact_utils.jsonify_artifact_dict(input_dict),
                "output_dict": artifact_utils.jsonify_artifact_dict(output_dict),
                "exec_properties": json_utils.dumps(exec_properties),
            },
            f,
        )
    if gpus is None:
        import tensorflow as tf  # the process's TensorFlow: listing devices does not initialise them

        gpus = len(tf.config.list_physical_devices("GPU"))
    configs = tf_configs(free_ports(config.workers))
    cluster = configs[0]["cluster"]
    logging.info(
        "Trainer: %d workers on this machine (%s), %s",
        config.workers,
        ", ".join(cluster["chief"] + cluster.get("worker", [])),
        f"{gpus // config.workers} GPU(s) each" if gpus >= config.workers else "sharing this machine's devices",
    )
    # The workers' own logs, beside the chief's TensorBoard logs in the model run (kept when the step fails).
    logs = os.path.join(artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_RUN_KEY]), "workers")
    os.makedirs(logs, exist_ok=True)
    workers = []
    started = time.monotonic()
    try:
        for index, tf_config in enumerate(configs):
            task = tf_config["task"]
            name = f"{task['type']} {task['index']}"
            env = {
                **os.environ,
                cluster_lib.TF_CONFIG: json.dumps(tf_config),
                **device_env(index, config.workers, gpus),
                "PYTHONUNBUFFERED": "1",
            }
            process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, invocation],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=env,
            )
            workers.append(_Worker(name, process, os.path.join(logs, f"{name.replace(' ', '-')}.log")))
        _wait(workers)
    finally:
        for worker in workers:
            worker.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for worker in workers:
            try:
                worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
            worker.relay.join(timeout=5)
    logging.info("Trainer: %d workers finished in %.1f s", config.workers, time.monotonic() - started)


def _wait(workers: List[_Worker]) -> None:
    while True:
        codes = [w.process.poll() for w in workers]
        failed = [(w, code) for w, code in zip(workers, codes, strict=True) if code not in (None, 0)]
        if failed:
            for w, _ in failed:
                w.relay.join(timeout=5)
            # The cause, not a worker whose collectives aborted after it (seen in the same poll).
            failed.sort(key=lambda found: ABORTED in last_error(found[0].tail))
            worker, code = failed[0]
            line = last_error(worker.tail)
            # A worker whose wait for the others ran out is ended by its watcher (cluster.join_deadline).
            how = "stopped waiting" if any(w in line for w in cluster_lib.JOIN_FAILURES) else exit_text(code)
            raise WorkerFailed(
                f"Trainer {worker.name} (pid {worker.process.pid}) {how}: {line} (its log: {worker.log_path}); "
                "the other workers were stopped, nothing was pushed"
            )
        if all(code == 0 for code in codes):
            return
        time.sleep(0.2)
