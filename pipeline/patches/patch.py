"""One patch of a library's private names: the library versions it was checked against, and how it is installed.

A patch is installed only where every library it reads is installed at a version of its table; elsewhere it is
skipped, with one log line per process naming the patch, the library and the installed version."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import threading
from typing import Callable, Mapping, Optional, Tuple

from absl import logging

MARK = "tfxflow_patch"  # set on what a patch installs: a second install finds it and does nothing

_reported: set = set()  # the patches whose skip this process has logged
_lock = threading.Lock()


def installed_version(distribution: str) -> str:
    """The installed distribution's version ("" where it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


@dataclasses.dataclass(frozen=True)
class Patch:
    """`install` changes private names of the libraries of `checked` ({distribution: the versions its code was
    read and tested at}); it is idempotent."""

    name: str
    checked: Mapping[str, Tuple[str, ...]]
    install: Callable[[], None]

    def outside(self, version_of: Callable[[str], str] = installed_version) -> Optional[Tuple[str, str]]:
        """(library, installed version) of the first library installed at a version outside the table, or None."""
        for library, versions in self.checked.items():
            version = version_of(library)
            if version not in versions:
                return library, version
        return None

    def apply(self, version_of: Callable[[str], str] = installed_version) -> bool:
        """Installs the patch where every library is at a checked version; returns whether it is installed."""
        outside = self.outside(version_of)
        if outside is None:
            self.install()
            return True
        library, version = outside
        with _lock:
            if self.name in _reported:
                return False
            _reported.add(self.name)
        logging.warning(
            "tfxflow: patch %s skipped: %s %s is not a version it was checked against (%s)",
            self.name,
            library,
            version or "(not installed)",
            ", ".join(self.checked[library]),
        )
        return False
