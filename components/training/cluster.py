"""The Trainer on several workers: the `cluster` settings, this process's place in the cluster (TF_CONFIG, or
Vertex AI's CLUSTER_SPEC), the strategy across workers, and the bounded wait for them to join.

Every worker runs the same Trainer executor with its own TF_CONFIG (set by the local launcher,
`local_cluster.py`, or by the cluster's training operator). The chief (the `chief` task, else worker 0) writes
the Trainer's outputs; the others write theirs to temporary folders that are removed (`executor.py`).

No TensorFlow at import: the CLI reads the settings from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from absl import logging

from tfxflow.components.settings import at_least, json_value, setting, strict_fields

if TYPE_CHECKING:
    import tensorflow as tf

COLLECTIVES = ("auto", "ring", "nccl")
JOIN_WATCH = "tfxflow.components.training.join_watch"
JOIN_FAILURES = ("did not join within", "did not form within")  # the words of join_report's line
TF_CONFIG = "TF_CONFIG"
CLUSTER_SPEC = "CLUSTER_SPEC"  # Vertex AI's custom training: worker pools, workerpool0 the chief


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """How many worker processes train the model together: the `cluster` section of the Trainer's custom_config
    (present only with several workers) and its flags."""

    workers: int = setting(
        1,
        metavar="N",
        help="train with N worker processes together (MultiWorkerMirroredStrategy), on this machine on loopback "
        "(`run`); --batch-size stays per replica, so the global batch grows with the workers",
        check=at_least(1),
    )
    collective: str = setting(
        "auto",
        choices=COLLECTIVES,
        help="the all-reduce across workers: auto (TensorFlow picks: NCCL on GPUs), ring (gRPC), nccl",
    )
    join_timeout_s: int = setting(
        300,
        flag="--worker-join-timeout",
        metavar="SECONDS",
        help="end the Trainer, naming the missing workers, when not all joined within this time",
        check=at_least(1),
    )

    def __post_init__(self):
        if self.workers < 1 or self.join_timeout_s < 1:
            raise ValueError("workers and join_timeout_s must be >= 1")
        if self.collective not in COLLECTIVES:
            raise ValueError(f"collective must be one of {COLLECTIVES}, got '{self.collective}'")

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> "ClusterConfig":
        """The inverse of `to_dict` ({} or None: one worker); raises ValueError naming a key it does not know."""
        return cls(**strict_fields(cls, data or {}, "custom_config['cluster']"))


@dataclasses.dataclass(frozen=True)
class Role:
    """This process's task in the cluster: its type and index, every task's address, and whether it is the
    chief (the one that writes the outputs)."""

    task_type: str
    index: int
    cluster: Mapping[str, List[str]]

    @property
    def name(self) -> str:
        return f"{self.task_type} {self.index}"

    @property
    def is_chief(self) -> bool:
        # TF's rule (multi_worker_util.is_chief): the chief task, else worker 0 where there is no chief.
        if self.task_type == "chief":
            return True
        return self.task_type == "worker" and self.index == 0 and "chief" not in self.cluster

    @property
    def workers(self) -> int:
        return len(self.cluster.get("chief", [])) + len(self.cluster.get("worker", []))

    def peers(self) -> List[Tuple[str, str]]:
        """(task name, address) of every other training task."""
        found = []
        for task_type in ("chief", "worker"):
            for index, address in enumerate(self.cluster.get(task_type, [])):
                if (task_type, index) != (self.task_type, self.index):
                    found.append((f"{task_type} {index}", address))
        return found


# CLUSTER_SPEC's task types as TF_CONFIG's: Vertex AI's worker pools (workerpool0 the primary replica), and the
# names AI Platform used and Vertex keeps where only the primary replica runs (as TFX's Vertex Tuner reads them).
_SPEC_TYPES = {"workerpool0": "chief", "chief": "chief", "master": "chief", "workerpool1": "worker", "worker": "worker"}


def tf_config_from_cluster_spec(cluster_spec: str) -> str:
    """CLUSTER_SPEC (Vertex AI, AI Platform) as TF_CONFIG: the primary replica is the chief, the second pool the
    workers; pools 2 and 3 (parameter servers, evaluators) take no part in MultiWorkerMirroredStrategy."""
    spec = json.loads(cluster_spec)
    cluster: Dict[str, List[str]] = {}
    for pool, addresses in spec.get("cluster", {}).items():
        if pool in _SPEC_TYPES:
            cluster.setdefault(_SPEC_TYPES[pool], []).extend(addresses)
    task = spec.get("task", {})
    kind = _SPEC_TYPES.get(task.get("type", ""))
    if kind is None:
        raise ValueError(f"CLUSTER_SPEC: task type {task.get('type')!r} is not a training replica (workerpool0 or 1)")
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": int(task.get("index", 0))}})


def role(environ: Mapping[str, str] = os.environ) -> Optional[Role]:
    """This process's task when TF_CONFIG (or CLUSTER_SPEC) names several training tasks; None otherwise."""
    raw = environ.get(TF_CONFIG) or (
        tf_config_from_cluster_spec(environ[CLUSTER_SPEC]) if environ.get(CLUSTER_SPEC) else ""
    )
    if not raw:
        return None
    config = json.loads(raw)
    cluster = {k: list(v) for k, v in config.get("cluster", {}).items() if k in ("chief", "worker")}
    task = config.get("task", {})
    found = Role(task.get("type", "worker"), int(task.get("index", 0)), cluster)
    return found if found.workers > 1 else None


def adopt_cluster_spec(environ=os.environ) -> None:
    """Sets TF_CONFIG from Vertex AI's CLUSTER_SPEC when only the latter is set: TensorFlow reads TF_CONFIG."""
    if not environ.get(TF_CONFIG) and environ.get(CLUSTER_SPEC):
        environ[TF_CONFIG] = tf_config_from_cluster_spec(environ[CLUSTER_SPEC])


def worker_count(environ: Mapping[str, str] = os.environ) -> int:
    """Training tasks in the cluster (chief included); 1 without one."""
    found = role(environ)
    return 1 if found is None else found.workers


def reachable(address: str, timeout_s: float = 2.0) -> bool:
    """Whether something accepts a TCP connection at `address` (host:port)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def join_report(me: Role, timeout_s: float) -> str:
    """The one line a worker gives when the cluster did not form within `timeout_s`: the peers that do not
    answer on their address, else all of them (up, but not in the same cluster)."""
    silent = [f"{name} ({address})" for name, address in me.peers() if not reachable(address)]
    if silent:
        return (
            f"Trainer {me.name}: {', '.join(silent)} did not join within {timeout_s:g} s (nothing answers at "
            f"{'its address' if len(silent) == 1 else 'their addresses'}); nothing was trained"
        )
    listed = ", ".join(f"{name} ({address})" for name, address in me.peers())
    return (
        f"Trainer {me.name}: the cluster did not form within {timeout_s:g} s: {listed} answer but did not join "
        "(another TF_CONFIG, or a worker still starting); nothing was trained"
    )


@contextlib.contextmanager
def join_deadline(me: Role, timeout_s: float) -> Iterator[None]:
    """Bounds the wait for the cluster in the block (creating MultiWorkerMirroredStrategy waits for every worker,
    without end by default): past `timeout_s`, a watcher process (`join_watch.py`) writes `join_report`'s line
    and ends this process. A process: TensorFlow holds Python's interpreter lock while it waits, so no thread of
    this one could."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", JOIN_WATCH, str(os.getpid()), str(timeout_s), json.dumps(dataclasses.asdict(me))],
        stdin=subprocess.PIPE,
    )
    try:
        yield
    finally:
        watcher.stdin.close()  # the wait is over: the watcher ends without a word
        watcher.wait()


def communication_options(collective: str) -> "tf.distribute.experimental.CommunicationOptions":
    import tensorflow as tf

    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[collective]
    return tf.distribute.experimental.CommunicationOptions(implementation=implementation)


def multi_worker_strategy(config: ClusterConfig, me: Role) -> "tf.distribute.Strategy":
    """MultiWorkerMirroredStrategy over the cluster, its all-reduce `config.collective`, waiting at most
    `config.join_timeout_s` for every worker (`join_deadline`)."""
    import tensorflow as tf

    logging.info("Trainer %s: waiting for %d workers (at most %d s)", me.name, me.workers, config.join_timeout_s)
    with join_deadline(me, config.join_timeout_s):
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=communication_options(config.collective)
        )
    logging.info("Trainer %s: %d workers joined, %d replicas", me.name, me.workers, strategy.num_replicas_in_sync)
    return strategy
