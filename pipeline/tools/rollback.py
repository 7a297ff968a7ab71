"""`tfxflow rollback`: serve an earlier pushed model again, at once, and keep the pipeline from undoing it.

TF Serving serves the highest version of a model base under its default `latest` policy. A rollback therefore
re-publishes the earlier model: it copies version `--to` (default: the newest complete version older than the
served one that holds another model, and not one rolled back itself) to a new, highest version number, with the
Pusher's own `push_atomically`: the copy is made in a hidden `.incoming-*` folder and renamed into place in one
step, so TF Serving sees it whole or not at all, loads it and then unloads the bad version. The copy carries the
statistics of its training data (`assets.extra/tfxflow/statistics`) like any pushed version, so the drift
baseline of a Kubeflow run (the newest served version) follows the rollback too.

The bad version stays on disk, unserved, until the Pusher prunes it. Deleting or renaming it instead would make
TF Serving serve whatever is the highest version left: rolling back past several versions would pass through each
intermediate one, a version that is still being written could be chosen, and a canary config that pins version
numbers (`tfxflow kubeflow serving-config`) would see its numbers change meaning. Publishing a new number moves
the served model in one step and never renumbers anything.

So that the next pipeline run does not push the rolled-back model again (a cached Trainer hands on the same
model, and an identical retrain makes the same one), every model rolled back is recorded, by its fingerprint
(`pusher.model_fingerprint`), in `<base>/.tfxflow-rollbacks.json`, a hidden file TF Serving ignores: the Pusher
refuses such a model and says why. Rolling back past several versions rolls back each model newer than the
target. Then, where they exist:

- MLflow: the registered model's `champion` alias moves back to the registered version of the target, which is
  tagged with the new version number (`tfxflow.republished_as`); the rolled-back registered versions get
  `tfxflow.rolled_back` and the registered model `tfxflow.last_rollback` (who, when, why).
- ML Metadata (a local home): the blessings of the rolled-back models are revoked (`blessed` = 0, with who, when
  and why), so the next run's resolvers take the served model as the model to beat and its data as the drift
  baseline. The run lock is held meanwhile, so no pipeline run is in progress.

Tracking and metadata are best effort: the serving rollback stands even when they cannot be updated, and the
result says what was not.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import shutil
import socket
import tempfile
import time
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from tfxflow.components import object_store, serving_dir
from tfxflow.components.serving import pusher
from tfxflow.components.tracking.mlflow_auth import redact_uri
from tfxflow.components.tracking.mlflow_runs import client
from tfxflow.components.tracking.model_registry import CHAMPION_ALIAS, REPUBLISHED_AS_TAG
from tfxflow.pipeline.config import ConfigError
from tfxflow.pipeline.reports.run_record import open_store
from tfxflow.pipeline.staging import forget_last_run
from tfxflow.pipeline.tracking_store import TrackingError, check_tracking

MLMD_PUSHED_MODEL = "PushedModel"
MLMD_MODEL_BLESSING = "ModelBlessing"
ROLLED_BACK_TAG = "tfxflow.rolled_back"  # on each rolled-back registered version
LAST_ROLLBACK_TAG = "tfxflow.last_rollback"  # on the registered model
PUSHED_VERSION_TAG = "tfxflow.pushed_version"  # set by MlflowFinish (components/tracking/tracking.py)


@dataclasses.dataclass
class Plan:
    """What a rollback of `base` would do; `fingerprints` of every complete version."""

    base: str
    current: int
    target: int
    fingerprints: Dict[int, str]
    rolled_back: List[int]  # one version per rolled-back model: the newest holding it
    log: List[dict]

    def versions_of(self, fingerprint: str) -> List[int]:
        return sorted(v for v, f in self.fingerprints.items() if f == fingerprint)


@dataclasses.dataclass
class Result:
    """What `rollback` did."""

    plan: Plan
    new_version: int
    entries: List[dict]  # the log entries written
    log_path: str
    by: str
    at: str
    tracking: List[str] = dataclasses.field(default_factory=list)  # what moved, or was not moved, in MLflow
    metadata: List[str] = dataclasses.field(default_factory=list)  # what was revoked, or not, in ML Metadata


def _origin_chain(version: int, log: List[dict]) -> List[int]:
    """`version`, and when it is a rollback's copy, the version it copied, and so on back."""
    chain = [version]
    while True:
        source = next((e["to_version"] for e in reversed(log) if e.get("new_version") == chain[-1]), None)
        if source is None or source in chain:
            return chain
        chain.append(source)


def plan(base: str, to: Optional[int] = None) -> Plan:
    """Chooses the target and the models rolled back; raises ConfigError when a rollback cannot be done."""
    served = serving_dir.served_versions(base)
    if not served:
        raise ConfigError(
            f"no model versions in {base}: nothing to roll back (--serving-dir and --model-name must "
            "name where the pipeline pushed)"
        )
    current = served[-1]
    if len(served) == 1:
        raise ConfigError(f"only one version in {base} ({current}): there is no earlier model to roll back to")
    if to is not None and to not in served:
        raise ConfigError(
            f"--to {to}: not a complete version in {base} (complete versions: {', '.join(map(str, served))})"
        )
    if to == current:
        raise ConfigError(f"--to {to} is the version being served: nothing to roll back")
    try:
        log = serving_dir.read_rollbacks(base)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    fingerprints = {version: pusher.model_fingerprint(f"{base.rstrip('/')}/{version}") for version in served}
    if to is not None:
        if fingerprints[to] == fingerprints[current]:
            raise ConfigError(
                f"--to {to} holds the same model as the served version {current}: serving it again would change nothing"
            )
        entry = pusher.rolled_back_entry(log, fingerprints[to])
        if entry is not None:
            raise ConfigError(
                f"--to {to} holds a model that was {pusher.rolled_back_text(entry)}; choose another version"
            )
        target = to
    else:
        eligible = [
            v
            for v in served[:-1]
            if fingerprints[v] != fingerprints[current] and pusher.rolled_back_entry(log, fingerprints[v]) is None
        ]
        if not eligible:
            earlier = ", ".join(map(str, served[:-1]))
            raise ConfigError(
                f"nothing to roll back to in {base}: every earlier version ({earlier}) holds the "
                "served model or one rolled back already; pass --to VERSION"
            )
        target = eligible[-1]
    # Each model newer than the target, other than the target's own, is rolled back; the served one always is
    # (its entry links this rollback's copy to it), an earlier one only when no rollback recorded it yet.
    rolled_back: Dict[str, int] = {}
    for version in served:
        fingerprint = fingerprints[version]
        if (
            version > target
            and fingerprint != fingerprints[target]
            and (
                version == current
                or fingerprint == fingerprints[current]
                or pusher.rolled_back_entry(log, fingerprint) is None
            )
        ):
            rolled_back[fingerprint] = version
    return Plan(base, current, target, fingerprints, sorted(rolled_back.values()), log)


def _publish(source: str, base: str, version: int) -> int:
    """Copies the version folder `source` to `<base>/<version>` the way the Pusher does; returns the version it
    got (on an object store a concurrent push may have taken `version`)."""
    if not object_store.is_remote(source):
        return int(os.path.basename(pusher.push_atomically(source, base, version).rstrip("/")))
    staging = tempfile.mkdtemp(prefix="tfxflow-rollback-")
    try:
        local = os.path.join(staging, "version")
        object_store.download(source, local)
        return int(os.path.basename(pusher.push_atomically(local, base, version).rstrip("/")))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def republish(chosen: Plan, reason: str, by: str, now: float) -> Tuple[int, List[dict], str]:
    """Records the rolled-back models in the log, then publishes the copy of the target as the highest version;
    a failed copy takes its log entries back. Returns (new version, entries written, log path)."""
    base = chosen.base
    new_version = pusher.next_version(base, now)
    at = pusher.iso_time(now)
    entries = [
        {
            "rolled_back_version": version,
            "fingerprint": chosen.fingerprints[version],
            "versions": chosen.versions_of(chosen.fingerprints[version]),
            "to_version": chosen.target,
            "to_fingerprint": chosen.fingerprints[chosen.target],
            "new_version": new_version,
            "by": by,
            "at": at,
            "at_epoch": round(now, 3),
            "reason": reason,
        }
        for version in chosen.rolled_back
    ]
    # The log first: a push that starts while the copy is made already refuses the rolled-back models. A crash
    # in between leaves the bad model served and recorded; `tfxflow rollback` again finishes the job.
    log_path = serving_dir.write_rollbacks(base, chosen.log + entries)
    try:
        published = _publish(f"{base.rstrip('/')}/{chosen.target}", base, new_version)
    except BaseException:
        serving_dir.write_rollbacks(base, chosen.log)
        raise
    if published != new_version:
        for entry in entries:
            entry["new_version"] = published
        serving_dir.write_rollbacks(base, chosen.log + entries)
    return published, entries, log_path


# ---------------------------------------------------------------------------------------------------------
# MLflow
# ---------------------------------------------------------------------------------------------------------


def _registered_for(versions, chain: List[int]) -> Optional[str]:
    """The registered version recorded for the first pushed version of `chain` that has one: pushed as it, or
    republished as it by an earlier rollback."""
    for pushed in map(str, chain):
        for tag in (PUSHED_VERSION_TAG, REPUBLISHED_AS_TAG):
            found = [v for v in versions if pushed in (v.tags.get(tag) or "").split(",")]
            if found:
                return str(max(found, key=lambda v: int(v.version)).version)
    return None


def move_tracking(mlflow_client, registered_name: str, result: Result) -> List[str]:
    """Moves the `champion` alias back to the target's registered version and records the rollback as tags;
    returns what it did and did not, one line each. Raises only what the MLflow client raises."""
    from mlflow.exceptions import MlflowException

    chosen = result.plan
    try:
        versions = mlflow_client.search_model_versions(f"name='{registered_name}'")
    except MlflowException:
        versions = []
    if not versions:
        return [f"no registered model '{registered_name}' with versions: the champion alias was not moved"]
    reason = result.entries[0]["reason"] or "no reason given"
    target = _registered_for(versions, _origin_chain(chosen.target, chosen.log))
    lines = []
    try:
        before = str(mlflow_client.get_model_version_by_alias(registered_name, CHAMPION_ALIAS).version)
    except MlflowException:
        before = None
    if target is None:
        lines.append(
            f"no registered version of '{registered_name}' records version {chosen.target}: the "
            f"{CHAMPION_ALIAS} alias was not moved" + (f" (it stays on version {before})" if before else "")
        )
    else:
        mlflow_client.set_registered_model_alias(registered_name, CHAMPION_ALIAS, target)
        current = next(v for v in versions if str(v.version) == target)
        republished = [p for p in (current.tags.get(REPUBLISHED_AS_TAG) or "").split(",") if p]
        mlflow_client.set_model_version_tag(
            registered_name, target, REPUBLISHED_AS_TAG, ",".join(republished + [str(result.new_version)])
        )
        moved = f"from version {before} " if before and before != target else ""
        lines.append(
            f"alias {CHAMPION_ALIAS} of '{registered_name}' moved {moved}to version {target} (tagged "
            f"{REPUBLISHED_AS_TAG} {result.new_version})"
        )
    text = (
        f"by {result.by} at {result.at}: {reason}; served now: version {result.new_version}, a copy of "
        f"version {chosen.target}"
    )
    tagged, missing = [], []
    for version in chosen.rolled_back:
        chain = []
        for pushed in chosen.versions_of(chosen.fingerprints[version]):
            chain += [v for v in _origin_chain(pushed, chosen.log) if v not in chain]
        registered = _registered_for(versions, chain)
        if registered is None:
            missing.append(str(version))
        elif registered not in tagged and registered != target:
            mlflow_client.set_model_version_tag(registered_name, registered, ROLLED_BACK_TAG, text)
            tagged.append(registered)
    if tagged:
        lines.append(f"{ROLLED_BACK_TAG} set on registered version {', '.join(tagged)}")
    if missing:
        lines.append(f"no registered version records version {', '.join(missing)}: not tagged")
    rolled = ", ".join(map(str, chosen.rolled_back))
    mlflow_client.set_registered_model_tag(
        registered_name,
        LAST_ROLLBACK_TAG,
        f"version {rolled} -> {result.new_version} (a copy of {chosen.target}) by {result.by} at {result.at}: {reason}",
    )
    return lines


def update_tracking(uri: str, registered_name: str, result: Result) -> List[str]:
    """`move_tracking` on the store at `uri`, never raising: what could not be done is a line of the result."""
    if uri.startswith("sqlite:///") and not os.path.exists(uri[len("sqlite:///") :]):
        return [f"no MLflow store at {uri}: nothing moved in MLflow"]
    try:
        # A server that does not answer, or a user who may not move the alias, fails in seconds with a reason.
        check_tracking(uri, model_name=registered_name)

        return move_tracking(client(uri), registered_name, result)
    except TrackingError as err:
        return [f"not updated: {err}"]
    except Exception as err:  # noqa: BLE001 (MLflow's client raises many kinds)
        first = (str(err).strip().splitlines() or [""])[0][:300]
        return [f"not updated ({redact_uri(uri)}): {type(err).__name__}: {first}"]


# ---------------------------------------------------------------------------------------------------------
# ML Metadata
# ---------------------------------------------------------------------------------------------------------


def _property(artifact, key: str):
    if key not in artifact.custom_properties:
        return None
    value = artifact.custom_properties[key]
    return getattr(value, value.WhichOneof("value"))


def _models_pushed_by(store, pushed_ids: Iterable[int]) -> Dict[int, Set[int]]:
    """{PushedModel id: ids of the Model artifacts its Pusher execution read as `model`}."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd

    pushers: Dict[int, int] = {}
    for event in store.get_events_by_artifact_ids(list(pushed_ids)):
        if event.type == mlmd.Event.OUTPUT:
            pushers[event.artifact_id] = event.execution_id
    models: Dict[int, Set[int]] = {pushed: set() for pushed in pushed_ids}
    by_execution: Dict[int, Set[int]] = {}
    for event in store.get_events_by_execution_ids(sorted(set(pushers.values()))):
        if event.type == mlmd.Event.INPUT and event.path.steps and event.path.steps[0].key == "model":
            by_execution.setdefault(event.execution_id, set()).add(event.artifact_id)
    for pushed, execution in pushers.items():
        models[pushed] = by_execution.get(execution, set())
    return models


def revoke_blessings(metadata_path: str, pipeline_name: str, log: List[dict]) -> List[str]:
    """Revokes, in the ML Metadata store of a local home, the blessings of every model the rollback `log`
    records: PushedModel artifacts of the pipeline whose `model_fingerprint` is one in the log (or, pushed
    before fingerprints were recorded, whose `pushed_version` held it), the Model their Pusher read, and the
    ModelBlessings with `blessed` = 1 for it (`current_model_id`, what TFX's LatestBlessedModelStrategy and
    BlessedDataStatisticsStrategy read) get `blessed` = 0 and who, when and why. Idempotent; call it under the
    run lock. Returns what it did, one line each."""
    if not log:
        return []
    store = open_store(metadata_path, readonly=False)
    context = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if context is None:
        return [f"no pipeline {pipeline_name} in {metadata_path}: no blessing revoked (--pipeline-name?)"]
    by_fingerprint = {e["fingerprint"]: e for e in log}  # the latest entry of each model
    by_version = {str(v): e for e in log for v in e.get("versions", [e["rolled_back_version"]])}
    type_names = {t.id: t.name for t in store.get_artifact_types()}
    artifacts = store.get_artifacts_by_context(context.id)
    entry_of: Dict[int, dict] = {}
    for artifact in artifacts:
        if type_names.get(artifact.type_id) != MLMD_PUSHED_MODEL:
            continue
        fingerprint = _property(artifact, pusher.MODEL_FINGERPRINT)
        entry = (
            by_fingerprint.get(fingerprint)
            if fingerprint
            else (by_version.get(_property(artifact, "pushed_version")) if _property(artifact, "pushed") == 1 else None)
        )
        if entry is not None:
            entry_of[artifact.id] = entry
    models = _models_pushed_by(store, entry_of) if entry_of else {}
    model_entry = {model: entry_of[pushed] for pushed, ids in models.items() for model in ids}
    changed, revoked = [], []
    for artifact in artifacts:
        kind = type_names.get(artifact.type_id)
        if kind == MLMD_MODEL_BLESSING:
            entry = model_entry.get(_property(artifact, "current_model_id"))
            if entry is None or _property(artifact, "blessed") != 1:
                continue
            artifact.custom_properties["blessed"].int_value = 0
            revoked.append((artifact.id, _property(artifact, "current_model_id"), entry["rolled_back_version"]))
        elif kind == MLMD_PUSHED_MODEL and artifact.id in entry_of and _property(artifact, pusher.ROLLED_BACK) is None:
            entry = entry_of[artifact.id]
        else:
            continue
        artifact.custom_properties[pusher.ROLLED_BACK].string_value = pusher.rolled_back_text(entry)
        artifact.custom_properties[pusher.ROLLED_BACK_AT].int_value = int(entry["at_epoch"] * 1000)
        artifact.custom_properties[pusher.ROLLED_BACK_BY].string_value = entry["by"]
        artifact.custom_properties[pusher.ROLLED_BACK_REASON].string_value = entry.get("reason", "")
        changed.append(artifact)
    if changed:
        store.put_artifacts(changed)
    if not revoked:
        return ["no blessed model of a rolled-back version in ML Metadata: nothing revoked"]
    return [f"blessing {blessing} of model {model} (version {version}) revoked" for blessing, model, version in revoked]


def rollback(
    base: str,
    to: Optional[int] = None,
    reason: str = "",
    by: Optional[str] = None,
    tracking_uri: Optional[str] = None,
    registered_name: Optional[str] = None,
    metadata_path: Optional[str] = None,
    pipeline_name: Optional[str] = None,
    clock: Callable[[], float] = time.time,
) -> Result:
    """Rolls the model served from `base` back (see the module's docstring); then MLflow at `tracking_uri` and
    ML Metadata at `metadata_path` when given. Raises ConfigError, before changing anything, when it cannot."""
    chosen = plan(base, to)
    by = by or f"{getpass.getuser()}@{socket.gethostname()}"
    now = clock()
    new_version, entries, log_path = republish(chosen, reason, by, now)
    result = Result(chosen, new_version, entries, log_path, by, pusher.iso_time(now))
    if metadata_path and pipeline_name:
        if os.path.exists(metadata_path):
            try:
                result.metadata = revoke_blessings(metadata_path, pipeline_name, chosen.log + entries)
            except Exception as err:  # noqa: BLE001 (ML Metadata raises RuntimeErrors of its own)
                first = (str(err).strip().splitlines() or [""])[0][:300]
                result.metadata = [f"not updated ({metadata_path}): {type(err).__name__}: {first}"]
            dropped = forget_last_run(metadata_path)
            if dropped:
                result.metadata.append(f"removed {dropped}: an unchanged `tfxflow run` runs again")
        else:
            result.metadata = [f"no metadata store at {metadata_path}: no blessing revoked"]
    if tracking_uri and registered_name:
        result.tracking = update_tracking(tracking_uri, registered_name, result)
    return result
