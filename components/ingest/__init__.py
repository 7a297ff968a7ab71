"""Ingest: CSV files checked (csv_check) and written as TFX's tf.Examples by ExampleGen's executor (csv_input,
tf_example); systematic samples of large splits for the steps that need no more (sampling)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "ExampleGenExecutor": "csv_input.Executor",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
