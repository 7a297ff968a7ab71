"""`tfxflow compare`: the params that differ between MLflow runs, their key metrics, the best."""

from __future__ import annotations

import argparse
import os
import sys

from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import DEFAULT_DATASET
from tfxflow.pipeline.local.run import EXIT_CONFIG_ERROR
from tfxflow.pipeline.tracking_store import TrackingError, check_tracking, resolve_tracking_uri

HELP = "compare MLflow runs: the params that differ, key metrics, the best"


def add_parser(sub) -> None:
    cmp = sub.add_parser("compare", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    cmp.add_argument("--home", metavar="DIR", help=f"finds the embedded store {common.HOME_HELP}")
    common.add_mlflow_uri(cmp)
    cmp.add_argument("--experiment", metavar="NAME", default=f"tfxflow-{DEFAULT_DATASET}", help="MLflow experiment")
    cmp.add_argument("--last", type=int, default=5, metavar="N", help="the last N runs that trained a model")
    cmp.add_argument(
        "--all", action="store_true", help="count every run in --last, also those refused or failed before training"
    )
    cmp.add_argument("--runs", metavar="ID,ID,...", help="comma-separated MLflow run ids instead of --last")
    cmp.add_argument(
        "--trials",
        metavar="RUN_ID",
        help="the tuning trials of this pipeline run (run with --tune) instead: the values each tried, its "
        "objective and time; --plot draws the objective per trial and their validation curves",
    )
    cmp.add_argument(
        "--metric",
        metavar="NAME",
        help="marks the best run; the metric plotted (default: the runs' task's blessing metric: "
        "eval.binary_accuracy, eval.accuracy or eval.r2)",
    )
    cmp.add_argument("--csv", metavar="FILE", help="also write the table as CSV to this file")
    cmp.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown to this file")
    cmp.add_argument(
        "--plot",
        metavar="FILE",
        help="write a PNG to this file: --metric per run beside its baseline, and each run's validation curve",
    )


def main(args: argparse.Namespace) -> int:
    from tfxflow.pipeline.reports import compare as compare_lib  # kept out of `tfxflow --help`'s import

    uri = resolve_tracking_uri(args.mlflow_uri, os.environ, paths_lib.resolve_home(args.home, os.environ))
    try:
        if uri.startswith("sqlite:///") and not os.path.exists(uri[len("sqlite:///") :]):
            raise ValueError(f"no MLflow store at {uri}: run the pipeline first, or pass --home or --mlflow-uri")
        check_tracking(uri)
        from mlflow import MlflowClient

        run_ids = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
        mlflow_client = MlflowClient(uri)
        if args.trials:
            loaded, objective = compare_lib.load_trials(mlflow_client, args.trials)
            if not loaded.runs:
                raise ValueError(f"--trials {args.trials}: no trial of it reached {uri}")
            comparison = compare_lib.compare(
                loaded.runs, args.metric or objective, (objective, *compare_lib.TRIAL_METRICS)
            )
        else:
            loaded = compare_lib.load_runs(mlflow_client, args.experiment, args.last, run_ids, include_all=args.all)
            if not loaded.runs:
                what = "runs" if args.all else f"runs that trained a model ({loaded.skipped} others; --all lists them)"
                raise ValueError(f"--experiment {args.experiment}: no {what} yet in {uri}")
            comparison = compare_lib.compare(loaded.runs, args.metric)
        metric = comparison.best_metric
        print(compare_lib.as_text(comparison))
        if loaded.skipped:
            print(
                f"({loaded.skipped} more recent run(s) left out: refused or failed before training; --all lists them)"
            )
        for path, render in ((args.csv, compare_lib.as_csv), (args.markdown, compare_lib.as_markdown)):
            if path:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(render(comparison))
                print(f"wrote {path}")
        if args.plot:
            curves = compare_lib.validation_curves(mlflow_client, comparison.runs, metric)
            compare_lib.plot(comparison, metric, args.plot, curves)
            print(f"wrote {args.plot}")
    except (ValueError, TrackingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    return 0
