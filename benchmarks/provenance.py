"""What a benchmark's results JSON records of where it was measured (the commit), where it is written, and the
runs the benchmarks share: processes that train together, and the line a failed one's error is."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from typing import List, Optional, Tuple


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


def run_workers(
    command: List[str], workers: int, gpus: Optional[int], timeout: float, cwd: Optional[str] = None
) -> Tuple[str, str]:
    """Runs `command` as `workers` processes that train together, laid out as the Trainer's local cluster
    (components/training/local_cluster.py: TF_CONFIG, the chief first; one process: no TF_CONFIG), each seeing its
    equal share of the first `gpus` GPUs (None: whatever the machine has). Returns (the chief's stdout, "") or ("",
    the error line of a process that failed); subprocess.TimeoutExpired past `timeout`."""
    from tfxflow.components.training import local_cluster

    configs = local_cluster.tf_configs(local_cluster.free_ports(workers)) if workers > 1 else [None]
    processes = []
    for index, config in enumerate(configs):
        env = dict(os.environ)
        if gpus is not None:
            env.update(local_cluster.device_env(index, workers, gpus) or {"CUDA_VISIBLE_DEVICES": ""})
        if config:
            env["TF_CONFIG"] = json.dumps(config)
        processes.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
        )
    try:
        outputs = [p.communicate(timeout=timeout) for p in processes]
    finally:
        for p in processes:
            p.kill()
    for p, (_, err) in zip(processes, outputs, strict=True):
        if p.returncode != 0:
            return "", error_line(err)
    return outputs[0][0], ""


def new_results_path(kind: str) -> str:
    """benchmarks/results/<kind>-<date>.json, or -2, -3, ... after it: an earlier run's file stays."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    base = os.path.join(folder, f"{kind}-{datetime.date.today():%Y%m%d}")
    path, n = base + ".json", 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}.json"
    return path
