"""The run page's HTML: every section, nothing fetched, escaped, a refused run's page, the atomic write."""

import os
import re
import xml.etree.ElementTree as ET

import pytest

from tfxflow.pipeline.reports import html
from tfxflow.pipeline.reports.page import (
    AnomalyRow,
    ComponentRow,
    DistanceCheck,
    EvalSection,
    FeatureSummary,
    RunPage,
    SplitSummary,
)

SECTION_IDS = [anchor for anchor, _ in html.SECTIONS]


def sample_page(**overrides) -> RunPage:
    """A succeeded, pushed run with every section filled."""
    values = dict(
        pipeline_name="tfxflow-taxi",
        run_id="2026-11-30T16:09:28.095826",
        status="succeeded",
        verdict="blessed and pushed as version 1796055012",
        started="2026-11-30 16:09:28 UTC",
        finished="2026-11-30 16:10:15 UTC",
        wall_s=47.6,
        settings={"training.train_steps": ("60", "1000")},
        versions={"tfxflow": "0.1.0", "TFX": "1.16.0", "TensorFlow": "2.16.2"},
        code_commit="240f057",
        mlflow_run_id="3f76311a371e404186e9cb80779ae13a",
        pushed_version="1796055012",
        pushed_destination="/srv/serving/taxi/1796055012",
        components=[
            ComponentRow("CsvExampleGen", "ran", 2.5, 4),
            ComponentRow("ImportSchemaGen", "cached", 0.01, 1),
            ComponentRow("Trainer", "ran", 12.1, 10),
        ],
        rows={"train": 1486, "eval": 514},
        splits=[
            SplitSummary(
                "train",
                1486,
                [
                    FeatureSummary(
                        "fare", "numeric", 1480, 6, 13.2, 10.8, 0.0, 78.4, histogram=[(0, 40, 1400), (40, 80, 80)]
                    ),
                    FeatureSummary("payment_type", "categorical", 1486, 0, unique=6, top_values=[("Cash", 957.0)]),
                ],
                features_total=2,
            )
        ],
        anomalies=[AnomalyRow("train", "payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES", "Bitcoin")],
        allowed_anomaly_types=["ENUM_TYPE_UNEXPECTED_STRING_VALUES"],
        gate_checks=["schema (ExampleValidator): 1 anomaly"],
        baseline_name="the last blessed model's data",
        distances=[
            DistanceCheck(
                "drift",
                "fare",
                "Jensen-Shannon divergence",
                0.004,
                0.01,
                0.2,
                False,
                False,
                "Jensen-Shannon divergence 0.0040 <= threshold 0.01",
                ["(-inf, 5]", "(5, inf)"],
                [700.0, 786.0],
                [690.0, 796.0],
            )
        ],
        training={"loss": {"train": [0.65, 0.45], "validation": [0.55, 0.42]}, "auc": {"train": [0.5, 0.8]}},
        training_info={"strategy": "MirroredStrategy", "devices": ["/cpu:0"], "global_batch": 64},
        evaluation=EvalSection(
            metrics={"binary_accuracy": 0.78, "auc": 0.89},
            baseline_metrics={"binary_accuracy": 0.76},
            slices={"overall": {"binary_accuracy": 0.78}, "payment_type=Cash": {"binary_accuracy": 0.9}},
            blessed=True,
            blessing_failures=[],
            thresholds=["binary_accuracy at least 0.6 (overall)"],
            sample="a sample of 172 of the 514 eval rows (every 3rd)",
        ),
        features={
            "label": {"name": "big_tipper", "column": "tips", "ratio_of": "fare", "greater_than": 0.2},
            "numeric": ["fare"],
            "categorical": ["payment_type"],
        },
        lineage={"Trainer execution": "10", "model artifact 12": "/root/Trainer/model/10"},
    )
    values.update(overrides)
    return RunPage(**values)


def refused_page() -> RunPage:
    return sample_page(
        status="refused",
        verdict="data refused by DataGate: nothing was trained or pushed",
        failed_component="DataGate",
        failure="data gate: 1 anomaly stops the run (nothing was trained or pushed):\n"
        "  - split 'train', feature 'trip_miles': SCHEMA_MISSING_COLUMN: Column is completely missing",
        pushed_version=None,
        pushed_destination=None,
        not_pushed="the run stopped at DataGate",
        components=[ComponentRow("StatisticsGen", "ran", 2.6, 6), ComponentRow("DataGate", "failed", 0.02, 8)],
        training={},
        evaluation=None,
        notes={"training": "no Trainer ran in this run", "evaluation": "no Evaluator ran in this run"},
    )


def svgs(document: str):
    return re.findall(r"<svg\b.*?</svg>", document, flags=re.S)


def test_every_section_has_its_anchor_and_a_link_in_the_nav():
    document = html.render(sample_page())
    for anchor in SECTION_IDS:
        assert f'<section id="{anchor}">' in document
        assert f'href="#{anchor}"' in document
    assert document.startswith("<!DOCTYPE html>")
    assert "blessed and pushed as version 1796055012" in document


def test_the_page_fetches_nothing_and_runs_no_script():
    document = html.render(sample_page())
    assert "<script" not in document.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", document, flags=re.I)
    assert "@import" not in document and "url(" not in document
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;; img-src data:; '
        'style-src &#x27;unsafe-inline&#x27;">'
    ) in document
    # The only URLs are SVG's namespace, which is an identifier, not a request.
    assert set(re.findall(r"https?://[^\"' <]+", document)) == {"http://www.w3.org/2000/svg"}


def test_each_chart_is_well_formed_svg():
    charts = svgs(html.render(sample_page()))
    # timing, a histogram, top values, a drift gauge and its bins, two training curves
    assert len(charts) >= 7
    for chart in charts:
        ET.fromstring(chart)


def test_values_of_the_run_are_shown():
    document = html.render(sample_page())
    for text in (
        "training.train_steps",
        "1000",
        "240f057",
        "3f76311a371e404186e9cb80779ae13a",
        "1.16.0",
        "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
        "Jensen-Shannon divergence",
        "binary_accuracy at least 0.6 (overall)",
        "payment_type=Cash",
        "/root/Trainer/model/10",
        "1,486",
    ):
        assert text in document, text


def test_user_text_is_escaped():
    page = sample_page(
        failure="<img src=x onerror=alert(1)>",
        status="failed",
        gate_checks=['<b onclick="x">'],
        anomalies=[AnomalyRow("train", "<script>", "T", "</td><script>")],
    )
    document = html.render(page)
    assert "<script" not in document and "<img" not in document and "<b onclick" not in document
    assert "&lt;img src=x onerror=alert(1)&gt;" in document


def test_a_refused_run_shows_the_refusal_and_notes_for_what_did_not_run():
    document = html.render(refused_page())
    assert '<header class="refused">' in document
    assert "What stopped the run at DataGate" in document
    assert "SCHEMA_MISSING_COLUMN: Column is completely missing" in document
    assert "no Trainer ran in this run" in document and "no Evaluator ran in this run" in document
    assert "no: the run stopped at DataGate" in document
    for anchor in SECTION_IDS:  # the sections are there, with their notes
        assert f'<section id="{anchor}">' in document


def test_an_empty_page_renders():
    document = html.render(RunPage("p", "r", "running", "running at Trainer"))
    assert document.count("<section") == len(SECTION_IDS)


def test_features_are_capped_in_the_page():
    features = [FeatureSummary(f"f{i}", "numeric", 10, 0, 1.0, 0.0, 1.0, 1.0) for i in range(3)]
    page = sample_page(splits=[SplitSummary("train", 10, features, features_total=80)])
    assert "the first 3 of 80 features" in html.render(page)


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "reports" / "run.html"
    assert html.write(sample_page(), str(target)) == str(target)
    assert target.read_text(encoding="utf-8") == html.render(sample_page())
    assert os.listdir(target.parent) == ["run.html"]
    assert oct(os.stat(target).st_mode & 0o777) == "0o644"


def test_a_failed_write_keeps_the_old_page(tmp_path, monkeypatch):
    target = tmp_path / "run.html"
    target.write_text("old", encoding="utf-8")

    def broken(page):
        raise RuntimeError("render failed")

    monkeypatch.setattr(html, "render", broken)
    with pytest.raises(RuntimeError):
        html.write(sample_page(), str(target))
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["run.html"]


def test_rendering_is_deterministic_across_processes():
    from tests import helpers

    first, second = helpers.outputs_under_hash_seeds(
        "import sys\n"
        "from tests.pipeline.reports.test_html import sample_page\n"
        "from tfxflow.pipeline.reports import html\n"
        "sys.stdout.write(html.render(sample_page()))"
    )
    assert first == second and first.startswith("<!DOCTYPE html>")


def test_the_tuning_section_charts_the_objective_per_trial_and_per_setting_and_lists_every_trial():
    tuning = {
        "objective": "binary_accuracy",
        "monitor": "val_binary_accuracy",  # what the page gives (components/tuner.monitor)
        "summary": "3 trials (1 complete, 1 pruned, 1 failed) in 20.1 s; best trial 0: ...",
        "space": [
            {"name": "learning_rate", "low": 1e-4, "high": 3e-2, "log": True},
            {"name": "width", "choices": [32, 64]},
        ],
        "best": {"number": 0, "value": 0.8921, "values": {"learning_rate": 0.0065, "width": 64}},
        "trials": [
            {
                "number": 0,
                "state": "complete",
                "values": {"learning_rate": 0.0065, "width": 64},
                "value": 0.8921,
                "seconds": 6.8,
            },
            {
                "number": 1,
                "state": "pruned",
                "values": {"learning_rate": 0.0002, "width": 32},
                "value": None,
                "seconds": 2.1,
                "pruned_at_epoch": 2,
            },
            {
                "number": 2,
                "state": "failed",
                "values": {"learning_rate": 0.02, "width": 32},
                "value": None,
                "seconds": 0.4,
                "error": "ValueError: <no model>",
            },
        ],
    }
    section = html.RENDERERS["tuning"](sample_page(tuning=tuning))
    charts_ = svgs(section)
    assert len(charts_) == 3  # per trial, by learning_rate, by width
    for chart in charts_:
        ET.fromstring(chart)
    assert "log10 learning_rate" in section and "val_binary_accuracy by width" in section
    assert '<span class="badge yes">best</span>' in section
    assert "pruned after epoch 2" in section and "ValueError: &lt;no model&gt;" in section
    assert "3 trials (1 complete, 1 pruned, 1 failed)" in section
    assert "no tuning in this run" in html.RENDERERS["tuning"](sample_page())


def test_a_module_tuners_trials_chart_its_numbers_and_list_its_strings():
    """keras-tuner may search strings and booleans (a module's tuner_fn): listed per trial, charted only where
    a setting is a number; the objective named as keras-tuner names it."""
    trials = [
        {"number": n, "state": "complete", "values": {"optimizer": o, "units": u}, "value": v, "seconds": 1.0}
        for n, (o, u, v) in enumerate([("adam", 8, 0.91), ("sgd", 16, 0.87)])
    ]
    tuning = {
        "objective": "sparse_categorical_accuracy",
        "monitor": "val_sparse_categorical_accuracy",
        "summary": "2 trials (2 complete, 0 pruned, 0 failed) in 3.0 s; best trial 0: ...",
        "space": [{"name": "optimizer", "choices": ["adam", "sgd"]}, {"name": "units", "low": 8, "high": 16}],
        "best": {"number": 0, "value": 0.91, "values": trials[0]["values"]},
        "trials": trials,
    }
    section = html.RENDERERS["tuning"](sample_page(tuning=tuning))
    assert "val_sparse_categorical_accuracy by units" in section and ">sgd</td>" in section
    by_optimizer = [c for c in svgs(section) if "by optimizer" in c]
    assert len(by_optimizer) == 1 and "<circle" not in by_optimizer[0]  # an empty chart, no point on a string
