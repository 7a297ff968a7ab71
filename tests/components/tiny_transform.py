"""A real, small tf.Transform output (transform graph + gzipped transformed examples) for Trainer tests, for each
task: the same features, and a label that is 0/1 (binary), one of three named classes (multiclass) or a number
(regression), each a function of the features plus noise; and "text": a short text column (word pieces learned
by Transform) beside a number, with a yes/no label that the text's words decide."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import metadata_io

from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.model.preprocessing import preprocessing_fn

_ROLES = {"numeric": ["x1", "x2"], "categorical": ["city"], "bucketized": ["score"], "num_buckets": 4}
LABELS = {
    "binary": {"name": "label", "column": "y", "positive_values": ["1"]},
    "multiclass": {"name": "label", "column": "y", "classes": ["low", "mid", "high"]},
    "regression": {"name": "label", "column": "y"},
}
TEXT_ROLES = {"numeric": ["x1"], "text": ["words"], "sequence_length": 16, "text_vocab_size": 100}
TINY_CONFIGS = {
    task: FeatureConfig.from_dict({"task": task, "label": label, **_ROLES}) for task, label in LABELS.items()
}
TINY_CONFIGS["text"] = FeatureConfig.from_dict({"task": "binary", "label": LABELS["binary"], **TEXT_ROLES})
GOOD = ("great", "fine", "happy", "calm", "bright")
BAD = ("awful", "sad", "broken", "dark", "slow")
NEUTRAL = ("the", "a", "ride", "car", "day", "city", "trip", "driver", "road", "time", "rides", "driving")
TINY_FEATURES = TINY_CONFIGS["binary"]
_LABEL_DTYPES = {"binary": tf.int64, "multiclass": tf.string, "regression": tf.float32, "text": tf.int64}


def _spec(task):
    if task == "text":
        return {
            "x1": tf.io.VarLenFeature(tf.float32),
            "words": tf.io.VarLenFeature(tf.string),
            "y": tf.io.VarLenFeature(tf.int64),
        }
    return {
        "x1": tf.io.VarLenFeature(tf.float32),
        "x2": tf.io.VarLenFeature(tf.float32),
        "city": tf.io.VarLenFeature(tf.string),
        "score": tf.io.VarLenFeature(tf.float32),
        "y": tf.io.VarLenFeature(_LABEL_DTYPES[task]),
    }


def _label(task, x1, x2, city, rng):
    signal = x1 + (0.8 if city in "ab" else -0.8)
    if task == "multiclass":
        return ("low" if signal < -0.5 else "mid" if signal < 0.5 else "high").encode()
    if task == "regression":
        return 20.0 + 3.0 * x1 + 2.0 * x2 + (5.0 if city in "ab" else 0.0) + float(rng.normal(0, 0.5))
    return int(signal > 0)


def _text_rows(n, rng):
    rows = []
    for _ in range(n):
        words = [str(w) for w in rng.choice(GOOD + BAD + NEUTRAL, size=int(rng.integers(3, 13)))]
        x1 = float(rng.normal())
        score = sum(w in GOOD for w in words) - sum(w in BAD for w in words)
        rows.append({"x1": [x1], "words": [" ".join(words).encode()], "y": [int(score > 0 or (score == 0 and x1 > 0))]})
    return rows


def _rows(n, seed, task="binary"):
    rng = np.random.default_rng(seed)
    if task == "text":
        return _text_rows(n, rng)
    rows = []
    for _ in range(n):
        x1, x2 = float(rng.normal()), float(rng.normal())
        city = str(rng.choice(["a", "b", "c", "d"]))
        rows.append(
            {
                "x1": [x1],
                "x2": [x2],
                "city": [city.encode()],
                "score": [float(rng.uniform())],
                "y": [_label(task, x1, x2, city, rng)],
            }
        )
    return rows


def _write_examples(rows, path):
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for row in rows:
            feature = {}
            for name, value in row.items():
                value = np.asarray(value).reshape(-1)
                if value.dtype.kind == "f":
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
                elif value.dtype.kind in "SO":  # raw text, before the vocabulary
                    feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(value)))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value.astype(np.int64)))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def write_tiny_transform(base: str, task: str = "binary", config: FeatureConfig = None) -> dict:
    """Runs preprocessing_fn through tf.Transform on synthetic rows of `task` and writes its outputs under `base`
    (`config`: another feature config of the same columns, e.g. a multi-class label without its class list).

    Returns {'dir', 'output' (TFTransformOutput), 'train', 'eval', 'raw_train', 'raw_eval' (file patterns),
    'config'}.
    """
    config = config or TINY_CONFIGS[task]
    if not os.path.isdir(os.path.join(base, "transform_graph")):
        metadata = tft.DatasetMetadata.from_feature_spec(_spec(task))
        with tft_beam.Context(temp_dir=os.path.join(base, "tmp")):
            fn = lambda inputs: preprocessing_fn(inputs, {"features": config.to_dict()})  # noqa: E731
            raw = {"train": _rows(1024, 0, task), "eval": _rows(256, 1, task)}
            (train, _), transform_fn = (raw["train"], metadata) | tft_beam.AnalyzeAndTransformDataset(fn)
            (evaluation, _) = ((raw["eval"], metadata), transform_fn) | tft_beam.TransformDataset()
            _ = transform_fn | tft_beam.WriteTransformFn(os.path.join(base, "transform_graph"))
        # The raw schema, as TFX's Transform writes it beside the graph (serving signatures parse with it).
        metadata_io.write_metadata(metadata, os.path.join(base, "transform_graph", "metadata"))
        for name, rows in (
            ("train", train),
            ("eval", evaluation),
            ("raw_train", raw["train"]),
            ("raw_eval", raw["eval"]),
        ):
            os.makedirs(os.path.join(base, name))
            _write_examples(rows, os.path.join(base, name, "part-0.gz"))
    return {
        "dir": base,
        "output": tft.TFTransformOutput(os.path.join(base, "transform_graph")),
        "train": [os.path.join(base, "train", "*")],
        "eval": [os.path.join(base, "eval", "*")],
        # The same rows before the transform, as ExampleGen writes them.
        "raw_train": [os.path.join(base, "raw_train", "*")],
        "raw_eval": [os.path.join(base, "raw_eval", "*")],
        "config": config,
    }
