"""`tfxflow`: the command line of the pipeline; `build_parser` assembles one parser of the subcommand modules
(run_command, report, compare_command, data, rollback_command, mlflow_sync, kubeflow), `main` dispatches to them."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from typing import List, Optional

from tfxflow.components.training import hardware
from tfxflow.pipeline.cli import (
    common,
    compare_command,
    data,
    kubeflow,
    mlflow_sync,
    report,
    rollback_command,
    run_command,
)
from tfxflow.pipeline.local.run import EXIT_BUSY, EXIT_CONFIG_ERROR, EXIT_DATA_GATE, EXIT_TERMINATED

__all__ = ["EXIT_BUSY", "EXIT_CONFIG_ERROR", "EXIT_DATA_GATE", "EXIT_TERMINATED", "build_parser", "main"]


class _DescriptionAsWritten(common.HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The top-level help keeps the command list's layout."""


def _description() -> str:
    """The top-level help: every command and Kubeflow subcommand with its help line, from the modules."""
    commands = [
        ("run", run_command.HELP),
        ("report", report.HELP),
        ("compare", compare_command.HELP),
        ("infer-schema", data.INFER_HELP),
        ("accept-data", data.ACCEPT_HELP),
        ("rollback", rollback_command.HELP),
        ("mlflow-sync", mlflow_sync.HELP),
        ("kubeflow", kubeflow.HELP),
    ]
    commands += [(f"  kubeflow {name}", text) for name, text in kubeflow.COMMANDS.items()]
    lines = [
        textwrap.fill(text, 100, initial_indent=f"  {name:<26}", subsequent_indent=" " * 28) for name, text in commands
    ]
    return (
        "Runs the TFX pipeline locally, manages its data and served models, and takes it to Kubeflow Pipelines."
        "\n\ncommands:\n" + "\n".join(lines) + "\n\n`tfxflow COMMAND --help` describes a command's flags."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfxflow",
        usage="tfxflow [-h] COMMAND ...",
        description=_description(),
        formatter_class=_DescriptionAsWritten,
    )
    # The description lists the commands (with the Kubeflow ones): argparse's own list would repeat it.
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS, prog="tfxflow"
    )
    run_command.add_parser(sub)
    report.add_parser(sub)
    compare_command.add_parser(sub)
    data.add_parsers(sub)
    rollback_command.add_parser(sub)
    mlflow_sync.add_parser(sub)
    kubeflow.add_parser(sub)
    return parser


_parser = build_parser  # the name tests and tools used before the CLI was split into modules

_COMMANDS = {
    "run": run_command.main,
    "report": report.main,
    "compare": compare_command.main,
    "infer-schema": data.infer_schema,
    "accept-data": data.accept_data,
    "rollback": rollback_command.main,
    "mlflow-sync": mlflow_sync.main,
    "kubeflow": kubeflow.main,
}


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `tfxflow` console script."""
    # Quiets TensorFlow's C++ start-up chatter; must be set before TensorFlow is imported.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    hardware.use_keras_2()
    hardware.use_arrow_jemalloc()
    args = build_parser().parse_args(argv)
    return _COMMANDS[args.command](args)


def console_main() -> None:
    """The console script: runs `main`, then leaves without TensorFlow's noisy interpreter teardown."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    # TF 2.16 raises ignored exceptions from AtomicFunction.__del__ while the interpreter tears down.
    os._exit(code)


if __name__ == "__main__":
    console_main()
