"""ServingCheck: proves a candidate model serves before the Pusher may push it.

TFX's InfraValidator starts a model server in Docker or Kubernetes; neither is at hand where the pipeline
runs locally, and the model server's part that matters here is TensorFlow's SavedModel loader and session.
This check starts a fresh Python process that imports only TensorFlow (components/serving_probe.py, run
with `python -I`) and in it:

- loads the candidate as TF Serving does (the "serve" tags, the init op that fills vocabulary tables);
- checks every serving signature's inputs against the schema's SERVING environment: a signature takes either
  serialized tf.Examples (one string input, `examples`) or one tensor per column, each a column present at
  serving (never the label or a column only the label needs) with the schema's type;
- sends golden requests built from real eval rows, without the label, through `serving_default` (serialized
  tf.Examples) and `serving_raw` (the rows as TF Serving's REST API takes JSON `instances`), and requires every
  output the Evaluator's model gives for them (loaded by TFMA with the Evaluator's eval config, in this
  process): numbers (probabilities, scores, predictions) within `tolerance`, text (a multi-class model's class
  names) equal;
- requires every op the model uses beyond TensorFlow's own to be among TF Serving 2.16's (TF Text's ops for a
  text column: the probe registers them, as the model server links them in);
- measures the p50/p99 latency of single requests through `serving_default` and throughput at batches of 1,
  32 and 256.

The verdict is an InfraBlessing, the artifact TFX's Pusher already checks (`blessed`): a model that does not
load, disagrees, or whose p99 latency at batch 1 exceeds `max_latency_ms` (when set) is not pushed. The
figures and the reason are custom properties of the blessing and `serving_check.json` inside it.

`required_signatures`: the signatures the model must have (the built-in Trainer exports both; a user's own
run_fn only needs `serving_default`, which the Evaluator uses). Another serving signature the model has is
compared too when it answers the golden requests.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.utils import json_utils, path_utils

from tfxflow.components import artifact_files, names
from tfxflow.components.evaluation import golden
from tfxflow.components.memory import give_back_free_memory
from tfxflow.components.model import features as features_lib
from tfxflow.components.model import model_info, text

RESULT_FILE = "serving_check.json"
SIGNATURES = (names.SERVING_SIGNATURE, names.RAW_SIGNATURE)
BATCH_SIZES = (1, 32, 256)
DEFAULT_TOLERANCE = 1e-5
DEFAULT_GOLDEN_ROWS = 64
LATENCY_CALLS = 200
# A large model's single requests stop after LATENCY_SECONDS, once MIN_LATENCY_CALLS are timed (MiniLM at 128 word
# pieces: tens of milliseconds a call on two cores).
LATENCY_SECONDS = 2.0
MIN_LATENCY_CALLS = 20
# Per batch size, at least 3 calls (the taxi model: 150+ at batch 256); make bench-serving measures at length.
SECONDS_PER_BATCH = 0.25
PROBE_TIMEOUT_S = 900
# The schema's feature types as the SignatureDef's dtypes of one value per row.
_DTYPES = {"INT": "int64", "FLOAT": "float32", "BYTES": "string"}


def serving_columns(schema) -> Dict[str, str]:
    """Column -> dtype name of the schema's features present at serving."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    # lazy: it imports Beam
    from tfxflow.components.validation.schema import serving_features

    return {f.name: _DTYPES.get(schema_pb2.FeatureType.Name(f.type), "unknown") for f in serving_features(schema)}


def check_signatures(
    signatures: Mapping[str, Mapping[str, Any]],
    columns: Mapping[str, str],
    all_columns: Sequence[str],
    required: Sequence[str] = SIGNATURES,
) -> List[str]:
    """What is wrong with the probe's signatures against the serving columns (empty: nothing)."""
    problems = []
    for name in required:
        if name not in signatures:
            problems.append(f"no '{name}' signature (the model has {', '.join(sorted(signatures)) or 'none'})")
    for name, signature in sorted(signatures.items()):
        if name == names.TRANSFORM_SIGNATURE:
            continue  # TFMA's: raw tf.Examples with the label, not a serving signature
        inputs = signature["inputs"]
        if list(inputs) == ["examples"] and inputs["examples"]["dtype"] == "string":
            continue  # serialized tf.Examples: parsed by the model's own feature spec
        for column, info in sorted(inputs.items()):
            if column not in columns:
                where = (
                    "absent at serving (schema: not in the SERVING environment)"
                    if column in all_columns
                    else "not a column of the schema"
                )
                problems.append(f"signature '{name}' takes '{column}', {where}")
            elif info["dtype"] != columns[column]:
                problems.append(
                    f"signature '{name}' takes '{column}' as {info['dtype']}; the schema's type is {columns[column]}"
                )
    return problems


class _Probe:
    """One components/serving_probe.py process in a fresh, isolated interpreter, and its folder (request, result
    and output files). It imports TensorFlow, then waits for `result`'s go."""

    def __init__(self):
        # components/serving_probe.py: a shared module, one folder up from this subsystem's.
        probe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "serving_probe.py")
        self.folder = tempfile.mkdtemp(prefix="tfxflow-serving-check-")
        self.request_path = os.path.join(self.folder, "request.json")
        self.result_path = os.path.join(self.folder, "result.json")
        # Its output goes to a file: a pipe nobody reads while the caller works could fill and stall it.
        self.output_path = os.path.join(self.folder, "output.txt")
        # -I: no PYTHON* variables, no user site, not the script's folder: only what a clean interpreter imports.
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ}
        with open(self.output_path, "w", encoding="utf-8") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-I", probe, self.request_path, self.result_path],
                env=env,
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=output,
            )

    def waiting(self) -> bool:
        """Whether it still runs and has had no go."""
        return self.process.poll() is None and not self.process.stdin.closed

    def send(self, request: Dict[str, Any]) -> None:
        """Hands it `request`: it loads the model and answers the rows, then waits for `result` to time it."""
        with open(self.request_path, "w", encoding="utf-8") as f:  # read by the probe at the go
            json.dump(request, f)
        with contextlib.suppress(BrokenPipeError):  # a probe that died already: its output says why
            self.process.stdin.write(b"go\n")
            self.process.stdin.flush()

    def result(self, timeout: float) -> Dict[str, Any]:
        """Lets it time the model (the request `send` handed it) and returns its answer, or an error after
        `timeout` seconds."""
        with contextlib.suppress(BrokenPipeError):  # its input ends: the second go
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"the model did not load and answer within {timeout:.0f} s"}
        if not os.path.exists(self.result_path):
            with open(self.output_path, encoding="utf-8", errors="replace") as f:
                tail = f.read().strip().splitlines()[-3:]
            return {"error": f"the serving process exited with code {self.process.returncode}: {' | '.join(tail)}"}
        with open(self.result_path, encoding="utf-8") as f:
            return json.load(f)

    def close(self) -> None:
        """Kills it if it still runs and removes its folder. (A probe whose caller dies without a go leaves by
        itself: its input ends.)"""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        shutil.rmtree(self.folder, ignore_errors=True)


# A probe started ahead of this process's ServingCheck (`warm_probe`), which takes it over; and whether one may
# be (`allow_warm_probe`).
_warm: Optional[_Probe] = None
_warm_allowed = True


def allow_warm_probe(allowed: bool) -> None:
    """Whether `warm_probe` starts a probe: a runner that sees the Trainer's model come from its cache says no
    (the check, of the same model, data and settings, will come from the cache too)."""
    global _warm_allowed
    _warm_allowed = allowed


def warm_probe() -> bool:
    """Starts the probe now for the ServingCheck that runs next in this process (LocalDagRunner runs every
    component in one): its TensorFlow import (seconds of one core) then runs beside the caller's work instead
    of before the check's. False when one is already waiting or none is allowed. `discard_warm_probe` ends one
    nobody took."""
    global _warm
    if not _warm_allowed or (_warm is not None and _warm.waiting()):
        return False
    discard_warm_probe()
    _warm = _Probe()
    atexit.unregister(discard_warm_probe)  # registered once however many runs this process makes
    atexit.register(discard_warm_probe)
    return True


def discard_warm_probe() -> None:
    """Ends the probe `warm_probe` started if no check took it (the run failed or stopped before)."""
    global _warm
    probe, _warm = _warm, None
    if probe is not None:
        probe.close()


@dataclasses.dataclass
class ProbeCall:
    """What `started_probe` yields. `send(request)` gives what this process freed back to the system, then hands
    the probe its request: it loads the model and answers the rows on the other core while the caller goes on
    (the two processes' memory peaks together once the model is loaded, so the collection comes first; beside
    the probe's import where it still imports). Calling it lets the probe time the model (the caller
    waits, so nothing of its competes) and returns the result; `request` is handed over first where `send` was
    not called."""

    probe: _Probe
    deadline: float

    def send(self, request: Dict[str, Any]) -> None:
        give_back_free_memory()
        self.probe.send(request)

    def __call__(self, request: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        if request is not None:
            self.send(request)
        return self.probe.result(max(0.0, self.deadline - time.monotonic()))


@contextlib.contextmanager
def started_probe(timeout: float = PROBE_TIMEOUT_S) -> Iterator[ProbeCall]:
    """Starts components/serving_probe.py in a fresh, isolated interpreter (or takes over the one `warm_probe`
    started) and yields the `ProbeCall` that hands it a request and returns its result. The probe imports
    TensorFlow (seconds) while the caller builds the request, then loads the model while the caller computes
    what it compares the answers with; its timings run alone. The process is killed when the block is left
    without it. `timeout` counts from here."""
    global _warm
    deadline = time.monotonic() + timeout
    probe, _warm = _warm, None
    if probe is None or not probe.waiting():
        if probe is not None:
            probe.close()
        probe = _Probe()
    try:
        yield ProbeCall(probe, deadline)
    finally:
        probe.close()


def run_probe(request: Dict[str, Any], timeout: float = PROBE_TIMEOUT_S) -> Dict[str, Any]:
    """Runs components/serving_probe.py on `request` in a fresh, isolated interpreter; returns its result."""
    with started_probe(timeout) as result:
        return result(request)


def verdict(
    result: Dict[str, Any],
    expected: Mapping[str, Any],
    columns: Mapping[str, str],
    all_columns: Sequence[str],
    tolerance: float,
    max_latency_ms: float,
    required: Sequence[str] = SIGNATURES,
) -> List[str]:
    """The reasons not to push (empty: the model serves). `expected`: the Evaluator's model's outputs by name.
    Sets `max_abs_difference` per signature in `result`, and `notes` for an optional signature that could not
    answer the golden requests."""
    import numpy as np

    if "error" in result:
        return [f"does not serve: {result['error']}"]
    reasons = []
    served = text.TF_SERVING_TEXT_OPS | text.TF_SERVING_DECISION_FOREST_OPS
    unserved = [op for op in result.get("ops_beyond_tensorflow", ()) if op not in served]
    if unserved:
        reasons.append(
            f"uses ops TF Serving 2.16 does not have: {', '.join(unserved)} (it links TensorFlow's ops, TF Text "
            "2.12.1's ops_lib and TF Decision Forests 1.3.0's inference ops; e.g. RoundRobinTrimmer's are newer: "
            "truncate by slicing)"
        )
    if result.get("foreign_modules"):
        reasons.append(
            "loading it needed modules a model server does not have: " + ", ".join(result["foreign_modules"])
        )
    reasons += check_signatures(result["signatures"], columns, all_columns, required)
    differences, notes = {}, []
    for name, got in sorted(result.get("predictions", {}).items()):
        if name not in result["signatures"]:
            continue  # reported by check_signatures when required
        if "skipped" in got:  # no golden row has every column it takes
            notes.append(f"'{name}' not compared: {got['skipped']}")
            continue
        if "error" in got:  # the probe could not call it
            failure = f"'{name}' failed on the golden requests: {got.get('error')}"
            (reasons if name in required else notes).append(failure)
            continue
        rows = result.get("answered_rows", {}).get(name)
        gaps = []
        for output, want in sorted(expected.items()):
            want = np.asarray(want)
            if rows is not None:
                want = want[rows]
            if output not in got:
                reasons.append(f"'{name}' has no output '{output}' (it answers {', '.join(sorted(got)) or 'nothing'})")
                continue
            answer = np.asarray(got[output], dtype=want.dtype)
            if answer.shape != want.shape:
                reasons.append(f"'{name}' answered {answer.shape} for {want.shape} '{output}'")
                continue
            if want.dtype.kind == "O":
                wrong = np.flatnonzero((answer != want).any(axis=1))
                if wrong.size:
                    row = int(wrong[0])
                    reasons.append(
                        f"'{name}' answers other '{output}' than the Evaluator's model on golden row "
                        f"{rows[row] if rows is not None else row} "
                        f"({list(answer[row])} vs {list(want[row])})"
                    )
                continue
            gap = np.abs(answer - want)
            gaps.append(float(gap.max()) if gap.size else 0.0)
            if gaps[-1] > tolerance:
                row, col = np.unravel_index(int(np.argmax(gap)), gap.shape)
                reasons.append(
                    f"'{name}' disagrees with the Evaluator's model by {gaps[-1]:.3g} on golden row "
                    f"{rows[row] if rows is not None else row} "
                    f"({output} {answer[row][col]:.6f} vs {want[row][col]:.6f}; tolerance {tolerance:g})"
                )
        if gaps:
            differences[name] = max(gaps)
    result["max_abs_difference"] = differences
    if notes:
        result["notes"] = notes
    p99 = result.get("latency_ms", {}).get("p99")
    if max_latency_ms and p99 is not None and p99 > max_latency_ms:
        reasons.append(f"p99 latency at batch 1 is {p99:.2f} ms, over --max-latency-ms {max_latency_ms:g}")
    return reasons


def summary_line(result: Mapping[str, Any]) -> str:
    """E.g. "p50 0.41 ms, p99 0.93 ms at batch 1; 2,400 / 38,000 / 95,000 rows/s at batch 1 / 32 / 256"."""
    latency = result.get("latency_ms")
    if not latency:
        return ""
    throughput = result.get("throughput", [])
    rates = " / ".join(f"{t['examples_per_s']:,.0f}" for t in throughput)
    batches = " / ".join(str(t["batch"]) for t in throughput)
    return f"p50 {latency['p50']:.2f} ms, p99 {latency['p99']:.2f} ms at batch 1; {rates} rows/s at batch {batches}"


def figures(result: Mapping[str, Any]) -> Dict[str, float]:
    """The check's numbers by metric name (as logged to MLflow under `serving.`)."""
    found: Dict[str, float] = {}
    for name in ("load_s", "first_request_ms"):
        if name in result:
            found[name] = float(result[name])
    for name, value in result.get("latency_ms", {}).items():
        if name != "calls":
            found[f"latency_{name}_ms"] = float(value)
    for row in result.get("throughput", []):
        found[f"rows_per_s.batch_{row['batch']}"] = float(row["examples_per_s"])
    for name, value in result.get("max_abs_difference", {}).items():
        found[f"max_abs_difference.{name}"] = float(value)
    return found


class Executor(base_executor.BaseExecutor):
    """Runs the serving check and writes its verdict as an InfraBlessing."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        model = artifact_utils.get_single_instance(input_dict["model"])
        blessing = artifact_utils.get_single_instance(output_dict["blessing"])
        config = features_lib.as_config(json_utils.loads(exec_properties["features"]), roles_required=False)
        required = json_utils.loads(exec_properties.get("required_signatures") or "null") or list(SIGNATURES)
        tolerance = float(exec_properties.get("tolerance") or DEFAULT_TOLERANCE)
        max_latency_ms = float(exec_properties.get("max_latency_ms") or 0.0)
        schema, files = golden.golden_sources(input_dict)
        columns = serving_columns(schema)
        all_columns = [f.name for f in schema.feature]
        model_dir = path_utils.serving_model_path(model.uri)
        count = int(exec_properties.get("golden_rows") or DEFAULT_GOLDEN_ROWS)
        result: Dict[str, Any] = {"model": model_dir, "tolerance": tolerance, "max_latency_ms": max_latency_ms}
        # The probe imports TensorFlow on the other core while the golden requests are built here, and loads the
        # model while the Evaluator's model answers them here.
        with started_probe() as probe:
            examples_bytes, instances, instance_rows = golden.golden_rows(
                files, config.feature_columns, list(columns), count
            )
            result["golden_rows"] = len(examples_bytes)
            if not examples_bytes:
                reasons = ["the eval split has no row to build golden requests from"]
            else:
                eval_config = exec_properties["eval_config"]
                request = {
                    "model_dir": model_dir,
                    # The outputs of the signature the Evaluator calls; the probe answers with all of a
                    # signature's outputs when it has none of these.
                    "outputs": model_info.signature_outputs(model_dir, golden.evaluated_signature(eval_config)),
                    "signatures": list(SIGNATURES),
                    "examples_b64": [base64.urlsafe_b64encode(e).decode("ascii") for e in examples_bytes],
                    "instances": instances,
                    "instance_rows": instance_rows,
                    "latency_calls": LATENCY_CALLS,
                    "latency_seconds": LATENCY_SECONDS,
                    "min_latency_calls": MIN_LATENCY_CALLS,
                    "seconds": SECONDS_PER_BATCH,
                    "batch_sizes": list(BATCH_SIZES),
                }
                probe.send(request)
                expected = golden.evaluator_predictions(model_dir, eval_config, examples_bytes)
                result.update(probe())
                reasons = verdict(result, expected, columns, all_columns, tolerance, max_latency_ms, required)
                result["expected"] = {output: values.tolist() for output, values in expected.items()}
        result["required_signatures"] = list(required)
        if not reasons:
            result.pop("traceback", None)
        result["reasons"] = reasons
        result["blessed"] = not reasons
        fileio.makedirs(blessing.uri)  # a KFP launcher hands over a path whose folder does not exist yet
        with fileio.open(os.path.join(blessing.uri, RESULT_FILE), "w") as f:
            f.write(json.dumps(result, indent=1))
        blessing.set_int_custom_property("blessed", int(not reasons))
        blessing.set_int_custom_property("has_model", 0)
        blessing.set_string_custom_property("reason", "; ".join(reasons))
        blessing.set_string_custom_property("figures", summary_line(result))
        if result.get("latency_ms"):
            blessing.set_float_custom_property("p50_ms", result["latency_ms"]["p50"])
            blessing.set_float_custom_property("p99_ms", result["latency_ms"]["p99"])
        if reasons:
            logging.warning("ServingCheck: the model is not pushed: %s", "; ".join(reasons))
        else:
            logging.info("ServingCheck: the model serves: %s", summary_line(result))


def read_result(blessing_uri: str) -> Optional[Dict[str, Any]]:
    """The check's `serving_check.json` in a blessing folder, or None."""
    return artifact_files.read_json(blessing_uri, RESULT_FILE)


class ServingCheckSpec(ComponentSpec):
    """Inputs: the candidate, the examples (golden requests from its eval split) and the schema."""

    PARAMETERS = {
        "features": ExecutionParameter(type=str),
        "eval_config": ExecutionParameter(type=str),
        "tolerance": ExecutionParameter(type=float),
        "max_latency_ms": ExecutionParameter(type=float),
        "golden_rows": ExecutionParameter(type=int, optional=True),
        "required_signatures": ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        "model": ChannelParameter(type=standard_artifacts.Model),
        "examples": ChannelParameter(type=standard_artifacts.Examples),
        "schema": ChannelParameter(type=standard_artifacts.Schema),
    }
    OUTPUTS = {"blessing": ChannelParameter(type=standard_artifacts.InfraBlessing)}


class ServingCheck(base_component.BaseComponent):
    """Loads `model` in a TensorFlow-only process, checks its signatures against the schema's SERVING
    environment and its answers against the Evaluator's, and measures latency; the Pusher takes its
    `blessing` as `infra_blessing`."""

    SPEC_CLASS = ServingCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        examples: types.BaseChannel,
        schema: types.BaseChannel,
        features: Mapping[str, Any],
        eval_config,
        max_latency_ms: float = 0.0,
        tolerance: float = DEFAULT_TOLERANCE,
        golden_rows: int = DEFAULT_GOLDEN_ROWS,
        required_signatures: Sequence[str] = SIGNATURES,
    ):
        from google.protobuf import json_format

        super().__init__(
            spec=ServingCheckSpec(
                model=model,
                examples=examples,
                schema=schema,
                features=json_utils.dumps(dict(features)),
                eval_config=json_format.MessageToJson(eval_config, sort_keys=True),
                tolerance=float(tolerance),
                max_latency_ms=float(max_latency_ms),
                golden_rows=int(golden_rows),
                required_signatures=json_utils.dumps(list(required_signatures)),
                blessing=types.Channel(type=standard_artifacts.InfraBlessing),
            )
        )
