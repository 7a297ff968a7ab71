"""The layout of a TF Serving model directory (`<serving>/<model>/`) as the Pusher writes it and the steps that
read it find it: integer version folders, what a version keeps beside its SavedModel, and the rollback log.

TF Serving loads only all-digit folder names and ignores `assets.extra/`, so the pipeline's own files live in
hidden names and under `assets.extra/tfxflow/`."""

from __future__ import annotations

import json
import uuid
from typing import List

from tfx.dsl.io import fileio

from tfxflow.components import object_store

# Where a pushed version keeps the statistics of its training data (a SavedModel's folder for extra files).
STATISTICS_DIR = "assets.extra/tfxflow/statistics"


# Where a pushed version keeps its TFLite models and their check (components/edge/edge.py), when the run made them.
EDGE_DIR = "assets.extra/tfxflow/edge"


# The rollback log of a serving base: a JSON list of entries (pipeline/tools/rollback.py); TF Serving ignores it.
ROLLBACK_LOG = ".tfxflow-rollbacks.json"


def versions(base: str) -> List[int]:
    """The integer version folders of `base`, oldest first."""
    if object_store.is_remote(base):
        try:
            names = object_store.list_names(base)
        except FileNotFoundError:  # nothing pushed yet: an object store has no empty folders
            return []
    elif fileio.exists(base):
        names = fileio.listdir(base)
    else:
        return []
    return sorted(int(name.rstrip("/")) for name in names if name.rstrip("/").isdigit())


def served_versions(base: str) -> List[int]:
    """The versions of `base` that hold a whole SavedModel (what TF Serving can load), oldest first."""

    def complete(version: int) -> bool:
        path = f"{base.rstrip('/')}/{version}/saved_model.pb"
        return object_store.exists(path) if object_store.is_remote(base) else fileio.exists(path)

    return [version for version in versions(base) if complete(version)]


def rollback_log_path(base: str) -> str:
    return f"{base.rstrip('/')}/{ROLLBACK_LOG}"


def read_rollbacks(base: str) -> List[dict]:
    """The rollback log of `base`, oldest entry first; [] when there is none. A log that does not parse raises
    (ValueError naming it): better no push than a rolled-back model pushed again."""
    path = rollback_log_path(base)
    try:
        if object_store.is_remote(path):
            text = object_store.read_bytes(path).decode("utf-8")
        elif fileio.exists(path):
            with fileio.open(path, "r") as f:
                text = f.read()
        else:
            return []
    except FileNotFoundError:
        return []
    try:
        entries = json.loads(text)
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "fingerprint" in e for e in entries):
            raise ValueError("not a list of entries with a fingerprint")
    except ValueError as err:
        raise ValueError(f"the rollback log {path} does not parse ({err}): repair or remove it") from None
    return entries


def write_rollbacks(base: str, entries: List[dict]) -> str:
    """Replaces the rollback log of `base` in one step (a temporary file renamed over it; one object write on an
    object store): readers see the old log or the new one. Returns its path."""
    path = rollback_log_path(base)
    data = json.dumps(entries, indent=2, sort_keys=True) + "\n"
    if object_store.is_remote(path):
        object_store.write_bytes(path, data.encode("utf-8"))
        return path
    temp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with fileio.open(temp, "w") as f:
        f.write(data)
    try:
        fileio.rename(temp, path, overwrite=True)
    except Exception:
        fileio.remove(temp)
        raise
    return path
