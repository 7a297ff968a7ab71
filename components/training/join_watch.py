"""The watcher of a worker's wait for its cluster (`cluster.join_deadline`), a process beside the worker:

    python -m tfxflow.components.training.join_watch WORKER_PID TIMEOUT_S ROLE_JSON

When its standard input ends (the worker joined, or ended) within TIMEOUT_S, it ends without a word; else it
writes the line naming the workers that did not join (`cluster.join_report`) and ends the worker with SIGKILL,
the one signal that needs nothing of a process whose interpreter TensorFlow holds.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import List

from tfxflow.components.training.cluster import Role, join_report


def main(argv: List[str]) -> int:
    worker, timeout_s, role = int(argv[1]), float(argv[2]), Role(**json.loads(argv[3]))
    ended, _, _ = select.select([sys.stdin], [], [], timeout_s)
    if ended:
        return 0
    print(join_report(role, timeout_s), file=sys.stderr, flush=True)
    os.kill(worker, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
