"""A checkpoint's files where they are (a local disk or an object store: gs://, s3://, minio://): listed, read,
checked and fingerprinted, every failure a CheckpointError naming the checkpoint and the file."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from typing import Any, List, Mapping, Sequence, Tuple

from tfxflow.components import object_store
from tfxflow.components.model.checkpoints.description import CheckpointError


def given(path: str) -> str:
    """How a message names the checkpoint: by the option that gave it."""
    return f"--init-checkpoint {path}"


def join(folder: str, name: str) -> str:
    """`name` in `folder`, a local path or a URI."""
    return posixpath.join(folder, name) if "://" in folder else os.path.join(folder, name)


def split(path: str) -> Tuple[str, str]:
    """(folder, name) of a path or URI."""
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if "/" not in rest:
            return path, ""
        folder, base = rest.rsplit("/", 1)
        return f"{scheme}://{folder}", base
    path = os.path.abspath(path)
    return os.path.dirname(path), os.path.basename(path)


def read(path: str, uri: str, what: str) -> bytes:
    """The bytes of `uri` (`what`: how a message names it) of the checkpoint at `path`."""
    try:
        return object_store.read_bytes(uri)
    except FileNotFoundError as err:
        raise CheckpointError(f"{given(path)}: {what} {uri} is missing") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{given(path)}: cannot read {uri}: {err}") from err


def read_json(path: str, uri: str, kind: type = dict) -> Any:
    """The JSON file `uri` of the checkpoint at `path`, which must hold a `kind` (an object, or a list)."""
    raw = read(path, uri, "the file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(f"{given(path)}: {uri} is not JSON: {err}") from err
    if not isinstance(data, kind):
        expected = "a JSON object" if kind is dict else "a JSON list"
        raise CheckpointError(f"{given(path)}: {uri} holds {type(data).__name__}, not {expected}")
    return data


_REQUIRED = object()


class Values:
    """A JSON object's values, each read with its type checked: a wrong one raises CheckpointError naming the
    checkpoint, the file and the key."""

    def __init__(self, path: str, where: str, data: Mapping[str, Any]):
        self.path, self.where, self.data = path, where, data

    def _get(self, key: str, default: Any) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is _REQUIRED:
                raise CheckpointError(f"{given(self.path)}: {self.where} lacks {key}")
            return default
        return self.data[key]

    def _wrong(self, key: str, kind: str) -> CheckpointError:
        return CheckpointError(f"{given(self.path)}: {self.where}'s {key} is {self.data[key]!r}, not {kind}")

    def int(self, key: str, default: Any = _REQUIRED, minimum: int = 1) -> Any:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._wrong(key, f"an integer >= {minimum}")
        return value

    def number(self, key: str, default: Any = _REQUIRED, low: float = 0.0, high: float = float("inf")) -> float:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < high:
            raise self._wrong(key, f"a number in [{low:g}, {high:g})")
        return float(value)

    def rate(self, key: str, default: float) -> float:
        """A dropout rate, in [0, 1)."""
        return self.number(key, default, 0.0, 1.0)

    def flag(self, key: str, default: Any = None) -> Any:
        """true, false, or the default where absent or null (a JSON string "false" is refused, not read as true)."""
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if not isinstance(value, bool):
            raise self._wrong(key, "true or false")
        return value

    def text(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self._get(key, default)
        if value is default and self.data.get(key) is None:
            return value
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def mapping(self, key: str) -> "Values":
        value = self._get(key, {})
        if not isinstance(value, dict):
            raise self._wrong(key, "a JSON object")
        return Values(self.path, f"{self.where}'s {key}", value)


def list_names(path: str, folder: str) -> List[str]:
    """The names in `folder`; CheckpointError naming the path when it cannot be listed."""
    try:
        return object_store.list_names(folder)
    except NotADirectoryError:
        return []
    except FileNotFoundError as err:
        raise CheckpointError(f"{given(path)}: nothing is there") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{given(path)}: cannot read it: {err}") from err


def stat(path: str, uri: str) -> Tuple[int, str]:
    try:
        return object_store.stat(uri)
    except FileNotFoundError as err:
        raise CheckpointError(f"{given(path)}: {uri} is missing") from err
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{given(path)}: cannot read {uri}: {err}") from err


def read_range(path: str, uri: str, start: int, length: int) -> bytes:
    try:
        return object_store.read_range(uri, start, length)
    except (OSError, object_store.ObjectStoreError) as err:
        raise CheckpointError(f"{given(path)}: cannot read {uri}: {err}") from err


def fingerprint_of(path: str, files: Sequence[str]) -> str:
    """Changes when any of `files` changes (size and modification time, or the object's ETag)."""
    digest = hashlib.sha256()
    for uri in sorted(files):
        size, tag = stat(path, uri)
        digest.update(f"{posixpath.basename(uri)}\0{size}\0{tag}\n".encode())
    return digest.hexdigest()[:16]


def is_folder(path: str) -> bool:
    if not object_store.is_remote(path):
        return os.path.isdir(path)
    try:
        return bool(object_store.list_names(path))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except object_store.ObjectStoreError as err:
        raise CheckpointError(f"{given(path)}: cannot read it: {err}") from err


def exists(uri: str) -> bool:
    try:
        return object_store.exists(uri)
    except object_store.ObjectStoreError:
        return False
