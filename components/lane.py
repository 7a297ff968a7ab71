"""What differs between the two supported lanes, each with why: *compat* (TFX 1.16, TensorFlow 2.16, Beam 2.59,
Python 3.10) and *current* (TFX 1.21, TensorFlow 2.21, Beam 2.7x, Python 3.12-3.13). The rest of the code is the
same in both; each difference is asked of the installed library where it can be, not of a version number.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from typing import Tuple

COMPAT, CURRENT = "compat", "current"


def _version(package: str) -> Tuple[int, ...]:
    try:
        text = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ()
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


@functools.lru_cache(maxsize=None)
def name() -> str:
    """The lane of the installed TFX: current from TFX 1.21 on, compat below."""
    return CURRENT if _version("tfx") >= (1, 21) else COMPAT


def tfx_version() -> str:
    """The installed TFX's version, e.g. "1.21.0" ("" without TFX)."""
    try:
        return importlib.metadata.version("tfx")
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=None)
def direct_runner_tries_prism() -> bool:
    """Whether Beam's DirectRunner first runs a pipeline on the Prism runner, which it downloads from GitHub
    at run time (Beam 2.7x: where the download hangs, so does the run; where it fails, it falls back). Read from
    the DirectRunner's source without importing Beam (seconds)."""
    spec = importlib.util.find_spec("apache_beam")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "runners", "direct", "direct_runner.py")
    try:
        with open(path, encoding="utf-8") as f:
            return "prism_runner.PrismRunner()" in f.read()
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def tfx_tuner_import_is_optional() -> bool:
    """Whether `tfx.components` imports its Tuner inside `try: ... except ImportError` (TFX 1.21), so that a
    process without keras_tuner still gets every other component; TFX 1.16 imports it unguarded. Read from the
    package's source without importing TFX."""
    spec = importlib.util.find_spec("tfx")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "components", "__init__.py")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return False
    return "except ImportError:\n  Tuner = None" in source
