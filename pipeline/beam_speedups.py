"""A cost of Beam 2.59 that grows with what a process has imported, removed where this project runs Beam.

Beam's pickler turns dill's tracing off after every pickle and unpickle (`apache_beam/internal/dill_pickler.py`:
`dill.dill._trace(False)`), which sets the level of dill's logger; every Logger.setLevel clears the cache of
every logger of the process, and a pipeline run has thousands (TensorFlow, TFX, TFDV, TFMA): 8% of the samples
of a profile of Transform's in-process Beam job. Here the level is set only when it changes: what is pickled
and what dill logs are the same.

Not changed, measured: the in-process DirectRunner weighs every side input it caches with objsize, which first
collects the globals of every loaded module (`runners/worker/statecache.py`, get_deep_size; 29% of Transform's
samples). Without that cache (its size 0) Transform took 5 to 9 s less on 2 cores but the Evaluator 5 s more
(TFMA reads its side inputs again and again), so the cache stays.

`apply()` is called by this project's runners (the local runner and the Kubeflow step's entry point) before
they run TFX; tests/pipeline/test_beam_speedups.py checks the pinned Beam still does this and that pipelines
give the same results.
"""

from __future__ import annotations

import logging

TRACE = "_trace"  # dill's function that Beam's pickler calls after every pickle (dill.dill._trace)
MARK = "tfxflow_sets_level_on_change"


def apply() -> None:
    """Sets dill's logger level only when it changes; idempotent."""
    import dill._dill as dill_module

    original = getattr(dill_module, TRACE)
    if getattr(original, MARK, False):
        return
    log = dill_module.log

    def trace(boolean: bool) -> None:
        level = logging.INFO if boolean else logging.WARN
        if log.level != level:
            log.setLevel(level)

    setattr(trace, MARK, True)
    trace.__doc__ = original.__doc__
    setattr(dill_module, TRACE, trace)
