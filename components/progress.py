"""Rows done by the component running in this process, for the runner's heartbeat line.

A component that counts what it processes (the streaming ExampleGen) calls `advance`, from any of its
threads; the local runner's heartbeat reads `snapshot` every few seconds. Module state: one component runs
at a time in a LocalDagRunner process.
"""

from __future__ import annotations

import threading
from typing import Optional, Tuple

_state = {"rows": None, "unit": "rows"}
_lock = threading.Lock()


def start(unit: str = "rows") -> None:
    """Begins counting for a new component."""
    _state["rows"], _state["unit"] = 0, unit


def advance(count: int) -> None:
    """Adds `count` processed rows (a no-op before `start`)."""
    with _lock:
        if _state["rows"] is not None:
            _state["rows"] += count


def reset() -> None:
    """Nothing is being counted (the component finished)."""
    _state["rows"] = None


def snapshot() -> Tuple[Optional[int], str]:
    """(rows done or None when nothing counts, their unit)."""
    return _state["rows"], _state["unit"]
