"""TFLite export (components/edge/edge.py, edge_convert.py, edge_probe.py) on SavedModels made here with the ops a
Transform graph holds: vocabulary tables read from files (string and int64 keys), tft.apply_buckets' UpperBound,
Keras's one-hot DenseBincount. TensorFlow's own kernels are the reference: every rewrite must answer as they do,
out-of-vocabulary values and NaN included, in TFLite's interpreter in a process of its own."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tfxflow.components.edge import edge, edge_convert

pytestmark = pytest.mark.integration

WORDS = ["Cash", "Credit Card", "No Charge", "Dispute"]
AREAS = [8, 32, 76, 28, 6]
BOUNDARIES = [0.5, 2.0, 7.5, 20.0]


def _vocabulary(folder, name, values):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(str(v) for v in values) + "\n")
    return path


class _TransformLike(tf.Module):
    """Raw columns in, a probability out, through the ops and file tables a tf.Transform graph uses."""

    def __init__(self, folder):
        super().__init__()
        init = tf.lookup.TextFileInitializer
        index = tf.lookup.TextFileIndex
        self.words = tf.lookup.StaticHashTable(
            init(_vocabulary(folder, "payment_type", WORDS), tf.string, index.WHOLE_LINE, tf.int64, index.LINE_NUMBER),
            default_value=-1,
        )
        self.areas = tf.lookup.StaticHashTable(
            init(_vocabulary(folder, "area", AREAS), tf.int64, index.WHOLE_LINE, tf.int64, index.LINE_NUMBER),
            default_value=-1,
        )
        self.weights = tf.Variable(np.linspace(-1.0, 1.0, len(WORDS) + 1 + len(AREAS) + 1 + 5, dtype=np.float32))

    @tf.function(
        input_signature=[
            {
                "payment_type": tf.TensorSpec([None], tf.string, name="payment_type"),
                "area": tf.TensorSpec([None], tf.int64, name="area"),
                "miles": tf.TensorSpec([None], tf.float32, name="miles"),
                # A column whose name is no Python name: the signature's argument is "tolls_mile".
                "tolls_mile": tf.TensorSpec([None], tf.float32, name="tolls/mile"),
            }
        ]
    )
    def serve(self, features):
        word = self.words.lookup(features["payment_type"])
        word = tf.where(word < 0, tf.cast(self.words.size(), tf.int64), word)  # one OOV bucket past the list
        area = self.areas.lookup(features["area"])
        area = tf.where(area < 0, tf.cast(self.areas.size(), tf.int64), area)
        bucket = tf.raw_ops.UpperBound(
            sorted_inputs=tf.constant([BOUNDARIES]), values=tf.reshape(features["miles"], [1, -1]), out_type=tf.int64
        )
        bucket = tf.reshape(bucket, [-1, 1])
        one_hot = tf.raw_ops.DenseBincount(
            input=tf.cast(bucket, tf.int32), size=5, weights=tf.constant([], tf.float32), binary_output=True
        )
        encoded = tf.concat(
            [
                tf.one_hot(word, len(WORDS) + 1),
                tf.one_hot(area, len(AREAS) + 1),
                one_hot,
            ],
            axis=1,
        )
        logit = tf.reduce_sum(encoded * self.weights, axis=1, keepdims=True) + tf.reshape(
            features["tolls_mile"], [-1, 1]
        )
        return {"probabilities": tf.sigmoid(logit), "scores": tf.concat([logit, 2 * logit], axis=1)}


@pytest.fixture(scope="module")
def transform_like(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edge")
    module = _TransformLike(str(tmp_path_factory.mktemp("vocabularies")))
    model = str(folder / "model")
    tf.saved_model.save(module, model, signatures={"serving_raw": module.serve})
    return model


def _rows():
    """In-vocabulary values, values outside both vocabularies, NaN and boundaries exactly."""
    return [
        {"payment_type": word, "area": area, "miles": miles, "tolls/mile": miles / 10}
        for word, area, miles in [
            ("Cash", 8, 0.1),
            ("Credit Card", 76, 2.0),
            ("Dispute", 6, 7.5),
            ("No Charge", 28, 50.0),
            ("Unknown", 999, 1.0),
            ("", -3, float("nan")),
            ("cash", 32, 20.0),
            ("Cash", 12345678901, 0.5),
        ]
    ]


def _columns(rows):
    return {k: [r[k] for r in rows] for k in rows[0]}


def _saved_answers(model, rows):
    """The SavedModel's `serving_raw` answers to `rows`, as TensorFlow's own kernels give them."""
    columns = _columns(rows)
    return tf.saved_model.load(model).signatures["serving_raw"](
        payment_type=tf.constant(columns["payment_type"]),
        area=tf.constant(columns["area"], tf.int64),
        miles=tf.constant(columns["miles"], tf.float32),
        tolls_mile=tf.constant(columns["tolls/mile"], tf.float32),
    )


def test_a_transform_like_graph_converts_to_builtin_ops_and_answers_as_tensorflow(transform_like, tmp_path):
    result = edge.export(transform_like, str(tmp_path / "edge"), _rows())
    assert result["published"] == ["float32", "int8"], result
    # Every op of the file tables, UpperBound and DenseBincount became a builtin: no Select TF ops.
    assert result["select_tf_ops"] == []
    assert {"HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT"} <= set(result["ops"])
    assert not {"UpperBound", "DenseBincount"} & set(result["ops"])
    float32 = result["variants"]["float32"]
    assert float32["max_diff"]["probabilities"] < 1e-6 and float32["max_diff"]["scores"] < 1e-5
    assert float32["runtime"] in ("litert", "tensorflow") and float32["p50_ms"] > 0 and float32["load_ms"] > 0
    assert float32["latency_calls"] == edge.LATENCY_CALLS  # a small model's calls all fit in LATENCY_SECONDS
    assert sorted(os.listdir(tmp_path / "edge")) == ["edge.json", "model-int8.tflite", "model.tflite"]
    with open(tmp_path / "edge" / "edge.json", encoding="utf-8") as f:
        assert json.load(f) == json.loads(json.dumps(result))


def test_the_tflite_model_alone_gives_tensorflows_answers_row_by_row(transform_like, tmp_path):
    rows = _rows()
    edge.export(transform_like, str(tmp_path / "edge"), rows)
    columns = _columns(rows)
    expected = _saved_answers(transform_like, rows)
    interpreter = tf.lite.Interpreter(model_path=str(tmp_path / "edge" / "model.tflite"))
    answer = interpreter.get_signature_runner("serving_raw")(
        payment_type=np.array([v.encode() for v in columns["payment_type"]], dtype=object),
        area=np.array(columns["area"], np.int64),
        miles=np.array(columns["miles"], np.float32),
        **{"tolls/mile": np.array(columns["tolls/mile"], np.float32)},  # TFLite's signature takes the column's name
    )
    # Row 5 (NaN miles) falls in UpperBound's last bucket in both; rows 4, 5 and 7 hold unknown values.
    np.testing.assert_allclose(answer["probabilities"], expected["probabilities"].numpy(), atol=1e-6)
    np.testing.assert_allclose(answer["scores"], expected["scores"].numpy(), atol=1e-5)
    assert len(set(np.round(answer["probabilities"].ravel(), 5))) > 4  # the rows do not all answer alike


class _OneUnseenBucket(tf.Module):
    """The tables tf.Transform's `apply_vocabulary` makes with one out-of-vocabulary bucket (what --tflite asks of
    the Transform; tensorflow_transform/mappers.py: a StaticVocabularyTable of the vocabulary file, keyed by the
    column's dtype): a string and an integer column, each unseen value hashed into the one bucket past the list."""

    def __init__(self, folder, buckets=1, fill="__missing__"):
        super().__init__()
        self.fill = fill
        init, index = tf.lookup.TextFileInitializer, tf.lookup.TextFileIndex
        self.tables = {
            column: tf.lookup.StaticVocabularyTable(
                init(_vocabulary(folder, column, values), dtype, index.WHOLE_LINE, tf.int64, index.LINE_NUMBER),
                num_oov_buckets=buckets,
                lookup_key_dtype=dtype,
            )
            for column, values, dtype in (("payment_type", WORDS, tf.string), ("area", AREAS, tf.int64))
        }

    @tf.function(
        input_signature=[
            {
                "payment_type": tf.TensorSpec([None], tf.string, name="payment_type"),
                "area": tf.TensorSpec([None], tf.int64, name="area"),
            }
        ]
    )
    def serve(self, features):
        # tf.Transform densifies an optional column (SparseToDense, which TFLite runs for numbers only), filling a
        # missing cell with a token of its own: here an empty payment_type is a missing one.
        present = tf.not_equal(features["payment_type"], "")
        sparse = tf.SparseTensor(
            tf.where(present[:, tf.newaxis]),
            tf.boolean_mask(features["payment_type"], present),
            tf.stack([tf.shape(present, out_type=tf.int64)[0], 1]),
        )
        filled = tf.squeeze(tf.sparse.to_dense(sparse, default_value=self.fill), axis=1)
        word = self.tables["payment_type"].lookup(filled)
        area = self.tables["area"].lookup(features["area"])
        logit = tf.cast(word * 10 + area, tf.float32)
        return {"ids": tf.stack([word, area], axis=1), "predictions": tf.reshape(logit, [-1, 1])}


@pytest.mark.current_lane
@pytest.mark.parametrize(
    "fill, missing",
    [("__missing__", [4, 5]), ("Cash", [0, 5])],  # the fill token unseen (the Transform's), or a vocabulary word
)
def test_one_unseen_bucket_converts_to_builtin_ops_and_maps_every_unseen_value_past_the_vocabulary(
    tmp_path, fill, missing
):
    module = _OneUnseenBucket(str(tmp_path), fill=fill)
    model = str(tmp_path / "model")
    tf.saved_model.save(module, model, signatures={"serving_raw": module.serve})
    rows = [
        {"payment_type": w, "area": a}
        for w, a in [("Cash", 8), ("Unknown", 999), ("", -3), ("Dispute", 6), ("", 32), ("No Charge", 28)]
    ]
    result = edge.export(model, str(tmp_path / "edge"), rows)
    assert result["published"] == ["float32", "int8"], result
    # tf.Transform's hash of an unseen value (StringToHashBucketFast, AsString before it for integers) is gone, and
    # the strings are looked up before they are densified.
    assert result["select_tf_ops"] == []
    assert not {"StringToHashBucketFast", "AsString"} & set(result["ops"]) and "SPARSE_TO_DENSE" in result["ops"]
    columns = _columns(rows)
    expected = tf.saved_model.load(model).signatures["serving_raw"](
        payment_type=tf.constant(columns["payment_type"]), area=tf.constant(columns["area"], tf.int64)
    )
    interpreter = tf.lite.Interpreter(model_path=str(tmp_path / "edge" / "model.tflite"))
    answer = interpreter.get_signature_runner("serving_raw")(
        payment_type=np.array([v.encode() for v in columns["payment_type"]], dtype=object),
        area=np.array(columns["area"], np.int64),
    )
    # Known values by their line, unseen ones one past the vocabulary: TensorFlow's kernels and TFLite's alike.
    # A missing payment_type is the fill token's id.
    assert expected["ids"].numpy().tolist() == [[0, 0], [4, 5], missing, [3, 4], [missing[0], 1], [2, 3]]
    assert answer["ids"].tolist() == expected["ids"].numpy().tolist()


@pytest.mark.current_lane
def test_unseen_values_hashed_into_buckets_need_select_tf_ops_which_only_an_interpreter_with_flex_checks(tmp_path):
    """Several buckets keep tf.Transform's FarmHash (StringToHashBucketFast: no builtin kernel). TF 2.16's
    tf.lite.Interpreter links the Flex delegate and checks the model; TF 2.21's has none: not published, and why."""
    from tfxflow.components import lane

    module = _OneUnseenBucket(str(tmp_path), buckets=10)
    model = str(tmp_path / "model")
    tf.saved_model.save(module, model, signatures={"serving_raw": module.serve})
    rows = [{"payment_type": w, "area": a} for w, a in [("Cash", 8), ("Unknown", 999), ("", -3)]]
    result = edge.export(model, str(tmp_path / "edge"), rows)
    assert result["select_tf_ops"] == ["AsString", "SparseToDense", "StringToHashBucketFast"]
    if lane.name() == lane.COMPAT:
        assert result["published"] == ["float32", "int8"], result
    else:
        assert result["published"] == [] and not os.path.exists(tmp_path / "edge" / "model.tflite")
        assert result["reason"].startswith(
            "the float32 TFLite model is not published: the interpreter here cannot run its Select TF ops "
            "(AsString, SparseToDense, StringToHashBucketFast)"
        ), result["reason"]


def test_differences_hold_numbers_to_the_tolerance_and_text_to_equality():
    expected = {"scores": [[0.5, 100.0]], "classes": [["a", "b"]]}
    close = {"scores": [[0.5 + 1e-6, 100.0 + 1e-4]], "classes": [["a", "b"]]}
    assert edge.differences(expected, close, 1e-5)["problems"] == []
    far = {"scores": [[0.6, 100.0]], "classes": [["a", "c"]]}
    problems = edge.differences(expected, far, 1e-5)["problems"]
    assert problems[0] == "output 'classes' differs in 1 of 2 values"
    assert problems[1].startswith("output 'scores' differs by up to 0.1 (tolerance 1e-05 x (1 + |value|)) in 1 of 2")
    assert edge.differences(expected, {"scores": [[0.5, 100.0]]}, 1e-5)["problems"] == ["output 'classes' is missing"]


class _PythonOp(tf.Module):
    @tf.function(input_signature=[{"x": tf.TensorSpec([None], tf.float32, name="x")}])
    def serve(self, features):
        doubled = tf.numpy_function(lambda v: v * 2, [features["x"]], tf.float32)
        return {"predictions": tf.reshape(doubled, [-1, 1])}


def test_a_model_with_an_op_tflite_cannot_run_is_not_converted_and_says_which(tmp_path):
    module = _PythonOp()
    model = str(tmp_path / "model")
    tf.saved_model.save(module, model, signatures={"serving_raw": module.serve})
    result = edge.export(model, str(tmp_path / "edge"), [{"x": 1.0}])
    assert result["published"] == [], result
    assert result["reason"] == (
        "not converted to TFLite: op PyFunc: no TFLite kernel, builtin or Select TF op (a custom op the model "
        "brings would need its own TFLite kernel)"
    )
    assert result["reason"].startswith("not converted to TFLite: ")
    assert os.listdir(tmp_path / "edge") == ["edge.json"]  # nothing a device could load by mistake


def test_a_model_without_the_signature_is_refused_by_name(transform_like):
    with pytest.raises(edge_convert.Unconvertible, match="no 'serving_default' signature"):
        edge_convert.edge_module(transform_like, "serving_default")


def _artifact(kind, uri, blessed=None):
    found = kind()
    found.uri = uri
    if blessed is not None:
        found.set_int_custom_property("blessed", blessed)
    return found


def test_the_step_never_fails_the_run_it_says_why_there_is_no_tflite_model(tmp_path):
    from tfx.types import standard_artifacts as sa

    os.makedirs(tmp_path / "model" / "Format-Serving")  # a model folder with no SavedModel in it
    inputs = {
        "model": [_artifact(sa.Model, str(tmp_path / "model"))],
        "model_blessing": [_artifact(sa.ModelBlessing, str(tmp_path / "b"), blessed=1)],
        "infra_blessing": [_artifact(sa.InfraBlessing, str(tmp_path / "i"), blessed=1)],
    }
    out = _artifact(sa.Model, str(tmp_path / "edge"))
    edge.Executor().Do(inputs, {"edge_model": [out]}, {})
    result = edge.read_result(out.uri)
    assert result["published"] == [] and result["reason"].startswith("not exported to TFLite: NotFoundError: "), result
    assert result["reason"].endswith("Format-Serving/saved_model.pb; No such file or directory")
    assert out.get_int_custom_property("published") == 0
    assert out.get_string_custom_property("summary") == result["reason"]

    inputs["infra_blessing"] = [_artifact(sa.InfraBlessing, str(tmp_path / "i2"), blessed=0)]  # the check failed
    edge.Executor().Do(inputs, {"edge_model": [out]}, {})
    assert edge.read_result(out.uri) == {"published": [], "reason": "not converted: the model is not blessed"}


def test_the_task_metric_is_scikit_learns_on_the_same_answers():
    from sklearn import metrics as sk

    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, 300).astype(float)
    probabilities = rng.random((300, 1))
    labels[3] = np.nan  # a row without a label is left out, as the Evaluator leaves it
    known = ~np.isnan(labels)
    name, value = edge.task_metric("binary", labels, probabilities)
    assert name == "binary_accuracy"
    assert value == pytest.approx(sk.accuracy_score(labels[known], probabilities[known, 0] > 0.5))
    classes = rng.integers(0, 4, 300)
    scores = rng.random((300, 4))
    assert edge.task_metric("multiclass", classes, scores) == (
        "accuracy",
        pytest.approx(sk.accuracy_score(classes, scores.argmax(axis=1))),
    )
    target = rng.normal(10, 3, 300)
    predicted = target + rng.normal(0, 1, 300)
    assert edge.task_metric("regression", target, predicted[:, None]) == (
        "r2",
        pytest.approx(sk.r2_score(target, predicted)),
    )


def _scoring(rows, labels):
    return edge.Scoring("binary", "probabilities", _columns(rows), labels)


def test_each_variant_scores_the_eval_rows_as_the_saved_model_does(transform_like, tmp_path):
    rows = _rows() * 20  # 160 rows: scored in calls of edge_probe.SCORE_ROWS, the last one shorter
    labels = [float(i % 3 == 0) for i in range(len(rows))]
    result = edge.export(transform_like, str(tmp_path / "edge"), _rows(), scoring=_scoring(rows, labels))
    saved = _saved_answers(transform_like, rows)["probabilities"].numpy()
    want = float(np.mean((saved[:, 0] > 0.5) == (np.array(labels) > 0.5)))
    assert 0 < want < 1  # the rows are not all on one side
    assert result["eval"] == {"rows": 160, "metric": "binary_accuracy", "saved_model": pytest.approx(want)}
    for variant in ("float32", "int8"):
        scored = result["variants"][variant]["eval"]
        assert scored["value"] == pytest.approx(want) and scored["gap"] <= edge.METRIC_MARGINS[variant], scored
    assert result["published"] == ["float32", "int8"]
    assert edge.summary_line(result).endswith(
        f"; binary_accuracy on 160 eval rows {want:.4f}, {want:.4f} (SavedModel {want:.4f})"
    )


def test_eval_rows_without_a_metric_hold_no_variant_back(transform_like, tmp_path):
    rows = _rows()
    scoring = edge.Scoring("regression", "probabilities", _columns(rows), [3.0] * 8)
    result = edge.export(transform_like, str(tmp_path / "edge"), rows, scoring=scoring)
    assert result["eval"] == {"skipped": "the eval rows give no r2 (no label, or one label value)"}
    assert result["published"] == ["float32", "int8"] and "eval" not in result["variants"]["float32"]


def test_a_variant_further_from_the_saved_models_metric_than_its_margin_is_not_published(
    transform_like, tmp_path, monkeypatch
):
    rows = _rows()
    monkeypatch.setitem(edge.METRIC_MARGINS, "int8", -1.0)  # any gap, even none, is over it
    result = edge.export(transform_like, str(tmp_path / "edge"), rows, scoring=_scoring(rows, [1.0] * len(rows)))
    assert result["published"] == ["float32"]
    saved = result["eval"]["saved_model"]
    assert result["variants"]["int8"]["reason"] == (
        f"its binary_accuracy on 8 eval rows is {saved:.4f}, the SavedModel's {saved:.4f} (margin -1)"
    )
    assert sorted(os.listdir(tmp_path / "edge")) == ["edge.json", "model.tflite"]


@pytest.fixture(scope="module")
def text_model(text_transform, tmp_path_factory):
    """A text model as the Trainer exports it (export.export_serving_model): the built-in preprocessing_fn's
    Transform graph of a text column beside a number (tests.components.tiny_transform's "text": TF Text's
    WordPiece, tf.Transform's ragged asserts, a z-score), a small Keras model on the ids, mask and number, and
    model_info's record of the tokenization; and the raw eval rows as {column: value}."""
    import tf_keras as keras

    from tfxflow.components.model import export

    cfg = text_transform["config"]
    length = cfg.sequence_length
    ids = keras.Input([length], dtype="int64", name="words_xf")
    mask = keras.Input([length], dtype="int64", name="words_xf_mask")
    number = keras.Input([1], dtype="float32", name="x1_xf")
    # Seeded, wide initializers: the untrained model's answers differ from row to row whatever ran before it.
    embedded = keras.layers.Embedding(200, 8, embeddings_initializer=keras.initializers.RandomNormal(0.0, 1.0, seed=7))(
        ids
    )
    weights = keras.layers.Lambda(lambda m: tf.cast(m, tf.float32)[..., None])(mask)
    pooled = keras.layers.Lambda(lambda v: tf.reduce_sum(v[0] * v[1], 1) / tf.reduce_sum(v[1], 1))([embedded, weights])
    joined = keras.layers.Concatenate()([pooled, number])
    head = keras.layers.Dense(1, activation="sigmoid", kernel_initializer=keras.initializers.GlorotUniform(seed=7))
    model = keras.Model([ids, mask, number], head(joined))
    folder = str(tmp_path_factory.mktemp("text-model") / "model")
    export.export_serving_model(model, text_transform["output"], cfg, folder)
    rows = []
    files = [f for pattern in text_transform["raw_eval"] for f in tf.io.gfile.glob(pattern)]
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        rows.append({"words": feature["words"].bytes_list.value[0].decode(), "x1": feature["x1"].float_list.value[0]})
    return folder, rows, cfg


def test_a_text_model_tokenizes_with_tf_texts_tflite_ops_and_answers_as_the_served_graph(text_model, tmp_path):
    folder, rows, cfg = text_model
    assert edge_convert._text_records(folder)["words"]["sequence_length"] == cfg.sequence_length
    result = edge.export(folder, str(tmp_path / "edge"), rows[:64])
    assert result["published"] == ["float32", "int8"], result
    # The Transform graph's tokenizer is cut off: TF Text's three TFLite ops and builtins, no Select TF op.
    text_ops = ["FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "TFText>ByteSplitWithOffsets"]
    assert result["text_ops"] == text_ops
    assert result["select_tf_ops"] == [] and "RegexSplitWithOffsets" not in result["ops"]
    assert result["variants"]["float32"]["runtime"] == "tensorflow with TF Text's ops"
    assert result["variants"]["float32"]["max_diff"]["probabilities"] < 1e-5
    assert f"needs TF Text's TFLite ops ({', '.join(text_ops)})" in edge.summary_line(result)
    # Here, with TF Text's kernels registered, on rows the golden ones were not: the served model's answers.
    import tensorflow_text
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    others = rows[100:200]
    interpreter = InterpreterWithCustomOps(
        model_path=str(tmp_path / "edge" / "model.tflite"),
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
    )
    answer = interpreter.get_signature_runner("serving_raw")(
        words=np.array([r["words"].encode() for r in others], dtype=object),
        x1=np.array([r["x1"] for r in others], dtype=np.float32),
    )
    served = tf.saved_model.load(folder).signatures["serving_raw"](
        words=tf.constant([r["words"] for r in others]), x1=tf.constant([r["x1"] for r in others])
    )
    np.testing.assert_allclose(answer["probabilities"], served["probabilities"].numpy(), atol=1e-5)
    assert answer["probabilities"].std() > 0.01  # the rows do not all answer alike
