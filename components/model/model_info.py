"""What the steps after the Trainer read of an exported model: its task, label, classes and outputs, as the
built-in Trainer records them in the SavedModel (`assets.extra/tfxflow_model.json`, which TF Serving ignores).

A model of a user's own run_fn has no such record: `describe` falls back on the feature config (task and label)
and the model's own signatures.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from tfxflow.components import artifact_files, names


def saved_model_dir(model_uri: str) -> str:
    """The SavedModel folder of a Model artifact: TFX's `Format-Serving/`, or the artifact's root (a model
    copied flat, e.g. a pushed version)."""
    from tfx.dsl.io import fileio

    serving = os.path.join(model_uri, "Format-Serving")
    return serving if fileio.exists(serving) else model_uri


def read(model_dir: str) -> Optional[Dict[str, Any]]:
    """The record in a SavedModel folder (or a Model artifact's URI), or None."""
    for folder in (model_dir, os.path.join(model_dir, "Format-Serving")):
        found = artifact_files.read_json(folder, names.MODEL_INFO_FILE)
        if found is not None:
            return found
    return None


def describe(model_dir: str, features: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The record, or what the feature config (its dict form) says of a model without one: task, label,
    classes ([]: unknown), prediction_key ("": the model's only output)."""
    found = read(model_dir)
    if found is not None:
        return found
    features = features or {}
    return {
        "task": features.get("task", "binary"),
        "label": features.get("label", {}),
        "classes": list((features.get("label") or {}).get("classes") or []),
        "outputs": [],
        "prediction_key": "",
        "signatures": [],
    }


def signature_outputs(model_dir: str, signature: str) -> List[str]:
    """The output names of `signature` in the SavedModel in `model_dir`, read from its saved_model.pb (nothing
    loaded); [] when it has no such signature or the file cannot be read (loading it then says why)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2
    from tfx.dsl.io import fileio

    path = os.path.join(model_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    if not fileio.exists(path):
        return []
    try:
        with fileio.open(path, "rb") as f:
            saved_model.ParseFromString(f.read())
    except DecodeError:
        return []
    # The graph TF Serving and TFMA load: the one tagged "serve" (a SavedModel may hold others).
    graphs = sorted(saved_model.meta_graphs, key=lambda graph: "serve" not in graph.meta_info_def.tags)
    for graph in graphs:
        if signature in graph.signature_def:
            return sorted(graph.signature_def[signature].outputs)
    return []
