"""TFX's Trainer executor for a user's own run_fn (a module file), which then leaves the record the built-in
Trainer leaves: `training_info.json` in the model run's folder, with the per-epoch history read from the
TensorBoard logs the run_fn wrote there (Keras' TensorBoard callback, as TFX's examples use it), the time
it took and what the exported model is. The run page and MLflow then show the module's training curves as
they show the built-in Trainer's.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

from tfxflow.components import names
from tfxflow.components.training import cluster as cluster_lib
from tfxflow.components.training import executor

# Keras' TensorBoard callback: one folder per side, scalars named `epoch_<metric>`.
SIDES = {"train": "", "validation": "val_"}
EPOCH_PREFIX = "epoch_"


def epoch_history(log_dir: str) -> Dict[str, List[float]]:
    """{metric: values by epoch} (validation metrics as `val_<metric>`, as Keras' History names them) from the
    TensorBoard event files of Keras' callback under `log_dir`; {} when there are none."""
    import tensorflow as tf

    history: Dict[str, Dict[int, float]] = {}
    for side, prefix in SIDES.items():
        for path in sorted(fileio.glob(os.path.join(log_dir, side, "events.out.tfevents.*"))):
            for record in tf.data.TFRecordDataset(path):
                event = tf.compat.v1.Event.FromString(record.numpy())
                for value in event.summary.value:
                    if not value.tag.startswith(EPOCH_PREFIX):
                        continue
                    number = (
                        float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else float(value.simple_value)
                    )
                    name = prefix + value.tag[len(EPOCH_PREFIX) :]
                    history.setdefault(name, {})[int(event.step)] = number
    return {name: [by_step[step] for step in sorted(by_step)] for name, by_step in sorted(history.items())}


class Executor(executor.Executor):
    """The Trainer's executor (one worker or several), then `training_info.json` where the run_fn left none."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        self._started = time.monotonic()
        super().Do(input_dict, output_dict, exec_properties)

    def after_training(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        model_run = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_RUN_KEY])
        path = os.path.join(model_run, names.TRAINING_INFO_FILE)
        if fileio.exists(path):
            return
        history = epoch_history(model_run)
        info = {
            "trainer": "the module file's run_fn",
            "seconds": round(time.monotonic() - self._started, 1),
            "epochs_run": max((len(v) for v in history.values()), default=0),
            "history": history,
        }
        workers = cluster_lib.worker_count()
        if workers > 1:
            info["workers"] = workers
        fileio.makedirs(model_run)
        with fileio.open(path, "w") as f:
            f.write(json.dumps(info, indent=2))
        logging.info("Trainer: the run_fn's record: %s", {k: v for k, v in info.items() if k != "history"})
