"""What a benchmark's results JSON records of where it was measured: the commit."""

from __future__ import annotations

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
