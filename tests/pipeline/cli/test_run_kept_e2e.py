"""A run that kept something in the tracking outbox is not "up to date", nor is an earlier run's record left to
say so: the next identical `tfxflow run` runs (from the cache) and sends what was kept. Whole CLI runs against a
real `mlflow server` behind a proxy that answers 503 from a run's first MLflow run call on (after the check before
the run), then passes calls on."""

import os

import pytest
from mlflow import MlflowClient

from tests import helpers
from tests.components.tracking.test_tracking_outbox import Proxy
from tfxflow.components.tracking import mlflow_runs
from tfxflow.pipeline import staging

pytestmark = pytest.mark.e2e

EXPERIMENT = "tfxflow-kept"
MODEL = "taxi_kept"


def test_a_run_that_kept_something_is_not_up_to_date_and_the_next_identical_run_sends_it(mlflow_server, tmp_path):
    data = helpers.write_taxi_sample(str(tmp_path / "data"), rows=1500)
    home = str(tmp_path / "home")
    outbox = os.path.join(home, "metadata", "mlflow_outbox")
    last_run = os.path.join(home, "metadata", "last_run.json")
    code = staging.code_fingerprint()  # part of what makes two commands identical
    with Proxy(mlflow_server.uri) as proxy:
        flags = [
            *("--home", home, "--data-root", data, "--mlflow-uri", proxy.uri, "--experiment", EXPERIMENT),
            *("--model-name", MODEL, "--tracking", "optional", "--tracking-wait", "1", "--train-steps", "60"),
            *("--batch-size", "64", "--eval-every-steps", "30", "--max-regression", "0.5"),
        ]
        done = helpers.run_cli("run", *flags)
        assert done.returncode == 0 and os.path.exists(last_run), done.stderr[-3000:]
        # MlflowStart's search for its run is the first call after the check: from it on the proxy answers 503.
        proxy.outage_at = ("/runs/", 503)
        kept = helpers.run_cli("run", *flags, "--force")
        assert kept.returncode == 0, kept.stderr[-3000:]
        assert proxy.answered and {status for status, _ in proxy.answered} == {503}
        assert "  mlflow:         the server has not answered since " in kept.stdout
        (name,) = [n for n in os.listdir(outbox) if n.endswith(".json")]
        key = name[: -len(".json")]
        # Nothing recorded as done, and the first run's record is gone: it would answer the next identical
        # command with "up to date" and that run's push, and the records would wait.
        assert not os.path.exists(last_run)

        proxy.answer = None
        again = helpers.run_cli("run", *flags)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "is up to date" not in again.stdout
        assert f"tfxflow: sent to MLflow what run {key} kept since " in again.stdout
        assert os.listdir(outbox) == [] and os.path.exists(last_run)
        first = mlflow_runs.find_run(MlflowClient(mlflow_server.uri), EXPERIMENT, key)
        assert first.info.status == "FINISHED" and first.data.tags["tfxflow.pushed"] == "yes"
        assert first.data.metrics["eval.binary_accuracy"] > 0.6 and "duration.pipeline" in first.data.metrics

        # Now nothing waits: the same command is up to date.
        third = helpers.run_cli("run", *flags)
    assert third.returncode == 0, third.stderr[-3000:]
    assert staging.code_fingerprint() == code, "the package's code changed while the test ran"
    assert third.stdout.startswith("tfxflow: pipeline tfxflow-taxi is up to date: nothing changed since run ")
