"""The JSON files the components keep inside their artifacts' folders (local or on an object store), read one way."""

from __future__ import annotations

import json
import os
from typing import Any, Optional


def read_json(folder: str, name: str) -> Optional[Any]:
    """The JSON file `name` in an artifact's `folder`, or None where the component that made it wrote none."""
    from tfx.dsl.io import fileio

    path = os.path.join(folder, name)
    if not fileio.exists(path):
        return None
    with fileio.open(path, "r") as f:
        return json.loads(f.read())
