"""Python's cyclic garbage collector, set for a pipeline's process.

Shared by both runners (pipeline/local/runner.py, pipeline/kfp/entrypoint.py), below both.

Python's default (700, 10, 10) scans the youngest objects every 700 allocations net of frees and, after ten of
those, the middle generation; a full collection (every object) follows when the old generation has grown by a
quarter. A pipeline's process holds some 1.3 million objects (TensorFlow, TFX, Beam, MLflow and what they
build), so a full collection takes 0.4 to 0.5 s on these cores: in a 1x taxi run, 3,900 young, 355 middle and
14 full collections took 7 to 8 s of its 65, most of them while modules were imported and graphs were built,
when nearly every object lives on. With the youngest generation at 10,000, three full collections ran and the
collector took 3.5 to 5.6 s; the process's resident peak moved by 0 to 40 MB (1,367 to 1,375 MB before,
1,403 to 1,443 after, four runs each). Larger settings saved another second and cost 100 MB: garbage cycles wait
longer for the collection that frees them, and the peak at 100x has less room than that.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator, Tuple

THRESHOLDS: Tuple[int, int, int] = (10_000, 10, 10)


@contextlib.contextmanager
def pipeline_thresholds(thresholds: Tuple[int, int, int] = THRESHOLDS) -> Iterator[None]:
    """The collector runs at `thresholds` inside the block, at the process's own settings after it."""
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def set_for_pipeline() -> None:
    """The collector runs at THRESHOLDS from now on (a process that runs one pipeline step and exits)."""
    gc.set_threshold(*THRESHOLDS)
