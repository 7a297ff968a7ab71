"""Patches of private names of Beam, dill and tf.Transform that remove work those libraries repeat for the same
inputs (introspection, weighing, compression) without changing what they compute: one module per library
(beam, dill, tft), each with the library versions it was checked against. A patch whose library is installed at
another version is skipped, with one log line. `TFXFLOW_PATCHES=off` in the environment applies none: a user's
first step before filing a library bug. docs/environment.md ("Library patches") lists them.

The local runner applies them before it runs TFX; a Kubeflow step applies them where its executor is a Beam
executor."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Tuple

from absl import logging

from tfxflow.pipeline.patches import beam, dill, tft
from tfxflow.pipeline.patches.patch import Patch

ENV = "TFXFLOW_PATCHES"
OFF = "off"

PATCHES: Tuple[Patch, ...] = dill.PATCHES + beam.PATCHES + tft.PATCHES


def enabled() -> bool:
    """False where the environment says `TFXFLOW_PATCHES=off` (any case)."""
    return os.environ.get(ENV, "").strip().lower() != OFF


def apply() -> Tuple[str, ...]:
    """Installs every patch whose libraries are at versions it was checked against (idempotent); returns the names
    of those installed. With `TFXFLOW_PATCHES=off`, none, and one log line says so."""
    if not enabled():
        logging.info("tfxflow: %s=%s: no library patch applied; Beam, dill and tf.Transform run as released", ENV, OFF)
        return ()
    return tuple(patch.name for patch in PATCHES if patch.apply())


def runs_beam(executor_class_path: str) -> bool:
    """Whether a TFX executor (by its class path) is a Beam executor: a Kubeflow step that runs Beam work."""
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.utils import import_utils

    return issubclass(import_utils.import_class_by_path(executor_class_path), BaseBeamExecutor)


@contextlib.contextmanager
def payloads_in_process(in_process: bool) -> Iterator[None]:
    """While the block runs, what Beam pickles is stored for this process only when `in_process` (the pipelines'
    workers are this process: beam_runners.BeamRunner.workers_in_this_process) and `apply()` installed
    `beam-payloads`; otherwise Beam compresses as it does."""
    with beam.payloads_in_process(in_process):
        yield
