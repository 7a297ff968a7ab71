"""`tfxflow rollback`: serve an earlier pushed model again."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys

from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import DEFAULT_DATASET
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.local.run import EXIT_BUSY, EXIT_CONFIG_ERROR
from tfxflow.pipeline.tracking_store import resolve_tracking_uri

HELP = (
    "serve an earlier pushed model again: copy it to a new, highest version (TF Serving switches to it), and "
    "keep the pipeline from pushing the rolled-back model again"
)


def add_parser(sub) -> None:
    back = sub.add_parser("rollback", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    back.add_argument("--home", metavar="DIR", help=f"the runs' home folder {common.HOME_HELP}")
    back.add_argument(
        "--serving-dir",
        metavar="DIR",
        help="TF Serving model base, a folder or gs://, s3://, minio:// (default: <home>/serving)",
    )
    back.add_argument("--dataset", default=DEFAULT_DATASET, metavar="NAME", help="names the model and the pipeline")
    back.add_argument("--model-name", metavar="NAME", help="serving and registered model name (default: <dataset>)")
    back.add_argument(
        "--to",
        type=int,
        metavar="VERSION",
        help="the version to serve again (default: the newest earlier version holding another model "
        "that was not rolled back itself)",
    )
    back.add_argument(
        "--reason", default="", metavar="TEXT", help="why, recorded with who and when (serving log, MLflow, MLMD)"
    )
    common.add_mlflow_uri(back)
    common.add_metadata_path(back)
    common.add_pipeline_name(back)


def main(args: argparse.Namespace) -> int:
    import contextlib
    import tempfile

    # kept out of `tfxflow --help`'s import
    from tfxflow.components import object_store
    from tfxflow.pipeline.local.runner import stderr_to

    home = paths_lib.resolve_home(args.home, os.environ)
    paths = paths_lib.Paths.under(home, metadata_path=args.metadata_path)
    model_name = args.model_name or args.dataset
    serving_dir = args.serving_dir or paths.serving_dir
    if not object_store.is_remote(serving_dir):
        serving_dir = os.path.abspath(serving_dir)
    base = f"{serving_dir.rstrip('/')}/{model_name}"
    pipeline_name = common.pipeline_name(args)
    tracking_uri = resolve_tracking_uri(args.mlflow_uri, os.environ, paths.home)
    log_dir = paths.log_dir if os.path.isdir(paths.home) else tempfile.gettempdir()
    os.makedirs(log_dir, exist_ok=True)
    log_file = os.path.join(log_dir, f"rollback-{datetime.datetime.now():%Y%m%d-%H%M%S}.log")
    has_store = os.path.exists(paths.metadata_path)
    # Under the run lock of a local home: no pipeline run pushes or reads the blessings meanwhile.
    lock = run_guard.RunLock(os.path.dirname(paths.metadata_path)) if has_store else contextlib.nullcontext()
    try:
        with lock, stderr_to(log_file):
            # lazy: it imports TensorFlow, TFX and Beam
            from tfxflow.pipeline.tools import (
                rollback as rollback_lib,  # imports TFX: its start-up chatter goes to the log
            )

            done = rollback_lib.rollback(
                base,
                args.to,
                args.reason,
                tracking_uri=tracking_uri,
                registered_name=model_name,
                metadata_path=paths.metadata_path if has_store else None,
                pipeline_name=pipeline_name,
            )
    except run_guard.RunBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BUSY
    except ValueError as err:  # ConfigError: why no rollback was done
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except Exception as err:  # the file system or object store refused
        logging.getLogger(__name__).exception("rollback failed")
        first_line = (str(err).strip().splitlines() or [""])[0][:300]
        print(
            f"error: the rollback failed, the served version is unchanged: {type(err).__name__}: {first_line}\n"
            f"  log: {log_file}",
            file=sys.stderr,
        )
        return 1
    plan = done.plan
    rolled = ", ".join(f"{v} (model {plan.fingerprints[v][:12]})" for v in plan.rolled_back)
    metadata = done.metadata or [f"no metadata store at {paths.metadata_path}: no blessing revoked"]
    print(
        f"tfxflow: {model_name} rolled back: version {plan.current} -> {done.new_version}, a copy of version "
        f"{plan.target} (model {plan.fingerprints[plan.target][:12]})\n"
        f"  served now: {base}/{done.new_version}\n"
        f"  rolled back: {rolled} by {done.by} at {done.at}" + (f": {args.reason}" if args.reason else "") + "\n"
        f"  kept:       version {plan.current} stays on disk, unserved, until the Pusher prunes it\n"
        f"  log:        {done.log_path}: the Pusher will not push a rolled-back model again\n"
        + "".join(f"  mlflow:     {line}\n" for line in done.tracking)
        + "".join(f"  metadata:   {line}\n" for line in metadata)
        + f"TF Serving loads version {done.new_version} at its next poll of {base} (--file_system_poll_wait_seconds, "
        f"1 s by default), then unloads version {plan.current}."
    )
    return 0
