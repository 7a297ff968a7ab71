"""The Evaluator's multi-class and regression metrics: the arithmetic against scikit-learn's, and TFMA running
them on real models of each task (TFMA's own confusion matrix underneath), again against scikit-learn on the
same predictions."""

import numpy as np
import pytest
from sklearn import metrics as sk

from tfxflow.components import eval_metrics
from tfxflow.pipeline.definition import EVAL_METRICS


def _counts(labels, predictions, classes):
    counts = np.zeros([classes, classes + 1])
    for y, p in zip(labels, predictions, strict=True):
        counts[y, p] += 1
    return counts


@pytest.mark.parametrize("seed", range(5))
def test_class_scores_are_scikit_learns_with_zero_division_zero(seed):
    rng = np.random.default_rng(seed)
    classes = 6
    # Skewed labels and a model that never predicts the rarest classes: the case where TFMA's macro F1 is NaN.
    labels = rng.choice(classes, size=500, p=[0.5, 0.25, 0.15, 0.06, 0.03, 0.01])
    predictions = np.where(rng.uniform(size=500) < 0.7, labels, rng.choice(3, size=500))
    scores = eval_metrics.ClassScores.of(_counts(labels, predictions, classes))
    present = sorted(set(labels) | set(predictions))
    assert scores.accuracy == pytest.approx(sk.accuracy_score(labels, predictions))
    for name, function in (("f1", sk.f1_score), ("precision", sk.precision_score), ("recall", sk.recall_score)):
        expected = function(labels, predictions, average=None, labels=present, zero_division=0)
        np.testing.assert_allclose(getattr(scores, name)[present], expected)
        macro = function(labels, predictions, average="macro", zero_division=0)
        assert scores.macro(getattr(scores, name)) == pytest.approx(macro)
    assert scores.macro(scores.recall) == pytest.approx(sk.balanced_accuracy_score(labels, predictions))


def test_r_squared_rmse_and_mae_are_scikit_learns():
    rng = np.random.default_rng(3)
    labels = rng.gamma(2.0, 10.0, size=400)
    predictions = labels + rng.normal(0, 5, size=400)
    sums = eval_metrics._Sums()
    for y, p in zip(labels, predictions, strict=True):
        sums.merge(eval_metrics._Sums(1.0, y, y * y, (y - p) ** 2, abs(y - p)))
    assert eval_metrics.r_squared(sums) == pytest.approx(sk.r2_score(labels, predictions))
    assert np.sqrt(sums.error_squared / sums.weight) == pytest.approx(sk.mean_squared_error(labels, predictions) ** 0.5)
    assert sums.error_absolute / sums.weight == pytest.approx(sk.mean_absolute_error(labels, predictions))
    constant = eval_metrics._Sums(3.0, 6.0, 12.0, 0.5, 0.5)  # every label 2.0: no variance to explain
    assert np.isnan(eval_metrics.r_squared(constant))


def test_no_metric_class_here_is_shadowed_by_one_tfma_registers():
    """TFMA looks a class name up among its registered metrics before it imports the module named beside it:
    a name TFMA also has (it has MeanAbsoluteError) would be TFMA's metric, silently."""
    from tensorflow_model_analysis.metrics import metric_types

    ours = {name for specs in EVAL_METRICS.values() for name, module, _ in specs if module}
    assert ours and not ours & set(metric_types.registered_metrics())
    assert all(hasattr(eval_metrics, name) for name in ours)


def _raw_rows(tiny):
    import tensorflow as tf

    return [r.numpy() for r in tf.data.TFRecordDataset(tf.io.gfile.glob(tiny["raw_eval"][0]), compression_type="GZIP")]


def _evaluate(task_model, tmp_path, extra=()):
    """TFMA's run of the Evaluator's config (plus `extra` MetricConfigs) on the model and its eval rows."""
    import tensorflow_model_analysis as tfma

    from tfxflow.pipeline.config import EvaluationConfig
    from tfxflow.pipeline.definition import eval_config

    tiny = task_model["tiny"]
    config = eval_config(EvaluationConfig(max_regression=0.0), tiny["config"])
    for metric in config.metrics_specs[0].metrics:
        for threshold in metric.per_slice_thresholds:
            threshold.threshold.ClearField("change_threshold")  # no baseline here
    config.metrics_specs[0].metrics.extend(extra)
    shared = tfma.default_eval_shared_model(eval_saved_model_path=task_model["export_dir"], eval_config=config)
    out = str(tmp_path / "evaluation")
    tfma.run_model_analysis(
        eval_shared_model=shared, eval_config=config, data_location=tiny["raw_eval"][0], output_path=out
    )
    found = {}
    for metrics in tfma.load_metrics(out):
        for kv in metrics.metric_keys_and_values:
            class_id = kv.key.sub_key.class_id.value if kv.key.HasField("sub_key") else None
            value = kv.value.double_value.value if kv.value.HasField("double_value") else kv.value
            found[(kv.key.name, class_id)] = value
    return found, tfma.load_validation_result(out)


def _predict(task_model):
    import tensorflow as tf

    loaded = tf.saved_model.load(task_model["export_dir"])
    rows = tf.constant(_raw_rows(task_model["tiny"]))
    labels = loaded.signatures["transform_features"](examples=rows)["label"].numpy().reshape(-1)
    return labels, loaded.signatures["serving_default"](examples=rows)


@pytest.mark.integration
def test_tfma_gives_scikit_learns_multiclass_metrics_for_a_real_model(task_models, tmp_path):
    from tensorflow_model_analysis.proto import config_pb2 as tfma_config

    model = task_models["multiclass"]
    keras_accuracy = tfma_config.MetricConfig(
        class_name="SparseCategoricalAccuracy"
    )  # TFMA's Keras wrapper, as a check
    found, validation = _evaluate(model, tmp_path, [keras_accuracy])
    labels, outputs = _predict(model)
    predicted = outputs["scores"].numpy().argmax(axis=1)
    assert [c.decode() for c in outputs["classes"].numpy()[0]] == ["low", "mid", "high"]
    assert found[("accuracy", None)] == pytest.approx(sk.accuracy_score(labels, predicted), abs=1e-9)
    assert found[("accuracy", None)] == pytest.approx(found[("sparse_categorical_accuracy", None)], abs=1e-6)
    assert 0.8 < found[("accuracy", None)] < 1.0
    assert found[("macro_f1", None)] == pytest.approx(sk.f1_score(labels, predicted, average="macro", zero_division=0))
    per_class = sk.precision_recall_fscore_support(labels, predicted, labels=[0, 1, 2], zero_division=0)
    for class_id in range(3):
        assert found[("precision", class_id)] == pytest.approx(per_class[0][class_id])
        assert found[("recall", class_id)] == pytest.approx(per_class[1][class_id])
        assert found[("f1", class_id)] == pytest.approx(per_class[2][class_id])
    matrix = found[("multi_class_confusion_matrix_at_thresholds", None)].multi_class_confusion_matrix_at_thresholds
    entries = {(e.actual_class_id, e.predicted_class_id): e.num_weighted_examples for e in matrix.matrices[0].entries}
    expected = sk.confusion_matrix(labels, predicted, labels=[0, 1, 2])
    assert all(entries.get((a, p), 0) == expected[a, p] for a in range(3) for p in range(3))
    assert validation.validation_ok  # accuracy >= the default bound, 0.5


@pytest.mark.integration
def test_tfma_gives_scikit_learns_regression_metrics_for_a_real_model(task_models, tmp_path):
    from tensorflow_model_analysis.proto import config_pb2 as tfma_config

    model = task_models["regression"]
    references = [
        tfma_config.MetricConfig(class_name="MeanSquaredError"),
        tfma_config.MetricConfig(class_name="MeanAbsoluteError"),
    ]
    found, validation = _evaluate(model, tmp_path, references)
    labels, outputs = _predict(model)
    predictions = outputs["predictions"].numpy().reshape(-1)
    assert found[("r2", None)] == pytest.approx(sk.r2_score(labels, predictions), rel=1e-6)
    assert found[("rmse", None)] == pytest.approx(sk.mean_squared_error(labels, predictions) ** 0.5, rel=1e-6)
    assert found[("mae", None)] == pytest.approx(sk.mean_absolute_error(labels, predictions), rel=1e-6)
    # TFMA's own regression metrics agree on the same rows.
    assert found[("rmse", None)] ** 2 == pytest.approx(found[("mean_squared_error", None)], rel=1e-6)
    assert found[("mae", None)] == pytest.approx(found[("mean_absolute_error", None)], rel=1e-6)
    assert found[("r2", None)] > 0.8 and validation.validation_ok  # the label is 20 + 3 x1 + 2 x2 + noise
