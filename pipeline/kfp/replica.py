"""One replica of a training job (pipeline/kfp/training_job.py): what KFP's launcher does for a one-pod step, done
by the replica itself, since no launcher runs in a training job's pods.

- Before the executor: every input artifact is downloaded from the pipeline root to the local path the launcher
  would have used (`entrypoint.localize_artifacts` points the executor there).
- After it, on the chief only: every output artifact is uploaded to its URI, and the executor output file to
  `<the step's output folder>/tfxflow-job/output_metadata.json`, where the step's launcher (job_launcher.py)
  takes it for KFP. The other replicas trained into temporary folders (components/training/executor.py) and
  publish nothing.
- A TrainJob's pods have no TF_CONFIG: it is built from JobSet's names and the pod's completion index
  (`tf_config_for_node`), as the ClusterTrainingRuntime's environment gives them.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Mapping, MutableMapping, Optional

from tfxflow.components import object_store
from tfxflow.components.training import cluster

REPLICA_FLAG = "--tfxflow_replica"
OUTPUT_FOLDER = "tfxflow-job"
OUTPUT_FILE = "output_metadata.json"
# Set by the launcher in the TrainJob's trainer.env (training_job.trainjob), for every node's container.
NODES_ENV = "TFXFLOW_NODES"  # the TrainJob's node count (its numNodes)
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"  # an Indexed Job's pod index (Kubernetes sets it)
JOBSET_NAME_ENV = "TFXFLOW_JOBSET_NAME"  # the TrainJob's name (the JobSet's), set by the launcher
NODE_JOB = "node"
DEFAULT_PORT = 2222


def job_output_uri(executor_input: Mapping) -> str:
    """Where the chief leaves the executor output file: beside the step's outputs, under its output folder
    (the parent of its first output artifact's URI, the same in the launcher's pod and in every replica)."""
    for entry in (executor_input.get("outputs", {}).get("artifacts") or {}).values():
        for artifact in entry.get("artifacts", []):
            uri = artifact.get("uri", "")
            if object_store.is_remote(uri):
                return f"{uri.rstrip('/').rsplit('/', 1)[0]}/{OUTPUT_FOLDER}/{OUTPUT_FILE}"
    raise ValueError("the Trainer's executor input names no output artifact in an object store")


def download_inputs(remote_of: Mapping[str, str], executor_input: Mapping) -> int:
    """Copies each input artifact from its URI to the local path the executor input now names; returns the files."""
    count = 0
    for key, entry in (executor_input.get("inputs", {}).get("artifacts") or {}).items():
        for artifact in entry.get("artifacts", []):
            local = artifact.get("uri", "")
            remote = remote_of.get(local)
            if remote:
                written = object_store.download(remote, local)
                print(f"tfxflow: replica: input {key}: {written} file(s) from {remote}", file=sys.stderr)
                count += written
    return count


def publish_outputs(remote_of: Mapping[str, str], output_file: str, destination: str) -> int:
    """The chief's share: uploads every output artifact's local folder to its URI (inputs are in `remote_of`
    too, and are left alone) and the executor output file to `destination`; returns the files uploaded."""
    count = 0
    with open(output_file, encoding="utf-8") as f:
        output = json.load(f)
    for key, entry in (output.get("artifacts") or {}).items():
        for artifact in entry.get("artifacts", []):
            remote = artifact.get("uri", "")
            local = next((path for path, uri in remote_of.items() if uri == remote), None)
            if local and os.path.exists(local):
                written = object_store.upload(local, remote)
                print(f"tfxflow: replica: output {key}: {written} file(s) to {remote}", file=sys.stderr)
                count += written
    count += object_store.upload(output_file, destination)
    return count


def tf_config_for_node(environ: Mapping[str, str]) -> Optional[str]:
    """TF_CONFIG of a TrainJob node: node 0 is the chief, the others workers 0 to n-2, each at its JobSet host
    name `<jobset>-node-0-<index>.<jobset>`; None outside a TrainJob."""
    if not environ.get(NODES_ENV) or COMPLETION_INDEX_ENV not in environ or not environ.get(JOBSET_NAME_ENV):
        return None
    nodes, index, name = int(environ[NODES_ENV]), int(environ[COMPLETION_INDEX_ENV]), environ[JOBSET_NAME_ENV]
    hosts = [f"{name}-{NODE_JOB}-0-{i}.{name}:{DEFAULT_PORT}" for i in range(nodes)]
    task = {"type": "chief", "index": 0} if index == 0 else {"type": "worker", "index": index - 1}
    return json.dumps({"cluster": {"chief": hosts[:1], "worker": hosts[1:]}, "task": task, "environment": "cloud"})


def adopt_node_tf_config(environ: MutableMapping[str, str] = os.environ) -> None:
    """Sets TF_CONFIG of a TrainJob node when its runtime did not."""
    if not environ.get(cluster.TF_CONFIG):
        built = tf_config_for_node(environ)
        if built:
            environ[cluster.TF_CONFIG] = built


def is_chief(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this replica writes the step's outputs (TensorFlow's rule; a lone replica is its own chief)."""
    me = cluster.role(environ)
    return me is None or me.is_chief
