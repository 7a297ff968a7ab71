"""The drift check against data it did not see: a fresh random sample of the taxi file passes, a real shift is
refused with a message that says what moved and what to do, and accepting the shifted data makes it the
baseline without turning the check off. The first run also exports its model to TFLite (--tflite), published
in the version it pushes.

One run trains and pushes a model on 1,500 random rows first; the other runs use the same home, one after another
on the session's pool of long runs (tests/conftest.py's `long_runs`), and the tests read what they did.
"""

import os
import shlex

import pytest

from tests import edge_checks, helpers
from tfxflow.components.edge import edge
from tfxflow.components.serving_dir import EDGE_DIR
from tfxflow.components.validation.baseline import ACCEPTED_AT, ACCEPTED_REASON
from tfxflow.pipeline.local.runner import NAME_WIDTH
from tfxflow.pipeline.reports.run_record import open_store

pytestmark = pytest.mark.e2e

FLAGS = ["--train-steps", "40", "--batch-size", "64", "--eval-every-steps", "20"]
UNTRACKED = ["--tracking", "off"]  # all but the refused run, whose MLflow record is asserted
DATA_REFUSED = 3
REASON = "fares rose 25% on 1 November"


def _steps(base):
    """The runs on one home, in order: a model blessed on 1,500 random taxi rows, then 1,000 other random rows,
    the same rows with fares 25% higher (refused, tracked), their acceptance as the baseline, the shifted rows
    again and the old rows again; with what each test reads of the home after them."""
    first, fresh = helpers.write_taxi_samples([(str(base / "first"), 1500), (str(base / "fresh"), 1000)], seed=7)
    home = str(base / "home")
    steps = {"base": base, "home": home, "first_data": first, "fresh": fresh, "serving": os.path.join(home, "serving")}

    def run(data, *extra):
        return helpers.run_cli("run", "--home", home, "--data-root", data, *FLAGS, *extra)

    steps["first"] = run(first, *UNTRACKED, "--tflite")  # its TFLite export: tests/pipeline/test_edge_e2e.py
    if steps["first"].returncode != 0:
        return steps
    steps["fresh_run"] = run(fresh, *UNTRACKED)
    shifted = helpers.rewrite_csv(
        os.path.join(fresh, "data.csv"),
        str(base / "fares_up"),
        lambda i, row: {**row, "fare": f"{float(row['fare']) * 1.25:.2f}"},
    )
    steps["before"] = helpers.tree_snapshot(steps["serving"])
    steps["refused"] = run(shifted)
    steps["refused_serving"] = helpers.tree_snapshot(steps["serving"])
    if steps["refused"].returncode != DATA_REFUSED:
        return steps
    steps["accepted"] = helpers.run_cli(*_accept_command(steps["refused"].stderr)[:-2], "--reason", REASON, timeout=300)
    steps["again"] = run(shifted, *UNTRACKED)
    steps["back"] = run(fresh, *UNTRACKED)
    return steps


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    return {"steps": lambda: _steps(base)}


@pytest.fixture(scope="module")
def blessed(long_runs):
    steps = long_runs.results("drift")["steps"]
    result = steps["first"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "drift: no blessed model yet, nothing to compare with" in result.stdout
    return steps


def test_a_fresh_sample_of_the_same_data_passes_the_drift_check(blessed):
    result = blessed["fresh_run"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "data gate:      passed" in result.stdout
    # 13 features of the curated schema compared on the two training splits (about 3/4 of each sample)
    assert "drift vs. the last blessed model's data: 13 features compared (" in result.stdout


def _accept_command(stderr: str) -> list:
    """The `tfxflow accept-data ...` command the refusal printed, as arguments for the CLI."""
    line = next(line for line in stderr.splitlines() if line.strip().startswith("tfxflow accept-data"))
    return shlex.split(line)[1:]


def test_a_shift_is_refused_then_accepted_as_the_new_baseline_and_the_check_stays_on(blessed):
    home = blessed["home"]
    refused = blessed["refused"]
    assert refused.returncode == DATA_REFUSED, refused.stderr[-3000:]
    message = refused.stderr
    assert "data gate: 1 anomaly stops the run" in message  # fares only: nothing else moved
    assert (
        "split 'train vs. the last blessed model's data (drift)', feature 'fare': "
        "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH: Jensen-Shannon divergence 0.0"
    ) in message
    assert "> threshold 0.01 on 10 bins (the baseline's deciles); chi-squared p = " in message
    assert " baseline rows vs. " in message and "largest change: " in message
    assert "(drift and skew: each feature is put in common bins" in message
    assert "Next: look at what changed in fare." in message
    assert f"{'DataGate':<{NAME_WIDTH}} FAILED" in refused.stdout
    assert "data:           refused by DataGate" in refused.stdout
    assert blessed["refused_serving"] == blessed["before"]
    # The refused run is in MLflow too, marked FAILED with the reason.
    from mlflow import MlflowClient

    mlflow_client = MlflowClient(f"sqlite:///{home}/mlflow/mlflow.db")
    experiment = mlflow_client.get_experiment_by_name("tfxflow-taxi")
    latest = mlflow_client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])[0]
    assert latest.info.status == "FAILED"
    assert latest.data.tags["tfxflow.error"].startswith("DataGateError: data gate: 1 anomaly stops the run")

    # What the MLflow record says is read after the later runs: they are untracked, so the refused run is the
    # experiment's latest.
    reason = REASON
    accepted = blessed["accepted"]
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert "is now the drift baseline of tfxflow-taxi" in accepted.stdout
    assert f": {reason}" in accepted.stdout and "the data gate refused that run" in accepted.stdout
    store = open_store(os.path.join(home, "metadata", "metadata.sqlite"))
    marked = [a for a in store.get_artifacts() if ACCEPTED_AT in a.custom_properties]
    assert [a.custom_properties[ACCEPTED_REASON].string_value for a in marked] == [reason]

    again = blessed["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert "data gate:      passed" in again.stdout
    assert "drift vs. the data accepted as the baseline: 13 features compared" in again.stdout
    assert "Jensen-Shannon divergence 0.0000" in again.stdout or "L-infinity distance 0.0000" in again.stdout

    # The check stays on: the old fares are now the shift.
    back = blessed["back"]
    assert back.returncode == DATA_REFUSED, back.stderr[-3000:]
    assert "feature 'fare': COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH" in back.stderr


def test_the_first_model_is_published_with_tflite_models_that_answer_as_it_does(blessed):
    folder, result = edge_checks.published(blessed["serving"], "taxi")
    edge_checks.check_result(result, blessed["first"].stdout)
    # With --tflite taxi's unseen values take one id (no FarmHash into buckets) and its optional string columns are
    # looked up before they are densified: builtin ops only, published in both lanes.
    assert result["select_tf_ops"] == []
    assert result["variants"]["float32"]["max_diff"]["probabilities"] < 1e-5
    columns = edge_checks.raw_columns(folder)
    answer, _ = edge_checks.check_against_saved_model(
        folder, edge_checks.rows_with_every_column(blessed["first_data"], columns)
    )
    assert answer["probabilities"].std() > 0.01
    # The run page and the model card say the same as the summary.
    version = os.path.basename(folder)
    with open(os.path.join(blessed["home"], "model_cards", "taxi", f"{version}.md"), encoding="utf-8") as f:
        assert f"TensorFlow Lite (--tflite): {edge.summary_line(result)}." in f.read()
    pages = sorted(p for p in os.listdir(os.path.join(blessed["home"], "reports")) if p.endswith(".html"))
    with open(os.path.join(blessed["home"], "reports", pages[0]), encoding="utf-8") as f:
        page = f.read()
    assert "<h3>TensorFlow Lite</h3>" in page and "model-int8.tflite" in page
    assert f"binary_accuracy on {result['eval']['rows']:,} eval rows (SavedModel " in page
    # The versions the later runs pushed, without --tflite, hold no edge folder; the first one keeps its own.
    later = helpers.pushed_versions(blessed["serving"], "taxi")[1:]
    assert later and not any(os.path.exists(os.path.join(blessed["serving"], "taxi", v, EDGE_DIR)) for v in later)
