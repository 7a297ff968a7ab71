"""A running component's heartbeat: a line at least every HEARTBEAT_S seconds with its time, rows and memory.

Shared by both runners (pipeline/local/runner.py's console, pipeline/kfp/entrypoint.py's step log), below both.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional, TextIO, Tuple

from tfxflow.components import progress as rows_progress

HEARTBEAT_S = 30.0  # a running component prints a line at least this often


def tree_rss_bytes() -> Optional[int]:
    """Resident memory of this process and its children (Beam's multi_processing workers); None if unreadable."""
    import psutil

    try:
        me = psutil.Process()
        processes = [me] + me.children(recursive=True)
    except psutil.Error:
        return None
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:  # a worker that exited between listing and reading
            pass
    return total


def format_elapsed(seconds: float) -> str:
    """45s, 1m30s, 2h05m."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Heartbeat:
    """While a component runs, a line every `interval` seconds: its label, time elapsed, rows done when the
    component counts them (components/progress.py), resident memory of this process tree. A daemon thread
    between `__enter__` and `__exit__`; `begin` and `end` mark each component."""

    def __init__(
        self,
        out: TextIO = sys.stdout,
        interval: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        rows: Callable[[], Tuple[Optional[int], str]] = rows_progress.snapshot,
        memory: Callable[[], Optional[int]] = tree_rss_bytes,
    ):
        self.out, self.interval, self.clock, self.rows, self.memory = out, interval, clock, rows, memory
        self.label: Optional[str] = None
        self._started = self._next = 0.0
        self._lock = threading.Lock()  # label and timing, and whole lines on `out`
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def begin(self, label: str) -> None:
        rows_progress.reset()  # a count left by a component that did not finish is not this one's
        with self._lock:
            self.label, self._started = label, self.clock()
            self._next = self._started + self.interval

    def end(self) -> None:
        rows_progress.reset()
        with self._lock:
            self.label = None

    def line(self) -> Optional[str]:
        """The heartbeat line of the component running now; None when none is."""
        with self._lock:
            return self._line()

    def _line(self) -> Optional[str]:
        label, started = self.label, self._started
        if label is None:
            return None
        parts = [f"{format_elapsed(self.clock() - started)} elapsed"]
        done, unit = self.rows()
        if done is not None:
            parts.append(f"{done:,} {unit}")
        resident = self.memory()
        if resident is not None:
            parts.append(f"{resident / 2**20:,.0f} MB resident")
        return f"{label} ... " + ", ".join(parts)

    def print(self, line: str) -> None:
        with self._lock:
            self._write(line)

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def _beat(self) -> None:
        while True:
            with self._lock:
                wait = self._next - self.clock() if self.label is not None else self.interval
            if self._stop.wait(max(wait, 0.01)):
                return
            # Under the lock from the check to the write: no beat of a component appears after its end's line.
            with self._lock:
                if self.label is not None and self.clock() >= self._next:
                    self._next = self.clock() + self.interval
                    self._write(self._line())

    def __enter__(self) -> "Heartbeat":
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name="tfxflow-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
