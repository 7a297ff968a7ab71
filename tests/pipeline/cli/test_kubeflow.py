"""`tfxflow kubeflow`: compile from the command line, check the spec; the Beam flags of compile; deprecated
spellings."""

import pytest
import yaml

from tests import helpers
from tests.pipeline.cli.test_run_command import _beam
from tfxflow.components import lane


@pytest.mark.integration
def test_kubeflow_compile_from_the_command_line(tmp_path):
    spec = tmp_path / "taxi.yaml"
    result = helpers.run_cli(
        "kubeflow",
        "compile",
        "--image",
        "registry.example.com/ml/tfxflow:0.1.0",
        # A profile's run on KFP 2.15 (profiles' own prefixes, the store still named minio-service): the root
        # defaults to the profile's.
        "--namespace",
        "kubeflow-user-example-com",
        "--kfp-version",
        "2.15",
        "--data-root",
        "minio://mlpipeline/private/kubeflow-user-example-com/data/taxi",
        "--mlflow-uri",
        "http://mlflow.mlflow.svc:5000",
        "--train-steps",
        "700",
        "--gpus",
        "4",
        "--node-selector",
        "cloud.google.com/gke-accelerator=nvidia-h100-80gb",
        "--output",
        str(spec),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # TensorFlow's start-up chatter goes to a log, kept only on failure
    assert f"spec:       {spec}" in result.stdout
    # The lane that compiled it, and the image build argument its steps need (kubeflow/Dockerfile's LANE).
    needs = f"{lane.name()} (TFX {lane.tfx_version()}): its steps run in an image built with --build-arg LANE="
    needs += f"{lane.name()} (kubeflow/Dockerfile)"
    assert f"lane:       {needs}\n" in result.stdout and f"# lane: {needs}\n" in spec.read_text()
    assert "root:       minio://mlpipeline/private-artifacts/kubeflow-user-example-com/v2/artifacts\n" in result.stdout
    pipeline_spec = next(d for d in yaml.safe_load_all(spec.read_text()) if d)
    trainer = pipeline_spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]
    assert {"name": "AWS_ENDPOINT_URL", "value": "http://minio-service.kubeflow:9000"} in trainer["env"]
    assert (
        "GPUs 4 x nvidia.com/gpu, node selector {'cloud.google.com/gke-accelerator': 'nvidia-h100-80gb'}"
        in result.stdout
    )
    assert "train_args='{\"num_steps\": 700}'" in result.stdout
    assert spec.stat().st_size > 10_000
    assert "serving:    /serving/models on claim tf-serving-models" in result.stdout
    checked = helpers.run_cli("kubeflow", "check", str(spec), timeout=120)
    assert checked.returncode == 0 and "admitted" in checked.stdout, checked.stderr
    # What TFX's V2 runner emits for a resolver node, which the open-source backend refuses at run creation.
    documents = [d for d in yaml.safe_load_all(spec.read_text()) if d]
    documents[0]["deploymentSpec"]["executors"]["Evaluator_executor"] = {"resolver": {"outputArtifactQueries": {}}}
    resolver_spec = tmp_path / "with-resolver.yaml"
    resolver_spec.write_text(yaml.safe_dump_all(documents))
    refused_spec = helpers.run_cli("kubeflow", "check", str(resolver_spec), timeout=120)
    assert refused_spec.returncode == 1 and "Traceback" not in refused_spec.stderr
    assert "Evaluator_executor" in refused_spec.stderr and "non-container and non-importer" in refused_spec.stderr
    missing = helpers.run_cli("kubeflow", "check", str(tmp_path / "missing.yaml"), timeout=120)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"{tmp_path / 'missing.yaml'}: cannot read the compiled spec" in missing.stderr

    refused = helpers.run_cli(
        "kubeflow",
        "compile",
        "--image",
        "tfxflow",
        "--pipeline-root",
        "gs://b/r",
        "--data-root",
        "gs://b/d",
        "--tracking",
        "off",
        "--output",
        str(tmp_path / "x.yaml"),
        timeout=300,
    )
    assert refused.returncode == 2 and "--image 'tfxflow': give a pinned tag or digest" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "x.yaml").exists()


def test_beam_flags_of_kubeflow_compile_default_to_the_pods_direct_runner_and_the_steps_image():
    from tfxflow.pipeline.beam_runners import beam_pipeline_args

    runner, mode, workers = _beam(kubeflow=True)
    assert (runner.runner, mode, workers) == ("direct", "multi_processing", 0)
    runner, _, _ = _beam(
        "--beam-runner",
        "dataflow",
        "--dataflow-project",
        "ml-prod-4711",
        "--dataflow-region",
        "us-central1",
        "--dataflow-temp-location",
        "gs://ml-tmp/dataflow",
        kubeflow=True,
    )
    assert beam_pipeline_args(runner) == [
        "--runner=DataflowRunner",
        "--project=ml-prod-4711",
        "--region=us-central1",
        "--temp_location=gs://ml-tmp/dataflow",
        "--sdk_container_image=registry.example.com/ml/tfxflow:0.1.0",
    ]
    runner, _, _ = _beam(
        "--beam-runner",
        "spark",
        "--spark-master-url",
        "spark://spark-master:7077",
        "--beam-image",
        "registry.example.com/ml/beam-worker:2",
        kubeflow=True,
    )
    assert runner.image == "registry.example.com/ml/beam-worker:2"
    runner, _, _ = _beam("--beam-runner", "portable", kubeflow=True)
    assert runner.image == "" and beam_pipeline_args(runner)[-1] == "--environment_type=LOOPBACK"


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--mlflow-uri", "http://alice:hunter2@mlflow:5000"],
            "--mlflow-uri http://***@mlflow:5000 carries credentials",
        ),
        (
            ["--mlflow-uri", "http://mlflow:5000", "--mlflow-secret-key", "MLFLOW_TRACKING_TOKEN"],
            "pass --mlflow-secret",
        ),
        (
            ["--mlflow-secret", "mlflow-tracking", "--mlflow-secret-key", "MLFLOW_TRACKING_PASWORD"],
            "MLFLOW_TRACKING_PASWORD: not a variable MLflow's client reads",
        ),
    ],
)
def test_compile_refuses_tracking_credentials_it_would_mishandle(flags, message, tmp_path, capsys):
    from tfxflow.pipeline.cli.main import main

    output = tmp_path / "spec.yaml"
    common = ["kubeflow", "compile", "--image", "registry.example.com/ml/tfxflow:0.1.0", "--output", str(output)]
    assert main([*common, "--pipeline-root", "s3://ml/root", "--data-root", "s3://ml/data", *flags]) == 2
    stderr = capsys.readouterr().err
    assert message in stderr and "hunter2" not in stderr and "alice" not in stderr
    assert not output.exists()


@pytest.mark.integration
def test_training_job_prints_the_tfjob_the_compiled_trainer_creates(tmp_path):
    """`tfxflow kubeflow training-job`: compile's flags, the manifest the launcher would create, valid against the
    Training Operator's CRD; then --training-job trainjob, valid against Trainer v2's."""
    from tests import crd_check

    flags = ["--image", "registry.example.com/ml/tfxflow:0.1.0", "--data-root", "s3://ml/data", "--tracking", "off"]
    flags += ["--workers", "3", "--gpus", "2", "--toleration", "nvidia.com/gpu:NoSchedule", "--namespace", "ml-team"]
    flags += ["--training-job-timeout", "7200"]
    result = helpers.run_cli("kubeflow", "training-job", *flags, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# The TFJob the Trainer step of tfxflow-taxi creates")
    job = yaml.safe_load(result.stdout)
    assert crd_check.problems(job, "TFJob") == []
    assert job["metadata"]["namespace"] == "ml-team" and job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 7200
    chief, workers = job["spec"]["tfReplicaSpecs"]["Chief"], job["spec"]["tfReplicaSpecs"]["Worker"]
    assert (chief["replicas"], workers["replicas"]) == (1, 2)
    container = workers["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"  # --gpus per worker
    assert workers["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert container["args"][0] == "--tfxflow_replica" and "{{$}}" in container["args"]
    secret = {"secretKeyRef": {"name": "mlpipeline-minio-artifact", "key": "accesskey"}}
    assert {"name": "AWS_ACCESS_KEY_ID", "valueFrom": secret} in container["env"]

    output = tmp_path / "trainjob.yaml"
    result = helpers.run_cli(
        "kubeflow", "training-job", *flags, "--training-job", "trainjob", "--output", str(output), timeout=300
    )
    assert result.returncode == 0, result.stderr
    job = yaml.safe_load(output.read_text())
    assert crd_check.problems(job, "TrainJob") == []
    assert job["spec"]["trainer"]["numNodes"] == 3 and job["spec"]["activeDeadlineSeconds"] == 7200


def test_training_job_needs_several_workers(capsys):
    from tfxflow.pipeline.cli.main import main

    flags = ["--image", "registry.example.com/ml/tfxflow:0.1.0", "--data-root", "s3://ml/data", "--tracking", "off"]
    assert main(["kubeflow", "training-job", *flags]) == 2
    assert "a pipeline creates a training job only with --workers N (N > 1)" in capsys.readouterr().err
