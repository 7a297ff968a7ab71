"""The Trainer on a real (small) tf.Transform output: strategies, precision, export, resume, accumulation."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import checkpoints, export
from tfxflow.components.model import keras_model as model_lib
from tfxflow.components.training import callbacks as callbacks_lib
from tfxflow.components.training import fit, hardware, input_pipeline, pretrained
from tfxflow.components.training.train_params import TrainParams

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SMALL = model_lib.ModelParams(hidden_units=(16,), learning_rate=0.01)


def _train(tiny, tmp_path, steps=40, **kwargs):
    params = kwargs.pop("train_params", TrainParams(batch_size=32, eval_every_steps=10, early_stopping_patience=0))
    return fit.train(
        tiny["config"],
        tiny["output"],
        tiny["train"],
        tiny["eval"],
        train_steps=steps,
        eval_steps=0,
        model_params=kwargs.pop("model_params", SMALL),
        train_params=params,
        log_dir=str(tmp_path / "logs"),
        **kwargs,
    )


def test_trains_on_transform_output_and_reports_what_it_used(tiny_transform, tmp_path):
    model, history, info = _train(tiny_transform, tmp_path)
    assert history.history["val_binary_accuracy"][-1] > 0.75
    assert info["replicas"] == 1 and info["global_batch"] == 32 and info["precision_policy"] == "float32"
    # On one CPU device TensorFlow's default strategy (MirroredStrategy over two logical CPUs: the tests below);
    # over the GPUs where there are some.
    if tf.config.list_logical_devices("GPU"):
        assert info["strategy"] == "MirroredStrategy"
    else:
        assert info["strategy"] == "default" and info["devices"] == ["/device:CPU:0"]
    assert info["xla"] is False
    assert info["train_steps"] == 40 and info["epochs_run"] == 4 and info["resumed_from_epoch"] == 0
    assert os.listdir(tmp_path / "logs")  # TensorBoard event files


def test_raw_examples_transformed_as_read_give_the_transformed_examples(tiny_transform):
    tiny, params = tiny_transform, TrainParams(batch_size=64)
    names = ["x1_xf", "x2_xf", "city_xf", "score_xf"]
    transformed = input_pipeline.make_dataset(
        tiny["eval"], tiny["output"].transformed_feature_spec(), "label", names, params, False, 64
    )
    raw = input_pipeline.make_dataset(
        tiny["raw_eval"],
        tiny["output"].raw_feature_spec(),
        "label",
        names,
        params,
        False,
        64,
        transform=tiny["output"].transform_features_layer(),
    )
    batches = 0
    for (want, want_label), (got, got_label) in zip(transformed, raw, strict=True):
        np.testing.assert_array_equal(got_label.numpy(), want_label.numpy())
        for name in names:
            np.testing.assert_allclose(np.asarray(got[name]), np.asarray(want[name]), rtol=1e-6)
        batches += 1
    assert batches == 4  # 256 eval rows


def test_trains_on_raw_examples_with_the_eval_size_given(tiny_transform, tmp_path):
    tiny = dict(tiny_transform, train=tiny_transform["raw_train"], eval=tiny_transform["raw_eval"])
    model, history, info = _train(tiny, tmp_path, raw_examples=True, eval_rows=256)
    assert history.history["val_binary_accuracy"][-1] > 0.75
    assert info["epochs_run"] == 4


def test_raw_examples_are_transformed_in_float32_under_mixed_precision(tiny_transform, tmp_path):
    import tensorflow_transform as tft

    # A fresh TFTransformOutput: it caches its layer, and the export reuses the one training built.
    output = tft.TFTransformOutput(os.path.join(tiny_transform["dir"], "transform_graph"))
    tiny = dict(tiny_transform, output=output, train=tiny_transform["raw_train"], eval=tiny_transform["raw_eval"])
    with hardware.precision_policy("mixed_bfloat16"):
        model, history, _ = _train(tiny, tmp_path, raw_examples=True, eval_rows=256)
        assert output.transform_features_layer().dtype_policy.name == "float32"
    assert history.history["val_binary_accuracy"][-1] > 0.75


def test_warmup_requests_replay_real_rows_through_both_signatures(tiny_transform, tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    model, _, _ = _train(tiny_transform, tmp_path)
    export_dir = str(tmp_path / "export")
    export.export_serving_model(model, tiny_transform["output"], tiny_transform["config"], export_dir)
    rows, complete = export.sample_rows(tiny_transform["raw_eval"], tiny_transform["config"].feature_columns)
    assert len(rows) == 8 and all(complete)
    assert export.write_warmup_requests(export_dir, rows, tiny_transform["output"], tiny_transform["config"]) == 4
    loaded = tf.saved_model.load(export_dir)
    replies = {}
    for record in tf.data.TFRecordDataset(os.path.join(export_dir, export.WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
        out = loaded.signatures[request.model_spec.signature_name](**inputs)["probabilities"].numpy()
        assert out.shape == (len(next(iter(inputs.values()))), 1) and ((0 <= out) & (out <= 1)).all()
        replies[(request.model_spec.signature_name, out.shape[0])] = out
    assert set(replies) == {("serving_default", 1), ("serving_raw", 1), ("serving_default", 8), ("serving_raw", 8)}
    # The same rows through either signature: the same probabilities.
    np.testing.assert_allclose(replies[("serving_raw", 8)], replies[("serving_default", 8)], rtol=1e-5)


def test_the_export_tracks_the_transform_graph_where_tfts_own_layer_does(tiny_transform):
    layer = tiny_transform["output"].transform_features_layer()
    # The pinned TFT keeps the loaded graph (tables, vocabulary assets) in this dict for tracking; without it the
    # export would fall back to saving TFT's Keras layer, the slower way.
    tracked = getattr(layer, export.TRANSFORM_TRACKED)
    assert isinstance(tracked, dict) and tracked
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    module = export.serving_module(model, layer)
    assert not isinstance(module.transform_graph, keras.layers.Layer)
    assert sorted(module.transform_graph) == sorted(tracked)
    assert [v.name for v in module.model_variables] == [v.name for v in model.variables]


def test_mixed_bfloat16_computes_in_bfloat16_and_exports_float32_signatures(tiny_transform, tmp_path):
    with hardware.precision_policy("mixed_bfloat16"):
        model, history, info = _train(tiny_transform, tmp_path)
    assert info["precision_policy"] == "mixed_bfloat16"
    assert keras.mixed_precision.global_policy().name == "float32"  # reset after training
    hidden = model.get_layer("deep_0")
    assert hidden.compute_dtype == "bfloat16" and hidden.variable_dtype == "float32"
    assert model.get_layer("probability").compute_dtype == "float32"
    assert model.output.dtype == tf.float32
    assert np.isfinite(history.history["loss"][-1])

    export_dir = str(tmp_path / "export")
    export.export_serving_model(model, tiny_transform["output"], tiny_transform["config"], export_dir)
    loaded = tf.saved_model.load(export_dir)
    assert set(loaded.signatures) == {"serving_default", "serving_raw", "transform_features"}
    raw = loaded.signatures["serving_raw"]
    inputs = raw.structured_input_signature[1]
    assert inputs["x1"].dtype == tf.float32 and inputs["score"].dtype == tf.float32
    assert inputs["city"].dtype == tf.string
    out = raw(
        x1=tf.constant([1.5, -1.5]),
        x2=tf.constant([0.0, 0.0]),
        city=tf.constant(["a", "c"]),
        score=tf.constant([0.5, 0.5]),
    )["probabilities"]
    assert out.dtype == tf.float32 and out.shape == (2, 1)
    assert out.numpy()[0, 0] > out.numpy()[1, 0]  # learnt: x1 and city a push the label up

    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "x1": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5])),
                "x2": tf.train.Feature(float_list=tf.train.FloatList(value=[0.0])),
                "city": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a"])),
                "score": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5])),
            }
        )
    ).SerializeToString()
    served = loaded.signatures["serving_default"](examples=tf.constant([example]))["probabilities"]
    assert served.dtype == tf.float32
    np.testing.assert_allclose(served.numpy()[0], out.numpy()[0], rtol=1e-5)
    transformed = loaded.signatures["transform_features"](examples=tf.constant([example]))
    assert transformed["x1_xf"].dtype == tf.float32


class _FailAfterEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("pre-empted")


class _EpochRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def test_a_stopped_trainer_resumes_from_its_backup(tiny_transform, tmp_path):
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="pre-empted"):
        _train(tiny_transform, tmp_path, steps=50, backup_dir=backup, extra_callbacks=[_FailAfterEpoch(1)])
    assert os.listdir(backup)  # epochs 0 and 1 were backed up

    recorder = _EpochRecorder()
    _, history, info = _train(tiny_transform, tmp_path, steps=50, backup_dir=backup, extra_callbacks=[recorder])
    assert recorder.epochs == [2, 3, 4]  # resumed after the two finished epochs, not from 0
    assert info["epochs_run"] == 3 and info["resumed_from_epoch"] == 2
    assert not os.path.exists(backup) or not os.listdir(backup)  # removed once training completed


def test_backup_folder_is_keyed_by_what_training_depends_on(tmp_path):
    a = callbacks_lib.backup_dir_for(str(tmp_path), {"train_files": ["x"], "steps": 10})
    assert a == callbacks_lib.backup_dir_for(str(tmp_path), {"steps": 10, "train_files": ["x"]})
    assert a != callbacks_lib.backup_dir_for(str(tmp_path), {"train_files": ["x"], "steps": 11})
    assert callbacks_lib.backup_dir_for(None, {"steps": 10}) is None


class _WeightsRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append([w.copy() for w in self.model.get_weights()])


def test_early_stopping_stops_when_validation_loss_stalls_and_keeps_the_best_epochs_weights(tiny_transform, tmp_path):
    import numpy as np

    params = TrainParams(batch_size=32, eval_every_steps=2, early_stopping_patience=1)
    recorder = _WeightsRecorder()
    model, history, info = _train(
        tiny_transform,
        tmp_path,
        steps=400,
        train_params=params,
        model_params=model_lib.ModelParams(hidden_units=(64, 64), learning_rate=0.05),
        extra_callbacks=[recorder],
    )
    assert info["epochs"] == 200 and info["epochs_run"] < 200
    # The monitored quantity is the validation loss: training stops one epoch (the patience) after its lowest.
    losses = history.history["val_loss"]
    best = int(np.argmin(losses))
    assert info["epochs_run"] == len(losses) == best + 2
    # The model handed on holds the weights of that epoch, not the last one's.
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), recorder.weights[best], strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), recorder.weights[-1], strict=True))


def _accumulation_matches_one_whole_batch_step(tiny, params, rtol):
    """Trains one batch of 64 as 4 accumulated micro-batches of 16 and as one step: the same weights, moved.
    Returns the batch's features."""
    tokens = fit.id_ranges(tiny["output"], tiny["config"])
    accumulating = model_lib.build_model(tiny["config"], tokens, params, grad_accum_steps=4)
    plain = model_lib.build_model(tiny["config"], tokens, params)
    plain.set_weights(accumulating.get_weights())
    before = [w.copy() for w in plain.get_weights()]
    dataset = input_pipeline.make_dataset(
        tiny["train"],
        tiny["output"].transformed_feature_spec(),
        "label",
        plain.input_names,
        TrainParams(batch_size=64),
        True,
        64,
        input_dtypes=model_lib.model_input_dtypes(model_lib.inputs_of(tiny["config"], tokens)),
    )
    features, labels = next(iter(dataset))
    accumulating.train_on_batch(features, labels)  # 4 micro-batches of 16, one update
    plain.train_on_batch(features, labels)  # one batch of 64
    moved = 0.0
    for w_acc, w_plain, w0 in zip(accumulating.get_weights(), plain.get_weights(), before, strict=True):
        np.testing.assert_allclose(w_acc, w_plain, rtol=rtol, atol=1e-6)
        moved = max(moved, float(np.abs(w_plain - w0).max()))
    assert moved > 1e-3  # the step did change the weights
    return features


def test_gradient_accumulation_matches_one_step_on_the_whole_batch(tiny_transform):
    params = model_lib.ModelParams(hidden_units=(16,), learning_rate=0.1, optimizer="sgd")
    _accumulation_matches_one_whole_batch_step(tiny_transform, params, rtol=1e-4)


def test_large_preset_sizes_are_multiples_of_eight(tiny_transform):
    params = model_lib.ModelParams(preset="large")
    assert all(u % 8 == 0 for u in params.units) and params.units[0] >= 1024
    model = model_lib.build_model(
        tiny_transform["config"], fit.id_ranges(tiny_transform["output"], tiny_transform["config"]), params
    )
    assert model.get_layer("city_xf_embedding").output_dim % 8 == 0


def _worker(scenario, tiny, log_dir, env=None, task=None, grad_accum_steps=1):
    extra = [task, str(grad_accum_steps)] if task else []
    return subprocess.Popen(
        [sys.executable, "-m", "tests.components.distributed_worker", scenario, tiny["dir"], log_dir, *extra],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
    )


def _result(process, timeout=600):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_mirrored_strategy_over_two_logical_cpus(tiny_transform, tmp_path):
    result = _result(_worker("mirrored-cpus", tiny_transform, str(tmp_path / "logs")))
    assert result["devices_applied"] is True
    assert result["strategy"] == "MirroredStrategy" and result["replicas"] == 2
    assert result["global_batch"] == 64 and result["per_replica_batches"] == [32, 32]
    assert result["finite"] and result["losses"][-1] < result["losses"][0]


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_two_workers_train_together_with_tf_config(tiny_transform, tmp_path):
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(
            _worker(
                "multi-worker", tiny_transform, str(tmp_path / f"logs{index}"), env={"TF_CONFIG": json.dumps(tf_config)}
            )
        )
    results = [_result(p) for p in processes]
    for result in results:
        assert result["strategy"] == "MultiWorkerMirroredStrategy" and result["replicas"] == 2
        assert result["global_batch"] == 64 and result["per_replica_batches"] == [32]
        assert result["finite"]
    # Synchronous training: both workers see the same all-reduced model, hence the same loss curve.
    np.testing.assert_allclose(results[0]["losses"], results[1]["losses"], rtol=1e-4)


def test_steps_come_from_the_step_count_or_from_epochs_of_the_training_split():
    assert fit.steps_for(120, 3, 1000, 32) == (120, "given")
    assert fit.steps_for(None, 3, 1000, 32) == (96, "3 epochs of 1,000 training rows in batches of 32")
    assert fit.steps_for(None, 1, 10, 32) == (1, "1 epochs of 10 training rows in batches of 32")
    assert fit.steps_for(None, None, 1000, 32) == (300, "the default")


def test_the_warm_start_gives_the_checkpoints_arrays_back_to_the_system_once_they_are_in_the_model(
    tmp_path, monkeypatch
):
    import weakref

    from tests.components.model.test_warm_start import (
        bert_checkpoint_values,
        encoder_model,
        write_name_based_checkpoint,
    )

    folder = tmp_path / "uncased_L-2_H-128_A-2"
    folder.mkdir()
    values = bert_checkpoint_values(2, 128, 20)
    prefix = write_name_based_checkpoint(str(folder / "bert_model.ckpt"), values)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(16)]))
    read, alive_when_given_back, original = [], [], checkpoints.weights

    def weights(checkpoint):
        arrays = original(checkpoint)
        read.extend(weakref.ref(a) for a in arrays.values())
        return arrays

    monkeypatch.setattr(pretrained.checkpoints, "weights", weights)
    monkeypatch.setattr(
        pretrained.memory,
        "give_back_free_memory",
        lambda: alive_when_given_back.append(sum(r() is not None for r in read)),
    )
    model = encoder_model("bert-tiny", 20)
    warm = pretrained.warm_start_encoder(model, checkpoints.locate(prefix), [model_lib.ModelInput("text_xf", "text")])
    assert warm["init_checkpoint_values"] == model.count_params() and len(read) > 20
    assert alive_when_given_back == [0]  # every array read was freed before the heap was trimmed, once
    (tokens,) = [v for v in model.weights if v.name == "text_xf_tokens/embeddings:0"]
    np.testing.assert_array_equal(tokens.numpy(), values["bert/embeddings/word_embeddings"])  # in the model


def test_a_checkpoint_that_changed_since_the_run_was_configured_is_refused(tmp_path):
    from tests.components.model.test_warm_start import bert_checkpoint_values, write_name_based_checkpoint

    folder = tmp_path / "uncased_L-2_H-128_A-2"
    folder.mkdir()
    prefix = write_name_based_checkpoint(str(folder / "bert_model.ckpt"), bert_checkpoint_values(2, 128, 20))
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(16)]))
    configured = checkpoints.locate(prefix)
    params = model_lib.ModelParams(init_checkpoint=prefix, pretrained=configured.to_dict())
    assert pretrained.pretrained_checkpoint(params, str(tmp_path / "scratch")) == configured  # read in place
    time.sleep(0.01)  # a later modification time, whatever the file system's resolution
    write_name_based_checkpoint(prefix, bert_checkpoint_values(4, 128, 20))  # replaced by a larger one
    with pytest.raises(checkpoints.CheckpointError, match=r"its files changed since the run was configured"):
        pretrained.pretrained_checkpoint(params, str(tmp_path / "scratch"))
    # Located anew (a compiled spec of an earlier version carries no description): the new one, whole.
    again = pretrained.pretrained_checkpoint(model_lib.ModelParams(init_checkpoint=prefix), str(tmp_path / "s2"))
    assert again.encoder.layers == 4


def test_backup_on_an_object_store_is_restored_and_mirrored_each_epoch(s3_server, monkeypatch, tmp_path):
    """TF cannot write s3:// or minio://: BackupAndRestore writes a local folder that is restored from the store
    before fitting and copied back after every epoch, so a retried Trainer pod resumes."""
    from tfxflow.components import object_store
    from tfxflow.components.training.callbacks import BackupMirror, local_backup

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    bucket = s3_server.create_bucket("trainer-backup")
    remote = f"minio://{bucket}/root/_trainer_backup/abc"
    object_store.write_bytes(f"{remote}/chief/checkpoint", b"epoch 3")
    local, callbacks = local_backup(remote, str(tmp_path))
    assert (
        local == str(tmp_path / "backup") and (tmp_path / "backup" / "chief" / "checkpoint").read_bytes() == b"epoch 3"
    )
    (mirror,) = callbacks
    assert isinstance(mirror, BackupMirror)
    (tmp_path / "backup" / "chief" / "checkpoint").write_bytes(b"epoch 4")
    (tmp_path / "backup" / "chief" / "ckpt-4.index").write_bytes(b"index 4")
    object_store.write_bytes(f"{remote}/chief/ckpt-3.index", b"index 3")  # the epoch before, gone locally
    mirror.on_epoch_end(4)
    assert object_store.read_bytes(f"{remote}/chief/checkpoint") == b"epoch 4"
    assert object_store.list_files(remote) == ["chief/checkpoint", "chief/ckpt-4.index"]
    assert local_backup(str(tmp_path / "mounted"), str(tmp_path)) == (str(tmp_path / "mounted"), [])
    assert local_backup(None, str(tmp_path)) == (None, [])
    object_store.clear_client_cache()


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_mirrored_strategy_trains_each_task_with_accumulated_gradients(task_transforms, task, tmp_path):
    from tfxflow.components.model import tasks

    result = _result(
        _worker("mirrored-cpus", task_transforms[task], str(tmp_path / "logs"), task=task, grad_accum_steps=2)
    )
    assert result["strategy"] == "MirroredStrategy" and result["replicas"] == 2
    # 32 per replica x 2 replicas x 2 micro-batches per update: each replica gets 64 rows a step.
    assert result["global_batch"] == 64 and result["per_replica_batches"] == [64, 64]
    assert result["finite"] and result["losses"][-1] < result["losses"][0]
    names = tasks.spec(task).training_metrics
    model_metrics = [m for m in result["metrics"] if m not in callbacks_lib.TELEMETRY]
    assert model_metrics == sorted([*names, *(f"val_{n}" for n in names)])
    assert {"step_ms", "examples_per_s"} <= set(result["metrics"])  # each epoch's speed beside them


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_each_task_trains_in_bfloat16_with_a_float32_head_and_float32_signatures(task_transforms, task, tmp_path):
    tiny = task_transforms[task]
    params = TrainParams(batch_size=32, eval_every_steps=10, early_stopping_patience=0, grad_accum_steps=2)
    with hardware.precision_policy("mixed_bfloat16"):
        model, history, info = _train(
            dict(tiny, train=tiny["raw_train"], eval=tiny["raw_eval"]), tmp_path, raw_examples=True, train_params=params
        )
    assert keras.mixed_precision.global_policy().name == "float32"
    assert model.get_layer("deep_0").compute_dtype == "bfloat16"
    head = "scores" if task == "multiclass" else "prediction"
    assert model.get_layer(head).compute_dtype == "float32" and model.output.dtype == tf.float32
    assert np.isfinite(history.history["loss"]).all() and history.history["loss"][-1] < history.history["loss"][0]
    export_dir = str(tmp_path / "export")
    export.export_serving_model(model, tiny["output"], tiny["config"], export_dir, info.get("class_names", ()))
    loaded = tf.saved_model.load(export_dir)
    for name in ("serving_default", "serving_raw"):
        outputs = loaded.signatures[name].structured_outputs
        if task == "multiclass":
            assert outputs["scores"].dtype == tf.float32 and outputs["classes"].dtype == tf.string
            assert info["class_names"] == ["low", "mid", "high"]
        else:
            assert outputs["predictions"].dtype == tf.float32
            # the linear head starts on the target's scale: its mean and spread from the training rows
            assert 20 < info["target_mean"] < 25 and 3 < info["target_std"] < 6


def test_a_log1p_regression_answers_in_the_labels_own_units(task_transforms, tmp_path):
    from tfxflow.components.model.features import FeatureConfig

    tiny = task_transforms["regression"]
    data = tiny["config"].to_dict()
    data["label"]["transform"] = "log1p"
    config = FeatureConfig.from_dict(data)
    model, _, info = _train(
        dict(tiny, config=config, train=tiny["raw_train"], eval=tiny["raw_eval"]), tmp_path, raw_examples=True, steps=80
    )
    assert info["label_transform"] == "log1p" and 3.0 < info["target_mean"] < 3.3  # log(1 + about 22.5)
    export_dir = str(tmp_path / "export")
    export.export_serving_model(model, tiny["output"], config, export_dir)
    rows, _ = export.sample_rows(tiny["raw_eval"], config.feature_columns, 64)
    loaded = tf.saved_model.load(export_dir)
    predictions = loaded.signatures["serving_default"](examples=tf.constant(rows))["predictions"].numpy()[:, 0]
    labels = loaded.signatures["transform_features"](examples=tf.constant(rows))["label"].numpy()
    assert abs(predictions.mean() - labels.mean()) < 1.5 and np.corrcoef(predictions, labels)[0, 1] > 0.9


def _analyzed(folder, preprocessing_fn):
    """The TFTransformOutput of `preprocessing_fn` analyzed on 30 small rows."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam

    spec = {
        "x": tf.io.FixedLenFeature([], tf.float32),
        "hour": tf.io.FixedLenFeature([], tf.int64),
        "city": tf.io.FixedLenFeature([], tf.string),
        "y": tf.io.FixedLenFeature([], tf.int64),
    }
    rows = [{"x": float(i), "hour": i % 24, "city": [b"a", b"b", b"c"][i % 3], "y": i % 2} for i in range(30)]
    with tft_beam.Context(temp_dir=str(folder / "tmp")):
        transform_fn = (rows, tft.DatasetMetadata.from_feature_spec(spec)) | tft_beam.AnalyzeDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(folder / "graph"))
    return tft.TFTransformOutput(str(folder / "graph"))


@pytest.mark.integration
def test_the_inputs_of_a_modules_transformed_features(tmp_path):
    """A module's preprocessing_fn, the built-in model: ids with a vocabulary are categories, floats and other
    integers numbers; text is refused naming the feature."""
    import tensorflow_transform as tft

    from tfxflow.components.errors import UserCodeError

    def preprocessing_fn(inputs):
        return {
            "label_xf": inputs["y"],
            "x_xf": tft.scale_to_z_score(inputs["x"]),
            "hour_xf": inputs["hour"],  # an integer with no id range
            "city_xf": tft.compute_and_apply_vocabulary(inputs["city"], num_oov_buckets=2),
        }

    found = fit.transformed_inputs(_analyzed(tmp_path / "numbers", preprocessing_fn), "label_xf")
    assert [(i.name, i.kind, i.tokens) for i in found] == [
        ("city_xf", "categorical", 5),  # 3 cities + 2 OOV buckets
        ("hour_xf", "numeric", 0),
        ("x_xf", "numeric", 0),
    ]
    with_text = _analyzed(tmp_path / "text", lambda inputs: {**preprocessing_fn(inputs), "city_text": inputs["city"]})
    with pytest.raises(UserCodeError, match="makes 'city_text' as text; the built-in model takes numbers"):
        fit.transformed_inputs(with_text, "label_xf")


def test_each_epoch_records_its_speed_and_a_profile_of_the_steps_asked_for(tmp_path):
    import glob

    import numpy as np

    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((64, 4), np.float32), np.ones((64, 1), np.float32)
    throughput = callbacks_lib.Throughput(examples_per_step=8, steps_per_epoch=4, sequence_length=16)
    callbacks = callbacks_lib.make_callbacks(str(tmp_path), None, 0, throughput=throughput, profile_steps=(2, 3))
    assert callbacks[0] is throughput  # first: TensorBoard and the history see what it adds
    history = model.fit(
        x, y, batch_size=8, steps_per_epoch=4, epochs=2, validation_data=(x, y), verbose=0, callbacks=callbacks
    )
    logged = history.history
    assert len(logged["examples_per_s"]) == 2 and all(v > 0 for v in logged["examples_per_s"])
    for epoch in range(2):
        assert logged["examples_per_s"][epoch] == pytest.approx(8 * 4 / (logged["step_ms"][epoch] * 4 / 1000))
        assert logged["tokens_per_s"][epoch] == pytest.approx(16 * logged["examples_per_s"][epoch])
    assert glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))  # TensorBoard opens it


def test_profiled_steps_are_the_train_function_calls_that_hold_them():
    assert callbacks_lib.profile_executions((10, 15), 20) == (1, 1)
    assert callbacks_lib.profile_executions((30, 70), 20) == (2, 4)
    assert callbacks_lib.profile_executions((3, 4), 1) == (3, 4)
    assert callbacks_lib.profile_executions((0, 0), 20) == (0, 0)


BERT_TINY = model_lib.ModelParams(preset="bert-tiny", learning_rate=1e-3)


def _encoder_weights(model):
    return {v.name: v.numpy() for v in model.variables if v.name.startswith("words_xf_")}


def test_a_text_encoder_warm_starts_from_a_pushed_model_of_the_same_vocabulary(text_transform, tmp_path):
    tiny = text_transform
    first, _, _ = _train(tiny, tmp_path / "first", steps=20, model_params=BERT_TINY)
    pushed = str(tmp_path / "pushed")
    export.export_serving_model(first, tiny["output"], tiny["config"], pushed)
    # A learning rate of 0: the weights training starts from are the weights it ends with.
    frozen = model_lib.ModelParams(preset="bert-tiny", learning_rate=0.0, init_checkpoint=pushed)
    found = checkpoints.locate(pushed)
    second, _, info = _train(tiny, tmp_path / "second", steps=2, model_params=frozen, checkpoint=found)
    assert info["init_checkpoint_kind"] == "saved_model" and info["encoder_layers"] == 2
    expected = _encoder_weights(first)
    assert info["init_checkpoint_values"] == sum(w.size for w in expected.values()) > 100_000
    got = _encoder_weights(second)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    # The head is the new model's own: not copied.
    assert not np.array_equal(
        second.get_layer("probability").kernel.numpy(), first.get_layer("probability").kernel.numpy()
    )


def test_a_text_model_accumulates_gradients_as_one_step_on_the_whole_batch(text_transform):
    keras.utils.set_random_seed(5)
    params = model_lib.ModelParams(preset="bert-tiny", learning_rate=0.1, optimizer="sgd")
    features = _accumulation_matches_one_whole_batch_step(text_transform, params, rtol=1e-3)
    assert features["words_xf"].shape == features["words_xf_mask"].shape == (64, 16)


def test_a_text_encoder_trains_in_float16_with_loss_scaling_as_in_float32(text_transform, tmp_path):
    params = model_lib.ModelParams(preset="bert-tiny", learning_rate=3e-3)
    schedule = TrainParams(batch_size=32, eval_every_steps=20, early_stopping_patience=0)
    with hardware.precision_policy("mixed_float16"):
        model, history, _ = _train(text_transform, tmp_path / "f16", 40, model_params=params, train_params=schedule)
    assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)
    assert model.optimizer.dynamic and float(model.optimizer.loss_scale) > 1
    block = model.get_layer("words_xf_block_0")
    assert block.compute_dtype == "float16" and block.variable_dtype == "float32"
    assert model.get_layer("probability").compute_dtype == "float32" and model.output.dtype == tf.float32
    _, reference, info = _train(text_transform, tmp_path / "f32", 40, model_params=params, train_params=schedule)
    # A Transformer's step takes far longer than parsing its batch: not input-bound.
    assert info["input_bound"] is False and info["input_examples_per_s"] > 3 * reference.history["examples_per_s"][-1]
    # Scaled float16 gradients train as float32 ones do: no step was skipped or flushed to zero.
    np.testing.assert_allclose(history.history["loss"], reference.history["loss"], rtol=0.02)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["val_binary_accuracy"][-1] > 0.7


def test_a_text_encoder_trains_over_two_mirrored_cpus_with_accumulated_gradients(text_transform, tmp_path):
    result = _result(_worker("mirrored-cpus", text_transform, str(tmp_path / "logs"), task="text", grad_accum_steps=2))
    assert result["strategy"] == "MirroredStrategy" and result["replicas"] == 2
    assert result["per_replica_batches"] == [64, 64]  # 32 per replica x 2 micro-batches
    assert result["parameters"] > 400_000  # bert-tiny's blocks and pooler
    assert result["finite"] and result["losses"][-1] < result["losses"][0]


def test_training_behind_a_slow_input_pipeline_is_found_input_bound(tiny_transform, tmp_path, monkeypatch):
    make_dataset = fit.make_dataset

    def slow(*args, **kwargs):  # 40 ms a batch before the model sees it: far more than a step of this model
        dataset = make_dataset(*args, **kwargs)

        def delay(features, label):
            return tf.py_function(lambda: time.sleep(0.04) or 0, [], tf.int32), features, label

        return dataset.map(delay).map(lambda _, features, label: (features, label))

    monkeypatch.setattr(fit, "make_dataset", slow)
    _, history, info = _train(tiny_transform, tmp_path, steps=20)
    trained = history.history["examples_per_s"][-1]
    # The input's pace, at most 800 examples/s (batches read ahead during validation make an epoch look faster).
    assert trained > 32 / 0.04 * 0.5 and info["input_examples_per_s"] < 32 / 0.04 * 1.05
    assert info["input_bound"] is True
    from tfxflow.pipeline.local.runner import training_lines

    lines = training_lines({**info, "history": history.history})  # as training_info.json holds it
    assert lines[0].startswith("  training:       default (") and "20 steps of 32 on the CPU, float32" in lines[0]
    assert (
        "input-bound: the input pipeline alone delivers" in lines[2] and "the input pipeline set the pace" in lines[2]
    )


def test_gpu_utilization_is_not_sampled_without_nvidias_library():
    sampler = hardware.GpuUtilization(library="libnvidia-ml-absent.so.1")
    assert sampler.available is False
    sampler.start()
    sampler.stop()
    sampler.close()
    assert sampler.mean() is None


@pytest.mark.parametrize(
    "visible, expected",
    [
        (None, [0, 1, 2, 3]),
        ("2,0", [2, 0]),
        ("", []),
        ("-1", []),
        ("1,7,2", [1]),  # CUDA stops at the first entry that names no GPU
        ("GPU-5e1b0c3a-1f4e-4c61-9d0e-6a1f2b3c4d5e,3", ["GPU-5e1b0c3a-1f4e-4c61-9d0e-6a1f2b3c4d5e", 3]),
    ],
)
def test_gpu_utilization_samples_the_gpus_cuda_makes_visible(monkeypatch, visible, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert hardware.visible_gpus(4) == expected
