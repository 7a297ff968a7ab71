"""The `training` section of the Trainer's custom_config: input pipeline, schedule and callbacks.

Batches and steps: `batch_size` is per replica; a step consumes the global batch, `batch_size` x replicas
(x gradient-accumulation steps), and `train_steps` counts those steps. The learning rate applies to the
global batch as given: moving to more GPUs changes the global batch, so revisit the rate with it."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Tuple

from tfxflow.components.model import presets
from tfxflow.components.settings import strict_fields


@dataclasses.dataclass(frozen=True)
class TrainParams:
    """Input pipeline, schedule and callbacks."""

    batch_size: int = presets.BATCH_SIZE  # per replica
    # Passes over the training split when the Trainer is given no step count (TFX's num_steps 0).
    train_epochs: Optional[int] = None
    eval_every_steps: int = presets.EVAL_EVERY_STEPS
    shuffle_buffer: int = 10_000
    cache: bool = True  # keep serialized records in memory after the first pass, when they are small:
    cache_max_mb: int = 64  # at most this much compressed input (several times that in memory)
    max_eval_batches: int = 100  # validation after each epoch reads at most this many batches
    # Text batches grouped by length, each cut to the narrowest of this many widths that holds its rows
    # (input_pipeline.group_by_length); 0: every batch at the full sequence_length.
    length_buckets: int = presets.LENGTH_BUCKETS
    seed: int = presets.SEED
    grad_accum_steps: int = presets.GRAD_ACCUM_STEPS
    early_stopping_patience: int = presets.EARLY_STOPPING_PATIENCE  # epochs without val_loss improvement; 0: off
    backup_root: Optional[str] = None  # durable folder for BackupAndRestore; None: no resume
    profile_steps: Tuple[int, int] = (0, 0)  # a profiler trace of these steps (first, last); (0, 0): none

    def __post_init__(self):
        if self.batch_size < 1 or self.grad_accum_steps < 1 or self.eval_every_steps < 1:
            raise ValueError("batch_size, grad_accum_steps and eval_every_steps must be >= 1")
        if self.length_buckets < 0:
            raise ValueError(f"length_buckets must be >= 0, got {self.length_buckets}")
        if self.train_epochs is not None and self.train_epochs < 1:
            raise ValueError(f"train_epochs must be >= 1, got {self.train_epochs}")
        first, last = self.profile_steps
        if (first, last) != (0, 0) and not 1 <= first <= last:
            raise ValueError(f"profile_steps must be two steps, first <= last, from 1; got {self.profile_steps}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainParams":
        """The `training` section of the Trainer's custom_config; raises ValueError naming an unknown key."""
        values = {k: v for k, v in strict_fields(cls, data, "custom_config['training']").items() if v is not None}
        if values.get("profile_steps") is not None:
            values["profile_steps"] = tuple(int(s) for s in values["profile_steps"])
        else:
            values.pop("profile_steps", None)
        return cls(**values)

    def global_batch(self, replicas: int) -> int:
        """Per-replica batch x replicas."""
        return self.batch_size * replicas

    def effective_batch(self, replicas: int) -> int:
        """Examples one optimizer step consumes across all replicas: the global batch times the
        gradient-accumulation steps. Each dataset batch has this size."""
        return self.global_batch(replicas) * self.grad_accum_steps
