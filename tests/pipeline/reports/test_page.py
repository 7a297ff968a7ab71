"""Collecting a run's page: settings that differ, statistics in the page's terms, drift bins, the blessing's
rules, and a run with most pieces missing (a small ML Metadata store written here)."""

import csv
import dataclasses
import html as html_lib
import json
import os
import re

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from tests import helpers
from tfxflow.pipeline.reports import page as page_lib

PIPELINE = "tfxflow-taxi"


@dataclasses.dataclass
class Training:
    train_steps: int = 1000
    batch_size: int = 256


def test_changed_settings_lists_what_differs_from_the_defaults():
    settings = {"training": Training(train_steps=60), "slice_by": ["payment_type"], "name": "taxi"}
    defaults = {"training": Training(), "slice_by": [], "name": "taxi"}
    assert page_lib.changed_settings(settings, defaults) == {
        "slice_by": ('["payment_type"]', "[]"),
        "training.train_steps": ("60", "1000"),
    }
    assert page_lib.changed_settings(Training(batch_size=64), None) == {
        "batch_size": ("64", None),
        "train_steps": ("1000", None),
    }
    assert page_lib.changed_settings(None, defaults) == {}


def test_thresholds_in_words_from_the_evaluators_config():
    config = {
        "metrics_specs": [
            {
                "metrics": [
                    {"class_name": "ExampleCount"},
                    {
                        "class_name": "BinaryAccuracy",
                        "per_slice_thresholds": [
                            {
                                "slicing_specs": [{}],
                                "threshold": {
                                    "change_threshold": {"absolute": -0.02, "direction": "HIGHER_IS_BETTER"},
                                    "value_threshold": {"lower_bound": 0.6},
                                },
                            }
                        ],
                    },
                ]
            }
        ]
    }
    assert page_lib._thresholds(json.dumps(config)) == [
        "binary_accuracy at least 0.6 (overall)",
        "binary_accuracy no worse than the last blessed model's by more than 0.02 "
        "(overall; skipped without a baseline)",
    ]
    assert page_lib._thresholds(None) == [] and page_lib._thresholds("not json") == []


def test_thresholds_of_an_upper_bound_read_from_the_real_config_of_a_regression():
    from google.protobuf import json_format

    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.pipeline.config import EvaluationConfig
    from tfxflow.pipeline.definition import eval_config

    features = FeatureConfig.from_dict(
        {"task": "regression", "label": {"name": "y_label", "column": "y"}, "numeric": ["x"]}
    )
    config = eval_config(EvaluationConfig(metric="rmse", threshold=2.5, max_regression=0.1), features)
    assert page_lib._thresholds(json_format.MessageToJson(config, preserving_proto_field_name=True)) == [
        "rmse at most 2.5 (overall)",
        "rmse no worse than the last blessed model's by more than 0.1 (overall; skipped without a baseline)",
    ]


def numeric_feature(name: str, values_per_bucket, missing: int = 0) -> statistics_pb2.FeatureNameStatistics:
    """A numeric feature whose values 0..n-1 fall evenly in buckets of width 1, with quantile and standard
    histograms alike."""
    feature = statistics_pb2.FeatureNameStatistics(type=statistics_pb2.FeatureNameStatistics.FLOAT)
    feature.path.step.append(name)
    stats = feature.num_stats
    count = int(sum(values_per_bucket))
    stats.common_stats.num_non_missing = count
    stats.common_stats.num_missing = missing
    stats.mean, stats.std_dev, stats.min, stats.max = 1.5, 1.0, 0.0, float(len(values_per_bucket))
    for kind in (statistics_pb2.Histogram.STANDARD, statistics_pb2.Histogram.QUANTILES):
        histogram = stats.histograms.add(type=kind)
        for i, n in enumerate(values_per_bucket):
            histogram.buckets.add(low_value=float(i), high_value=float(i + 1), sample_count=float(n))
    return feature


def string_feature(name: str, counts) -> statistics_pb2.FeatureNameStatistics:
    feature = statistics_pb2.FeatureNameStatistics(type=statistics_pb2.FeatureNameStatistics.STRING)
    feature.path.step.append(name)
    stats = feature.string_stats
    stats.common_stats.num_non_missing = int(sum(counts.values()))
    stats.common_stats.tot_num_values = int(sum(counts.values()))
    stats.unique = len(counts)
    for value, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        stats.top_values.add(value=value, frequency=float(n))
        stats.rank_histogram.buckets.add(label=value, sample_count=float(n))
    return feature


def dataset(rows: int, *features) -> statistics_pb2.DatasetFeatureStatisticsList:
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    data = stats.datasets.add(num_examples=rows)
    for feature in features:
        data.features.add().CopyFrom(feature)
    return stats


def test_statistics_in_the_pages_terms():
    stats = dataset(
        110,
        numeric_feature("fare", [10] * 10, missing=10),
        string_feature("payment_type", {f"v{i}": 10 + i for i in range(8)}),
    )
    split = page_lib.summarize_split(stats, "train")
    fare, payment = split.features
    assert (split.rows, split.features_total) == (110, 2)
    assert (fare.kind, fare.count, fare.missing, fare.min, fare.max) == ("numeric", 100, 10, 0.0, 10.0)
    assert fare.histogram[0] == (0.0, 1.0, 10.0) and len(fare.histogram) == 10
    assert (payment.kind, payment.unique, payment.missing) == ("categorical", 8, 110 - payment.count)
    assert payment.top_values[0] == ("v7", 17.0) and len(payment.top_values) == page_lib.TOP_VALUES


def test_features_are_capped(monkeypatch):
    monkeypatch.setattr(page_lib, "MAX_FEATURES", 3)
    stats = dataset(10, *(numeric_feature(f"f{i:02d}", [1] * 10) for i in range(7)))
    split = page_lib.summarize_split(stats, "eval")
    assert [f.name for f in split.features] == ["f00", "f01", "f02"] and split.features_total == 7


def test_drift_checks_carry_the_bins_of_both_sides_and_the_shifted_one_comes_first():
    schema = schema_pb2.Schema()
    for name in ("fare", "payment_type"):
        schema.feature.add(name=name)
    schema.feature[0].drift_comparator.jensen_shannon_divergence.threshold = 0.01
    schema.feature[1].drift_comparator.infinity_norm.threshold = 0.05
    baseline = dataset(
        10_000, numeric_feature("fare", [1000] * 10), string_feature("payment_type", {"Cash": 5000, "Card": 5000})
    )
    current = dataset(
        10_000,
        numeric_feature("fare", [1000] * 10),
        string_feature("payment_type", {"Cash": 8000, "Card": 2000}),
    )
    checks, notes = page_lib.distance_checks(baseline, current, schema, "drift")
    assert notes == []
    assert [c.feature for c in checks] == ["payment_type", "fare"]
    payment, fare = checks
    assert payment.shifted and payment.measure == "L-infinity distance" and payment.value == pytest.approx(0.3)
    assert payment.labels == ["'Card'", "'Cash'"] and payment.baseline == [5000.0, 5000.0]
    assert payment.current == [2000.0, 8000.0]
    assert not fare.shifted and fare.value == pytest.approx(0.0, abs=1e-9) and len(fare.labels) == len(fare.current)
    assert "threshold 0.05" in payment.text


# --- a small ML Metadata store -------------------------------------------------------------------------------


def write_store(path: str, executions) -> None:
    """A store holding one run of PIPELINE: `executions` are (node id, state, custom properties)."""
    config = mlmd.ConnectionConfig()
    config.sqlite.filename_uri = path
    config.sqlite.connection_mode = mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    store = metadata_store.MetadataStore(config)
    types = {name: store.put_context_type(mlmd.ContextType(name=name)) for name in ("pipeline", "pipeline_run", "node")}
    pipeline_id, run_id = store.put_contexts(
        [
            mlmd.Context(type_id=types["pipeline"], name=PIPELINE),
            mlmd.Context(type_id=types["pipeline_run"], name="run-1"),
        ]
    )
    store.put_parent_contexts([mlmd.ParentContext(child_id=run_id, parent_id=pipeline_id)])
    [run_ctx] = store.get_contexts_by_id([run_id])
    for node, state, properties in executions:
        type_id = store.put_execution_type(mlmd.ExecutionType(name=node))
        [node_id] = store.put_contexts([mlmd.Context(type_id=types["node"], name=f"{PIPELINE}.{node}")])
        [node_ctx] = store.get_contexts_by_id([node_id])
        execution = mlmd.Execution(type_id=type_id, last_known_state=state)
        for key, value in properties.items():
            execution.custom_properties[key].string_value = value
        store.put_execution(execution, [], [run_ctx, node_ctx])


def test_a_run_that_failed_early_gets_a_page_with_notes_not_an_exception(tmp_path):
    path = str(tmp_path / "metadata.sqlite")
    message = "data gate: 1 anomaly stops the run (nothing was trained or pushed)"
    write_store(
        path,
        [
            ("CsvExampleGen", mlmd.Execution.COMPLETE, {}),
            (
                "DataGate",
                mlmd.Execution.FAILED,
                {page_lib.EXECUTION_RESULT: json.dumps({"code": 1, "resultMessage": message})},
            ),
        ],
    )
    page = page_lib.collect(path, PIPELINE, settings={"a": 1}, defaults={"a": 2}, code_commit="abc123")
    assert (page.status, page.failed_component, page.failure) == ("refused", "DataGate", message)
    assert page.verdict == "data refused by DataGate: nothing was trained or pushed"
    assert page.not_pushed == "the run stopped at DataGate" and not page.pushed
    assert page.settings == {"a": ("1", "2")} and page.code_commit == "abc123"
    assert [c.state for c in page.components] == ["ran", "failed"]
    assert {"data", "training", "evaluation", "serving", "mlflow"} <= set(page.notes)
    assert page.evaluation is None and page.training == {} and page.splits == []
    assert page.lineage["DataGate execution"] == str(page.components[1].execution_id)
    assert "tfxflow" in page.versions and "TFX" in page.versions


def test_the_page_shows_the_verdict_the_gate_wrote_not_one_derived_again(tmp_path):
    """ExampleValidator found nothing here, so re-deriving would pass the data; the gate's verdict says it
    stopped the run on an anomaly and allowed another: the page follows the verdict."""
    path = str(tmp_path / "metadata.sqlite")
    write_store(path, [("DataGate", mlmd.Execution.FAILED, {"allowed_anomaly_types": ""})])
    store = page_lib.run_record.open_store(path, readonly=False)
    [execution] = store.get_executions()
    anomalies = tmp_path / "root" / "ExampleValidator" / "anomalies" / "3"
    (anomalies / "Split-train").mkdir(parents=True)
    [type_id] = [store.put_artifact_type(mlmd.ArtifactType(name="ExampleAnomalies"))]
    [artifact_id] = store.put_artifacts([mlmd.Artifact(type_id=type_id, uri=str(anomalies))])
    event = mlmd.Event(type=mlmd.Event.INPUT, artifact_id=artifact_id, execution_id=execution.id)
    event.path.steps.add().key = "anomalies"
    store.put_events([event])
    verdict = {
        "passed": False,
        "message": "data gate: 1 anomaly stops the run (as the gate wrote it)",
        "checks": ["schema (ExampleValidator): 2 anomalies", "drift: no blessed model yet, nothing to compare with"],
        "allowed_types": ["FLOAT_TYPE_SMALL_FLOAT"],
        "stopped_by": [
            {"split": "train", "feature": "pay", "type": "ENUM_TYPE_UNEXPECTED_STRING_VALUES", "description": "x"}
        ],
        "allowed": [{"split": "train", "feature": "fare", "type": "FLOAT_TYPE_SMALL_FLOAT", "description": "y"}],
        "findings": [],
        "baseline": "",
    }
    folder = tmp_path / "root" / "DataGate" / "verdict" / str(execution.id)
    folder.mkdir(parents=True)
    (folder / "verdict.json").write_text(json.dumps(verdict))
    page = page_lib.collect(path, PIPELINE)
    assert (page.status, page.failure) == ("refused", "data gate: 1 anomaly stops the run (as the gate wrote it)")
    assert [(a.feature, a.type) for a in page.anomalies] == [
        ("pay", "ENUM_TYPE_UNEXPECTED_STRING_VALUES"),
        ("fare", "FLOAT_TYPE_SMALL_FLOAT"),
    ]
    assert page.allowed_anomaly_types == ["FLOAT_TYPE_SMALL_FLOAT"]  # the execution's property says none
    assert page.gate_checks == verdict["checks"]
    assert page.notes["drift"] == "drift: no blessed model yet, nothing to compare with"


def test_the_callers_error_wins_over_a_missing_message(tmp_path):
    path = str(tmp_path / "metadata.sqlite")
    write_store(path, [("Trainer", mlmd.Execution.FAILED, {})])
    assert page_lib.collect(path, PIPELINE).failure == "Trainer failed; its error is in the run's log"
    page = page_lib.collect(path, PIPELINE, error="ResourceExhaustedError: OOM", mlflow_run_id="r1")
    assert (page.status, page.failure, page.mlflow_run_id) == ("failed", "ResourceExhaustedError: OOM", "r1")
    assert page.verdict == "failed at Trainer; nothing was pushed"


def test_no_store_or_no_run_gives_none(tmp_path):
    assert page_lib.collect(str(tmp_path / "absent.sqlite"), PIPELINE) is None
    path = str(tmp_path / "metadata.sqlite")
    write_store(path, [("CsvExampleGen", mlmd.Execution.COMPLETE, {})])
    assert page_lib.collect(path, "another-pipeline") is None
    assert page_lib.collect(path, PIPELINE, "no-such-run") is None


def test_an_artifact_given_under_two_keys_is_found_under_both():
    """ML Metadata keeps one event per artifact: the same statistics as `statistics` and `baseline_statistics`
    (a run whose ExampleGen and StatisticsGen were cached) is one event with both keys in its path."""
    event = mlmd.Event(type=mlmd.Event.INPUT, artifact_id=4)
    for key in ("statistics", "baseline_statistics"):
        event.path.steps.add().key = key
        event.path.steps.add().index = 0
    other = mlmd.Event(type=mlmd.Event.OUTPUT, artifact_id=5)
    other.path.steps.add().key = "checks"

    class Store:
        def get_events_by_execution_ids(self, ids):
            return [event, other]

        def get_artifacts_by_id(self, ids):
            return [mlmd.Artifact(id=i, uri=f"/a/{i}") for i in ids]

    inputs = page_lib._inputs(Store(), 8)
    assert {k: [a.uri for a in v] for k, v in inputs.items()} == {
        "statistics": ["/a/4"],
        "baseline_statistics": ["/a/4"],
    }


def _cells(document: str, split: str, feature: str) -> dict:
    """{column: cell text} of one feature's row in a split's table of the rendered page."""
    table = document.split(f'id="data-{split}"', 1)[1].split("</table>", 1)[0]
    headers = re.findall(r"<th>([^<]*)</th>", table)
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", table) if r.startswith(f"<td>{feature}</td>"))
    return dict(zip(headers, [html_lib.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)], strict=True))


def test_empty_cells_count_as_missing_and_a_column_without_values_has_no_moments(tmp_path):
    """The taxi data's pickup_census_tract has a value in 1 of 15,002 rows. Ingestion writes an empty cell as
    a present feature with an empty list, so TFDV counts every row in num_non_missing and none in num_missing;
    the page counts rows with a value, and shows no mean, std, min or max where there is no value (TFDV's
    statistics leave them 0)."""
    from tfxflow.pipeline.inputs import bundled_taxi_data_root
    from tfxflow.pipeline.reports import html

    with open(os.path.join(bundled_taxi_data_root(), "data.csv"), encoding="utf-8") as f:
        header, *lines = f.readlines()
    rows = list(csv.DictReader([header, *lines]))
    tract = [i for i, r in enumerate(rows) if r["pickup_census_tract"]]
    assert len(tract) == 1 and len(rows) == 15002  # the file of the report
    others = [i for i in range(len(rows)) if i not in tract][:59]
    # train: empty in all but one of 30 rows; eval: empty in all 30 rows
    samples = {"train": tract + others[:29], "eval": others[29:]}
    splits, statistics = [], {}
    for split, picked in samples.items():
        statistics[split] = helpers.ingested_taxi_statistics(tmp_path / split, header, [lines[i] for i in picked])
        splits.append(page_lib.summarize_split(statistics[split], split))
        features = {f.name: f for f in splits[-1].features}
        assert splits[-1].rows == 30
        for column in ("pickup_census_tract", "dropoff_census_tract", "company", "fare"):
            empty = sum(1 for i in picked if not rows[i][column])
            assert (features[column].count, features[column].missing) == (30 - empty, empty), (split, column)
    train, eval_ = ({f.name: f for f in s.features} for s in splits)
    # What TFDV says of the all-empty column (the cause): every row present, none missing, no value, zeros.
    raw = next(f for f in statistics["eval"].datasets[0].features if f.path.step == ["pickup_census_tract"])
    common = raw.num_stats.common_stats
    assert (common.num_non_missing, common.num_missing, common.tot_num_values) == (30, 0, 0)
    assert (raw.num_stats.mean, raw.num_stats.min, raw.num_stats.max) == (0, 0, 0)

    one = train["pickup_census_tract"]  # one value: its moments, but no spread
    assert (one.count, one.missing, one.mean, one.min, one.max) == (1, 29, 17031081401.0, 17031081401.0, 17031081401.0)
    assert one.std is None and one.histogram
    none = eval_["pickup_census_tract"]  # no value: nothing to show but the count of missing rows
    assert (none.count, none.missing) == (0, 30)
    assert (none.mean, none.std, none.min, none.max, none.histogram) == (None, None, None, None, [])
    fares = [float(rows[i]["fare"]) for i in samples["eval"]]  # a full column keeps TFDV's real figures
    fare = eval_["fare"]
    assert (fare.count, fare.missing) == (30, 0) and fare.std > 0
    assert fare.mean == pytest.approx(sum(fares) / 30, rel=1e-5)
    assert (fare.min, fare.max) == (pytest.approx(min(fares)), pytest.approx(max(fares)))

    document = html.render(page_lib.RunPage("p", "r", "succeeded", "pushed", splits=splits))
    shown = _cells(document, "eval", "pickup_census_tract")
    assert (shown["count"], shown["missing"]) == ("0", "30")
    assert [shown[k] for k in ("mean", "std", "min", "max")] == [html.ABSENT] * 4
    assert _cells(document, "train", "pickup_census_tract")["missing"] == "29"
    assert _cells(document, "eval", "fare")["mean"] not in ("", html.ABSENT)
