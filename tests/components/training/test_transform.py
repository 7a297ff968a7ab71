"""Transform's analyzers read a bounded, systematic sample of a large training split, through TFX's own
executor and tf.Transform; a Transform that materializes its output reads every row."""

import json
import os

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.types import standard_artifacts, standard_component_specs

from tests.components.split_examples import examples_of
from tfxflow.components.training import transform

pytestmark = pytest.mark.integration

SCHEMA = """
feature { name: "x" type: INT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "y" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
"""


def counting_fn(inputs):
    """How many rows the analyzers saw, and their mean of y, on every output row."""
    zeros = tf.zeros_like(inputs["x"][:, 0])
    return {"rows": zeros + tft.size(inputs["x"]), "y_mean": tf.cast(zeros, tf.float32) + tft.mean(inputs["y"])}


def _run(tmp_path, examples, max_rows, materialize=False, statistics=False):
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    os.makedirs(schema.uri)
    (tmp_path / "schema" / "schema.pbtxt").write_text(SCHEMA)
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(tmp_path / "graph")
    outputs = {standard_component_specs.TRANSFORM_GRAPH_KEY: [graph]}
    if materialize:
        transformed = standard_artifacts.Examples()
        transformed.uri = str(tmp_path / "transformed")
        outputs[standard_component_specs.TRANSFORMED_EXAMPLES_KEY] = [transformed]
    if statistics:  # TFX's pre- and post-transform statistics, schemas and anomalies
        for key, kind in (
            (standard_component_specs.PRE_TRANSFORM_SCHEMA_KEY, standard_artifacts.Schema),
            (standard_component_specs.PRE_TRANSFORM_STATS_KEY, standard_artifacts.ExampleStatistics),
            (standard_component_specs.POST_TRANSFORM_SCHEMA_KEY, standard_artifacts.Schema),
            (standard_component_specs.POST_TRANSFORM_STATS_KEY, standard_artifacts.ExampleStatistics),
            (standard_component_specs.POST_TRANSFORM_ANOMALIES_KEY, standard_artifacts.ExampleAnomalies),
        ):
            artifact = kind()
            artifact.uri = str(tmp_path / key)
            outputs[key] = [artifact]
    transform.Executor().Do(
        {standard_component_specs.EXAMPLES_KEY: [examples], standard_component_specs.SCHEMA_KEY: [schema]},
        outputs,
        {
            standard_component_specs.PREPROCESSING_FN_KEY: f"{__name__}.counting_fn",
            standard_component_specs.FORCE_TF_COMPAT_V1_KEY: 1,
            standard_component_specs.DISABLE_STATISTICS_KEY: int(not statistics),
            transform.MAX_ROWS_KEY: max_rows,
        },
    )
    # As the Trainer and the export apply it
    applied = tft.TFTransformOutput(graph.uri).transform_features_layer()(
        {"x": tf.constant([[1]], tf.int64), "y": tf.constant([[1.0]])}
    )
    return graph, int(applied["rows"][0]), float(applied["y_mean"][0])


def test_a_large_training_split_is_analyzed_on_every_kth_row(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    train = result.split_rows["train"]
    graph, rows, y_mean = _run(tmp_path, examples, 1000)
    every = -(-train // 1000)
    plan = json.loads(graph.get_string_custom_property(transform.SAMPLE_PROPERTY))
    assert plan == {"train": {"rows": train, "every": every, "sampled": -(-train // every)}}
    assert rows == plan["train"]["sampled"] <= 1000
    # examples_of writes y = i % 7 + 0.5: a systematic sample of a hash split has about the whole's mean
    assert abs(y_mean - 3.5) < 0.15
    assert not os.path.exists(os.path.join(graph.uri, transform.SAMPLE_FOLDER))


def test_a_transform_that_computes_statistics_analyzes_every_row(tmp_path):
    """TFX's statistics read every transform split (the eval split too): they are of the whole data."""
    examples, result = examples_of(tmp_path, 4000)
    graph, rows, _ = _run(tmp_path, examples, 1000, statistics=True)
    assert rows == result.split_rows["train"]
    assert not graph.has_custom_property(transform.SAMPLE_PROPERTY)
    # The post-transform statistics are of every transformed row: both splits, whole.
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    path = tmp_path / standard_component_specs.POST_TRANSFORM_STATS_KEY / "FeatureStats.pb"
    stats.ParseFromString(path.read_bytes())
    assert stats.datasets[0].num_examples == result.split_rows["train"] + result.split_rows["eval"] == 4000


def test_a_transform_that_materializes_analyzes_every_row(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    graph, rows, _ = _run(tmp_path, examples, 1000, materialize=True)
    assert rows == result.split_rows["train"]
    assert not graph.has_custom_property(transform.SAMPLE_PROPERTY)
    written = tf.io.gfile.glob(os.path.join(str(tmp_path / "transformed"), "Split-train", "*"))
    assert sum(1 for _ in tf.data.TFRecordDataset(written, compression_type="GZIP")) == rows
