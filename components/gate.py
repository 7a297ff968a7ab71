"""The data gate: stops the run when ExampleValidator found anomalies the configuration does not allow.

TFX's ExampleValidator records anomalies but nothing downstream reads them, so a run trains on bad data
anyway. This component runs right after it; Transform waits for it, so when it fails nothing downstream
runs and nothing is pushed.

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.
"""


import dataclasses
import os
from typing import List, Sequence, TypedDict

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import v1 as tfx

ANOMALIES_FILE = "SchemaDiff.pb"


class DataGateError(RuntimeError):
    """Anomalies that the configuration does not allow; the message lists split, feature, type and why."""


@dataclasses.dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str  # "" for a dataset-level anomaly
    type: str
    description: str

    def __str__(self) -> str:
        where = f"feature '{self.feature}'" if self.feature else "the dataset"
        return f"split '{self.split}', {where}: {self.type}: {self.description}"


def read_anomalies(anomalies_uri: str) -> List[Anomaly]:
    """Every anomaly reason recorded in an ExampleAnomalies artifact, split by split."""
    found = []
    for entry in sorted(os.listdir(anomalies_uri)):
        path = os.path.join(anomalies_uri, entry, ANOMALIES_FILE)
        if not (entry.startswith("Split-") and os.path.exists(path)):
            continue
        split = entry[len("Split-"):]
        anomalies = anomalies_pb2.Anomalies()
        with open(path, "rb") as f:
            anomalies.ParseFromString(f.read())
        infos = [(name, info) for name, info in sorted(anomalies.anomaly_info.items())]
        if anomalies.HasField("dataset_anomaly_info"):
            infos.append(("", anomalies.dataset_anomaly_info))
        for feature, info in infos:
            for reason in info.reason:
                found.append(Anomaly(split, feature, anomalies_pb2.AnomalyInfo.Type.Name(reason.type),
                                     (reason.description or info.description).strip()))
    return found


def blocking(anomalies: Sequence[Anomaly], allowed_types: Sequence[str]) -> List[Anomaly]:
    """The anomalies whose type is not in `allowed_types`."""
    allowed = set(allowed_types)
    return [a for a in anomalies if a.type not in allowed]


def report(blockers: Sequence[Anomaly]) -> str:
    lines = [f"data gate: {len(blockers)} anomal{'y' if len(blockers) == 1 else 'ies'} stop the run "
             "(nothing was trained or pushed):"]
    lines += [f"  - {a}" for a in blockers]
    return "\n".join(lines)


def parse_allowed(text: str) -> List[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


class GateResult(TypedDict):
    anomalies_found: int  # all of them allowed, or the gate would have failed


@tfx.dsl.components.component
def DataGate(  # pylint: disable=invalid-name
    anomalies: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.ExampleAnomalies],
    allowed_anomaly_types: tfx.dsl.components.Parameter[str] = "",
) -> GateResult:
    """Fails with DataGateError when an anomaly's type is not in `allowed_anomaly_types` (comma-separated
    AnomalyInfo.Type names, e.g. "FEATURE_TYPE_LOW_NUMBER_VALUES")."""
    found = read_anomalies(anomalies.uri)
    blockers = blocking(found, parse_allowed(allowed_anomaly_types))
    if blockers:
        raise DataGateError(report(blockers))
    return {"anomalies_found": len(found)}
