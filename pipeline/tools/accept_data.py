"""`tfxflow accept-data`: make a run's data the drift baseline, once someone has looked at it.

The drift check compares new data with the data behind the last blessed model (components/validation/baseline.py).
When the world has changed for good (new prices, a new fleet), every later run would be refused until
someone turns the check off, and then it catches nothing. Accepting records, on the run's statistics
artifact in ML Metadata, who accepted it, when and why; the baseline resolver then takes those statistics
until a model is blessed after that time. The check stays on for every later run.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
import time
from typing import Callable, Dict, Optional

from tfxflow.components import names
from tfxflow.components.validation.baseline import ACCEPTED_AT, ACCEPTED_BY, ACCEPTED_REASON
from tfxflow.pipeline.config import ConfigError
from tfxflow.pipeline.paths import Paths
from tfxflow.pipeline.reports import run_record as report_lib


@dataclasses.dataclass
class Accepted:
    """What `accept` did."""

    run_id: str
    artifact_id: int
    uri: str
    rows: Dict[str, int]  # rows per split of the accepted data
    gate_state: Optional[str]  # the data gate's state in that run ("FAILED": it refused the data)
    by: str
    at: str


def accept(
    metadata_path: str,
    pipeline_name: str,
    run_id: Optional[str] = None,
    reason: str = "",
    by: Optional[str] = None,
    clock: Callable[[], float] = time.time,
) -> Accepted:
    """Marks the statistics of `run_id` (default: the latest run) as the drift baseline of `pipeline_name`.
    Raises ConfigError naming what is missing."""
    run = report_lib.read_run(metadata_path, pipeline_name, run_id)
    if run is None:
        what = f"run '{run_id}' of" if run_id else "run of"
        raise ConfigError(
            f"no {what} {pipeline_name} in {metadata_path}: nothing to accept (--home, "
            "--metadata-path and --pipeline-name must name the store and pipeline the run used)"
        )
    statistics = report_lib.first_output(run.component(names.STATISTICS_GEN), "statistics")
    if statistics is None:
        raise ConfigError(
            f"run {run.run_id} has no statistics (it stopped before StatisticsGen finished): nothing to accept"
        )
    by = by or f"{getpass.getuser()}@{socket.gethostname()}"
    now = clock()
    store = report_lib.open_store(metadata_path, readonly=False)
    [artifact] = store.get_artifacts_by_id([statistics.id])
    artifact.custom_properties[ACCEPTED_AT].int_value = int(now * 1000)
    artifact.custom_properties[ACCEPTED_BY].string_value = by
    artifact.custom_properties[ACCEPTED_REASON].string_value = reason
    store.put_artifacts([artifact])
    gate = run.component(names.DATA_GATE)
    return Accepted(
        run_id=run.run_id,
        artifact_id=artifact.id,
        uri=artifact.uri,
        rows=run.rows,
        gate_state=gate.state if gate else None,
        by=by,
        at=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)),
    )


def accept_command(home: str, metadata_path: str, pipeline_name: str, default_pipeline_name: str) -> str:
    """The `tfxflow accept-data` command line that reaches this store and pipeline."""
    command = f"tfxflow accept-data --home {home}"
    if os.path.abspath(metadata_path) != Paths.under(home).metadata_path:
        command += f" --metadata-path {metadata_path}"
    if pipeline_name != default_pipeline_name:
        command += f" --pipeline-name {pipeline_name}"
    return command
