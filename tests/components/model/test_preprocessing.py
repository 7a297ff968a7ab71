"""preprocessing_fn through real tf.Transform (AnalyzeAndTransformDataset on Beam), on a handful of rows."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam

from tfxflow.components.model import features as features_lib
from tfxflow.components.model.preprocessing import fill_categorical, preprocessing_fn

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
