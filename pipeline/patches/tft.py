"""The patch of tf.Transform's private names: `tft-one-trace`.

TFX's Transform executor asks tf.Transform which columns the analysis reads (`get_analyze_input_columns`, twice)
and which the transform reads (`get_transform_input_columns`), with the same arguments; each traces the
preprocessing_fn into a new graph (`impl_helper.trace_preprocessing_function`) and only reads it. Here the later
inspections read the graph the first one traced (the same function, equal arguments), at most twice, and the
graph is let go then. Every other use of `impl_helper` is tf.Transform's own.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

from tfxflow.pipeline.patches.patch import MARK, Patch

# The versions of the two locks (requirements-compat.lock, requirements-current.lock) this patch was read and
# tested at.
TFT = ("1.16.0", "1.21.0")
INSPECTIONS = "tensorflow_transform.inspect_preprocessing_fn"  # its two functions read impl_helper's trace


def _trace_once_for_the_inspections() -> None:
    inspect_module = importlib.import_module(INSPECTIONS)
    if getattr(inspect_module.impl_helper, MARK, False):
        return
    inspect_module.impl_helper = TraceReused(inspect_module.impl_helper)


class TraceReused:
    """tf.Transform's `impl_helper` module as its inspections see it: `trace_preprocessing_function` called
    again with the same function and equal arguments gives the trace of the call before, up to `REUSES` times
    (the executor's inspections of one run); everything else is the module's."""

    REUSES = 2

    def __init__(self, module: types.ModuleType):
        self._module = module
        self._last: list = []
        setattr(self, MARK, True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def trace_preprocessing_function(self, preprocessing_fn, input_specs, use_tf_compat_v1, base_temp_dir=None):
        args = (input_specs, use_tf_compat_v1, base_temp_dir)
        last = self._last
        if last and last[0] is preprocessing_fn and _equal(last[1], args) and last[3] > 0:
            last[3] -= 1
            traced = last[2]
            if not last[3]:
                self._last = []
            return traced
        self._last = []  # the previous trace is not held while this one is made
        traced = self._module.trace_preprocessing_function(preprocessing_fn, *args)
        self._last = [preprocessing_fn, args, traced, self.REUSES]
        return traced


def _equal(a: Any, b: Any) -> bool:
    """a == b, False where the comparison cannot say (a feature spec's default value as an array)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


PATCHES = (Patch("tft-one-trace", {"tensorflow-transform": TFT}, _trace_once_for_the_inspections),)
