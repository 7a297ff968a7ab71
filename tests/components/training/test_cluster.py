"""The Trainer's place in a cluster: TF_CONFIG and CLUSTER_SPEC read as TensorFlow reads them, the chief as
TensorFlow names it, the bounded wait for the workers, and the local launcher's TF_CONFIGs."""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.distribute.cluster_resolver import TFConfigClusterResolver

from tfxflow.components.training import cluster, local_cluster


def _env(cluster_spec, task_type, index):
    return {"TF_CONFIG": json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index}})}


CHIEF_AND_WORKERS = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
WORKERS_ONLY = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}


@pytest.mark.parametrize(
    ("spec", "task_type", "index"),
    [(CHIEF_AND_WORKERS, "chief", 0), (CHIEF_AND_WORKERS, "worker", 0), (CHIEF_AND_WORKERS, "worker", 1)]
    + [(WORKERS_ONLY, "worker", 0), (WORKERS_ONLY, "worker", 1)],
)
def test_the_chief_and_the_worker_count_are_tensorflows(spec, task_type, index, monkeypatch):
    env = _env(spec, task_type, index)
    me = cluster.role(env)
    monkeypatch.setenv("TF_CONFIG", env["TF_CONFIG"])
    resolver = TFConfigClusterResolver()
    assert (me.task_type, me.index) == (resolver.task_type, resolver.task_id)
    assert me.is_chief is multi_worker_util.is_chief(resolver.cluster_spec(), task_type, index)
    assert me.workers == multi_worker_util.worker_count(resolver.cluster_spec(), task_type)
    assert cluster.worker_count(env) == me.workers
    assert [address for _, address in me.peers()] == [
        a for a in spec.get("chief", []) + spec["worker"] if a != spec.get(task_type)[index]
    ]


def test_one_task_or_none_is_no_cluster():
    assert cluster.role({}) is None and cluster.worker_count({}) == 1
    assert cluster.role(_env({"worker": ["127.0.0.1:1"]}, "worker", 0)) is None
    # A parameter server or evaluator is not a training worker of MultiWorkerMirroredStrategy.
    assert cluster.role(_env({"chief": ["a:1"], "ps": ["b:1"]}, "chief", 0)) is None


def test_vertex_cluster_spec_becomes_the_tf_config_tensorflow_reads(monkeypatch):
    # Vertex AI's format (cloud.google.com/vertex-ai/docs/training/distributed-training#cluster-spec-format).
    spec = {
        "cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"], "workerpool1": ["w-0:2222", "w-1:2222"]},
        "environment": "cloud",
        "task": {"type": "workerpool1", "index": 1},
        "job": "{}",
    }
    env = {"CLUSTER_SPEC": json.dumps(spec)}
    cluster.adopt_cluster_spec(env)
    monkeypatch.setenv("TF_CONFIG", env["TF_CONFIG"])
    resolver = TFConfigClusterResolver()
    assert resolver.cluster_spec().as_dict() == {
        "chief": ["cmle-training-workerpool0-ab-0:2222"],
        "worker": ["w-0:2222", "w-1:2222"],
    }
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    assert cluster.role(env).workers == 3 and not cluster.role(env).is_chief
    # Where only the primary replica runs, Vertex names it as AI Platform did (as TFX's Vertex Tuner reads it).
    alone = json.dumps({"cluster": {"chief": ["a:1"]}, "task": {"type": "chief", "index": 0}})
    assert json.loads(cluster.tf_config_from_cluster_spec(alone))["task"] == {"type": "chief", "index": 0}
    with pytest.raises(ValueError, match="'workerpool2' is not a training replica"):
        cluster.tf_config_from_cluster_spec(json.dumps({"cluster": {}, "task": {"type": "workerpool2"}}))
    # TF_CONFIG, when set, is the one read.
    kept = {"TF_CONFIG": "{}", "CLUSTER_SPEC": json.dumps(spec)}
    cluster.adopt_cluster_spec(kept)
    assert kept["TF_CONFIG"] == "{}"


def test_a_worker_that_never_joins_is_named_and_the_waiting_process_ended():
    """The watcher ends the waiting process (a sleeping one here) with the line naming the missing worker; a wait
    that ends in time leaves it alone."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    up, down = (f"127.0.0.1:{s.getsockname()[1]}" for s in (listening, closed))
    closed.close()  # nothing answers there now
    me = cluster.Role("chief", 0, {"chief": ["127.0.0.1:1"], "worker": [up, down]})
    try:
        waiting = subprocess.Popen(["sleep", "60"])
        watcher = subprocess.Popen(
            [sys.executable, "-m", cluster.JOIN_WATCH, str(waiting.pid), "0.5", json.dumps(dataclasses.asdict(me))],
            stdin=subprocess.PIPE,  # left open until the time runs out: the cluster never forms
            stderr=subprocess.PIPE,
            text=True,
        )
        assert waiting.wait(timeout=30) == -signal.SIGKILL
        assert watcher.wait(timeout=30) == 0
        assert watcher.stderr.read().strip() == (
            f"Trainer chief 0: worker 1 ({down}) did not join within 0.5 s (nothing answers at its address); "
            "nothing was trained"
        )
        # Every peer answers but the cluster does not form: all are named.
        report = cluster.join_report(cluster.Role("worker", 1, {"chief": [up], "worker": [up, up]}), 5)
        assert report.startswith(f"Trainer worker 1: the cluster did not form within 5 s: chief 0 ({up}), worker 0")
    finally:
        listening.close()
    # A cluster that forms in time: the watcher ends without a word, and this process goes on.
    started = time.monotonic()
    with cluster.join_deadline(me, 30):
        pass
    assert time.monotonic() - started < 10


def test_the_local_launchers_tf_configs_are_a_chief_and_workers_on_loopback(monkeypatch):
    configs = local_cluster.tf_configs([4000, 4001, 4002])
    roles = []
    for config in configs:
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        resolver = TFConfigClusterResolver()
        assert resolver.cluster_spec().as_dict() == {
            "chief": ["127.0.0.1:4000"],
            "worker": ["127.0.0.1:4001", "127.0.0.1:4002"],
        }
        roles.append((resolver.task_type, resolver.task_id, cluster.role({"TF_CONFIG": json.dumps(config)}).is_chief))
    assert roles == [("chief", 0, True), ("worker", 0, False), ("worker", 1, False)]
    assert len(set(local_cluster.free_ports(3))) == 3


def test_gpus_are_shared_out_among_local_workers_when_there_are_enough():
    assert local_cluster.device_env(1, 2, 4) == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert local_cluster.device_env(0, 3, 3) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert local_cluster.device_env(0, 2, 1) == {} and local_cluster.device_env(0, 2, 0) == {}


def test_a_failed_workers_exit_and_error_line_are_what_the_step_reports():
    assert local_cluster.exit_text(-9) == "was killed by SIGKILL"
    assert local_cluster.exit_text(1) == "exited with status 1"
    log = ["INFO training", "Traceback (most recent call last):", '  File "x.py"', "ValueError: no rows\n", "\n"]
    assert local_cluster.last_error(log) == "ValueError: no rows"
    assert local_cluster.last_error(["one", "two"]) == "two" and local_cluster.last_error([]) == "(no output)"


def test_the_cluster_settings_round_trip_and_refuse_what_cannot_work():
    config = cluster.ClusterConfig(workers=3, collective="ring", join_timeout_s=60)
    assert cluster.ClusterConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert cluster.ClusterConfig.from_dict(None) == cluster.ClusterConfig()
    with pytest.raises(ValueError, match="collective must be one of"):
        cluster.ClusterConfig(collective="mpi")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['nodes'\]"):
        cluster.ClusterConfig.from_dict({"nodes": 2})


JOIN = """
import json, os, sys
from tfxflow.components.training import cluster, hardware
hardware.use_keras_2()
hardware.make_strategy(cluster=cluster.ClusterConfig(join_timeout_s=int(sys.argv[1])))
print("joined")
"""


@pytest.mark.integration
@pytest.mark.current_lane
def test_a_trainer_whose_peer_never_starts_ends_naming_it_instead_of_waiting():
    """A real TensorFlow worker creating MultiWorkerMirroredStrategy for a cluster of two whose other worker never
    starts: TensorFlow would wait without end; the Trainer ends with the line naming the missing worker."""
    mine, missing = (f"127.0.0.1:{port}" for port in local_cluster.free_ports(2))
    tf_config = {"cluster": {"chief": [mine], "worker": [missing]}, "task": {"type": "chief", "index": 0}}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", JOIN, "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CONFIG": json.dumps(tf_config), "TF_CPP_MIN_LOG_LEVEL": "2"},
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert "joined" not in done.stdout and time.monotonic() - started < 60
    assert (
        f"Trainer chief 0: worker 0 ({missing}) did not join within 5 s (nothing answers at its address); "
        "nothing was trained"
    ) in done.stderr.splitlines()
