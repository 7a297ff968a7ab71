"""Pusher executor: a new version appears in the serving directory complete, or not at all, and old ones are
pruned.

TFX's Pusher copies the model into `<base>/<version>/` in place; TF Serving polls the base folder and loads a
version directory as soon as it sees one (tensorflow/tfx#4466), so a crash mid-copy leaves a broken version
that looks like the newest. This executor copies into a hidden `.incoming-*` folder beside the versions (TF
Serving only loads integer names), checks it holds `saved_model.pb` and `variables/`, then renames it into
place: one atomic step on a local or mounted file system. It then keeps the newest `keep_versions` versions
(custom_config; at least 2, so the previous model stays while the new one loads).

Each version also carries the statistics of the data its model was trained on, under
`assets.extra/tfxflow/statistics/` (TF Serving ignores `assets.extra` but for warmup files): the drift baseline
of a pipeline that takes the served model as the source of truth (Kubeflow; components/baseline.py).

On an object store (s3://, minio://, gs://), which has no rename, the version is uploaded file by file with
`saved_model.pb` last: TF Serving cannot load a version before it holds a SavedModel, and the variables it
needs are there by then. A push that dies midway leaves a version without `saved_model.pb`, which a push an
hour later deletes. Each push claims its version with a conditional write first, since there is no rename
that fails when the target exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional

from absl import logging
from tfx import types
from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter
from tfx.utils import io_utils, json_utils, proto_utils

from components import object_store

INCOMING_PREFIX = ".incoming-"
CLAIMS_DIR = ".claims"  # on an object store, one empty object per version a push has taken
STALE_INCOMING_S = 3600  # an incoming folder this old belongs to a push that died
DEFAULT_KEEP_VERSIONS = 5
STATISTICS_KEY = "statistics"
# Where a pushed version keeps the statistics of its training data (a SavedModel's folder for extra files).
STATISTICS_DIR = "assets.extra/tfxflow/statistics"


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


def next_version(base: str, now: float) -> int:
    """The Unix time, or one more than the newest existing version when the clock is behind it."""
    existing = versions(base)
    return max(int(now), existing[-1] + 1 if existing else 0)


def _copy_statistics(statistics_uri: str, version_dir: str) -> None:
    """Copies every split's statistics file into the version's `STATISTICS_DIR`."""
    for split_dir in fileio.glob(os.path.join(statistics_uri, "Split-*")):
        name = os.path.basename(split_dir.rstrip("/"))
        target = os.path.join(version_dir, STATISTICS_DIR, name)
        fileio.makedirs(target)
        for source in fileio.glob(os.path.join(split_dir, "*")):
            fileio.copy(source, os.path.join(target, os.path.basename(source)))


def push_atomically(model_path: str, base: str, version: int, statistics_uri: Optional[str] = None) -> str:
    """Copies the SavedModel at `model_path` (with the statistics at `statistics_uri`) to `<base>/<version>/`
    through a hidden folder, or on an object store with `saved_model.pb` last; returns the version's path."""
    if object_store.is_remote(base):
        return _push_to_object_store(model_path, base, version, statistics_uri)
    target = f"{base.rstrip('/')}/{version}"
    incoming = f"{base.rstrip('/')}/{INCOMING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    fileio.makedirs(base)
    try:
        io_utils.copy_dir(model_path, incoming)
        if statistics_uri:
            _copy_statistics(statistics_uri, incoming)
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


def _claim(base: str, version: int) -> int:
    """`version`, or the next one no other push has taken: an object store has no rename that fails when the
    target exists, so two pushes starting in the same second would otherwise share one version folder."""
    while not object_store.create(f"{base.rstrip('/')}/{CLAIMS_DIR}/{version}", str(time.time()).encode()):
        version += 1
    return version


def _push_to_object_store(model_path: str, base: str, version: int, statistics_uri: Optional[str]) -> str:
    version = _claim(base, version)
    target = f"{base.rstrip('/')}/{version}"
    staging = tempfile.mkdtemp(prefix="tfxflow-push-")
    try:
        local = os.path.join(staging, "version")
        io_utils.copy_dir(model_path, local)
        if statistics_uri:
            _copy_statistics(statistics_uri, local)
        for required in ("saved_model.pb", "variables"):
            if not os.path.exists(os.path.join(local, required)):
                raise RuntimeError(f"{model_path}: no {required}; nothing was pushed to {base}")
        graph = os.path.join(staging, "saved_model.pb")
        shutil.move(os.path.join(local, "saved_model.pb"), graph)
        object_store.upload(local, target)
        object_store.upload(graph, f"{target}/saved_model.pb")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def prune(base: str, keep: int, now: float) -> List[str]:
    """Deletes all but the newest `keep` versions, and incoming folders of pushes that died; returns them."""
    removed = []
    for version in versions(base)[:-keep]:
        path = f"{base.rstrip('/')}/{version}"
        if object_store.is_remote(path):
            object_store.delete(path)
        else:
            fileio.rmtree(path)
        removed.append(path)
    if object_store.is_remote(base):
        # Versions of pushes that died before their saved_model.pb. A version is the Unix time its push started:
        # one younger than STALE_INCOMING_S may still be uploading (another run's push).
        for version in versions(base):
            path = f"{base.rstrip('/')}/{version}"
            if now - version > STALE_INCOMING_S and not object_store.exists(f"{path}/saved_model.pb"):
                object_store.delete(path)
                removed.append(path)
        kept = versions(base)
        claims = f"{base.rstrip('/')}/{CLAIMS_DIR}"
        if kept and object_store.exists(claims):
            for name in object_store.list_names(claims):
                if name.isdigit() and int(name) < kept[0]:
                    object_store.delete(f"{claims}/{name}")
        return removed
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
        statistics = input_dict.get(STATISTICS_KEY)
        serving_path = push_atomically(model_path, base, version,
                                       artifact_utils.get_single_uri(statistics) if statistics else None)
        logging.info("Model written to serving path %s.", serving_path)
        for path in prune(base, keep, now):
            logging.info("Removed %s (keeping the newest %d versions).", path, keep)
        io_utils.copy_dir(model_path, model_push.uri)
        # The version of the path: on an object store a concurrent push may have taken `version` first.
        self._MarkPushed(model_push, pushed_destination=serving_path,
                         pushed_version=os.path.basename(serving_path.rstrip("/")))


class PusherSpec(standard_component_specs.PusherSpec):
    """TFX's Pusher contract plus the statistics of the model's training data, kept with each pushed version."""

    INPUTS = {**standard_component_specs.PusherSpec.INPUTS,
              STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True)}


class Pusher(base_component.BaseComponent):
    """Pushes a blessed model to `<base_directory>/<version>/` with `Executor` (a local or mounted folder, or an
    object store), keeping the newest `keep_versions` versions."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(self, model: types.BaseChannel, model_blessing: types.BaseChannel, base_directory: str,
                 keep_versions: int = DEFAULT_KEEP_VERSIONS, statistics: Optional[types.BaseChannel] = None):
        destination = pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=base_directory))
        super().__init__(spec=PusherSpec(
            model=model, model_blessing=model_blessing, statistics=statistics, push_destination=destination,
            custom_config=json_utils.dumps({"keep_versions": keep_versions}),
            pushed_model=types.Channel(type=standard_artifacts.PushedModel)))
