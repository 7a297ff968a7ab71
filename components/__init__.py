"""The pipeline's components, one folder per subsystem, in the order a run meets them:

- `ingest`: CSV files checked and written as TFX's tf.Examples; samples of large splits.
- `validation`: the curated schema, drift and skew, and the data gate that stops a run.
- `model`: the feature config, tasks and the model itself (layers, text, pretrained checkpoints, export),
  read by every stage from ingestion on.
- `training`: the Transform and Trainer executors, devices and distribution.
- `tuning`: the search over the Trainer's settings (or a module file's tuner_fn).
- `evaluation`: TFMA's Evaluator and the golden rows the later checks replay.
- `edge`: the TensorFlow Lite export and its check.
- `serving`: the serving check and the Pusher.
- `tracking`: MLflow (runs, the outbox, the model registry).

The modules here are the code every subsystem shares: names, errors, settings, progress, the object store, the
serving directory's layout, the serving probe. A subsystem imports these, the model, and the subsystems before
it in that list, never one after it (tests/test_layers.py). Each subsystem's package exports its components;
the import is deferred to first use, so that `import tfxflow.components.<subsystem>` stays free of TFX.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict


def lazy_exports(package: str, exports: Dict[str, str]) -> Callable[[str], object]:
    """A package's module `__getattr__` that imports `exports[name]` (`module.attribute`, relative to
    `package`) on first use."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].rpartition(".")
        return getattr(importlib.import_module(f"{package}.{module}"), attribute)

    return __getattr__
