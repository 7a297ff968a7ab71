"""The `tfxflow` parser as a whole: every subcommand's help states each default once and truly, marks the
required flags, and the deprecated spellings still work and warn."""

import argparse
import re

import pytest

from tfxflow.pipeline.cli import common
from tfxflow.pipeline.cli.main import build_parser

COMPILE = [
    "kubeflow",
    "compile",
    "--image",
    "registry.example.com/ml/tfxflow:0.1.0",
    "--pipeline-root",
    "gs://ml-artifacts/root",
    "--data-root",
    "gs://ml-data/taxi",
]


def _parsers():
    """(command words, parser) of every parser under `tfxflow`, the top level included."""
    todo = [((), build_parser())]
    while todo:
        words, parser = todo.pop()
        yield words, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(words + (name,), sub) for name, sub in action.choices.items()]


def _help_of(parser, action) -> str:
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def test_every_subcommand_has_a_help_line():
    for words, parser in _parsers():
        assert parser.format_help(), words  # every --help prints
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                assert set(helps) == set(action.choices), words
                assert all(helps.values()), (words, helps)
    top = build_parser().format_help()
    for command in ("run", "compare", "infer-schema", "accept-data", "rollback", "kubeflow"):
        assert re.search(rf"^  {command} ", top, re.M), command
    for command in ("compile", "check", "serving-config", "submit", "schedule", "unschedule"):
        assert f"kubeflow {command} " in top, command


@pytest.mark.parametrize("words,parser", list(_parsers()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_help_states_each_default_once_and_required_flags_as_required(words, parser):
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        text = _help_of(parser, action)
        flag = f"{' '.join(words)} {action.option_strings[0]}"
        assert text, f"{flag}: no help"
        assert text.count("default:") <= 1, f"{flag}: states its default twice: {text}"
        if action.required:
            assert "default" not in text and text.endswith("(required)"), f"{flag}: {text}"
        elif action.default not in (None, "", [], (), argparse.SUPPRESS) and not isinstance(action.default, bool):
            assert "default:" in text, f"{flag}: default {action.default!r} not stated: {text}"
        if action.metavar is None and action.nargs != 0:
            # argparse would show the dest: an internal name such as SCHEMA_PATH
            assert action.choices is not None, f"{flag}: no metavar"


def test_formatter_appends_no_default_to_help_that_states_one():
    parser = argparse.ArgumentParser(formatter_class=common.HelpFormatter)
    parser.add_argument("--a", default="x", help="says it (default: x)")
    parser.add_argument("--b", default="y", help="does not")
    parser.add_argument("--c", required=True, help="needed")
    text = " ".join(parser.format_help().split())
    assert "says it (default: x) " in text and "--b B does not (default: y)" in text and "needed (required)" in text


def test_deprecated_kfp_experiment_spelling_still_works_and_warns(capsys):
    for command in ("submit", "schedule", "unschedule"):
        extra = {"submit": ["--spec", "x.yaml"], "schedule": ["--spec", "x.yaml", "--name", "n", "--cron", "c"]}
        argv = ["kubeflow", command, *extra.get(command, ["--name", "n"])]
        args = build_parser().parse_args(argv + ["--kfp-experiment", "team-a"])
        assert args.kfp_experiment == "team-a" and capsys.readouterr().err == ""
        args = build_parser().parse_args(argv + ["--experiment", "team-b"])
        assert args.kfp_experiment == "team-b"
        assert "--experiment is deprecated here, use --kfp-experiment" in capsys.readouterr().err


def test_compile_takes_the_tracking_vocabulary_of_run_and_on_with_a_warning(capsys):
    assert build_parser().parse_args(COMPILE).tracking == "required"
    assert build_parser().parse_args(COMPILE + ["--tracking", "off"]).tracking == "off"
    assert capsys.readouterr().err == ""
    assert build_parser().parse_args(COMPILE + ["--tracking", "on"]).tracking == "required"
    assert "--tracking on is deprecated, use --tracking required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(COMPILE + ["--tracking", "optional"])  # a compiled pipeline cannot run untracked


def test_min_accuracy_is_a_deprecated_spelling_of_the_blessing_threshold(capsys):
    for argv in (["run"], COMPILE):
        args = build_parser().parse_args(argv + ["--blessing-metric", "auc", "--blessing-threshold", "0.7"])
        assert (args.metric, args.threshold) == ("auc", 0.7) and capsys.readouterr().err == ""
        args = build_parser().parse_args(argv + ["--min-accuracy", "0.65"])
        assert args.metric is None and args.threshold == 0.65
        assert "--min-accuracy is deprecated here, use --blessing-threshold" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--blessing-metric", "f1_of_everything"])
