"""Tracking: the MLflow components of the pipeline (tracking), the MLflow run they write (mlflow_runs), what the
artifacts say (artifact_readers), the model registry (model_registry), the outbox that keeps a run through an
outage (tracking_outbox), a team server's authentication (mlflow_auth), and the registered model's pyfunc loader
(savedmodel_pyfunc)."""

from tfxflow.components import lazy_exports

_EXPORTS = {
    "MlflowStart": "tracking.MlflowStart",
    "MlflowRecord": "tracking.MlflowRecord",
    "MlflowFinish": "tracking.MlflowFinish",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
