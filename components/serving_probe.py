"""Loads a SavedModel the way TF Serving does and serves requests to it, in a process that imports only
TensorFlow: `python -I serving_probe.py REQUEST.json RESULT.json`. It imports TensorFlow, then waits for a line
(or the end) of its standard input before it reads the request, loads the model and answers the request's rows;
then for a second line (or the end) before the timings. Its caller works meanwhile: it writes the request, then
computes the answers to compare on its own core while the model loads here, and gives the second go when it has
finished, so that the timings run with nothing of the caller's competing for the cores.

TF Serving loads a version with the C++ SavedModel loader (the "serve" tag set, the init op that fills
vocabulary tables from the model's assets) and answers a request by running the named SignatureDef's
tensors in a session. This script does the same through TensorFlow's v1 session API, so what it proves holds
for a model server that has only TensorFlow's core ops: no module of this project, of TFX or of
tensorflow-transform is imported (the result lists any that were), Keras cannot be, and TF Text's ops are
registered from their op libraries, as the model server links them.

The request file (JSON) holds `model_dir`; `examples_b64`: serialized tf.Examples (URL-safe base64) for the
signatures that take `examples`; `instances`: the rows as TF Serving's REST API takes them (`{"instances":
[{column: value, ...}]}`), for the signatures that take one tensor per column, and `instance_rows` the rows of
`examples_b64` they are (rows with a value in every column); `outputs`: the outputs to fetch
from each signature; `latency_calls` (bounded by `latency_seconds` after `min_latency_calls`, when given), `seconds`
and `batch_sizes` for the timing. The result file (JSON) holds
the signatures' inputs and outputs, every signature's answers ({output: rows}; text decoded) and which of the
examples' rows they are (`answered_rows`), the
time to load and of the first request, p50/p99 latency of single requests and throughput per batch size; or
`error` when the model does not load or a request fails.
"""

import base64
import glob
import importlib.util
import json
import os
import sys
import time
import traceback

# Top-level packages a model server does not have; the result names any that loading and serving the model
# pulled in beyond what `import tensorflow` imports itself.
FOREIGN = (
    "pipeline",
    "components",
    "schemas",
    "tfx",
    "tfx_bsl",
    "tensorflow_transform",
    "tensorflow_model_analysis",
    "tensorflow_data_validation",
    "apache_beam",
    "tf_keras",
    "keras",
)
# What a model server lacks and `import tensorflow` takes when it finds it: Keras (TF imports its optimizers
# for the SavedModel registry) and Google's API client (for the GCE cluster resolver). Marked absent before
# TensorFlow is imported, so a model that needs Keras to load fails here as it would in TF Serving, and the
# import takes about half the time and less memory.
ABSENT = ("keras", "tf_keras", "googleapiclient")
EXAMPLES_INPUT = "examples"


def _foreign():
    loaded = {name.split(".")[0] for name, module in sys.modules.items() if module is not None}
    return sorted(loaded & set(FOREIGN))


def mark_absent(names=ABSENT):
    """Makes `import name` raise ImportError in this process for each of `names` not imported yet; returns those
    it marked."""
    marked = [name for name in names if name not in sys.modules]
    for name in marked:
        sys.modules[name] = None
    return marked


def load_text_ops():
    """Registers TF Text's ops as a model server links them: the op libraries of the tensorflow_text package,
    loaded without its Python API (which imports Keras). Returns the libraries loaded."""
    import tensorflow as tf

    spec = importlib.util.find_spec("tensorflow_text")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the model uses ops TensorFlow lacks, and tensorflow_text is not installed")
    # python/ops/ holds the tokenizers' and normalizers' libraries, python/metrics/ ROUGE-L's: the ones its
    # Python modules load (core/pybinds/ holds Python bindings, not op libraries).
    folder = os.path.join(list(spec.submodule_search_locations)[0], "python")
    libraries = sorted(glob.glob(os.path.join(folder, "*", "_*.so")))
    for path in libraries:
        tf.load_op_library(path)
    return libraries


# TF Decision Forests' inference ops (components/model/text.py's TF_SERVING_DECISION_FOREST_OPS, whose names all
# start so): TF Serving 2.16.1 links them, and here they are registered from TF-DF's own op library.
DECISION_FOREST_OPS_PREFIX = "SimpleML"


def load_decision_forest_ops():
    """Registers TF Decision Forests' inference ops as a model server links them: the op library of the installed
    tensorflow_decision_forests package (its tensorflow/ops/inference/), without its Python API. Returns the
    libraries loaded."""
    import tensorflow as tf

    spec = importlib.util.find_spec("tensorflow_decision_forests")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the model uses TF Decision Forests' ops, and tensorflow_decision_forests is not installed")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "tensorflow", "ops", "inference")
    libraries = sorted(glob.glob(os.path.join(folder, "*.so")))
    for path in libraries:
        tf.load_op_library(path)
    return libraries


def load_op_libraries(ops):
    """Registers the op libraries a model server links for `ops` (the ops TensorFlow lacks): TF Decision
    Forests' for its inference ops, TF Text's for the others. Returns the packages loaded."""
    loaded = []
    if any(not op.startswith(DECISION_FOREST_OPS_PREFIX) for op in ops):
        load_text_ops()
        loaded.append("tensorflow_text")
    if any(op.startswith(DECISION_FOREST_OPS_PREFIX) for op in ops):
        load_decision_forest_ops()
        loaded.append("tensorflow_decision_forests")
    return loaded


def _percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def _signature(meta_graph, name):
    signature = meta_graph.signature_def[name]

    def describe(tensors):
        return {
            key: {
                "dtype": _dtype_name(info.dtype),
                "tensor": info.name,
                "shape": [-1 if d.size < 0 else d.size for d in info.tensor_shape.dim],
            }
            for key, info in sorted(tensors.items())
        }

    return {
        "method": signature.method_name,
        "inputs": describe(signature.inputs),
        "outputs": describe(signature.outputs),
    }


def _dtype_name(enum_value):
    import tensorflow as tf

    return tf.dtypes.as_dtype(enum_value).name


def _takes_examples(description):
    """Whether a signature takes serialized tf.Examples (else one tensor per column)."""
    inputs = description["inputs"]
    return list(inputs) == [EXAMPLES_INPUT] and inputs[EXAMPLES_INPUT]["dtype"] == "string"


def _feeds(description, examples, instances, batch=None):
    """The feed dict of one request: serialized examples, or one array per column as TF Serving's REST API
    builds them from `instances` (each value converted to the input's dtype)."""
    import numpy as np

    inputs = description["inputs"]
    if batch is not None:
        repeat = -(-batch // max(1, len(examples)))
        examples = (examples * repeat)[:batch]
        instances = (instances * repeat)[:batch]
    if _takes_examples(description):
        return {inputs[EXAMPLES_INPUT]["tensor"]: np.array(examples, dtype=object)}
    feeds = {}
    for name, info in inputs.items():
        values = [row[name] for row in instances]
        if info["dtype"] == "string":
            feeds[info["tensor"]] = np.array([v.encode("utf-8") for v in values], dtype=object)
        else:
            feeds[info["tensor"]] = np.array(values, dtype=info["dtype"])
    return feeds


def _fetches(description, outputs):
    """{output name: tensor name} of the outputs a signature has among `outputs` (all of them when it has
    none of those names: a signature of other outputs is compared, and reported, by the caller)."""
    found = {name: description["outputs"][name]["tensor"] for name in outputs if name in description["outputs"]}
    return found or {name: info["tensor"] for name, info in description["outputs"].items()}


def _rows(values, rows):
    """An output as JSON rows: numbers as floats, text decoded."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype.kind in "SO":
        return [
            [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in row] for row in values.reshape(rows, -1)
        ]
    return values.astype(np.float64).reshape(rows, -1).tolist()


def model_ops(model_dir):
    """The names of the ops the SavedModel in `model_dir` uses, its functions' included."""
    import os

    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return {op.name for graph in saved_model.meta_graphs for op in graph.meta_info_def.stripped_op_list.op}


def ops_tf_lacks(model_dir, ops=None):
    """The ops the SavedModel in `model_dir` uses (`ops`, when read already) that TensorFlow has not
    registered (in this process)."""
    from tensorflow.python.framework import op_def_registry

    return sorted(name for name in (model_ops(model_dir) if ops is None else ops) if op_def_registry.get(name) is None)


def probe(request_path):
    """Imports TensorFlow, waits for the go, then loads the model and answers the rows of the request (read
    at the go: the caller starts this process before it has built it), and times it after a second go; returns
    the result dict, or None when the input ends with no go and no request (the caller left without one)."""
    import tensorflow as tf

    # What `import tensorflow` brings by itself: only what loading and serving add counts.
    result = {"tensorflow": tf.__version__, "modules_of_tensorflow": _foreign()}
    go = sys.stdin.readline()  # the caller's go (components/serving/serving_check.py's started_probe)
    if not go and not os.path.exists(request_path):
        return None  # started ahead of a check that never came (its caller ended): nothing to answer
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    examples = [base64.urlsafe_b64decode(text) for text in request["examples_b64"]]
    instances = request["instances"]
    started = time.perf_counter()
    # TF Serving links TF Text's and TF-DF's ops in; here they are registered when the model uses ops TensorFlow
    # lacks.
    result["ops_beyond_tensorflow"] = ops_tf_lacks(request["model_dir"])
    if result["ops_beyond_tensorflow"]:
        result["op_libraries"] = load_op_libraries(result["ops_beyond_tensorflow"])
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], request["model_dir"])
    result["load_s"] = round(time.perf_counter() - started, 3)
    signatures = {
        name: _signature(meta_graph, name) for name in sorted(meta_graph.signature_def) if not name.startswith("__")
    }
    result["signatures"] = signatures
    predictions, answered_rows = {}, {}
    for name in request["signatures"]:
        if name not in signatures:
            predictions[name] = {"error": f"the model has no signature '{name}'"}
            continue
        description = signatures[name]
        rows = list(range(len(examples)))
        if not _takes_examples(description):
            if not instances:
                predictions[name] = {"skipped": "no golden row has a value in every column it takes"}
                continue
            rows = request.get("instance_rows") or list(range(len(instances)))
        try:
            outputs = _fetches(description, request["outputs"])
            feeds = _feeds(description, examples, instances)
            started = time.perf_counter()
            values = session.run(outputs, feed_dict=feeds)
        except (KeyError, ValueError, tf.errors.OpError) as err:  # one signature's failure; the others still run
            predictions[name] = {"error": f"{type(err).__name__}: {_cause(err)[:500]}"}
            continue
        if "first_request_ms" not in result:
            result["first_request_ms"] = round((time.perf_counter() - started) * 1e3, 3)
        predictions[name] = {output: _rows(value, len(rows)) for output, value in values.items()}
        answered_rows[name] = rows
    result["predictions"] = predictions
    result["answered_rows"] = answered_rows
    answered = list(answered_rows)
    if not answered:
        session.close()
        return result
    sys.stdin.readline()  # the caller's second go: it has finished its own work (or left: the input ends)
    timed = signatures[answered[0]]
    output = _fetches(timed, request["outputs"])
    single = _feeds(timed, examples[:1], instances[:1])
    latencies = []
    # `latency_calls` calls, or as many as `latency_seconds` allow and at least `min_latency_calls` (a BERT-sized
    # model takes tenths of a second a call on a few cores).
    budget, least = request.get("latency_seconds"), int(request.get("min_latency_calls", 1))
    deadline = time.perf_counter() + float(budget) if budget else None
    for call in range(int(request["latency_calls"])):
        if deadline is not None and call >= least and time.perf_counter() > deadline:
            break
        started = time.perf_counter()
        session.run(output, feed_dict=single)
        latencies.append(time.perf_counter() - started)
    result["latency_ms"] = {
        "calls": len(latencies),
        "p50": round(_percentile(latencies, 0.5) * 1e3, 3),
        "p99": round(_percentile(latencies, 0.99) * 1e3, 3),
    }
    throughput = []
    for batch in request["batch_sizes"]:
        feeds = _feeds(timed, examples, instances, batch)
        session.run(output, feed_dict=feeds)  # a new shape: the first call of it is not the steady state
        # Calls for `seconds`, at least one: a large model's batch of 256 takes seconds a call on a few cores.
        calls, spent = 0, 0.0
        while spent < float(request["seconds"]) or calls < 1:
            started = time.perf_counter()
            session.run(output, feed_dict=feeds)
            spent += time.perf_counter() - started
            calls += 1
        throughput.append({"batch": batch, "calls": calls, "examples_per_s": round(batch * calls / spent, 1)})
    result["throughput"] = throughput
    session.close()
    return result


# What TensorFlow puts around an op's error in graph mode: a header, where the node was defined, its stack.
_ERROR_FRAMING = ("Graph execution error:", "Detected at node", "<stack traces unavailable>", "[[", "File ")


def _cause(err: BaseException) -> str:
    """The line of `err` that says what failed ("Could not find variable dense/kernel ..."), not TensorFlow's
    "Graph execution error:" header nor its node and stack lines; the first line where there is no other."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return next((line for line in lines if not line.startswith(_ERROR_FRAMING)), lines[0] if lines else "")


def main(argv):
    mark_absent()
    try:
        result = probe(argv[1])
        if result is None:
            return 0
    except Exception as err:  # noqa: BLE001 (every failure is the answer, not a crash)
        result = {"error": f"{type(err).__name__}: {err}".strip(), "traceback": traceback.format_exc()[-4000:]}
    result["foreign_modules"] = sorted(set(_foreign()) - set(result.get("modules_of_tensorflow", ())))
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written and closed: TensorFlow's teardown at a normal exit (0.5 s) would only delay the
    # caller, which waits for this process to end.
    os._exit(code)
