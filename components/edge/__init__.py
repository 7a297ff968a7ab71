"""The edge: the model as TensorFlow Lite, float32 and int8 (edge_convert), checked in a process of its own (edge_probe)
and published only where it answers as the SavedModel does (edge)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "EdgeExport": "edge.EdgeExport",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
