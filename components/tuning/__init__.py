"""Tuning: the search over the built-in Trainer's settings, trials in MLflow (tuner), and a module file's tuner_fn in
TFX's Tuner (module_tuner)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "Tuner": "tuner.Tuner",
    "ModuleTuner": "module_tuner.Tuner",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
