"""Resolver strategy for drift detection: the statistics of the data behind the last blessed model.

"The previous run" is a poor baseline: it may have been refused by the gate or failed. The data that
trained the model now being served is what new data should be compared with. Lineage in MLMD gives it:
blessing -> the Evaluator execution that wrote it -> its `examples` input -> the StatisticsGen execution
that read those examples -> its statistics.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set

from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx.dsl.components.common import resolver

STATISTICS_KEY = "statistics"
BLESSING_KEY = "model_blessing"
_EXAMPLES_KEY = "examples"
_STATISTICS_OUTPUT_KEY = "statistics"  # StatisticsGen's; Transform's pre/post-transform statistics share the type


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


class BlessedDataStatisticsStrategy(resolver.ResolverStrategy):
    """Resolves `statistics` to the ExampleStatistics of the data the latest blessed model was evaluated on
    (the same ExampleGen output it was trained on); empty when no model is blessed yet."""

    def resolve_artifacts(self, store, input_dict: Dict[str, List[types.Artifact]]
                          ) -> Optional[Dict[str, List[types.Artifact]]]:
        statistics = {a.id: a for a in input_dict.get(STATISTICS_KEY, [])}
        blessings = sorted((a for a in input_dict.get(BLESSING_KEY, [])
                            if a.get_int_custom_property("blessed") == 1), key=lambda a: a.id, reverse=True)
        for blessing in blessings:
            found = statistics_behind(store, blessing.id, set(statistics))
            if found:
                return {STATISTICS_KEY: [statistics[found[-1]]], BLESSING_KEY: [blessing]}
        return {STATISTICS_KEY: [], BLESSING_KEY: []}
