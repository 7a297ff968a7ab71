"""Where a run's page goes, what is saved beside it, and the settings it lists."""

import json
import os

from ml_metadata.proto import metadata_store_pb2 as mlmd

from tests.pipeline.reports.test_page import PIPELINE, write_store
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline.reports import page as page_lib
from tfxflow.pipeline.reports import publish


def test_a_run_with_every_default_lists_no_setting(tmp_path):
    config = config_lib.build_run_config(environ={}, home=str(tmp_path))
    assert page_lib.changed_settings(publish.run_settings(config), publish.default_settings()) == {}
    changed = config_lib.build_run_config(
        environ={},
        home=str(tmp_path),
        tracking_mode="off",
        training=config_lib.TrainingConfig(train_steps=60),
        evaluation=config_lib.EvaluationConfig(slice_columns=("company",)),
        keep_versions=3,
    )
    assert page_lib.changed_settings(publish.run_settings(changed), publish.default_settings()) == {
        "training.train_steps": ("60", "300"),
        "evaluation.slice_columns": ('["company"]', "[]"),
        "run.keep_versions": ("3", "5"),
        "run.tracking_mode": ("off", "required"),
    }


def test_a_run_id_becomes_a_file_name():
    assert publish.file_safe("2026-11-30T16:28:19.913891") == "2026-11-30T16-28-19.913891"
    assert publish.report_path("/h", "a/b:c") == "/h/reports/a-b-c.html"


def test_the_page_drawn_again_keeps_what_the_run_knew(tmp_path):
    store = str(tmp_path / "metadata.sqlite")
    write_store(store, [("Trainer", mlmd.Execution.FAILED, {})])
    home = str(tmp_path / "home")
    first = publish.write_report(
        home,
        store,
        PIPELINE,
        settings={"training": {"train_steps": 60}},
        mlflow_run_id="r1",
        code_commit="abc123",
        error="ResourceExhaustedError: OOM",
    )
    path = publish.report_path(home, first.run_id)
    with open(path, encoding="utf-8") as f:
        assert "ResourceExhaustedError: OOM" in f.read()
    with open(publish.context_path(home, first.run_id), encoding="utf-8") as f:
        assert json.load(f)["code_commit"] == "abc123"
    again = publish.write_report(home, store, PIPELINE, first.run_id, out=str(tmp_path / "again.html"))
    assert (again.failure, again.mlflow_run_id, again.code_commit) == ("ResourceExhaustedError: OOM", "r1", "abc123")
    assert again.settings == first.settings and "training.train_steps" in again.settings
    assert os.path.isfile(tmp_path / "again.html")
    assert publish.write_report(home, str(tmp_path / "absent.sqlite"), PIPELINE) is None
