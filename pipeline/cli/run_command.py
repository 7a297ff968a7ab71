"""`tfxflow run`: the flags of a local run, turned into a RunConfig and handed to pipeline/local/run.py."""

from __future__ import annotations

import argparse
import os
import sys

from tfxflow.components import settings
from tfxflow.components.names import DEFAULT_KEEP_VERSIONS
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline import paths as paths_lib
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import PipelineSettings
from tfxflow.pipeline.local import run as local_run

HELP = "run the pipeline locally with LocalDagRunner"


def add_parser(sub) -> None:
    run = sub.add_parser("run", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    paths = run.add_argument_group("data and outputs")
    paths.add_argument("--home", metavar="DIR", help=f"folder for every output {common.HOME_HELP}")
    common.add_pipeline_settings(paths, only=("dataset",))
    paths.add_argument(
        "--data-root", metavar="DIR", help="folder of CSV files (default: the taxi CSV inside the tfx package)"
    )
    common.add_pipeline_settings(
        paths, only=("schema_path", "feature_config_path", "module_file", "pipeline_name", "model_name")
    )
    paths.add_argument("--pipeline-root", metavar="DIR", help="TFX's artifacts (default: <home>/pipeline_root)")
    common.add_metadata_path(paths)
    paths.add_argument("--serving-dir", metavar="DIR", help="TF Serving model base (default: <home>/serving)")
    paths.add_argument(
        "--keep-versions",
        type=int,
        default=DEFAULT_KEEP_VERSIONS,
        metavar="N",
        help="model versions kept in the serving directory (the newest; at least 2)",
    )
    common.add_training_args(run)
    evaluation = run.add_argument_group("evaluation")
    common.add_evaluation_args(evaluation)
    common.add_pipeline_settings(evaluation, only=("allowed_anomaly_types", "serving_data_root", "drift_check"))
    track = run.add_argument_group("tracking (MLflow)")
    common.add_pipeline_settings(track, only=("mlflow_uri", "experiment", "tracking", "tracking_wait"))
    execution = run.add_argument_group("execution")
    common.add_beam_args(execution, kubeflow=False)
    execution.add_argument("--no-cache", action="store_true", help="re-run every component")
    execution.add_argument(
        "--force",
        action="store_true",
        help="run through TFX even when nothing changed since the last run (components cached)",
    )
    execution.add_argument(
        "--wait-for-lock",
        type=float,
        default=0,
        metavar="SECONDS",
        help="when another run of the same metadata store is in progress, wait up to this long for "
        "it to finish (default: refuse at once)",
    )


def main(args: argparse.Namespace) -> int:
    try:
        training = common.training_config(args)
        beam, beam_mode, beam_workers = common.beam_runner(args, kubeflow=False)
        shared = settings.from_args(PipelineSettings, args)
    except ValueError as err:  # ConfigError names the flag
        print(f"error: {err}", file=sys.stderr)
        return local_run.EXIT_CONFIG_ERROR
    home = paths_lib.resolve_home(args.home, os.environ)
    log_file = local_run.start_log(home)
    if log_file is None:
        return local_run.EXIT_CONFIG_ERROR
    from tfxflow.pipeline.local.runner import stderr_to  # as run.py: the runner imports ML Metadata

    try:
        # With --init-checkpoint these checks import TensorFlow, whose native code writes to file descriptor 2 as
        # it loads ("Unable to register cuFFT factory"): that goes to the log with the run's other chatter.
        with stderr_to(log_file):
            config = config_lib.build_run_config(
                environ=os.environ,
                home=home,
                dataset=shared.dataset,
                data_root=args.data_root,
                schema_path=shared.schema_path,
                feature_config_path=shared.feature_config_path,
                pipeline_name=shared.pipeline_name,
                model_name=shared.model_name,
                pipeline_root=args.pipeline_root,
                metadata_path=args.metadata_path,
                serving_dir=args.serving_dir,
                training=training,
                evaluation=common.evaluation_config(args),
                tuning=common.tuning_config(args),
                beam_mode=beam_mode,
                beam_workers=beam_workers,
                beam=beam,
                enable_cache=not args.no_cache,
                allowed_anomaly_types=shared.allowed_anomaly_types,
                drift_check=shared.drift_check,
                serving_data_root=shared.serving_data_root,
                tracking_uri=shared.mlflow_uri,
                tracking_mode=shared.tracking,
                tracking_wait_s=shared.tracking_wait,
                experiment=shared.experiment,
                keep_versions=args.keep_versions,
                module_file=shared.module_file,
            )
    except ValueError as err:  # ConfigError and FeatureConfigError name the flag or file at fault
        print(f"error: {err}", file=sys.stderr)
        return local_run.EXIT_CONFIG_ERROR
    return local_run.run(config, log_file, force=args.force, wait_for_lock=args.wait_for_lock)
