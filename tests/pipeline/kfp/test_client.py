"""`tfxflow kubeflow submit | schedule | unschedule` against a KFP v2beta1 API server on 127.0.0.1."""

import os
import subprocess

import pytest
import yaml

from tests.helpers import TFXFLOW, free_port
from tests.kfp_server import FakeKfp

pytestmark = pytest.mark.integration

TOKEN = "kfp-token-that-must-not-leak"


def _cli(kfp, *args, env_extra=None):
    env = dict(os.environ, KFP_HOST=kfp.url if kfp else "", KFP_TOKEN=TOKEN, **(env_extra or {}))
    env.pop("KFP_NAMESPACE", None)
    done = subprocess.run(
        [TFXFLOW, "kubeflow", *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert TOKEN not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture()
def kfp():
    with FakeKfp() as server:
        yield server


def test_submit_uploads_the_spec_once_and_starts_a_run(kfp, compiled):
    result, spec, _, _ = compiled
    first = _cli(
        kfp,
        "submit",
        "--spec",
        result.path,
        "--param",
        "data_root=gs://ml-data/taxi/2026-11-29",
        "--param",
        'train_args={"num_steps": 800}',
        "--run-name",
        "taxi-manual",
    )
    assert first.returncode == 0, first.stderr
    assert "run 'taxi-manual' started: run id run-" in first.stdout
    second = _cli(kfp, "submit", "--spec", result.path)
    assert second.returncode == 0, second.stderr

    # Every call carries the bearer token; the spec is uploaded once (same content, same version).
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in kfp.requests)
    uploads = kfp.calls("POST", "/pipelines/upload") + kfp.calls("POST", "/pipelines/upload_version")
    assert len(uploads) == 1 and uploads[0].query["name"] == "tfxflow-taxi"
    with open(result.path, "rb") as f:
        assert uploads[0].files["uploadfile"] == f.read()
    uploaded = list(yaml.safe_load_all(uploads[0].files["uploadfile"]))
    assert uploaded[0]["pipelineInfo"] == spec["pipelineInfo"]
    assert len(kfp.calls("POST", "/experiments")) == 1  # the experiment is created once, then found
    runs = [r.body for r in kfp.calls("POST", "/runs")]
    assert [r["display_name"] for r in runs][0] == "taxi-manual"
    assert runs[0]["runtime_config"]["parameters"] == {
        "data_root": "gs://ml-data/taxi/2026-11-29",
        "train_args": '{"num_steps": 800}',
    }
    assert runs[1]["runtime_config"]["parameters"] == {}
    # KFP's driver ignores the spec's defaultPipelineRoot: the run itself names the root.
    assert {run["runtime_config"]["pipeline_root"] for run in runs} == {spec["defaultPipelineRoot"]}
    (version_id,) = kfp.versions
    for run in runs:
        assert run["experiment_id"] == next(iter(kfp.experiments))
        assert run["pipeline_version_reference"] == {
            "pipeline_id": next(iter(kfp.pipelines)),
            "pipeline_version_id": version_id,
        }


def test_schedule_then_reschedule_replaces_instead_of_duplicating(kfp, compiled):
    result = compiled[0]
    first = _cli(
        kfp,
        "schedule",
        "--spec",
        result.path,
        "--name",
        "taxi-nightly",
        "--cron",
        "0 0 3 * * *",
        "--param",
        "data_root=gs://ml-data/taxi/latest",
    )
    assert first.returncode == 0, first.stderr
    (created,) = [r.body for r in kfp.calls("POST", "/recurringruns")]
    assert created["display_name"] == "taxi-nightly"
    assert created["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}}
    assert int(created["max_concurrency"]) == 1
    assert created["no_catchup"] is True
    assert created["mode"] == "ENABLE"
    assert created["runtime_config"]["parameters"] == {"data_root": "gs://ml-data/taxi/latest"}
    assert created["runtime_config"]["pipeline_root"] == "minio://mlpipeline/v2/artifacts"
    assert created["pipeline_version_reference"]["pipeline_version_id"] in kfp.versions
    assert "pipeline_spec" not in created  # the schedule runs the uploaded version
    (first_id,) = kfp.recurring_runs

    second = _cli(kfp, "schedule", "--spec", result.path, "--name", "taxi-nightly", "--cron", "0 30 4 * * 1-5")
    assert second.returncode == 0, second.stderr
    assert f"replaced {first_id}" in second.stdout
    ((second_id, schedule),) = kfp.recurring_runs.items()
    assert second_id != first_id and schedule["trigger"]["cron_schedule"]["cron"] == "0 30 4 * * 1-5"
    # The new schedule is created before the old one is deleted: a failed call never leaves none.
    changes = [
        (r.method, r.path.rsplit("/", 1)[-1])
        for r in kfp.requests
        if r.method in ("POST", "DELETE") and "recurringruns" in r.path
    ]
    assert changes == [("POST", "recurringruns"), ("POST", "recurringruns"), ("DELETE", first_id)]

    other = _cli(
        kfp,
        "schedule",
        "--spec",
        result.path,
        "--name",
        "taxi-weekly",
        "--cron",
        "0 0 5 * * 0",
        "--catchup",
        "--max-concurrency",
        "2",
    )
    assert other.returncode == 0, other.stderr
    weekly = next(j for j in kfp.recurring_runs.values() if j["display_name"] == "taxi-weekly")
    assert weekly["no_catchup"] is False and int(weekly["max_concurrency"]) == 2
    assert len(kfp.recurring_runs) == 2

    removed = _cli(kfp, "unschedule", "--name", "taxi-nightly")
    assert removed.returncode == 0 and "removed recurring run 'taxi-nightly'" in removed.stdout
    assert [j["display_name"] for j in kfp.recurring_runs.values()] == ["taxi-weekly"]
    again = _cli(kfp, "unschedule", "--name", "taxi-nightly")
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_refusals_before_any_change(kfp, compiled):
    result = compiled[0]
    crontab = _cli(kfp, "schedule", "--spec", result.path, "--name", "n", "--cron", "0 3 * * *")
    assert crontab.returncode == 2 and "six fields, seconds first: '0 0 3 * * *'" in crontab.stderr
    unknown = _cli(kfp, "submit", "--spec", result.path, "--param", "train_steps=5")
    assert unknown.returncode == 2 and "--param train_steps: not a parameter" in unknown.stderr
    assert "data_root" in unknown.stderr
    assert kfp.requests == []
    no_host = _cli(None, "submit", "--spec", result.path)
    assert no_host.returncode == 2 and "pass --host or set $KFP_HOST" in no_host.stderr


def test_unreachable_api_is_a_clear_error(compiled):
    result = compiled[0]
    done = subprocess.run(
        [TFXFLOW, "kubeflow", "submit", "--spec", result.path, "--host", f"http://127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, KFP_TOKEN=TOKEN),
        check=False,
    )
    assert done.returncode == 1
    assert "cannot reach the KFP API" in done.stderr and "Traceback" not in done.stderr
    assert TOKEN not in done.stdout + done.stderr
