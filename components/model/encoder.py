"""Text encoders of the built-in model (tf-keras): a BERT-style Transformer encoder and, for small data on a
CPU, the mean of word-piece embeddings. Both take Transform's token ids and attention mask."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model.presets import Encoder

LAYER_NORM_EPSILON = 1e-12  # BERT's


def _initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)  # BERT's


class PositionEmbedding(keras.layers.Layer):
    """Learned absolute positions, the first `length` of `max_positions`, added to the token embeddings."""

    def __init__(self, max_positions: int, **kwargs):
        super().__init__(**kwargs)
        self.max_positions = max_positions

    def build(self, input_shape):
        self.table = self.add_weight(
            "embeddings", shape=(self.max_positions, input_shape[-1]), initializer=_initializer()
        )
        super().build(input_shape)

    def call(self, embeddings):
        length = tf.shape(embeddings)[1]
        return embeddings + tf.cast(self.table[:length], embeddings.dtype)[tf.newaxis]

    def get_config(self):
        return {**super().get_config(), "max_positions": self.max_positions}


class TransformerBlock(keras.layers.Layer):
    """One post-layer-norm encoder block as BERT's: self-attention, then a GELU feed-forward layer, each with
    dropout, a residual connection and layer normalization."""

    def __init__(self, hidden: int, heads: int, intermediate: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.heads, self.intermediate, self.dropout = hidden, heads, intermediate, dropout
        self.attention = keras.layers.MultiHeadAttention(
            heads, hidden // heads, dropout=dropout, kernel_initializer=_initializer(), name="attention"
        )
        self.attention_dropout = keras.layers.Dropout(dropout)
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="attention_norm"
        )
        self.up = keras.layers.Dense(intermediate, activation="gelu", kernel_initializer=_initializer(), name="up")
        self.down = keras.layers.Dense(hidden, kernel_initializer=_initializer(), name="down")
        self.output_dropout = keras.layers.Dropout(dropout)
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="output_norm"
        )

    def call(self, x, attention_mask, training=None):
        attended = self.attention(x, x, attention_mask=attention_mask, training=training)
        x = tf.cast(self.attention_norm(x + self.attention_dropout(attended, training=training)), self.compute_dtype)
        y = self.down(self.up(x))
        return tf.cast(self.output_norm(x + self.output_dropout(y, training=training)), self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden": self.hidden,
            "heads": self.heads,
            "intermediate": self.intermediate,
            "dropout": self.dropout,
        }


def transformer_encoder(ids, mask, vocab_size: int, spec: Encoder, dropout: float, name: str):
    """The pooled output ([batch, hidden]: a tanh layer over the [CLS] position) of a BERT encoder over `ids`
    and `mask` ([batch, length] int64 Keras tensors)."""
    x = keras.layers.Embedding(vocab_size, spec.hidden, embeddings_initializer=_initializer(), name=f"{name}_tokens")(
        ids
    )
    x = PositionEmbedding(spec.max_positions, name=f"{name}_positions")(x)
    x = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype="float32", name=f"{name}_embedding_norm")(x)
    x = keras.layers.Dropout(dropout, name=f"{name}_embedding_dropout")(x)
    # [batch, 1, length]: every position attends to the tokens, not to the padding.
    attention_mask = keras.layers.Lambda(
        lambda m: tf.cast(m, tf.bool)[:, tf.newaxis, :], name=f"{name}_attention_mask"
    )(mask)
    for i in range(spec.layers):
        x = TransformerBlock(spec.hidden, spec.heads, spec.intermediate, dropout, name=f"{name}_block_{i}")(
            x, attention_mask
        )
    first = keras.layers.Lambda(lambda t: t[:, 0], name=f"{name}_cls")(x)
    return keras.layers.Dense(spec.hidden, activation="tanh", kernel_initializer=_initializer(), name=f"{name}_pooled")(
        first
    )


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
