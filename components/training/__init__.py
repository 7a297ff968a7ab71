"""Training: Transform's executor with sampled analysis (transform), the built-in Trainer's run_fn (trainer) and its
training (fit, with its settings in train_params, its input in input_pipeline, its callbacks in callbacks and the
checkpoint it starts from in pretrained), a module file's run_fn in TFX's Trainer (user_trainer), and devices,
precision and distribution (hardware)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "Transform": "transform.Transform",
    "TransformExecutor": "transform.Executor",
    "run_fn": "trainer.run_fn",
    "UserTrainerExecutor": "user_trainer.Executor",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
