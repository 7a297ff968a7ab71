"""tf.Examples built column by column are protobuf's deterministic bytes; the writer's files are TFRecords."""

import numpy as np
import pyarrow as pa
import tensorflow as tf

from tfxflow.components.ingest import tf_example


def _expected(row, kinds):
    feature = {}
    for name, value in row.items():
        values = [] if value is None else [value]
        if kinds[name] == "INT":
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        elif kinds[name] == "FLOAT":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def test_encoded_rows_are_the_deterministic_serialization():
    kinds = {"b_int": "INT", "a_float": "FLOAT", "text": "BYTES", "größe": "INT", "x" * 130: "BYTES"}
    columns = {
        "b_int": pa.array([0, -1, 2**40, None, 127, 128, -(2**63)], pa.int64()),
        "a_float": pa.array([1.5, None, -0.1, 3e38, float("nan"), 0.0, 1e-7], pa.float64()),
        "text": pa.array(["", "é" * 100, None, "Cash", "a,b", "x" * 300, "\n"], pa.string()),
        "größe": pa.array([None] * 7, pa.int64()),
        "x" * 130: pa.array(["v"] * 7, pa.string()),
    }
    batch = pa.RecordBatch.from_arrays(list(columns.values()), list(columns))
    encoded = tf_example.encode(batch, kinds).to_pylist()
    rows = batch.to_pylist()
    for got, row in zip(encoded, rows, strict=True):
        if row["a_float"] is not None and np.isnan(row["a_float"]):
            assert np.isnan(tf.train.Example.FromString(got).features.feature["a_float"].float_list.value[0])
            row["a_float"] = float("nan")
            assert got == tf.train.Example.FromString(got).SerializeToString(deterministic=True)
            continue
        assert got == _expected(row, kinds), row


def test_split_is_tfx_example_gens_partition_record_by_record():
    """Each record's split is the one TFX's own `_PartitionFn` gives it (ExampleGen's executor, no Beam)."""
    from tfx.components.example_gen.base_example_gen_executor import _PartitionFn
    from tfx.proto import example_gen_pb2

    records = [f"record {i}".encode() for i in range(2000)] + [bytes([i % 256]) * (i % 40) for i in range(500)]
    for buckets in ([3, 4], [1, 5, 10], [45, 50, 100]):
        ours = tf_example.split_buckets(pa.array(records, pa.binary()), buckets)
        theirs = [_PartitionFn(r, len(buckets), buckets, example_gen_pb2.SplitConfig()) for r in records]
        assert ours.tolist() == theirs, buckets
        assert set(theirs) == set(range(len(buckets)))


def test_written_files_are_gzip_tfrecords(tmp_path):
    records = [f"r{i}".encode() * (i % 50 + 1) for i in range(1000)]
    path = tmp_path / "data.gz"
    with open(path, "wb") as stream:
        writer = tf_example.TFRecordGzipWriter(stream)
        writer.write(pa.array(records[:600], pa.binary()))
        writer.write(records[600:])
        writer.close()
    assert writer.records == 1000
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type="GZIP")] == records


def test_masked_crc_is_beams():
    import random

    from apache_beam.io import tfrecordio

    draw = random.Random(5)
    for size in (0, 1, 11, 12, 500, *(draw.randrange(1, 3000) for _ in range(50))):
        record = bytes(draw.getrandbits(8) for _ in range(size))
        assert tf_example.masked_crc(record) == tfrecordio._TFRecordUtil._masked_crc32c(record)
