"""What a benchmark's results JSON records of where it was measured (the commit), and where it is written."""

from __future__ import annotations

import datetime
import os
import subprocess


def commit() -> str:
    """The checkout's commit (12 hex digits), with "+changes" when its tracked files differ from it; "unknown"
    outside a git checkout."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    found = git("rev-parse", "--short=12", "HEAD")
    if not found:
        return "unknown"
    return found + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def error_line(stderr: str) -> str:
    """What a failed run's stderr says went wrong: its last line naming an error (TensorFlow's op errors end
    with a line of context that does not), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or line.startswith("error:"):
            return line
    return lines[-1] if lines else "failed"


def new_results_path(kind: str) -> str:
    """benchmarks/results/<kind>-<date>.json, or -2, -3, ... after it: an earlier run's file stays."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    base = os.path.join(folder, f"{kind}-{datetime.date.today():%Y%m%d}")
    path, n = base + ".json", 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}.json"
    return path
