"""`tfxflow mlflow-sync`: send to MLflow what runs kept while their tracking server did not answer."""

from __future__ import annotations

import argparse
import os
import sys

from tfxflow.components.tracking import tracking_outbox
from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.local import run_guard
from tfxflow.pipeline.local.run import EXIT_BUSY, EXIT_CONFIG_ERROR, EXIT_TRACKING
from tfxflow.pipeline.tracking_store import TrackingError, check_tracking, resolve_tracking_uri

HELP = (
    "send to the MLflow server what runs kept (<home>/metadata/mlflow_outbox) while it did not answer, and close "
    "the MLflow runs they left open (the next run does it too)"
)


def add_parser(sub) -> None:
    sync = sub.add_parser("mlflow-sync", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    sync.add_argument("--home", metavar="DIR", help=f"the runs' home folder {common.HOME_HELP}")
    common.add_mlflow_uri(sync)
    common.add_metadata_path(sync)
    sync.add_argument(
        "--wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long each call waits for a server that does not answer",
    )


def main(args: argparse.Namespace) -> int:
    if not args.wait >= 1:
        print(f"error: --wait must be >= 1, got {args.wait}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    paths = paths_lib.Paths.under(paths_lib.resolve_home(args.home, os.environ), metadata_path=args.metadata_path)
    uri = resolve_tracking_uri(args.mlflow_uri, os.environ, paths.home)
    kept = tracking_outbox.entries(paths.tracking_outbox)
    if not kept:
        print(f"tfxflow: nothing kept in {paths.tracking_outbox}")
        return 0
    try:
        described = check_tracking(uri, timeout=args.wait)
    except TrackingError as err:
        print(f"error: {err}; {len(kept)} run(s) stay kept in {paths.tracking_outbox}", file=sys.stderr)
        return EXIT_TRACKING
    from tfxflow.components.tracking import mlflow_runs as tracking_lib  # kept out of `tfxflow --help`'s import

    lock = run_guard.RunLock(os.path.dirname(paths.metadata_path))  # no run sends the same entries meanwhile
    try:
        with lock:
            lines = tracking_lib.deliver(uri, paths.tracking_outbox, args.wait)
    except run_guard.RunBusy as err:
        print(f"error: {err}; the run sends what is kept when it starts", file=sys.stderr)
        return EXIT_BUSY
    print(f"tfxflow: {described}")
    for line in lines:
        print(f"  {line}")
    others = {e["uri"] for e in tracking_outbox.entries(paths.tracking_outbox)} - {uri}
    for other in sorted(others):
        print(f"  kept for another server: {other} (--mlflow-uri {other} sends it)")
    still = [e for e in tracking_outbox.entries(paths.tracking_outbox) if e["uri"] == uri]
    return EXIT_TRACKING if still else 0
