"""MLflow's pyfunc loader (`loader_module`) of every registered model: the pushed SavedModel itself, file for
file, answering serialized tf.Examples sent as URL-safe base64 strings (`base64.urlsafe_b64encode`: JSON, and
so `mlflow models serve`, cannot carry raw bytes).

Logging copies the pushed folder: nothing is loaded or saved again, so what MLflow holds is what TF Serving
serves. `model_config` names the signature to call, its output to answer with, and whether the graph tokenizes
with TF Text's ops, which TensorFlow does not know in a fresh process until `tensorflow_text` is imported (the
load fails with "Op type not registered").

MLflow copies this file beside the model (`code_paths`) and imports it by its name: it imports nothing of
tfxflow, only what the model's requirements list (tensorflow, tensorflow-text, numpy).
"""

SIGNATURE, OUTPUT, TEXT_OPS = "signature", "output", "text_ops"  # the keys of model_config


class SavedModelPredictor:
    """A loaded SavedModel's signature that takes a batch of base64 strings of serialized tf.Examples."""

    def __init__(self, loaded, signature: str, output: str):
        self.loaded = loaded
        self.signature = loaded.signatures[signature]
        self.output = output

    def get_raw_model(self):
        return self.loaded

    def predict(self, data, params=None):
        import base64

        import numpy as np
        import tensorflow as tf

        if not isinstance(data, (np.ndarray, list)):
            raise TypeError(
                f"the model takes a NumPy array or a list of base64 strings of tf.Examples, not {type(data).__name__}"
            )
        values = [v.encode() if isinstance(v, str) else bytes(v) for v in np.asarray(data, dtype=object).ravel()]
        # tf.io.decode_base64's alphabet, where the padding is optional.
        examples = [base64.urlsafe_b64decode(v + b"=" * (-len(v) % 4)) for v in values]
        result = self.signature(examples=tf.constant(examples, dtype=tf.string))[self.output]
        return result.numpy()


def _load_pyfunc(path, model_config):
    """MLflow's loader entry point: `path` is the model's data folder, the SavedModel; `model_config` is what
    logging gave (SIGNATURE, OUTPUT, TEXT_OPS)."""
    import tensorflow as tf

    if model_config[TEXT_OPS]:
        import tensorflow_text  # noqa: F401 (registers TF Text's ops before the graph is read)

    return SavedModelPredictor(tf.saved_model.load(path), model_config[SIGNATURE], model_config[OUTPUT])
