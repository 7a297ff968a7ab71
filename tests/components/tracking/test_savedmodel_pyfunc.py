"""MLflow's loader of every registered model (the file MLflow copies beside the model): in a fresh process it
loads the SavedModel as it was pushed, TF Text's ops included where the graph uses them (TensorFlow alone
cannot read such a graph), and answers base64 strings of serialized tf.Examples through the named signature."""

import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfxflow.components.tracking import savedmodel_pyfunc

pytestmark = pytest.mark.integration

# Saves a module whose serving_default normalizes the serialized bytes with TF Text's own op (NormalizeUTF8) and
# counts the characters: it reads no tf.Example, so the decoded bytes themselves are what it measures.
SAVE = """
import sys
import tensorflow as tf
import tensorflow_text as text

class Lengths(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        lengths = tf.strings.length(text.normalize_utf8(examples, "NFKC"), unit="UTF8_CHAR")
        return {"lengths": lengths, "bytes": tf.strings.length(examples)}

module = Lengths()
tf.saved_model.save(module, sys.argv[1], signatures={"serving_default": module.serve})
"""

# Loads it in a fresh process, as `mlflow models serve` does: argv[1] "tensorflow" (tf.saved_model.load alone)
# or "loader" (this project's loader module, found on sys.path as MLflow puts the model's code folder there,
# with argv[4] as its model_config).
LOAD = """
import base64, json, sys
import numpy as np
if sys.argv[1] == "loader":
    sys.path.insert(0, sys.argv[3])
    import savedmodel_pyfunc
    model = savedmodel_pyfunc._load_pyfunc(sys.argv[2], json.loads(sys.argv[4]))
    # Without its padding (TF's decode_base64 takes that too), and a string that needs none.
    fine = base64.urlsafe_b64encode("\ufb01ne".encode()).decode()
    assert fine.endswith("=")
    encoded = [fine.rstrip("="), base64.urlsafe_b64encode(b"x y").decode()]
    print(json.dumps(model.predict(np.array(encoded, dtype=object)).tolist()))
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
    (code / "savedmodel_pyfunc.py").write_text(open(savedmodel_pyfunc.__file__, encoding="utf-8").read())
    config = {savedmodel_pyfunc.SIGNATURE: "serving_default", savedmodel_pyfunc.TEXT_OPS: True}
    for output, expected in (("lengths", [4, 3]), ("bytes", [5, 3])):
        config[savedmodel_pyfunc.OUTPUT] = output
        loaded = _python(LOAD, "loader", str(tmp_path / "model"), str(code), json.dumps(config))
        assert loaded.returncode == 0, loaded.stderr[-2000:]
        # NFKC turns the ligature "fi" (3 bytes of UTF-8) into "f" "i": 4 characters; the bytes as sent: 5.
        assert json.loads(loaded.stdout.strip().splitlines()[-1]) == expected


class _Signature:
    def __init__(self):
        self.seen = None

    def __call__(self, examples):
        self.seen = examples
        return {"scores": examples}


class _Loaded:
    def __init__(self):
        self.signatures = {"serving_default": _Signature()}


def test_the_loader_decodes_base64_of_either_alphabet_padding_and_type():
    loaded = _Loaded()
    model = savedmodel_pyfunc.SavedModelPredictor(loaded, "serving_default", "scores")
    raw = [b"\xfb\xff\x00", b"ab", b""]
    encoded = [base64.urlsafe_b64encode(raw[0]).decode(), base64.urlsafe_b64encode(raw[1]).rstrip(b"="), ""]
    assert model.predict(np.array(encoded, dtype=object)).tolist() == raw
    assert model.predict(encoded).tolist() == raw
    assert model.get_raw_model() is loaded
    with pytest.raises(TypeError, match="a NumPy array or a list of base64 strings of tf.Examples, not dict"):
        model.predict({"examples": encoded})
