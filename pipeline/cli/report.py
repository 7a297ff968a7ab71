"""`tfxflow report`: the self-contained HTML page of a recorded run (and its model card), drawn again."""

from __future__ import annotations

import argparse
import os
import sys

from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import DEFAULT_DATASET
from tfxflow.pipeline.local.run import EXIT_CONFIG_ERROR

HELP = "write the HTML page of a recorded run (default: the latest): data, drift, training, evaluation, serving"


def add_parser(sub) -> None:
    rep = sub.add_parser("report", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    rep.add_argument("--home", metavar="DIR", help=f"the runs' home folder {common.HOME_HELP}")
    rep.add_argument("--dataset", default=DEFAULT_DATASET, metavar="NAME", help="names the pipeline")
    common.add_pipeline_name(rep)
    rep.add_argument("--model-name", metavar="NAME", help="serving model name, for --model-card (default: <dataset>)")
    common.add_metadata_path(rep)
    rep.add_argument("--run", metavar="ID", help="the pipeline run (default: the latest; --list shows them)")
    rep.add_argument("--list", action="store_true", help="list the recorded runs, newest last, and stop")
    rep.add_argument("--out", metavar="FILE", help="where to write the page (default: <home>/reports/<run>.html)")
    rep.add_argument("--model-card", action="store_true", help="also write the model card of a pushed model")


def main(args: argparse.Namespace) -> int:
    home = os.path.abspath(paths_lib.resolve_home(args.home, os.environ))
    paths = paths_lib.Paths.under(home, metadata_path=args.metadata_path)
    pipeline_name = common.pipeline_name(args)
    if not os.path.isfile(paths.metadata_path):
        print(
            f"error: no ML Metadata store at {paths.metadata_path}: run the pipeline first, or pass --home",
            file=sys.stderr,
        )
        return EXIT_CONFIG_ERROR
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.reports import publish, run_record

    runs = run_record.run_ids(run_record.open_store(paths.metadata_path), pipeline_name)
    if args.list:
        print("\n".join(runs) if runs else f"no runs of {pipeline_name} in {paths.metadata_path}")
        return 0
    if args.run is not None and args.run not in runs:
        recent = ", ".join(runs[-5:]) or "none"
        print(f"error: --run {args.run}: no such run of {pipeline_name} (the latest: {recent})", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    page = publish.write_report(home, paths.metadata_path, pipeline_name, args.run, out=args.out)
    if page is None:
        print(f"error: no runs of {pipeline_name} in {paths.metadata_path}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    print(f"wrote {os.path.abspath(args.out or publish.report_path(home, page.run_id))}")
    if args.model_card:
        if not page.pushed_version:
            print(f"no model card: run {page.run_id} pushed no model ({page.not_pushed or page.verdict})")
        else:
            print(f"wrote {publish.write_model_card(home, args.model_name or args.dataset, page)}")
    return 0
