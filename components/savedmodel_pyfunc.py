"""MLflow's pyfunc loader (`loader_module`) of a registered model whose graph tokenizes with TF Text's ops.

MLflow's TensorFlow flavour loads a SavedModel with `tf.saved_model.load` alone, and in a fresh process (`mlflow
models serve`, `mlflow.pyfunc.load_model`) TensorFlow does not know TF Text's ops until `tensorflow_text` is
imported: the load fails with "Op type not registered". This loader imports it first, then answers as MLflow's
TensorFlow flavour does (a NumPy array or list in, the module's output as a NumPy array out).

MLflow copies this file beside the model (`code_paths`) and imports it by its name: it imports nothing of
tfxflow, only what the model's requirements list (tensorflow, tensorflow-text, numpy).
"""


class TextModule:
    """A loaded tf.Module whose `__call__` takes a batch of strings."""

    def __init__(self, module):
        self.module = module

    def get_raw_model(self):
        return self.module

    def predict(self, data, params=None):
        import numpy as np
        import tensorflow as tf

        if not isinstance(data, (np.ndarray, list)):
            raise TypeError(f"the model takes a NumPy array or a list of strings, not {type(data).__name__}")
        result = self.module(tf.convert_to_tensor(data))
        return result.numpy() if isinstance(result, tf.Tensor) else result


def _load_pyfunc(path):
    """MLflow's loader entry point: `path` is the model's data folder, a SavedModel."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers TF Text's ops before the graph is read)

    return TextModule(tf.saved_model.load(path))
