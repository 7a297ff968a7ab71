"""Text encoders of the built-in model (tf-keras): a BERT-style Transformer encoder and, for small data on a
CPU, the mean of word-piece embeddings. Both take Transform's token ids and attention mask.

The Transformer is BERT's layout (Hugging Face's BertModel, google-research/bert's modeling.py; DistilBERT,
ELECTRA's discriminator, RoBERTa and XLM-R are of it too): learned positions and the embeddings' layer norm (then,
for ELECTRA's narrower embeddings, a projection to the hidden width), post-layer-norm blocks of multi-head
self-attention and a feed-forward layer, then a sentence's vector by the pooling of presets.POOLINGS. Its
architecture (presets.Encoder) comes from a preset or from a pretrained checkpoint's config
(components/model/checkpoints/), whose weights it then takes as they are."""

from __future__ import annotations

import math
from typing import Optional

import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import presets
from tfxflow.components.model.presets import Encoder

LAYER_NORM_EPSILON = presets.LAYER_NORM_EPSILON


def bert_initializer():
    """BERT's initializer of every weight matrix: a truncated normal of standard deviation 0.02."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


class PositionEmbedding(keras.layers.Layer):
    """Learned absolute positions, the first `length` of `max_positions`, added to the token embeddings."""

    def __init__(self, max_positions: int, **kwargs):
        super().__init__(**kwargs)
        self.max_positions = max_positions

    def build(self, input_shape):
        self.table = self.add_weight(
            "embeddings", shape=(self.max_positions, input_shape[-1]), initializer=bert_initializer()
        )
        super().build(input_shape)

    def call(self, embeddings):
        length = tf.shape(embeddings)[1]
        return embeddings + tf.cast(self.table[:length], embeddings.dtype)[tf.newaxis]

    def get_config(self):
        return {**super().get_config(), "max_positions": self.max_positions}


def attend(q, k, v, bias, seed, rate: float):
    """dropout(softmax(q k^T + bias)) @ v: `q` (already scaled), `k` and `v` [batch, heads, length, size] of the
    compute dtype, `bias` [batch, 1, 1, length] float32 (the padding's), the softmax in float32, the dropout
    stateless of `seed` + [0, 0]. Its backward pass keeps its inputs only: the scores, the probabilities, the
    dropped probabilities and the dropout's mask ([batch, heads, length, length] each, the largest activations of a
    block at BERT's lengths) are computed again from them (the mask from the same seed), as a fused attention
    kernel's backward pass does. The same values forward and the same gradients as the composite form. The gradient
    reads only the function's inputs, as a SavedModel's custom gradients must."""

    def probabilities(q, k, bias, seed):
        scores = tf.cast(tf.einsum("bhqd,bhkd->bhqk", q, k), tf.float32) + bias
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), v.dtype)
        return probs, (tf.nn.experimental.stateless_dropout(probs, rate, seed) if rate else probs)

    @tf.custom_gradient
    def forward(q, k, v, bias, seed):
        def grad(d_context):
            probs, dropped = probabilities(q, k, bias, seed)
            d_values = tf.einsum("bhqk,bhqd->bhkd", dropped, d_context)
            d_dropped = tf.einsum("bhqd,bhkd->bhqk", d_context, v)
            d_probs = tf.nn.experimental.stateless_dropout(d_dropped, rate, seed) if rate else d_dropped
            p, d_probs = tf.cast(probs, tf.float32), tf.cast(d_probs, tf.float32)
            d_scores = tf.cast(p * (d_probs - tf.reduce_sum(d_probs * p, axis=-1, keepdims=True)), q.dtype)
            d_q = tf.einsum("bhqk,bhkd->bhqd", d_scores, k)
            d_k = tf.einsum("bhqk,bhqd->bhkd", d_scores, q)
            return d_q, d_k, d_values, None, None

        return tf.einsum("bhqk,bhkd->bhqd", probabilities(q, k, bias, seed)[1], v), grad

    return forward(q, k, v, bias, seed + tf.constant([0, 0], tf.int32))


def _gelu_derivative(x, approximate: bool):
    """d/dx of tf.nn.gelu(x, approximate), from x."""
    if approximate:
        c, a = 0.7978845608028654, 0.044715
        t = tf.tanh(c * (x + a * x * x * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x)
    cdf = 0.5 * (1 + tf.math.erf(x / tf.cast(1.4142135623730951, x.dtype)))
    return cdf + x * tf.exp(-0.5 * x * x) * tf.cast(0.3989422804014327, x.dtype)


def gelu(approximate: bool):
    """tf.nn.gelu whose backward pass needs only its input: TensorFlow's composite form would keep four or five
    intermediates of the feed-forward layer's width (the widest activations of a block) for its gradient. The same
    values forward; the derivative of the same formula backward."""

    @tf.custom_gradient
    def activate(x):
        def grad(dy):
            return dy * _gelu_derivative(x, approximate)

        return tf.nn.gelu(x, approximate=approximate), grad

    return activate


def activation_fn(name: str):
    """The feed-forward activation of presets.ACTIVATIONS."""
    if name == presets.GELU_ERF:
        return gelu(approximate=False)
    if name == presets.RELU:
        return tf.nn.relu
    return gelu(approximate=True)


class TransformerBlock(keras.layers.Layer):
    """One post-layer-norm encoder block as BERT's: multi-head self-attention, then a feed-forward layer of
    `activation` (presets.ACTIVATIONS), each with dropout (`attention_dropout` on the attention probabilities,
    `dropout` on each sublayer's output), a residual connection and layer normalization. Softmax and layer norms
    run in float32 under a mixed policy.

    With `recompute`, training keeps only the block's input: its activations are computed again in the backward
    pass (`tf.recompute_grad`). Dropout is stateless, seeded by a seed drawn once per call outside the recomputed
    function, so the backward pass draws the very masks of the forward one and the gradients are exact."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        intermediate: int,
        dropout: float,
        recompute: bool = False,
        activation: str = presets.GELU_TANH,
        layer_norm_epsilon: float = LAYER_NORM_EPSILON,
        attention_dropout: Optional[float] = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
        self.hidden, self.heads, self.intermediate = hidden, heads, intermediate
        self.dropout, self.recompute = float(dropout), bool(recompute)
        self.attention_dropout = self.dropout if attention_dropout is None else float(attention_dropout)
        self.activation, self.layer_norm_epsilon = activation, float(layer_norm_epsilon)
        self._activate = activation_fn(activation)
        self.qkv = keras.layers.Dense(3 * hidden, kernel_initializer=bert_initializer(), name="qkv")
        self.attention_output = keras.layers.Dense(
            hidden, kernel_initializer=bert_initializer(), name="attention_output"
        )
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype="float32", name="attention_norm"
        )
        self.up = keras.layers.Dense(intermediate, kernel_initializer=bert_initializer(), name="up")
        self.down = keras.layers.Dense(hidden, kernel_initializer=bert_initializer(), name="down")
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype="float32", name="output_norm"
        )

    def build(self, input_shape):
        # Every variable exists before a recomputed call (tf.recompute_grad must not create any), each under its
        # layer's name: "<block>/attention_norm/gamma:0", as AdamW's exclusions and checkpoints read them.
        shapes = {self.down: input_shape[:-1] + (self.intermediate,)}
        for layer in (self.qkv, self.attention_output, self.attention_norm, self.up, self.down, self.output_norm):
            with tf.name_scope(layer.name):
                layer.build(shapes.get(layer, input_shape))
        super().build(input_shape)

    def _drop(self, x, seed, site: int, rate: float):
        if not rate:
            return x
        return tf.nn.experimental.stateless_dropout(x, rate, seed + tf.constant([0, site], tf.int32))

    def _forward(self, x, attention_mask, seed, training: bool):
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        size = self.hidden // self.heads
        qkv = tf.reshape(self.qkv(x), [batch, length, 3, self.heads, size])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [batch, heads, length, size]
        # Scaled before the product: float16 scores of long rows would overflow otherwise.
        q = q * tf.cast(1 / math.sqrt(size), q.dtype)
        bias = (1.0 - tf.cast(attention_mask, tf.float32))[:, tf.newaxis, tf.newaxis, :] * -1e9
        rate = self.attention_dropout if training else 0.0
        context = tf.reshape(tf.transpose(attend(q, k, v, bias, seed, rate), [0, 2, 1, 3]), tf.shape(x))
        attended = self.attention_output(context)
        if training:
            attended = self._drop(attended, seed, 1, self.dropout)
        x = tf.cast(self.attention_norm(x + attended), x.dtype)
        y = self.down(self._activate(self.up(x)))
        if training:
            y = self._drop(y, seed, 2, self.dropout)
        return tf.cast(self.output_norm(x + y), x.dtype)

    def call(self, x, attention_mask, training=None):
        training = bool(training)
        seed = (
            tf.random.uniform([2], 0, 2**31 - 1, dtype=tf.int32)
            if training and (self.dropout or self.attention_dropout)
            else tf.zeros([2], tf.int32)
        )
        if training and self.recompute:
            return tf.recompute_grad(lambda inputs, s: self._forward(inputs, attention_mask, s, True))(x, seed)
        return self._forward(x, attention_mask, seed, training)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden": self.hidden,
            "heads": self.heads,
            "intermediate": self.intermediate,
            "dropout": self.dropout,
            "recompute": self.recompute,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "attention_dropout": self.attention_dropout,
        }


def encoder_states(
    ids,
    mask,
    vocab_size: int,
    spec: Encoder,
    dropout: float,
    name: str,
    recompute: bool = False,
    attention_dropout: Optional[float] = None,
):
    """The last hidden states ([batch, length, hidden]) of a BERT encoder of architecture `spec` over `ids` and
    `mask` ([batch, length] int64 Keras tensors); `recompute`: each block's activations recomputed in the
    backward pass."""
    x = keras.layers.Embedding(
        vocab_size, spec.embedding_width, embeddings_initializer=bert_initializer(), name=f"{name}_tokens"
    )(ids)
    x = PositionEmbedding(spec.max_positions, name=f"{name}_positions")(x)
    x = keras.layers.LayerNormalization(
        epsilon=spec.layer_norm_epsilon, dtype="float32", name=f"{name}_embedding_norm"
    )(x)
    x = keras.layers.Dropout(dropout, name=f"{name}_embedding_dropout")(x)
    if spec.embedding_size is not None:  # ELECTRA's embeddings_project: after the embeddings' dropout
        x = keras.layers.Dense(spec.hidden, kernel_initializer=bert_initializer(), name=f"{name}_embedding_projection")(
            x
        )
    for i in range(spec.layers):  # every position attends to the tokens the mask keeps, not to the padding
        x = TransformerBlock(
            spec.hidden,
            spec.heads,
            spec.intermediate,
            dropout,
            recompute=recompute,
            activation=spec.activation,
            layer_norm_epsilon=spec.layer_norm_epsilon,
            attention_dropout=attention_dropout,
            name=f"{name}_block_{i}",
        )(x, mask)
    return x


def pool(states, mask, spec: Encoder, pooling: str, name: str):
    """A sentence's vector ([batch, hidden]) from the last hidden states, by `pooling` (presets.POOLINGS): BERT's
    pooler (a tanh layer over [CLS]), the mean over the tokens the mask keeps, or [CLS]'s state."""
    if pooling == presets.MEAN:
        return MaskedMean(name=f"{name}_mean_pooled")(states, mask)
    first = keras.layers.Lambda(lambda t: t[:, 0], name=f"{name}_cls")(states)
    if pooling == presets.CLS:
        return first
    return keras.layers.Dense(
        spec.hidden, activation="tanh", kernel_initializer=bert_initializer(), name=f"{name}_pooled"
    )(first)


def transformer_encoder(
    ids,
    mask,
    vocab_size: int,
    spec: Encoder,
    dropout: float,
    name: str,
    recompute: bool = False,
    pooling: str = presets.POOLER,
    attention_dropout: Optional[float] = None,
):
    """The pooled output ([batch, hidden]) of a BERT encoder over `ids` and `mask` (encoder_states, then pool)."""
    states = encoder_states(ids, mask, vocab_size, spec, dropout, name, recompute, attention_dropout)
    return pool(states, mask, spec, pooling, name)


class TokenPrefix(keras.layers.Layer):
    """The first `length` tokens of [batch, n] ids and their mask (n >= length), the way the tokenizer truncates: a
    sequence longer than `length` keeps its last token ([SEP]) in the last place. What a tuning trial's shorter
    `sequence_length` reads of the Transform graph's tokens."""

    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = int(length)

    def call(self, inputs):
        ids, mask = inputs
        kept_ids, kept_mask = ids[:, : self.length], mask[:, : self.length]
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        last = tf.gather(ids, tf.maximum(lengths - 1, 0), batch_dims=1)
        end = tf.range(tf.shape(kept_ids)[1]) == self.length - 1  # a batch cut narrower holds no cut row
        cut = tf.logical_and((lengths > self.length)[:, tf.newaxis], end[tf.newaxis, :])
        return tf.where(cut, tf.broadcast_to(last[:, tf.newaxis], tf.shape(kept_ids)), kept_ids), kept_mask

    def get_config(self):
        return {**super().get_config(), "length": self.length}


class MaskedMean(keras.layers.Layer):
    """The mean over the positions the mask keeps (the padding left out)."""

    def call(self, embeddings, mask):
        weights = tf.cast(mask, embeddings.dtype)[:, :, tf.newaxis]
        total = tf.reduce_sum(embeddings * weights, axis=1)
        return total / tf.maximum(tf.reduce_sum(weights, axis=1), tf.cast(1, embeddings.dtype))


def bag_of_embeddings(ids, mask, vocab_size: int, dim: int, name: str):
    """[batch, dim]: the mean embedding of a row's word pieces, [CLS] and [SEP] included."""
    x = keras.layers.Embedding(vocab_size, dim, name=f"{name}_embedding")(ids)
    return MaskedMean(name=f"{name}_mean")(x, mask)
