"""Settings declared once, as dataclass fields, and turned into command-line flags, checks and the Trainer's
`custom_config` from that one declaration.

A field made with `setting()` carries in its metadata:
- `flag`: its command-line spelling (default: `--` and the field name with dashes); `cli=False`: no flag;
- `help`, `metavar`, `choices`;
- `parse`: turns the flag's text into the value after parsing, raising ValueError naming the flag (argparse
  keeps the text, so the error is one line of ours, not argparse's usage message);
- `check`: a function of the value returning what is wrong with it (None when it is fine), reported as
  `<flag> <text>` in a ConfigError;
- `key`: `(section, name)` of the value in the Trainer's `custom_config`.

A bool defaulting to True becomes a `--no-...` flag that stores False; one defaulting to False a switch; a
tuple defaulting to `()` a repeatable flag. Light on purpose: the CLI builds its parser from it without
importing TensorFlow.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

_MISSING = dataclasses.MISSING


class ConfigError(ValueError):
    """A run configuration that cannot work; the message names the flag or file at fault."""


def setting(
    default: Any = _MISSING,
    *,
    help: str = "",  # argparse's name
    flag: Optional[str] = None,
    metavar: Optional[str] = None,
    choices: Optional[Iterable[str]] = None,
    parse: Optional[Callable[[str, str], Any]] = None,
    check: Optional[Callable[[Any], Optional[str]]] = None,
    key: Optional[Tuple[str, str]] = None,
    cli: bool = True,
    type: Optional[Callable[[str], Any]] = None,  # argparse's name
) -> Any:
    """A dataclass field with its flag, help, check and custom_config key (see the module docstring)."""
    metadata = {
        "flag": flag,
        "help": help,
        "metavar": metavar,
        "choices": tuple(choices) if choices is not None else None,
        "parse": parse,
        "check": check,
        "key": key,
        "cli": cli,
        "type": type,
    }
    return dataclasses.field(default=default, metadata=metadata)


def flag_of(field: dataclasses.Field) -> str:
    """The field's command-line spelling."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def cli_fields(cls) -> Tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.metadata.get("cli"))


def add_arguments(
    parser,
    cls,
    *,
    only: Optional[Iterable[str]] = None,
    defaults: Optional[Mapping[str, Any]] = None,
    overrides: Optional[Mapping[str, dict]] = None,
) -> None:
    """Adds a flag for every CLI field of `cls` (or the fields named in `only`) to `parser` or an argument
    group, its dest the field name.

    `defaults` replaces a field's default for this command; `overrides` replaces argparse keywords of a field
    (a command where the same setting reads differently, e.g. its help)."""
    defaults = defaults or {}
    overrides = overrides or {}
    names = None if only is None else set(only)
    for field in cli_fields(cls):
        if names is not None and field.name not in names:
            continue
        meta = field.metadata
        default = defaults.get(field.name, field.default)
        kwargs: Dict[str, Any] = {"dest": field.name, "help": meta["help"]}
        if isinstance(field.default, bool):
            kwargs["action"] = "store_false" if field.default else "store_true"
        elif isinstance(field.default, tuple) and not meta.get("parse"):
            kwargs.update(action="append", default=None, metavar=meta["metavar"])
        else:
            kwargs.update(default=default, metavar=meta["metavar"], choices=meta["choices"])
            if meta["type"] is not None:
                kwargs["type"] = meta["type"]
            elif isinstance(default, (int, float)) and not isinstance(default, bool) and not meta.get("parse"):
                kwargs["type"] = float if isinstance(field.default, float) else int
            if kwargs["metavar"] is None and not meta["choices"]:
                # Never the field's name: help shows what to write, not how the code calls it.
                kwargs["metavar"] = {int: "N", float: "X"}.get(kwargs.get("type"), "VALUE")
        kwargs.update(overrides.get(field.name, {}))
        parser.add_argument(flag_of(field), **{k: v for k, v in kwargs.items() if v is not None or k == "default"})


def from_args(cls, args: argparse.Namespace, **values: Any):
    """An instance of `cls` from the flags `add_arguments` added (and `values` for the other fields).

    Raises ValueError naming the flag when a `parse` refuses its text."""
    for field in cli_fields(cls):
        if field.name in values:
            continue
        value = getattr(args, field.name)
        if value is None and isinstance(field.default, tuple):
            value = ()  # a repeatable flag never given
        elif isinstance(field.default, tuple) and isinstance(value, list):
            value = tuple(value)
        if field.metadata.get("parse") and isinstance(value, str):
            value = field.metadata["parse"](value, flag_of(field))
        values[field.name] = value
    return cls(**values)


def parsed(cls, args: argparse.Namespace, name: str) -> Any:
    """One field's value from the flags `add_arguments` added for it (`only=`), its `parse` applied; raises
    ValueError naming the flag as `from_args` does."""
    field = next(f for f in cli_fields(cls) if f.name == name)
    value = getattr(args, name)
    if field.metadata.get("parse") and isinstance(value, str):
        value = field.metadata["parse"](value, flag_of(field))
    return value


def check(obj: Any) -> None:
    """Runs every field's `check` (nested settings dataclasses too); raises ConfigError naming the flag."""
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check(value)
        test = field.metadata.get("check")
        problem = test(value) if test else None
        if problem:
            raise ConfigError(f"{flag_of(field)} {problem}")


def at_least(low: float, note: str = "") -> Callable[[Any], Optional[str]]:
    """A `check`: the value must be >= low."""
    return lambda value: None if value is None or value >= low else f"must be >= {low}{note}"


def int_list(text: str, flag: str) -> Tuple[int, ...]:
    """A `parse` of comma-separated integers."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers, got '{text}'") from None


def local_or_remote_path(text: str, flag: str) -> str:
    """A `parse` of a path: a local one made absolute (a run's steps start elsewhere), a gs://, s3:// or
    minio:// URI as is."""
    if not text.strip():
        raise ValueError(f"{flag} needs a path")
    if "://" in text:
        return text
    import os

    return os.path.abspath(os.path.expanduser(text))


def json_value(value: Any) -> Any:
    """A value as custom_config carries it (plain JSON): tuples become lists."""
    return list(value) if isinstance(value, tuple) else value


def sections(obj: Any) -> Dict[str, Dict[str, Any]]:
    """{section: {key: value}} of every field of `obj` that has a `key`."""
    out: Dict[str, Dict[str, Any]] = {}
    for field in dataclasses.fields(obj):
        key = field.metadata.get("key")
        if key:
            out.setdefault(key[0], {})[key[1]] = json_value(getattr(obj, field.name))
    return out


def strict_fields(cls, data: Mapping[str, Any], where: str) -> Dict[str, Any]:
    """`data` checked against the fields of `cls`: raises ValueError naming an unknown key and `where`."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    return dict(data)
