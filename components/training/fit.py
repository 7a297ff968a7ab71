"""The built-in model's training: its inputs and head from Transform's output, the steps and epochs, the compiled
model in the strategy's scope, and the fit (`train`), which returns what it did."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from tfxflow.components.errors import UserCodeError
from tfxflow.components.model import checkpoints, export, presets, tasks, text
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.model.preprocessing import LABEL_VOCABULARY
from tfxflow.components.training import cluster as cluster_lib
from tfxflow.components.training import hardware as hardware_lib
from tfxflow.components.training.callbacks import Throughput, make_callbacks, profile_executions
from tfxflow.components.training.input_pipeline import (
    count_rows,
    fed_widths,
    input_bound,
    input_speed,
    list_files,
    make_dataset,
    shard_policy,
)
from tfxflow.components.training.pretrained import fine_tuning_record, warm_start_encoder
from tfxflow.components.training.train_params import TrainParams


def skip_autograph_for_tf_keras() -> None:
    """Stops AutoGraph from transpiling tf_keras' own code at the first `fit` of every process.

    TF 2.16's AutoGraph leaves the `keras` package alone but not `tf_keras` (the same Keras 2 code under
    another name), so the first `fit` converts hundreds of library functions, which takes far longer than the
    model's own tracing. Idempotent.
    """
    from tensorflow.python.autograph.core import config as autograph_config

    rule = autograph_config.DoNotConvert("tf_keras")
    if not any(str(r) == str(rule) for r in autograph_config.CONVERSION_RULES):
        autograph_config.CONVERSION_RULES = (rule,) + tuple(autograph_config.CONVERSION_RULES)


def id_ranges(tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig) -> Dict[str, int]:
    """The id range of every categorical and bucketized transformed feature, from Transform's schema, and the
    vocabulary size of every text feature, from its Transform asset."""
    names = [config.transformed_name(c) for c in tuple(config.categorical) + tuple(config.bucketized)]
    ranges = {name: tf_transform_output.num_buckets_for_transformed_feature(name) for name in names}
    for column in config.text:
        path = tf_transform_output.vocabulary_file_by_name(text.asset_name(column))
        with tf.io.gfile.GFile(path, "rb") as f:
            ranges[config.transformed_name(column)] = sum(1 for _ in f)
    return ranges


def transformed_inputs(tf_transform_output: tft.TFTransformOutput, label_key: str) -> List[model_lib.ModelInput]:
    """The model's inputs when a user's own preprocessing_fn made the features (the feature config lists no
    roles): every transformed feature but the label, floats as numeric inputs, integers with an id range in
    Transform's schema (a vocabulary, buckets) as categorical ones, other integers as numbers. Raises
    UserCodeError naming a feature the built-in model cannot take (text, or several values per row)."""
    found = []
    for name, spec in sorted(tf_transform_output.transformed_feature_spec().items()):
        if name == label_key:
            continue
        if not isinstance(spec, tf.io.FixedLenFeature) or spec.shape not in ([], [1], (), (1,)):
            raise UserCodeError(
                f"the module's preprocessing_fn makes '{name}' with several values per row ({spec}); the built-in "
                "model takes one value per feature: make it one there, or bring a run_fn too"
            )
        if spec.dtype == tf.string:
            raise UserCodeError(
                f"the module's preprocessing_fn makes '{name}' as text; the built-in model takes numbers: map it "
                "to ids there (tft.compute_and_apply_vocabulary), or bring a run_fn too"
            )
        if spec.dtype == tf.int64:
            try:
                tokens = tf_transform_output.num_buckets_for_transformed_feature(name)
                found.append(model_lib.ModelInput(name, "categorical", tokens))
                continue
            except ValueError:
                pass  # an integer without an id range: a number
        found.append(model_lib.ModelInput(name, "numeric"))
    return found


def class_names(tf_transform_output: tft.TFTransformOutput, config: features_lib.FeatureConfig) -> List[str]:
    """A multi-class label's classes in index order: the feature config's list, else Transform's vocabulary of
    the training split (components/model/preprocessing.py). [] for the other tasks."""
    if config.task != tasks.MULTICLASS:
        return []
    if config.label.classes:
        return list(config.label.classes)
    vocabulary = tf_transform_output.vocabulary_by_name(LABEL_VOCABULARY)
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in vocabulary]


def target_moments(
    file_patterns: Iterable[str],
    feature_spec: Mapping[str, Any],
    column: str,
    label: features_lib.LabelSpec,
    max_rows: int = 100_000,
) -> Tuple[float, float]:
    """Mean and standard deviation of a regression label's training target (after `label.transform`) over the
    first `max_rows` rows of the files, in file order (the same on a resumed Trainer)."""
    spec = {column: feature_spec[column]}
    values = []
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP").take(max_rows).batch(8192)
    for batch in dataset:
        parsed = tf.io.parse_example(batch, spec)[column]
        dense = parsed.values if isinstance(parsed, tf.sparse.SparseTensor) else tf.reshape(parsed, [-1])
        values.append(export.label_forward(label, tf.cast(dense, tf.float32)).numpy())
    target = np.concatenate(values) if values else np.zeros([0])
    target = target[np.isfinite(target)]
    if not target.size:
        raise ValueError(f"no training row has a value for the label '{column}'")
    std = float(target.std())
    return float(target.mean()), std if std > 0 else 1.0


def make_head(
    config: features_lib.FeatureConfig,
    tf_transform_output: tft.TFTransformOutput,
    train_files: Iterable[str],
    raw_examples: bool,
) -> Tuple[model_lib.Head, List[str]]:
    """The task's head and a multi-class model's class names."""
    names_ = class_names(tf_transform_output, config)
    if config.task == tasks.MULTICLASS:
        return model_lib.Head(tasks.MULTICLASS, num_classes=len(names_)), names_
    if config.task == tasks.REGRESSION:
        if raw_examples:
            spec, column = tf_transform_output.raw_feature_spec(), config.label.column
        else:
            spec, column = tf_transform_output.transformed_feature_spec(), config.label.name
        mean, std = target_moments(train_files, spec, column, config.label)
        return model_lib.Head(tasks.REGRESSION, label_mean=mean, label_std=std), names_
    return model_lib.Head(tasks.BINARY), names_


def steps_for(
    train_steps: Optional[int], train_epochs: Optional[int], train_rows: Optional[int], effective_batch: int
) -> Tuple[int, str]:
    """(optimizer steps, how they were chosen): `train_steps` when given; else `train_epochs` passes over the
    `train_rows` training rows in batches of `effective_batch`; else presets.TRAIN_STEPS."""
    if train_steps:
        return int(train_steps), "given"
    if train_epochs and train_rows:
        steps = train_epochs * math.ceil(train_rows / effective_batch)
        return max(1, steps), f"{train_epochs} epochs of {train_rows:,} training rows in batches of {effective_batch:,}"
    return presets.TRAIN_STEPS, "the default"


def schedule(train_steps: int, eval_every_steps: int) -> Dict[str, int]:
    """Splits `train_steps` into equal Keras epochs of at most `eval_every_steps`, validating after each.

    The total is `train_steps` rounded up to a multiple of the epoch count.
    """
    epochs = max(1, math.ceil(train_steps / max(1, eval_every_steps)))
    return {"epochs": epochs, "steps_per_epoch": max(1, math.ceil(train_steps / epochs))}


def build(
    strategy: tf.distribute.Strategy,
    config: features_lib.FeatureConfig,
    num_tokens: Mapping[str, int],
    model_params: model_lib.ModelParams,
    train_params: TrainParams,
    hardware: hardware_lib.HardwareConfig,
    head: Optional[model_lib.Head] = None,
    inputs: Optional[Sequence[model_lib.ModelInput]] = None,
    train_steps: int = 0,
) -> keras.Model:
    """The compiled model, its variables placed by `strategy`, in the current dtype policy."""
    skip_autograph_for_tf_keras()
    keras.utils.set_random_seed(train_params.seed)
    with strategy.scope():
        return model_lib.build_model(
            config,
            num_tokens,
            model_params,
            grad_accum_steps=train_params.grad_accum_steps,
            steps_per_execution=hardware.steps_per_execution,
            jit_compile=hardware.xla,
            head=head,
            inputs=inputs,
            train_steps=train_steps,
            recompute=hardware.recompute,
        )


def train(
    config: features_lib.FeatureConfig,
    tf_transform_output: tft.TFTransformOutput,
    train_files: Iterable[str],
    eval_files: Iterable[str],
    train_steps: Optional[int],
    eval_steps: int,
    model_params: model_lib.ModelParams,
    train_params: TrainParams,
    log_dir: str,
    hardware: hardware_lib.HardwareConfig = hardware_lib.HardwareConfig(),
    strategy: Optional[tf.distribute.Strategy] = None,
    backup_dir: Optional[str] = None,
    extra_callbacks: Sequence[keras.callbacks.Callback] = (),
    raw_examples: bool = False,
    eval_rows: Optional[int] = None,
    checkpoint: Optional[checkpoints.Checkpoint] = None,
    train_rows: Optional[int] = None,
):
    """Builds and fits the model, in the current dtype policy; returns (model, history, info).

    The files hold Transform's output, or with `raw_examples` ExampleGen's examples, transformed as they are
    read: then only the rows training reads are transformed, not every row of every split. `eval_rows`, the
    eval split's recorded size, spares a counting pass over it; `train_rows`, the training split's, sets the
    steps of `train_params.train_epochs` when `train_steps` is None. `info["class_names"]` holds a multi-class
    model's classes in index order. Without roles in the feature config, the inputs are the transformed
    features of a user's preprocessing_fn (`transformed_inputs`). `checkpoint` (a local one): the text
    encoders start from its weights, and take its architecture and word embeddings' rows."""
    strategy = strategy or hardware_lib.make_strategy()
    train_files = list(train_files)
    head, names_ = make_head(config, tf_transform_output, train_files, raw_examples)
    inputs = (
        model_lib.inputs_of(config, id_ranges(tf_transform_output, config))
        if config.feature_columns
        else transformed_inputs(tf_transform_output, config.label.name)
    )
    if checkpoint is not None:
        # The word embeddings keep every row of the checkpoint's (a vocab.txt may list fewer word pieces).
        inputs = [dataclasses.replace(i, tokens=checkpoint.vocab_size) if i.kind == "text" else i for i in inputs]
        if not model_params.pretrained:
            model_params = dataclasses.replace(model_params, pretrained=checkpoint.to_dict())
    batch = train_params.effective_batch(strategy.num_replicas_in_sync)
    if train_steps is None and train_params.train_epochs and train_rows is None:
        train_rows = count_rows(train_files)
    train_steps, steps_from = steps_for(train_steps, train_params.train_epochs, train_rows, batch)
    plan = schedule(train_steps, train_params.eval_every_steps)
    # A text input's tokens the model reads (a tuning trial's sequence_length may be fewer than the graph's).
    tokens_read = model_params.tokens_read(config.sequence_length) if config.text else 0
    model = build(
        strategy,
        config,
        {},
        model_params,
        train_params,
        hardware,
        head=head,
        inputs=inputs,
        train_steps=plan["epochs"] * plan["steps_per_epoch"],
    )
    warm = {}
    if checkpoint is not None:
        warm = {**fine_tuning_record(model_params, checkpoint), **warm_start_encoder(model, checkpoint, inputs)}
    transform = None
    if raw_examples:
        spec = tf_transform_output.raw_feature_spec()
        # Built in float32 whatever the policy: the graph takes float32 inputs (float16 coordinates would move
        # by 0.03 degrees), and TFTransformOutput hands the same layer to the export.
        text.load_ops_for(tf_transform_output.transform_savedmodel_dir)  # a text column's graph tokenizes
        with hardware_lib.precision_policy("float32"):
            transform = tf_transform_output.transform_features_layer()
    else:
        spec = tf_transform_output.transformed_feature_spec()
    workers = cluster_lib.worker_count(os.environ)
    label_fn = None
    if config.task == tasks.REGRESSION:
        label_fn = lambda y: export.label_forward(config.label, tf.cast(y, tf.float32))  # noqa: E731 (one use)
    dtypes = model_lib.model_input_dtypes(inputs)
    text_masks = [(i.name, i.mask) for i in inputs if i.kind == "text"]
    datasets = [
        make_dataset(
            files,
            spec,
            config.label.name,
            model.input_names,
            train_params,
            training,
            batch,
            workers,
            transform,
            label_fn=label_fn,
            input_dtypes=dtypes,
            text_masks=text_masks,
            sequence_length=config.sequence_length if text_masks else 0,
        )
        for files, training in ((train_files, True), (eval_files, False))
    ]
    train_ds, eval_ds = datasets
    if not eval_steps and eval_rows is not None:
        # Several workers drop the eval split's last partial batch (input_pipeline.make_dataset).
        rounded = eval_rows // batch if workers > 1 else math.ceil(eval_rows / batch)
        eval_steps = max(1, min(train_params.max_eval_batches, rounded))
    if not eval_steps and workers > 1:  # the eval split repeats across workers: count its rows
        eval_steps = max(1, min(train_params.max_eval_batches, count_rows(eval_files) // batch))
    if not eval_steps:
        # One pass over the eval split, capped: on large data a full pass per epoch would cost more than the
        # training steps. Keras also needs an explicit count with steps_per_execution > 1.
        eval_steps = int(eval_ds.take(train_params.max_eval_batches).reduce(0, lambda count, _: count + 1))
    replicas = strategy.num_replicas_in_sync
    info = hardware_lib.describe(strategy, hardware)
    info.update(
        task=config.task,
        inputs=len(inputs),
        preset=model_params.preset or ("" if checkpoint is not None else presets.DEFAULT_PRESET),
        parameters=int(model.count_params()),
        optimizer=model_params.optimizer_name,
        learning_rate=model_params.learning_rate,
        dropout=model_params.dropout,
        **(
            {
                "attention_dropout": model_params.dropout
                if model_params.attention_dropout is None
                else model_params.attention_dropout
            }
            if model_params.encoder is not None
            else {}
        ),
        head_dropout=model_params.head_dropout,
        clip_norm=model_params.clip_norm,
        **({"adam_epsilon": model_params.adam_epsilon} if model_params.adam_epsilon is not None else {}),
        **(
            {"weight_decay": model_params.weight_decay, "warmup_share": model_params.warmup_share}
            if model_params.optimizer_name == "adamw"
            else {}
        ),
        **(
            {
                "text_columns": list(config.text),
                "sequence_length": config.sequence_length,
                **({"tokens_read": tokens_read} if tokens_read != config.sequence_length else {}),
                "text_vocabulary": {i.name: i.tokens for i in inputs if i.kind == "text"},
                "length_widths": list(fed_widths(config.sequence_length, train_params.length_buckets, workers)),
            }
            if config.text
            else {}
        ),
        **({"class_names": names_} if names_ else {}),
        **(
            {"target_mean": head.label_mean, "target_std": head.label_std, "label_transform": config.label.transform}
            if config.task == tasks.REGRESSION
            else {}
        ),
        input_sharding=("one worker" if workers == 1 else shard_policy(len(list_files(train_files)), workers).name),
        per_replica_batch=train_params.batch_size,
        gradient_accumulation_steps=train_params.grad_accum_steps,
        global_batch=train_params.global_batch(replicas),
        effective_batch=batch,
        train_steps=plan["epochs"] * plan["steps_per_epoch"],
        train_steps_from=steps_from,
        **({"train_rows": train_rows} if train_rows else {}),
        **plan,
        backup_dir=backup_dir,
        **warm,
    )
    logging.info("Trainer: %s", json.dumps(info))
    history = model.fit(
        train_ds,
        validation_data=eval_ds,
        validation_steps=eval_steps or None,
        callbacks=make_callbacks(
            log_dir,
            backup_dir,
            train_params.early_stopping_patience,
            extra_callbacks,
            throughput=Throughput(batch, plan["steps_per_epoch"], tokens_read),
            profile_steps=profile_executions(train_params.profile_steps, hardware.steps_per_execution),
        ),
        verbose=0,
        **plan,
    )
    info["epochs_run"] = len(history.history.get("loss", []))
    trained = history.history.get("examples_per_s")
    if trained:
        # The last epoch's speed against the input's own, read the way training read it (cached by then).
        info["input_examples_per_s"] = input_speed(train_ds, batch, batches=min(20, plan["steps_per_epoch"]))
        info["input_bound"] = input_bound(info["input_examples_per_s"], trained[-1])
    # BackupAndRestore starts a resumed fit at the epoch after its last backup; 0 for a fresh one.
    info["resumed_from_epoch"] = history.epoch[0] if history.epoch else plan["epochs"]
    if info["resumed_from_epoch"]:
        logging.info("Trainer resumed from its backup at epoch %d of %d", info["resumed_from_epoch"], plan["epochs"])
    return model, history, info
