"""EdgeExport: the blessed model as TensorFlow Lite, checked against the SavedModel before it is published.

After the ServingCheck, a model that the Evaluator and the check blessed is converted (components/edge/edge_convert.py)
from its `serving_raw` signature, the Transform graph inside: a client sends raw columns, as to TF Serving's REST
API. Two variants: float32 (`model.tflite`) and dynamic-range int8 (`model-int8.tflite`, weights in 8 bits).

Each variant then answers the ServingCheck's golden rows (eval rows with every serving column) in a process of
its own that imports only numpy and the interpreter (components/edge/edge_probe.py, `python -I`), and must agree with
the SavedModel's `serving_raw` on every output: numbers within `|edge - saved| <= tol * (1 + |saved|)`, text
equal. `tol`: 1e-5 for float32 (the same arithmetic; only the order of float additions may differ) and 0.02
for int8 (8-bit weights move a probability by a few thousandths on the models this pipeline trains; a larger
move is a variant that should not ship). Each variant also scores up to EVAL_ROWS eval rows (those with every
serving column) by the task's default blessing metric (binary_accuracy, accuracy, r2; `task_metric`), which must be
within METRIC_MARGINS of the SavedModel's on the same rows. A variant that disagrees or fails in the interpreter is
not published, the reason kept; without a float32 that agrees, nothing is. Its size, load time and latency at
batch 1 are recorded in `edge.json` beside the files; the Pusher copies both into the version folder it pushes
(`assets.extra/tfxflow/edge/`), so a `.tflite` belongs to its version and appears with it, complete or not at all.

A model that cannot be converted (a module file's own ops, an op TFLite has no kernel for even with Select TF
ops, a signature that is not there) records the reason; the Pusher publishes the SavedModel alone.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.utils import path_utils

from tfxflow.components import artifact_files, names
from tfxflow.components.edge import edge_convert, edge_probe
from tfxflow.components.evaluation import golden
from tfxflow.components.model import model_info, tasks, text

RESULT_FILE = "edge.json"
FILES = {"float32": "model.tflite", "int8": "model-int8.tflite"}
TOLERANCES = {"float32": 1e-5, "int8": 0.02}
LATENCY_CALLS = 200
PROBE_TIMEOUT_S = 600
DEFAULT_GOLDEN_ROWS = 64
# Eval rows each variant scores (at most; those with a value in every serving column, in file order).
EVAL_ROWS = 2_000
# How far a variant's metric on those rows may be from the SavedModel's on the same rows. float32 computes the same
# function (golden rows agree within 1e-5), so a row changes sides only where an answer lies that close to 0.5 or
# to a tie: a thousandth of the rows is far above that. int8 moves an answer by up to its tolerance, 0.02: only rows
# that close to the threshold can change sides, and more than one in a hundred would be a model not to ship.
METRIC_MARGINS = {"float32": 0.001, "int8": 0.01}


def _blessed(blessings: List[types.Artifact]) -> bool:
    return all(b.get_int_custom_property("blessed") == 1 for b in blessings) and bool(blessings)


def differences(expected: Dict[str, Any], found: Dict[str, Any], tolerance: float) -> Dict[str, Any]:
    """{output: its largest |edge - saved|} and the problems, for numbers within tol * (1 + |saved|), text equal."""
    import numpy as np

    largest, problems = {}, []
    for name, values in sorted(expected.items()):
        if name not in found:
            problems.append(f"output '{name}' is missing")
            continue
        want, got = np.asarray(values), np.asarray(found[name])
        if want.shape != got.shape:
            problems.append(f"output '{name}' has shape {list(got.shape)}, the SavedModel's {list(want.shape)}")
            continue
        if want.dtype.kind in "UO":
            unequal = int((want != got).sum())
            largest[name] = unequal
            if unequal:
                problems.append(f"output '{name}' differs in {unequal} of {want.size} values")
            continue
        want, got = want.astype(np.float64), got.astype(np.float64)
        both_nan = np.isnan(want) & np.isnan(got)
        gap = np.where(both_nan, 0.0, np.nan_to_num(np.abs(want - got), nan=np.inf))
        largest[name] = float(gap.max()) if gap.size else 0.0
        over = gap > tolerance * (1 + np.abs(np.nan_to_num(want)))
        if over.any():
            problems.append(
                f"output '{name}' differs by up to {largest[name]:.3g} (tolerance {tolerance:g} x (1 + |value|)) "
                f"in {int(over.sum())} of {want.size} values"
            )
    return {"max_diff": largest, "problems": problems}


def task_metric(task: str, labels: Sequence[float], predictions: Sequence[Sequence[float]]) -> Tuple[str, float]:
    """(name, value) of the task's default blessing metric (model/tasks.py) of `predictions` (the task's prediction
    output, one row per label) against `labels` in the label's units, rows without a label left out: binary
    `binary_accuracy` (probability > 0.5, as Keras and TFMA count), multiclass `accuracy` (the highest score's
    index), regression `r2`."""
    import numpy as np

    name = tasks.TASK_SPECS[task].default_metric
    labels = np.asarray(labels, np.float64).reshape(-1)
    predictions = np.asarray(predictions, np.float64).reshape(len(labels), -1)
    known = ~np.isnan(labels)
    labels, predictions = labels[known], predictions[known]
    if not len(labels):
        return name, float("nan")
    if task == tasks.BINARY:
        return name, float(np.mean((predictions[:, 0] > 0.5) == (labels > 0.5)))
    if task == tasks.MULTICLASS:
        return name, float(np.mean(np.argmax(predictions, axis=1) == labels))
    spread = float(np.sum((labels - labels.mean()) ** 2))
    return name, (1.0 - float(np.sum((labels - predictions[:, 0]) ** 2)) / spread) if spread else float("nan")


@dataclasses.dataclass
class Scoring:
    """Eval rows to score each variant on: `inputs` ({column: values}) and their `labels` (the label's units), the
    model's `task` and the signature `output` the metric reads (the task's prediction key)."""

    task: str
    output: str
    inputs: Dict[str, list]
    labels: List[float]


def _columns(function) -> Dict[str, Any]:
    """{column: (argument, TensorSpec)} of a signature: a column's name is its TensorSpec's (what TF Serving's
    REST API and the TFLite signature take), the argument its sanitized Python name ('a/b' becomes 'a_b')."""
    return {spec.name or arg: (arg, spec) for arg, spec in function.structured_input_signature[1].items()}


@functools.lru_cache(maxsize=1)
def _loaded(model_dir: str):
    """The SavedModel, loaded once for the steps of one export (`export` clears it), TF Text's ops registered
    first where it uses them (a text model in a step of its own, a pod)."""
    import tensorflow as tf

    text.load_ops_for(model_dir)
    return tf.saved_model.load(model_dir)


def _saved_model_outputs(model_dir: str, signature: str, inputs: Dict[str, list]) -> Dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    function = _loaded(model_dir).signatures[signature]
    columns = _columns(function)
    rows = len(next(iter(inputs.values()))) if inputs else 0
    answer: Dict[str, list] = {}
    for start in range(0, rows, edge_probe.SCORE_ROWS):  # a text encoder's activations grow with the batch
        tensors = {
            arg: tf.constant(inputs[column][start : start + edge_probe.SCORE_ROWS], dtype=spec.dtype)
            for column, (arg, spec) in columns.items()
        }
        for name, value in sorted(function(**tensors).items()):
            array = value.numpy()
            array = array.reshape(len(array), -1)
            answer.setdefault(name, []).extend(
                np.vectorize(lambda v: v.decode("utf-8"))(array).tolist()
                if array.dtype.kind in "SO"
                else array.astype(np.float64).tolist()
            )
    return answer


def _input_dtypes(model_dir: str, signature: str) -> Dict[str, str]:
    """{column: numpy dtype name, "string" for text} of the signature's inputs; KeyError without it."""
    import tensorflow as tf

    function = _loaded(model_dir).signatures[signature]
    return {
        column: "string" if spec.dtype == tf.string else spec.dtype.name
        for column, (_, spec) in _columns(function).items()
    }


def start_probe() -> subprocess.Popen:
    """components/edge/edge_probe.py in a fresh, isolated interpreter, importing its runtime until it gets a request."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "edge_probe.py")
    return subprocess.Popen(
        [sys.executable, "-I", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


def probe(request: Dict[str, Any], started: Optional[subprocess.Popen] = None, timeout: float = PROBE_TIMEOUT_S):
    """components/edge/edge_probe.py's answer to `request`, in the process `started` (else a new one)."""
    process = started or start_probe()
    try:
        out, err = process.communicate(json.dumps(request), timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        out, err = "", f"no answer within {timeout:g} s"
    if process.returncode != 0 or not out.strip():
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {
            variant: {"error": f"the interpreter's process failed ({process.returncode}): {tail}"}
            for variant in request["models"]
        }
    return json.loads(out.strip().splitlines()[-1])


def export(
    model_dir: str,
    out_dir: str,
    golden: List[Dict[str, Any]],
    signature: str = names.RAW_SIGNATURE,
    scoring: Optional[Scoring] = None,
    unscored: str = "",
) -> Dict[str, Any]:
    """Converts `model_dir`'s `signature`, checks each variant on the `golden` rows (dicts of raw column values)
    and on `scoring`'s eval rows (else `unscored` says why there are none) in components/edge/edge_probe.py, and leaves
    in `out_dir` (a local folder or an object store's) the variants that agree and `edge.json`; returns what
    `edge.json` holds."""
    result: Dict[str, Any] = {"signature": signature, "rows": len(golden), "variants": {}, "published": []}
    if scoring is None:
        result["eval"] = {"skipped": unscored or "no eval rows were given"}
    started = start_probe() if golden else None  # it imports its runtime on the other core meanwhile
    try:
        with tempfile.TemporaryDirectory(prefix="tfxflow-edge-") as work:
            converted = _convert(model_dir, signature, work, result)
            if converted:
                _check(model_dir, signature, golden, work, converted, result, started, scoring)
            _publish(work, out_dir, result)
    finally:
        _loaded.cache_clear()
        if started is not None and started.poll() is None:  # not asked: the conversion failed
            started.kill()
            started.communicate()
    _write(out_dir, result)
    return result


def _publish(work: str, out_dir: str, result: Dict[str, Any]) -> None:
    """Copies the published variants from `work` to `out_dir` (a local folder or an object store's)."""
    fileio.makedirs(out_dir)
    for variant in result["published"]:
        name = FILES[variant]
        fileio.copy(os.path.join(work, name), os.path.join(out_dir, name), overwrite=True)


def _convert(model_dir: str, signature: str, work: str, result: Dict[str, Any]) -> Dict[str, bytes]:
    """{variant: .tflite bytes}, each also written to `work`; {} with result["reason"] when it cannot be."""
    start = time.perf_counter()
    try:
        converted = edge_convert.convert(model_dir, signature, work, _loaded(model_dir))
    except edge_convert.Unconvertible as err:
        result["reason"] = f"not converted to TFLite: {err}"
        converted = {}
    except Exception as err:  # noqa: BLE001 - a model this step cannot convert is pushed alone, never fails the run
        result["reason"] = f"not converted to TFLite: {edge_convert.error_line(err)}"
        converted = {}
    result["convert_s"] = round(time.perf_counter() - start, 2)
    if converted:
        ops = edge_convert.ops(converted["float32"])
        result["ops"] = ops
        result["select_tf_ops"] = sorted(op[len("Flex") :] for op in ops if op.startswith("Flex"))
        result["text_ops"] = sorted(op for op in ops if op in edge_convert.TEXT_OPS)
    for variant, blob in converted.items():
        with open(os.path.join(work, FILES[variant]), "wb") as f:
            f.write(blob)
    return converted


def _check(
    model_dir: str,
    signature: str,
    golden: List[Dict[str, Any]],
    work: str,
    converted: Dict[str, bytes],
    result: Dict[str, Any],
    started: Optional[subprocess.Popen] = None,
    scoring: Optional[Scoring] = None,
) -> None:
    """Runs each variant on the golden rows and `scoring`'s eval rows in the probe; fills result's variants and
    what is published."""
    found: Dict[str, Any] = {}
    if not golden:
        result["reason"] = "the eval split has no row with every serving column to check the TFLite model on"
    else:
        inputs = {column: [row[column] for row in golden] for column in golden[0]}
        expected = _saved_model_outputs(model_dir, signature, inputs)
        request = {
            "models": {variant: os.path.join(work, FILES[variant]) for variant in converted},
            "signature": signature,
            "inputs": inputs,
            "dtypes": _input_dtypes(model_dir, signature),
            "latency_calls": LATENCY_CALLS,
            "needs_flex": bool(result["select_tf_ops"]),
            "text_ops": bool(result.get("text_ops")),
        }
        if scoring is not None:
            saved = _saved_model_outputs(model_dir, signature, scoring.inputs)[scoring.output]
            metric, value = task_metric(scoring.task, scoring.labels, saved)
            if math.isnan(value):  # nothing to hold a variant to
                result["eval"] = {"skipped": f"the eval rows give no {metric} (no label, or one label value)"}
                scoring = None
            else:
                request["score"] = {"inputs": scoring.inputs, "output": scoring.output}
                result["eval"] = {"rows": len(scoring.labels), "metric": metric, "saved_model": round(value, 6)}
        found = probe(request, started)
    for variant, blob in converted.items():
        entry: Dict[str, Any] = {"file": FILES[variant], "bytes": len(blob), "tolerance": TOLERANCES[variant]}
        answer = found.get(variant, {})
        if not golden:
            entry["reason"] = result["reason"]
        elif "error" in answer and "Select TensorFlow op" in answer["error"]:
            entry["reason"] = (
                f"the interpreter here cannot run its Select TF ops ({', '.join(result['select_tf_ops'])}): this "
                "TensorFlow's tf.lite.Interpreter has no Flex delegate, and a model is not published unchecked"
            )
        elif "error" in answer:
            entry["reason"] = f"the interpreter failed: {answer['error']}"
        else:
            entry.update({k: answer[k] for k in ("runtime", "load_ms", "p50_ms", "p99_ms", "latency_calls")})
            compared = differences(expected, answer["outputs"], TOLERANCES[variant])
            entry["max_diff"] = compared["max_diff"]
            problems = compared["problems"]
            if scoring is not None:
                problems += _scored(scoring, variant, answer.get("scored"), result["eval"], entry)
            if problems:
                entry["reason"] = "; ".join(problems)
        # A smaller variant only beside a float32 that agrees.
        entry["published"] = "reason" not in entry and (variant == "float32" or "float32" in result["published"])
        if entry["published"]:
            result["published"].append(variant)
        result["variants"][variant] = entry
    if "float32" not in result["published"]:
        float32 = result["variants"]["float32"]
        result.setdefault("reason", f"the float32 TFLite model is not published: {float32.get('reason')}")
        for entry in result["variants"].values():
            entry["published"] = False
        result["published"] = []


def _scored(scoring: Scoring, variant: str, scored, evaluated: Dict[str, Any], entry: Dict[str, Any]) -> List[str]:
    """Puts the variant's metric on the eval rows in `entry["eval"]`; the problem where it is further than its
    margin from the SavedModel's (`evaluated`)."""
    if scored is None:
        return ["it gave no answer for the eval rows"]
    metric, value = task_metric(scoring.task, scoring.labels, scored)
    gap = abs(value - evaluated["saved_model"])
    margin = METRIC_MARGINS[variant]
    entry["eval"] = {"metric": metric, "value": round(value, 6), "gap": round(gap, 6), "margin": margin}
    if gap <= margin:
        return []
    rows, saved = evaluated["rows"], evaluated["saved_model"]
    return [f"its {metric} on {rows:,} eval rows is {value:.4f}, the SavedModel's {saved:.4f} (margin {margin:g})"]


def _write(out_dir: str, result: Dict[str, Any]) -> None:
    fileio.makedirs(out_dir)
    with fileio.open(os.path.join(out_dir, RESULT_FILE), "w") as f:
        f.write(json.dumps(result, indent=1, sort_keys=True))


def published_files(result: Dict[str, Any]) -> List[str]:
    """The names of what an EdgeExport folder publishes: its agreeing variants' files and `edge.json`; none
    where no variant is published."""
    if not result.get("published"):
        return []
    return [result["variants"][variant]["file"] for variant in result["published"]] + [RESULT_FILE]


def read_result(uri: str) -> Optional[Dict[str, Any]]:
    """The `edge.json` of an EdgeExport output folder, or None."""
    return artifact_files.read_json(uri, RESULT_FILE)


def ops_beyond_builtins(result: Dict[str, Any]) -> str:
    """What an interpreter needs beyond TFLite's builtin ops to run the converted model, e.g. "Select TF ops
    (StringToHashBucketFast) and TF Text's TFLite ops (FastBertNormalize, ...)"; "" for builtin ops only."""
    needs = [f"Select TF ops ({', '.join(result['select_tf_ops'])})"] if result.get("select_tf_ops") else []
    if result.get("text_ops"):
        needs.append(f"TF Text's TFLite ops ({', '.join(result['text_ops'])})")
    return " and ".join(needs)


def summary_line(result: Dict[str, Any]) -> str:
    """One line: each published variant's size and agreement, latency, what runs it; or why there is none."""
    if not result.get("published"):
        return result.get("reason") or "not published"
    parts = []
    for variant in result["published"]:
        entry = result["variants"][variant]
        gap = max(entry.get("max_diff", {}).values(), default=0.0)
        parts.append(f"{entry['file']} {entry['bytes'] / 1024:.0f} KiB (max diff {gap:.2g})")
    first = result["variants"][result["published"][0]]
    needs = ops_beyond_builtins(result)
    runs = f"needs {needs}" if needs else "builtin ops only"
    line = f"{', '.join(parts)}; {first.get('p50_ms', 0):.2f} ms at batch 1 in {first.get('runtime')}; {runs}"
    evaluated = result.get("eval", {})
    if "metric" in evaluated:
        scored = ", ".join(
            f"{result['variants'][variant]['eval']['value']:.4f}"
            for variant in result["published"]
            if "eval" in result["variants"][variant]
        )
        line += (
            f"; {evaluated['metric']} on {evaluated['rows']:,} eval rows {scored} "
            f"(SavedModel {evaluated['saved_model']:.4f})"
        )
    return line


def eval_rows(
    input_dict: Dict[str, List[types.Artifact]], model_dir: str, columns: List[str], count: int, scored: int = EVAL_ROWS
) -> Tuple[List[dict], Optional[Scoring], str]:
    """(the ServingCheck's golden rows: the first `count` eval rows with every raw column the model takes, as
    {column: value}; up to `scored` such rows to score with their labels, or None; why there are none). Labels
    are the model's own `transform_features` answer, as the Evaluator reads them."""
    import tensorflow as tf

    # lazy: it imports tf.Transform
    from tfxflow.components.model import export as export_lib

    files = golden.eval_files(input_dict)
    rows, complete = export_lib.sample_rows(files, columns, max(count, scored))
    records = [row for row, whole in zip(rows, complete, strict=True) if whole]
    instances = [golden.instance_of(tf.train.Example.FromString(row), columns) for row in records]
    info = model_info.read(model_dir) or {}
    label = (info.get("label") or {}).get("name")
    transform = _loaded(model_dir).signatures.get(names.TRANSFORM_SIGNATURE)
    if info.get("task") not in tasks.TASK_SPECS or not label or transform is None:
        why = "the model records no task, label and transform_features signature (a module file's model)"
        return instances[:count], None, f"not scored on eval rows: {why}"
    if not records:
        return [], None, "not scored on eval rows: none has a value in every serving column"
    records = records[:scored]
    labels = transform(examples=tf.constant(records))[label].numpy().astype("float64").reshape(-1).tolist()
    inputs = {column: [row[column] for row in instances[: len(records)]] for column in columns}
    return instances[:count], Scoring(info["task"], info["prediction_key"], inputs, labels), ""


def _export_blessed(model_dir: str, out_dir: str, input_dict, count: int) -> Dict[str, Any]:
    try:
        columns = sorted(_input_dtypes(model_dir, names.RAW_SIGNATURE))
    except KeyError:
        result = {
            "published": [],
            "reason": f"not converted: the model has no '{names.RAW_SIGNATURE}' signature (one tensor per raw "
            "column) to convert",
        }
        _write(out_dir, result)
        return result
    golden, scoring, unscored = eval_rows(input_dict, model_dir, columns, count)
    return export(model_dir, out_dir, golden, scoring=scoring, unscored=unscored)


class Executor(base_executor.BaseExecutor):
    """Converts and checks a blessed model; writes the variants that agree and `edge.json`. Whatever goes wrong
    here is the reason there is no TFLite model, never a failed run: the SavedModel is pushed alone."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        model = artifact_utils.get_single_instance(input_dict["model"])
        edge_model = artifact_utils.get_single_instance(output_dict["edge_model"])
        blessings = input_dict.get("model_blessing", []) + input_dict.get("infra_blessing", [])
        count = int(exec_properties.get("golden_rows") or DEFAULT_GOLDEN_ROWS)
        if not _blessed(blessings):
            result: Dict[str, Any] = {"published": [], "reason": "not converted: the model is not blessed"}
            _write(edge_model.uri, result)
        else:
            try:
                result = _export_blessed(path_utils.serving_model_path(model.uri), edge_model.uri, input_dict, count)
            except Exception as err:  # noqa: BLE001 - the SavedModel is pushed alone; the reason says why
                logging.exception("EdgeExport failed")
                result = {"published": [], "reason": f"not exported to TFLite: {edge_convert.error_line(err)}"}
                _write(edge_model.uri, result)
            finally:
                _loaded.cache_clear()
        edge_model.set_int_custom_property("published", int(bool(result.get("published"))))
        edge_model.set_string_custom_property("summary", summary_line(result))
        if result.get("published"):
            logging.info("EdgeExport: %s", summary_line(result))
        else:
            logging.warning("EdgeExport: no TFLite model: %s", result.get("reason"))


class EdgeExportSpec(ComponentSpec):
    """Inputs: the model, its two blessings and the examples (golden and scored rows from the eval split)."""

    PARAMETERS = {
        "golden_rows": ExecutionParameter(type=int, optional=True),
    }
    INPUTS = {
        "model": ChannelParameter(type=standard_artifacts.Model),
        "model_blessing": ChannelParameter(type=standard_artifacts.ModelBlessing),
        "infra_blessing": ChannelParameter(type=standard_artifacts.InfraBlessing),
        "examples": ChannelParameter(type=standard_artifacts.Examples),
    }
    # A Model artifact, as TFX's own TFLiteRewriter leaves a TFLite model in one (a custom type cannot travel
    # through Kubeflow: TFX's launcher imports it by its schema title, `<top-level module>.<Class>`).
    OUTPUTS = {"edge_model": ChannelParameter(type=standard_artifacts.Model)}


class EdgeExport(base_component.BaseComponent):
    """Converts a blessed `model` to TFLite and checks it; the Pusher publishes its `edge_model` with the
    version."""

    SPEC_CLASS = EdgeExportSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        model_blessing: types.BaseChannel,
        infra_blessing: types.BaseChannel,
        examples: types.BaseChannel,
        golden_rows: int = DEFAULT_GOLDEN_ROWS,
    ):
        super().__init__(
            spec=EdgeExportSpec(
                model=model,
                model_blessing=model_blessing,
                infra_blessing=infra_blessing,
                examples=examples,
                golden_rows=int(golden_rows),
                edge_model=types.Channel(type=standard_artifacts.Model),
            )
        )
