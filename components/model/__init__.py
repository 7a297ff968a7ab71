"""The model every stage reads: the feature config and tasks (features, tasks), the built-in preprocessing_fn
(preprocessing), the Keras model (keras_model, encoder, presets, search_space), text and tokenization (text,
tokenization), pretrained checkpoints (checkpoints, warm_start), the export's signatures (export) and what the
exported model records of itself (model_info)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "FeatureConfig": "features.FeatureConfig",
    "preprocessing_fn": "preprocessing.preprocessing_fn",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
