"""TF Serving's model config for a stable and a canary version of one model (`tfxflow kubeflow serving-config`).

Under the default `latest` policy TF Serving serves only the highest version under the base path, which is what
the Pusher's integer versions give. For a canary release both versions must be loaded and named: a `specific`
version policy with the two versions, and the version labels `stable` and `canary`. Clients (or a gateway that
splits traffic, kubeflow/serving/canary/) then call `/v1/models/<name>/labels/stable:predict` or
`.../labels/canary:predict` (gRPC: `ModelSpec.version_label`). TF Serving assigns a label only to a version it has
loaded (unless started with `--allow_version_labels_for_unavailable_models`), so a new canary appears in two
steps: load it, then label it (the config is re-read every `--model_config_file_poll_wait_seconds`).
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

from tfxflow.pipeline.config import ConfigError

STABLE, CANARY = "stable", "canary"


def served_versions(model_base: str) -> List[int]:
    """The complete versions (holding `saved_model.pb`) under a local `<serving_dir>/<model>`, oldest first,
    without those `tfxflow rollback` rolled back (its log in the folder): neither is a candidate for a label."""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components import serving_dir

    if not os.path.isdir(model_base):
        raise ConfigError(f"--serving-dir: {model_base}: no such folder")
    rolled_back = {
        int(v)
        for entry in serving_dir.read_rollbacks(model_base)
        for v in entry.get("versions", [entry["rolled_back_version"]])
    }
    return [version for version in serving_dir.served_versions(model_base) if version not in rolled_back]


def choose_versions(available: Sequence[int], stable: Optional[int], canary: Optional[int]) -> Tuple[int, int]:
    """(stable, canary): as given, else the canary is the newest version and the stable one the version before."""
    if canary is None:
        if not available:
            raise ConfigError("no pushed version to release as the canary (give --canary VERSION)")
        canary = available[-1]
    if stable is None:
        older = [v for v in available if v < canary]
        if not older:
            raise ConfigError(
                f"no version older than the canary {canary} to keep as the stable one (give --stable VERSION)"
            )
        stable = older[-1]
    for flag, version in (("--stable", stable), ("--canary", canary)):
        if version <= 0:
            raise ConfigError(f"{flag} {version}: a version is a positive integer (a folder under the base path)")
        if available and version not in available:
            raise ConfigError(
                f"{flag} {version}: not a complete version in the serving directory "
                f"(there: {', '.join(map(str, available))})"
            )
    if stable == canary:
        raise ConfigError(f"--stable and --canary are both {stable}: a canary release needs two versions")
    return stable, canary


def canary_config(model_name: str, base_path: str, stable: int, canary: int):
    """A `ModelServerConfig` serving exactly `stable` and `canary` of `model_name`, labelled so."""
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add(name=model_name, base_path=base_path, model_platform="tensorflow")
    model.model_version_policy.specific.versions.extend(sorted((stable, canary)))
    model.version_labels[STABLE] = stable
    model.version_labels[CANARY] = canary
    return config


def config_text(config) -> str:
    """The config in the text format TF Serving's `--model_config_file` reads."""
    from google.protobuf import text_format

    return text_format.MessageToString(config)
