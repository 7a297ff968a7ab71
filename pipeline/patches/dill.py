"""The patch of dill's private names: `dill-level`.

Beam's dill pickler turns dill's tracing off after every pickle and unpickle (`dill.dill._trace(False)`), which sets
the level of dill's logger each time; every `Logger.setLevel` clears the cache of every logger of the process, and
a pipeline run has thousands (TensorFlow, TFX, TFDV, TFMA). Here the level is set only when it changes: what is
pickled and what dill logs are the same. (Beam 2.7x pickles with cloudpickle by default; its dill pickler is
the one that calls this.)
"""

from __future__ import annotations

import logging

from tfxflow.pipeline.patches.patch import MARK, Patch

# The versions of the two locks (requirements-compat.lock, requirements-current.lock) this patch was read and
# tested at.
DILL = ("0.3.1.1", "0.4.1")
TRACE = "_trace"  # dill's function that Beam's pickler calls after every pickle (dill.dill._trace)


def _set_dill_level_on_change() -> None:
    import dill._dill as dill_module

    original = getattr(dill_module, TRACE)
    if getattr(original, MARK, False):
        return
    log = dill_module.log
    logger = getattr(log, "logger", log)  # dill 0.4 wraps its logger in an adapter, which has no level of its own

    def trace(boolean: bool) -> None:
        level = logging.INFO if boolean else logging.WARN
        if logger.level != level:
            log.setLevel(level)

    setattr(trace, MARK, True)
    trace.__doc__ = original.__doc__
    setattr(dill_module, TRACE, trace)


PATCHES = (Patch("dill-level", {"dill": DILL}, _set_dill_level_on_change),)
