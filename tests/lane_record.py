"""What one lane makes of the same inputs, so that the lanes can be compared (tests/test_lanes_agree.py).

Run with a lane's Python: `python -m tests.lane_record OUT_DIR`; writes OUT_DIR/record.json. The same seeded
taxi sample goes through `tfxflow run` three times in one home, as a user would run it:

1. the sample: trains, blesses without a baseline, pushes;
2. the same rows with fares 25% higher: the data gate refuses it for drift, nothing is pushed;
3. the sample with a word in one `fare` cell: refused before any component, naming file, line and column.

Recorded: each run's exit code and the lines of its output that say what was decided (paths relative to
OUT_DIR); the pushed model's serving signatures (input and output names, dtypes, shapes) and its predictions for
20 rows; the MLflow runs' statuses, parameters (the package versions apart), metric names and values, tag
names and artifact paths.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Dict, List

from tests import helpers
from tfxflow.pipeline.inputs import bundled_dataset_dir

SEED = 11
ROWS = 1500
TRAIN_FLAGS = ["--train-steps", "120", "--batch-size", "64", "--eval-every-steps", "60"]
# The lines of a run's output that state a decision and its reasons (the rest is timing and progress).
DECIDING = re.compile(r"^(\s*(data|blessed|pushed):\s+.*|(data gate|input data|error): .*|\s+- .*)$", re.M)
VERSION = re.compile(r"\b1\d{9}\b")  # a pushed version: the push's time in seconds
# Parameters that name the stack, which differs by lane on purpose (docs/environment.md), or come from this
# machine's speed (the input pipeline's rate, and whether it or the model bounds training).
MACHINE_PARAMS = re.compile(r"^versions\.|_per_s$|^trainer\.input_bound$")
PREDICTED_ROWS = 20
TIMES = re.compile(r"\d{4}-\d\d-\d\dT[\d.-]+")  # a run report's name


def _relative(text: str, out: str) -> str:
    return text.replace(out, "<out>")


def _run(out: str, name: str, data: str) -> Dict[str, Any]:
    home = os.path.join(out, "home")
    done = helpers.run_cli("run", "--home", home, "--data-root", data, *TRAIN_FLAGS)
    text = _relative(done.stdout + done.stderr, out)
    decided = [VERSION.sub("<version>", m.group(0).strip()) for m in DECIDING.finditer(text)]
    return {"run": name, "exit": done.returncode, "decided": decided}


def _signatures(model_dir: str) -> Dict[str, Any]:
    import tensorflow as tf

    loaded = tf.saved_model.load(model_dir)
    found = {}
    for key, function in sorted(loaded.signatures.items()):
        inputs = function.structured_input_signature[1]
        found[key] = {
            "inputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in sorted(inputs.items())},
            "outputs": {k: [v.dtype.name, v.shape.as_list()] for k, v in sorted(function.structured_outputs.items())},
        }
    return found


def _predictions(model_dir: str, data_csv: str) -> List[float]:
    import tensorflow as tf

    rows = helpers.read_csv_rows(data_csv, PREDICTED_ROWS)
    schema = os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt")
    examples = tf.constant(helpers.serialize_examples(rows, schema, drop=("tips",)))
    probabilities = tf.saved_model.load(model_dir).signatures["serving_default"](examples=examples)["probabilities"]
    return [round(float(p), 4) for p in probabilities.numpy().ravel()]


def _mlflow_runs(home: str, out: str) -> List[Dict[str, Any]]:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{os.path.join(home, 'mlflow', 'mlflow.db')}")
    runs = []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"]):
            artifacts, folders = [], [""]
            while folders:
                for entry in client.list_artifacts(run.info.run_id, folders.pop() or None):
                    (folders if entry.is_dir else artifacts).append(entry.path)
            params = {k: _relative(v, out) for k, v in run.data.params.items() if not MACHINE_PARAMS.search(k)}
            runs.append(
                {
                    "experiment": experiment.name,
                    "status": run.info.status,
                    "params": dict(sorted(params.items())),
                    "metrics": {k: round(v, 4) for k, v in sorted(run.data.metrics.items())},
                    "tags": sorted(k for k in run.data.tags if not k.startswith("mlflow.")),
                    "artifacts": sorted(TIMES.sub("<time>", VERSION.sub("<version>", a)) for a in artifacts),
                }
            )
    return runs


def record(out: str) -> Dict[str, Any]:
    """Makes the three runs under `out` and returns what they decided and made."""
    from tfxflow.components import lane

    sample, fresh = helpers.write_taxi_samples(
        [(os.path.join(out, "sample"), ROWS), (os.path.join(out, "rows"), PREDICTED_ROWS)], seed=SEED
    )
    data_csv = os.path.join(sample, "data.csv")
    drifted = helpers.rewrite_csv(
        data_csv, os.path.join(out, "fares_up"), lambda i, row: {**row, "fare": f"{float(row['fare']) * 1.25:.2f}"}
    )
    broken = helpers.rewrite_csv(
        data_csv, os.path.join(out, "broken"), lambda i, row: {**row, "fare": "twelve"} if i == 41 else row
    )
    runs = [_run(out, "sample", sample), _run(out, "fares up 25%", drifted), _run(out, "a word in fare", broken)]
    home = os.path.join(out, "home")
    versions = helpers.pushed_versions(os.path.join(home, "serving"), "taxi")
    model_dir = os.path.join(home, "serving", "taxi", versions[-1]) if versions else ""
    return {
        "lane": lane.name(),
        "tfx": lane.tfx_version(),
        "runs": runs,
        "pushed_versions": len(versions),
        "signatures": _signatures(model_dir) if model_dir else {},
        "predictions": _predictions(model_dir, os.path.join(fresh, "data.csv")) if model_dir else [],
        "mlflow": _mlflow_runs(home, out),
    }


def main(argv: List[str]) -> int:
    out = os.path.abspath(argv[1])
    os.makedirs(out, exist_ok=True)
    found = record(out)
    with open(os.path.join(out, "record.json"), "w", encoding="utf-8") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
