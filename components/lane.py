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


def installed_version(package: str) -> str:
    """The installed distribution's version, e.g. "1.21.0" ("" where it is not installed)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _version(package: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in installed_version(package).split(".")[:2] if part.isdigit())


def _source_says(package: str, path: str, text: str) -> bool:
    """Whether `path` (inside the installed `package`) holds `text`; read without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], path), encoding="utf-8") as f:
            return text in f.read()
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def name() -> str:
    """The lane of the installed TFX: current from TFX 1.21 on, compat below."""
    return CURRENT if _version("tfx") >= (1, 21) else COMPAT


def tfx_version() -> str:
    """The installed TFX's version, e.g. "1.21.0" ("" without TFX)."""
    return installed_version("tfx")


@functools.lru_cache(maxsize=None)
def direct_runner_tries_prism() -> bool:
    """Whether Beam's DirectRunner first runs a pipeline on the Prism runner, which it downloads from GitHub
    at run time (Beam 2.7x: where the download hangs, so does the run; where it fails, it falls back). Read from
    the DirectRunner's source without importing Beam (seconds)."""
    return _source_says(
        "apache_beam", os.path.join("runners", "direct", "direct_runner.py"), "prism_runner.PrismRunner()"
    )


@functools.lru_cache(maxsize=None)
def tfx_tuner_import_is_optional() -> bool:
    """Whether `tfx.components` imports its Tuner inside `try: ... except ImportError` (TFX 1.21), so that a
    process without keras_tuner still gets every other component; TFX 1.16 imports it unguarded. Read from the
    package's source without importing TFX."""
    return _source_says("tfx", os.path.join("components", "__init__.py"), "except ImportError:\n  Tuner = None")
