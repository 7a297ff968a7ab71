"""Serving: the check that the model loads and answers as TF Serving would (serving_check, with the probe in
components/serving_probe.py) and the Pusher's atomic versions (pusher)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "ServingCheck": "serving_check.ServingCheck",
    "Pusher": "pusher.Pusher",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
