"""Model size presets and the Trainer's defaults (plain data, so the CLI reads them without importing TensorFlow)."""

import dataclasses
from typing import Optional, Tuple

# Activations of a Transformer block's feed-forward layer: BERT's GELU, the tanh approximation (google-research/bert's
# modeling.py, Model Garden's, Hugging Face's gelu_new), or the exact one of the error function (Hugging Face's
# "gelu").
GELU_TANH, GELU_ERF, RELU = "gelu_tanh", "gelu", "relu"
ACTIVATIONS = (GELU_TANH, GELU_ERF, RELU)
# A sentence's vector from the encoder's last hidden states: BERT's pooler (a tanh layer over [CLS]), the mean of
# the tokens' states the mask keeps (sentence-transformers' mean pooling), or [CLS]'s state as it is.
POOLER, MEAN, CLS = "pooler", "mean", "cls"
POOLINGS = (POOLER, MEAN, CLS)
# BERT's layer norms' epsilon (google-research/bert's modeling.py, Model Garden's, Hugging Face's default), which
# a Google release's bert_config.json does not state.
LAYER_NORM_EPSILON = 1e-12


@dataclasses.dataclass(frozen=True)
class Encoder:
    """A BERT-style Transformer encoder: `layers` blocks of `hidden` width with `heads` attention heads (of
    hidden / heads units each) and a feed-forward layer of `intermediate` units, `activation` one of
    ACTIVATIONS, layer norms of `layer_norm_epsilon`, learned positions up to `max_positions`; `embedding_size`:
    the embeddings' width where it is not `hidden` (ELECTRA's smaller embeddings, projected to `hidden` after
    their layer norm), None otherwise."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    max_positions: int = 512
    activation: str = GELU_TANH
    layer_norm_epsilon: float = LAYER_NORM_EPSILON
    embedding_size: Optional[int] = None

    def __post_init__(self):
        if min(self.layers, self.hidden, self.heads, self.intermediate, self.max_positions) < 1:
            raise ValueError(f"an encoder's sizes must be >= 1: {self}")
        if self.embedding_size is not None and (self.embedding_size < 1 or self.embedding_size == self.hidden):
            raise ValueError(f"embedding_size must be >= 1 and differ from hidden (else None), got {self}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden size {self.hidden} is not a multiple of {self.heads} heads")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")

    @property
    def embedding_width(self) -> int:
        """The embeddings' width: `embedding_size`, else `hidden`."""
        return self.embedding_size or self.hidden

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads

    def describe(self) -> str:
        """e.g. "6 layers, 384 wide, 12 heads of 32, feed-forward 1,536 (gelu)"."""
        return (
            f"{self.layers} layers, {self.hidden} wide, {self.heads} heads of {self.head_size}, feed-forward "
            f"{self.intermediate:,} ({self.activation})"
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Encoder":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"encoder: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


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
# The other columns' layers of a model whose encoder comes from a pretrained checkpoint: as the bert-* presets.
PRETRAINED = Preset(hidden_units=(), max_embedding_dim=16, multiple_of=8)

# The Trainer's defaults, one value each: the settings and flags (pipeline/config.py's TrainingConfig) and the
# Trainer's own parameters (train_params.TrainParams, keras_model.ModelParams) read them from here.
TRAIN_STEPS = 300
BATCH_SIZE = 256  # per replica
EVAL_EVERY_STEPS = 100
LEARNING_RATE = 0.001
DROPOUT = 0.0
HEAD_DROPOUT = 0.0  # before the output layer
CLIP_NORM = 0.0  # the gradients' global norm is clipped to this; 0: not clipped
WEIGHT_DECAY = 0.01  # adamw's (BERT's)
WARMUP_SHARE = 0.1  # adamw's warmup, a share of the training steps (BERT's)
GRAD_ACCUM_STEPS = 1
# Widths a text model's training batches are cut to (components/training/input_pipeline.py, group_by_length).
LENGTH_BUCKETS = 4
EARLY_STOPPING_PATIENCE = 3  # epochs without val_loss improvement; 0: off
# fn_args.eval_steps of a module file's run_fn when --eval-steps is 0 (TFX's examples pass it to Keras as
# validation_steps of a repeating dataset, which needs a number).
USER_EVAL_STEPS = 100
SEED = 42


@dataclasses.dataclass(frozen=True)
class FineTuning:
    """The defaults when the encoder starts from a pretrained checkpoint (--init-checkpoint): BERT's fine-tuning
    recipe (google-research/bert's run_classifier.py and optimization.py; Hugging Face's Trainer) in place of
    training from scratch's, whose learning rate and lack of dropout wipe out what the checkpoint knows.

    `learning_rate`: the best of BERT's range (BERT_LEARNING_RATES, at batch 32) in `make bench-text`'s sweep
    on Debian's package descriptions (docs/trainer.md, Fine-tuning a pretrained encoder); `epochs` over the
    training split at `batch_size`;
    the dropout rates are the checkpoint's own (its config's hidden and attention dropout, and before the head
    Hugging Face's classifier_dropout or the hidden one); AdamW's epsilon 1e-6; the gradients' global norm
    clipped at 1.0; warmup over the first 10% of the steps, then a linear decay to 0."""

    learning_rate: float = 5e-5
    batch_size: int = 32
    epochs: int = 3
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0


FINE_TUNING = FineTuning()
# The learning rates BERT's paper fine-tunes with (Devlin et al. 2019, appendix A.3): the range the recipe's is
# chosen in.
BERT_LEARNING_RATES = (2e-5, 3e-5, 4e-5, 5e-5)
