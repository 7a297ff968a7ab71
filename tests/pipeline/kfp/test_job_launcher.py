"""The Trainer step's launcher (pipeline/kfp/job_launcher.py) against a stand-in Kubernetes API with the Training
Operator's TFJob controller (tests/k8s_server.py, written from the operator's source), through the kubernetes
client, each replica a local process (tests/fake_replica.py: the replica's protocol without training), the
store moto's S3 server."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests import crd_check, helpers
from tests.k8s_server import FakeKube
from tfxflow.components import object_store
from tfxflow.pipeline.kfp import job_launcher, training_job
from tfxflow.pipeline.kfp.training_job import JobTemplate

pytestmark = pytest.mark.integration

BUCKET = "launcher"
SECRET = "store-credentials"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RBAC = os.path.join(REPO, "kubeflow", "training", "rbac.yaml")


@pytest.fixture
def cluster(tmp_path, s3_server):
    s3_server.create_bucket(BUCKET)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base_env["AWS_DEFAULT_REGION"] = "us-east-1"
    base_env["PYTHONPATH"] = REPO  # the stand-in replica is a module of the tests
    kube = FakeKube(
        str(tmp_path / "pods"),
        python=sys.executable,
        base_env=base_env,
        secrets={SECRET: {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}},
        grace_s=2.0,
        modules={"tfxflow.pipeline.kfp.entrypoint": "tests.fake_replica"},
    ).start()
    kubeconfig = kube.kubeconfig(str(tmp_path / "kubeconfig"), namespace="team-a")
    with helpers.environment({**s3_server.env, "KUBECONFIG": kubeconfig}):
        object_store.clear_client_cache()
        yield kube, s3_server
    kube.stop()
    object_store.clear_client_cache()


def _template(s3_server, workers=3, plan=None, **overrides) -> JobTemplate:
    env = [
        {"name": "AWS_ENDPOINT_URL", "value": s3_server.endpoint},
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "accesskey"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "secretkey"}}},
        {"name": "FAKE_REPLICA_PLAN", "value": json.dumps(plan or {})},
    ]
    values = dict(kind="tfjob", workers=workers, image="registry.local/tfxflow:1", env=tuple(env), pipeline_name="taxi")
    values.update(overrides)
    return JobTemplate(**values)


def _invocation(tmp_path, run: str = "run-1"):
    executor_input = {
        "outputs": {
            "artifacts": {"model": {"artifacts": [{"uri": f"minio://{BUCKET}/root/{run}/Trainer/u1/model"}]}},
            "outputFile": str(tmp_path / "kfp" / run / "output_metadata.json"),
        }
    }
    return ["--executor_class_path", "tfx.Executor", "--json_serialized_invocation_args", json.dumps(executor_input)]


def _launcher(template, invocation, out):
    from kubernetes import config

    kube = job_launcher.Kube(config.new_client_from_config(os.environ["KUBECONFIG"]))
    return job_launcher.Launcher(template, invocation, kube, out=out, poll_s=0.2)


@pytest.mark.current_lane  # the lane's kubernetes client against the same stand-in
def test_a_job_of_three_workers_trains_and_hands_kfp_the_chiefs_output(cluster, tmp_path, capsys):
    kube, s3 = cluster
    invocation = _invocation(tmp_path)
    launcher = _launcher(_template(s3), invocation, sys.stderr)
    assert launcher.run() == 0
    err = capsys.readouterr().err
    # The job the API server accepted: valid against the TFJob CRD, a Chief and two Workers in the kubeconfig's
    # namespace, each running the step's arguments behind the replica flag.
    (job,) = kube.created
    assert crd_check.problems(job, "TFJob") == []
    assert job["metadata"]["namespace"] == "team-a" and job["metadata"]["name"] == launcher.name
    replicas = job["spec"]["tfReplicaSpecs"]
    assert (replicas["Chief"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    assert replicas["Worker"]["template"]["spec"]["containers"][0]["args"] == ["--tfxflow_replica", *invocation]
    # KFP gets the chief's executor output file at the path it named, and the step's log the chief's lines.
    with open(json.loads(invocation[-1])["outputs"]["outputFile"], encoding="utf-8") as f:
        assert json.load(f)["parameterValues"] == {"trained_by": "chief 0"}
    assert "[chief] chief 0: step 2" in err and "[chief] chief 0: done" in err
    assert "worker 0: step" not in err  # only the chief's log is copied
    assert f"created TFJob team-a/{launcher.name}: 3 workers" in err
    assert f"TFJob team-a/{launcher.name} succeeded in" in err
    # Each replica had TF_CONFIG as the operator writes it: the cluster of both types, its own task.
    logs = {
        pod.name: open(pod.log_path, encoding="utf-8").read() for _, _, pod in kube.jobs[("team-a", launcher.name)].pods
    }
    assert sorted(logs) == [f"{launcher.name}-chief-0", f"{launcher.name}-worker-0", f"{launcher.name}-worker-1"]
    assert all("done" in log for log in logs.values())


def test_the_rbac_role_grants_every_call_the_launcher_makes(cluster, tmp_path):
    """kubeflow/training/rbac.yaml, held to the requests the launcher made of the API server."""
    kube, s3 = cluster
    assert _launcher(_template(s3, workers=2), _invocation(tmp_path), sys.stderr).run() == 0
    role = next(d for d in yaml.safe_load_all(open(RBAC, encoding="utf-8")) if d["kind"] == "Role")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    needed = set()
    for method, path in kube.requests:
        parts = path.strip("/").split("/")
        if parts[0] == "apis":  # /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>]
            group, resource, named = parts[1], parts[5], len(parts) > 6
        else:  # /api/v1/namespaces/<ns>/pods[/<name>[/log]]
            group, resource, named = "", "/".join(parts[4:5] + parts[6:7]), len(parts) > 5
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or ("get" if named else "list")
        needed.add((group, resource, verb))
    assert ("kubeflow.org", "tfjobs", "create") in needed and ("", "pods/log", "get") in needed
    assert needed <= granted, needed - granted


def test_a_failed_worker_fails_the_step_naming_it_and_stops_the_others(cluster, tmp_path, capsys):
    kube, s3 = cluster
    plan = {"worker 1": {"exit": 3, "say": "ValueError: the batch has no rows"}, "chief 0": {"after_s": 60}}
    invocation = _invocation(tmp_path)
    launcher = _launcher(_template(s3, plan=plan), invocation, sys.stderr)
    started = time.monotonic()
    assert launcher.run() == 1
    assert time.monotonic() - started < 30  # not the chief's 60 s
    err = capsys.readouterr().err
    (line,) = [entry for entry in err.splitlines() if entry.startswith("error:")]
    assert line == (
        f"error: TFJob team-a/{launcher.name} failed: worker 1 (pod {launcher.name}-worker-1) exited with 3: "
        "ValueError: the batch has no rows; nothing was pushed"
    )
    assert not os.path.exists(json.loads(invocation[-1])["outputs"]["outputFile"])
    job = kube.jobs[("team-a", launcher.name)]
    assert (
        job.status["conditions"][-1]["message"]
        == f"TFJob team-a/{launcher.name} has failed because 1 Worker replica(s) failed."
    )
    for pod in job.deleted:  # cleanPodPolicy Running: the chief and worker 0 were deleted, their processes ended
        pod.process.wait(10)
        assert pod.name != f"{launcher.name}-worker-1"


def test_a_worker_killed_by_a_signal_is_named_with_its_signal(cluster, tmp_path, capsys):
    kube, s3 = cluster
    plan = {"worker 0": {"signal": 9}, "chief 0": {"after_s": 60}}
    launcher = _launcher(_template(s3, workers=2, plan=plan), _invocation(tmp_path), sys.stderr)
    assert launcher.run() == 1
    assert f"worker 0 (pod {launcher.name}-worker-0) was killed by SIGKILL (exit code 137)" in capsys.readouterr().err


def test_a_job_past_its_deadline_fails_with_the_operators_reason(cluster, tmp_path, capsys):
    kube, s3 = cluster
    plan = {"chief 0": {"after_s": 60}, "worker 0": {"after_s": 60}}
    launcher = _launcher(_template(s3, workers=2, plan=plan, timeout_s=2), _invocation(tmp_path), sys.stderr)
    assert launcher.run() == 1
    assert (
        f"error: TFJob team-a/{launcher.name} failed: Job {launcher.name} has failed because it was active longer "
        "than specified deadline; nothing was pushed"
    ) in capsys.readouterr().err
    assert kube.created[0]["spec"]["runPolicy"]["activeDeadlineSeconds"] == 2


def test_a_restarted_launcher_follows_its_job_uses_a_succeeded_one_and_replaces_a_failed_one(cluster, tmp_path, capsys):
    kube, s3 = cluster
    invocation = _invocation(tmp_path)
    first = _launcher(_template(s3, workers=2, plan={"chief 0": {"after_s": 2}}), invocation, sys.stderr)
    first.start()
    second = _launcher(_template(s3, workers=2), invocation, sys.stderr)
    assert second.name == first.name and second.run() == 0
    assert len(kube.created) == 1  # followed, not created again
    assert f"following TFJob team-a/{first.name}, which this step created before its pod restarted (running)" in (
        capsys.readouterr().err
    )
    # Its pod restarted after the job succeeded: the job's output is used, nothing trains again.
    assert _launcher(_template(s3, workers=2), invocation, sys.stderr).run() == 0
    assert len(kube.created) == 1 and "(succeeded)" in capsys.readouterr().err
    # A job that failed is replaced.
    again = _invocation(tmp_path, "run-2")
    assert _launcher(_template(s3, workers=2, plan={"worker 0": {"exit": 2}}), again, sys.stderr).run() == 1
    replaced = _launcher(_template(s3, workers=2), again, sys.stderr)
    assert replaced.run() == 0 and len(kube.created) == 3
    assert f"replacing TFJob team-a/{replaced.name}, which had failed" in capsys.readouterr().err


def test_a_replica_that_cannot_start_ends_the_step_and_the_job(cluster, tmp_path, capsys):
    """A secret the pods name is missing: the kubelet keeps them Pending for ever; the step ends at once."""
    kube, s3 = cluster
    template = _template(s3, workers=2)
    missing = {"name": "MLFLOW_TRACKING_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mlflow", "key": "token"}}}
    template = JobTemplate(**{**template.__dict__, "env": (*template.env, missing)})
    launcher = _launcher(template, _invocation(tmp_path), sys.stderr)
    assert launcher.run() == 1
    err = capsys.readouterr().err
    (line,) = [entry for entry in err.splitlines() if entry.startswith("error:")]
    assert line == (
        f"error: TFJob team-a/{launcher.name}: chief 0 (pod {launcher.name}-chief-0) cannot start: "
        'CreateContainerConfigError: secret "mlflow" or its key "token" not found; nothing was pushed'
    )
    assert f"a replica cannot start: deleted TFJob team-a/{launcher.name}" in err
    assert kube.jobs == {}


def test_the_replicas_run_as_the_launchers_pod_and_the_job_is_owned_by_it(cluster, tmp_path):
    """The step's service account (its cloud identity) and pull secrets reach the replicas; the job goes with the
    step's pod should the launcher be killed before it could delete it."""
    kube, s3 = cluster
    kube.add_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "taxi-xyz-trainer-launcher", "namespace": "team-a", "uid": "0b7c-uid"},
            "spec": {
                "serviceAccountName": "default-editor",
                "imagePullSecrets": [{"name": "registry"}],
                "containers": [{"name": "main", "image": "registry.local/tfxflow:1"}],
            },
        }
    )
    from kubernetes import config

    launcher = job_launcher.Launcher(
        _template(s3, workers=2),
        _invocation(tmp_path),
        job_launcher.Kube(config.new_client_from_config(os.environ["KUBECONFIG"])),
        out=sys.stderr,
        poll_s=0.2,
        environ={"KFP_POD_NAME": "taxi-xyz-trainer-launcher"},
    )
    assert launcher.run() == 0
    (job,) = kube.created
    assert crd_check.problems(job, "TFJob") == []
    assert job["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "taxi-xyz-trainer-launcher", "uid": "0b7c-uid"}
    ]
    for replica in job["spec"]["tfReplicaSpecs"].values():
        spec = replica["template"]["spec"]
        assert spec["serviceAccountName"] == "default-editor" and spec["imagePullSecrets"] == [{"name": "registry"}]


def test_a_cancelled_step_deletes_its_job_and_the_replicas_end(cluster, tmp_path):
    """The launcher as KFP runs it (its own process, the kubeconfig from KUBECONFIG), stopped with SIGTERM as
    Argo stops a cancelled run's pod."""
    kube, s3 = cluster
    template = _template(s3, workers=2, plan={"chief 0": {"after_s": 120}, "worker 0": {"after_s": 120}})
    argv = training_job.launcher_args(template, _invocation(tmp_path))
    log = tmp_path / "launcher.log"
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", training_job.LAUNCHER_MODULE, *argv], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while "[chief] chief 0: step 2" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        (job,) = kube.jobs.values()
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == job_launcher.EXIT_CANCELLED, log.read_text()
    finally:
        process.kill()
    assert kube.jobs == {}
    assert f"the step was stopped: deleted TFJob team-a/{job.name}" in log.read_text()
    for _, _, pod in job.pods:
        assert pod.process.wait(10) != 0


def test_an_unreachable_api_server_is_one_line(tmp_path, monkeypatch):
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    template = JobTemplate(kind="tfjob", workers=2, image="i")
    argv = training_job.launcher_args(template, _invocation(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", training_job.LAUNCHER_MODULE, *argv], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = [entry for entry in result.stderr.splitlines() if entry.startswith("error:")]
    assert line.startswith("error: training job: the Kubernetes API at http://127.0.0.1:9 could not be reached")
