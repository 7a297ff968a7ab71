"""Validation: the curated schema carried into a compiled pipeline (schema), the statistics of the served model's
data (baseline), drift and skew (drift, folder_statistics), and the data gate that stops a run (gate)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "DataGate": "gate.DataGate",
    "ServedBaseline": "baseline.ServedBaseline",
    "EmbeddedSchema": "schema.EmbeddedSchema",
    "BlessedDataStatisticsStrategy": "baseline.BlessedDataStatisticsStrategy",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
