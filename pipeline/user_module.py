"""A TFX module file, as TFX's own examples and templates write them: `preprocessing_fn(inputs)` for Transform,
`run_fn(fn_args)` for the Trainer, either or both, and optionally `tuner_fn(fn_args)` for TFX's Tuner (with
`--tune`; its best hyperparameters go to the run_fn) and `stats_options_updater_fn(stats_type, stats_options)`
for Transform's statistics. Checked at the edge, before any work, by reading its source (not
running it): a file that is missing, does not parse, or defines neither function is refused in one line.

TFX imports the file in the components that use it; locally and on Kubeflow it packages the file (and the
Python files beside it) as a wheel under the pipeline root first, so a changed file is a new cache key.

A module's preprocessing_fn names the label it outputs itself (Google's examples: `<column>_xf`), where a feature
config drafted by infer-schema names the built-in preprocessing's: `label_name` traces the preprocessing_fn on
the schema's features (as Transform does, on placeholders: nothing is computed) and finds the module's label
there, so the Evaluator reads the label where the module puts it.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import inspect as signature_lib
import os
import sys
import warnings
from typing import Dict, Mapping, Optional, Sequence, Tuple

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


def preprocessing_outputs(
    module: UserModule, schema_path: str, custom_config: Optional[Mapping] = None
) -> Optional[Tuple[str, ...]]:
    """The names of the features `module`'s preprocessing_fn outputs, traced in a graph on placeholders of the
    schema's features as Transform traces it (nothing is computed), with `custom_config` where the function takes
    it (as TFX passes it); None when it cannot be traced here (e.g. it imports a file only TFX's wheel of the
    module provides): Transform then says what is wrong."""
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tensorflow_transform import impl_helper
    from tensorflow_transform.tf_metadata import schema_utils

    name = f"_tfxflow_traced_{module.sha256 or 'module'}"
    try:
        with open(schema_path, encoding="utf-8") as f:
            schema = text_format.Parse(f.read(), schema_pb2.Schema())
        spec = importlib.util.spec_from_file_location(name, module.path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded  # for what the module defines by its module's name (dataclasses, pickling)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the libraries' own notices, printed again when TFX imports it
            spec.loader.exec_module(loaded)
            fn = loaded.preprocessing_fn
            with tf.compat.v1.Graph().as_default():
                inputs = impl_helper.batched_placeholders_from_specs(
                    schema_utils.schema_as_feature_spec(schema).feature_spec
                )
                takes_config = "custom_config" in signature_lib.signature(fn).parameters
                outputs = (
                    fn(dict(inputs), custom_config=dict(custom_config or {})) if takes_config else fn(dict(inputs))
                )
        return tuple(sorted(outputs))
    except Exception:  # noqa: BLE001 - the user's code may raise anything; Transform reports it when it runs
        return None
    finally:
        sys.modules.pop(name, None)


def label_name(label: str, column: str, outputs: Sequence[str]) -> Optional[str]:
    """The label among a preprocessing_fn's `outputs` for a feature config's label `label` of the raw `column`:
    `label` itself where it is one of them, or is the raw column (TFMA reads it from the rows); else the one
    output named for the column (the column itself, `<column>_...` or `..._<column>`, e.g. Google's
    `species_xf`). None when none is, or more than one."""
    if label in outputs or label == column:
        return label
    if column in outputs:
        return column
    derived = [name for name in outputs if name.startswith(column + "_") or name.endswith("_" + column)]
    return derived[0] if len(derived) == 1 else None
