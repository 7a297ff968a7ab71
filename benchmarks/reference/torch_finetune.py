"""The PyTorch reference of the text benchmark: Hugging Face transformers fine-tuning the batches of a plan file.

Runs only in the reference environment (requirements.txt beside this file: stdlib, numpy, torch, transformers;
nothing of tfxflow), so that both sides train the same rows in the same order at the same widths:

    python torch_finetune.py PLAN.npz CONFIG.json OUT.json

PLAN.npz (written by benchmarks/text_benchmark.py): train_ids, train_mask int64 [N, L] (WordPiece ids of the
folder's vocab.txt, [CLS]..[SEP], padded with 0; mask 1 on tokens), train_labels int64 [N]; eval_ids, eval_mask,
eval_labels likewise; batches int64 [steps, B] (train rows of each optimizer step, epochs unrolled); widths
int64 [steps] (ids and mask are cut to [:, :width] for that step); eval_batches int64 [E, B2] (-1 pads the last
batch) and eval_widths int64 [E].

CONFIG.json keys:
    folder               the Hugging Face folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt)
    classes              the number of labels
    learning_rate        AdamW's peak rate
    weight_decay         AdamW's decoupled decay (not on biases and LayerNorm weights)
    adam_epsilon         AdamW's epsilon
    clip_norm            the global gradient norm clipped to (0: no clipping)
    warmup_steps         linear warmup steps of get_linear_schedule_with_warmup
    total_steps          steps of that schedule (its decay reaches 0 there)
    hidden_dropout       the encoder's hidden_dropout_prob
    attention_dropout    the encoder's attention_probs_dropout_prob
    head_dropout         dropout on the sentence vector before the classifier
    pooling              the sentence vector: mean (over the mask's tokens), cls, or pooler
    seed                 torch.manual_seed
    threads              torch.set_num_threads (inter-op threads: 1)
    warmup_timing_steps  the first steps, not timed

OUT.json: versions, threads, the attention implementation that ran, steps and batch size, examples/s and
tokens/s of the timed steps (padded tokens fed, and real ones), resident memory after the model and optimizer are
built and its peak over training, the mean loss of the first and last 10 steps, eval accuracy and seconds.
"""

import json
import os
import platform
import sys
import threading
import time

import numpy as np

CONFIG_KEYS = (
    "folder",
    "classes",
    "learning_rate",
    "weight_decay",
    "adam_epsilon",
    "clip_norm",
    "warmup_steps",
    "total_steps",
    "hidden_dropout",
    "attention_dropout",
    "head_dropout",
    "pooling",
    "seed",
    "threads",
    "warmup_timing_steps",
)
POOLINGS = ("mean", "cls", "pooler")


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class RssPeak:
    """The peak resident memory of this process while the block runs, sampled every 2 ms."""

    def __enter__(self):
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


def read_config(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if set(config) != set(CONFIG_KEYS):
        missing, unknown = sorted(set(CONFIG_KEYS) - set(config)), sorted(set(config) - set(CONFIG_KEYS))
        raise SystemExit(f"{path}: config keys missing {missing}, unknown {unknown}")
    if config["pooling"] not in POOLINGS:
        raise SystemExit(f"{path}: pooling is {config['pooling']!r}, not one of {POOLINGS}")
    return config


def build(config: dict):
    """The classifier (encoder, pooling, dropout, linear head) and AdamW with its two groups and schedule."""
    import torch
    from torch import nn
    from transformers import AutoModel, get_linear_schedule_with_warmup

    class Classifier(nn.Module):
        def __init__(self, encoder, pooling, head_dropout, classes):
            super().__init__()
            self.encoder, self.pooling = encoder, pooling
            self.dropout = nn.Dropout(head_dropout)
            self.classifier = nn.Linear(encoder.config.hidden_size, classes)
            # BERT's own classifier initialisation: normal(0.02) cut at 2 std, zero bias.
            nn.init.trunc_normal_(self.classifier.weight, std=0.02, a=-0.04, b=0.04)
            nn.init.zeros_(self.classifier.bias)

        def forward(self, ids, mask):
            out = self.encoder(input_ids=ids, attention_mask=mask)
            if self.pooling == "pooler":
                vector = out.pooler_output
            elif self.pooling == "cls":
                vector = out.last_hidden_state[:, 0]
            else:
                weights = mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
                vector = (out.last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return self.classifier(self.dropout(vector))

    encoder = AutoModel.from_pretrained(
        config["folder"],
        hidden_dropout_prob=config["hidden_dropout"],
        attention_probs_dropout_prob=config["attention_dropout"],
    )
    model = Classifier(encoder, config["pooling"], config["head_dropout"], config["classes"])
    # No decay on biases and LayerNorm weights, as BERT's fine-tuning recipe has it.
    plain = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters(recurse=False)}
    plain |= {id(p) for name, p in model.named_parameters() if name.endswith("bias")}
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if id(p) not in plain], "weight_decay": config["weight_decay"]},
        {"params": [p for p in params if id(p) in plain], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config["learning_rate"], betas=(0.9, 0.999), eps=config["adam_epsilon"])
    schedule = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], config["total_steps"])
    return model, optimizer, schedule, [len(g["params"]) for g in groups]


def main(argv) -> int:
    if len(argv) != 4:
        print("usage: python torch_finetune.py PLAN.npz CONFIG.json OUT.json", file=sys.stderr)
        return 2
    _, plan_path, config_path, out_path = argv
    config = read_config(config_path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: never a hub

    import torch
    import torch.nn.functional as F
    import transformers

    # Inter-op threads are set before any parallel work, which would fix them.
    torch.set_num_interop_threads(1)
    torch.set_num_threads(config["threads"])
    torch.manual_seed(config["seed"])

    plan = np.load(plan_path)
    train_ids, train_mask = torch.from_numpy(plan["train_ids"]), torch.from_numpy(plan["train_mask"])
    train_labels = torch.from_numpy(plan["train_labels"])
    batches, widths = plan["batches"], plan["widths"]
    steps, batch_size = batches.shape
    if len(widths) != steps:
        raise SystemExit(f"{plan_path}: {len(widths)} widths for {steps} steps")
    skip = config["warmup_timing_steps"]
    if not 0 <= skip < steps:
        raise SystemExit(f"warmup_timing_steps {skip} leaves no timed step of {steps}")

    rss_start = _rss_mb()
    model, optimizer, schedule, group_sizes = build(config)
    model.train()
    rss_built = _rss_mb()

    losses, timed_start, timed_tokens, timed_real = [], None, 0, 0
    with RssPeak() as rss:
        for step in range(steps):
            if step == skip:
                timed_start = time.perf_counter()
            rows, width = torch.from_numpy(batches[step]), int(widths[step])
            ids, mask = train_ids[rows, :width], train_mask[rows, :width]
            loss = F.cross_entropy(model(ids, mask), train_labels[rows])
            loss.backward()
            if config["clip_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config["clip_norm"])
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())  # .item() waits for the step: the timing below covers its work
            if step >= skip:
                timed_tokens += width * batch_size
                timed_real += int(mask.sum())
        timed_seconds = time.perf_counter() - timed_start
    timed_steps = steps - skip

    model.eval()
    eval_ids, eval_mask = torch.from_numpy(plan["eval_ids"]), torch.from_numpy(plan["eval_mask"])
    eval_labels = torch.from_numpy(plan["eval_labels"])
    correct = seen = 0
    eval_start = time.perf_counter()
    with torch.inference_mode():
        for rows, width in zip(plan["eval_batches"], plan["eval_widths"], strict=True):
            rows = torch.from_numpy(rows[rows >= 0])
            logits = model(eval_ids[rows, : int(width)], eval_mask[rows, : int(width)])
            correct += int((logits.argmax(-1) == eval_labels[rows]).sum())
            seen += len(rows)
    eval_seconds = time.perf_counter() - eval_start

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "attn_implementation": model.encoder.config._attn_implementation,  # noqa: SLF001 (what transformers chose)
        "pooling": config["pooling"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "param_groups": {"decay": group_sizes[0], "no_decay": group_sizes[1]},
        "steps": int(steps),
        "batch_size": int(batch_size),
        "timed_steps": int(timed_steps),
        "timed_seconds": timed_seconds,
        "seconds_per_step": timed_seconds / timed_steps,
        "examples_per_s": timed_steps * batch_size / timed_seconds,
        "tokens_per_s": timed_tokens / timed_seconds,
        "real_tokens_per_s": timed_real / timed_seconds,
        "rss_start_mb": rss_start,
        "rss_built_mb": rss_built,
        "peak_rss_mb": rss.peak,
        "loss_first10": float(np.mean(losses[:10])),
        "loss_last10": float(np.mean(losses[-10:])),
        "losses": losses,
        "final_learning_rate": schedule.get_last_lr()[0],
        "eval_examples": seen,
        "eval_accuracy": correct / seen if seen else None,
        "eval_seconds": eval_seconds,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
