"""Names that more than one module must spell alike: component ids, TFX's split folders, files, signatures.

Light on purpose (no TFX or TensorFlow import): the CLI, the runners and the components all read it.
components/serving_probe.py runs in a TensorFlow-only process and gets these names in its request instead.
"""

import os
from typing import Optional

# Node ids in the pipeline (pipeline/definition.py). ML Metadata, the run summary, `accept-data` and the
# Kubeflow compiler look components up by them.
MLFLOW_START = "MlflowStart"
MLFLOW_RECORD = "MlflowRecord"
MLFLOW_FINISH = "MlflowFinish"
EXAMPLE_GEN = "CsvExampleGen"
STATISTICS_GEN = "StatisticsGen"
SERVED_BASELINE = "ServedBaseline"
DATA_GATE = "DataGate"
TRANSFORM = "Transform"
TUNER = "Tuner"
TRAINER = "Trainer"
EVALUATOR = "Evaluator"
SERVING_CHECK = "ServingCheck"
EDGE_EXPORT = "EdgeExport"
PUSHER = "Pusher"

# MLflow's tag of a nested run (its UI shows it under the parent): a tuning trial under its pipeline run.
PARENT_RUN_TAG = "mlflow.parentRunId"
TRIAL_TAG = "tfxflow.trial"  # a trial's number, on its nested run

# The files of a data folder: CSV, and CSV compressed with gzip (read as it is). ExampleGen's input pattern matches
# both (its driver fingerprints what the pattern matches); the readers keep only these endings.
CSV_SUFFIXES = (".csv", ".csv.gz")
CSV_PATTERN = "*.csv*"
CSV_FILES = "*.csv or *.csv.gz file"


def is_csv_file(path: str) -> bool:
    return path.endswith(CSV_SUFFIXES)


# Model versions the Pusher keeps in the serving directory, the newest (at least 2: the previous one stays
# while TF Serving loads a new one). The CLI, the run configuration and the pipeline default to it.
DEFAULT_KEEP_VERSIONS = 5

# TFX writes each split of an artifact into `<uri>/Split-<name>` (tfx.types.artifact_utils.get_split_uri).
SPLIT_PREFIX = "Split-"

# The Trainer's record of its epochs, devices and timing, beside the model in its ModelRun output.
TRAINING_INFO_FILE = "training_info.json"

# The exported model's record of its task, label and classes, inside the SavedModel (components/model/model_info.py).
MODEL_INFO_FILE = os.path.join("assets.extra", "tfxflow_model.json")

# The exported model's signatures and its output (components/model/export.py).
SERVING_SIGNATURE = "serving_default"  # serialized tf.Examples, as TFMA and TF Serving's classify/predict send
RAW_SIGNATURE = "serving_raw"  # one tensor per raw column, as TF Serving's REST `instances`
TRANSFORM_SIGNATURE = "transform_features"  # raw tf.Examples -> transformed features and label, for TFMA
OUTPUT_KEY = "probabilities"  # a binary model's output; components/model/tasks.py has every task's


def split_dir(uri: str, split: str) -> str:
    """`<uri>/Split-<split>`: where TFX keeps one split of an artifact."""
    return os.path.join(uri, SPLIT_PREFIX + split)


def split_of(entry: str) -> Optional[str]:
    """The split a folder name (or listing entry, trailing '/' allowed) holds; None for other names."""
    name = os.path.basename(entry.rstrip("/"))
    return name[len(SPLIT_PREFIX) :] if name.startswith(SPLIT_PREFIX) else None
