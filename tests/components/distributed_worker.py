"""Trains a few steps in a fresh process, where device settings can still be applied.

    python -m tests.components.distributed_worker SCENARIO TRANSFORM_DIR LOG_DIR [TASK [GRAD_ACCUM_STEPS]]

SCENARIO is `mirrored-cpus` (MirroredStrategy over two logical CPUs) or `multi-worker` (TF_CONFIG set by the
caller); TASK the tiny data's task (default binary;
"text" trains bert-tiny). Prints one JSON line with what it observed.
"""

import json
import os
import sys

import numpy as np


def main(scenario: str, transform_dir: str, log_dir: str, task: str = "binary", grad_accum_steps: str = "1") -> None:
    from tests.components.tiny_transform import write_tiny_transform
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.training import cluster, hardware
    from tfxflow.components.training.fit import train
    from tfxflow.components.training.input_pipeline import make_dataset
    from tfxflow.components.training.train_params import TrainParams

    config = hardware.HardwareConfig(cpu_replicas=2 if scenario == "mirrored-cpus" else 1, xla=scenario == "xla")
    applied = hardware.configure_devices(config)
    strategy = hardware.make_strategy()
    tiny = write_tiny_transform(transform_dir, task)
    params = TrainParams(
        batch_size=32, eval_every_steps=8, early_stopping_patience=0, grad_accum_steps=int(grad_accum_steps)
    )
    model, history, info = train(
        tiny["config"],
        tiny["output"],
        tiny["raw_train"],
        tiny["raw_eval"],
        train_steps=32,
        eval_steps=0,
        model_params=model_lib.ModelParams(
            preset="bert-tiny" if task == "text" else "default", hidden_units=(16,), learning_rate=0.01
        ),
        train_params=params,
        log_dir=log_dir,
        hardware=config,
        strategy=strategy,
        raw_examples=True,
    )
    # What each replica receives from one global batch of the training dataset.
    dataset = make_dataset(
        tiny["train"],
        tiny["output"].transformed_feature_spec(),
        "label",
        model.input_names,
        params,
        True,
        params.effective_batch(strategy.num_replicas_in_sync),
        cluster.worker_count(os.environ),
    )
    _, labels = next(iter(strategy.experimental_distribute_dataset(dataset)))
    per_replica = [int(t.shape[0]) for t in strategy.experimental_local_results(labels)]
    print(
        json.dumps(
            {
                "devices_applied": applied,
                "strategy": info["strategy"],
                "replicas": strategy.num_replicas_in_sync,
                "global_batch": info["global_batch"],
                "per_replica_batches": per_replica,
                "losses": [float(v) for v in history.history["loss"]],
                "metrics": sorted(history.history),
                "xla": info["xla"],
                "parameters": info["parameters"],
                "finite": bool(np.all(np.isfinite(history.history["loss"]))),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(*sys.argv[1:6])
