"""A pipeline compiled with `--workers 2`, run task by task as open-source KFP runs it (tests/kfp_harness.py),
its Trainer step creating a TFJob through a stand-in Kubernetes API with the Training Operator's controller on
127.0.0.1 (tests/k8s_server.py: each replica a local process with the TF_CONFIG the operator gives it, its own
file system, the object store's secret from the API server's secrets), the store moto's S3 server.

Runs, on the session's pool of long runs (tests/conftest.py's `long_runs`), of one compiled spec:
1. trained by a Chief and a Worker, evaluated and pushed: the model serves;
2. the Worker killed (SIGKILL) once it trains: the step fails with one line naming it, nothing is pushed.
A KFP retry of the step (not emulated by the harness) would resume from the chief's backup, as a rerun of a local
run does (tests/pipeline/test_workers_e2e.py, the same executor and backup).
"""

import json
import os
import sys

import pytest

from tests import crd_check, helpers
from tests.k8s_server import FakeKube
from tests.kfp_harness import LocalKfp
from tests.pipeline.conftest import FORK_STEPS, kubeflow_config
from tfxflow.components import names, object_store
from tfxflow.components.training.cluster import ClusterConfig
from tfxflow.pipeline.config import TrainingConfig
from tfxflow.pipeline.kfp import compiler as kf
from tfxflow.pipeline.kfp import training_job

pytestmark = pytest.mark.e2e

BUCKET = "mlpipeline"
ROOT = f"minio://{BUCKET}/workers/v2/artifacts"
NAMESPACE = "team-a"
TRAINING = '"strategy": "MultiWorkerMirroredStrategy"'  # the training record's line: the worker trains


def jobs(base, s3_server):
    """Uploads a taxi sample, compiles the spec and returns ({run name: run}, details) (tests/conftest.py)."""
    pod_env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    with helpers.environment(s3_server.env):
        object_store.clear_client_cache()
        s3_server.create_bucket(BUCKET)
        (sample,) = helpers.write_taxi_samples([(str(base / "sample"), 1500)], seed=13)
        data = f"minio://{BUCKET}/workers/data/day1"
        object_store.upload(sample, data)
        serving = str(base / "serving-claim")
        config = kubeflow_config(
            ROOT,
            pipeline_name="taxi-workers",
            data_root=data,
            serving_dir=f"{serving}/models",
            serving_mount=serving,
            s3_endpoint=s3_server.endpoint,
            gpus=0,
            node_selector=(),
            tolerations=(),
            mlflow_secret="",
            tracking=False,
            beam_mode="in_memory",
            allowed_anomaly_types=(),
            training=TrainingConfig(
                train_steps=40, batch_size=64, eval_every_steps=20, cluster=ClusterConfig(workers=2)
            ),
        )
        spec = kf.compile_pipeline(config, str(base / "taxi-workers.yaml")).path
    object_store.clear_client_cache()
    secrets = {kf.OBJECT_STORE_SECRET: {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}}

    def run(name, kill_when=None):
        def job():
            os.makedirs(base / name, exist_ok=True)
            kube = FakeKube(
                str(base / name / "pods"), python=sys.executable, base_env=pod_env, secrets=secrets, kill_when=kill_when
            ).start()
            try:
                kubeconfig = kube.kubeconfig(str(base / name / "kubeconfig"), namespace=NAMESPACE)
                kfp = LocalKfp(
                    str(base / name / "kfp"),
                    s3_env=s3_server.env,
                    base_env=pod_env,
                    secrets=secrets,
                    fork_steps=FORK_STEPS,
                    env={"KUBECONFIG": kubeconfig},
                )
                result = kfp.run(spec, parameters={"data_root": data}, pipeline_root=ROOT)
                pods = {
                    pod.name: open(pod.log_path, encoding="utf-8", errors="replace").read()
                    for job in kube.jobs.values()
                    for pod in [p for _, _, p in job.pods] + job.deleted
                }
                return {
                    "run": result,
                    "created": list(kube.created),
                    "killed": list(kube.killed),
                    "pods": pods,
                    "versions": helpers.pushed_versions(config.serving_dir, "taxi"),
                }
            finally:
                kube.stop()

        return job

    def both():  # one after the other: the second compares what the first pushed
        return {"trained": run("trained")(), "killed": run("killed", kill_when=("-worker-0", TRAINING))()}

    return {"runs": both}, {"config": config, "s3": s3_server}


@pytest.fixture(scope="module")
def runs(long_runs):
    details = long_runs.details("kfp-workers")
    results = long_runs.results("kfp-workers")["runs"]
    with helpers.environment(details["s3"].env):  # the tests read the runs' outputs from the store
        object_store.clear_client_cache()
        yield {**results, **details}
    object_store.clear_client_cache()


def test_two_workers_train_in_a_tfjob_and_the_model_is_pushed(runs):
    trained = runs["trained"]
    run = trained["run"]
    assert run.state == "SUCCEEDED", run.log(run.failed_task)[-4000:] if run.failed_task else ""
    assert len(trained["versions"]) == 1
    # The TFJob the step created, as the API server accepted it: valid against the Training Operator's CRD.
    (job,) = trained["created"]
    assert crd_check.problems(job, "TFJob") == []
    assert job["metadata"]["namespace"] == NAMESPACE
    replicas = job["spec"]["tfReplicaSpecs"]
    assert (replicas["Chief"]["replicas"], replicas["Worker"]["replicas"]) == (1, 1)
    name = job["metadata"]["name"]
    log = run.log(names.TRAINER)
    assert f"created TFJob {NAMESPACE}/{name}: 2 workers" in log and f"TFJob {NAMESPACE}/{name} succeeded" in log
    assert "[chief] " in log and "Trainer chief 0: 2 workers joined, 2 replicas" in log
    # The chief wrote the outputs, the worker trained into a temporary folder and published nothing.
    chief, worker = trained["pods"][f"{name}-chief-0"], trained["pods"][f"{name}-worker-0"]
    assert "tfxflow: replica: output model:" in chief and "tfxflow: replica: output" not in worker
    assert "Trainer worker 0 of 2: outputs to a temporary folder" in worker
    model_run = run.task_outputs(names.TRAINER, "model_run")[0]
    info = json.loads(object_store.read_bytes(f"{model_run}/training_info.json"))
    assert (info["strategy"], info["workers"], info["replicas"], info["global_batch"]) == (
        "MultiWorkerMirroredStrategy",
        2,
        2,
        128,
    )
    assert 0.5 < info["history"]["val_binary_accuracy"][-1] <= 1.0
    # The Evaluator and the Pusher took the step's Model artifact as from a one-pod Trainer.
    assert run.tasks[names.PUSHER].state == "SUCCEEDED"
    assert object_store.exists(f"{run.task_outputs(names.TRAINER, 'model')[0]}/Format-Serving/saved_model.pb")


def test_a_killed_worker_fails_the_step_naming_it_and_nothing_is_pushed(runs):
    killed = runs["killed"]
    run = killed["run"]
    assert run.state == "FAILED" and run.failed_task == names.TRAINER, [(n, t.state) for n, t in run.tasks.items()]
    (job,) = killed["created"]
    name = job["metadata"]["name"]
    assert killed["killed"] == [f"{name}-worker-0"]
    errors = [line for line in run.log(names.TRAINER).splitlines() if line.startswith("error: ")]
    assert errors[0].startswith(
        f"error: TFJob {NAMESPACE}/{name} failed: worker 0 (pod {name}-worker-0) was killed by SIGKILL (exit code 137)"
    ), errors
    assert errors[0].endswith("; nothing was pushed")
    for step in (names.EVALUATOR, names.PUSHER):
        assert run.tasks[step].state == "NOT_RUN", step
    assert killed["versions"] == runs["trained"]["versions"]  # the served model is untouched
    assert training_job.LABEL in job["metadata"]["labels"]
