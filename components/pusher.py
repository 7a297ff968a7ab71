"""Pusher executor: a new version appears in the serving directory complete, or not at all, and old ones are
pruned.

TFX's Pusher copies the model into `<base>/<version>/` in place; TF Serving polls the base folder and loads a
version directory as soon as it sees one (tensorflow/tfx#4466), so a crash mid-copy leaves a broken version
that looks like the newest. This executor copies into a hidden `.incoming-*` folder beside the versions (TF
Serving only loads integer names), checks it holds `saved_model.pb` and `variables/`, then renames it into
place: one atomic step on a local or mounted file system. It then keeps the newest `keep_versions` versions
(custom_config; at least 2, so the previous model stays while the new one loads).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, proto_utils

INCOMING_PREFIX = ".incoming-"
STALE_INCOMING_S = 3600  # an incoming folder this old belongs to a push that died
DEFAULT_KEEP_VERSIONS = 5


def versions(base: str) -> List[int]:
    """The integer version folders of `base`, oldest first."""
    if not fileio.exists(base):
        return []
    return sorted(int(name.rstrip("/")) for name in fileio.listdir(base) if name.rstrip("/").isdigit())


def next_version(base: str, now: float) -> int:
    """The Unix time, or one more than the newest existing version when the clock is behind it."""
    existing = versions(base)
    return max(int(now), existing[-1] + 1 if existing else 0)


def push_atomically(model_path: str, base: str, version: int) -> str:
    """Copies the SavedModel at `model_path` to `<base>/<version>/` through a hidden folder; returns the path."""
    target = f"{base.rstrip('/')}/{version}"
    incoming = f"{base.rstrip('/')}/{INCOMING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    fileio.makedirs(base)
    try:
        io_utils.copy_dir(model_path, incoming)
    except Exception:
        # A failed copy (disk full, a vanished mount) takes its partial folder with it, so the space comes back.
        if fileio.exists(incoming):
            fileio.rmtree(incoming)
        raise
    for required in ("saved_model.pb", "variables"):
        if not fileio.exists(os.path.join(incoming, required)):
            fileio.rmtree(incoming)
            raise RuntimeError(f"{model_path}: no {required}; nothing was pushed to {base}")
    fileio.rename(incoming, target, overwrite=False)
    return target


def prune(base: str, keep: int, now: float) -> List[str]:
    """Deletes all but the newest `keep` versions, and incoming folders of pushes that died; returns them."""
    removed = []
    for version in versions(base)[:-keep]:
        path = f"{base.rstrip('/')}/{version}"
        fileio.rmtree(path)
        removed.append(path)
    for name in fileio.listdir(base):
        name = name.rstrip("/")
        path = f"{base.rstrip('/')}/{name}"
        if name.startswith(INCOMING_PREFIX) and now - fileio.stat(path).mtime_nsec / 1e9 > STALE_INCOMING_S:
            fileio.rmtree(path)
            removed.append(path)
    return removed


class Executor(tfx_pusher.Executor):
    """TFX's Pusher for a file-system destination, with an atomic version folder and retention."""

    def Do(self, input_dict: Dict[str, List[types.Artifact]], output_dict: Dict[str, List[types.Artifact]],
           exec_properties: Dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
        if destination.WhichOneof("destination") != "filesystem":
            raise NotImplementedError("this Pusher pushes to a file-system destination only")
        custom = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        keep = max(2, int(custom.get("keep_versions", DEFAULT_KEEP_VERSIONS)))
        base = destination.filesystem.base_directory
        now = time.time()
        version = next_version(base, now)
        model_path = self.GetModelPath(input_dict)
        serving_path = push_atomically(model_path, base, version)
        logging.info("Model written to serving path %s.", serving_path)
        for path in prune(base, keep, now):
            logging.info("Removed %s (keeping the newest %d versions).", path, keep)
        io_utils.copy_dir(model_path, model_push.uri)
        self._MarkPushed(model_push, pushed_destination=serving_path, pushed_version=str(version))
