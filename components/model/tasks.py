"""The supervised tasks the pipeline trains, evaluates and serves, declared once: what the served model answers,
which metrics the Evaluator reports and may bless on, and their defaults.

Plain data (no TensorFlow, no TFX): the CLI validates flags with it, the Trainer, the export, the Evaluator's
config, the serving check, MLflow and the run page read it.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional, Tuple

BINARY = "binary"
MULTICLASS = "multiclass"
REGRESSION = "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
DEFAULT_TASK = BINARY

# Regression labels may be trained on a transformed scale; the signatures answer in the label's own units.
LABEL_TRANSFORMS = ("none", "log1p")


@dataclasses.dataclass(frozen=True)
class BlessingMetric:
    """A metric the Evaluator can bless on: higher or lower is better, and its default bound (None: no default,
    a bound must be given)."""

    name: str
    higher_is_better: bool
    default_threshold: Optional[float]
    help: str


@dataclasses.dataclass(frozen=True)
class Task:
    """One task: its signatures' outputs, the one TFMA evaluates, and its metrics."""

    name: str
    outputs: Tuple[str, ...]  # the serving signatures' outputs, in order
    prediction_key: str  # the output TFMA evaluates (and MLflow's pyfunc returns)
    blessing_metrics: Tuple[BlessingMetric, ...]  # the first is the default
    summary_metrics: Tuple[str, ...]  # what the run's summary and `compare` show, in order
    training_metrics: Tuple[str, ...]  # the Keras metrics of the built-in model (per-epoch curves)
    description: str

    @property
    def default_metric(self) -> str:
        return self.blessing_metrics[0].name

    def metric(self, name: str) -> BlessingMetric:
        found = {m.name: m for m in self.blessing_metrics}
        if name not in found:
            raise KeyError(name)
        return found[name]

    @property
    def metric_names(self) -> Tuple[str, ...]:
        return tuple(m.name for m in self.blessing_metrics)


TASK_SPECS: Dict[str, Task] = {
    BINARY: Task(
        name=BINARY,
        outputs=("probabilities",),
        prediction_key="probabilities",
        blessing_metrics=(
            BlessingMetric("binary_accuracy", True, 0.6, "share of rows on the label's side of probability 0.5"),
            BlessingMetric("auc", True, 0.6, "area under the ROC curve"),
            BlessingMetric("precision", True, 0.5, "of the rows predicted positive, the share that are"),
            BlessingMetric("recall", True, 0.5, "of the positive rows, the share predicted positive"),
        ),
        summary_metrics=("binary_accuracy", "auc", "precision", "recall", "example_count"),
        training_metrics=("loss", "binary_accuracy", "auc"),
        description="yes/no: the probability of the positive class",
    ),
    MULTICLASS: Task(
        name=MULTICLASS,
        outputs=("scores", "classes"),
        prediction_key="scores",
        blessing_metrics=(
            BlessingMetric("accuracy", True, 0.5, "share of rows whose highest-scoring class is the label"),
            BlessingMetric("macro_f1", True, 0.3, "F1 per class, averaged over the classes (0: never right)"),
            BlessingMetric("macro_precision", True, 0.3, "precision per class, averaged over the classes"),
            BlessingMetric("macro_recall", True, 0.3, "recall per class, averaged (balanced accuracy)"),
        ),
        summary_metrics=("accuracy", "macro_f1", "macro_precision", "macro_recall", "example_count"),
        training_metrics=("loss", "accuracy"),
        description="one of K classes: a score per class, and the class names",
    ),
    REGRESSION: Task(
        name=REGRESSION,
        outputs=("predictions",),
        prediction_key="predictions",
        blessing_metrics=(
            BlessingMetric("r2", True, 0.0, "1 - squared error / the label's variance (0: no better than the mean)"),
            BlessingMetric("rmse", False, None, "root mean squared error, in the label's units"),
            BlessingMetric("mae", False, None, "mean absolute error, in the label's units"),
        ),
        summary_metrics=("r2", "rmse", "mae", "mean_label", "mean_prediction", "example_count"),
        training_metrics=("loss", "rmse", "mae"),
        description="a number: the prediction in the label's own units",
    ),
}

ALL_BLESSING_METRICS = tuple(m.name for task in TASK_SPECS.values() for m in task.blessing_metrics)

# The Evaluator's metric classes (TFMA's, and components/evaluation/eval_metrics.py's) and the names they report, which
# the blessing's --blessing-metric and the run page use.
METRIC_CLASSES = {
    "BinaryAccuracy": "binary_accuracy",
    "AUC": "auc",
    "Precision": "precision",
    "Recall": "recall",
    "MultiClassAccuracy": "accuracy",
    "MacroF1": "macro_f1",
    "MacroPrecision": "macro_precision",
    "MacroRecall": "macro_recall",
    "RSquared": "r2",
    "RootMeanSquaredError": "rmse",
    "AbsoluteError": "mae",
}


def spec(task: str) -> Task:
    """The Task of a name; raises ValueError naming the choices."""
    if task not in TASK_SPECS:
        raise ValueError(f"task must be one of {list(TASKS)}, got '{task}'")
    return TASK_SPECS[task]


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of `metric` (an Evaluator metric name) is better."""
    for task in TASK_SPECS.values():
        for blessing in task.blessing_metrics:
            if blessing.name == metric:
                return not blessing.higher_is_better
    return "loss" in metric or metric in ("mean_squared_error", "mean_absolute_error")


def blessing_choices() -> Mapping[str, Tuple[str, ...]]:
    """{task: its blessing metrics}, for help texts and errors."""
    return {name: task.metric_names for name, task in TASK_SPECS.items()}
