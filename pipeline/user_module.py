"""A TFX module file, as TFX's own examples and templates write them: `preprocessing_fn(inputs)` for Transform,
`run_fn(fn_args)` for the Trainer, either or both, and optionally `tuner_fn(fn_args)` for TFX's Tuner (with
`--tune`; its best hyperparameters go to the run_fn) and `stats_options_updater_fn(stats_type, stats_options)`
for Transform's statistics. Checked at the edge, before any work, by reading its source (not
running it): a file that is missing, does not parse, or defines neither function is refused in one line.

TFX imports the file in the components that use it; locally and on Kubeflow it packages the file (and the
Python files beside it) as a wheel under the pipeline root first, so a changed file is a new cache key.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
from typing import Dict, Optional, Tuple

from tfxflow.components.settings import ConfigError

FLAG = "--module-file"
# TFX's names, and the positional arguments each takes (preprocessing_fn may also take custom_config).
FUNCTIONS = {"preprocessing_fn": (1, 2), "run_fn": (1, 1), "tuner_fn": (1, 1), "stats_options_updater_fn": (2, 2)}


@dataclasses.dataclass(frozen=True)
class UserModule:
    """A checked module file: its absolute path, which of TFX's functions it defines, and the hash of what TFX
    packages with it (every Python file of its folder), which changes exactly when TFX's cache key does."""

    path: str
    preprocessing_fn: bool
    run_fn: bool
    stats_options_updater_fn: bool = False
    sha256: str = ""
    tuner_fn: bool = False

    def describe(self) -> str:
        """E.g. "taxi_utils.py: preprocessing_fn (Transform), run_fn (Trainer)"."""
        parts = [
            name + role
            for name, role, defined in (
                ("preprocessing_fn", " (Transform)", self.preprocessing_fn),
                ("tuner_fn", " (Tuner, with --tune)", self.tuner_fn),
                ("run_fn", " (Trainer)", self.run_fn),
                ("stats_options_updater_fn", " (Transform's statistics)", self.stats_options_updater_fn),
            )
            if defined
        ]
        return f"{os.path.basename(self.path)}: {', '.join(parts)}"


def _positional(node: ast.AST) -> Optional[Tuple[int, int]]:
    """(required, most) positional arguments of a function definition or lambda; None when it takes *args."""
    args = node.args
    if args.vararg is not None:
        return None
    total = len(args.posonlyargs) + len(args.args)
    return total - len(args.defaults), total


def _definitions(tree: ast.Module) -> Dict[str, Optional[ast.AST]]:
    """Top-level names the module binds, to their definition (a def or lambda) where it is one."""
    found: Dict[str, Optional[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value if isinstance(node.value, ast.Lambda) else None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found[(alias.asname or alias.name).split(".")[0]] = None
    return found


def _folder_sha256(folder: str) -> str:
    """A hash of the Python files of `folder` (names and content): what TFX's wheel of a module file holds."""
    digest = hashlib.sha256()
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".py")):
        with open(os.path.join(folder, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()[:16]


def inspect(path: str, flag: str = FLAG) -> UserModule:
    """The module file at `path`, checked; raises ConfigError naming the flag, file and what is wrong."""
    where = f"{flag} {path}"
    if not os.path.isfile(path):
        raise ConfigError(f"{where}: no such file")
    if not path.endswith(".py"):
        raise ConfigError(f"{where}: a module file is a Python source file (.py)")
    with open(path, "rb") as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as err:
        raise ConfigError(f"{where} line {err.lineno}: does not parse: {err.msg}") from err
    definitions = _definitions(tree)
    for name, (least, most) in FUNCTIONS.items():
        node = definitions.get(name)
        arity = _positional(node) if node is not None else None
        if arity is not None and (arity[1] < least or arity[0] > most):
            raise ConfigError(
                f"{where}: {name} takes {arity[1]} positional argument(s); TFX calls it with {least}"
                + (f" or {most}" if most != least else "")
            )
    module = UserModule(
        path=os.path.abspath(path),
        preprocessing_fn="preprocessing_fn" in definitions,
        run_fn="run_fn" in definitions,
        stats_options_updater_fn="stats_options_updater_fn" in definitions,
        sha256=_folder_sha256(os.path.dirname(os.path.abspath(path))),
        tuner_fn="tuner_fn" in definitions,
    )
    if not (module.preprocessing_fn or module.run_fn):
        raise ConfigError(
            f"{where}: defines neither preprocessing_fn (for Transform) nor run_fn (for the Trainer); a TFX "
            "module file defines either or both"
        )
    if module.stats_options_updater_fn and not module.preprocessing_fn:
        raise ConfigError(
            f"{where}: stats_options_updater_fn is read by Transform with the module's preprocessing_fn, and "
            "the module has none"
        )
    return module
