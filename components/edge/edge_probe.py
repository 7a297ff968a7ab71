"""Runs TFLite models as a device would: a process of its own (`python -I`), nothing imported but numpy and the
interpreter (and TF Text's TFLite kernels for a text model), the model read from its file.

Reads one JSON request on stdin: `models` ({variant: .tflite path}), `signature`, `inputs` ({column: values}),
`dtypes` ({column: numpy dtype name, "string" for text}), `latency_calls`, `needs_flex` (the models use Select TF
ops), `text_ops` (they use TF Text's TFLite custom ops), and optionally `score` ({"inputs": {column: values},
"output": name}: eval rows, SCORE_ROWS a call). Answers one JSON line on stdout: per variant its `outputs` ({name:
[[...], ...]}), `scored` (the `score` rows' values of its output), `load_ms` (interpreter and signature made),
`p50_ms` and `p99_ms` (one row per call, over `latency_calls` calls), or its `error`; and `runtime`: "litert"
where the `ai_edge_litert` runtime is installed and the model needs neither Select TF ops nor TF Text's, else
"tensorflow" (tf.lite.Interpreter, which links the Flex delegate; with TF Text's kernels registered where it
needs them).
"""

import json
import sys
import time

# Eval rows per call when scoring: a text encoder's activations grow with the batch (a MiniLM-sized one's
# attention alone is 12 x 128 x 128 floats a row, 0.8 MB), and the interpreter holds them all at once.
SCORE_ROWS = 64
# Latency at batch 1: `latency_calls` calls, or as many as LATENCY_SECONDS allow and at least MIN_LATENCY_CALLS (a
# MiniLM-sized text model takes tenths of a second a call on a CPU).
LATENCY_SECONDS = 10.0
MIN_LATENCY_CALLS = 20


def _interpreter(needs_flex: bool, text_ops: bool = False):
    """(a function making an interpreter of a model file, what it is)."""
    if text_ops:
        import functools

        import tensorflow_text
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

        registered = functools.partial(
            InterpreterWithCustomOps, custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS
        )
        return registered, "tensorflow with TF Text's ops"
    if not needs_flex:
        try:
            from ai_edge_litert.interpreter import Interpreter

            return Interpreter, "litert"
        except ImportError:
            pass
    import tensorflow as tf

    return tf.lite.Interpreter, "tensorflow"


def _rows(array):
    """[[...], ...] of an output: one list per row, text as str."""
    import numpy as np

    array = np.asarray(array)
    rows = array.reshape(len(array), -1)
    if array.dtype.kind in "SO":
        return [[v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in row] for row in rows]
    return np.asarray(rows, dtype=np.float64).tolist()


def _run(path, signature, inputs, calls, needs_flex, score=None, text_ops=False):
    import numpy as np

    interpreter_class, runtime = _interpreter(needs_flex, text_ops)
    start = time.perf_counter()
    interpreter = interpreter_class(model_path=path)
    runner = interpreter.get_signature_runner(signature)
    load_ms = (time.perf_counter() - start) * 1000
    outputs = runner(**inputs)
    one = {name: values[:1] for name, values in inputs.items()}
    runner(**one)  # resized to one row
    times = []
    deadline = time.perf_counter() + LATENCY_SECONDS
    for call in range(calls):  # a large model's calls stop at the deadline, after MIN_LATENCY_CALLS
        if call >= MIN_LATENCY_CALLS and time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        runner(**one)
        times.append(time.perf_counter() - start)
    latency = np.asarray(times) * 1000
    answer = {
        "runtime": runtime,
        "outputs": {name: _rows(values) for name, values in sorted(outputs.items())},
        "load_ms": round(load_ms, 2),
        "p50_ms": round(float(np.percentile(latency, 50)), 4) if calls else None,
        "p99_ms": round(float(np.percentile(latency, 99)), 4) if calls else None,
        "latency_calls": len(times),
    }
    if score is not None:
        rows = len(next(iter(score["inputs"].values())))
        scored = []
        for start in range(0, rows, SCORE_ROWS):
            chunk = {name: values[start : start + SCORE_ROWS] for name, values in score["inputs"].items()}
            scored.extend(_rows(runner(**chunk)[score["output"]]))
        answer["scored"] = scored
    return answer


def _arrays(values_by_column, dtypes):
    """{column: numpy array} of {column: JSON values}: text as bytes objects, None as NaN."""
    import numpy as np

    return {
        name: np.array([v.encode("utf-8") for v in values], dtype=object)
        if dtypes[name] == "string"
        else np.array([np.nan if v is None else v for v in values], dtype=dtypes[name])
        for name, values in values_by_column.items()
    }


def main():
    try:  # what it will run the models with is imported while the caller converts them (seconds for TensorFlow)
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        import tensorflow  # noqa: F401
    request = json.load(sys.stdin)
    inputs = _arrays(request["inputs"], request["dtypes"])
    score = request.get("score")
    if score is not None:
        score = {"inputs": _arrays(score["inputs"], request["dtypes"]), "output": score["output"]}
    answer = {}
    for variant, path in sorted(request["models"].items()):
        try:
            answer[variant] = _run(
                path,
                request["signature"],
                inputs,
                int(request.get("latency_calls", 0)),
                request["needs_flex"],
                score,
                bool(request.get("text_ops")),
            )
        except Exception as err:  # noqa: BLE001 - any interpreter failure is the answer for this variant
            answer[variant] = {"error": f"{type(err).__name__}: {str(err).strip()[:500]}"}
    sys.stdout.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
