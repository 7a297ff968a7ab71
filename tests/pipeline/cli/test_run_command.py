"""`tfxflow run`: configuration errors give one clear line and exit status 2; the Beam flags make the runner."""

import os

from tests import helpers
from tests.pipeline.cli.test_main import COMPILE


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


def test_a_wrong_tuning_flag_is_one_line_naming_it_before_any_work(tmp_path):
    for flags, says in (
        (("--tune-space", "lr=1e-4:1e-2"), "error: --tune-space 'lr=1e-4:1e-2': lr: not a setting the tuning can"),
        (("--tune-space", "dropout=0.5:0.1"), "error: --tune-space 'dropout=0.5:0.1': dropout: a range needs low"),
        (("--tune-trials", "0"), "error: --tune-trials must be >= 1"),
        (("--tune-minutes", "-1"), "error: --tune-minutes must be >= 0"),
    ):
        result = helpers.run_cli("run", "--home", str(tmp_path), "--tune", *flags, timeout=300)
        assert result.returncode == 2 and result.stderr.startswith(says), result.stderr
        assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "pipeline_root")


def _beam(*argv: str, kubeflow: bool = False):
    """(BeamRunner, beam_mode, beam_workers) that `tfxflow run` / `kubeflow compile` make of Beam flags."""
    from tfxflow.pipeline.cli import common
    from tfxflow.pipeline.cli.main import build_parser

    base = COMPILE if kubeflow else ["run"]
    return common.beam_runner(build_parser().parse_args(base + list(argv)), kubeflow=kubeflow)


def test_beam_flags_make_the_runner_of_run():
    from tfxflow.components import lane
    from tfxflow.pipeline import beam_runners
    from tfxflow.pipeline.beam_runners import BeamRunner, beam_pipeline_args

    runner, mode, workers = _beam()
    named = [f"--runner={beam_runners.FN_API_RUNNER}"] if lane.direct_runner_tries_prism() else []
    # In-process workers: the option that keeps TFX from building its sdist for them comes first.
    expected = [beam_runners.IN_PROCESS_WORKERS, *named]
    assert (runner.runner, mode, workers) == ("direct", "in_memory", 1) and beam_pipeline_args(runner) == expected
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
