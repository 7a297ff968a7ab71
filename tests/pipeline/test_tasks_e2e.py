"""Every task end to end through the CLI, as a user runs it: `infer-schema` drafts from real data, the drafts run
unchanged, the pushed model answers through every signature, its metrics are in MLflow and on the page and
are scikit-learn's on the model's own predictions, and a worse model is not blessed; a multi-class model whose
classes are listed out of sorted order, or not listed (Transform's vocabulary), names its top score as the raw
label of the rows. The first run of each drafted task and the vocabulary-named penguins export TFLite models
(--tflite) that answer as the served model does. And TFX module files: two of Google's own, shipped in the
installed tfx package, run unchanged; a module with only a run_fn or only a preprocessing_fn runs beside the
built-in other half; a run_fn that exports nothing the Evaluator can use is refused in one line; Google's taxi
module's model, with no raw-column signature, is pushed without a TFLite model and says why.

The runs are independent (one home each) and run on the session's pool of long runs (tests/conftest.py's
`long_runs`), beside the Kubeflow end-to-end runs: most of a run is single-threaded (imports, Beam's in-memory
runner), so they share the two cores.
"""

import collections
import csv
import json
import os
import shutil
import sqlite3

import numpy as np
import pytest
import tensorflow as tf
import tfx
import yaml
from sklearn import metrics as sk

from tests import edge_checks, helpers
from tfxflow.components.edge import edge
from tfxflow.components.serving_dir import EDGE_DIR
from tfxflow.pipeline.inputs import bundled_dataset_dir

pytestmark = [pytest.mark.e2e, pytest.mark.current_lane]

EXAMPLES = os.path.join(os.path.dirname(tfx.__file__), "examples")
TAXI_MODULE = os.path.join(EXAMPLES, "chicago_taxi_pipeline", "taxi_utils_native_keras.py")
IMDB_MODULE = os.path.join(EXAMPLES, "imdb", "imdb_utils_native_keras.py")
PENGUIN_MODULE = os.path.join(EXAMPLES, "penguin", "penguin_utils_keras.py")
# A user's module whose model is Keras 3 (`import keras`) on Google's taxi preprocessing_fn.
KERAS3_MODULE = os.path.join(os.path.dirname(__file__), "..", "data", "keras3_taxi_module.py")
TAXI_LABEL = "task: binary\nlabel: {name: tips_xf, column: tips, ratio_of: fare, greater_than: 0.2}\n"


def _run(home, data, schema, features, *extra, dataset):
    return helpers.run_cli(
        "run",
        "--home",
        home,
        "--dataset",
        dataset,
        "--data-root",
        data,
        "--schema",
        schema,
        "--feature-config",
        features,
        *extra,
        timeout=1200,
    )


def _draft(data, out, label):
    result = helpers.run_cli("infer-schema", "--data-root", data, "--out", out, "--label", label, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return os.path.join(out, "schema.pbtxt"), os.path.join(out, "features.yaml")


def _drafted_task(base, name, label, rows, seed):
    """A task drafted from a random taxi sample by infer-schema, then its run (with its TFLite export) and a worse
    run (learning rate 0: the initial weights) on the same data."""
    data = helpers.write_taxi_samples([(str(base / f"{name}-data"), rows)], seed=seed)[0]
    schema, features = _draft(data, str(base / f"{name}-draft"), label)
    home = str(base / f"{name}-home")
    first = _run(home, data, schema, features, "--train-steps", "200", "--tflite", dataset=name)
    worse = _run(home, data, schema, features, "--train-steps", "20", "--learning-rate", "0", "--tflite", dataset=name)
    return {"data": data, "schema": schema, "features": features, "home": home, "first": first, "worse": worse}


# Penguins (tests/helpers.py's PENGUIN_SPECIES) with their species named, in unequal shares: the training split's
# vocabulary of the label (most frequent first) is Chinstrap, Gentoo, Adelie, where infer-schema drafts the classes
# sorted (Adelie, Chinstrap, Gentoo). The order a feature config lists is neither at any place, so a model whose
# classes are named in another order than it was trained in names no class right.
SPECIES_NAMES = {0: "Adelie", 1: "Chinstrap", 2: "Gentoo"}
SPECIES_SHARES = (0.2, 0.5, 0.3)
LISTED_CLASSES = ["Gentoo", "Adelie", "Chinstrap"]


def _named_penguins(folder, rows, seed):
    """`rows` penguins in SPECIES_SHARES into `folder`/data.csv: `species` by name, and the four measurements."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "data.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["species", *helpers.PENGUIN_COLUMNS])
        for species in rng.choice(3, size=rows, p=SPECIES_SHARES):
            measured = [rng.normal(mean, deviation) for mean, deviation in helpers.PENGUIN_SPECIES[int(species)]]
            writer.writerow([SPECIES_NAMES[int(species)], *(f"{v:.1f}" for v in measured)])
    return folder


def _named_classes(base):
    """Named penguins drafted by infer-schema, then two runs of the draft's feature config: with the classes listed
    in LISTED_CLASSES' order, and with no classes listed (Transform's vocabulary of the label)."""
    data = _named_penguins(str(base / "species-data"), rows=600, seed=31)
    schema, features = _draft(data, str(base / "species-draft"), "species")
    with open(features, encoding="utf-8") as f:
        drafted = yaml.safe_load(f)
    runs = {"data": data, "schema": schema, "drafted": drafted}
    for name, classes in (("listed", LISTED_CLASSES), ("vocabulary", None)):
        config = {**drafted, "label": {k: v for k, v in drafted["label"].items() if k != "classes"}}
        if classes:
            config["label"]["classes"] = classes
        (base / f"species-{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        home = str(base / f"species-{name}-home")
        tflite = ["--tflite"] if name == "vocabulary" else []  # classes named by the run's own vocabulary
        result = _run(
            home, data, schema, str(base / f"species-{name}.yaml"), "--train-steps", "100", *tflite, dataset="penguins"
        )
        runs[name] = {"home": home, "result": result}
    return runs


def _taxi_module(base, name, module, features, *extra, rows=2000, seed=5):
    """A module file on a random taxi sample with the curated taxi schema (Google's taxi module reads its
    categorical columns as integers: census tracts too, which a small sample may hold none of)."""
    data = helpers.write_taxi_samples([(str(base / f"{name}-data"), rows)], seed=seed)[0]
    schema = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
    (base / f"{name}.yaml").write_text(features)
    home = str(base / f"{name}-home")
    # Untracked: these tests read the console, the served model and the run's files, not MLflow.
    result = _run(
        home,
        data,
        schema,
        str(base / f"{name}.yaml"),
        "--module-file",
        module,
        "--tracking",
        "off",
        *extra,
        dataset=name,
    )
    return {"data": data, "schema": schema, "home": home, "result": result}


def _imdb(base):
    """Google's IMDB example on the reviews its package ships, as a CSV, with infer-schema's drafted schema: its
    preprocessing_fn reshapes the text as a dense tensor, which the draft's fixed shape of a column filled in
    every row gives (what TFX's SchemaGen infers)."""
    data = base / "imdb-data"
    data.mkdir()
    shutil.copy(os.path.join(EXAMPLES, "imdb", "data", "imdb_small_with_labels.txt"), data / "reviews.csv")
    schema, _ = _draft(str(data), str(base / "imdb-draft"), "label")
    # The module's label is the raw column: it exports no transform_features, so TFMA reads it from the rows.
    (base / "imdb.yaml").write_text("task: binary\nlabel: {name: label, column: label}\n")
    home = str(base / "imdb-home")
    result = _run(
        home,
        str(data),
        schema,
        str(base / "imdb.yaml"),
        "--module-file",
        IMDB_MODULE,
        "--train-steps",
        "20",
        "--eval-steps",
        "4",
        "--blessing-threshold",
        "0",  # 100 reviews: the blessing is not what this shows
        "--tracking",
        "off",
        dataset="imdb",
    )
    return {"data": str(data), "home": home, "result": result}


def _penguin(base):
    """Google's penguin example (preprocessing_fn, tuner_fn, run_fn) unchanged on penguins as infer-schema drafts
    them, with --tune: TFX's Tuner runs its tuner_fn (keras-tuner's RandomSearch over two learning rates and one
    to three layers: 6 trials) and the Trainer its run_fn with the best trial's hyperparameters."""
    data = helpers.write_penguins(str(base / "penguin-data"), rows=600, seed=7)
    # The draft names the label species_label (the built-in preprocessing's name); the run finds the module's own
    # name for it, species_xf, among its preprocessing_fn's outputs.
    schema, features = _draft(data, str(base / "penguin-draft"), "species")
    home = str(base / "penguin-home")
    result = _run(
        home,
        data,
        schema,
        features,
        "--module-file",
        PENGUIN_MODULE,
        "--tune",
        "--train-steps",
        "100",
        "--eval-steps",
        "10",
        dataset="penguin",
    )
    return {"data": data, "schema": schema, "home": home, "result": result}


BAD_RUN_FN = """
import tensorflow as tf


def run_fn(fn_args):
    class Scorer(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="fare")])
        def score(self, fare):
            return {"score": fare * 0.0}

    module = Scorer()
    tf.saved_model.save(module, fn_args.serving_model_dir, signatures={"score": module.score})
"""

ONLY_PREPROCESSING = "from tfx.examples.chicago_taxi_pipeline.taxi_utils_native_keras import preprocessing_fn\n"


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    (base / "bad_run_fn.py").write_text(BAD_RUN_FN)
    (base / "only_preprocessing").mkdir()
    (base / "only_preprocessing" / "module.py").write_text(ONLY_PREPROCESSING)
    return {
        "multiclass": lambda: _drafted_task(base, "payment", "payment_type", 3000, seed=21),
        "named_classes": lambda: _named_classes(base),
        "regression": lambda: _drafted_task(base, "fare", "fare", 3000, seed=22),
        "taxi_module": lambda: _taxi_module(
            base, "google", TAXI_MODULE, TAXI_LABEL, "--train-steps", "300", "--tflite"
        ),
        "imdb_module": lambda: _imdb(base),
        "penguin_module": lambda: _penguin(base),
        "keras3_module": lambda: _taxi_module(base, "keras3", KERAS3_MODULE, TAXI_LABEL, "--train-steps", "300"),
        "bad_run_fn": lambda: _taxi_module(
            base, "bad", str(base / "bad_run_fn.py"), TAXI_LABEL.replace("tips_xf", "big_tipper") + "numeric: [fare]\n"
        ),
        "only_preprocessing": lambda: _taxi_module(
            base, "half", str(base / "only_preprocessing" / "module.py"), TAXI_LABEL, "--train-steps", "200"
        ),
    }


@pytest.fixture(scope="module")
def runs(long_runs):
    return long_runs.results("tasks")


def _ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr


def _served(home, model):
    (version,) = helpers.pushed_versions(os.path.join(home, "serving"), model)
    return os.path.join(home, "serving", model, version), version


def _answer_taxi_rows(run, model, count):
    """The served model of a taxi run, and its serving_default's answer for the first `count` rows of its data."""
    model_dir, _ = _served(run["home"], model)
    loaded = tf.saved_model.load(model_dir)
    rows = helpers.read_csv_rows(os.path.join(run["data"], "data.csv"), count)
    examples = helpers.serialize_examples(rows, run["schema"], drop=("tips",))
    return loaded, loaded.signatures["serving_default"](examples=tf.constant(examples))


def _first_output(home, component, name):
    """The first file or folder `name` under the outputs of `component` in the run's home."""
    (path,) = [
        os.path.join(root, name)
        for root, dirs, files in os.walk(os.path.join(home, "pipeline_root", component))
        if name in dirs or name in files
    ][:1]
    return path


def _eval_split(home, split="eval"):
    """The eval (or another) split CsvExampleGen wrote (every eval row: none of these runs samples it)."""
    examples = _first_output(home, "CsvExampleGen", f"Split-{split}")
    files = tf.io.gfile.glob(os.path.join(examples, "*"))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _training_info(home):
    """The built-in Trainer's training_info.json of the run in `home`."""
    with open(_first_output(home, "Trainer", "training_info.json"), encoding="utf-8") as f:
        return json.load(f)


def _mlflow_metrics(home, dataset, latest=False):
    """{metric: value} of the first (or the latest) run of the embedded store's experiment, and its tags."""
    with sqlite3.connect(os.path.join(home, "mlflow", "mlflow.db")) as db:
        (run,) = db.execute(
            "SELECT r.run_uuid FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id "
            f"WHERE e.name = ? ORDER BY r.start_time {'DESC' if latest else 'ASC'} LIMIT 1",
            (f"tfxflow-{dataset}",),
        ).fetchone()
        metrics = dict(db.execute("SELECT key, value FROM latest_metrics WHERE run_uuid = ?", (run,)).fetchall())
        tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run,)).fetchall())
    return metrics, tags


def _page(home):
    reports = sorted(os.listdir(os.path.join(home, "reports")))
    pages = [r for r in reports if r.endswith(".html")]
    with open(os.path.join(home, "reports", pages[0]), encoding="utf-8") as f:
        return f.read()


def test_multiclass_from_drafts_pushes_a_model_that_names_its_classes(runs):
    run = runs["multiclass"]
    with open(run["features"], encoding="utf-8") as f:
        drafted = f.read()
    assert "task: multiclass  # 'payment_type' holds" in drafted and "  classes:" in drafted
    _ok(run["first"])
    assert (
        "eval metrics:   accuracy " in run["first"].stdout
        and "blessed:        yes (accuracy >= 0.5" in run["first"].stdout
    )
    model_dir, _ = _served(run["home"], "payment")
    loaded = tf.saved_model.load(model_dir)
    rows = _eval_split(run["home"])
    labels = loaded.signatures["transform_features"](examples=tf.constant(rows))["payment_type_label"].numpy()
    answer = loaded.signatures["serving_default"](examples=tf.constant(rows))
    scores, classes = answer["scores"].numpy(), answer["classes"].numpy()
    with open(os.path.join(model_dir, "assets.extra", "tfxflow_model.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info["task"] == "multiclass" and info["classes"] == [c.decode() for c in classes[0]]
    assert set(info["classes"]) >= {"Cash", "Credit Card"} and scores.shape == (len(rows), len(info["classes"]))
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)
    predicted = scores.argmax(axis=1)
    # The Evaluator's figures, in MLflow, are scikit-learn's on the served model's answers for the eval rows.
    metrics, tags = _mlflow_metrics(run["home"], "payment")
    assert tags["tfxflow.task"] == "multiclass"
    assert metrics["eval.accuracy"] == pytest.approx(sk.accuracy_score(labels, predicted), abs=1e-6)
    assert metrics["eval.macro_f1"] == pytest.approx(
        sk.f1_score(labels, predicted, average="macro", zero_division=0), abs=1e-6
    )
    assert metrics["eval.accuracy"] > 0.9  # tips paid by card: payment type is that legible here
    assert "eval.f1.Cash" in metrics and "eval.recall.Credit Card" in metrics
    # serving_raw answers the same for the rows that have every column.
    raw = loaded.signatures["serving_raw"]
    inputs = {k: v for k, v in raw.structured_input_signature[1].items()}
    parsed = tf.io.parse_example(rows[:50], {k: tf.io.VarLenFeature(v.dtype) for k, v in inputs.items()})
    whole = [i for i in range(50) if all(parsed[k].indices.numpy()[:, 0].tolist().count(i) == 1 for k in inputs)]
    assert whole
    values = {k: tf.gather(tf.sparse.to_dense(parsed[k]), whole)[:, 0] for k in inputs}
    np.testing.assert_allclose(raw(**values)["scores"].numpy(), scores[whole], atol=1e-5)
    page = _page(run["home"])
    assert "<h3>Confusion matrix</h3>" in page and "<h3>Per class</h3>" in page and ">Credit Card</th>" in page


def test_a_worse_multiclass_model_is_not_blessed_and_the_served_one_stays(runs):
    run = runs["multiclass"]
    _ok(run["worse"])
    assert "blessed:        no" in run["worse"].stdout
    assert "not blessed: accuracy " in run["worse"].stdout and "for the last blessed model" in run["worse"].stdout
    assert len(helpers.pushed_versions(os.path.join(run["home"], "serving"), "payment")) == 1
    _, tags = _mlflow_metrics(run["home"], "payment", latest=True)
    assert tags["tfxflow.blessed"] == "no" and "accuracy" in tags["tfxflow.not_blessed_because"]


def _species(rows):
    """The raw `species` of serialized tf.Examples."""
    return np.array(
        [tf.train.Example.FromString(r).features.feature["species"].bytes_list.value[0].decode() for r in rows]
    )


def _named_predictions(answer):
    """A multi-class answer's `classes` [n, K] as text, and the name of each row's top-scoring class."""
    classes = np.char.decode(answer["classes"].numpy().astype(bytes), "utf-8")
    return classes, classes[np.arange(len(classes)), answer["scores"].numpy().argmax(axis=1)]


def _check_named_classes(runs, name, classes):
    """The pushed model of the run `name` against the raw labels: its Transform label is the index of the raw label
    in `classes`; serving_default (serialized tf.Examples without the label) and serving_raw (the raw columns)
    answer `classes` in that order on every row, and the top-scoring class's name is the row's raw label for most
    rows of every class; the per-class metrics in MLflow are scikit-learn's on those names for the eval rows."""
    run = runs[name]
    _ok(run["result"])
    model_dir, _ = _served(run["home"], "penguins")
    loaded = tf.saved_model.load(model_dir)
    with open(os.path.join(model_dir, "assets.extra", "tfxflow_model.json"), encoding="utf-8") as f:
        assert json.load(f)["classes"] == classes
    rows = helpers.read_csv_rows(os.path.join(runs["data"], "data.csv"), 1000)
    labels = np.array([r["species"] for r in rows])
    assert len(rows) == 600 and set(labels) == set(classes)
    whole = tf.constant(helpers.serialize_examples(rows, runs["schema"]))
    transformed = loaded.signatures["transform_features"](examples=whole)["species_label"].numpy()
    assert transformed.tolist() == [classes.index(label) for label in labels]
    examples = tf.constant(helpers.serialize_examples(rows, runs["schema"], drop=("species",)))
    raw = loaded.signatures["serving_raw"]
    columns = {
        k: tf.constant([float(r[k]) for r in rows], v.dtype) for k, v in raw.structured_input_signature[1].items()
    }
    assert sorted(columns) == sorted(helpers.PENGUIN_COLUMNS)
    answers = {
        "serving_default": loaded.signatures["serving_default"](examples=examples),
        "serving_raw": raw(**columns),
    }
    np.testing.assert_allclose(answers["serving_raw"]["scores"], answers["serving_default"]["scores"], atol=1e-5)
    for signature, answer in answers.items():
        named_classes, predicted = _named_predictions(answer)
        assert (named_classes == classes).all(), (signature, named_classes[0])
        # Measured on the 600 rows: 0.955 with the classes listed (per class 0.93 to 0.99), 0.96 with the vocabulary
        # (0.92 to 1.0); logistic regression fitted on all of them: 0.968. A naming out of the trained order: ~0.
        accuracy = (predicted == labels).mean()
        per_class = {c: (predicted[labels == c] == c).mean() for c in classes}
        assert accuracy >= 0.9 and min(per_class.values()) >= 0.8, (signature, accuracy, per_class)
    # The Evaluator's per-class figures, named in MLflow, on the eval rows' raw labels.
    eval_rows = _eval_split(run["home"])
    eval_labels = _species(eval_rows)
    _, eval_predicted = _named_predictions(loaded.signatures["serving_default"](examples=tf.constant(eval_rows)))
    metrics, _ = _mlflow_metrics(run["home"], "penguins")
    recall = sk.recall_score(eval_labels, eval_predicted, labels=classes, average=None, zero_division=0)
    precision = sk.precision_score(eval_labels, eval_predicted, labels=classes, average=None, zero_division=0)
    for i, c in enumerate(classes):
        assert metrics[f"eval.recall.{c}"] == pytest.approx(recall[i], abs=1e-6), c
        assert metrics[f"eval.precision.{c}"] == pytest.approx(precision[i], abs=1e-6), c


def test_multiclass_classes_listed_out_of_sorted_order_are_trained_and_served_in_that_order(runs):
    named = runs["named_classes"]
    # infer-schema drafts them sorted: the run lists them in another order at every place.
    assert named["drafted"]["label"]["classes"] == sorted(LISTED_CLASSES)
    assert all(a != b for a, b in zip(LISTED_CLASSES, sorted(LISTED_CLASSES), strict=True))
    _check_named_classes(named, "listed", LISTED_CLASSES)


def test_multiclass_classes_not_listed_are_the_training_splits_vocabulary(runs):
    named = runs["named_classes"]
    home = named["vocabulary"]["home"]
    # Transform's vocabulary of the training split, most frequent first: here in no place the sorted order.
    counts = collections.Counter(_species(_eval_split(home, "train")))
    vocabulary = [c for c, _ in counts.most_common()]
    assert vocabulary == ["Chinstrap", "Gentoo", "Adelie"] and len(set(counts.values())) == 3  # no ties
    _check_named_classes(named, "vocabulary", vocabulary)


def test_regression_from_drafts_answers_in_the_labels_units(runs):
    run = runs["regression"]
    with open(run["features"], encoding="utf-8") as f:
        assert "task: regression  # 'fare' holds floats" in f.read()
    _ok(run["first"])
    assert "eval metrics:   r2 " in run["first"].stdout
    model_dir, _ = _served(run["home"], "fare")
    loaded = tf.saved_model.load(model_dir)
    rows = _eval_split(run["home"])
    labels = loaded.signatures["transform_features"](examples=tf.constant(rows))["fare_label"].numpy()
    predictions = loaded.signatures["serving_default"](examples=tf.constant(rows))["predictions"].numpy()[:, 0]
    metrics, tags = _mlflow_metrics(run["home"], "fare")
    assert tags["tfxflow.task"] == "regression"
    assert metrics["eval.r2"] == pytest.approx(sk.r2_score(labels, predictions), abs=1e-5)
    assert metrics["eval.rmse"] == pytest.approx(sk.mean_squared_error(labels, predictions) ** 0.5, rel=1e-5)
    assert metrics["eval.mae"] == pytest.approx(sk.mean_absolute_error(labels, predictions), rel=1e-5)
    assert metrics["eval.r2"] > 0.5  # fares follow miles and seconds
    page = _page(run["home"])
    assert "<h3>prediction vs. label</h3>" in page and "residuals (prediction - label)" in page


def test_a_worse_regression_is_not_blessed(runs):
    run = runs["regression"]
    _ok(run["worse"])
    assert "not blessed: r2 " in run["worse"].stdout
    assert len(helpers.pushed_versions(os.path.join(run["home"], "serving"), "fare")) == 1


def test_compare_judges_runs_by_their_tasks_metric(runs):
    result = helpers.run_cli("compare", "--home", runs["regression"]["home"], "--experiment", "tfxflow-fare")
    assert result.returncode == 0, result.stderr
    assert "eval.r2" in result.stdout and "best by eval.r2" in result.stdout


def test_googles_taxi_module_file_runs_unchanged_and_its_model_is_pushed(runs):
    run = runs["taxi_module"]
    _ok(run["result"])
    out = run["result"].stdout
    assert "blessed:        yes (binary_accuracy >= 0.6" in out
    assert "max difference serving_default 0 " in out  # its only signature, as TFMA reads it
    assert "Looking in indexes" not in out and "Epoch" not in out  # pip's and Keras' chatter is in the log
    loaded, answer = _answer_taxi_rows(run, "google", 16)
    assert set(loaded.signatures) == {"serving_default", "transform_features"}
    outputs = answer["outputs"].numpy()
    assert outputs.shape == (16, 1) and ((outputs >= 0) & (outputs <= 1)).all() and outputs.std() > 0
    wheels = os.listdir(os.path.join(run["home"], "pipeline_root", "_wheels"))
    assert {w.split("-0.0+")[0] for w in wheels} == {"tfx_user_code_transform", "tfx_user_code_trainer"}


def test_a_module_files_keras_3_model_is_trained_evaluated_checked_and_pushed(runs):
    import keras

    run = runs["keras3_module"]
    assert keras.__version__.startswith("3.")  # what the module's `import keras` gets (it refuses any other)
    _ok(run["result"])
    out = run["result"].stdout
    assert "blessed:        yes (binary_accuracy >= 0.6" in out
    assert "serving check:  passed" in out and "max difference serving_default 0 " in out
    loaded, answer = _answer_taxi_rows(run, "keras3", 16)
    assert set(loaded.signatures) == {"serving_default", "transform_features"}
    outputs = answer["outputs"].numpy()
    assert outputs.shape == (16, 1) and ((outputs >= 0) & (outputs <= 1)).all() and outputs.std() > 0


def test_googles_imdb_module_file_runs_on_its_own_reviews(runs):
    run = runs["imdb_module"]
    _ok(run["result"])
    model_dir, _ = _served(run["home"], "imdb")
    loaded = tf.saved_model.load(model_dir)
    rows = helpers.read_csv_rows(os.path.join(run["data"], "reviews.csv"), 4)
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[r["text"].encode()]))}
            )
        ).SerializeToString()
        for r in rows
    ]
    (output,) = loaded.signatures["serving_default"](examples=tf.constant(examples)).values()
    assert output.shape == (4, 1) and np.isfinite(output.numpy()).all()


@pytest.mark.long_runs("penguin_module")
def test_googles_penguin_module_is_tuned_by_tfxs_tuner_and_trained_with_the_best_trial(runs):
    run = runs["penguin_module"]
    _ok(run["result"])
    out = run["result"].stdout
    home = run["home"]
    # On infer-schema's drafts unchanged: the Evaluator reads the module's label (species_xf) and blesses the model.
    assert "blessed:        yes (accuracy >= " in out
    metrics, _ = _mlflow_metrics(home, "penguin")
    assert metrics["eval.accuracy"] >= 0.85 and "eval.macro_f1" in metrics
    # Its RandomSearch over 2 learning rates x 1 to 3 layers, allow_new_entries=False: the 6 points, once each.
    assert "tuning:         6 trials (6 complete, 0 pruned, 0 failed)" in out
    with open(_first_output(home, "Tuner", "trials.json"), encoding="utf-8") as f:
        trials = json.load(f)
    assert {(t["values"]["learning_rate"], t["values"]["num_layers"]) for t in trials["trials"]} == {
        (lr, n) for lr in (1e-2, 1e-3) for n in (1, 2, 3)
    }
    assert trials["monitor"] == "val_sparse_categorical_accuracy" and trials["direction"] == "maximize"
    best = trials["best"]
    assert best["value"] == max(t["value"] for t in trials["trials"])
    # TFX's own output, what the module's run_fn reads (keras_tuner.HyperParameters.from_config)
    with open(_first_output(home, "Tuner", "best_hyperparameters.txt"), encoding="utf-8") as f:
        assert json.load(f)["values"] == best["values"]
    with open(_first_output(home, "Tuner", "tuner_results.json"), encoding="utf-8") as f:
        assert len(json.load(f)) == 6
    # The pushed model is the run_fn's with the best trial's layers: a kernel and a bias per Dense layer.
    model_dir, _ = _served(home, "penguin")
    loaded = tf.saved_model.load(model_dir)
    assert len(loaded.trainable_variables) == 2 * (best["values"]["num_layers"] + 1)
    rows = helpers.read_csv_rows(os.path.join(run["data"], "data.csv"), 64)
    examples = helpers.serialize_examples(rows, run["schema"], drop=("species",))
    logits = loaded.signatures["serving_default"](examples=tf.constant(examples))["outputs"].numpy()
    assert logits.shape == (64, 3)  # the module's model outputs logits (its loss is from_logits)
    assert (logits.argmax(axis=1) == [int(r["species"]) for r in rows]).mean() >= 0.85
    wheels = os.listdir(os.path.join(home, "pipeline_root", "_wheels"))
    assert "tfx_user_code_tuner" in {w.split("-0.0+")[0] for w in wheels}
    # Each trial a run nested under the pipeline run, with its values and its objective
    with sqlite3.connect(os.path.join(home, "mlflow", "mlflow.db")) as db:
        (parent,) = db.execute(
            "SELECT r.run_uuid FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id "
            "WHERE e.name = 'tfxflow-penguin' AND r.run_uuid NOT IN "
            "(SELECT run_uuid FROM tags WHERE key = 'mlflow.parentRunId')"
        ).fetchone()
        nested = db.execute(
            "SELECT t.run_uuid, r.status FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
            "WHERE t.key = 'mlflow.parentRunId' AND t.value = ?",
            (parent,),
        ).fetchall()
        assert sorted(status for _, status in nested) == ["FINISHED"] * 6
        objective = db.execute(
            "SELECT p.value, m.value FROM params p JOIN latest_metrics m ON m.run_uuid = p.run_uuid "
            f"WHERE p.key = 'num_layers' AND m.key = 'objective.sparse_categorical_accuracy' "
            f"AND p.run_uuid IN ({', '.join('?' * len(nested))})",
            [run_id for run_id, _ in nested],
        ).fetchall()
    assert sorted(int(n) for n, _ in objective) == [1, 1, 2, 2, 3, 3]
    assert max(v for _, v in objective) == pytest.approx(best["value"])


def test_a_run_fn_that_exports_nothing_the_evaluator_can_use_is_refused_in_one_line(runs):
    run = runs["bad_run_fn"]
    result = run["result"]
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "the trained model has no 'serving_default' signature that takes serialized tf.Examples" in line
    assert "its signatures: score" in line and "(--module-file " in line and "bad_run_fn.py)" in line
    assert "Traceback" not in result.stderr
    assert helpers.pushed_versions(os.path.join(run["home"], "serving"), "bad") == []


def test_a_module_with_only_a_preprocessing_fn_trains_the_built_in_model_on_its_features(runs):
    run = runs["only_preprocessing"]
    _ok(run["result"])
    assert "blessed:        yes" in run["result"].stdout
    loaded, answer = _answer_taxi_rows(run, "half", 8)
    # The built-in export without the feature config's columns: serving_default and TFMA's signature.
    assert set(loaded.signatures) == {"serving_default", "transform_features"}
    assert answer["probabilities"].shape == (8, 1)
    info = _training_info(run["home"])
    assert info["inputs"] == 16  # Google's preprocessing_fn's features, all but its label tips_xf


def _check_named_penguins_tflite(named):
    """The penguins named by the run's vocabulary: numbers only, so builtin ops, published in both lanes."""
    folder, result = edge_checks.published(os.path.join(named["vocabulary"]["home"], "serving"), "penguins")
    edge_checks.check_result(result, named["vocabulary"]["result"].stdout)
    assert result["select_tf_ops"] == []  # numbers only: builtin ops, which LiteRT runs without Flex
    answer, _ = edge_checks.check_against_saved_model(
        folder, helpers.read_csv_rows(os.path.join(named["data"], "data.csv"), 200)
    )
    assert [c.decode() for c in answer["classes"][0]] == ["Chinstrap", "Gentoo", "Adelie"]
    # Every eval row has every column: the rows scored are the Evaluator's, so TFMA's accuracy is the SavedModel's.
    metrics, _ = _mlflow_metrics(named["vocabulary"]["home"], "penguins")
    assert result["eval"]["rows"] == metrics["eval.example_count"]
    assert result["eval"]["saved_model"] == pytest.approx(metrics["eval.accuracy"], abs=1e-6)
    assert metrics["edge.float32.accuracy"] == pytest.approx(result["variants"]["float32"]["eval"]["value"])


@pytest.mark.long_runs("multiclass", "named_classes")
def test_a_multiclass_models_tflite_names_the_same_classes(runs):
    run = runs["multiclass"]
    # The worse run was not blessed: nothing converted.
    assert "edge (TFLite):  not converted: the model is not blessed" in run["worse"].stdout
    _check_named_penguins_tflite(runs["named_classes"])
    folder, result = edge_checks.published(os.path.join(run["home"], "serving"), "payment")
    edge_checks.check_result(result, run["first"].stdout)
    assert result["select_tf_ops"] == []  # one id for unseen values under --tflite: published in both lanes
    rows = edge_checks.rows_with_every_column(run["data"], edge_checks.raw_columns(folder))
    answer, expected = edge_checks.check_against_saved_model(folder, rows)
    assert answer["classes"][0].tolist() == expected["classes"][0].tolist() and len(answer["classes"][0]) >= 3
    # MLflow has the figures, the summary and the files (the run's artifacts under edge/).
    metrics, tags = _mlflow_metrics(run["home"], "payment")
    float32 = result["variants"]["float32"]
    assert metrics["edge.float32.kib"] == pytest.approx(float32["bytes"] / 1024, abs=0.1)
    assert metrics["edge.float32.p50_ms"] == pytest.approx(float32["p50_ms"])
    assert tags["tfxflow.edge"] == edge.summary_line(result)
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{run['home']}/mlflow/mlflow.db")
    run_id = client.search_runs([client.get_experiment_by_name("tfxflow-payment").experiment_id])[-1].info.run_id
    logged = sorted(os.path.basename(a.path) for a in client.list_artifacts(run_id, "edge"))
    assert logged == sorted([edge.RESULT_FILE] + [result["variants"][v]["file"] for v in result["published"]])


@pytest.mark.long_runs("regression")
def test_a_regressions_tflite_answers_in_the_labels_units(runs):
    run = runs["regression"]
    folder, result = edge_checks.published(os.path.join(run["home"], "serving"), "fare")
    edge_checks.check_result(result, run["first"].stdout)
    assert result["select_tf_ops"] == []
    rows = edge_checks.rows_with_every_column(run["data"], edge_checks.raw_columns(folder))
    answer, _ = edge_checks.check_against_saved_model(folder, rows)
    assert 3 < float(np.median(answer["predictions"])) < 40  # dollars


@pytest.mark.long_runs("taxi_module")
def test_a_module_model_without_a_raw_signature_is_pushed_alone_with_the_reason(runs):
    run = runs["taxi_module"]
    _ok(run["result"])
    assert (
        "edge (TFLite):  not converted: the model has no 'serving_raw' signature (one tensor per raw column) to "
        "convert" in run["result"].stdout
    )
    (version,) = helpers.pushed_versions(os.path.join(run["home"], "serving"), "google")
    assert not os.path.exists(os.path.join(run["home"], "serving", "google", version, EDGE_DIR))
