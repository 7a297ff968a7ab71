"""Trainer throughput benchmark: this project's Trainer against Google's taxi trainer, on the same data.

    make bench-trainer [ARGS="--presets default --precisions float32"]
    .venv/bin/python -m benchmarks.trainer_throughput [--workdir DIR] [--out FILE]

1. Runs one LocalDagRunner pipeline over the bundled taxi CSV with two Transforms: this project's
   preprocessing_fn (curated schema) and Google's `taxi_utils_native_keras.preprocessing_fn` (inferred schema).
2. Trains Google's `run_fn` (its own 1,000 steps of batch 40) and this project's Trainer for each model preset x
   precision policy x XLA on/off, and measures steady-state examples per second of `fit` (the first epoch,
   which includes tracing, is excluded). With `--gpu`, each on one GPU and on all of them (MirroredStrategy, NCCL)
   and, with two or more GPUs, as two workers on loopback each on half of them (MultiWorkerMirroredStrategy, NCCL);
   `--cpu-workers N` times the multi-worker path where there is no GPU.
3. Scores both exported models the same way: their `serving_default` signature on the raw eval split.

Prints a table and writes JSON with the commit and the machine (benchmarks/results/trainer-<date>.json unless
--out). A benchmark, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

from benchmarks import provenance
from tfxflow.components import names

# Google's module uses tf.keras, which must mean Keras 2 (tf-keras) under TF 2.16. Set before TF loads.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
GOOGLE_MODULE = "tfx.examples.chicago_taxi_pipeline.taxi_utils_native_keras"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prepare(workdir: str) -> Dict[str, Dict[str, str]]:
    """Runs ExampleGen and both Transforms once (cached on later calls); returns artifact URIs."""
    from tfx import v1 as tfx

    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.pipeline.definition import PREPROCESSING_FN
    from tfxflow.pipeline.inputs import bundled_dataset_dir, bundled_taxi_data_root
    from tfxflow.pipeline.reports import run_record as report

    dataset_dir = bundled_dataset_dir("taxi")
    features = FeatureConfig.load(os.path.join(dataset_dir, "features.yaml"))
    example_gen = tfx.components.CsvExampleGen(input_base=bundled_taxi_data_root())
    statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    inferred = tfx.components.SchemaGen(statistics=statistics.outputs["statistics"], infer_feature_shape=True)
    curated = tfx.components.ImportSchemaGen(schema_file=os.path.join(dataset_dir, "schema.pbtxt"))
    ours = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=curated.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        custom_config={"features": features.to_dict()},
    ).with_id("TransformOurs")
    google = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=inferred.outputs["schema"],
        preprocessing_fn=f"{GOOGLE_MODULE}.preprocessing_fn",
    ).with_id("TransformGoogle")
    metadata_path = os.path.join(workdir, "metadata.sqlite")
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="trainer-benchmark",
        pipeline_root=os.path.join(workdir, "root"),
        components=[example_gen, statistics, inferred, curated, ours, google],
        enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path),
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    )
    tfx.orchestration.LocalDagRunner().run(pipeline)
    run = report.read_run(metadata_path, "trainer-benchmark")
    uris = {}
    for name in ("TransformOurs", "TransformGoogle"):
        outputs = run.component(name).outputs
        uris[name] = {"graph": outputs["transform_graph"][0].uri, "examples": outputs["transformed_examples"][0].uri}
    uris["raw"] = {
        "examples": run.component(names.EXAMPLE_GEN).outputs["examples"][0].uri,
        "schema": run.component("SchemaGen").outputs["schema"][0].uri,
    }
    return uris


class _Clock:
    """A Keras callback that times epochs; throughput excludes the first (tracing, cache fill)."""

    def __init__(self):
        import tf_keras as keras

        class Callback(keras.callbacks.Callback):
            def __init__(cb):
                super().__init__()
                cb.epoch_ends: List[float] = []
                cb.start = 0.0

            def on_train_begin(cb, logs=None):
                cb.start = time.perf_counter()

            def on_epoch_end(cb, epoch, logs=None):
                cb.epoch_ends.append(time.perf_counter())

        self.callback = Callback()


def raw_eval_accuracy(export_dir: str, raw_examples_uri: str, output_key: str) -> float:
    """Accuracy of an exported model's serving_default on the raw eval split (label: tips > 20% of fare)."""
    import numpy as np
    import tensorflow as tf

    files = glob.glob(os.path.join(names.split_dir(raw_examples_uri, "eval"), "*"))
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    labels = []
    for record in serialized:
        features = tf.train.Example.FromString(record).features.feature
        tips = features["tips"].float_list.value
        fare = features["fare"].float_list.value
        labels.append(int(bool(tips) and bool(fare) and tips[0] > 0.2 * fare[0]))
    model = tf.saved_model.load(export_dir)
    serve = model.signatures[names.SERVING_SIGNATURE]
    probabilities = []
    for start in range(0, len(serialized), 1024):
        out = serve(examples=tf.constant(serialized[start : start + 1024]))
        probabilities.append(out[output_key].numpy().reshape(-1))
    predicted = (np.concatenate(probabilities) > 0.5).astype(int)
    return float((predicted == np.asarray(labels)).mean())


def bench_google(uris, workdir: str) -> Dict:
    """Google's run_fn as TFX would call it: 1,000 steps of batch 40, 150 eval steps."""
    import importlib

    import tf_keras as keras
    from tfx.components.trainer import fn_args_utils
    from tfx.types import artifact_utils, standard_artifacts

    module = importlib.import_module(GOOGLE_MODULE)
    examples = standard_artifacts.Examples()
    examples.uri = uris["TransformGoogle"]["examples"]
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    graph = standard_artifacts.TransformGraph()
    graph.uri = uris["TransformGoogle"]["graph"]
    schema = standard_artifacts.Schema()
    schema.uri = uris["raw"]["schema"]
    fn_args = fn_args_utils.get_common_fn_args(
        {"examples": [examples], "transform_graph": [graph], "schema": [schema]},
        {"train_args": json.dumps({"num_steps": 1000}), "eval_args": json.dumps({"num_steps": 150})},
        working_dir=os.path.join(workdir, "google_tmp"),
    )
    fn_args.transform_output = fn_args.transform_graph_path  # as TFX's Trainer executor sets it
    fn_args.serving_model_dir = os.path.join(workdir, "google_model")
    fn_args.model_run_dir = os.path.join(workdir, "google_run")

    # Time Google's fit without editing its module: wrap Model.fit for the duration of the call.
    timings = {}
    original_fit = keras.Model.fit

    def timed_fit(self, *args, **kwargs):
        started = time.perf_counter()
        result = original_fit(self, *args, **kwargs)
        timings["fit"] = time.perf_counter() - started
        timings["epochs"] = len(result.history["loss"])
        return result

    keras.Model.fit = timed_fit
    started = time.perf_counter()
    try:
        module.run_fn(fn_args)
    finally:
        keras.Model.fit = original_fit
    total = time.perf_counter() - started
    examples_trained = 1000 * 40
    return {
        "trainer": "google taxi_utils_native_keras",
        "preset": "-",
        "precision": "float32",
        "xla": False,
        "global_batch": 40,
        "steps": 1000,
        "examples_per_s": examples_trained / timings["fit"],
        "fit_s": timings["fit"],
        "run_fn_s": total,
        "eval_accuracy": raw_eval_accuracy(fn_args.serving_model_dir, uris["raw"]["examples"], "outputs"),
    }


def bench_ours(
    uris,
    workdir: str,
    preset: str,
    precision: str,
    xla: bool,
    steps: int,
    batch: int,
    score: bool,
    steps_per_execution: int = 1,
    workers: int = 1,
) -> Dict:
    """This project's Trainer for one configuration; steady-state throughput over epochs 2..n. With `workers` > 1
    this process is one of them (TF_CONFIG, `_in_workers`), as the Trainer's workers train."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from tfxflow.components.model import export
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.components.training import hardware
    from tfxflow.components.training.fit import train
    from tfxflow.components.training.train_params import TrainParams
    from tfxflow.pipeline.inputs import bundled_dataset_dir

    features = FeatureConfig.load(os.path.join(bundled_dataset_dir("taxi"), "features.yaml"))
    output = tft.TFTransformOutput(uris["TransformOurs"]["graph"])
    examples = uris["TransformOurs"]["examples"]
    clock = _Clock()
    epochs = 5
    params = TrainParams(batch_size=batch, eval_every_steps=max(1, steps // epochs), early_stopping_patience=0)
    hw = hardware.HardwareConfig(precision=precision, xla=xla, steps_per_execution=steps_per_execution)
    strategy = None
    if workers > 1:
        from tfxflow.components.training import cluster

        gpus = tf.config.list_physical_devices("GPU")
        config = cluster.ClusterConfig(workers=workers, collective="nccl" if gpus else "ring")
        strategy = cluster.multi_worker_strategy(config, cluster.role())
    started = time.perf_counter()
    with hardware.precision_policy(precision):
        model, history, info = train(
            features,
            output,
            [os.path.join(names.split_dir(examples, "train"), "*")],
            [os.path.join(names.split_dir(examples, "eval"), "*")],
            train_steps=steps,
            eval_steps=0,
            model_params=model_lib.ModelParams(preset=preset),
            train_params=params,
            log_dir=os.path.join(workdir, "tb"),
            hardware=hw,
            extra_callbacks=[clock.callback],
            strategy=strategy,
        )
    wall = time.perf_counter() - started
    ends = clock.callback.epoch_ends
    steady_steps = info["steps_per_epoch"] * (len(ends) - 1)
    steady_s = ends[-1] - ends[0]
    result = {
        "trainer": "tfxflow",
        "preset": preset,
        "precision": precision,
        "xla": xla,
        "steps_per_execution": steps_per_execution,
        "gpus": len(info.get("gpus") or []),
        "workers": workers,
        "replicas": info["replicas"],
        "global_batch": info["global_batch"],
        "steps": info["train_steps"],
        "examples_per_s": steady_steps * info["effective_batch"] / steady_s,
        "fit_s": ends[-1] - clock.callback.start,
        "run_fn_s": wall,
        "val_accuracy": float(history.history["val_binary_accuracy"][-1]),
    }
    if score:
        export_dir = os.path.join(workdir, f"ours_{preset}_{precision}_{int(xla)}")
        export.export_serving_model(model, output, features, export_dir)
        result["eval_accuracy"] = raw_eval_accuracy(export_dir, uris["raw"]["examples"], export.OUTPUT_KEY)
    return result


def machine() -> Dict:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return {
        "date": datetime.date.today().isoformat(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "gpus": [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus],
        "tensorflow": tf.__version__,
    }


def print_table(rows: List[Dict], google: Dict) -> None:
    header = (
        f"{'trainer':<32} {'preset':<8} {'precision':<15} {'xla':<4} {'GPUs':>4} {'workers':>7} {'batch':>6} "
        f"{'steps':>6} "
        f"{'examples/s':>11} {'x google':>9} {'fit s':>7} {'accuracy':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in [google] + rows:
        if "error" in row:
            print(
                f"{row['trainer']:<32} {row['preset']:<8} {row['precision']:<15} "
                f"{('on' if row['xla'] else 'off'):<4} {row.get('gpus', 0):>4} {row.get('workers', 1):>7} "
                f"{row['global_batch']:>6} {row['steps']:>6}  {row['error']}"
            )
            continue
        accuracy = row.get("eval_accuracy", row.get("val_accuracy"))
        print(
            f"{row['trainer']:<32} {row['preset']:<8} {row['precision']:<15} {('on' if row['xla'] else 'off'):<4} "
            f"{row.get('gpus', 0):>4} {row.get('workers', 1):>7} "
            f"{row['global_batch']:>6} {row['steps']:>6} {row['examples_per_s']:>11,.0f} "
            f"{row['examples_per_s'] / google['examples_per_s']:>8.1f}x {row['fit_s']:>7.1f} {accuracy:>9.4f}"
        )
    print(
        "accuracy: raw eval split through serving_default where scored (google and float32 rows), "
        "else Keras validation accuracy on the same rows"
    )


def _run_isolated(
    args, preset: str, precision: str, xla: bool, steps: int, score: bool, gpus: int = -1, workers: int = 1
) -> Dict:
    """One configuration in its own process (a fresh dtype policy and XLA cache), under a time limit; `gpus` >= 0:
    only the first `gpus` GPUs are visible; `workers` > 1: that many processes on loopback train together, each on
    its equal share of the `gpus` (NCCL across them), laid out as the Trainer's local cluster (the figures are the
    chief's, global over every replica)."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.trainer_throughput",
        "--workdir",
        os.path.abspath(args.workdir),
        "--one",
        json.dumps(
            {
                "preset": preset,
                "precision": precision,
                "xla": xla,
                "steps": steps,
                "score": score,
                "batch": args.batch_size,
                "steps_per_execution": args.steps_per_execution,
                "workers": workers,
            }
        ),
    ]
    base = {
        "trainer": "tfxflow",
        "preset": preset,
        "precision": precision,
        "xla": xla,
        "steps_per_execution": args.steps_per_execution,
        "global_batch": args.batch_size,
        "steps": steps,
    }
    base.update(gpus=max(gpus, 0), workers=workers)
    try:
        out, error = provenance.run_workers(command, workers, gpus if gpus >= 0 else None, args.config_timeout, REPO)
    except subprocess.TimeoutExpired:
        return {**base, "error": f"did not finish within {args.config_timeout} s"}
    if error:
        return {**base, "error": error[:300]}
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tfxflow-trainer-benchmark"))
    parser.add_argument("--out", help="JSON results (default: benchmarks/results/trainer-<date>.json)")
    parser.add_argument("--steps", type=int, default=300, help="steps for the default preset")
    parser.add_argument("--large-steps", type=int, default=50, help="steps for the large preset")
    parser.add_argument("--batch-size", type=int, default=1024, help="per replica")
    parser.add_argument("--steps-per-execution", type=int, default=50)
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--presets", default="default,large")
    parser.add_argument("--config-timeout", type=int, default=300, help="seconds allowed for one configuration")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="on a GPU machine: each configuration on one GPU and on all (MirroredStrategy, NCCL), and with two or "
        "more GPUs as two workers on loopback, each on half of them (MultiWorkerMirroredStrategy, NCCL)",
    )
    parser.add_argument(
        "--cpu-workers",
        type=int,
        default=0,
        metavar="N",
        help="without --gpu: each configuration also as N workers on loopback (the multi-worker path)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one configuration, print JSON
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)

    import logging

    logging.getLogger().setLevel(logging.WARNING)
    from tfxflow.components.training.fit import skip_autograph_for_tf_keras

    skip_autograph_for_tf_keras()  # for both trainers: it is a process-wide TF setting
    # The code measured is the checkout's as the runs start, whatever is committed while they run.
    measured_commit = None if args.one else provenance.commit()
    uris = prepare(args.workdir)
    if args.one:
        one = json.loads(args.one)
        print(
            json.dumps(
                bench_ours(
                    uris,
                    args.workdir,
                    one["preset"],
                    one["precision"],
                    one["xla"],
                    one["steps"],
                    one["batch"],
                    one["score"],
                    one["steps_per_execution"],
                    one.get("workers", 1),
                )
            )
        )
        return 0
    layouts = [(-1, 1)]  # (visible GPUs, workers); -1: whatever the machine has
    if args.gpu:
        import tensorflow as tf

        count = len(tf.config.list_physical_devices("GPU"))
        if not count:
            print("--gpu: no GPU here", file=sys.stderr)
            return 2
        layouts = sorted({(1, 1), (count, 1)}) + ([(count - count % 2, 2)] if count >= 2 else [])
    elif args.cpu_workers > 1:
        layouts.append((-1, args.cpu_workers))
    google = bench_google(uris, args.workdir)
    print(f"google: {google['examples_per_s']:,.0f} examples/s", file=sys.stderr, flush=True)
    rows = []
    for preset in args.presets.split(","):
        steps = args.steps if preset == "default" else args.large_steps
        for precision in args.precisions.split(","):
            for xla in (False, True):
                for gpus, workers in layouts:
                    score = precision == "float32" and not xla and (gpus, workers) == layouts[0]
                    row = _run_isolated(args, preset, precision, xla, steps, score, gpus, workers)
                    print(
                        f"{preset} {precision} xla={xla} gpus={row.get('gpus')} workers={workers}: "
                        f"{row.get('examples_per_s', row.get('error'))}",
                        file=sys.stderr,
                        flush=True,
                    )
                    rows.append(row)
    print()
    print_table(rows, google)
    out = args.out or provenance.new_results_path("trainer")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "commit": measured_commit,
                "machine": machine(),
                "settings": vars(args),
                "google": google,
                "tfxflow": rows,
            },
            f,
            indent=2,
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
