"""`tfxflow` command line: `tfxflow run` runs the pipeline locally; `tfxflow infer-schema` drafts a schema,
statistics and a feature config from a CSV folder for curation."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import os
import sys
from typing import List, Optional

from components.hardware import PRECISIONS, HardwareConfig
from components.presets import PRESETS
from pipeline.config import (BEAM_MODES, DEFAULT_DATASET, HOME_ENV, TRACKING_MODES, EvaluationConfig,
                             TrainingConfig)


EXIT_CONFIG_ERROR = 2
EXIT_DATA_GATE = 3  # the data was refused: bad CSV files or anomalies


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfxflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the pipeline locally with LocalDagRunner",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    paths = run.add_argument_group("data and outputs")
    paths.add_argument("--home", help=f"folder for every output (default: ${HOME_ENV}, else ./tfxflow_home)")
    paths.add_argument("--dataset", default=DEFAULT_DATASET,
                       help="name of the schemas/<dataset>/ folder; also names the pipeline and the model")
    paths.add_argument("--data-root", help="folder of CSV files (default: the taxi CSV inside the tfx package)")
    paths.add_argument("--schema", dest="schema_path", help="curated schema (default: schemas/<dataset>/schema.pbtxt)")
    paths.add_argument("--feature-config", dest="feature_config_path",
                       help="feature config YAML (default: schemas/<dataset>/features.yaml)")
    paths.add_argument("--pipeline-name", help="default: tfxflow-<dataset>")
    paths.add_argument("--model-name", help="serving model name (default: <dataset>)")
    paths.add_argument("--pipeline-root", help="default: <home>/pipeline_root")
    paths.add_argument("--metadata-path", help="MLMD SQLite file (default: <home>/metadata/metadata.sqlite)")
    paths.add_argument("--serving-dir", help="TF Serving model base (default: <home>/serving)")
    train = run.add_argument_group("training")
    defaults = TrainingConfig()
    train.add_argument("--train-steps", type=int, default=defaults.train_steps)
    train.add_argument("--eval-steps", type=int, default=defaults.eval_steps, help="0: a full pass over the eval split")
    train.add_argument("--batch-size", type=int, default=defaults.batch_size)
    train.add_argument("--eval-every-steps", type=int, default=defaults.eval_every_steps,
                       help="validate after this many steps (one Keras epoch)")
    train.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    train.add_argument("--model-preset", choices=sorted(PRESETS), default=defaults.model_preset,
                       help="default: sized for the taxi data; large: wide layers for GPU benchmarks")
    train.add_argument("--hidden-units", help="comma-separated layer sizes (default: the preset's)")
    train.add_argument("--dropout", type=float, default=defaults.dropout)
    train.add_argument("--grad-accum-steps", type=int, default=defaults.grad_accum_steps,
                       help="accumulate gradients over this many micro-batches of --batch-size per update")
    train.add_argument("--early-stopping-patience", type=int, default=defaults.early_stopping_patience,
                       help="epochs without val_loss improvement before stopping; 0: off")
    train.add_argument("--seed", type=int, default=defaults.seed)
    hw = run.add_argument_group("hardware")
    hw_defaults = HardwareConfig()
    hw.add_argument("--precision", choices=PRECISIONS, default=hw_defaults.precision,
                    help="auto: mixed_float16 on GPUs of compute capability >= 7.0, else float32")
    hw.add_argument("--xla", action="store_true", help="compile the train step with XLA (jit_compile)")
    hw.add_argument("--steps-per-execution", type=int, default=hw_defaults.steps_per_execution)
    hw.add_argument("--visible-gpus", help="comma-separated GPU indices (default: all)")
    hw.add_argument("--gpu-memory-limit-mb", type=int, help="cap each GPU's memory (default: grow as needed)")
    hw.add_argument("--no-memory-growth", action="store_true", help="let TensorFlow reserve all GPU memory")
    hw.add_argument("--cpu-replicas", type=int, default=hw_defaults.cpu_replicas,
                    help="with no GPU, mirror over this many logical CPU devices")
    evaluation = run.add_argument_group("evaluation")
    evaluation.add_argument("--min-accuracy", type=float, default=EvaluationConfig().min_value,
                            help="blessing needs binary_accuracy at least this")
    evaluation.add_argument("--allow-anomaly", action="append", default=[], metavar="TYPE",
                            help="an anomaly type (e.g. FEATURE_TYPE_LOW_NUMBER_VALUES) that does not stop the "
                                 "run; repeatable")
    evaluation.add_argument("--slice-by", action="append", default=[], metavar="COLUMN",
                            help="also evaluate per value of this column (repeatable)")
    evaluation.add_argument("--serving-data", metavar="DIR",
                            help="CSV files of serving requests (no label): validated against the schema's SERVING "
                                 "environment and compared with the training data (skew)")
    evaluation.add_argument("--no-drift-check", action="store_true",
                            help="do not compare the data with the data of the last blessed model")
    evaluation.add_argument("--max-regression", type=float, default=EvaluationConfig().max_regression,
                            help="blessing allows at most this drop vs. the last blessed model")
    track = run.add_argument_group("tracking (MLflow)")
    track.add_argument("--mlflow-uri", help="tracking server or store (default: $MLFLOW_TRACKING_URI, else "
                                            "sqlite:///<home>/mlflow/mlflow.db)")
    track.add_argument("--experiment", help="MLflow experiment (default: the pipeline name)")
    track.add_argument("--tracking", choices=TRACKING_MODES, default="required",
                       help="required: stop before any work if the store does not answer; optional: run untracked "
                            "then; off: do not track")
    beam = run.add_argument_group("execution")
    beam.add_argument("--beam-mode", choices=BEAM_MODES, default="in_memory")
    beam.add_argument("--beam-workers", type=int, default=1, help="0: one per core")
    beam.add_argument("--no-cache", action="store_true", help="re-run every component")

    cmp = sub.add_parser("compare", help="compare MLflow runs: the params that differ, key metrics, the best",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    cmp.add_argument("--home", help=f"finds the embedded store (default: ${HOME_ENV}, else ./tfxflow_home)")
    cmp.add_argument("--mlflow-uri", help="tracking server or store (default: $MLFLOW_TRACKING_URI, else the "
                                          "embedded store under --home)")
    cmp.add_argument("--experiment", default=f"tfxflow-{DEFAULT_DATASET}")
    cmp.add_argument("--last", type=int, default=5, help="the last N runs")
    cmp.add_argument("--runs", help="comma-separated MLflow run ids instead of --last")
    cmp.add_argument("--metric", default="eval.binary_accuracy", help="marks the best run; the metric plotted")
    cmp.add_argument("--csv", help="also write the table as CSV to this file")
    cmp.add_argument("--markdown", help="also write the table as Markdown to this file")
    cmp.add_argument("--plot", help="write a PNG bar chart of --metric across the runs to this file")

    infer = sub.add_parser("infer-schema", help="infer a schema, statistics and a feature config from CSV files",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    infer.add_argument("--data-root", required=True, help="folder of CSV files")
    infer.add_argument("--out", required=True, help="folder to write schema.pbtxt, inferred_schema.pbtxt, "
                                                     "statistics.pb and features.yaml into")
    infer.add_argument("--label", help="label column: marked absent at serving, drafted as the label")
    infer.add_argument("--force", action="store_true", help="overwrite an existing schema.pbtxt and features.yaml")
    return parser


def _int_list(text: Optional[str], flag: str) -> Optional[tuple]:
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers, got '{text}'") from None


def _run(args: argparse.Namespace) -> int:
    from pipeline import config as config_lib
    from pipeline.local_runner import configure_logging, run_local, stderr_to

    try:
        hidden_units = _int_list(args.hidden_units, "--hidden-units")
        visible_gpus = _int_list(args.visible_gpus, "--visible-gpus")
        hardware = HardwareConfig(
            precision=args.precision, memory_growth=not args.no_memory_growth,
            gpu_memory_limit_mb=args.gpu_memory_limit_mb, visible_gpus=visible_gpus,
            cpu_replicas=args.cpu_replicas, xla=args.xla, steps_per_execution=args.steps_per_execution)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    home = config_lib.resolve_home(args.home, os.environ)
    log_file = os.path.join(config_lib.Paths.under(home).log_dir, f"run-{stamp}.log")
    configure_logging(log_file)
    try:
        config = config_lib.build_run_config(
            environ=os.environ, home=home, dataset=args.dataset, data_root=args.data_root,
            schema_path=args.schema_path, feature_config_path=args.feature_config_path,
            pipeline_name=args.pipeline_name, model_name=args.model_name, pipeline_root=args.pipeline_root,
            metadata_path=args.metadata_path, serving_dir=args.serving_dir,
            training=TrainingConfig(
                train_steps=args.train_steps, eval_steps=args.eval_steps, batch_size=args.batch_size,
                eval_every_steps=args.eval_every_steps, learning_rate=args.learning_rate,
                model_preset=args.model_preset, hidden_units=hidden_units, dropout=args.dropout,
                grad_accum_steps=args.grad_accum_steps, early_stopping_patience=args.early_stopping_patience,
                seed=args.seed, hardware=hardware),
            evaluation=EvaluationConfig(min_value=args.min_accuracy, max_regression=args.max_regression,
                                        slice_columns=tuple(args.slice_by)),
            beam_mode=args.beam_mode, beam_workers=args.beam_workers, enable_cache=not args.no_cache,
            allowed_anomaly_types=tuple(args.allow_anomaly),
            drift_check=not args.no_drift_check, serving_data_root=args.serving_data,
            tracking_uri=args.mlflow_uri, tracking_mode=args.tracking, experiment=args.experiment,
        )
    except ValueError as err:  # ConfigError and FeatureConfigError name the flag or file at fault
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    tracking_line = "off"
    if config.tracking_uri:
        from pipeline.tracking_store import TrackingError, check_tracking

        try:
            tracking_line = check_tracking(config.tracking_uri)
        except TrackingError as err:
            if config.tracking_mode == "required":
                print(f"error: {err}", file=sys.stderr)
                return EXIT_CONFIG_ERROR
            print(f"warning: {err}; the run is not tracked (--tracking optional)", file=sys.stderr)
            config = dataclasses.replace(config, tracking_uri=None)
            tracking_line = "off (the store did not answer)"

    print(f"tfxflow: pipeline {config.pipeline_name}\n  data:    {config.data_root}\n"
          f"  schema:  {config.schema_path}\n  home:    {config.paths.home}\n  log:     {log_file}\n"
          f"  mlflow:  {tracking_line}\n", flush=True)
    try:
        with stderr_to(log_file):
            run_local(config)
    except Exception as err:  # pylint: disable=broad-except
        # The traceback goes to the log file; the console gets the error and where to look.
        logging.getLogger(__name__).exception("run failed")
        from components.errors import DataError

        if isinstance(err, DataError):
            print(f"\n{err}\n  serving directory untouched: {config.paths.serving_dir}\n  full log: {log_file}",
                  file=sys.stderr)
            return EXIT_DATA_GATE
        first_line = (str(err).strip().splitlines() or [""])[0]
        print(f"\nerror: the run failed: {type(err).__name__}: {first_line}\n  full log: {log_file}",
              file=sys.stderr)
        return 1
    return 0


def _infer_schema(args: argparse.Namespace) -> int:
    from components.errors import DataError
    from pipeline import schema_tool
    from pipeline.local_runner import stderr_to

    log_file = os.path.join(args.out, "infer-schema.log")
    os.makedirs(args.out, exist_ok=True)
    try:
        with stderr_to(log_file):
            result = schema_tool.infer(os.path.abspath(args.data_root), args.out, args.label, args.force)
    except ValueError as err:  # ConfigError: the flag and folder at fault
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except DataError as err:
        print(f"{err}", file=sys.stderr)
        return EXIT_DATA_GATE
    print(f"tfxflow: {result.rows:,} rows, {len(result.columns)} columns: "
          + ", ".join(f"{name} {kind}" for name, kind in result.columns.items()))
    for path in result.written:
        print(f"  wrote {path}")
    for path in result.kept:
        print(f"  kept  {path} (exists; --force overwrites it)")
    print(f"Next: curate {os.path.join(args.out, 'schema.pbtxt')} (domains, ranges, presence, comparators) and "
          f"features.yaml, then\n  tfxflow run --data-root {args.data_root} "
          f"--schema {os.path.join(args.out, 'schema.pbtxt')} "
          f"--feature-config {os.path.join(args.out, 'features.yaml')}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pipeline import compare as compare_lib
    from pipeline import config as config_lib
    from pipeline.tracking_store import TrackingError, check_tracking, resolve_tracking_uri

    uri = resolve_tracking_uri(args.mlflow_uri, os.environ, config_lib.resolve_home(args.home, os.environ))
    try:
        if uri.startswith("sqlite:///") and not os.path.exists(uri[len("sqlite:///"):]):
            raise ValueError(f"no MLflow store at {uri}: run the pipeline first, or pass --home or --mlflow-uri")
        check_tracking(uri)
        from mlflow import MlflowClient

        run_ids = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
        runs = compare_lib.load_runs(MlflowClient(uri), args.experiment, args.last, run_ids)
        if not runs:
            raise ValueError(f"--experiment {args.experiment}: no runs yet in {uri}")
        comparison = compare_lib.compare(runs, args.metric)
        print(compare_lib.as_text(comparison))
        for path, render in ((args.csv, compare_lib.as_csv), (args.markdown, compare_lib.as_markdown)):
            if path:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(render(comparison))
                print(f"wrote {path}")
        if args.plot:
            compare_lib.plot(comparison, args.metric, args.plot)
            print(f"wrote {args.plot}")
    except (ValueError, TrackingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `tfxflow` console script."""
    # Quiets TensorFlow's C++ start-up chatter; must be set before TensorFlow is imported.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "infer-schema":
        return _infer_schema(args)
    if args.command == "compare":
        return _compare(args)
    return EXIT_CONFIG_ERROR


def console_main() -> None:
    """The console script: runs `main`, then leaves without TensorFlow's noisy interpreter teardown."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    # TF 2.16 raises ignored exceptions from AtomicFunction.__del__ while the interpreter tears down.
    os._exit(code)  # pylint: disable=protected-access


if __name__ == "__main__":
    console_main()
