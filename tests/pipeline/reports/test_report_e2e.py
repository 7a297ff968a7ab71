"""The run page of real runs: one pushed run and one the data gate refused, through the `tfxflow` CLI on a
sample of the taxi data, collected from ML Metadata, rendered, and opened in headless Chromium with every
request it makes recorded."""

import os
import re
import xml.etree.ElementTree as ET

import pytest
from mlflow import MlflowClient

from tests import browser, helpers
from tfxflow.components.model import presets
from tfxflow.pipeline.reports import html, model_card, publish, run_record

pytestmark = pytest.mark.e2e

PIPELINE = "tfxflow-taxi"
FLAGS = ["--train-steps", "60", "--batch-size", "64", "--eval-every-steps", "30", "--eval-max-rows", "200"]
DATA_REFUSED = 3
MAX_PAGE_BYTES = 250_000
SCREEN = (1280, 4000)


def _report_line(stdout: str) -> str:
    """The page a run wrote, from the last line of its console output."""
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("  report:"), stdout[-2000:]
    return last.split()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A pushed run and a refused one (a column missing) in one home: the pages and the model card the runs
    wrote themselves, and each page collected again in this process to read its content."""
    base = tmp_path_factory.mktemp("report")
    data = helpers.write_taxi_sample(str(base / "data"), rows=2000)
    home = str(base / "home")
    good = helpers.run_cli("run", "--home", home, "--data-root", data, *FLAGS)
    assert good.returncode == 0, good.stderr[-3000:]
    bad_data = helpers.rewrite_csv(
        os.path.join(data, "data.csv"), str(base / "bad"), columns_fn=lambda c: [x for x in c if x != "trip_miles"]
    )
    bad = helpers.run_cli("run", "--home", home, "--data-root", bad_data, *FLAGS)
    assert bad.returncode == DATA_REFUSED, bad.stderr[-3000:]
    metadata = os.path.join(home, "metadata", "metadata.sqlite")
    ids = run_record.run_ids(run_record.open_store(metadata), PIPELINE)
    assert len(ids) == 2
    pages = {}
    for name, run_id, result in zip(("pushed", "refused"), ids, (good, bad), strict=True):
        path = _report_line(result.stdout)
        assert path == publish.report_path(home, run_id) and os.path.isfile(path)
        # Drawn again from ML Metadata and the settings saved beside the page, as `tfxflow report` does.
        page = publish.write_report(home, metadata, PIPELINE, run_id, out=str(base / "pages" / f"{name}.html"))
        pages[name] = {"page": page, "path": path, "document": open(path, encoding="utf-8").read()}
    return {"base": base, "home": home, "pages": pages, "good_stdout": good.stdout, "bad_stderr": bad.stderr}


def test_the_pushed_runs_page_shows_each_part_of_the_run(runs):
    page, document = runs["pages"]["pushed"]["page"], runs["pages"]["pushed"]["document"]
    assert page.status == "succeeded" and page.pushed and page.verdict.startswith("blessed and pushed as version")
    assert os.path.isdir(page.pushed_destination)
    assert page.settings["training.train_steps"] == ("60", str(presets.TRAIN_STEPS))  # the default from scratch
    # Only what differs from the defaults.
    assert set(page.settings) == {
        "training.train_steps",
        "training.batch_size",
        "training.eval_every_steps",
        "evaluation.max_rows",
    }
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", page.code_commit)
    assert page.mlflow_run_id and re.fullmatch(r"[0-9a-f]{32}", page.mlflow_run_id)
    assert {"tfxflow", "TFX", "TensorFlow"} <= set(page.versions)
    assert {c.name for c in page.components} >= {"CsvExampleGen", "StatisticsGen", "DataGate", "Trainer", "Pusher"}
    assert all(c.state in ("ran", "cached") for c in page.components)
    assert page.rows["train"] + page.rows["eval"] == 2000
    train = next(s for s in page.splits if s.split == "train")
    fare = next(f for f in train.features if f.name == "fare")
    assert fare.kind == "numeric" and fare.histogram and fare.count + fare.missing == train.rows
    assert next(f for f in train.features if f.name == "payment_type").top_values
    assert {"loss", "auc"} <= set(page.training) and len(page.training["loss"]["validation"]) == 2
    assert page.evaluation.blessed and "binary_accuracy" in page.evaluation.metrics
    assert any("binary_accuracy at least 0.6 (overall)" in t for t in page.evaluation.thresholds)
    assert page.serving_check["blessed"]
    model_uri = next(v for k, v in page.lineage.items() if k.startswith("model artifact"))
    assert os.path.isdir(model_uri) and page.lineage["Trainer execution"].isdigit()
    assert "drift" in page.notes  # the first run has no baseline
    # The document: sections, charts, and nothing it would fetch.
    for anchor, _ in html.SECTIONS:
        assert f'<section id="{anchor}">' in document
    for chart in re.findall(r"<svg\b.*?</svg>", document, flags=re.S):
        ET.fromstring(chart)
    assert "<script" not in document and "Content-Security-Policy" in document
    assert len(document.encode()) < MAX_PAGE_BYTES


def test_the_refused_runs_page_shows_the_refusal_and_the_drift_that_caused_it(runs):
    page, document = runs["pages"]["refused"]["page"], runs["pages"]["refused"]["document"]
    assert (page.status, page.failed_component) == ("refused", "DataGate")
    assert not page.pushed and page.not_pushed == "the run stopped at DataGate"
    # The same refusal the CLI printed, from the verdict the gate wrote.
    for line in page.failure.splitlines()[:3]:
        assert line in runs["bad_stderr"]
    assert "feature 'trip_miles': SCHEMA_MISSING_COLUMN" in page.failure
    assert {(a.split, a.feature, a.type) for a in page.anomalies} >= {("train", "trip_miles", "SCHEMA_MISSING_COLUMN")}
    assert page.baseline_name == "the last blessed model's data"
    trip_miles = next(d for d in page.distances if d.feature == "trip_miles")
    assert trip_miles.shifted and page.distances[0] is trip_miles and trip_miles.labels
    assert page.training == {} and page.evaluation is None and "training" in page.notes
    assert '<header class="refused">' in document and "What stopped the run at DataGate" in document
    assert "no Trainer ran in this run" in document
    # The run logged its page to its MLflow run, which it marked FAILED.
    client = MlflowClient(f"sqlite:///{runs['home']}/mlflow/mlflow.db")
    assert client.get_run(page.mlflow_run_id).info.status == "FAILED"
    assert [a.path for a in client.list_artifacts(page.mlflow_run_id, "report")] == [
        f"report/{os.path.basename(runs['pages']['refused']['path'])}"
    ]


def test_the_model_card_of_the_pushed_model(runs):
    page = runs["pages"]["pushed"]["page"]
    card = model_card.render_markdown(page)
    assert card.startswith(f"# Model card: {PIPELINE} version {page.pushed_version}")
    assert "the probability that tips > 0.2 x fare" in card and "| numeric | fare, trip_miles, trip_seconds |" in card
    assert "## Limitations" in card and f"| code commit | {page.code_commit} |" in card
    assert "<script" not in model_card.render_html(page)
    # The run kept the card under the home folder, and MLflow has it with the page and on the registered version.
    written = os.path.join(runs["home"], "model_cards", "taxi", f"{page.pushed_version}.md")
    assert open(written, encoding="utf-8").read() == card
    assert f"  model card:     {written}" in runs["good_stdout"]
    client = MlflowClient(f"sqlite:///{runs['home']}/mlflow/mlflow.db")
    logged = {a.path for folder in ("report", "model_card") for a in client.list_artifacts(page.mlflow_run_id, folder)}
    assert logged == {
        f"report/{os.path.basename(runs['pages']['pushed']['path'])}",
        f"model_card/{page.pushed_version}.md",
        f"model_card/{page.pushed_version}.html",
    }
    [version] = client.search_model_versions("name='taxi'")
    assert version.description == card


def test_tfxflow_report_writes_any_recorded_run_again(runs, tmp_path):
    refused = runs["pages"]["refused"]["page"]
    out = tmp_path / "again.html"
    result = helpers.run_cli("report", "--home", runs["home"], "--run", refused.run_id, "--out", str(out))
    assert result.returncode == 0 and f"wrote {out}" in result.stdout, result.stderr[-2000:]
    assert "What stopped the run at DataGate" in out.read_text(encoding="utf-8")
    unknown = helpers.run_cli("report", "--home", runs["home"], "--run", "no-such-run")
    assert unknown.returncode == 2 and refused.run_id in unknown.stderr


@pytest.mark.parametrize("name", ["pushed", "refused"])
def test_the_page_in_headless_chromium_requests_nothing_but_itself(runs, name):
    try:
        browser.chromium()
    except browser.BrowserMissing as err:
        pytest.fail(str(err))
    shown = browser.render(runs["pages"][name]["path"], str(runs["base"] / "browser" / name), *SCREEN)
    # Loaded twice (screenshot, DOM), each time the page alone.
    assert len(shown.page_requests) == 2 and shown.served == [("GET", browser.PAGE_PATH)] * 2
    assert shown.foreign_requests == [], shown.foreign_requests
    assert browser.png_size(shown.screenshot) == SCREEN
    assert browser.pixel_variance(shown.screenshot) > 100  # not a blank page
    for dom in (shown.dom, shown.file_dom):
        for anchor, heading in html.SECTIONS:
            assert f'id="{anchor}"' in dom and heading in dom
        assert dom.count("<svg") >= 5
    assert ("succeeded" if name == "pushed" else "refused") in shown.dom


def test_the_harness_catches_a_page_that_fetches(runs, tmp_path):
    """The control: the same harness on a page that loads a stylesheet and an image records both."""
    try:
        browser.chromium()
    except browser.BrowserMissing as err:
        pytest.fail(str(err))
    leaky = tmp_path / "leaky.html"
    leaky.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="http://cdn.example.com/style.css"></head>'
        '<body><h1>leaky</h1><img src="http://images.example.com/pixel.png"></body></html>',
        encoding="utf-8",
    )
    shown = browser.render(str(leaky), str(tmp_path / "shot"), 400, 300)
    asked = {target for _, target in shown.foreign_requests}
    assert {"http://cdn.example.com/style.css", "http://images.example.com/pixel.png"} <= asked
