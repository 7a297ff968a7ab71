"""What several subcommands share: the help formatter, deprecated spellings, and the flags of the settings
`run` and `kubeflow compile` both take (declared once in pipeline/config.py and components/training/hardware.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, Optional, Tuple

from tfxflow.components import settings
from tfxflow.components.training.cluster import ClusterConfig
from tfxflow.components.training.hardware import HardwareConfig
from tfxflow.pipeline import beam_runners
from tfxflow.pipeline.beam_runners import BEAM_MODES, ENVIRONMENT_TYPES, RUNNERS
from tfxflow.pipeline.config import (
    EvaluationConfig,
    PipelineSettings,
    RunConfig,
    TrainingConfig,
    TuningConfig,
)
from tfxflow.pipeline.paths import HOME_ENV

HOME_HELP = f"(default: ${HOME_ENV}, else ./tfxflow_home)"


def add_metadata_path(parser) -> None:
    """--metadata-path, as every command that reads a home's ML Metadata store spells it."""
    parser.add_argument(
        "--metadata-path", metavar="FILE", help="MLMD SQLite file (default: <home>/metadata/metadata.sqlite)"
    )


def add_pipeline_name(parser) -> None:
    """--pipeline-name of the commands that look a pipeline's runs up (`run` and `compile` declare their own)."""
    parser.add_argument("--pipeline-name", metavar="NAME", help="pipeline name (default: tfxflow-<dataset>)")


def add_mlflow_uri(parser) -> None:
    """--mlflow-uri of the commands that read a home's MLflow store."""
    parser.add_argument(
        "--mlflow-uri",
        metavar="URI",
        help="tracking server or store (default: $MLFLOW_TRACKING_URI, else the embedded store under --home)",
    )


class HelpFormatter(argparse.HelpFormatter):
    """States each option's default once: as `(default: X)` after the help, unless the help already says what
    the default is, and not at all where there is nothing to state (a switch, None, an empty value). A
    required option says it is required instead."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or text == argparse.SUPPRESS:
            return text
        if action.required:
            return f"{text} (required)" if text else "(required)"
        default = action.default
        if (
            "(default" in text
            or default in (None, argparse.SUPPRESS)
            or isinstance(default, bool)
            or default in ("", [], ())
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: stores its value under the new flag's dest and warns on stderr."""

    def __init__(self, option_strings, dest, instead: str, **kwargs):
        self.instead = instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"warning: {option_string} is deprecated here, use {self.instead}; "
            f"{option_string} goes in the next release",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_pipeline_settings(parser, only, **kwargs) -> None:
    """The flags of `PipelineSettings` named in `only` (its field names)."""
    settings.add_arguments(parser, PipelineSettings, only=only, **kwargs)


def add_evaluation_args(group) -> None:
    settings.add_arguments(group, EvaluationConfig)
    group.add_argument(
        "--min-accuracy",
        dest="threshold",
        type=float,
        metavar="X",
        action=DeprecatedAlias,
        instead="--blessing-threshold",
        help="deprecated spelling of --blessing-threshold",
    )


def evaluation_config(args: argparse.Namespace) -> EvaluationConfig:
    return settings.from_args(EvaluationConfig, args)


def add_training_args(parser: argparse.ArgumentParser) -> None:
    """The Trainer's and the hardware's flags, shared by `run` and `kubeflow compile`."""
    settings.add_arguments(parser.add_argument_group("training"), TrainingConfig)
    settings.add_arguments(parser.add_argument_group("hardware"), HardwareConfig)
    settings.add_arguments(parser.add_argument_group("several workers"), ClusterConfig)
    settings.add_arguments(parser.add_argument_group("tuning"), TuningConfig)


def tuning_config(args: argparse.Namespace) -> TuningConfig:
    return settings.from_args(TuningConfig, args)


def training_config(args: argparse.Namespace) -> TrainingConfig:
    """The TrainingConfig of the flags `add_training_args` adds; raises ValueError naming the flag."""
    return settings.from_args(
        TrainingConfig,
        args,
        hardware=settings.from_args(HardwareConfig, args),
        cluster=settings.from_args(ClusterConfig, args),
    )


def _direct_defaults(kubeflow: bool) -> Tuple[str, int]:
    """(beam_mode, beam_workers) of the DirectRunner by default: the config's field defaults (a local run: in
    memory, one worker; a Kubeflow step: multi_processing, one worker per core of its pod)."""
    if kubeflow:
        # kept out of `tfxflow --help`'s import
        from tfxflow.pipeline.kfp.compiler import KubeflowConfig as config_class
    else:
        config_class = RunConfig
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    return defaults["beam_mode"], defaults["beam_workers"]


def add_beam_args(group, kubeflow: bool) -> None:
    """The Beam runner's flags, shared by `run` and `kubeflow compile` (pipeline/beam_runners.py)."""
    group.add_argument(
        "--beam-runner",
        choices=RUNNERS,
        default="direct",
        help="where every Beam component runs: Beam's DirectRunner in the process"
        + (" of each step" if kubeflow else "")
        + ", a portable job service, a Flink or Spark cluster, or Dataflow",
    )
    mode, workers = _direct_defaults(kubeflow)
    group.add_argument("--beam-mode", choices=BEAM_MODES, help=f"direct: the DirectRunner's mode (default: {mode})")
    group.add_argument(
        "--beam-workers",
        type=int,
        metavar="N",
        help=f"direct: its workers, 0: one per core{' of the step' + chr(39) + 's pod' if kubeflow else ''} "
        f"(default: {workers})",
    )
    group.add_argument(
        "--job-endpoint",
        metavar="HOST:PORT",
        help="portable: a Beam job server (default: 'embed', Beam's in-process job service)",
    )
    group.add_argument(
        "--environment-type",
        choices=ENVIRONMENT_TYPES,
        help="portable, flink, spark: where the workers run the Python code: LOOPBACK in this process "
        "(default with 'embed'), DOCKER the --beam-image on each worker node (the default otherwise), "
        "EXTERNAL a worker pool, PROCESS a command on each node",
    )
    group.add_argument(
        "--environment-config",
        metavar="CONFIG",
        help="EXTERNAL: the worker pool's host:port; PROCESS: '{\"command\": ...}'; "
        "DOCKER: the image (as --beam-image)",
    )
    group.add_argument(
        "--beam-image",
        metavar="IMAGE",
        help="the image the workers run, with this package installed (kubeflow/Dockerfile)"
        + (" (default: --image)" if kubeflow else ""),
    )
    group.add_argument("--flink-master", metavar="HOST:PORT", help="flink: the JobManager's REST endpoint")
    group.add_argument(
        "--flink-parallelism", type=int, default=0, metavar="N", help="flink: parallelism (0: as the cluster sets it)"
    )
    group.add_argument("--spark-master-url", metavar="spark://HOST:PORT", help="spark: the master")
    group.add_argument("--dataflow-project", metavar="PROJECT", help="dataflow: the Google Cloud project")
    group.add_argument("--dataflow-region", metavar="REGION", help="dataflow: the region, e.g. us-central1")
    group.add_argument(
        "--dataflow-temp-location",
        metavar="gs://BUCKET/PATH",
        help="dataflow: where Dataflow stages and writes temporary files",
    )
    group.add_argument(
        "--dataflow-machine-type", metavar="TYPE", help="dataflow: the workers' machine type (default: Dataflow's)"
    )
    group.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="--OPTION=VALUE",
        help="any other Beam option, passed as is (repeatable; write --beam-arg=--max_num_workers=8)",
    )


def beam_runner(args: argparse.Namespace, kubeflow: bool) -> Tuple[Any, str, int]:
    """(BeamRunner, beam_mode, beam_workers) of the flags; the DirectRunner's defaults are the command's
    (Kubeflow: multi_processing, one worker per core of the pod). Raises ConfigError naming the flag."""
    direct_mode, direct_workers = _direct_defaults(kubeflow)
    image = args.beam_image or ""
    runner = beam_runners.BeamRunner(
        runner=args.beam_runner,
        direct_mode=args.beam_mode,
        direct_workers=args.beam_workers,
        job_endpoint=args.job_endpoint or "",
        environment_type=args.environment_type or "",
        environment_config=args.environment_config or "",
        image=image,
        flink_master=args.flink_master or "",
        parallelism=args.flink_parallelism,
        spark_master_url=args.spark_master_url or "",
        project=args.dataflow_project or "",
        region=args.dataflow_region or "",
        temp_location=args.dataflow_temp_location or "",
        machine_type=args.dataflow_machine_type or "",
        extra_args=tuple(args.beam_arg),
    )
    if runner.runner == "direct":
        runner = dataclasses.replace(
            runner,
            direct_mode=args.beam_mode or direct_mode,
            direct_workers=direct_workers if args.beam_workers is None else args.beam_workers,
        )
    elif (
        kubeflow
        and not image
        and runner.workers_are_remote
        and not (runner.environment_config and beam_runners.resolved_environment_type(runner) == "DOCKER")
    ):
        runner = dataclasses.replace(runner, image=args.image)  # the steps' image, which has the package
    beam_runners.check(runner)
    return (
        runner,
        runner.direct_mode or direct_mode,
        direct_workers if runner.direct_workers is None else runner.direct_workers,
    )


def pipeline_name(args: argparse.Namespace, dataset: Optional[str] = None) -> str:
    """--pipeline-name, else tfxflow-<dataset>."""
    return args.pipeline_name or f"tfxflow-{dataset or args.dataset}"
