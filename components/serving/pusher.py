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
of a pipeline that takes the served model as the source of truth (Kubeflow; components/validation/baseline.py).

On an object store (s3://, minio://, gs://), which has no rename, the version is uploaded file by file with
`saved_model.pb` last: TF Serving cannot load a version before it holds a SavedModel, and the variables it
needs are there by then. A push that dies midway leaves a version without `saved_model.pb`, which a push an
hour later deletes. Each push claims its version with a conditional write first, since there is no rename
that fails when the target exists.

A model is known by its fingerprint (`model_fingerprint`: SHA-256 over `saved_model.pb` and `variables/`), the
same in the Trainer's output and in every version folder holding it. `tfxflow rollback` (pipeline/tools/rollback.py)
records the models it rolls back in `<base>/.tfxflow-rollbacks.json` (hidden from TF Serving, which loads only
all-digit names). Before pushing, this Pusher looks the candidate up there: a rolled-back model is not pushed
again, whatever blessed it (a cached Trainer hands on the same model, an identical retrain makes the same one);
the PushedModel artifact says why in `not_pushed_reason`. A push that replaces a rollback's copy says so in
`after_rollback`.
"""

from __future__ import annotations

import datetime
import hashlib
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

from tfxflow.components import names, object_store, serving_dir
from tfxflow.components.edge import edge

INCOMING_PREFIX = ".incoming-"
CLAIMS_DIR = ".claims"  # on an object store, one empty object per version a push has taken
STALE_INCOMING_S = 3600  # an incoming folder this old belongs to a push that died
STATISTICS_KEY = "statistics"
EDGE_KEY = "edge_model"
# Custom properties of the PushedModel artifact.
MODEL_FINGERPRINT = "model_fingerprint"  # the candidate's model_fingerprint, pushed or not
NOT_PUSHED_REASON = "not_pushed_reason"  # why a blessed model was not pushed: it was rolled back
AFTER_ROLLBACK = "after_rollback"  # this push replaces a rollback's copy: which rollback, in one sentence
# Custom properties `tfxflow rollback` sets on the ModelBlessing (blessed set to 0) and PushedModel artifacts of
# a rolled-back model in ML Metadata.
ROLLED_BACK = "tfxflow_rolled_back"  # one sentence: from which version, when, by whom, why
ROLLED_BACK_AT = "tfxflow_rolled_back_at"  # ms since the epoch
ROLLED_BACK_BY = "tfxflow_rolled_back_by"
ROLLED_BACK_REASON = "tfxflow_rolled_back_reason"


def next_version(base: str, now: float) -> int:
    """The Unix time, or one more than the newest existing version when the clock is behind it."""
    existing = serving_dir.versions(base)
    return max(int(now), existing[-1] + 1 if existing else 0)


def _model_files(saved_model_dir: str) -> List[str]:
    """`saved_model.pb` and every file under `variables/`, as paths relative to `saved_model_dir`, sorted."""
    root = saved_model_dir.rstrip("/")
    if object_store.is_remote(root):
        files = object_store.list_files(root)
        return sorted(f for f in files if f == "saved_model.pb" or f.startswith("variables/"))
    files = ["saved_model.pb"] if fileio.exists(f"{root}/saved_model.pb") else []
    variables = f"{root}/variables"
    if fileio.exists(variables):
        for folder, _, names in fileio.walk(variables):
            folder = folder.decode() if isinstance(folder, bytes) else folder
            rel = os.path.relpath(folder.rstrip("/"), root).replace(os.sep, "/")
            files += [f"{rel}/{name.decode() if isinstance(name, bytes) else name}" for name in names]
    return sorted(files)


def _file_digest(path: str) -> str:
    if object_store.is_remote(path):
        return hashlib.sha256(object_store.read_bytes(path)).hexdigest()
    digest = hashlib.sha256()
    with fileio.open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_fingerprint(saved_model_dir: str) -> str:
    """SHA-256 over `saved_model.pb` and every file under `variables/` (relative path and content, sorted): the
    same for a model wherever it is copied (Trainer output, version folder), whatever else lies beside it
    (assets.extra: warmup requests, statistics). Any file system TFX reads, or an object store."""
    files = _model_files(saved_model_dir)
    if "saved_model.pb" not in files:
        raise FileNotFoundError(f"{saved_model_dir}: no saved_model.pb, not a SavedModel")
    digest = hashlib.sha256()
    for rel in files:
        digest.update(f"{rel}\0{_file_digest(saved_model_dir.rstrip('/') + '/' + rel)}\n".encode())
    return digest.hexdigest()


def rolled_back_entry(entries: List[dict], fingerprint: str) -> Optional[dict]:
    """The latest rollback entry of the model with `fingerprint`, or None."""
    return next((e for e in reversed(entries) if e.get("fingerprint") == fingerprint), None)


def rolled_back_text(entry: dict) -> str:
    """ "rolled back from version 17 on 2026-11-30T12:00:00+00:00 by ann@host: <reason>"."""
    return (
        f"rolled back from version {entry['rolled_back_version']} on {entry['at']} by {entry['by']}: "
        f"{entry.get('reason') or 'no reason given'}"
    )


def not_pushed_text(rolled_back: str) -> str:
    """`not_pushed_reason` of a model that was rolled back (`rolled_back`: `rolled_back_text` of its entry)."""
    return f"this model is the one {rolled_back}; train a new model (new data or settings) to push again"


def after_rollback_text(entries: List[dict], served: List[int]) -> Optional[str]:
    """When the newest served version is the copy the latest rollback published: one sentence saying which
    version was rolled back to which, by whom, when and why; else None."""
    if not entries or not served or entries[-1].get("new_version") != served[-1]:
        return None
    last = entries[-1]
    event = [e for e in entries if e.get("new_version") == last["new_version"]]
    rolled = ", ".join(str(e["rolled_back_version"]) for e in event)
    return (
        f"version {rolled} had been rolled back to version {last['to_version']} (served as version "
        f"{last['new_version']}) on {last['at']} by {last['by']}: {last.get('reason') or 'no reason given'}; "
        "this model was blessed and replaces it"
    )


def iso_time(epoch: float) -> str:
    """Local time with its UTC offset, to the second."""
    return datetime.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def _copy_statistics(statistics_uri: str, version_dir: str) -> None:
    """Copies every split's statistics file into the version's `STATISTICS_DIR`."""
    for split_dir in fileio.glob(os.path.join(statistics_uri, names.SPLIT_PREFIX + "*")):
        name = os.path.basename(split_dir.rstrip("/"))
        target = os.path.join(version_dir, serving_dir.STATISTICS_DIR, name)
        fileio.makedirs(target)
        for source in fileio.glob(os.path.join(split_dir, "*")):
            fileio.copy(source, os.path.join(target, os.path.basename(source)))


def _copy_edge(edge_uri: str, version_dir: str) -> None:
    """Copies the published TFLite models of `edge_uri` and their `edge.json` into the version's `EDGE_DIR`."""
    published = edge.published_files(edge.read_result(edge_uri) or {})
    if not published:
        return
    target = os.path.join(version_dir, serving_dir.EDGE_DIR)
    fileio.makedirs(target)
    for name in published:
        fileio.copy(os.path.join(edge_uri, name), os.path.join(target, name))


def _copy_extras(version_dir: str, statistics_uri: Optional[str], edge_uri: Optional[str]) -> None:
    if statistics_uri:
        _copy_statistics(statistics_uri, version_dir)
    if edge_uri:
        _copy_edge(edge_uri, version_dir)


def push_atomically(
    model_path: str, base: str, version: int, statistics_uri: Optional[str] = None, edge_uri: Optional[str] = None
) -> str:
    """Copies the SavedModel at `model_path` (with the statistics at `statistics_uri` and the TFLite models at
    `edge_uri`) to `<base>/<version>/` through a hidden folder, or on an object store with `saved_model.pb`
    last; returns the version's path."""
    if object_store.is_remote(base):
        return _push_to_object_store(model_path, base, version, statistics_uri, edge_uri)
    target = f"{base.rstrip('/')}/{version}"
    incoming = f"{base.rstrip('/')}/{INCOMING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    fileio.makedirs(base)
    try:
        io_utils.copy_dir(model_path, incoming)
        _copy_extras(incoming, statistics_uri, edge_uri)
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


def _push_to_object_store(
    model_path: str, base: str, version: int, statistics_uri: Optional[str], edge_uri: Optional[str]
) -> str:
    version = _claim(base, version)
    target = f"{base.rstrip('/')}/{version}"
    staging = tempfile.mkdtemp(prefix="tfxflow-push-")
    try:
        local = os.path.join(staging, "version")
        io_utils.copy_dir(model_path, local)
        _copy_extras(local, statistics_uri, edge_uri)
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
    for version in serving_dir.versions(base)[:-keep]:
        path = f"{base.rstrip('/')}/{version}"
        if object_store.is_remote(path):
            object_store.delete(path)
        else:
            fileio.rmtree(path)
        removed.append(path)
    if object_store.is_remote(base):
        # Versions of pushes that died before their saved_model.pb. A version is the Unix time its push started:
        # one younger than STALE_INCOMING_S may still be uploading (another run's push).
        for version in serving_dir.versions(base):
            path = f"{base.rstrip('/')}/{version}"
            if now - version > STALE_INCOMING_S and not object_store.exists(f"{path}/saved_model.pb"):
                object_store.delete(path)
                removed.append(path)
        kept = serving_dir.versions(base)
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

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            # A blessing `tfxflow rollback` revoked (a cached Evaluator hands it on): say so.
            blessings = input_dict.get(standard_component_specs.MODEL_BLESSING_KEY) or []
            revoked = blessings[0].get_string_custom_property(ROLLED_BACK) if blessings else ""
            if revoked:
                model_push.set_string_custom_property(NOT_PUSHED_REASON, not_pushed_text(revoked))
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
        if destination.WhichOneof("destination") != "filesystem":
            raise NotImplementedError("this Pusher pushes to a file-system destination only")
        custom = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        keep = max(2, int(custom.get("keep_versions", names.DEFAULT_KEEP_VERSIONS)))
        base = destination.filesystem.base_directory
        now = time.time()
        model_path = self.GetModelPath(input_dict)
        fingerprint = model_fingerprint(model_path)
        model_push.set_string_custom_property(MODEL_FINGERPRINT, fingerprint)
        rollbacks = serving_dir.read_rollbacks(base)
        entry = rolled_back_entry(rollbacks, fingerprint)
        if entry is not None:
            self._MarkNotPushed(model_push)
            reason = not_pushed_text(rolled_back_text(entry))
            model_push.set_string_custom_property(NOT_PUSHED_REASON, reason)
            logging.warning("Not pushed: %s", reason)
            return
        after_rollback = after_rollback_text(rollbacks, serving_dir.served_versions(base)) if rollbacks else None
        version = next_version(base, now)
        statistics, edge_model = input_dict.get(STATISTICS_KEY), input_dict.get(EDGE_KEY)
        serving_path = push_atomically(
            model_path,
            base,
            version,
            artifact_utils.get_single_uri(statistics) if statistics else None,
            artifact_utils.get_single_uri(edge_model) if edge_model else None,
        )
        logging.info("Model written to serving path %s.", serving_path)
        if after_rollback:
            model_push.set_string_custom_property(AFTER_ROLLBACK, after_rollback)
        for path in prune(base, keep, now):
            logging.info("Removed %s (keeping the newest %d versions).", path, keep)
        io_utils.copy_dir(model_path, model_push.uri)
        # The version of the path: on an object store a concurrent push may have taken `version` first.
        self._MarkPushed(
            model_push, pushed_destination=serving_path, pushed_version=os.path.basename(serving_path.rstrip("/"))
        )


class PusherSpec(standard_component_specs.PusherSpec):
    """TFX's Pusher contract plus the statistics of the model's training data, kept with each pushed version."""

    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
        EDGE_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
    }


class Pusher(base_component.BaseComponent):
    """Pushes a blessed model to `<base_directory>/<version>/` with `Executor` (a local or mounted folder, or an
    object store), keeping the newest `keep_versions` versions."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        model_blessing: types.BaseChannel,
        base_directory: str,
        keep_versions: int = names.DEFAULT_KEEP_VERSIONS,
        statistics: Optional[types.BaseChannel] = None,
        infra_blessing: Optional[types.BaseChannel] = None,
        edge_model: Optional[types.BaseChannel] = None,
    ):
        destination = pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=base_directory)
        )
        super().__init__(
            spec=PusherSpec(
                model=model,
                model_blessing=model_blessing,
                infra_blessing=infra_blessing,
                statistics=statistics,
                edge_model=edge_model,
                push_destination=destination,
                custom_config=json_utils.dumps({"keep_versions": keep_versions}),
                pushed_model=types.Channel(type=standard_artifacts.PushedModel),
            )
        )
