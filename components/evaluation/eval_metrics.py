"""Evaluator metrics TFMA 0.47 lacks, as TFMA metrics (the Evaluator's eval config names them by this module):

- multi-class: `accuracy`, `macro_f1`, `macro_precision`, `macro_recall`, and `precision`, `recall`, `f1` per
  class (TFMA sub-keys `class_id`), all derived from TFMA's own multi-class confusion matrix of the top-scoring
  class. TFMA's `F1Score` with a macro `aggregate` gives NaN as soon as one class is never predicted (0/0
  precision), and the rare classes of real data often are not; here a 0/0 ratio counts as 0 and the average
  is over the classes that are labels or predictions of the evaluated rows, as scikit-learn's
  `f1_score(average="macro", zero_division=0)` has it.
- regression: `rmse`, `mae` and `r2` (1 - squared error / the label's variance about its mean; NaN when every
  label is the same), from one pass that sums label, label squared, error squared and absolute error.

The eval config names each class with this module (`MetricConfig.module`), so TFMA imports it where the
Evaluator runs (a Kubeflow step's image has the package).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Iterable, Optional

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types, metric_util
from tensorflow_model_analysis.metrics import multi_class_confusion_matrix_metrics as confusion

MODULE = __name__
# The top-scoring class is the prediction (TFMA counts a top score <= the threshold as no prediction).
ARGMAX = [0.0]


def _counts(matrices) -> np.ndarray:
    """TFMA's Matrices at the argmax threshold as a K x K array of weighted counts [actual, predicted]; a row
    with no prediction (its top score <= 0) counts in a last column of its own."""
    entries = matrices.get(ARGMAX[0], {})
    classes = 1 + max((max(k.actual_class_id, k.predicted_class_id) for k in entries), default=-1)
    counts = np.zeros([classes, classes + 1])
    for key, weight in entries.items():
        counts[key.actual_class_id, key.predicted_class_id if key.predicted_class_id >= 0 else classes] += weight
    return counts


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    return np.divide(numerator, denominator, out=np.zeros_like(numerator, dtype=float), where=denominator > 0)


@dataclasses.dataclass(frozen=True)
class ClassScores:
    """Per-class precision, recall and F1 of a confusion matrix, and which classes are present."""

    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    present: np.ndarray  # a label or a prediction of some row
    accuracy: float

    @classmethod
    def of(cls, counts: np.ndarray) -> "ClassScores":
        classes = counts.shape[0]
        true_positive = np.diag(counts[:, :classes])
        actual = counts.sum(axis=1)
        predicted = counts[:, :classes].sum(axis=0)
        total = counts.sum()
        return cls(
            precision=_ratio(true_positive, predicted),
            recall=_ratio(true_positive, actual),
            f1=_ratio(2 * true_positive, actual + predicted),
            present=(actual + predicted) > 0,
            accuracy=float(true_positive.sum() / total) if total else math.nan,
        )

    def macro(self, values: np.ndarray) -> float:
        return float(values[self.present].mean()) if self.present.any() else math.nan


def _from_matrix(
    derive: Callable[[metric_types.MetricKey, ClassScores], Dict[metric_types.MetricKey, float]],
) -> Callable[..., metric_types.MetricComputations]:
    """A metric's computations: TFMA's multi-class confusion matrices at the argmax, then `derive` on them."""

    def computations(
        name: str,
        eval_config=None,
        model_name: str = "",
        output_name: str = "",
        example_weighted: bool = False,
    ) -> metric_types.MetricComputations:
        key = metric_types.MetricKey(
            name=name, model_name=model_name, output_name=output_name, example_weighted=example_weighted
        )
        matrices = confusion.multi_class_confusion_matrices(
            thresholds=ARGMAX,
            eval_config=eval_config,
            model_name=model_name,
            output_name=output_name,
            example_weighted=example_weighted,
        )
        matrices_key = matrices[-1].keys[-1]

        def result(metrics: Dict[metric_types.MetricKey, object]) -> Dict[metric_types.MetricKey, float]:
            return derive(key, ClassScores.of(_counts(metrics[matrices_key])))

        return matrices + [metric_types.DerivedMetricComputation(keys=[key], result=result)]

    return computations


class MultiClassAccuracy(metric_types.Metric):
    """Share of rows whose top-scoring class is the label."""

    def __init__(self, name: str = "accuracy"):
        super().__init__(
            metric_util.merge_per_key_computations(_from_matrix(lambda key, s: {key: s.accuracy})), name=name
        )


class MacroF1(metric_types.Metric):
    """F1 per class, averaged over the classes present (a 0/0 ratio counts as 0)."""

    def __init__(self, name: str = "macro_f1"):
        super().__init__(
            metric_util.merge_per_key_computations(_from_matrix(lambda key, s: {key: s.macro(s.f1)})), name=name
        )


class MacroPrecision(metric_types.Metric):
    """Precision per class, averaged over the classes present (a class never predicted counts as 0)."""

    def __init__(self, name: str = "macro_precision"):
        super().__init__(
            metric_util.merge_per_key_computations(_from_matrix(lambda key, s: {key: s.macro(s.precision)})),
            name=name,
        )


class MacroRecall(metric_types.Metric):
    """Recall per class, averaged over the classes present (a class only predicted counts with recall 0, as in
    scikit-learn's recall_score(average="macro"); the balanced accuracy where every present class is a label)."""

    def __init__(self, name: str = "macro_recall"):
        super().__init__(
            metric_util.merge_per_key_computations(_from_matrix(lambda key, s: {key: s.macro(s.recall)})), name=name
        )


def _per_class(key: metric_types.MetricKey, scores: ClassScores) -> Dict[metric_types.MetricKey, float]:
    found = {}
    for class_id in np.flatnonzero(scores.present):
        sub_key = metric_types.SubKey(class_id=int(class_id))
        for name, values in (("precision", scores.precision), ("recall", scores.recall), ("f1", scores.f1)):
            found[key._replace(name=name, sub_key=sub_key)] = float(values[class_id])
    return found


class PerClassScores(metric_types.Metric):
    """`precision`, `recall` and `f1` of every class present, under TFMA's sub-key `class_id`."""

    def __init__(self, name: str = "per_class"):
        super().__init__(metric_util.merge_per_key_computations(_from_matrix(_per_class)), name=name)


# --- regression -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Sums:
    weight: float = 0.0
    label: float = 0.0
    label_squared: float = 0.0
    error_squared: float = 0.0
    error_absolute: float = 0.0

    def merge(self, other: "_Sums") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class _RegressionCombiner(beam.CombineFn):
    """Sums of weights, labels, squared labels, squared and absolute errors over the rows."""

    def __init__(self, key: metric_types.MetricKey, eval_config, example_weighted: bool):
        self._key, self._eval_config, self._example_weighted = key, eval_config, example_weighted

    def create_accumulator(self) -> _Sums:
        return _Sums()

    def add_input(self, accumulator: _Sums, element: metric_types.StandardMetricInputs) -> _Sums:
        for label, prediction, weight in metric_util.to_label_prediction_example_weight(
            element,
            eval_config=self._eval_config,
            model_name=self._key.model_name,
            output_name=self._key.output_name,
            example_weighted=self._example_weighted,
        ):
            # One value each, as a 1-element array (NumPy 2, of TFX 1.21's lane, refuses float() of those).
            y, p = float(np.asarray(label).item()), float(np.asarray(prediction).item())
            if math.isnan(y) or math.isnan(p):
                continue
            w = float(metric_util.safe_to_scalar(weight))
            accumulator.weight += w
            accumulator.label += w * y
            accumulator.label_squared += w * y * y
            accumulator.error_squared += w * (y - p) ** 2
            accumulator.error_absolute += w * abs(y - p)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[_Sums]) -> _Sums:
        accumulators = iter(accumulators)
        result = next(accumulators)
        for accumulator in accumulators:
            result.merge(accumulator)
        return result

    def extract_output(self, accumulator: _Sums) -> Dict[metric_types.MetricKey, _Sums]:
        return {self._key: accumulator}


def _from_sums(derive: Callable[[_Sums], float]) -> Callable[..., metric_types.MetricComputations]:
    def computations(
        name: str, eval_config=None, model_name: str = "", output_name: str = "", example_weighted: bool = False
    ) -> metric_types.MetricComputations:
        sums_key = metric_types.MetricKey(
            name="_tfxflow_regression_sums",
            model_name=model_name,
            output_name=output_name,
            example_weighted=example_weighted,
        )
        key = sums_key._replace(name=name)
        return [
            metric_types.MetricComputation(
                keys=[sums_key],
                preprocessors=None,
                combiner=_RegressionCombiner(sums_key, eval_config, example_weighted),
            ),
            metric_types.DerivedMetricComputation(keys=[key], result=lambda metrics: {key: derive(metrics[sums_key])}),
        ]

    return computations


def r_squared(sums: _Sums) -> float:
    if not sums.weight:
        return math.nan
    variance = sums.label_squared - sums.label**2 / sums.weight
    return 1.0 - sums.error_squared / variance if variance > 1e-12 * max(1.0, sums.label_squared) else math.nan


class RootMeanSquaredError(metric_types.Metric):
    """sqrt(mean((label - prediction)^2)), in the label's units."""

    def __init__(self, name: str = "rmse"):
        super().__init__(
            metric_util.merge_per_key_computations(
                _from_sums(lambda s: math.sqrt(s.error_squared / s.weight) if s.weight else math.nan)
            ),
            name=name,
        )


class AbsoluteError(metric_types.Metric):
    """mean(|label - prediction|), in the label's units."""

    def __init__(self, name: str = "mae"):
        super().__init__(
            metric_util.merge_per_key_computations(
                _from_sums(lambda s: s.error_absolute / s.weight if s.weight else math.nan)
            ),
            name=name,
        )


class RSquared(metric_types.Metric):
    """The coefficient of determination: 1 - sum of squared errors / sum of squared deviations from the mean."""

    def __init__(self, name: str = "r2"):
        super().__init__(metric_util.merge_per_key_computations(_from_sums(r_squared)), name=name)


def class_metric_name(name: str, class_id: Optional[int], class_names=()) -> str:
    """A per-class metric's name for MLflow and the page: `f1.<class name>` (or `f1.class_<id>`)."""
    if class_id is None:
        return name
    label = class_names[class_id] if 0 <= class_id < len(class_names) else f"class_{class_id}"
    return f"{name}.{label}"
