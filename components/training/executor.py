"""The Trainer's executor: TFX's GenericExecutor (the built-in run_fn, or a module file's), on one worker or on
several.

- No cluster in the environment and `cluster.workers` > 1 in the custom_config: this process starts the
  workers on this machine (`local_cluster.py`), each running this executor with its own TF_CONFIG, and waits.
- TF_CONFIG (or CLUSTER_SPEC) names several workers: this process is one of them. The chief trains into the
  Trainer's outputs; every other worker trains into temporary folders that are removed after: TFX's executor
  leaves "export once" to the run_fn, so a run_fn written for one worker (TFX's examples, the built-in one)
  writes its model, TensorBoard logs and record once whatever it does.
- Otherwise: TFX's executor as is.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from typing import Any, Dict, Iterator, List

from absl import logging
from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx.components.trainer import executor as tfx_trainer
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import json_utils

from tfxflow.components.training import cluster as cluster_lib
from tfxflow.components.training import local_cluster


def cluster_config(exec_properties: Dict[str, Any]) -> cluster_lib.ClusterConfig:
    """The `cluster` section of the Trainer's custom_config (one worker without it)."""
    custom = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
    return cluster_lib.ClusterConfig.from_dict(custom.get("cluster"))


@contextlib.contextmanager
def scratch_outputs(output_dict: Dict[str, List[types.Artifact]]) -> Iterator[Dict[str, List[types.Artifact]]]:
    """Copies of the output artifacts pointing into a temporary folder, removed after the block."""
    scratch = tempfile.mkdtemp(prefix="tfxflow-worker-outputs-")
    try:
        copies = {}
        for key, artifacts in output_dict.items():
            copies[key] = []
            for i, artifact in enumerate(artifacts):
                proto = metadata_store_pb2.Artifact()
                proto.CopyFrom(artifact.mlmd_artifact)
                copy = artifact_utils.deserialize_artifact(artifact.artifact_type, proto)
                copy.uri = f"{scratch}/{key}-{i}"
                copies[key].append(copy)
        yield copies
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Executor(tfx_trainer.GenericExecutor):
    """TFX's GenericExecutor on one worker or several (see the module docstring)."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        config = cluster_config(exec_properties)
        cluster_lib.adopt_cluster_spec()
        me = cluster_lib.role()
        if me is None and config.workers > 1:
            local_cluster.train(type(self), input_dict, output_dict, exec_properties, config, self._get_tmp_dir())
            return
        if me is not None and not me.is_chief:
            logging.info("Trainer %s of %d: outputs to a temporary folder (the chief writes)", me.name, me.workers)
            with scratch_outputs(output_dict) as scratch:
                super().Do(input_dict, scratch, exec_properties)
            return
        super().Do(input_dict, output_dict, exec_properties)
        self.after_training(input_dict, output_dict, exec_properties)

    def after_training(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        """What the process that writes the outputs adds after the run_fn (nothing here)."""
