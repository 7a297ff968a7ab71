"""The `tfxflow` console script: configuration errors give one clear line and exit status 2."""

import os

import yaml

from tests import helpers


def test_missing_data_root_is_one_clear_line(tmp_path):
    result = helpers.run_cli("run", "--home", str(tmp_path), "--data-root", str(tmp_path / "missing"), timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --data-root {tmp_path}/missing: no such folder"
    assert not os.path.exists(tmp_path / "serving")


def test_bad_feature_config_names_the_file(tmp_path):
    features = tmp_path / "features.yaml"
    features.write_text("label: {name: y, column: tips}\nnumeric: [fare]\nbuckets: 3\n")
    result = helpers.run_cli("run", "--home", str(tmp_path), "--feature-config", str(features), timeout=300)
    assert result.returncode == 2
    assert f"error: {features}: unknown key(s) ['buckets']" in result.stderr
    assert "Traceback" not in result.stderr


def test_home_that_cannot_be_created_is_one_clear_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = helpers.run_cli("run", "--home", str(blocker / "home"), timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: cannot write to the home folder {blocker}/home: Not a directory; nothing was run"
    )


def test_bad_hidden_units_flag(tmp_path):
    result = helpers.run_cli("run", "--home", str(tmp_path), "--hidden-units", "64,x", timeout=300)
    assert result.returncode == 2 and "--hidden-units must be comma-separated integers" in result.stderr


def test_kubeflow_compile_from_the_command_line(tmp_path):
    spec = tmp_path / "taxi.yaml"
    result = helpers.run_cli(
        "kubeflow",
        "compile",
        "--image",
        "registry.example.com/ml/tfxflow:0.1.0",
        "--pipeline-root",
        "minio://mlpipeline/v2/artifacts",
        "--data-root",
        "minio://mlpipeline/data/taxi",
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


def _beam(*argv: str, kubeflow: bool = False):
    """(BeamRunner, beam_mode, beam_workers) that `tfxflow run` / `kubeflow compile` make of Beam flags."""
    from tfxflow.pipeline.cli import main as cli

    base = (
        [
            "kubeflow",
            "compile",
            "--image",
            "registry.example.com/ml/tfxflow:0.1.0",
            "--pipeline-root",
            "gs://ml-artifacts/root",
            "--data-root",
            "gs://ml-data/taxi",
        ]
        if kubeflow
        else ["run"]
    )
    return cli._beam_runner(cli._parser().parse_args(base + list(argv)), kubeflow=kubeflow)  # pylint: disable=protected-access


def test_beam_flags_make_the_runner_of_run():
    from tfxflow.pipeline.beam_runners import BeamRunner, beam_pipeline_args

    runner, mode, workers = _beam()
    assert (runner.runner, mode, workers) == ("direct", "in_memory", 1) and beam_pipeline_args(runner) == []
    assert _beam("--beam-mode", "multi_processing", "--beam-workers", "0")[1:] == ("multi_processing", 0)
    runner, _, _ = _beam("--beam-runner", "portable")
    assert runner == BeamRunner(runner="portable")
    runner, _, _ = _beam(
        "--beam-runner",
        "flink",
        "--flink-master",
        "flink-jobmanager:8081",
        "--flink-parallelism",
        "4",
        "--beam-image",
        "registry.example.com/ml/tfxflow:0.1.0",
        "--beam-arg=--flink_version=1.17",
    )
    assert beam_pipeline_args(runner) == [
        "--runner=FlinkRunner",
        "--flink_master=flink-jobmanager:8081",
        "--parallelism=4",
        "--environment_type=DOCKER",
        "--environment_config=registry.example.com/ml/tfxflow:0.1.0",
        "--sdk_container_image=registry.example.com/ml/tfxflow:0.1.0",
        "--flink_version=1.17",
    ]


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


def test_beam_flag_errors_are_one_line_before_any_work(tmp_path):
    result = helpers.run_cli("run", "--home", str(tmp_path), "--beam-runner", "flink", timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "error: --beam-runner flink needs --flink-master host:port (the JobManager's "
        "REST endpoint, e.g. flink-jobmanager:8081)"
    )
    result = helpers.run_cli(
        "run", "--home", str(tmp_path), "--beam-runner", "portable", "--beam-workers", "4", timeout=300
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: --beam-workers is a setting of --beam-runner direct, not of --beam-runner portable"
    )
    assert not os.path.exists(tmp_path / "pipeline_root")
