"""`tfxflow` command line: `tfxflow run` runs the pipeline locally; `tfxflow infer-schema` drafts a schema,
statistics and a feature config from a CSV folder for curation; `tfxflow accept-data` makes data the drift check
refused the new baseline; `tfxflow rollback` serves an earlier pushed model again; `tfxflow compare` compares
MLflow runs; `tfxflow kubeflow` compiles, submits and schedules the pipeline on Kubeflow Pipelines."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import os
import signal
import sys
from typing import List, Optional

from tfxflow.components.model.hardware import PRECISIONS, HardwareConfig
from tfxflow.components.model.presets import PRESETS
from tfxflow.pipeline.config import (
    BEAM_MODES,
    DEFAULT_DATASET,
    HOME_ENV,
    TRACKING_MODES,
    EvaluationConfig,
    TrainingConfig,
)
from tfxflow.pipeline.local import run_guard

EXIT_CONFIG_ERROR = 2
EXIT_DATA_GATE = 3  # the data was refused: bad CSV files or anomalies
EXIT_BUSY = 4  # another run holds this metadata store
EXIT_TERMINATED = 143  # SIGTERM or Ctrl-C: the run stopped, finished components stay cached


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so the run cleans up as it would on Ctrl-C."""

    def __str__(self) -> str:
        return "stopped by SIGTERM"


def _raise_terminated(signum, frame):  # pylint: disable=unused-argument
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated()


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, but not None: such a flag's help says what happens without it."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfxflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the pipeline locally with LocalDagRunner", formatter_class=_DefaultsShown)
    paths = run.add_argument_group("data and outputs")
    paths.add_argument("--home", help=f"folder for every output (default: ${HOME_ENV}, else ./tfxflow_home)")
    paths.add_argument(
        "--dataset",
        default=DEFAULT_DATASET,
        help="name of the schemas/<dataset>/ folder; also names the pipeline and the model",
    )
    paths.add_argument("--data-root", help="folder of CSV files (default: the taxi CSV inside the tfx package)")
    paths.add_argument("--schema", dest="schema_path", help="curated schema (default: schemas/<dataset>/schema.pbtxt)")
    paths.add_argument(
        "--feature-config",
        dest="feature_config_path",
        help="feature config YAML (default: schemas/<dataset>/features.yaml)",
    )
    paths.add_argument("--pipeline-name", help="default: tfxflow-<dataset>")
    paths.add_argument("--model-name", help="serving model name (default: <dataset>)")
    paths.add_argument("--pipeline-root", help="default: <home>/pipeline_root")
    paths.add_argument("--metadata-path", help="MLMD SQLite file (default: <home>/metadata/metadata.sqlite)")
    paths.add_argument("--serving-dir", help="TF Serving model base (default: <home>/serving)")
    paths.add_argument(
        "--keep-versions",
        type=int,
        default=5,
        help="model versions kept in the serving directory (the newest; at least 2)",
    )
    _add_training_args(run)
    evaluation = run.add_argument_group("evaluation")
    evaluation.add_argument(
        "--min-accuracy",
        type=float,
        default=EvaluationConfig().min_value,
        help="blessing needs binary_accuracy at least this",
    )
    evaluation.add_argument(
        "--allow-anomaly",
        action="append",
        default=[],
        metavar="TYPE",
        help="an anomaly type (e.g. FEATURE_TYPE_LOW_NUMBER_VALUES) that does not stop the run; repeatable",
    )
    evaluation.add_argument(
        "--slice-by",
        action="append",
        default=[],
        metavar="COLUMN",
        help="also evaluate per value of this column (repeatable)",
    )
    evaluation.add_argument(
        "--eval-max-rows",
        type=int,
        default=EvaluationConfig().max_rows,
        metavar="N",
        help="a larger eval split is evaluated on every k-th row, at most N (0: all rows)",
    )
    evaluation.add_argument(
        "--max-latency-ms",
        type=float,
        default=EvaluationConfig().max_latency_ms,
        metavar="MS",
        help="the serving check refuses to push a model whose p99 latency for single requests "
        "is above this (0: no bound)",
    )
    evaluation.add_argument(
        "--serving-data",
        metavar="DIR",
        help="CSV files of serving requests (no label): validated against the schema's SERVING "
        "environment and compared with the training data (skew)",
    )
    evaluation.add_argument(
        "--no-drift-check", action="store_true", help="do not compare the data with the data of the last blessed model"
    )
    evaluation.add_argument(
        "--max-regression",
        type=float,
        default=EvaluationConfig().max_regression,
        help="blessing allows at most this drop vs. the last blessed model",
    )
    track = run.add_argument_group("tracking (MLflow)")
    track.add_argument(
        "--mlflow-uri",
        help="tracking server or store (default: $MLFLOW_TRACKING_URI, else sqlite:///<home>/mlflow/mlflow.db)",
    )
    track.add_argument("--experiment", help="MLflow experiment (default: the pipeline name)")
    track.add_argument(
        "--tracking",
        choices=TRACKING_MODES,
        default="required",
        help="required: stop before any work if the store does not answer; optional: run untracked "
        "then; off: do not track",
    )
    beam = run.add_argument_group("execution")
    _add_beam_args(beam, kubeflow=False)
    beam.add_argument("--no-cache", action="store_true", help="re-run every component")
    beam.add_argument(
        "--force",
        action="store_true",
        help="run through TFX even when nothing changed since the last run (components cached)",
    )
    beam.add_argument(
        "--wait-for-lock",
        type=float,
        default=0,
        metavar="SECONDS",
        help="when another run of the same metadata store is in progress, wait up to this long for "
        "it to finish (default: refuse at once)",
    )

    cmp = sub.add_parser(
        "compare",
        help="compare MLflow runs: the params that differ, key metrics, the best",
        formatter_class=_DefaultsShown,
    )
    cmp.add_argument("--home", help=f"finds the embedded store (default: ${HOME_ENV}, else ./tfxflow_home)")
    cmp.add_argument(
        "--mlflow-uri",
        help="tracking server or store (default: $MLFLOW_TRACKING_URI, else the embedded store under --home)",
    )
    cmp.add_argument("--experiment", default=f"tfxflow-{DEFAULT_DATASET}")
    cmp.add_argument("--last", type=int, default=5, help="the last N runs")
    cmp.add_argument("--runs", help="comma-separated MLflow run ids instead of --last")
    cmp.add_argument("--metric", default="eval.binary_accuracy", help="marks the best run; the metric plotted")
    cmp.add_argument("--csv", help="also write the table as CSV to this file")
    cmp.add_argument("--markdown", help="also write the table as Markdown to this file")
    cmp.add_argument("--plot", help="write a PNG bar chart of --metric across the runs to this file")

    infer = sub.add_parser(
        "infer-schema",
        help="infer a schema, statistics and a feature config from CSV files",
        formatter_class=_DefaultsShown,
    )
    infer.add_argument("--data-root", required=True, help="folder of CSV files")
    infer.add_argument(
        "--out",
        required=True,
        help="folder to write schema.pbtxt, inferred_schema.pbtxt, statistics.pb and features.yaml into",
    )
    infer.add_argument("--label", help="label column: marked absent at serving, drafted as the label")
    infer.add_argument("--force", action="store_true", help="overwrite an existing schema.pbtxt and features.yaml")

    accept = sub.add_parser(
        "accept-data",
        help="make the data of a run (default: the latest) the drift baseline, "
        "after the drift check refused it and you have looked at it",
    )
    accept.add_argument("--home", help=f"the run's home folder (default: ${HOME_ENV}, else ./tfxflow_home)")
    accept.add_argument("--metadata-path", help="MLMD SQLite file (default: <home>/metadata/metadata.sqlite)")
    accept.add_argument("--dataset", default=DEFAULT_DATASET, help="names the pipeline: tfxflow-<dataset>")
    accept.add_argument("--pipeline-name", help="default: tfxflow-<dataset>")
    accept.add_argument("--run", dest="run_id", help="the pipeline run whose data to accept (default: the latest)")
    accept.add_argument("--reason", default="", help="why, recorded in ML Metadata with who and when")

    back = sub.add_parser(
        "rollback",
        formatter_class=_DefaultsShown,
        help="serve an earlier pushed model again: copy it to a new, highest version (TF Serving "
        "switches to it), and keep the pipeline from pushing the rolled-back model again",
    )
    back.add_argument("--home", help=f"the runs' home folder (default: ${HOME_ENV}, else ./tfxflow_home)")
    back.add_argument(
        "--serving-dir", help="TF Serving model base, a folder or gs://, s3://, minio:// (default: <home>/serving)"
    )
    back.add_argument("--dataset", default=DEFAULT_DATASET, help="names the model and the pipeline")
    back.add_argument("--model-name", help="serving and registered model name (default: <dataset>)")
    back.add_argument(
        "--to",
        type=int,
        metavar="VERSION",
        help="the version to serve again (default: the newest earlier version holding another model "
        "that was not rolled back itself)",
    )
    back.add_argument("--reason", default="", help="why, recorded with who and when (serving log, MLflow, MLMD)")
    back.add_argument(
        "--mlflow-uri",
        help="tracking server or store (default: $MLFLOW_TRACKING_URI, else the embedded store under --home)",
    )
    back.add_argument("--metadata-path", help="MLMD SQLite file (default: <home>/metadata/metadata.sqlite)")
    back.add_argument("--pipeline-name", help="default: tfxflow-<dataset>")
    _add_kubeflow_parser(sub)
    return parser


def _add_kubeflow_parser(sub) -> None:
    kf = sub.add_parser("kubeflow", help="compile the pipeline for Kubeflow Pipelines; submit or schedule it")
    kf_sub = kf.add_subparsers(dest="kubeflow_command", required=True)
    fmt = _DefaultsShown
    comp = kf_sub.add_parser("compile", help="compile to a KFP v2 pipeline spec (YAML)", formatter_class=fmt)
    where = comp.add_argument_group("image and paths (object-store URIs, or paths on mounted volumes)")
    where.add_argument("--image", required=True, help="the project image (kubeflow/Dockerfile), pinned: repo/name:tag")
    where.add_argument(
        "--pipeline-root",
        required=True,
        help="gs://, s3:// or minio://, e.g. minio://mlpipeline/v2/artifacts (open-source Kubeflow)",
    )
    where.add_argument("--data-root", required=True, help="default of the data_root pipeline parameter")
    where.add_argument(
        "--serving-dir",
        help="TF Serving model base (default: <mount>/models on --serving-pvc, or "
        "<pipeline-root>/serving with --serving-pvc '')",
    )
    where.add_argument(
        "--serving-pvc",
        default="tf-serving-models",
        help="PersistentVolumeClaim of the serving directory (kubeflow/serving/); '': none",
    )
    where.add_argument("--serving-mount", default="/serving", help="where --serving-pvc is mounted")
    where.add_argument(
        "--data-pvc",
        default="",
        help="PersistentVolumeClaim holding --data-root and --serving-data when they are paths",
    )
    where.add_argument("--data-mount", default="/data", help="where --data-pvc is mounted")
    where.add_argument(
        "--s3-endpoint",
        default="",
        help="S3 endpoint of s3:// and minio:// locations (default for minio://: http://minio-service.kubeflow:9000)",
    )
    where.add_argument(
        "--object-store-secret",
        default="mlpipeline-minio-artifact",
        help="secret with the keys accesskey and secretkey for s3:// and minio:// ('': the pod's own identity)",
    )
    where.add_argument("--output", help="compiled file (default: ./<pipeline-name>.yaml)")
    data = comp.add_argument_group("data and model")
    data.add_argument("--dataset", default=DEFAULT_DATASET)
    data.add_argument(
        "--schema",
        dest="schema_path",
        help="curated schema (default: schemas/<dataset>/schema.pbtxt); its content is compiled into the spec",
    )
    data.add_argument("--feature-config", dest="feature_config_path")
    data.add_argument("--pipeline-name", help="default: tfxflow-<dataset>")
    data.add_argument("--model-name", help="default: <dataset>")
    data.add_argument(
        "--allow-anomaly",
        action="append",
        default=[],
        metavar="TYPE",
        help="default of the allowed_anomaly_types parameter (repeatable)",
    )
    data.add_argument("--serving-data", default="", help="default of the serving_data_root parameter")
    data.add_argument("--min-accuracy", type=float, default=EvaluationConfig().min_value)
    data.add_argument("--max-regression", type=float, default=EvaluationConfig().max_regression)
    data.add_argument("--slice-by", action="append", default=[], metavar="COLUMN")
    data.add_argument(
        "--eval-max-rows",
        type=int,
        default=EvaluationConfig().max_rows,
        metavar="N",
        help="a larger eval split is evaluated on every k-th row, at most N (0: all rows)",
    )
    data.add_argument(
        "--max-latency-ms",
        type=float,
        default=EvaluationConfig().max_latency_ms,
        metavar="MS",
        help="the serving check refuses to push a model whose p99 latency for single requests is "
        "above this (0: no bound)",
    )
    data.add_argument(
        "--no-drift-check", action="store_true", help="do not compare the data with the served model's training data"
    )
    _add_training_args(comp)
    k8s = comp.add_argument_group("cluster")
    k8s.add_argument("--gpus", type=int, default=1, help="GPUs the Trainer requests (0: none)")
    k8s.add_argument("--gpu-resource", default="nvidia.com/gpu", help="Kubernetes resource name of the GPU")
    k8s.add_argument("--trainer-cpu", default="4", help="CPUs of the Trainer (request and limit; '': none)")
    k8s.add_argument("--trainer-memory", default="16G", help="memory of the Trainer (request and limit)")
    k8s.add_argument("--step-cpu", default="2", help="CPUs of every other step (request and limit; '': none)")
    k8s.add_argument("--step-memory", default="8G", help="memory of every other step (request and limit)")
    k8s.add_argument(
        "--node-selector",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="Trainer node selector (repeatable), e.g. nvidia.com/gpu.present=true",
    )
    k8s.add_argument(
        "--toleration",
        action="append",
        default=[],
        metavar="KEY[=VALUE][:EFFECT]",
        help="Trainer toleration (repeatable), e.g. nvidia.com/gpu:NoSchedule",
    )
    _add_beam_args(comp.add_argument_group("Beam runner (pipeline/beam_runners.py)"), kubeflow=True)
    track = comp.add_argument_group("tracking (MLflow)")
    track.add_argument("--tracking", choices=("on", "off"), default="on")
    track.add_argument("--mlflow-uri", default="", help="$MLFLOW_TRACKING_URI of the tracking steps")
    track.add_argument(
        "--mlflow-secret",
        default="",
        help="Kubernetes secret whose keys (--mlflow-secret-key) become the tracking steps' environment",
    )
    track.add_argument(
        "--mlflow-secret-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a key of --mlflow-secret (repeatable; default: MLFLOW_TRACKING_URI)",
    )
    track.add_argument("--experiment", default="", help="MLflow experiment (default: the pipeline name)")
    check = kf_sub.add_parser("check", help="check a compiled spec against the open-source KFP backend's rules")
    check.add_argument("spec", help="the compiled file (YAML)")
    canary = kf_sub.add_parser(
        "serving-config",
        formatter_class=fmt,
        help="TF Serving's model config for a stable and a canary version (version labels)",
    )
    canary.add_argument("--model-name", default=DEFAULT_DATASET, help="the served model's name")
    canary.add_argument(
        "--base-path",
        help="the model's folder as TF Serving sees it (default: /serving/models/<model-name>, as kubeflow/serving/)",
    )
    canary.add_argument(
        "--serving-dir",
        help="a local serving directory to pick the versions from: the newest is the canary, the one before it stable",
    )
    canary.add_argument("--stable", type=int, help="the version most traffic keeps")
    canary.add_argument("--canary", type=int, help="the version on trial")
    canary.add_argument("--out", help="write the config here (default: print it)")
    for name, text in (
        ("submit", "start one run of a compiled pipeline"),
        ("schedule", "create or replace a recurring run of a compiled pipeline"),
        ("unschedule", "delete a recurring run"),
    ):
        cmd = kf_sub.add_parser(name, help=text, formatter_class=fmt)
        conn = cmd.add_argument_group("connection (never printed)")
        conn.add_argument("--host", help="KFP API endpoint (default: $KFP_HOST)")
        conn.add_argument("--namespace", help="profile namespace on multi-user Kubeflow (default: $KFP_NAMESPACE)")
        conn.add_argument("--token-file", help="file holding a bearer token (default: $KFP_TOKEN)")
        cmd.add_argument("--experiment", help="KFP experiment (default: the pipeline's name)")
        if name in ("submit", "schedule"):
            cmd.add_argument("--spec", required=True, help="the compiled file (tfxflow kubeflow compile)")
            cmd.add_argument(
                "--param",
                action="append",
                default=[],
                metavar="NAME=VALUE",
                help="pipeline parameter (repeatable): data_root, train_args, serving_data_root, allowed_anomaly_types",
            )
        if name == "submit":
            cmd.add_argument("--run-name", help="default: <pipeline>-<time>")
        else:
            cmd.add_argument("--name", required=True, help="the recurring run's name, unique in the experiment")
        if name == "schedule":
            cmd.add_argument("--cron", required=True, help="six fields, seconds first: '0 0 3 * * *' is 03:00 daily")
            cmd.add_argument("--max-concurrency", type=int, default=1)
            cmd.add_argument("--catchup", action="store_true", help="backfill missed intervals (default: no)")
        if name == "unschedule":
            cmd.add_argument("--pipeline-name", help="names the default experiment (default: tfxflow-taxi)")


def _add_beam_args(group, kubeflow: bool) -> None:
    """The Beam runner's flags, shared by `run` and `kubeflow compile` (pipeline/beam_runners.py)."""
    from tfxflow.pipeline.beam_runners import ENVIRONMENT_TYPES, RUNNERS

    group.add_argument(
        "--beam-runner",
        choices=RUNNERS,
        default="direct",
        help="where every Beam component runs: Beam's DirectRunner in the process"
        + (" of each step" if kubeflow else "")
        + ", a portable job service, a Flink or Spark "
        "cluster, or Dataflow",
    )
    mode, workers = ("multi_processing", "0: one per core of the step's pod") if kubeflow else ("in_memory", "1")
    group.add_argument("--beam-mode", choices=BEAM_MODES, help=f"direct: the DirectRunner's mode (default: {mode})")
    group.add_argument("--beam-workers", type=int, help=f"direct: its workers (default: {workers}; 0: one per core)")
    group.add_argument(
        "--job-endpoint",
        help="portable: host:port of a Beam job server, or 'embed' (default): Beam's in-process job service",
    )
    group.add_argument(
        "--environment-type",
        choices=ENVIRONMENT_TYPES,
        help="portable, flink, spark: where the workers run the Python code: LOOPBACK in this process "
        "(default with 'embed'), DOCKER the --beam-image on each worker node (default otherwise), "
        "EXTERNAL a worker pool, PROCESS a command on each node",
    )
    group.add_argument(
        "--environment-config",
        help="EXTERNAL: the worker pool's host:port; PROCESS: "
        "'{\"command\": ...}'; DOCKER: the image (as --beam-image)",
    )
    group.add_argument(
        "--beam-image",
        help="the image the workers run, with this package installed (kubeflow/"
        "Dockerfile)" + (" (default: --image)" if kubeflow else ""),
    )
    group.add_argument("--flink-master", metavar="HOST:PORT", help="flink: the JobManager's REST endpoint")
    group.add_argument("--flink-parallelism", type=int, default=0, help="flink: parallelism (0: the cluster's default)")
    group.add_argument("--spark-master-url", metavar="spark://HOST:PORT", help="spark: the master")
    group.add_argument("--dataflow-project", help="dataflow: the Google Cloud project")
    group.add_argument("--dataflow-region", help="dataflow: the region, e.g. us-central1")
    group.add_argument(
        "--dataflow-temp-location",
        metavar="gs://BUCKET/PATH",
        help="dataflow: where Dataflow stages and writes temporary files",
    )
    group.add_argument("--dataflow-machine-type", help="dataflow: the workers' machine type (default: Dataflow's)")
    group.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="--OPTION=VALUE",
        help="any other Beam option, passed as is (repeatable; write --beam-arg=--max_num_workers=8)",
    )


def _beam_runner(args: argparse.Namespace, kubeflow: bool):
    """(BeamRunner, beam_mode, beam_workers) of the flags; the DirectRunner's defaults are the command's
    (Kubeflow: multi_processing, one worker per core of the pod). Raises ConfigError naming the flag."""
    from tfxflow.pipeline import beam_runners

    direct_mode, direct_workers = ("multi_processing", 0) if kubeflow else ("in_memory", 1)
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


def _add_training_args(parser: argparse.ArgumentParser) -> None:
    """The Trainer's and the hardware's flags, shared by `run` and `kubeflow compile`."""
    train = parser.add_argument_group("training")
    defaults = TrainingConfig()
    train.add_argument("--train-steps", type=int, default=defaults.train_steps)
    train.add_argument(
        "--eval-steps", type=int, default=defaults.eval_steps, help="0: a pass over the eval split, at most 100 batches"
    )
    train.add_argument("--batch-size", type=int, default=defaults.batch_size)
    train.add_argument(
        "--eval-every-steps",
        type=int,
        default=defaults.eval_every_steps,
        help="validate after this many steps (one Keras epoch)",
    )
    train.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    train.add_argument(
        "--model-preset",
        choices=sorted(PRESETS),
        default=defaults.model_preset,
        help="default: sized for the taxi data; large: wide layers for GPU benchmarks",
    )
    train.add_argument("--hidden-units", help="comma-separated layer sizes (default: the preset's)")
    train.add_argument("--dropout", type=float, default=defaults.dropout)
    train.add_argument(
        "--grad-accum-steps",
        type=int,
        default=defaults.grad_accum_steps,
        help="accumulate gradients over this many micro-batches of --batch-size per update",
    )
    train.add_argument(
        "--early-stopping-patience",
        type=int,
        default=defaults.early_stopping_patience,
        help="epochs without val_loss improvement before stopping; 0: off",
    )
    train.add_argument("--seed", type=int, default=defaults.seed)
    hw = parser.add_argument_group("hardware")
    hw_defaults = HardwareConfig()
    hw.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=hw_defaults.precision,
        help="auto: mixed_float16 on GPUs of compute capability >= 7.0, else float32",
    )
    hw.add_argument("--xla", action="store_true", help="compile the train step with XLA (jit_compile)")
    hw.add_argument("--steps-per-execution", type=int, default=hw_defaults.steps_per_execution)
    hw.add_argument("--visible-gpus", help="comma-separated GPU indices (default: all)")
    hw.add_argument("--gpu-memory-limit-mb", type=int, help="cap each GPU's memory (default: grow as needed)")
    hw.add_argument("--no-memory-growth", action="store_true", help="let TensorFlow reserve all GPU memory")
    hw.add_argument(
        "--cpu-replicas",
        type=int,
        default=hw_defaults.cpu_replicas,
        help="with no GPU, mirror over this many logical CPU devices",
    )


def _int_list(text: Optional[str], flag: str) -> Optional[tuple]:
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers, got '{text}'") from None


def _training_config(args: argparse.Namespace) -> TrainingConfig:
    """The TrainingConfig of the flags `_add_training_args` adds; raises ValueError naming the flag."""
    hidden_units = _int_list(args.hidden_units, "--hidden-units")
    visible_gpus = _int_list(args.visible_gpus, "--visible-gpus")
    hardware = HardwareConfig(
        precision=args.precision,
        memory_growth=not args.no_memory_growth,
        gpu_memory_limit_mb=args.gpu_memory_limit_mb,
        visible_gpus=visible_gpus,
        cpu_replicas=args.cpu_replicas,
        xla=args.xla,
        steps_per_execution=args.steps_per_execution,
    )
    return TrainingConfig(
        train_steps=args.train_steps,
        eval_steps=args.eval_steps,
        batch_size=args.batch_size,
        eval_every_steps=args.eval_every_steps,
        learning_rate=args.learning_rate,
        model_preset=args.model_preset,
        hidden_units=hidden_units,
        dropout=args.dropout,
        grad_accum_steps=args.grad_accum_steps,
        early_stopping_patience=args.early_stopping_patience,
        seed=args.seed,
        hardware=hardware,
    )


def _run(args: argparse.Namespace) -> int:
    from tfxflow.pipeline import config as config_lib
    from tfxflow.pipeline.local.runner import configure_logging

    try:
        training = _training_config(args)
        beam, beam_mode, beam_workers = _beam_runner(args, kubeflow=False)
    except ValueError as err:  # ConfigError names the flag
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    home = config_lib.resolve_home(args.home, os.environ)
    log_dir = config_lib.Paths.under(home).log_dir
    # Before the log exists; low space is reported with the output folders below, on the same file system.
    if not _writable([("home folder", os.path.abspath(home)), ("log folder", log_dir)], warn=False):
        return EXIT_CONFIG_ERROR
    log_file = os.path.join(log_dir, f"run-{stamp}.log")
    configure_logging(log_file)
    try:
        config = config_lib.build_run_config(
            environ=os.environ,
            home=home,
            dataset=args.dataset,
            data_root=args.data_root,
            schema_path=args.schema_path,
            feature_config_path=args.feature_config_path,
            pipeline_name=args.pipeline_name,
            model_name=args.model_name,
            pipeline_root=args.pipeline_root,
            metadata_path=args.metadata_path,
            serving_dir=args.serving_dir,
            training=training,
            evaluation=EvaluationConfig(
                min_value=args.min_accuracy,
                max_regression=args.max_regression,
                slice_columns=tuple(args.slice_by),
                max_rows=args.eval_max_rows,
                max_latency_ms=args.max_latency_ms,
            ),
            beam_mode=beam_mode,
            beam_workers=beam_workers,
            beam=beam,
            enable_cache=not args.no_cache,
            allowed_anomaly_types=tuple(args.allow_anomaly),
            drift_check=not args.no_drift_check,
            serving_data_root=args.serving_data,
            tracking_uri=args.mlflow_uri,
            tracking_mode=args.tracking,
            experiment=args.experiment,
            keep_versions=args.keep_versions,
        )
    except ValueError as err:  # ConfigError and FeatureConfigError name the flag or file at fault
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    paths = config.paths
    if not _writable(
        [
            ("pipeline root", paths.pipeline_root),
            ("metadata folder", os.path.dirname(paths.metadata_path)),
            ("serving directory", config.model_base_dir),
            ("Trainer backup folder", paths.trainer_backup_dir),
        ]
    ):
        return EXIT_CONFIG_ERROR
    lock = run_guard.RunLock(
        os.path.dirname(paths.metadata_path),
        wait_s=max(0.0, args.wait_for_lock),
        on_wait=lambda holder: print(
            f"tfxflow: waiting up to {args.wait_for_lock:.0f} s for the run in progress "
            f"({run_guard.holder_text(holder)}) to finish",
            flush=True,
        ),
    )
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with lock:
            try:
                return _run_locked(args, config, log_file)
            except (Terminated, KeyboardInterrupt) as err:
                return _stopped(err, config, log_file)
    except run_guard.RunBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BUSY


def _writable(folders, warn: bool = True) -> bool:
    """run_guard.check_writable with its error (and warnings) on stderr; False when a folder is refused."""
    try:
        warnings = run_guard.check_writable(folders)
    except run_guard.NotWritable as err:
        print(f"error: {err}; nothing was run", file=sys.stderr)
        return False
    for warning in warnings if warn else ():
        print(f"warning: {warning}", file=sys.stderr)
    return True


def _stopped(err: BaseException, config, log_file: str) -> int:
    """SIGTERM or Ctrl-C: the component that was running is marked CANCELED and its partial outputs removed now,
    while this run still holds the lock."""
    how = "SIGTERM" if isinstance(err, Terminated) else "Ctrl-C"
    logging.getLogger(__name__).warning("run stopped by %s", how)
    canceled = ""
    try:
        recovery = run_guard.recover_interrupted(
            config.paths.metadata_path,
            config.pipeline_name,
            config.paths.pipeline_root,
            by=f"this run, stopped by {how}",
        )
        if recovery is not None and recovery.executions:
            canceled = f"; marked CANCELED in ML Metadata: {', '.join(recovery.executions)}"
    except Exception:  # pylint: disable=broad-except  # the next run cleans up what this one could not
        logging.getLogger(__name__).exception("clean-up after %s failed", how)
    print(
        f"\nerror: the run was stopped ({how}){canceled}\n  finished components are reused when you run again"
        f"\n  full log: {log_file}",
        file=sys.stderr,
    )
    return EXIT_TERMINATED


def _run_locked(args: argparse.Namespace, config, log_file: str) -> int:
    """The part of `tfxflow run` that holds the run lock: recovery, the up-to-date check, the run."""
    from tfxflow.pipeline.beam_runners import describe
    from tfxflow.pipeline.local.runner import run_local, stderr_to
    from tfxflow.pipeline.staging import run_fingerprint, up_to_date

    try:
        recovery = run_guard.recover_interrupted(
            config.paths.metadata_path, config.pipeline_name, config.paths.pipeline_root
        )
    except Exception as err:  # pylint: disable=broad-except  # leftovers of a dead run never block a new one
        logging.getLogger(__name__).exception("recovery failed")
        print(f"warning: could not clean up after an interrupted run: {type(err).__name__}: {err}", file=sys.stderr)
        recovery = None
    if recovery is not None:
        print("tfxflow: " + "\n".join(recovery.lines()) + "\n", flush=True)
    fingerprint = run_fingerprint(config)
    last = up_to_date(config, fingerprint) if config.enable_cache and not args.force else None
    if last is not None:
        _print_up_to_date(config, last)
        return 0
    tracking_line = "off"
    if config.tracking_uri:
        from tfxflow.pipeline.tracking_store import TrackingError, check_tracking

        try:
            tracking_line = check_tracking(config.tracking_uri)
        except TrackingError as err:
            if config.tracking_mode == "required":
                print(f"error: {err}", file=sys.stderr)
                return EXIT_CONFIG_ERROR
            print(f"warning: {err}; the run is not tracked (--tracking optional)", file=sys.stderr)
            config = dataclasses.replace(config, tracking_uri=None)
            tracking_line = "off (the store did not answer)"

    print(
        f"tfxflow: pipeline {config.pipeline_name}\n  data:    {config.data_root}\n"
        f"  schema:  {config.schema_path}\n  home:    {config.paths.home}\n  log:     {log_file}\n"
        f"  mlflow:  {tracking_line}\n  beam:    {describe(config.beam_runner)}\n",
        flush=True,
    )
    try:
        with stderr_to(log_file):
            run_local(config, fingerprint=fingerprint)
    except Exception as err:  # pylint: disable=broad-except
        # The traceback goes to the log file; the console gets the error and where to look.
        logging.getLogger(__name__).exception("run failed")
        from tfxflow.components.errors import DataError

        if isinstance(err, DataError):
            print(
                f"\n{err}\n  serving directory untouched: {config.paths.serving_dir}\n  full log: {log_file}",
                file=sys.stderr,
            )
            if getattr(err, "drifted", None):
                _print_accept_hint(config, err.drifted)
            return EXIT_DATA_GATE
        storage = run_guard.storage_error(err)
        if storage:
            print(
                f"\nerror: the run failed: {storage}\n  free space or fix the folder, then run again: finished "
                f"components are reused\n  full log: {log_file}",
                file=sys.stderr,
            )
            return 1
        first_line = (str(err).strip().splitlines() or [""])[0]
        print(f"\nerror: the run failed: {type(err).__name__}: {first_line}\n  full log: {log_file}", file=sys.stderr)
        return 1
    return 0


def _print_accept_hint(config, drifted: List[str]) -> None:
    from tfxflow.pipeline.tools.baseline import accept_command

    command = accept_command(
        config.paths.home, config.paths.metadata_path, config.pipeline_name, f"tfxflow-{DEFAULT_DATASET}"
    )
    print(
        f"\nNext: look at what changed in {', '.join(drifted)}. If the new data is right (the world changed, "
        f"not the feed), make it the drift baseline and run the same command again:\n  {command} --reason "
        "'...'\nLater runs are compared with it; the check stays on. A model blessed after that becomes the "
        "baseline again.",
        file=sys.stderr,
    )


def _accept_data(args: argparse.Namespace) -> int:
    from tfxflow.pipeline import config as config_lib

    home = config_lib.resolve_home(args.home, os.environ)
    paths = config_lib.Paths.under(home, metadata_path=args.metadata_path)
    pipeline_name = args.pipeline_name or f"tfxflow-{args.dataset}"
    if not os.path.exists(paths.metadata_path):
        print(
            f"error: no metadata store at {paths.metadata_path}: pass the --home (or --metadata-path) of the run",
            file=sys.stderr,
        )
        return EXIT_CONFIG_ERROR
    from tfxflow.pipeline.local.runner import stderr_to

    os.makedirs(paths.log_dir, exist_ok=True)
    log_file = os.path.join(paths.log_dir, f"accept-data-{datetime.datetime.now():%Y%m%d-%H%M%S}.log")
    try:
        with run_guard.RunLock(os.path.dirname(paths.metadata_path)), stderr_to(log_file):
            from tfxflow.pipeline.tools import (
                baseline as baseline_tool,  # imports TFX: its native libraries' start-up chatter goes to the log
            )

            done = baseline_tool.accept(paths.metadata_path, pipeline_name, args.run_id, args.reason)
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


def _rollback(args: argparse.Namespace) -> int:
    import contextlib
    import tempfile

    from tfxflow.components import object_store
    from tfxflow.pipeline import config as config_lib
    from tfxflow.pipeline.local.runner import stderr_to
    from tfxflow.pipeline.tracking_store import resolve_tracking_uri

    home = config_lib.resolve_home(args.home, os.environ)
    paths = config_lib.Paths.under(home, metadata_path=args.metadata_path)
    model_name = args.model_name or args.dataset
    serving_dir = args.serving_dir or paths.serving_dir
    if not object_store.is_remote(serving_dir):
        serving_dir = os.path.abspath(serving_dir)
    base = f"{serving_dir.rstrip('/')}/{model_name}"
    pipeline_name = args.pipeline_name or f"tfxflow-{args.dataset}"
    tracking_uri = resolve_tracking_uri(args.mlflow_uri, os.environ, paths.home)
    log_dir = paths.log_dir if os.path.isdir(paths.home) else tempfile.gettempdir()
    os.makedirs(log_dir, exist_ok=True)
    log_file = os.path.join(log_dir, f"rollback-{datetime.datetime.now():%Y%m%d-%H%M%S}.log")
    has_store = os.path.exists(paths.metadata_path)
    # Under the run lock of a local home: no pipeline run pushes or reads the blessings meanwhile.
    lock = run_guard.RunLock(os.path.dirname(paths.metadata_path)) if has_store else contextlib.nullcontext()
    try:
        with lock, stderr_to(log_file):
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
    except Exception as err:  # pylint: disable=broad-except  # the file system or object store refused
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


def _print_up_to_date(config, last: dict) -> None:
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in last.get("metrics", {}).items() if k in ("binary_accuracy", "auc"))
    served = (
        f"version {last['pushed_version']} -> {last['pushed_destination']}"
        if last.get("pushed_version")
        else "nothing pushed by that run"
    )
    print(
        f"tfxflow: pipeline {config.pipeline_name} is up to date: nothing changed since run {last['run_id']} "
        f"({last['finished_at']}, {last['wall_s']} s)\n"
        "  the data files, schema, feature config, settings and code are the same, so every component would be "
        "served from its cache\n"
        f"  eval metrics:   {metrics or 'n/a'}\n  pushed:         {served}\n"
        "  --force runs it through TFX anyway; --no-cache re-runs every component",
        flush=True,
    )


def _infer_schema(args: argparse.Namespace) -> int:
    from tfxflow.components.errors import DataError
    from tfxflow.pipeline.local.runner import stderr_to
    from tfxflow.pipeline.tools import schema as schema_tool

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
    print(
        f"tfxflow: {result.rows:,} rows, {len(result.columns)} columns: "
        + ", ".join(f"{name} {kind}" for name, kind in result.columns.items())
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
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    from tfxflow.pipeline import config as config_lib
    from tfxflow.pipeline.reports import compare as compare_lib
    from tfxflow.pipeline.tracking_store import TrackingError, check_tracking, resolve_tracking_uri

    uri = resolve_tracking_uri(args.mlflow_uri, os.environ, config_lib.resolve_home(args.home, os.environ))
    try:
        if uri.startswith("sqlite:///") and not os.path.exists(uri[len("sqlite:///") :]):
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


def _kubeflow(args: argparse.Namespace) -> int:
    from tfxflow.pipeline.config import ConfigError
    from tfxflow.pipeline.kfp.client import KfpError

    try:
        if args.kubeflow_command == "compile":
            return _kubeflow_compile(args)
        if args.kubeflow_command == "check":
            return _kubeflow_check(args.spec)
        if args.kubeflow_command == "serving-config":
            return _kubeflow_serving_config(args)
        return _kubeflow_remote(args)
    except (ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KfpError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def _kubeflow_compile(args: argparse.Namespace) -> int:
    from tfxflow.pipeline import config as config_lib
    from tfxflow.pipeline.beam_runners import describe
    from tfxflow.pipeline.kfp import compiler as kf

    schema_path, features = config_lib.load_schema_and_features(
        args.dataset, args.schema_path, args.feature_config_path
    )
    pipeline_name = args.pipeline_name or f"tfxflow-{args.dataset}"
    beam, beam_mode, beam_workers = _beam_runner(args, kubeflow=True)
    root = args.pipeline_root.rstrip("/")
    serving_dir = args.serving_dir or (
        f"{args.serving_mount.rstrip('/')}/models" if args.serving_pvc else f"{root}/serving"
    )
    config = kf.KubeflowConfig(
        pipeline_name=pipeline_name,
        model_name=args.model_name or args.dataset,
        image=args.image,
        pipeline_root=root,
        data_root=args.data_root,
        serving_dir=serving_dir,
        schema_path=schema_path,
        features=features,
        training=_training_config(args),
        evaluation=EvaluationConfig(
            min_value=args.min_accuracy,
            max_regression=args.max_regression,
            slice_columns=tuple(args.slice_by),
            max_rows=args.eval_max_rows,
            max_latency_ms=args.max_latency_ms,
        ),
        allowed_anomaly_types=tuple(args.allow_anomaly),
        serving_data_root=args.serving_data,
        gpus=args.gpus,
        gpu_resource=args.gpu_resource,
        trainer_cpu=args.trainer_cpu,
        trainer_memory=args.trainer_memory,
        step_cpu=args.step_cpu,
        step_memory=args.step_memory,
        drift_check=not args.no_drift_check,
        node_selector=kf.parse_key_values(args.node_selector, "--node-selector"),
        tolerations=tuple(kf.Toleration.parse(t) for t in args.toleration),
        beam_mode=beam_mode,
        beam_workers=beam_workers,
        beam=beam,
        tracking=args.tracking == "on",
        experiment=args.experiment,
        mlflow_uri=args.mlflow_uri,
        mlflow_secret=args.mlflow_secret,
        mlflow_secret_keys=tuple(args.mlflow_secret_key) or (kf.TRACKING_ENV,),
        serving_pvc=args.serving_pvc or "",
        serving_mount=args.serving_mount,
        data_pvc=args.data_pvc,
        data_mount=args.data_mount,
        s3_endpoint=args.s3_endpoint,
        object_store_secret=args.object_store_secret,
    )
    kf.check_kubeflow_config(config)  # before TensorFlow is imported: a wrong flag answers at once
    output = os.path.abspath(args.output or f"{pipeline_name}.yaml")
    import tempfile

    from tfxflow.pipeline.local.runner import configure_logging, stderr_to

    # TensorFlow's and TFX's import-time chatter goes to a log kept only when compiling fails.
    log_file = os.path.join(tempfile.gettempdir(), f"tfxflow-compile-{os.getpid()}.log")
    configure_logging(log_file)
    try:
        with stderr_to(log_file):
            result = kf.compile_pipeline(config, output)
    except Exception as err:  # pylint: disable=broad-except
        logging.getLogger(__name__).exception("compile failed")
        if isinstance(err, ValueError):  # a configuration error, printed by the caller
            os.remove(log_file)
            raise
        print(f"error: compiling failed: {type(err).__name__}: {err}\n  full log: {log_file}", file=sys.stderr)
        return 1
    os.remove(log_file)
    gpu = f"{config.gpus} x {config.gpu_resource}" if config.gpus else "none"
    print(
        f"tfxflow: compiled {pipeline_name} ({len(result.steps)} steps) in {result.seconds:.1f} s\n"
        f"  spec:       {result.path}\n  image:      {config.image}\n  root:       {config.pipeline_root}\n"
        f"  schema:     {config.schema_path} (in the spec, sha256 {result.schema_sha256})\n"
        f"  serving:    {config.serving_dir}"
        + (f" on claim {config.serving_pvc}" if config.serving_pvc else "")
        + "\n  baselines:  the newest version under the serving directory"
        + ("" if config.drift_check else " (no drift check)")
        + "\n"
        f"  trainer:    GPUs {gpu}"
        + (f", node selector {dict(config.node_selector)}" if config.node_selector else "")
        + (f", {len(config.tolerations)} toleration(s)" if config.tolerations else "")
        + "\n"
        f"  beam:       {describe(config.beam_runner)}\n"
        "  parameters: " + ", ".join(f"{k}={v!r}" for k, v in sorted(result.parameters.items()))
    )
    return 0


def _kubeflow_serving_config(args: argparse.Namespace) -> int:
    from tfxflow.pipeline.kfp import serving_config

    available = (
        serving_config.served_versions(os.path.join(args.serving_dir, args.model_name)) if args.serving_dir else []
    )
    stable, canary = serving_config.choose_versions(available, args.stable, args.canary)
    text = serving_config.config_text(
        serving_config.canary_config(
            args.model_name, args.base_path or f"/serving/models/{args.model_name}", stable, canary
        )
    )
    if not args.out:
        print(text, end="")
        return 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(
        f"tfxflow: wrote {args.out}: {args.model_name} version {stable} labelled stable, {canary} labelled canary "
        "(kubeflow/serving/canary/README.md: load, label, route)"
    )
    return 0


def _kubeflow_check(path: str) -> int:
    from tfxflow.pipeline.kfp import spec_check as kfp_check

    problems = kfp_check.check_file(path)
    if problems:
        print(kfp_check.format_problems(path, problems), file=sys.stderr)
        return 1
    print(f"tfxflow: {path}: admitted by the open-source KFP 2.x backend's rules (pipeline/kfp/spec_check.py)")
    return 0


def _kubeflow_remote(args: argparse.Namespace) -> int:
    from tfxflow.pipeline.kfp import client as kfp_client
    from tfxflow.pipeline.kfp.compiler import load_spec, parse_key_values

    connection = kfp_client.connection_from(args.host, args.namespace, args.token_file, os.environ)
    if args.kubeflow_command == "unschedule":
        experiment = args.experiment or args.pipeline_name or f"tfxflow-{DEFAULT_DATASET}"
        removed = kfp_client.unschedule(kfp_client.make_client(connection), experiment, args.name, connection.namespace)
        print(
            f"tfxflow: removed recurring run '{args.name}' from experiment {experiment}: {', '.join(removed)}"
            if removed
            else f"tfxflow: no recurring run '{args.name}' in experiment {experiment}; nothing to do"
        )
        return 0
    from tfxflow.pipeline.kfp import spec_check as kfp_check

    problems = kfp_check.check_file(args.spec)  # what the API server would refuse at run creation
    if problems:
        raise ValueError(kfp_check.format_problems(args.spec, problems))
    spec, _ = load_spec(args.spec)
    pipeline_name = spec["pipelineInfo"]["name"]
    # The backend does not read the spec's default root: a run without one writes to the namespace's.
    pipeline_root = spec.get("defaultPipelineRoot") or None
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    params = dict(parse_key_values(args.param, "--param"))
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ValueError(
            f"--param {', '.join(unknown)}: not a parameter of {args.spec} (it has {', '.join(sorted(declared))})"
        )
    if args.kubeflow_command == "schedule":
        kfp_client.check_cron(args.cron)  # before any call to the cluster
    experiment = args.experiment or pipeline_name
    client = kfp_client.make_client(connection)
    if args.kubeflow_command == "submit":
        run_name = args.run_name or f"{pipeline_name}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
        done = kfp_client.submit(
            client,
            args.spec,
            pipeline_name,
            experiment,
            run_name,
            params,
            connection.namespace,
            pipeline_root=pipeline_root,
        )
        print(
            f"tfxflow: run '{run_name}' started: run id {done.run_id}\n  experiment: {experiment} "
            f"({done.experiment_id})\n  pipeline version: {done.version_id}\n  UI: {connection.host}/#/runs/details/"
            f"{done.run_id}"
        )
        return 0
    done = kfp_client.schedule(
        client,
        args.spec,
        pipeline_name,
        experiment,
        args.name,
        args.cron,
        params,
        args.max_concurrency,
        args.catchup,
        connection.namespace,
        pipeline_root=pipeline_root,
    )
    replaced = f"; replaced {', '.join(done.replaced)}" if done.replaced else ""
    print(
        f"tfxflow: recurring run '{args.name}' ({done.recurring_run_id}) in experiment {experiment}: cron "
        f"'{kfp_client.check_cron(args.cron)}', at most {args.max_concurrency} at once, catch-up "
        f"{'on' if args.catchup else 'off'}{replaced}\n  pipeline version: {done.version_id}"
    )
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
    if args.command == "accept-data":
        return _accept_data(args)
    if args.command == "rollback":
        return _rollback(args)
    if args.command == "kubeflow":
        return _kubeflow(args)
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
