"""MLflow's loader of a text model: in a fresh process, TensorFlow alone cannot read a graph of TF Text's ops; the
loader (the file MLflow copies beside the model) can, and answers as MLflow's TensorFlow flavour does."""

import json
import os
import subprocess
import sys

import pytest

from tfxflow.components import tf_text_pyfunc

pytestmark = pytest.mark.integration

# Saves a module whose graph normalizes text with TF Text's own op (NormalizeUTF8) and counts its characters.
SAVE = """
import sys
import tensorflow as tf
import tensorflow_text as text

class Lengths(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, strings):
        return tf.strings.length(text.normalize_utf8(strings, "NFKC"), unit="UTF8_CHAR")

tf.saved_model.save(Lengths(), sys.argv[1])
"""

# Loads it in a fresh process, as `mlflow models serve` does: argv[1] "tensorflow" (tf.saved_model.load alone,
# what MLflow's TensorFlow flavour does) or "loader" (this project's loader module, found on sys.path as MLflow
# puts the model's code folder there).
LOAD = """
import json, sys
import numpy as np
if sys.argv[1] == "loader":
    sys.path.insert(0, sys.argv[3])
    import tf_text_pyfunc
    model = tf_text_pyfunc._load_pyfunc(sys.argv[2])
    print(json.dumps(model.predict(np.array(["ﬁne", "x y"], dtype=object)).tolist()))
else:
    import tensorflow as tf
    tf.saved_model.load(sys.argv[2])
"""


def _python(code, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env)


def test_the_loader_reads_a_graph_of_tf_text_ops_that_tensorflow_alone_cannot(tmp_path):
    saved = _python(SAVE, str(tmp_path / "model"))
    assert saved.returncode == 0, saved.stderr[-2000:]
    alone = _python(LOAD, "tensorflow", str(tmp_path / "model"))
    assert alone.returncode != 0 and "Op type not registered 'NormalizeUTF8'" in alone.stderr
    code = tmp_path / "code"
    code.mkdir()
    (code / "tf_text_pyfunc.py").write_text(open(tf_text_pyfunc.__file__, encoding="utf-8").read())
    loaded = _python(LOAD, "loader", str(tmp_path / "model"), str(code))
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    # NFKC turns the ligature "ﬁ" into "f" "i": 4 characters.
    assert json.loads(loaded.stdout.strip().splitlines()[-1]) == [4, 3]


def test_the_loader_takes_what_mlflows_tensorflow_flavour_takes():
    model = tf_text_pyfunc.TextModule(lambda tensor: tensor)
    with pytest.raises(TypeError, match="a NumPy array or a list of strings, not dict"):
        model.predict({"text": ["a"]})
