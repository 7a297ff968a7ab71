"""One Trainer worker on this machine, started by `local_cluster.py` with its TF_CONFIG:

    python -m tfxflow.components.training.worker INVOCATION_JSON

runs the Trainer's executor on the invocation's inputs, outputs and properties. Its output is relayed to the
step's log; an error ends it with its traceback (status 1), whose last line the step reports.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import List

from tfxflow.components.training import cluster as cluster_lib
from tfxflow.components.training import hardware


def main(argv: List[str]) -> int:
    hardware.use_keras_2()  # before TensorFlow is imported, as in every entry point
    hardware.use_arrow_jemalloc()
    # After the two settings above: TFX imports TensorFlow and Arrow.
    from absl import logging
    from tfx.dsl.components.base import base_executor
    from tfx.types import artifact_utils
    from tfx.utils import import_utils, json_utils

    logging.set_verbosity(logging.INFO)
    with open(argv[1], encoding="utf-8") as f:
        invocation = json.load(f)
    me = cluster_lib.role()
    executor_class = import_utils.import_class_by_path(invocation["executor_class"])
    with tempfile.TemporaryDirectory(prefix="tfxflow-worker-") as tmp_dir:
        context = base_executor.BaseExecutor.Context(
            tmp_dir=tmp_dir, unique_id=me.name.replace(" ", "-") if me else "0"
        )
        # An error ends the process with its traceback, whose last line the step reports.
        executor_class(context).Do(
            artifact_utils.parse_artifact_dict(invocation["input_dict"]),
            artifact_utils.parse_artifact_dict(invocation["output_dict"]),
            json_utils.loads(invocation["exec_properties"]),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
