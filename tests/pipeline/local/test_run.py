"""A local run's outcomes and their exit statuses (pipeline/local/run.py), without running the pipeline."""

import errno
import signal
import types

from tfxflow.components.errors import DataError
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline.local import run as local_run
from tfxflow.pipeline.local import run_guard


def _config(tmp_path):
    return config_lib.build_run_config(environ={}, home=str(tmp_path / "home"), tracking_mode="off")


def test_each_failure_maps_to_its_exit_status_and_one_clear_message(tmp_path, capsys):
    config = _config(tmp_path)
    assert local_run._failed(DataError("error: data.csv line 3: bad"), config, "run.log") == local_run.EXIT_DATA_GATE
    err = capsys.readouterr().err
    assert "error: data.csv line 3: bad" in err and f"serving directory untouched: {config.paths.serving_dir}" in err
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    assert local_run._failed(full, config, "run.log") == 1
    assert "No space left on device" in capsys.readouterr().err
    assert local_run._failed(RuntimeError("boom\nsecond line"), config, "run.log") == 1
    err = capsys.readouterr().err
    assert "error: the run failed: RuntimeError: boom" in err and "second line" not in err


def test_a_home_that_cannot_be_written_gives_no_log(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert local_run.start_log(str(blocker / "home")) is None
    assert "nothing was run" in capsys.readouterr().err


def test_a_second_run_of_the_same_store_is_refused_as_busy(tmp_path, capsys):
    config = _config(tmp_path)
    log_file = local_run.start_log(config.paths.home)
    folder = tmp_path / "home" / "metadata"
    folder.mkdir(parents=True, exist_ok=True)
    handler = signal.getsignal(signal.SIGTERM)  # run() installs its own for the run
    try:
        with run_guard.RunLock(str(folder)):
            assert local_run.run(config, log_file) == local_run.EXIT_BUSY
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert capsys.readouterr().err.startswith("error: ")


def test_the_up_to_date_shortcut_prints_the_last_run(capsys):
    config = types.SimpleNamespace(pipeline_name="tfxflow-taxi")
    last = {
        "run_id": "r1",
        "finished_at": "2026-11-30T10:00:00",
        "wall_s": 42,
        "metrics": {"binary_accuracy": 0.88, "loss": 0.3},
        "pushed_version": 7,
        "pushed_destination": "/s/taxi/7",
    }
    local_run._print_up_to_date(config, last)
    out = capsys.readouterr().out
    assert "tfxflow: pipeline tfxflow-taxi is up to date: nothing changed since run r1" in out
    assert "binary_accuracy 0.8800" in out and "loss" not in out and "version 7 -> /s/taxi/7" in out
