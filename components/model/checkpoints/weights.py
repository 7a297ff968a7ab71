"""A located checkpoint's weights, whatever its format, in this project's encoder layout, checked against its
architecture: what warm_start.py assigns to the encoder."""

from __future__ import annotations

from typing import Dict

import numpy as np

from tfxflow.components.model.checkpoints.description import HUGGING_FACE, SAVED_MODEL, Checkpoint
from tfxflow.components.model.checkpoints.hugging_face import hugging_face_weights
from tfxflow.components.model.checkpoints.layout import check_shapes, encoder_shapes
from tfxflow.components.model.checkpoints.saved_model import saved_model_weights
from tfxflow.components.model.checkpoints.tf_checkpoint import tf_checkpoint_weights


def weights(checkpoint: Checkpoint) -> Dict[str, np.ndarray]:
    """The encoder's weights in this project's layout ({"block_0/qkv/kernel": array, ...}), float32, read from
    a local copy of the checkpoint (the Trainer fetches one from an object store first)."""
    if checkpoint.kind == SAVED_MODEL:
        mapped = saved_model_weights(checkpoint)
    elif checkpoint.kind == HUGGING_FACE:
        mapped = hugging_face_weights(checkpoint)
    else:
        mapped = tf_checkpoint_weights(checkpoint)
    shapes = encoder_shapes(checkpoint.encoder, checkpoint.vocab_size, checkpoint.has_pooler)
    check_shapes(checkpoint.path, mapped, shapes, "the weights")
    return {key: np.asarray(value, dtype=np.float32) for key, value in mapped.items()}
