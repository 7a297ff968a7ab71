"""The wide-and-deep Keras (tf-keras) model, built from the feature config (or the transformed features of a
user's preprocessing_fn) and Transform's output sizes, with the head of its task: a sigmoid for binary, a
softmax over K classes for multiclass, a linear output on the label's scale for regression."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import encoder as encoder_lib
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import presets, tasks
from tfxflow.components.model.presets import PRESETS
from tfxflow.components.settings import strict_fields

OPTIMIZERS = ("adam", "adamw", "sgd")


@dataclasses.dataclass(frozen=True)
class ModelParams:
    """Hyperparameters of the model and its optimiser. `hidden_units` and `max_embedding_dim` override the
    preset's. The learning rate applies to the global (all-replica) batch as is, without rescaling.

    `pretrained`: the checkpoint the text encoder starts from (components/model/checkpoints/'s
    Checkpoint.to_dict(), resolved where the run is configured), whose architecture the encoder then has; a
    `preset` with it only says the other columns' layers (None: presets.PRETRAINED's)."""

    preset: Optional[str] = None  # None: presets.DEFAULT_PRESET, or the pretrained encoder's
    hidden_units: Optional[Tuple[int, ...]] = None
    max_embedding_dim: Optional[int] = None
    learning_rate: float = presets.LEARNING_RATE
    dropout: float = presets.DROPOUT
    attention_dropout: Optional[float] = None  # on a Transformer's attention probabilities; None: `dropout`
    head_dropout: float = presets.HEAD_DROPOUT
    clip_norm: float = presets.CLIP_NORM
    adam_epsilon: Optional[float] = None  # None: Keras' 1e-7
    optimizer: Optional[str] = None  # None: the preset's (adamw for a Transformer, else adam)
    weight_decay: float = presets.WEIGHT_DECAY  # adamw's
    warmup_share: float = presets.WARMUP_SHARE  # adamw's: of the training steps, then a linear decay to 0
    pooling: Optional[str] = None  # a Transformer's (presets.POOLINGS); None: the checkpoint's, else BERT's pooler
    init_checkpoint: Optional[str] = None  # pretrained encoder weights (components/model/warm_start.py)
    # A text input's tokens the model reads: the first this many of the Transform graph's (None: all of them).
    sequence_length: Optional[int] = None
    pretrained: Optional[Mapping[str, Any]] = None

    def __post_init__(self):
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"model preset must be one of {sorted(PRESETS)}, got '{self.preset}'")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got '{self.optimizer}'")
        if not 0 <= self.warmup_share < 1:
            raise ValueError(f"warmup_share must be in [0, 1), got {self.warmup_share}")
        if self.sequence_length is not None and self.sequence_length < 3:
            raise ValueError(f"sequence_length must be >= 3 ([CLS], one word piece, [SEP]), got {self.sequence_length}")
        if self.pooling is not None and self.pooling not in presets.POOLINGS:
            raise ValueError(f"pooling must be one of {presets.POOLINGS}, got '{self.pooling}'")
        for name in ("dropout", "head_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0 (0: not clipped), got {self.clip_norm}")

    @property
    def preset_spec(self) -> presets.Preset:
        if self.preset is not None:
            return PRESETS[self.preset]
        return presets.PRETRAINED if self.pretrained else PRESETS[presets.DEFAULT_PRESET]

    @property
    def encoder(self) -> Optional[presets.Encoder]:
        """The Transformer's architecture: the pretrained checkpoint's, else the preset's (None: no Transformer)."""
        if self.pretrained:
            return presets.Encoder.from_dict(self.pretrained["encoder"])
        return self.preset_spec.encoder

    @property
    def encoder_pooling(self) -> str:
        if self.pooling:
            return self.pooling
        return (self.pretrained or {}).get("pooling") or presets.POOLER

    def tokens_read(self, graph_length: int) -> int:
        """A text input's tokens the model reads of the `graph_length` the Transform graph makes of each text."""
        return min(graph_length, self.sequence_length or graph_length)

    @property
    def optimizer_name(self) -> str:
        return self.optimizer or ("adamw" if self.encoder is not None else "adam")

    @property
    def units(self) -> Tuple[int, ...]:
        preset = self.preset_spec
        return tuple(_round_up(u, preset.multiple_of) for u in (self.hidden_units or preset.hidden_units))

    def embedding_dim(self, num_tokens: int) -> int:
        preset = self.preset_spec
        return _round_up(
            embedding_dim(num_tokens, self.max_embedding_dim or preset.max_embedding_dim), preset.multiple_of
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelParams":
        """The `model` section of the Trainer's custom_config (None: the default); raises ValueError naming an
        unknown key."""
        values = {k: v for k, v in strict_fields(cls, data, "custom_config['model']").items() if v is not None}
        if "hidden_units" in values:
            values["hidden_units"] = tuple(int(u) for u in values["hidden_units"]) or None
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class ModelInput:
    """One input of the model: a transformed feature, numeric (a float), categorical (an id below `tokens`) or
    text (`length` word-piece ids below `tokens`, with its attention mask `mask`)."""

    name: str
    kind: str  # "numeric", "categorical" or "text"
    tokens: int = 0
    length: int = 1
    mask: str = ""


def inputs_of(config: features_lib.FeatureConfig, num_tokens: Mapping[str, int]) -> List[ModelInput]:
    """The inputs the feature config's roles make: numeric columns, then categorical and bucketized ones with
    their id ranges (`num_tokens`, by transformed name, as Transform reports them)."""
    inputs = [ModelInput(config.transformed_name(c), "numeric") for c in config.numeric]
    for column in tuple(config.categorical) + tuple(config.bucketized):
        name = config.transformed_name(column)
        if name not in num_tokens:
            raise ValueError(f"no id range for transformed feature '{name}'")
        inputs.append(ModelInput(name, "categorical", int(num_tokens[name])))
    for column in config.text:
        name = config.transformed_name(column)
        if name not in num_tokens:
            raise ValueError(f"no vocabulary size for text feature '{name}'")
        inputs.append(
            ModelInput(
                name, "text", int(num_tokens[name]), length=config.sequence_length, mask=config.mask_name(column)
            )
        )
    return inputs


def model_input_dtypes(inputs: Sequence[ModelInput]) -> Dict[str, tf.DType]:
    """Each model input's dtype by name, a text input's mask included."""
    dtypes = {}
    for spec in inputs:
        dtypes[spec.name] = tf.float32 if spec.kind == "numeric" else tf.int64
        if spec.kind == "text":
            dtypes[spec.mask] = tf.int64
    return dtypes


@dataclasses.dataclass(frozen=True)
class Head:
    """The output layer and loss of a task. multiclass: `num_classes`; regression: the training target's mean
    and standard deviation, so that the linear output starts on the label's scale (the target may be the label
    after `transform`)."""

    task: str = tasks.BINARY
    num_classes: int = 0
    label_mean: float = 0.0
    label_std: float = 1.0

    def __post_init__(self):
        tasks.spec(self.task)
        if self.task == tasks.MULTICLASS and self.num_classes < 2:
            raise ValueError(f"a multi-class head needs at least 2 classes, got {self.num_classes}")
        if not self.label_std > 0:
            raise ValueError(f"the regression target's standard deviation must be > 0, got {self.label_std}")


def _round_up(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def embedding_dim(num_tokens: int, max_dim: int) -> int:
    """The usual rule of thumb, 6 * n^(1/4), capped."""
    return max(2, min(max_dim, int(math.ceil(6 * num_tokens**0.25))))


class AccumulatingModel(keras.Model):
    """A functional model whose train step accumulates gradients over `accum_steps` micro-batches.

    Each input batch is split into `accum_steps` equal micro-batches, processed one after another in a
    `tf.while_loop` (so activations of one micro-batch at a time are live), and one update is applied with
    the mean gradient: the same update as one step on the whole batch. Loss scaling of a mixed_float16
    optimizer is honoured.
    """

    def __init__(self, *args, accum_steps: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.accum_steps = int(accum_steps)

    def train_step(self, data):
        x, y = data[0], data[1]
        steps = self.accum_steps
        micro = tf.shape(y)[0] // steps
        variables = self.trainable_variables
        scaled = isinstance(self.optimizer, keras.mixed_precision.LossScaleOptimizer)

        def accumulate(i, totals):
            start = i * micro
            x_i = {name: value[start : start + micro] for name, value in x.items()}
            y_i = y[start : start + micro]
            with tf.GradientTape() as tape:
                y_pred = self(x_i, training=True)
                loss = self.compute_loss(x_i, y_i, y_pred) / steps
                if scaled:
                    loss = self.optimizer.get_scaled_loss(loss)
            grads = tape.gradient(loss, variables)
            self.compiled_metrics.update_state(y_i, y_pred)
            return i + 1, [t + tf.convert_to_tensor(g) for t, g in zip(totals, grads, strict=True)]

        # An explicit while_loop (Keras' train function is not AutoGraph-converted, see components/training/fit.py).
        _, totals = tf.while_loop(
            lambda i, _: i < steps, accumulate, (tf.constant(0), [tf.zeros_like(v) for v in variables])
        )
        if scaled:
            totals = self.optimizer.get_unscaled_gradients(totals)
        self.optimizer.apply_gradients(zip(totals, variables, strict=True))
        return {m.name: m.result() for m in self.metrics}


def build_model(
    config: features_lib.FeatureConfig,
    num_tokens: Mapping[str, int],
    params: ModelParams = ModelParams(),
    grad_accum_steps: int = 1,
    steps_per_execution: int = 1,
    jit_compile: bool = False,
    head: Optional[Head] = None,
    inputs: Optional[Sequence[ModelInput]] = None,
    train_steps: int = 0,
    recompute: bool = False,
) -> keras.Model:
    """A compiled wide-and-deep model of the task's head, in the current tf-keras dtype policy.

    `inputs` (default: the feature config's roles, `inputs_of`) are transformed features, rank-1 per example
    ([batch, 1]); `num_tokens` maps each categorical and bucketized transformed feature name to its id range
    (vocabulary plus OOV buckets, or bucket count), as Transform reports it. `head` defaults to the config's
    task (a multi-class head needs its class count). The output layer and the loss stay float32 under any
    policy. `train_steps` (optimizer updates) sets adamw's warmup and decay; `recompute` recomputes each
    Transformer block's activations in the backward pass. Build it inside the distribution strategy's scope.
    """
    head = head or Head(config.task)
    if head.task != config.task:
        raise ValueError(f"the head is for task '{head.task}', the feature config's task is '{config.task}'")
    model_inputs: Dict[str, keras.layers.Input] = {}
    deep, wide = [], []
    pooled = []  # text encodings that join the head directly (a Transformer's pooled output)
    preset, transformer = params.preset_spec, params.encoder
    for spec in inputs if inputs is not None else inputs_of(config, num_tokens):
        if spec.kind == "text":
            # Any width up to spec.length: training feeds batches cut to their rows' length (input_pipeline).
            ids = model_inputs[spec.name] = keras.layers.Input(shape=(None,), name=spec.name, dtype="int64")
            mask = model_inputs[spec.mask] = keras.layers.Input(shape=(None,), name=spec.mask, dtype="int64")
            if params.tokens_read(spec.length) < spec.length:
                ids, mask = encoder_lib.TokenPrefix(params.tokens_read(spec.length), name=f"{spec.name}_prefix")(
                    [ids, mask]
                )
            if transformer is not None:
                pooled.append(
                    encoder_lib.transformer_encoder(
                        ids,
                        mask,
                        spec.tokens,
                        transformer,
                        params.dropout,
                        spec.name,
                        recompute=recompute,
                        pooling=params.encoder_pooling,
                        attention_dropout=params.attention_dropout,
                    )
                )
            else:
                deep.append(encoder_lib.bag_of_embeddings(ids, mask, spec.tokens, preset.text_embedding_dim, spec.name))
            continue
        if spec.kind == "numeric":
            model_inputs[spec.name] = keras.layers.Input(shape=(1,), name=spec.name, dtype="float32")
            deep.append(model_inputs[spec.name])
            continue
        model_inputs[spec.name] = keras.layers.Input(shape=(1,), name=spec.name, dtype="int64")
        wide.append(
            keras.layers.CategoryEncoding(num_tokens=spec.tokens, output_mode="one_hot", name=f"{spec.name}_onehot")(
                model_inputs[spec.name]
            )
        )
        emb = keras.layers.Embedding(spec.tokens, params.embedding_dim(spec.tokens), name=f"{spec.name}_embedding")(
            model_inputs[spec.name]
        )
        deep.append(keras.layers.Flatten(name=f"{spec.name}_flat")(emb))
    if not model_inputs:
        raise ValueError("the model has no inputs: the transformed features hold nothing but the label")

    x = _concat(deep, "deep_inputs") if deep else None
    for i, units in enumerate(params.units if x is not None else ()):
        x = keras.layers.Dense(units, activation="relu", name=f"deep_{i}")(x)
        if params.dropout:
            x = keras.layers.Dropout(params.dropout, name=f"dropout_{i}")(x)
    both = _concat(([x] if x is not None else []) + pooled + wide, "wide_and_deep")
    if params.head_dropout:
        both = keras.layers.Dropout(params.head_dropout, name="head_dropout")(both)
    # Fine-tuning: the classifier starts as BERT's does (run_classifier.py: a truncated normal of 0.02).
    output, loss, metrics = _head(head, both, encoder_lib.bert_initializer() if params.pretrained else None)
    if grad_accum_steps > 1:
        model = AccumulatingModel(inputs=model_inputs, outputs=output, accum_steps=grad_accum_steps)
    else:
        model = keras.Model(inputs=model_inputs, outputs=output)
    optimizer = make_optimizer(params, train_steps)
    if keras.mixed_precision.global_policy().name == "mixed_float16":
        # Loss scaling keeps small float16 gradients from flushing to zero.
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=loss,
        metrics=metrics,
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
    )
    return model


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """A Transformer's schedule: from 0 up to `peak` over `warmup_steps`, then linearly down to 0 at
    `total_steps` (as Hugging Face's get_linear_schedule_with_warmup; BERT's own restarts the decay from
    step 0, so its rate drops by the warmup's share when the warmup ends)."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        self.peak, self.warmup_steps, self.total_steps = float(peak), int(warmup_steps), int(total_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        rising = self.peak * step / max(1, self.warmup_steps)
        falling = self.peak * tf.maximum(0.0, (self.total_steps - step) / max(1, self.total_steps - self.warmup_steps))
        return tf.where(step < self.warmup_steps, rising, falling)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


def learning_rate_schedule(params: ModelParams, train_steps: int = 0):
    """adamw's rate over `train_steps` updates: a WarmupLinearDecay, or the constant rate without a step count
    (and for other optimizers)."""
    if params.optimizer_name != "adamw" or not train_steps:
        return params.learning_rate
    return WarmupLinearDecay(params.learning_rate, int(params.warmup_share * train_steps), train_steps)


def make_optimizer(params: ModelParams, train_steps: int = 0) -> keras.optimizers.Optimizer:
    """The optimizer of `params`: adamw with BERT's warmup and linear decay over `train_steps` (a constant rate
    without them), weight decay left off biases and layer norms as in BERT; adam; sgd."""
    name = params.optimizer_name
    # BERT clips the gradients' global norm (optimization.py: tf.clip_by_global_norm(grads, 1.0)).
    clip = {"global_clipnorm": params.clip_norm} if params.clip_norm else {}
    epsilon = {"epsilon": params.adam_epsilon} if params.adam_epsilon is not None else {}
    if name == "adamw":
        optimizer = keras.optimizers.AdamW(
            learning_rate=learning_rate_schedule(params, train_steps),
            weight_decay=params.weight_decay,
            **epsilon,
            **clip,
        )
        # Biases and layer norms' scales and offsets, by their variables' own names (re.search patterns).
        optimizer.exclude_from_weight_decay(var_names=[r"(^|/)(bias|gamma|beta):\d+$"])
        return optimizer
    if name == "adam":
        return keras.optimizers.Adam(learning_rate=params.learning_rate, **epsilon, **clip)
    return keras.optimizers.SGD(learning_rate=params.learning_rate, **clip)


def _head(head: Head, features, initializer=None):
    """(output, loss, metrics) of the task, float32 whatever the compute policy, so that exported signatures
    return float32 and the loss is not computed in 16 bits. The metrics' names are the task's
    `training_metrics` (tasks.py). `initializer`: the output layer's kernel's (None: Keras' default)."""
    init = {"kernel_initializer": initializer} if initializer is not None else {}
    if head.task == tasks.MULTICLASS:
        output = keras.layers.Dense(head.num_classes, activation="softmax", dtype="float32", name="scores", **init)(
            features
        )
        return (
            output,
            keras.losses.SparseCategoricalCrossentropy(),
            [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
    if head.task == tasks.REGRESSION:
        unit = keras.layers.Dense(1, dtype="float32", name="standardized_prediction", **init)(features)
        # The target's own scale: the dense layer starts near 0 and learns a standardized value.
        output = keras.layers.Rescaling(head.label_std, offset=head.label_mean, dtype="float32", name="prediction")(
            unit
        )
        return (
            output,
            keras.losses.MeanSquaredError(),
            [keras.metrics.RootMeanSquaredError(name="rmse"), keras.metrics.MeanAbsoluteError(name="mae")],
        )
    output = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="probability", **init)(features)
    return (
        output,
        keras.losses.BinaryCrossentropy(),
        [keras.metrics.BinaryAccuracy(name="binary_accuracy"), keras.metrics.AUC(name="auc")],
    )


def _concat(tensors: Sequence, name: str):
    return tensors[0] if len(tensors) == 1 else keras.layers.Concatenate(name=name)(list(tensors))
