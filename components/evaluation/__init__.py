"""Evaluation: TFMA's Evaluator on a sample of the eval split (evaluator), the task's metrics (eval_metrics), and the
golden rows the serving check and the TFLite export replay against the Evaluator's model (golden)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "Evaluator": "evaluator.Evaluator",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
