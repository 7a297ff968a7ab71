"""`tfxflow infer-schema` drafts a schema, statistics and a feature config from CSV files; `tfxflow
accept-data` makes the data of a run the drift check refused the new baseline."""

from __future__ import annotations

import argparse
import datetime
import os
import sys

from tfxflow.components import settings
from tfxflow.components.errors import DataError
from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import DEFAULT_DATASET, TrainingConfig
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.local.run import EXIT_BUSY, EXIT_CONFIG_ERROR, EXIT_DATA_GATE

INFER_HELP = "infer a schema, statistics and a feature config from CSV files"
ACCEPT_HELP = (
    "make the data of a run (default: the latest) the drift baseline, after the drift check refused it and "
    "you have looked at it"
)


def add_parsers(sub) -> None:
    infer = sub.add_parser(
        "infer-schema", help=INFER_HELP, description=INFER_HELP, formatter_class=common.HelpFormatter
    )
    infer.add_argument("--data-root", required=True, metavar="DIR", help="folder of CSV files")
    infer.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder to write schema.pbtxt, inferred_schema.pbtxt, statistics.pb and features.yaml into",
    )
    infer.add_argument("--label", metavar="COLUMN", help="label column: marked absent at serving, drafted as the label")
    infer.add_argument("--force", action="store_true", help="overwrite an existing schema.pbtxt and features.yaml")
    settings.add_arguments(
        infer,
        TrainingConfig,
        only=("init_checkpoint",),
        overrides={
            "init_checkpoint": {
                "help": "the pretrained encoder the run will fine-tune (as `tfxflow run --init-checkpoint`): "
                "sequence_length is drafted from the text columns' lengths in its own word pieces, at most its "
                "positions (without it: in words)"
            }
        },
    )

    accept = sub.add_parser(
        "accept-data", help=ACCEPT_HELP, description=ACCEPT_HELP, formatter_class=common.HelpFormatter
    )
    accept.add_argument("--home", metavar="DIR", help=f"the run's home folder {common.HOME_HELP}")
    common.add_metadata_path(accept)
    accept.add_argument(
        "--dataset", default=DEFAULT_DATASET, metavar="NAME", help="names the pipeline: tfxflow-<dataset>"
    )
    common.add_pipeline_name(accept)
    accept.add_argument(
        "--run", dest="run_id", metavar="RUN_ID", help="the pipeline run whose data to accept (default: the latest)"
    )
    accept.add_argument("--reason", default="", metavar="TEXT", help="why, recorded in ML Metadata with who and when")


def infer_schema(args: argparse.Namespace) -> int:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import stderr_to
    from tfxflow.pipeline.tools import infer_schema as schema_tool

    log_file = os.path.join(args.out, "infer-schema.log")
    os.makedirs(args.out, exist_ok=True)
    try:
        init_checkpoint = settings.parsed(TrainingConfig, args, "init_checkpoint")
        with stderr_to(log_file):
            result = schema_tool.infer(
                os.path.abspath(args.data_root), args.out, args.label, args.force, init_checkpoint
            )
    except ValueError as err:  # ConfigError: the flag and folder at fault
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except DataError as err:
        print(f"{err}", file=sys.stderr)
        return EXIT_DATA_GATE
    print(
        f"tfxflow: {result.rows:,} rows, {len(result.columns)} columns: "
        + ", ".join(f"{name} {kind}" for name, kind in result.columns.items())
    )
    for name, why in result.texts.items():
        print(f"  {name}: text ({why})")
    for name, lengths in result.lengths.items():
        print(
            f"  {name}: {lengths.describe()}; sequence_length {result.sequence_length}: "
            f"{lengths.cut_text(result.sequence_length)} would be cut"
        )
    for path in result.written:
        print(f"  wrote {path}")
    for path in result.kept:
        print(f"  kept  {path} (exists; --force overwrites it)")
    print(
        f"Next: curate {os.path.join(args.out, 'schema.pbtxt')} (domains, ranges, presence, comparators) and "
        f"features.yaml, then\n  tfxflow run --data-root {args.data_root} "
        f"--schema {os.path.join(args.out, 'schema.pbtxt')} "
        f"--feature-config {os.path.join(args.out, 'features.yaml')}"
        + (f" --init-checkpoint {init_checkpoint}" if init_checkpoint else "")
    )
    return 0


def accept_data(args: argparse.Namespace) -> int:
    home = paths_lib.resolve_home(args.home, os.environ)
    paths = paths_lib.Paths.under(home, metadata_path=args.metadata_path)
    pipeline_name = common.pipeline_name(args)
    if not os.path.exists(paths.metadata_path):
        print(
            f"error: no metadata store at {paths.metadata_path}: pass the --home (or --metadata-path) of the run",
            file=sys.stderr,
        )
        return EXIT_CONFIG_ERROR
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import stderr_to

    os.makedirs(paths.log_dir, exist_ok=True)
    log_file = os.path.join(paths.log_dir, f"accept-data-{datetime.datetime.now():%Y%m%d-%H%M%S}.log")
    try:
        with run_guard.RunLock(os.path.dirname(paths.metadata_path)), stderr_to(log_file):
            # lazy: it imports TensorFlow, TFX and Beam
            from tfxflow.pipeline.tools import (
                accept_data as accept_tool,  # imports TFX: its native libraries' start-up chatter goes to the log
            )

            done = accept_tool.accept(paths.metadata_path, pipeline_name, args.run_id, args.reason)
    except run_guard.RunBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BUSY
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except RuntimeError as err:  # ML Metadata's errors: a file that is not a store, a store of another version
        print(
            f"error: cannot use the metadata store {paths.metadata_path}: {str(err).splitlines()[0][:200]}",
            file=sys.stderr,
        )
        return EXIT_CONFIG_ERROR
    rows = ", ".join(f"{split} {count:,}" for split, count in done.rows.items()) or "rows unknown"
    verdict = {"FAILED": "the data gate refused that run", None: "that run has no data gate"}.get(
        done.gate_state, f"the data gate's state in that run: {done.gate_state}"
    )
    print(
        f"tfxflow: the data of run {done.run_id} ({rows}) is now the drift baseline of {pipeline_name}\n"
        f"  statistics: {done.uri} (ML Metadata artifact {done.artifact_id})\n"
        f"  accepted by {done.by} at {done.at}" + (f": {args.reason}" if args.reason else "") + "\n"
        f"  {verdict}; run the pipeline again: its data is compared with this baseline from now on"
    )
    return 0
