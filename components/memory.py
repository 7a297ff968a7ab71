"""Giving freed memory back to the system: glibc keeps a process's freed blocks in its heap for reuse, so
buffers a step no longer holds (Transform's, the Evaluator's, a checkpoint's arrays once copied into the model)
stay resident until `malloc_trim` returns them."""

from __future__ import annotations

import ctypes
import gc


def give_back_free_memory() -> bool:
    """Collects garbage, then returns the heap's free pages to the system (glibc's `malloc_trim`). False where
    the C library has no `malloc_trim` (not glibc): nothing is given back there."""
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True
