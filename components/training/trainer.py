"""TFX Trainer entry point (`run_fn`, the module path pipeline/definition.py's RUN_FN names): reads the
custom_config, trains (fit.py), exports the serving model and writes what it used (training_info.json)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Iterable, List, Mapping, Optional

import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from tfxflow.components import names, object_store
from tfxflow.components.model import export, search_space, text
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.training import cluster as cluster_lib
from tfxflow.components.training import hardware as hardware_lib
from tfxflow.components.training.callbacks import backup_dir_for, local_backup
from tfxflow.components.training.fit import train
from tfxflow.components.training.pretrained import encoder_records, pretrained_checkpoint
from tfxflow.components.training.train_params import TrainParams

# The entries of the Trainer's custom_config (pipeline/definition.py; TrainingConfig.custom_config).
CUSTOM_CONFIG_KEYS = ("features", "raw_examples", "model", "training", "hardware", "cluster")


def recorded_rows(file_patterns: Iterable[str], split: str) -> Optional[int]:
    """The rows ExampleGen recorded for `split` when the files are its examples (`<examples>/Split-<split>/*`)."""
    from tfxflow.components.ingest import csv_input  # imports TFX

    roots = {os.path.dirname(os.path.dirname(pattern)) for pattern in file_patterns}
    if len(roots) != 1:
        return None
    counts = csv_input.read_rows(roots.pop())
    return None if counts is None else counts["split_rows"].get(split)


def serving_columns(schema_path: Optional[str]) -> Optional[List[str]]:
    """The columns of the schema's SERVING environment (None without a schema): what a request holds."""
    if not schema_path:
        return None
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    from tfxflow.components.validation.schema import serving_features  # imports TFX

    return [f.name for f in serving_features(io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema()))]


def with_tuned(custom: Mapping[str, Any], values: Mapping[str, Any]) -> dict:
    """The Trainer's custom_config with a tuning's `values` in place of its settings (search_space.apply), the
    width scaling the model's own hidden layers (the given ones, else its preset's)."""
    base = model_lib.ModelParams.from_dict(custom.get("model", {}))
    return search_space.apply(values, custom, base.hidden_units or base.preset_spec.hidden_units)


def run_fn(fn_args) -> None:
    """TFX Trainer entry point: trains per `custom_config`, exports the serving model, writes what it used."""
    custom = fn_args.custom_config or {}
    unknown = sorted(set(custom) - set(CUSTOM_CONFIG_KEYS))
    if unknown:  # a setting spelled differently here and where the pipeline is built would be lost silently
        raise ValueError(f"Trainer custom_config: unknown key(s) {unknown}; known: {sorted(CUSTOM_CONFIG_KEYS)}")
    tuned = dict((fn_args.hyperparameters or {}).get("values") or {})
    if tuned:  # the Tuner's best trial (components/tuning/tuner.py) in place of the settings it searched
        custom = with_tuned(custom, tuned)
    # No roles: the features are those of a user's own preprocessing_fn (a module file).
    config = features_lib.as_config(custom["features"], roles_required=False)
    hardware = hardware_lib.HardwareConfig.from_dict(custom.get("hardware", {}))
    train_params = TrainParams.from_dict(custom.get("training", {}))
    hardware_lib.configure_devices(hardware)
    me = cluster_lib.role()
    writes_outputs = me is None or me.is_chief  # the others train into temporary outputs (executor.py)
    # First: MultiWorkerMirroredStrategy needs an untouched runtime.
    strategy = hardware_lib.make_strategy(cluster=cluster_lib.ClusterConfig.from_dict(custom.get("cluster")))
    if hardware.require_gpus:
        hardware_lib.check_gpus(hardware)
    policy = hardware_lib.resolve_precision(hardware.precision)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    text.load_ops_for(tf_transform_output.transform_savedmodel_dir)
    backup_dir = backup_dir_for(
        train_params.backup_root,
        {
            "train_files": list(fn_args.train_files),
            "transform": fn_args.transform_graph_path,
            "train_steps": fn_args.train_steps,
            "custom_config": custom,
        },
    )
    model_params = model_lib.ModelParams.from_dict(custom.get("model", {}))
    scratch = tempfile.mkdtemp(prefix="tfxflow-trainer-")
    try:
        fit_backup_dir, mirror = local_backup(backup_dir, scratch)
        # tf-keras' BackupAndRestore has each other worker save to a temporary folder; the chief alone mirrors.
        mirror = mirror if writes_outputs else []
        checkpoint = pretrained_checkpoint(model_params, scratch) if model_params.init_checkpoint else None
        # LocalDagRunner runs every component in this process: the policy must not outlive the Trainer.
        with hardware_lib.precision_policy(policy):
            model, history, info = train(
                config,
                tf_transform_output,
                fn_args.train_files,
                fn_args.eval_files,
                train_steps=fn_args.train_steps,
                eval_steps=fn_args.eval_steps,
                model_params=model_params,
                train_params=train_params,
                log_dir=fn_args.model_run_dir,
                hardware=hardware,
                strategy=strategy,
                backup_dir=fit_backup_dir,
                extra_callbacks=mirror,
                raw_examples=bool(custom.get("raw_examples")),
                eval_rows=recorded_rows(fn_args.eval_files, "eval"),
                checkpoint=checkpoint,
                train_rows=recorded_rows(fn_args.train_files, "train"),
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    # Outside the policy: the Transform layer created at export must keep float32 inputs.
    raw_signature = bool(config.feature_columns)  # one tensor per column needs the columns the config names
    export.export_serving_model(
        model,
        tf_transform_output,
        config,
        fn_args.serving_model_dir,
        class_names=info.get("class_names", ()),
        raw_signature=raw_signature,
        serving_columns=serving_columns(fn_args.schema_path),
        encoders=encoder_records(model_params, config, checkpoint, info),
    )
    if custom.get("raw_examples"):  # real rows for TF Serving's warmup (transformed ones are not requests)
        rows, complete = export.sample_rows(fn_args.eval_files, config.feature_columns)
        info["warmup_requests"] = export.write_warmup_requests(
            fn_args.serving_model_dir, rows, tf_transform_output, config, raw_signature, complete
        )
    # The model is exported: nothing is left to resume (the chief removes the one backup).
    if writes_outputs and object_store.tf_cannot_read(backup_dir):
        object_store.delete(backup_dir)
    elif writes_outputs and backup_dir and tf.io.gfile.exists(backup_dir):
        tf.io.gfile.rmtree(backup_dir)
    if model_params.init_checkpoint:
        info["init_checkpoint"] = model_params.init_checkpoint  # as given, not the local copy
    if tuned:
        info["tuned"] = tuned
    info["history"] = {k: [float(v) for v in values] for k, values in history.history.items()}
    tf.io.gfile.makedirs(fn_args.model_run_dir)
    with tf.io.gfile.GFile(os.path.join(fn_args.model_run_dir, names.TRAINING_INFO_FILE), "w") as f:
        json.dump(info, f, indent=2)
    logging.info("Final epoch metrics: %s", {k: round(v[-1], 4) for k, v in info["history"].items()})
