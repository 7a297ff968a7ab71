"""preprocessing_fn through real tf.Transform (AnalyzeAndTransformDataset on Beam), on a handful of rows."""

import csv
import math
import os
import random

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam

from tfxflow.components.model import features as features_lib
from tfxflow.components.model.preprocessing import (
    bucketize_filled,
    fill_categorical,
    fill_numeric,
    preprocessing_fn,
    z_score_filled,
)
from tfxflow.pipeline.inputs import bundled_dataset_dir, bundled_taxi_data_root

CONFIG = features_lib.FeatureConfig.from_dict(
    {
        "label": {"name": "big_tipper", "column": "tips", "ratio_of": "fare", "greater_than": 0.2},
        "numeric": ["fare"],
        "categorical": ["payment_type", "trip_start_hour"],
        "bucketized": ["pickup_latitude"],
        "num_buckets": 2,
        "num_oov_buckets": 1,
    }
)

FEATURE_SPEC = {
    "fare": tf.io.VarLenFeature(tf.float32),
    "tips": tf.io.VarLenFeature(tf.float32),
    "payment_type": tf.io.VarLenFeature(tf.string),
    "trip_start_hour": tf.io.VarLenFeature(tf.int64),
    "pickup_latitude": tf.io.VarLenFeature(tf.float32),
}

# The last row misses every optional value.
ROWS = [
    {"fare": [10.0], "tips": [3.0], "payment_type": [b"Cash"], "trip_start_hour": [7], "pickup_latitude": [41.1]},
    {"fare": [20.0], "tips": [1.0], "payment_type": [b"Cash"], "trip_start_hour": [7], "pickup_latitude": [41.2]},
    {
        "fare": [30.0],
        "tips": [10.0],
        "payment_type": [b"Credit Card"],
        "trip_start_hour": [8],
        "pickup_latitude": [41.9],
    },
    {"fare": [], "tips": [5.0], "payment_type": [], "trip_start_hour": [], "pickup_latitude": []},
]


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    temp_dir = str(tmp_path_factory.mktemp("tft"))
    metadata = tft.DatasetMetadata.from_feature_spec(FEATURE_SPEC)
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        (data, _), transform_fn = (ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, {"features": CONFIG.to_dict()})
        )
    return data


@pytest.mark.integration
def test_numeric_is_z_scored_with_missing_filled_by_the_mean(transformed):
    # Present fares 10, 20, 30 have mean 20; the missing one is filled with 20, so the column is
    # [10, 20, 30, 20] with mean 20 and population std sqrt(50).
    fares = [row["fare_xf"] for row in transformed]
    assert fares[0] == pytest.approx(-10 / math.sqrt(50), rel=1e-5)
    assert fares[2] == pytest.approx(10 / math.sqrt(50), rel=1e-5)
    assert fares[3] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.integration
def test_vocabulary_ids_put_the_most_frequent_value_first(transformed):
    ids = [row["payment_type_xf"] for row in transformed]
    assert ids[0] == ids[1] == 0  # Cash, seen twice
    assert len({ids[0], ids[2], ids[3]}) == 3  # Credit Card and the filled-in missing value differ
    hours = [row["trip_start_hour_xf"] for row in transformed]
    assert hours[0] == hours[1] == 0 and hours[2] != 0 and hours[3] not in (hours[0], hours[2])


def test_missing_categorical_values_become_reserved_values():
    strings = fill_categorical(tf.sparse.SparseTensor(indices=[[0, 0]], values=[b"Cash"], dense_shape=[2, 1]))
    assert list(strings.numpy()) == [b"Cash", features_lib.MISSING_TOKEN.encode()]
    ints = fill_categorical(
        tf.sparse.SparseTensor(indices=[[1, 0]], values=tf.constant([7], tf.int64), dense_shape=[2, 1])
    )
    assert list(ints.numpy()) == [features_lib.MISSING_INT, 7]


@pytest.mark.integration
def test_bucketize_orders_by_value(transformed):
    buckets = [row["pickup_latitude_xf"] for row in transformed]
    assert set(buckets) <= {0, 1}
    assert buckets[0] == 0 and buckets[2] == 1


@pytest.mark.integration
def test_label_is_tip_above_twenty_percent_of_fare(transformed):
    # 3 > 0.2*10, 1 < 0.2*20, 10 > 0.2*30; a missing fare gives 0.
    assert [row["big_tipper"] for row in transformed] == [1, 0, 1, 0]
    assert all(np.asarray(row["big_tipper"]).dtype == np.int64 for row in transformed)


NUMBERS = ["fare", "trip_seconds", "pickup_latitude", "dropoff_latitude", "dropoff_longitude"]


def _taxi_numbers(blank_share: float, seed: int = 0):
    """The bundled taxi CSV's numeric columns (its own gaps kept: 483 rows lack a drop-off point), with a further
    `blank_share` of the values blanked at random."""
    draw = random.Random(seed)
    with open(os.path.join(bundled_taxi_data_root(), "data.csv"), encoding="utf-8") as f:
        return [
            {c: [float(row[c])] if row[c] and draw.random() >= blank_share else [] for c in NUMBERS}
            for row in csv.DictReader(f)
        ]


def _one_and_two_pass(folder, rows):
    """Each column through the one-pass functions, through TFT's own two-pass z-score of the filled column, and
    through TFT's own bucketize of the present values."""

    def both(inputs):
        out = {}
        for c in NUMBERS:
            out[c + "_z1"], out[c + "_z2"] = z_score_filled(inputs[c]), tft.scale_to_z_score(fill_numeric(inputs[c]))
            out[c + "_b1"] = bucketize_filled(inputs[c], 10)
            present = tft.bucketize(inputs[c], 10)  # sparse in, sparse out: the present values' buckets
            rows_of_one = tf.SparseTensor(present.indices, present.values, [present.dense_shape[0], 1])
            out[c + "_b2"] = tf.sparse.to_dense(rows_of_one, default_value=-1)[:, 0]
        return out

    metadata = tft.DatasetMetadata.from_feature_spec({c: tf.io.VarLenFeature(tf.float32) for c in NUMBERS})
    with tft_beam.Context(temp_dir=str(folder), force_tf_compat_v1=False):
        (data, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(both)
    return {key: np.array([row[key] for row in data]) for key in data[0]}


@pytest.mark.integration
@pytest.mark.parametrize("blank_share", [0.0, 0.3])
def test_one_pass_z_scores_and_buckets_are_tfts_own(tmp_path, blank_share):
    rows = _taxi_numbers(blank_share)
    out = _one_and_two_pass(tmp_path, rows)
    for c in NUMBERS:
        missing = np.array([not row[c] for row in rows])
        values = np.array([row[c][0] if row[c] else np.nan for row in rows])
        # TFT's two-pass mean of the filled column carries float32 rounding (1e-4 of a z-score for latitudes,
        # whose std is 0.04 of a value near 42); the one-pass filled rows are exactly 0.
        np.testing.assert_allclose(out[c + "_z1"], out[c + "_z2"], rtol=1e-4, atol=5e-4, err_msg=c)
        assert np.all(out[c + "_z1"][missing] == 0.0)
        assert abs(out[c + "_z1"].std() - 1.0) < 1e-3  # the filled column's own population std
        one, present = out[c + "_b1"], out[c + "_b2"]
        np.testing.assert_array_equal(one[~missing], present[~missing], err_msg=c)
        assert sorted(set(one)) == list(range(10)), c
        if missing.any():
            # Every missing row is in the bucket the present values' mean falls in.
            (bucket,) = set(one[missing])
            mean = values[~missing].mean()
            assert values[~missing & (one < bucket)].max(initial=-np.inf) <= mean, c
            assert values[~missing & (one > bucket)].min(initial=np.inf) >= mean, c


@pytest.mark.integration
def test_the_taxi_features_are_analyzed_in_one_pass(tmp_path):
    """TFT plans one analysis phase per round of analyzers that wait for others' results; each phase is a pass
    over the data (its transforms are labelled Phase0, Phase1, ...)."""
    config = features_lib.FeatureConfig.load(os.path.join(bundled_dataset_dir("taxi"), "features.yaml"))
    spec = {c: tf.io.VarLenFeature(tf.float32) for c in config.numeric + config.bucketized + ("tips",)}
    spec.update({c: tf.io.VarLenFeature(tf.string) for c in config.categorical})
    pipeline = beam.Pipeline()
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=False):
        rows = pipeline | beam.Create([{c: [] for c in spec}])
        _ = (rows, tft.DatasetMetadata.from_feature_spec(spec)) | tft_beam.AnalyzeDataset(
            lambda inputs: preprocessing_fn(inputs, {"features": config.to_dict()})
        )
    names = [t.unique_name for t in pipeline.to_runner_api().components.transforms.values()]
    phases = {name.split("[Phase", 1)[1].split("]")[0] for name in names if "ApplySavedModel[Phase" in name}
    assert phases == {"0"}
