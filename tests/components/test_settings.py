"""Settings declared once: flags, checks and custom_config sections made from dataclass fields."""

import argparse
import dataclasses
from typing import Optional, Tuple

import pytest

from tfxflow.components import settings
from tfxflow.components.settings import ConfigError, setting


@dataclasses.dataclass(frozen=True)
class Knobs:
    steps: int = setting(10, help="steps", check=settings.at_least(1), key=("training", "steps"))
    rate: float = setting(0.5, help="rate", key=("model", "rate"))
    mode: str = setting("a", choices=("a", "b"), help="mode")
    sizes: Optional[Tuple[int, ...]] = setting(None, parse=settings.int_list, metavar="N,N", help="sizes")
    tags: Tuple[str, ...] = setting((), flag="--tag", metavar="TAG", help="tags (repeatable)")
    cache: bool = setting(True, flag="--no-cache", help="no cache")
    fast: bool = setting(False, help="fast")
    hidden: int = setting(3, cli=False, key=("training", "hidden"))


def _parse(*argv):
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser, Knobs)
    return parser, parser.parse_args(list(argv))


def test_defaults_round_trip_through_the_flags():
    _, args = _parse()
    assert settings.from_args(Knobs, args) == Knobs()


def test_flags_set_every_kind_of_field():
    parser, args = _parse(
        "--steps",
        "5",
        "--rate",
        "0.1",
        "--mode",
        "b",
        "--sizes",
        "4,2",
        "--tag",
        "x",
        "--tag",
        "y",
        "--no-cache",
        "--fast",
    )
    assert settings.from_args(Knobs, args) == Knobs(
        steps=5, rate=0.1, mode="b", sizes=(4, 2), tags=("x", "y"), cache=False, fast=True
    )
    assert "--hidden" not in parser.format_help()
    assert "RATE" not in parser.format_help() and "--rate X" in parser.format_help()


def test_parse_and_check_errors_name_the_flag():
    _, args = _parse("--sizes", "4,x")
    with pytest.raises(ValueError, match="--sizes must be comma-separated integers, got '4,x'"):
        settings.from_args(Knobs, args)
    with pytest.raises(ConfigError, match="--steps must be >= 1"):
        settings.check(Knobs(steps=0))


def test_sections_and_strict_fields():
    assert settings.sections(Knobs(sizes=(1,))) == {"training": {"steps": 10, "hidden": 3}, "model": {"rate": 0.5}}
    with pytest.raises(ValueError, match=r"here: unknown key\(s\) \['step'\]"):
        settings.strict_fields(Knobs, {"step": 1}, "here")
