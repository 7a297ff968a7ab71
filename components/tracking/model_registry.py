"""The model registry: a pushed model logged in MLflow's pyfunc flavour and registered as a new version, once per
pushed (TF Serving) version, and the `champion` alias on the version being served."""

import contextlib
import importlib.metadata
import os
from typing import Any, Dict, Optional

from tfxflow.components import names
from tfxflow.components.model import model_info
from tfxflow.components.tracking import savedmodel_pyfunc
from tfxflow.components.tracking import tracking_outbox as outbox_lib

# On a registered version that `tfxflow rollback` served again: the serving versions of its copies.
REPUBLISHED_AS_TAG = "tfxflow.republished_as"
CHAMPION_ALIAS = "champion"


def log_serving_model(uri: str, run_id: str, saved_model_dir: str, registered_name: str) -> Any:
    """Logs the pushed SavedModel, copied as it is, in MLflow's pyfunc flavour (its loader:
    components/tracking/savedmodel_pyfunc.py) and registers it as a new version of `registered_name`. Input: serialized
    tf.Examples (without the label) as URL-safe base64 strings (`base64.urlsafe_b64encode`), so `mlflow models
    serve` takes them as JSON; output: the task's prediction (probabilities [n, 1], a multi-class model's scores
    [n, K] in its classes' order, a regression's predictions [n, 1]; a user's own model's only output)."""
    import mlflow
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from tfxflow.components.model import text  # imports TensorFlow

    described = model_info.describe(saved_model_dir)
    needs_text = text.load_ops_for(saved_model_dir)
    outputs = model_info.signature_outputs(saved_model_dir, names.SERVING_SIGNATURE)
    if not outputs:
        raise ValueError(f"{saved_model_dir} has no readable SavedModel with a '{names.SERVING_SIGNATURE}' signature")
    key = described["prediction_key"] or outputs[0]
    width = len(described["classes"]) if described["task"] == "multiclass" and described["classes"] else 1
    if not described["prediction_key"]:
        width = -1  # a user's model: its output's width is its own

    # Unnamed tensors: MLflow hands the loader a plain array of base64 strings.
    signature = ModelSignature(
        inputs=Schema([TensorSpec(np.dtype(object), (-1,))]),
        outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, width))]),
    )
    # Explicit requirements: MLflow's inference loads the model once more in a subprocess (~10 s).
    dists = ("tensorflow", "tensorflow-transform") + (("tensorflow-text",) if needs_text else ())
    requirements = [f"{dist}=={importlib.metadata.version(dist)}" for dist in dists]
    # The fluent API is the only way to log a flavour; point it at this run, and put it back after.
    with fluent_api_at(uri):
        with mlflow.start_run(run_id=run_id):
            return mlflow.pyfunc.log_model(
                name="model",
                loader_module=savedmodel_pyfunc.__name__.rsplit(".", 1)[-1],
                data_path=saved_model_dir,
                code_paths=[savedmodel_pyfunc.__file__],
                model_config={
                    savedmodel_pyfunc.SIGNATURE: names.SERVING_SIGNATURE,
                    savedmodel_pyfunc.OUTPUT: key,
                    savedmodel_pyfunc.TEXT_OPS: bool(needs_text),
                },
                signature=signature,
                registered_model_name=registered_name,
                pip_requirements=requirements,
                metadata={"task": described["task"], "classes": described["classes"], "output": key},
            )


FLUENT_URI_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


@contextlib.contextmanager
def fluent_api_at(uri: str):
    """Points MLflow's process-wide fluent API (tracking and registry) at `uri`, then puts back both URIs and
    the variables MLflow's setters also write ($MLFLOW_TRACKING_URI, $MLFLOW_REGISTRY_URI): later code in
    this process, another component of LocalDagRunner's included, resolves URIs as before."""
    import mlflow

    saved_env = {key: os.environ.get(key) for key in FLUENT_URI_ENV}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        # Unset, MLflow resolves both from the variables again; its setters write them too, so a URI set
        # before this call is in them and comes back.
        mlflow.set_tracking_uri(None)
        mlflow.set_registry_uri(None)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def served_version(mlflow_client, registered_name: str, pushed_version: str) -> Optional[str]:
    """The registered version already recorded for the pushed (TF Serving) version, if any."""
    from mlflow.exceptions import MlflowException

    try:
        versions = mlflow_client.search_model_versions(f"name='{registered_name}'")
    except MlflowException as err:
        if outbox_lib.outage_reason(err):
            raise  # no answer is not "not registered": the caller waits or keeps the operation
        return None
    return next((v.version for v in versions if v.tags.get("tfxflow.pushed_version") == pushed_version), None)


def register_push(mlflow_client, uri: str, run_id: str, op: Dict[str, Any]) -> None:
    """Logs the pushed SavedModel to the run and registers it (once per pushed version), moves the champion
    alias to it and tags the run with the registered version. `uri`: the tracking URI, resolved
    (`mlflow_runs.resolve_uri`)."""
    registered_name, version = op["registered_name"], op["pushed_version"]
    registered = served_version(mlflow_client, registered_name, version)
    if registered is None:  # a cached Pusher hands on a push that is registered already
        # A try that stopped between registering and tagging left a version of this run: tag that one.
        ours = [v for v in mlflow_client.search_model_versions(f"name='{registered_name}'") if v.run_id == run_id]
        if ours:
            registered = ours[0].version
        else:
            logged = log_serving_model(uri, run_id, op["saved_model"], registered_name)
            registered = logged.registered_model_version
        for key, value in (("tfxflow.pushed_version", version), ("tfxflow.pushed_destination", op["destination"])):
            mlflow_client.set_model_version_tag(registered_name, str(registered), key, value)
    if _newer_than_champion(mlflow_client, registered_name, version):
        mlflow_client.set_registered_model_alias(registered_name, CHAMPION_ALIAS, str(registered))
    mlflow_client.set_tag(run_id, "tfxflow.registered_version", str(registered))


def _newer_than_champion(mlflow_client, registered_name: str, pushed_version: str) -> bool:
    """Whether the pushed version is at least the champion's: a push registered late (its run's server did not
    answer) does not take the alias from a newer one, or from a rollback's copy (a higher version too)."""
    from mlflow.exceptions import MlflowException

    try:
        champion = mlflow_client.get_model_version_by_alias(registered_name, CHAMPION_ALIAS)
    except MlflowException as err:
        if outbox_lib.outage_reason(err):
            raise
        return True  # no champion yet
    served = [champion.tags.get("tfxflow.pushed_version", ""), *champion.tags.get(REPUBLISHED_AS_TAG, "").split(",")]
    served = [int(v) for v in served if v.isdigit()]
    return not served or int(pushed_version) >= max(served)
