"""A training job replica that trains nothing, for the launcher's tests (tests/k8s_server.py runs it in place of
the step image's entry point): it reads its task from TF_CONFIG, follows its line of `FAKE_REPLICA_PLAN`
({"worker 0": {"exit": 3, "after_s": 1, "say": "...", "signal": 9}}), and as the chief leaves an executor output
file where a real chief does (pipeline/kfp/replica.py)."""

import json
import os
import sys
import time

from tfxflow.components import object_store
from tfxflow.pipeline.kfp import replica


def main(argv):
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    me = f"{task['type']} {task['index']}"
    plan = json.loads(os.environ.get("FAKE_REPLICA_PLAN", "{}")).get(me, {})
    assert argv[0] == replica.REPLICA_FLAG, argv[:1]
    executor_input = json.loads(argv[argv.index("--json_serialized_invocation_args") + 1])
    print(f"{me}: started with {len(argv)} arguments", flush=True)
    for i in range(3):
        print(f"{me}: step {i}", flush=True)
    if plan.get("say"):
        print(plan["say"], flush=True)
    time.sleep(plan.get("after_s", 0.2))
    if "exit" in plan:
        sys.exit(plan["exit"])
    if "signal" in plan:
        os.kill(os.getpid(), plan["signal"])
    if task["type"] == "chief":
        output = os.path.join(os.getcwd(), "output_metadata.json")
        with open(output, "w", encoding="utf-8") as f:
            json.dump({"artifacts": {}, "parameterValues": {"trained_by": me}}, f)
        object_store.upload(output, replica.job_output_uri(executor_input))
    print(f"{me}: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
