"""Runs TFLite models as a device would: a process of its own (`python -I`), nothing imported but numpy and the
interpreter, the model read from its file.

Reads one JSON request on stdin: `models` ({variant: .tflite path}), `signature`, `inputs` ({column: values}),
`dtypes` ({column: numpy dtype name, "string" for text}), `latency_calls`, `needs_flex` (the models use Select TF
ops). Answers one JSON line on stdout: per
variant its `outputs` ({name: [[...], ...]}), `load_ms` (interpreter and signature made), `p50_ms` and `p99_ms`
(one row per call), or its `error`; and `runtime`: "litert" where the `ai_edge_litert` runtime is installed and
the model needs no Select TF ops, else "tensorflow" (tf.lite.Interpreter, which links the Flex delegate).
"""

import json
import sys
import time


def _interpreter(needs_flex: bool):
    if not needs_flex:
        try:
            from ai_edge_litert.interpreter import Interpreter

            return Interpreter, "litert"
        except ImportError:
            pass
    import tensorflow as tf

    return tf.lite.Interpreter, "tensorflow"


def _run(path, signature, inputs, calls, needs_flex):
    import numpy as np

    interpreter_class, runtime = _interpreter(needs_flex)
    start = time.perf_counter()
    interpreter = interpreter_class(model_path=path)
    runner = interpreter.get_signature_runner(signature)
    load_ms = (time.perf_counter() - start) * 1000
    outputs = runner(**inputs)
    one = {name: values[:1] for name, values in inputs.items()}
    runner(**one)  # resized to one row
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        runner(**one)
        times.append(time.perf_counter() - start)
    answer = {}
    for name, values in sorted(outputs.items()):
        array = np.asarray(values)
        if array.dtype.kind in "SO":
            answer[name] = [
                [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in row]
                for row in array.reshape(len(array), -1)
            ]
        else:
            answer[name] = np.asarray(array, dtype=np.float64).reshape(len(array), -1).tolist()
    latency = np.asarray(times) * 1000
    return {
        "runtime": runtime,
        "outputs": answer,
        "load_ms": round(load_ms, 2),
        "p50_ms": round(float(np.percentile(latency, 50)), 4) if calls else None,
        "p99_ms": round(float(np.percentile(latency, 99)), 4) if calls else None,
    }


def main():
    import numpy as np

    try:  # what it will run the models with is imported while the caller converts them (seconds for TensorFlow)
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        import tensorflow  # noqa: F401
    request = json.load(sys.stdin)
    inputs = {}
    for name, values in request["inputs"].items():
        dtype = request["dtypes"][name]
        inputs[name] = (
            np.array([v.encode("utf-8") for v in values], dtype=object)
            if dtype == "string"
            else np.array([np.nan if v is None else v for v in values], dtype=dtype)
        )
    answer = {}
    for variant, path in sorted(request["models"].items()):
        try:
            answer[variant] = _run(
                path, request["signature"], inputs, int(request.get("latency_calls", 0)), request["needs_flex"]
            )
        except Exception as err:  # noqa: BLE001 - any interpreter failure is the answer for this variant
            answer[variant] = {"error": f"{type(err).__name__}: {str(err).strip()[:500]}"}
    sys.stdout.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
