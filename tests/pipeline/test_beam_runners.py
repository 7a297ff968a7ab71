"""Beam runner presets: the exact arguments of each, what TFX and Beam make of them, and clear refusals."""

import pytest

from tfxflow.components import lane
from tfxflow.pipeline import beam_runners
from tfxflow.pipeline.beam_runners import BeamRunner, beam_pipeline_args
from tfxflow.pipeline.config import ConfigError

IMAGE = "registry.example.com/ml/tfxflow:0.1.0"


def test_direct_keeps_todays_arguments():
    # Where the DirectRunner would first fetch Prism (Beam 2.7x), its in-process runner is named instead.
    # The workers are this process: an image option no in-process runner reads, so TFX builds no sdist.
    named = [beam_runners.IN_PROCESS_WORKERS]
    named += [f"--runner={beam_runners.FN_API_RUNNER}"] if lane.direct_runner_tries_prism() else []
    assert beam_pipeline_args(BeamRunner()) == named
    assert beam_pipeline_args(BeamRunner(direct_mode="in_memory", direct_workers=1)) == named
    assert beam_pipeline_args(BeamRunner(direct_mode="multi_processing", direct_workers=0)) == named + [
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=0",
    ]
    assert beam_pipeline_args(BeamRunner(direct_workers=4)) == named + [
        "--direct_running_mode=in_memory",
        "--direct_num_workers=4",
    ]
    assert not beam_runners.workers_are_remote_in(beam_pipeline_args(BeamRunner(direct_workers=4)))


def test_the_prism_check_reads_what_beams_direct_runner_does():
    import inspect

    from apache_beam.runners.direct import direct_runner
    from apache_beam.runners.runner import create_runner

    source = inspect.getsource(direct_runner.SwitchingDirectRunner.run_pipeline)
    assert lane.direct_runner_tries_prism() == ("PrismRunner()" in source)
    # The name resolves to Beam's FnApiRunner in the installed Beam, through Beam's own lookup.
    assert type(create_runner(beam_runners.FN_API_RUNNER)).__name__ == "FnApiRunner"
    # Beam 2.59 (compat) runs these pipelines on the FnApiRunner without Prism; Beam 2.7x (current) tries Prism.
    assert lane.direct_runner_tries_prism() == (lane.name() == lane.CURRENT)


def test_portable_defaults_to_the_embedded_job_service_and_loopback_workers():
    assert beam_pipeline_args(BeamRunner(runner="portable")) == [
        beam_runners.IN_PROCESS_WORKERS,
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=LOOPBACK",
    ]
    assert not BeamRunner(runner="portable").workers_are_remote


def test_portable_against_a_job_server_runs_the_image():
    assert beam_pipeline_args(BeamRunner(runner="portable", job_endpoint="beam-jobserver:8099", image=IMAGE)) == [
        "--runner=PortableRunner",
        "--job_endpoint=beam-jobserver:8099",
        "--environment_type=DOCKER",
        f"--environment_config={IMAGE}",
        f"--sdk_container_image={IMAGE}",
    ]
    # DOCKER's image may come as --environment-config instead.
    assert beam_pipeline_args(
        BeamRunner(
            runner="portable", job_endpoint="beam-jobserver:8099", environment_type="DOCKER", environment_config=IMAGE
        )
    )[-2:] == [f"--environment_config={IMAGE}", f"--sdk_container_image={IMAGE}"]
    assert beam_pipeline_args(
        BeamRunner(
            runner="portable",
            job_endpoint="beam-jobserver:8099",
            environment_type="EXTERNAL",
            environment_config="localhost:50000",
            image=IMAGE,
        )
    ) == [
        "--runner=PortableRunner",
        "--job_endpoint=beam-jobserver:8099",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
        f"--sdk_container_image={IMAGE}",
    ]
    assert beam_pipeline_args(
        BeamRunner(
            runner="portable",
            environment_type="PROCESS",
            environment_config='{"command": "/opt/apache/beam/boot"}',
            image=IMAGE,
        )
    )[2:4] == ["--environment_type=PROCESS", '--environment_config={"command": "/opt/apache/beam/boot"}']


def test_flink():
    runner = BeamRunner(runner="flink", flink_master="flink-jobmanager:8081", image=IMAGE)
    assert beam_pipeline_args(runner) == [
        "--runner=FlinkRunner",
        "--flink_master=flink-jobmanager:8081",
        "--environment_type=DOCKER",
        f"--environment_config={IMAGE}",
        f"--sdk_container_image={IMAGE}",
    ]
    assert beam_pipeline_args(
        BeamRunner(runner="flink", flink_master="http://10.0.0.7:8081", parallelism=8, image=IMAGE)
    )[:3] == ["--runner=FlinkRunner", "--flink_master=http://10.0.0.7:8081", "--parallelism=8"]
    assert beam_pipeline_args(
        BeamRunner(
            runner="flink",
            flink_master="flink-jobmanager:8081",
            environment_type="EXTERNAL",
            environment_config="localhost:50000",
            image=IMAGE,
        )
    )[2:] == ["--environment_type=EXTERNAL", "--environment_config=localhost:50000", f"--sdk_container_image={IMAGE}"]
    assert runner.workers_are_remote


def test_spark():
    assert beam_pipeline_args(
        BeamRunner(runner="spark", spark_master_url="spark://spark-master:7077", image=IMAGE)
    ) == [
        "--runner=SparkRunner",
        "--spark_master_url=spark://spark-master:7077",
        "--environment_type=DOCKER",
        f"--environment_config={IMAGE}",
        f"--sdk_container_image={IMAGE}",
    ]


def test_dataflow():
    runner = BeamRunner(
        runner="dataflow",
        project="ml-prod-4711",
        region="europe-west4",
        temp_location="gs://ml-prod-tmp/dataflow",
        machine_type="n2-highmem-8",
        image=IMAGE,
    )
    assert beam_pipeline_args(runner) == [
        "--runner=DataflowRunner",
        "--project=ml-prod-4711",
        "--region=europe-west4",
        "--temp_location=gs://ml-prod-tmp/dataflow",
        "--machine_type=n2-highmem-8",
        f"--sdk_container_image={IMAGE}",
    ]
    without_type = beam_pipeline_args(
        BeamRunner(
            runner="dataflow", project="ml-prod-4711", region="us-central1", temp_location="gs://ml-tmp/t", image=IMAGE
        )
    )
    assert not any(a.startswith("--machine_type") for a in without_type)


def test_extra_args_are_appended_and_may_not_redo_the_presets():
    runner = BeamRunner(
        runner="dataflow",
        project="ml-prod-4711",
        region="us-central1",
        temp_location="gs://ml-tmp/t",
        image=IMAGE,
        extra_args=("--max_num_workers=20", "--experiments=shuffle_mode=service"),
    )
    assert beam_pipeline_args(runner)[-2:] == ["--max_num_workers=20", "--experiments=shuffle_mode=service"]
    with pytest.raises(
        ConfigError,
        match=r"--beam-arg '--region=us-east1': --beam-runner dataflow sets --region "
        r"itself; use its flag instead",
    ):
        beam_pipeline_args(
            BeamRunner(
                runner="dataflow",
                project="ml-prod-4711",
                region="us-central1",
                temp_location="gs://ml-tmp/t",
                image=IMAGE,
                extra_args=("--region=us-east1",),
            )
        )
    with pytest.raises(ConfigError, match="--beam-arg 'max_num_workers=3': expected a Beam option"):
        beam_pipeline_args(BeamRunner(extra_args=("max_num_workers=3",)))


def test_beam_reads_each_preset_as_intended_and_tfx_stages_no_sdist():
    """Beam's own option parser gets the values; TFX's dependency step leaves image-backed presets alone."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from tfx.utils import dependency_utils

    flink = beam_pipeline_args(
        BeamRunner(runner="flink", flink_master="flink-jobmanager:8081", parallelism=4, image=IMAGE)
    )
    options = PipelineOptions(flink).get_all_options()
    assert (
        options["runner"],
        options["flink_master"],
        options["parallelism"],
        options["environment_type"],
        options["environment_config"],
    ) == ("FlinkRunner", "flink-jobmanager:8081", 4, "DOCKER", IMAGE)
    dataflow = beam_pipeline_args(
        BeamRunner(
            runner="dataflow",
            project="ml-prod-4711",
            region="us-central1",
            temp_location="gs://ml-tmp/t",
            machine_type="n2-standard-8",
            image=IMAGE,
        )
    )
    options = PipelineOptions(dataflow).get_all_options()
    assert (
        options["project"],
        options["region"],
        options["temp_location"],
        options["machine_type"],
        options["sdk_container_image"],
    ) == ("ml-prod-4711", "us-central1", "gs://ml-tmp/t", "n2-standard-8", IMAGE)
    spark = beam_pipeline_args(BeamRunner(runner="spark", spark_master_url="spark://m:7077", image=IMAGE))
    for args in (flink, dataflow, spark):
        assert dependency_utils.make_beam_dependency_flags(args) == args  # no --extra_package=<TFX sdist>


IN_PROCESS = [
    BeamRunner(),
    BeamRunner(direct_workers=4),
    BeamRunner(direct_mode="multi_threading", direct_workers=2),
    BeamRunner(direct_mode="multi_processing", direct_workers=0),
    BeamRunner(runner="portable"),
]


def test_the_pinned_tfx_builds_an_sdist_for_any_beam_arguments_unless_a_dependency_option_is_set():
    """What IN_PROCESS_WORKERS leans on: TFX's Beam executors hand any non-empty arguments to
    make_beam_dependency_flags, which builds an sdist of TFX unless one of these options is set."""
    import inspect

    from tfx.dsl.components.base import base_beam_executor
    from tfx.utils import dependency_utils

    executor = inspect.getsource(base_beam_executor.BaseBeamExecutor.__init__)
    assert "if self._beam_pipeline_args:" in executor
    assert "dependency_utils.make_beam_dependency_flags(" in executor
    flags = inspect.getsource(dependency_utils.make_beam_dependency_flags)
    assert "sdist_file = build_ephemeral_package()" in flags
    assert all(f"'{name}'," in flags for name in beam_runners.TFX_DEPENDENCY_OPTIONS)


@pytest.mark.parametrize("runner", IN_PROCESS, ids=["default", "in-memory", "threads", "processes", "loopback"])
def test_tfx_takes_the_arguments_of_in_process_workers_as_given(runner, monkeypatch):
    from tfx.utils import dependency_utils

    def built():
        raise AssertionError("TFX built an sdist of itself")

    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", built)
    args = beam_pipeline_args(runner)
    assert args[0] == beam_runners.IN_PROCESS_WORKERS and not beam_runners.workers_are_remote_in(args)
    assert dependency_utils.make_beam_dependency_flags(list(args)) == args


def test_a_users_dependency_option_is_kept_and_no_image_is_added():
    args = beam_pipeline_args(BeamRunner(extra_args=("--requirements_file=/work/requirements.txt",)))
    assert beam_runners.IN_PROCESS_WORKERS not in args and args[-1] == "--requirements_file=/work/requirements.txt"


@pytest.mark.integration
@pytest.mark.parametrize("runner", IN_PROCESS[:4], ids=["default", "in-memory", "threads", "processes"])
def test_beam_runs_a_pipeline_with_the_arguments_of_in_process_workers(runner, tmp_path):
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    with beam.Pipeline(argv=beam_pipeline_args(runner)) as p:
        assert_that(p | beam.Create(range(10)) | beam.Map(lambda x: x * x), equal_to([x * x for x in range(10)]))


@pytest.mark.parametrize(
    "runner, message",
    [
        (BeamRunner(runner="flink", image=IMAGE), "--beam-runner flink needs --flink-master host:port"),
        (
            BeamRunner(runner="flink", flink_master="flink-jobmanager", image=IMAGE),
            "--beam-runner flink needs --flink-master host:port .*, got 'flink-jobmanager'",
        ),
        (
            BeamRunner(runner="flink", flink_master="jm:8081"),
            "--beam-runner flink with DOCKER workers needs --beam-image",
        ),
        (
            BeamRunner(runner="flink", flink_master="jm:8081", image=IMAGE, environment_type="LOOPBACK"),
            "--environment-type must be one of .* with --beam-runner flink, got 'LOOPBACK'",
        ),
        (
            BeamRunner(runner="flink", flink_master="jm:8081", image=IMAGE, parallelism=-2),
            "--flink-parallelism must be",
        ),
        (BeamRunner(runner="spark", image=IMAGE), "--beam-runner spark needs --spark-master-url spark://host:port"),
        (BeamRunner(runner="spark", spark_master_url="spark-master:7077", image=IMAGE), "got 'spark-master:7077'"),
        (
            BeamRunner(runner="dataflow", region="us-central1", temp_location="gs://ml-tmp/t", image=IMAGE),
            "--beam-runner dataflow needs --dataflow-project",
        ),
        (
            BeamRunner(runner="dataflow", project="ml-prod-4711", temp_location="gs://ml-tmp/t", image=IMAGE),
            "--beam-runner dataflow needs --dataflow-region",
        ),
        (
            BeamRunner(
                runner="dataflow", project="ml-prod-4711", region="us-central1", temp_location="/tmp/x", image=IMAGE
            ),
            "--beam-runner dataflow needs --dataflow-temp-location gs://bucket/path .*, got '/tmp/x'",
        ),
        (
            BeamRunner(runner="dataflow", project="ml-prod-4711", region="us-central1", temp_location="gs://ml-tmp/t"),
            "--beam-runner dataflow needs --beam-image",
        ),
        (
            BeamRunner(
                runner="dataflow",
                project="ml-prod-4711",
                region="us-central1",
                temp_location="gs://ml-tmp/t",
                image="registry.example.com/ml/tfxflow:latest",
            ),
            "--beam-image .*: give a pinned tag or digest",
        ),
        (BeamRunner(runner="portable", job_endpoint="localhost"), "--job-endpoint 'localhost': expected 'embed'"),
        (
            BeamRunner(runner="portable", environment_type="EXTERNAL", image=IMAGE),
            "--environment-type EXTERNAL needs --environment-config host:port",
        ),
        (
            BeamRunner(runner="portable", environment_type="PROCESS", environment_config="boot", image=IMAGE),
            "--environment-type PROCESS needs --environment-config",
        ),
        (
            BeamRunner(runner="portable", environment_type="EXTERNAL", environment_config="localhost:50000"),
            "--environment-type EXTERNAL needs --beam-image",
        ),
        (BeamRunner(runner="portable", image=IMAGE), "--beam-image: LOOPBACK workers are this process"),
        (
            BeamRunner(runner="portable", job_endpoint="js:8099", environment_config="a/b:1", image="a/c:1"),
            "name different images",
        ),
        (
            BeamRunner(runner="direct", flink_master="jm:8081"),
            "--flink-master is a setting of --beam-runner flink, not of --beam-runner direct",
        ),
        (
            BeamRunner(runner="spark", spark_master_url="spark://m:7077", image=IMAGE, direct_mode="multi_processing"),
            "--beam-mode is a setting of --beam-runner direct, not of --beam-runner spark",
        ),
        (
            BeamRunner(
                runner="dataflow",
                project="ml-prod-4711",
                region="us-central1",
                temp_location="gs://ml-tmp/t",
                image=IMAGE,
                environment_type="DOCKER",
            ),
            "--environment-type is a setting of --beam-runner portable or flink or spark, "
            "not of --beam-runner dataflow",
        ),
        (BeamRunner(direct_mode="multi"), "--beam-mode must be one of"),
        (BeamRunner(direct_workers=-1), "--beam-workers must be >= 0"),
        (BeamRunner(runner="samza"), "--beam-runner must be one of"),
    ],
)
def test_refusals_name_the_flag(runner, message):
    with pytest.raises(ConfigError, match=message):
        beam_pipeline_args(runner)


def test_where_the_workers_are_read_from_a_command_line():
    remote = beam_runners.workers_are_remote_in
    assert not remote(["--executor_class_path", "x", "--direct_running_mode=multi_processing"])
    assert not remote(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"])
    assert remote(["--runner=PortableRunner", "--job_endpoint=js:8099"])  # Beam's default environment: DOCKER
    for args in (
        beam_pipeline_args(BeamRunner(runner="flink", flink_master="jm:8081", image=IMAGE)),
        beam_pipeline_args(
            BeamRunner(
                runner="dataflow",
                project="ml-prod-4711",
                region="us-central1",
                temp_location="gs://ml-tmp/t",
                image=IMAGE,
            )
        ),
    ):
        assert remote(args)


def test_one_line_descriptions():
    assert beam_runners.describe(BeamRunner()) == "direct (in_memory, 1 worker)"
    assert (
        beam_runners.describe(BeamRunner(direct_mode="multi_processing", direct_workers=0))
        == "direct (multi_processing, one worker per core)"
    )
    assert (
        beam_runners.describe(BeamRunner(runner="portable"))
        == "portable (job service embed; workers in this process (LOOPBACK))"
    )
    assert (
        beam_runners.describe(BeamRunner(runner="flink", flink_master="jm:8081", image=IMAGE))
        == f"flink (Flink at jm:8081; workers run {IMAGE})"
    )


# --- end to end: the whole pipeline through Beam's PortableRunner -----------------------------------------

PORTABLE_TRAIN_FLAGS = ["--train-steps", "60", "--batch-size", "64", "--eval-every-steps", "30"]


def jobs(base):
    """The CLI run once with `--beam-runner portable`, as a job of the session's pool of long runs
    (tests/conftest.py's `long_runs`)."""
    return {"run": lambda: _portable_run(base)}


@pytest.fixture(scope="module")
def portable_run(long_runs):
    return long_runs.results("portable")["run"]


def _portable_run(base):
    """The CLI run once with `--beam-runner portable`: Beam's embedded job service, LOOPBACK workers."""
    import time

    from tests import helpers

    data = helpers.write_taxi_sample(str(base / "data"), rows=2000)
    home = str(base / "home")
    started = time.monotonic()
    result = helpers.run_cli(
        "run",
        "--home",
        home,
        "--data-root",
        data,
        "--tracking",
        "off",
        "--beam-runner",
        "portable",
        *PORTABLE_TRAIN_FLAGS,
    )
    from tfxflow.pipeline.reports import run_record as report

    run = report.read_run(f"{home}/metadata/metadata.sqlite", "tfxflow-taxi")
    return {"result": result, "home": home, "data": data, "run": run, "seconds": time.monotonic() - started}


def _records(uri: str, split: str) -> list:
    import glob

    import tensorflow as tf

    files = sorted(glob.glob(f"{uri}/Split-{split}/*"))
    assert files, f"no files in {uri}/Split-{split}"
    return [bytes(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _uri(run, component: str, key: str) -> str:
    from tfxflow.pipeline.reports import run_record as report

    artifact = report.first_output(run.component(component), key)
    assert artifact is not None, f"{component} wrote no {key}"
    return artifact.uri


def _raw_rows(data: str) -> list:
    import csv

    with open(f"{data}/data.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.e2e
def test_portable_run_succeeds_through_the_job_service(portable_run):
    result = portable_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "beam:    portable (job service embed; workers in this process (LOOPBACK))" in result.stdout
    assert "blessed:        yes" in result.stdout and "pushed:         version " in result.stdout
    log_file = next(
        line.split("log:", 1)[1].strip() for line in result.stdout.splitlines() if line.strip().startswith("log:")
    )
    with open(log_file, encoding="utf-8") as f:
        log = f.read()
    # Each Beam component's pipelines ran as jobs of Beam's job service through the portable runner, with
    # LOOPBACK workers (CsvExampleGen streams its files itself: components/ingest/csv_input.py).
    for component in ("StatisticsGen", "Transform", "Evaluator"):
        start = log.index(f"Component {component} is running.")
        window = log[start : log.index(f"Component {component} is finished.", start)]
        assert 'Environment "LOOPBACK" has started' in window, component
        assert "local_job_service: Completed job in" in window, component
        assert (
            window.count("portable_runner: Job state changed to DONE")
            == window.count("portable_runner: Job state changed to RUNNING")
            >= 1
        ), component
    assert "Job state changed to FAILED" not in log and "FAILED" not in result.stdout


@pytest.mark.e2e
def test_portable_run_examples_statistics_and_transform(portable_run):
    from tensorflow_metadata.proto.v0 import statistics_pb2

    run, rows = portable_run["run"], _raw_rows(portable_run["data"])
    examples = _uri(run, "CsvExampleGen", "examples")
    counts = {split: len(_records(examples, split)) for split in ("train", "eval")}
    assert sum(counts.values()) == len(rows) == 2000 and min(counts.values()) > 300
    statistics = _uri(run, "StatisticsGen", "statistics")
    for split, count in counts.items():
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        with open(f"{statistics}/Split-{split}/FeatureStats.pb", "rb") as f:
            stats.ParseFromString(f.read())
        assert stats.datasets[0].num_examples == count, split

    import numpy as np
    import tensorflow as tf
    import tensorflow_transform as tft

    # Transform's graph, with the vocabularies, quantiles and moments Beam computed, applied to the raw splits.
    transform = tft.TFTransformOutput(_uri(run, "Transform", "transform_graph"))
    layer = transform.transform_features_layer()
    transformed = {
        split: layer(tf.io.parse_example(tf.constant(_records(examples, split)), transform.raw_feature_spec()))
        for split in counts
    }
    # The label is derived from the raw columns (in float32, as the graph computes it): as many positives as
    # the raw rows hold.
    positives = sum(bool(np.float32(r["tips"]) > np.float32(0.2) * np.float32(r["fare"])) for r in rows)
    assert sum(int(transformed[s]["big_tipper"].numpy().sum()) for s in counts) == positives == 459
    # z-scores from the training split's moments (no fare is missing in the sample).
    fare = transformed["train"]["fare_xf"].numpy().ravel()
    assert fare.shape == (counts["train"],) and abs(np.mean(fare)) < 1e-3 and abs(np.std(fare) - 1) < 1e-3
    company = transformed["train"]["company_xf"].numpy().ravel()
    assert company.min() >= 0 and len(np.unique(company)) > 5  # vocabulary ids


@pytest.mark.e2e
def test_portable_run_evaluation_blessing_and_pushed_model(portable_run):
    import os

    import numpy as np
    import tensorflow as tf
    import tensorflow_model_analysis as tfma

    from tests import helpers
    from tfxflow.pipeline.inputs import bundled_dataset_dir

    run, home = portable_run["run"], portable_run["home"]
    eval_rows = len(_records(_uri(run, "CsvExampleGen", "examples"), "eval"))
    result = tfma.load_eval_result(_uri(run, "Evaluator", "evaluation"))
    overall = next(metrics[""][""] for key, metrics in result.slicing_metrics if key == ())
    assert overall["example_count"]["doubleValue"] == eval_rows
    assert 0.6 <= overall["binary_accuracy"]["doubleValue"] <= 1.0
    assert os.path.exists(os.path.join(_uri(run, "Evaluator", "blessing"), "BLESSED"))

    versions = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    assert len(versions) == 1 and run.pushed_version == versions[0]
    model = tf.saved_model.load(os.path.join(home, "serving", "taxi", versions[0]))
    rows = helpers.read_csv_rows(os.path.join(portable_run["data"], "data.csv"), 40)
    examples = helpers.serialize_examples(
        rows, os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"), drop=("tips",)
    )
    probabilities = model.signatures["serving_default"](examples=tf.constant(examples))["probabilities"].numpy()
    assert probabilities.shape == (40, 1) and np.all((probabilities >= 0) & (probabilities <= 1))
    assert probabilities.std() > 0
