"""Model size presets and the Trainer's defaults (plain data, so the CLI reads them without importing TensorFlow)."""

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Encoder:
    """A BERT-style Transformer encoder: `layers` blocks of `hidden` width with `heads` attention heads and a
    feed-forward layer of `intermediate` units (4 x hidden, as BERT)."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    max_positions: int = 512


@dataclasses.dataclass(frozen=True)
class Preset:
    hidden_units: Tuple[int, ...]
    max_embedding_dim: int
    multiple_of: int  # layer and embedding sizes are rounded up to this (8 suits Tensor Cores)
    # Text columns: a Transformer encoder whose pooled [CLS] output joins the head, or (None) the mean of the
    # word pieces' embeddings of `text_embedding_dim` joining the deep layers.
    encoder: Optional[Encoder] = None
    text_embedding_dim: int = 64


def _bert(layers: int, hidden: int) -> Preset:
    return Preset(
        hidden_units=(),
        max_embedding_dim=16,
        multiple_of=8,
        encoder=Encoder(layers=layers, hidden=hidden, heads=hidden // 64, intermediate=4 * hidden),
    )


PRESETS = {
    # Sized for the taxi data: larger models overfit its 11k training rows.
    "default": Preset(hidden_units=(128, 64), max_embedding_dim=16, multiple_of=1),
    # Wide layers, so a training step is bound by compute rather than input: the GPU benchmark model.
    "large": Preset(hidden_units=(2048, 2048, 1024, 512), max_embedding_dim=64, multiple_of=8),
    # Text: the sizes of Google's BERT miniatures and of BERT-Base and -Large (heads of 64 units each).
    "bert-tiny": _bert(2, 128),
    "bert-mini": _bert(4, 256),
    "bert-small": _bert(4, 512),
    "bert-medium": _bert(8, 512),
    "bert-base": _bert(12, 768),
    "bert-large": _bert(24, 1024),
}

DEFAULT_PRESET = "default"

# The Trainer's defaults, one value each: the settings and flags (pipeline/config.py's TrainingConfig) and the
# Trainer's own parameters (trainer.TrainParams, keras_model.ModelParams) read them from here.
BATCH_SIZE = 256  # per replica
EVAL_EVERY_STEPS = 100
LEARNING_RATE = 0.001
DROPOUT = 0.0
WEIGHT_DECAY = 0.01  # adamw's (BERT's)
WARMUP_SHARE = 0.1  # adamw's warmup, a share of the training steps (BERT's)
GRAD_ACCUM_STEPS = 1
EARLY_STOPPING_PATIENCE = 3  # epochs without val_loss improvement; 0: off
# fn_args.eval_steps of a module file's run_fn when --eval-steps is 0 (TFX's examples pass it to Keras as
# validation_steps of a repeating dataset, which needs a number).
USER_EVAL_STEPS = 100
SEED = 42
