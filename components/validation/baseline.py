"""Resolver strategy for drift detection: the statistics of the data behind the last blessed model.

"The previous run" is a poor baseline: it may have been refused by the gate or failed. The data that
trained the model now being served is what new data should be compared with. Lineage in MLMD gives it:
blessing -> the Evaluator execution that wrote it -> its `examples` input -> the StatisticsGen execution
that read those examples -> its statistics.

A user who has looked at refused data and finds it the new normal accepts it (`tfxflow accept-data`): its
statistics artifact gets a custom property with the time, and is the baseline until a model is blessed
after that time.

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.

Kubeflow Pipelines (open source) runs no resolver, and its ML Metadata records only what its own launcher
writes; there, `ServedBaseline` takes the serving directory as the source of truth instead: the newest version
TF Serving can load is the last blessed model, and the Pusher keeps its training data's statistics beside it.
"""

import json
import os
from typing import Dict, Iterable, List, Optional, Set

from absl import logging
from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.components.common import resolver
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts

from tfxflow.components import artifact_files, names, object_store, serving_dir

STATISTICS_KEY = "statistics"
BLESSING_KEY = "model_blessing"
_EXAMPLES_KEY = "examples"
_STATISTICS_OUTPUT_KEY = "statistics"  # StatisticsGen's; Transform's pre/post-transform statistics share the type
# Custom properties `tfxflow accept-data` sets on the statistics it makes the baseline.
ACCEPTED_AT = "tfxflow_accepted_baseline_at"
ACCEPTED_BY = "tfxflow_accepted_by"
ACCEPTED_REASON = "tfxflow_accepted_reason"


def _executions_of(store, artifact_ids: Iterable[int], event_type: int) -> Set[int]:
    return {e.execution_id for e in store.get_events_by_artifact_ids(list(artifact_ids)) if e.type == event_type}


def _artifacts_of(store, execution_ids: Iterable[int], event_type: int, key: Optional[str] = None) -> Set[int]:
    found = set()
    for event in store.get_events_by_execution_ids(list(execution_ids)):
        if event.type == event_type and (key is None or any(s.key == key for s in event.path.steps)):
            found.add(event.artifact_id)
    return found


def statistics_behind(store, blessing_id: int, statistics_ids: Set[int]) -> List[int]:
    """Ids among `statistics_ids` that a StatisticsGen computed on the examples the Evaluator of
    `blessing_id` read."""
    evaluators = _executions_of(store, [blessing_id], metadata_store_pb2.Event.OUTPUT)
    examples = _artifacts_of(store, evaluators, metadata_store_pb2.Event.INPUT, _EXAMPLES_KEY)
    if not examples:
        return []
    readers = _executions_of(store, examples, metadata_store_pb2.Event.INPUT)
    outputs = _artifacts_of(store, readers, metadata_store_pb2.Event.OUTPUT, _STATISTICS_OUTPUT_KEY)
    return sorted(outputs & statistics_ids)


def accepted_at(artifact) -> int:
    """When `tfxflow accept-data` made this statistics artifact the drift baseline (ms since the epoch); 0: never."""
    return artifact.get_int_custom_property(ACCEPTED_AT)


class BlessedDataStatisticsStrategy(resolver.ResolverStrategy):
    """Resolves `statistics` to the ExampleStatistics of the data the latest blessed model was evaluated on
    (the same ExampleGen output it was trained on), or to statistics accepted as the baseline by
    `tfxflow accept-data` after that model was blessed; empty when there is neither."""

    def resolve_artifacts(
        self, store, input_dict: Dict[str, List[types.Artifact]]
    ) -> Optional[Dict[str, List[types.Artifact]]]:
        statistics = {a.id: a for a in input_dict.get(STATISTICS_KEY, [])}
        blessings = sorted(
            (a for a in input_dict.get(BLESSING_KEY, []) if a.get_int_custom_property("blessed") == 1),
            key=lambda a: a.id,
            reverse=True,
        )
        resolved = {STATISTICS_KEY: [], BLESSING_KEY: []}
        for blessing in blessings:
            found = statistics_behind(store, blessing.id, set(statistics))
            if found:
                resolved = {STATISTICS_KEY: [statistics[found[-1]]], BLESSING_KEY: [blessing]}
                break
        accepted = max(statistics.values(), key=lambda a: (accepted_at(a), a.id), default=None)
        if accepted is not None and accepted_at(accepted) > max(
            (b.mlmd_artifact.create_time_since_epoch for b in resolved[BLESSING_KEY]), default=0
        ):
            resolved = {STATISTICS_KEY: [accepted], BLESSING_KEY: []}
        return resolved


SERVED_INFO_FILE = "served_baseline.json"  # written into both outputs of ServedBaseline


def served_info(uri: str) -> Optional[dict]:
    """What `ServedBaseline` found, read from one of its outputs; None for an artifact it did not write."""
    return artifact_files.read_json(uri, SERVED_INFO_FILE)


@component
def ServedBaseline(  # noqa: N802 (TFX's function components are named like classes)
    model_base: Parameter[str],
    model: OutputArtifact[standard_artifacts.Model],
    statistics: OutputArtifact[standard_artifacts.ExampleStatistics],
) -> None:
    """The model TF Serving serves from `model_base` (`<serving dir>/<model name>`: its newest whole version)
    as the Evaluator's baseline, and the statistics the Pusher kept with it as the data gate's drift baseline.

    Both outputs hold `served_baseline.json` saying what was found. With nothing served yet (a first run), the
    model has no SavedModel and the statistics no splits: the Evaluator then judges the candidate alone and
    the gate checks no drift (components/evaluation/evaluator.py, components/validation/gate.py)."""
    found = serving_dir.served_versions(model_base)
    info = {"model_base": model_base, "version": found[-1] if found else None, "statistics": False}
    statistics.split_names = artifact_utils.encode_split_names([])
    if found:
        version_dir = f"{model_base.rstrip('/')}/{found[-1]}"
        serving = os.path.join(model.uri, "Format-Serving")
        _copy_tree(version_dir, serving)
        stats_dir = os.path.join(serving, serving_dir.STATISTICS_DIR)
        splits = sorted(name for name in fileio.listdir(stats_dir)) if fileio.exists(stats_dir) else []
        for name in splits:
            _copy_tree(os.path.join(stats_dir, name), os.path.join(statistics.uri, name.rstrip("/")))
        split_names = [names.split_of(name) for name in splits if names.split_of(name)]
        statistics.split_names = artifact_utils.encode_split_names(split_names)
        info["statistics"] = bool(split_names)
    for artifact in (model, statistics):
        fileio.makedirs(artifact.uri)
        with fileio.open(os.path.join(artifact.uri, SERVED_INFO_FILE), "w") as f:
            f.write(json.dumps(info, sort_keys=True))
        artifact.set_int_custom_property("served_version", info["version"] or 0)
    logging.info("served baseline: %s", info)


def _copy_tree(source: str, target: str) -> None:
    if object_store.is_remote(source):
        object_store.download(source, target)
    else:
        from tfx.utils import io_utils

        io_utils.copy_dir(source, target)
