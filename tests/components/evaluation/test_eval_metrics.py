"""The Evaluator's multi-class and regression metrics: the arithmetic against scikit-learn's, and TFMA running
them on real models of each task (TFMA's own confusion matrix underneath), again against scikit-learn on the
same predictions."""

import numpy as np
import pytest
from sklearn import metrics as sk

from tfxflow.components.evaluation import eval_metrics
from tfxflow.pipeline.definition import EVAL_METRICS


def _matrices(labels, predictions):
    """TFMA's Matrices of the rows at the argmax threshold, as its combiner makes them: {threshold:
    {MatrixEntryKey(actual, predicted): weight}}, a prediction of -1 (NO_PREDICTED_CLASS_ID) where the top score
    was <= the threshold."""
    from tensorflow_model_analysis.metrics import multi_class_confusion_matrix_metrics as confusion

    entries = {}
    for y, p in zip(labels, predictions, strict=True):
        key = confusion.MatrixEntryKey(int(y), int(p))
        entries[key] = entries.get(key, 0.0) + 1.0
    return confusion.Matrices({eval_metrics.ARGMAX[0]: entries})


def _derived(metric, matrices):
    """What a metric of this module gives TFMA for the confusion matrices `matrices`: its derived computation's
    result, keyed by metric name and class id."""
    computations = metric.computations(model_names=[""], output_names=[""])
    matrices_key = computations[-2].keys[-1]
    found = computations[-1].result({matrices_key: matrices})
    return {(key.name, key.sub_key.class_id if key.sub_key else None): value for key, value in found.items()}


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("abstains", [0.0, 0.1], ids=["always predicts", "no prediction for 10%"])
def test_class_scores_are_scikit_learns_with_zero_division_zero(seed, abstains):
    rng = np.random.default_rng(seed)
    classes = 6
    # Skewed labels with class 2 absent from this split and a model that never predicts the rarest classes nor
    # class 2, so class 2 is in neither (outside the average), class 5 a label only: the case where TFMA's macro
    # F1 is NaN. Class 4 is never a label of the split, but predicted.
    labels = rng.choice(classes, size=500, p=[0.55, 0.25, 0.0, 0.14, 0.0, 0.06])
    predictions = np.where(rng.uniform(size=500) < 0.7, labels, rng.choice([0, 1, 3, 4], size=500))
    predictions = np.where(predictions == 5, 0, predictions)
    # A row whose top score is <= the threshold has no prediction (-1): wrong for accuracy and its label's recall,
    # in no class's precision.
    predictions = np.where(rng.uniform(size=500) < abstains, -1, predictions)
    assert 2 not in labels and 2 not in predictions and 4 not in labels and 4 in predictions
    assert (5 in labels and 5 not in predictions) and (-1 in predictions) == (abstains > 0)
    scores = eval_metrics.ClassScores.of(eval_metrics._counts(_matrices(labels, predictions)))
    present = sorted((set(labels) | set(predictions)) - {-1})
    assert present == [0, 1, 3, 4, 5] and list(np.flatnonzero(scores.present)) == present
    assert scores.accuracy == pytest.approx(sk.accuracy_score(labels, predictions))
    for name, function in (("f1", sk.f1_score), ("precision", sk.precision_score), ("recall", sk.recall_score)):
        expected = function(labels, predictions, average=None, labels=present, zero_division=0)
        np.testing.assert_allclose(getattr(scores, name)[present], expected)
        macro = function(labels, predictions, average="macro", labels=present, zero_division=0)
        assert scores.macro(getattr(scores, name)) == pytest.approx(macro)
    # scikit-learn's balanced accuracy averages recall over the labels' classes only; the macro recall also
    # counts class 4 (predicted, never a label) with recall 0, as recall_score(average="macro") does.
    labelled = sorted(set(labels))
    assert scores.recall[labelled].mean() == pytest.approx(sk.balanced_accuracy_score(labels, predictions))
    assert scores.macro(scores.recall) == pytest.approx(scores.recall[labelled].sum() / len(present))


def test_an_absent_class_and_rows_without_a_prediction_by_hand():
    """Four classes: class 2 neither a label nor a prediction of the split, class 3 only predicted; a row of
    class 1 has no prediction (TFMA's -1: its top score <= the threshold).

        actual 0: predicted 0, 0, 1, 3    actual 1: predicted 1, none

    precision 2/2, 1/2, -, 0/1; recall 2/4, 1/2, -, 0/0 (counts 0); f1 4/6, 2/4, -, 0; accuracy 3 of 6 rows."""
    matrices = _matrices([0, 0, 0, 0, 1, 1], [0, 0, 1, 3, 1, -1])
    counts = eval_metrics._counts(matrices)
    np.testing.assert_array_equal(counts, [[2, 1, 0, 1, 0], [0, 1, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    scores = eval_metrics.ClassScores.of(counts)
    np.testing.assert_array_equal(scores.present, [True, True, False, True])
    np.testing.assert_allclose(scores.precision, [1.0, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(scores.recall, [0.5, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(scores.f1, [2 / 3, 0.5, 0.0, 0.0])
    # The macro averages are over classes 0, 1 and 3 (over all four: 0.375, 0.25 and 0.2917).
    expected = {
        ("accuracy", None): 0.5,  # over all 6 rows (without the row of no prediction: 3/5)
        ("macro_precision", None): (1.0 + 0.5 + 0.0) / 3,
        ("macro_recall", None): (0.5 + 0.5 + 0.0) / 3,
        ("macro_f1", None): (2 / 3 + 0.5 + 0.0) / 3,  # 0.3889
    }
    for metric in (
        eval_metrics.MultiClassAccuracy(),
        eval_metrics.MacroPrecision(),
        eval_metrics.MacroRecall(),
        eval_metrics.MacroF1(),
    ):
        found = _derived(metric, matrices)
        assert found == pytest.approx({key: value for key, value in expected.items() if key in found})
        assert len(found) == 1
    per_class = _derived(eval_metrics.PerClassScores(), matrices)
    assert sorted({class_id for _, class_id in per_class}) == [0, 1, 3]  # none for absent class 2
    assert per_class == pytest.approx(
        {
            **{("precision", 0): 1.0, ("recall", 0): 0.5, ("f1", 0): 2 / 3},
            **{("precision", 1): 0.5, ("recall", 1): 0.5, ("f1", 1): 0.5},
            **{("precision", 3): 0.0, ("recall", 3): 0.0, ("f1", 3): 0.0},
        }
    )
    # Every row without a prediction: no class is predicted, accuracy 0, recall 0 for the labels' classes.
    silent = eval_metrics.ClassScores.of(eval_metrics._counts(_matrices([0, 1, 1], [-1, -1, -1])))
    assert silent.accuracy == 0.0 and list(silent.present) == [True, True]
    assert silent.macro(silent.recall) == 0.0 and silent.macro(silent.precision) == 0.0


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
