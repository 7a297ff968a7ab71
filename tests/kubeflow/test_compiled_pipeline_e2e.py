"""The compiled Kubeflow YAML itself, run task by task the way open-source KFP's driver and launcher run it
(tests/kfp_harness.py), with its pipeline root on MinIO's protocol (moto's S3 server on 127.0.0.1), its data
in the same bucket, the serving directory on an emulated claim and MLflow on a real server.

Three runs of one compiled spec, changing only the `data_root` parameter as a schedule would (on the session's
pool of long runs, tests/conftest.py's `long_runs`):
1. nothing served yet: trains, blesses without a baseline, pushes a model that loads and predicts, and records
   an MLflow run;
2. the same kind of data with fares 25% higher: refused by the data gate for drift against run 1's data;
   nothing is pushed;
3. a fresh sample, read in place from a data claim (a path on a mounted volume, not the store): the drift
   check compares it with run 1's data, the Evaluator compares the candidate with run 1's served model, and the
   new model is pushed beside it.
Then the spec compiled for a GPU the machine lacks (the Trainer refuses), and compiled with --tune (the tuning
step's trials in its pod, the Trainer on the best trial's values, the trials nested in MLflow).
"""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from mlflow import MlflowClient

from tests import helpers
from tests.kfp_harness import LocalKfp
from tests.pipeline.conftest import FORK_STEPS, kubeflow_config
from tfxflow.components import object_store
from tfxflow.components.serving_dir import STATISTICS_DIR
from tfxflow.components.tracking.mlflow_runs import RUN_KEY_TAG
from tfxflow.pipeline.config import TrainingConfig, TuningConfig
from tfxflow.pipeline.inputs import bundled_dataset_dir
from tfxflow.pipeline.kfp import compiler as kf

pytestmark = pytest.mark.e2e

BUCKET = "mlpipeline"
ROOT = f"minio://{BUCKET}/v2/artifacts"


def _upload(folder: str, name: str) -> str:
    uri = f"minio://{BUCKET}/data/{name}"
    object_store.upload(folder, uri)
    return uri


def _baseline_model_names(evaluation_dir: str) -> set:
    """The model names TFMA wrote metrics for ("candidate", and "baseline" when it compared with one)."""
    from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as writer

    names = set()
    for metrics in writer.load_and_deserialize_metrics(os.path.join(evaluation_dir, "metrics")):
        names |= {kv.key.model_name for kv in metrics.metric_keys_and_values}
    return names


def jobs(base, s3_server, image=None, kfp_version=kf.KFP_VERSION, days=("day1", "day2", "day3"), compile_spec=None):
    """Writes and uploads the three days of data, starts the runs' MLflow server and compiles the spec (the
    store's variables are this process's while it does), and returns {"runs": a function that makes the three
    runs one after another} and what the tests read besides (tests/conftest.py's `long_runs`).

    `image`: a tests/image.py ImageCommand: every step then runs in a container of the step image, and the
    spec is compiled for `kfp_version` without an endpoint, so the steps reach the store by the name that
    version's launcher uses (the container's hosts file points it at `s3_server`). `days`: the runs to make, in
    order (a prefix of the three). `compile_spec(config, path)`: compiles the spec to `path` another way than
    this process's compiler (in the image, with its lane's TFX)."""
    # Its own MLflow server: the runs register versions of the model "taxi", which other tests count.
    mlflow_server = helpers.MlflowServer(str(base / "mlflow")).start()
    env = s3_server.env
    # The pods start without the store's settings: they get them from the spec (endpoint) and the secret.
    pod_env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    with helpers.environment(env):  # this process uploads the data to the same store
        object_store.clear_client_cache()
        s3_server.create_bucket(BUCKET)
        first, fresh = helpers.write_taxi_samples([(str(base / "first"), 1500), (str(base / "fresh"), 1000)], seed=11)
        shifted = helpers.rewrite_csv(
            os.path.join(fresh, "data.csv"),
            str(base / "fares_up"),
            lambda i, row: {**row, "fare": f"{float(row['fare']) * 1.25:.2f}"},
        )
        data = {name: _upload(folder, name) for name, folder in (("day1", first), ("day2", shifted))}
    object_store.clear_client_cache()
    data_mount = str(base / "data-claim")  # the taxi-data claim, a host folder here
    shutil.copytree(fresh, os.path.join(data_mount, "day3"))
    data["day3"] = os.path.join(data_mount, "day3")
    serving_mount = str(base / "serving-claim")  # the tf-serving-models claim, a host folder here
    config = kubeflow_config(
        ROOT,
        data_root=data["day1"],
        serving_dir=f"{serving_mount}/models",
        serving_mount=serving_mount,
        s3_endpoint="" if image is not None else s3_server.endpoint,
        kfp_version=kfp_version,
        data_pvc="taxi-data",
        data_mount=data_mount,
        gpus=0,
        node_selector=(),
        tolerations=(),
        mlflow_secret="",
        mlflow_uri=mlflow_server.uri,
        experiment="kfp-e2e",
        beam_mode="in_memory",
        allowed_anomaly_types=(),
        training=TrainingConfig(train_steps=40, batch_size=64, eval_every_steps=20),
    )
    spec_path = str(base / "taxi.yaml")
    spec = compile_spec(config, spec_path) if compile_spec else kf.compile_pipeline(config, spec_path).path
    kfp = LocalKfp(
        str(base / "kfp"),
        s3_env=env,
        base_env=pod_env if image is None else None,  # in the image: the image's environment, not this one
        secrets={kf.OBJECT_STORE_SECRET: {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}},
        image=image,
        fork_steps=FORK_STEPS if image is None else None,
    )
    root = kf.load_spec(spec)[0]["defaultPipelineRoot"]  # what `tfxflow kubeflow submit` passes to a run

    if image is None:
        # The same pipeline compiled for a GPU Trainer asking for one GPU more than this machine has (it has none).
        gpus = len(tf.config.list_physical_devices("GPU")) + 1
        gpu_spec = kf.compile_pipeline(dataclasses.replace(config, gpus=gpus), str(base / "taxi-gpu.yaml")).path
        # Tuned: its own model name, serving folder and experiment (the other tests count what those hold).
        tuned = dataclasses.replace(
            config,
            model_name="taxi-tuned",
            serving_dir=f"{serving_mount}/tuned-models",
            experiment="kfp-tuned",
            tuning=TuningConfig(tune=True, tune_trials=3, tune_space="width=off,dropout=off,batch_size=off"),
        )
        tuned_spec = kf.compile_pipeline(tuned, str(base / "taxi-tuned.yaml")).path

    def three_runs():
        runs, versions = [], []
        for name in days:
            runs.append(kfp.run(spec, parameters={"data_root": data[name]}, pipeline_root=root))
            versions.append(helpers.pushed_versions(config.serving_dir, "taxi"))
        results = {"runs": runs, "versions": versions}
        if image is None:
            results["gpu_run"] = kfp.run(gpu_spec, parameters={"data_root": data["day3"]}, pipeline_root=root)
            results["versions"].append(helpers.pushed_versions(config.serving_dir, "taxi"))
            results["tuned_run"] = kfp.run(tuned_spec, parameters={"data_root": data["day1"]}, pipeline_root=root)
        return results

    details = {
        "config": config,
        "kfp": kfp,
        "base": base,
        "data": data,
        "fresh": fresh,
        "mlflow_server": mlflow_server,
        "s3": s3_server,
    }
    return {"runs": three_runs}, details


@pytest.fixture(scope="module")
def kfp_runs(long_runs):
    details = long_runs.details("kfp")
    try:
        results = long_runs.results("kfp")["runs"]
        with helpers.environment(details["s3"].env):  # the tests read the runs' outputs from the store
            object_store.clear_client_cache()
            yield {**results, **details, "mlflow": MlflowClient(details["mlflow_server"].uri)}
    finally:
        details["mlflow_server"].stop()
        object_store.clear_client_cache()


def _why(run) -> str:
    return run.log(run.failed_task)[-4000:] if run.failed_task else ""


def test_first_run_pushes_a_model_that_predicts_and_records_mlflow(kfp_runs):
    run = kfp_runs["runs"][0]
    assert run.state == "SUCCEEDED", _why(run)
    assert {t.state for t in run.tasks.values()} == {"SUCCEEDED"}
    # Every artifact went to the store under the pipeline root, and no `dir/` marker object with it
    # (kubeflow/pipelines#13476: the launcher fails to download those).
    keys = [
        o["Key"]
        for page in kfp_runs["s3"].client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
        for o in page.get("Contents", [])
    ]
    assert keys and not [k for k in keys if k.endswith("/")]
    examples = run.task_outputs("CsvExampleGen", "examples")[0]
    assert examples.startswith(ROOT + "/") and object_store.exists(f"{examples}/Split-train")
    assert "nothing to compare with" in run.log("DataGate") and "no model served yet" in run.log("DataGate")

    (version,) = kfp_runs["versions"][0]
    model_dir = os.path.join(kfp_runs["config"].serving_dir, "taxi", version)
    stats = os.path.join(model_dir, STATISTICS_DIR, "Split-train", "FeatureStats.pb")
    assert os.path.getsize(stats) > 1000  # the drift baseline travels with the served model
    rows = helpers.read_csv_rows(os.path.join(kfp_runs["fresh"], "data.csv"), 20)
    schema = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
    loaded = tf.saved_model.load(model_dir)
    probabilities = loaded.signatures["serving_default"](
        examples=tf.constant(helpers.serialize_examples(rows, schema, drop=("tips",)))
    )["probabilities"].numpy()
    assert probabilities.shape == (20, 1) and np.all((probabilities >= 0) & (probabilities <= 1))
    assert probabilities.std() > 0

    mlflow = kfp_runs["mlflow"]
    experiment = mlflow.get_experiment_by_name("kfp-e2e")
    (tracked,) = mlflow.search_runs([experiment.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{run.run_id}'")
    assert tracked.info.status == "FINISHED"
    assert 0.5 < tracked.data.metrics["eval.binary_accuracy"] <= 1.0
    assert tracked.data.tags["tfxflow.pushed"] == "yes" and tracked.data.tags["tfxflow.pushed_version"] == version


def test_drifted_data_is_refused_by_the_gate_and_nothing_is_pushed(kfp_runs):
    run = kfp_runs["runs"][1]
    assert run.state == "FAILED" and run.failed_task == "DataGate", [(n, t.state) for n, t in run.tasks.items()]
    log = run.log("DataGate")
    assert "fare" in log and "drift" in log
    assert "the data of served version" in log
    assert "run once with allowed_anomaly_types=COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH" in log
    for step in ("Transform", "Trainer", "Evaluator", "Pusher"):
        assert run.tasks[step].state == "NOT_RUN", step
    assert kfp_runs["versions"][1] == kfp_runs["versions"][0]


def test_third_run_compares_with_the_first_runs_served_model_and_data(kfp_runs):
    run = kfp_runs["runs"][2]
    assert run.state == "SUCCEEDED", _why(run)
    (first,) = kfp_runs["versions"][0]
    served = run.task_outputs("ServedBaseline", "model")[0]
    info = json.loads(object_store.read_bytes(f"{served}/served_baseline.json"))
    assert info["version"] == int(first) and info["statistics"] is True
    assert f"drift vs. the data of served version {first}: 13 features compared" in run.log("DataGate")
    evaluation = kfp_runs["kfp"].download(
        run.task_outputs("Evaluator", "evaluation")[0], str(kfp_runs["base"] / "evaluation-3")
    )
    assert {"candidate", "baseline"} <= _baseline_model_names(evaluation)
    first_evaluation = kfp_runs["kfp"].download(
        kfp_runs["runs"][0].task_outputs("Evaluator", "evaluation")[0], str(kfp_runs["base"] / "evaluation-1")
    )
    assert "baseline" not in _baseline_model_names(first_evaluation)
    assert len(kfp_runs["versions"][2]) == 2 and kfp_runs["versions"][2][0] == first
    # What KFP caches across runs, it reused: the schema step's inputs did not change.
    assert run.tasks["EmbeddedSchema"].state == "CACHED"
    assert run.tasks["ServedBaseline"].state == "SUCCEEDED"  # never cached: the serving directory changes


def test_a_trainer_pod_without_its_gpu_stops_and_says_what_to_check(kfp_runs):
    """Compiled with --gpus 1, run where there is no GPU (a node without the device plugin, a pod without the
    NVIDIA runtime): the Trainer refuses before training instead of running for hours on the CPU."""
    run = kfp_runs["gpu_run"]
    assert run.state == "FAILED" and run.failed_task == "Trainer", [(n, t.state) for n, t in run.tasks.items()]
    gpus = len(tf.config.list_physical_devices("GPU")) + 1
    assert run.tasks["Trainer"].pod["resources"]["accelerator"] == {"type": "nvidia.com/gpu", "count": str(gpus)}
    log = run.log("Trainer")
    assert f"MissingGpuError: the Trainer requires {gpus} GPU(s) and TensorFlow sees {gpus - 1}" in log
    assert "compile with --gpus 0" in log and "Epoch 1/" not in log
    for step in ("Evaluator", "ServingCheck", "Pusher"):
        assert run.tasks[step].state == "NOT_RUN", step
    assert kfp_runs["versions"][3] == kfp_runs["versions"][2]  # nothing pushed


def test_a_tuned_pipeline_tunes_in_its_own_pod_and_trains_with_the_best_trials_values(kfp_runs):
    run = kfp_runs["tuned_run"]
    assert run.state == "SUCCEEDED", _why(run)
    # No home in a pod: the trials and the study are the step's output on the store.
    results_uri = run.task_outputs("Tuner", "tuner_results")[0]
    results = json.loads(object_store.read_bytes(f"{results_uri}/trials.json"))
    assert len(results["trials"]) == 3 and results["best"] is not None
    assert object_store.read_bytes(f"{results_uri}/study.db")[:16] == b"SQLite format 3\x00"
    best = json.loads(
        object_store.read_bytes(f"{run.task_outputs('Tuner', 'best_hyperparameters')[0]}/best_hyperparameters.txt")
    )
    assert best["values"] == results["best"]["values"]
    model_run = run.task_outputs("Trainer", "model_run")[0]
    info = json.loads(object_store.read_bytes(f"{model_run}/training_info.json"))
    assert info["tuned"] == best["values"] and info["learning_rate"] == pytest.approx(best["values"]["learning_rate"])
    mlflow = kfp_runs["mlflow"]
    experiment = mlflow.get_experiment_by_name("kfp-tuned")
    (parent,) = mlflow.search_runs([experiment.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{run.run_id}'")
    assert parent.info.status == "FINISHED" and parent.data.tags["tfxflow.pushed"] == "yes"
    trials = mlflow.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert sorted(int(t.data.tags["tfxflow.trial"]) for t in trials) == [0, 1, 2]
