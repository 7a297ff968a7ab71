"""Tracking: MLflow runs of the pipeline (tracking), the outbox that keeps them through an outage (tracking_outbox),
a team server's authentication (mlflow_auth), and the registered model's pyfunc loader (savedmodel_pyfunc)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "MlflowStart": "tracking.MlflowStart",
    "MlflowRecord": "tracking.MlflowRecord",
    "MlflowFinish": "tracking.MlflowFinish",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
