"""What a run stages and records before it starts, the same for every runner: the schema copied to a path
named by its content, a fingerprint of serving data, and the params an MLflow run records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import TYPE_CHECKING, Optional, Sequence

from tfxflow import components, pipeline, schemas
from tfxflow.pipeline.beam_runners import describe as describe_beam_runner
from tfxflow.pipeline.inputs import check_data_root

if TYPE_CHECKING:
    from tfxflow.pipeline.config import RunConfig, SharedConfig


def stage_schema(schema_path: str, pipeline_root: str) -> str:
    """A copy of the schema at a path named by its content hash, under `pipeline_root` (a folder or an
    object-store URI such as gs://bucket/root).

    ImportSchemaGen's cache key holds the schema's path, not its content: an edited schema at the same path
    would be ignored by a cached run. The copy's path changes exactly when the content does.
    """
    from tfx.dsl.io import fileio

    with open(schema_path, "rb") as f:
        content = f.read()
    staged = "/".join(
        [pipeline_root.rstrip("/"), "_schemas", hashlib.sha256(content).hexdigest()[:16], os.path.basename(schema_path)]
    )
    if not fileio.exists(staged):
        fileio.makedirs(os.path.dirname(staged))
        with fileio.open(staged + ".tmp", "wb") as f:
            f.write(content)
        fileio.rename(staged + ".tmp", staged, overwrite=True)
    return staged


def files_fingerprint(paths: Sequence[str]) -> str:
    """Changes when any of `paths` is added, removed, resized or modified."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        stat = os.stat(path)
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def serving_data_fingerprint(serving_data_root: "str | None") -> str:
    """The files_fingerprint of the serving data's CSV files; empty without serving data."""
    return files_fingerprint(check_data_root(serving_data_root, "--serving-data")) if serving_data_root else ""


def git_commit() -> str:
    """The commit of the code this package runs from, when it runs from a git checkout; else "unknown"."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def tracking_params(config: "SharedConfig", schema_path: str) -> dict:
    """What an MLflow run records as params: every knob, the data, hashes of schema and feature config,
    the code version and the package versions."""
    import importlib.metadata

    from tfx.dsl.io import fileio

    with fileio.open(schema_path, "rb") as f:
        schema_hash = _sha256(f.read())
    packages = {
        "tfx": "tfx",
        "tensorflow": "tensorflow",
        "tft": "tensorflow-transform",
        "tfdv": "tensorflow-data-validation",
        "tfma": "tensorflow-model-analysis",
        "beam": "apache-beam",
        "mlflow": "mlflow",
    }
    custom = config.training.custom_config()
    custom["training"].pop("backup_root", None)
    return {
        "data": {
            "root": config.data_root,
            "schema": config.schema_path,
            "schema_sha256": schema_hash,
            "feature_config": config.features.source,
            "feature_config_sha256": _sha256(json.dumps(config.features.to_dict(), sort_keys=True).encode()),
            "serving_data": config.serving_data_root or "",
        },
        **custom,
        "train_steps": config.training.train_steps,
        "eval_steps": config.training.eval_steps,
        "transform_max_rows": config.training.transform_max_rows,
        "evaluation": dataclasses.asdict(config.evaluation),
        "split": dataclasses.asdict(config.split),
        **(
            {
                "tuning": {
                    "space": ", ".join(d.describe() for d in config.tuning.space(config.training, config.features)),
                    "trials": config.tuning.tune_trials,
                    "minutes": config.tuning.tune_minutes,
                    "seed": config.tuning.seed(config.training),
                    "workers": config.tuning.tune_workers,
                }
            }
            if config.tuning.tune
            else {}
        ),
        "pipeline": {
            "name": config.pipeline_name,
            "model_name": config.model_name,
            "beam_mode": config.beam_mode,
            "beam_workers": config.beam_workers,
            "beam_runner": describe_beam_runner(config.beam_runner),
            "cache": config.enable_cache,
            "allowed_anomaly_types": list(config.allowed_anomaly_types),
            "drift_check": config.drift_check,
        },
        "code": {"git_commit": git_commit()},
        "versions": {name: importlib.metadata.version(dist) for name, dist in packages.items()},
    }


LAST_RUN_FILE = "last_run.json"


def code_fingerprint() -> str:
    """Changes with this package's code, schemas and feature configs, and with the TFX and TF versions."""
    import importlib.metadata

    digest = hashlib.sha256()
    for package in (components, pipeline, schemas):
        root = os.path.dirname(package.__file__)
        for folder, _, names in sorted(os.walk(root)):
            for name in sorted(names):
                if name.endswith((".py", ".pbtxt", ".yaml")):
                    with open(os.path.join(folder, name), "rb") as f:
                        digest.update(name.encode() + b"\0" + f.read())
    for dist in ("tfx", "tensorflow", "tensorflow-transform", "tensorflow-model-analysis", "apache-beam"):
        digest.update(f"{dist}=={importlib.metadata.version(dist)}\n".encode())
    return digest.hexdigest()[:16]


def run_fingerprint(config: "RunConfig") -> str:
    """The same exactly when a run would redo the same work: every setting, the data files (paths, sizes,
    modification times), the schema's and serving data's content, the code."""
    with open(config.schema_path, "rb") as f:
        schema = _sha256(f.read())
    parts = {
        "config": json.loads(json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)),
        "data": files_fingerprint(check_data_root(config.data_root)),
        "serving_data": serving_data_fingerprint(config.serving_data_root),
        "schema": schema,
        "code": code_fingerprint(),
    }
    return _sha256(json.dumps(parts, sort_keys=True).encode())


def _last_run_path(config: "RunConfig") -> str:
    return os.path.join(os.path.dirname(config.paths.metadata_path), LAST_RUN_FILE)


def forget_last_run(metadata_path: str) -> Optional[str]:
    """Removes the record of the last run beside the metadata store at `metadata_path`, which would answer the
    next identical run with "up to date" and that run's push: after a run whose MLflow records wait in the
    outbox, or a rollback. Returns its path when there was one."""
    path = os.path.join(os.path.dirname(metadata_path), LAST_RUN_FILE)
    try:
        os.remove(path)
    except FileNotFoundError:
        return None
    return path


def write_json_atomically(path: str, data: dict) -> None:
    """Writes `data` to `path` through a temporary file and a rename: readers see the old or the new file."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.replace(path + ".tmp", path)


def record_last_run(config: "RunConfig", fingerprint: str, summary: dict) -> None:
    """Remembers the fingerprint and outcome of a run that finished."""
    write_json_atomically(_last_run_path(config), {"fingerprint": fingerprint, **summary})


def up_to_date(config: "RunConfig", fingerprint: str) -> "dict | None":
    """The last run's record when it had this fingerprint and its outputs are still there, else None."""
    try:
        with open(_last_run_path(config), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    pushed = record.get("pushed_destination")
    if (
        record.get("fingerprint") != fingerprint
        or not os.path.exists(config.paths.metadata_path)
        or (pushed and not os.path.isdir(pushed))
    ):
        return None
    return record
