"""`tfxflow kubeflow`: compile the pipeline for Kubeflow Pipelines, check a compiled spec, write TF Serving's
canary config, and submit, schedule or unschedule runs."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys

from tfxflow.components import settings
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline import inputs
from tfxflow.pipeline import user_module as user_module_lib
from tfxflow.pipeline.beam_runners import describe
from tfxflow.pipeline.cli import common
from tfxflow.pipeline.config import DEFAULT_DATASET, ConfigError, PipelineSettings
from tfxflow.pipeline.kfp import serving_config
from tfxflow.pipeline.local.run import EXIT_CONFIG_ERROR

HELP = "compile the pipeline for Kubeflow Pipelines; check, submit or schedule it"
COMMANDS = {
    "compile": "compile to a KFP v2 pipeline spec (YAML)",
    "training-job": "print the training job a pipeline compiled with --workers N>1 creates (TFJob or TrainJob)",
    "check": "check a compiled spec against the open-source KFP backend's rules",
    "serving-config": "TF Serving's model config for a stable and a canary version (version labels)",
    "submit": "start one run of a compiled pipeline",
    "schedule": "create or replace a recurring run of a compiled pipeline",
    "unschedule": "delete a recurring run",
}
# What a compiled pipeline can do with each `--tracking` of `tfxflow run`: its tracking steps need the store,
# so there is no `optional`.
COMPILE_TRACKING = ("required", "off")


def _compile_tracking(text: str) -> str:
    """`--tracking` of `kubeflow compile`: `on`, its spelling before it took run's vocabulary, still works."""
    if text == "on":
        print(
            "warning: --tracking on is deprecated, use --tracking required (the same); 'on' goes in the next release",
            file=sys.stderr,
        )
        return "required"
    return text


def add_parser(sub) -> None:
    kf = sub.add_parser("kubeflow", help=HELP, description=HELP, formatter_class=common.HelpFormatter)
    kf_sub = kf.add_subparsers(dest="kubeflow_command", required=True, metavar="COMMAND")
    fmt = common.HelpFormatter

    def command(name: str):
        return kf_sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name], formatter_class=fmt)

    _add_compile(command("compile"))
    _add_compile(command("training-job"), output_help="write the manifest here (default: print it)")
    check = command("check")
    check.add_argument("spec", metavar="SPEC", help="the compiled file (YAML)")
    canary = command("serving-config")
    canary.add_argument("--model-name", default=DEFAULT_DATASET, metavar="NAME", help="the served model's name")
    canary.add_argument(
        "--base-path",
        metavar="DIR",
        help="the model's folder as TF Serving sees it (default: /serving/models/<model-name>, as kubeflow/serving/)",
    )
    canary.add_argument(
        "--serving-dir",
        metavar="DIR",
        help="a local serving directory to pick the versions from: the newest is the canary, the one before it stable",
    )
    canary.add_argument("--stable", type=int, metavar="VERSION", help="the version most traffic keeps")
    canary.add_argument("--canary", type=int, metavar="VERSION", help="the version on trial")
    canary.add_argument("--out", metavar="FILE", help="write the config here (default: print it)")
    for name in ("submit", "schedule", "unschedule"):
        cmd = command(name)
        conn = cmd.add_argument_group("connection (never printed)")
        conn.add_argument("--host", metavar="URL", help="KFP API endpoint (default: $KFP_HOST)")
        conn.add_argument(
            "--namespace", metavar="NAME", help="profile namespace on multi-user Kubeflow (default: $KFP_NAMESPACE)"
        )
        conn.add_argument("--token-file", metavar="FILE", help="file holding a bearer token (default: $KFP_TOKEN)")
        cmd.add_argument(
            "--kfp-experiment",
            metavar="NAME",
            help="KFP experiment (default: the pipeline's name)",
        )
        cmd.add_argument(
            "--experiment",
            dest="kfp_experiment",
            metavar="NAME",
            action=common.DeprecatedAlias,
            instead="--kfp-experiment",
            help="deprecated spelling of --kfp-experiment",
        )
        if name in ("submit", "schedule"):
            cmd.add_argument(
                "--spec", required=True, metavar="FILE", help="the compiled file (tfxflow kubeflow compile)"
            )
            cmd.add_argument(
                "--param",
                action="append",
                default=[],
                metavar="NAME=VALUE",
                help="pipeline parameter (repeatable): data_root, train_args, serving_data_root, allowed_anomaly_types",
            )
        if name == "submit":
            cmd.add_argument("--run-name", metavar="NAME", help="the run's name (default: <pipeline>-<time>)")
        else:
            cmd.add_argument(
                "--name", required=True, metavar="NAME", help="the recurring run's name, unique in the experiment"
            )
        if name == "schedule":
            cmd.add_argument(
                "--cron", required=True, metavar="CRON", help="six fields, seconds first: '0 0 3 * * *' is 03:00 daily"
            )
            cmd.add_argument(
                "--max-concurrency", type=int, default=1, metavar="N", help="runs of the schedule at most at once"
            )
            cmd.add_argument("--catchup", action="store_true", help="backfill missed intervals (default: no)")
        if name == "unschedule":
            cmd.add_argument(
                "--pipeline-name",
                metavar="NAME",
                help=f"names the default experiment (default: tfxflow-{DEFAULT_DATASET})",
            )


def _add_compile(comp, output_help: str = "compiled file (default: ./<pipeline-name>.yaml)") -> None:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.kfp.compiler import DEFAULT_PIPELINE_ROOT, SERVING_PVC, KubeflowConfig

    # The cluster's settings are declared on KubeflowConfig: one value for the flag, its help and a config
    # built in code.
    where = comp.add_argument_group("image and paths (object-store URIs, or paths on mounted volumes)")
    where.add_argument(
        "--image", required=True, metavar="IMAGE", help="the project image (kubeflow/Dockerfile), pinned: repo/name:tag"
    )
    where.add_argument(
        "--pipeline-root",
        metavar="URI",
        help=f"gs://, s3:// or minio:// (default: open-source Kubeflow's {DEFAULT_PIPELINE_ROOT}, or with "
        "--namespace on KFP 2.15+ the profile's minio://mlpipeline/private-artifacts/<namespace>/v2/artifacts)",
    )
    where.add_argument(
        "--data-root",
        required=True,
        metavar="URI",
        help="folder of CSV files, compiled as the data_root pipeline parameter (a run may set another)",
    )
    where.add_argument(
        "--serving-dir",
        metavar="URI",
        help="TF Serving model base (default: <mount>/models on --serving-pvc, or "
        "<pipeline-root>/serving with --serving-pvc '')",
    )
    settings.add_arguments(
        where,
        KubeflowConfig,
        only=(
            "serving_pvc",
            "serving_mount",
            "data_pvc",
            "data_mount",
            "s3_endpoint",
            "s3_region",
            "kfp_version",
            "namespace",
            "object_store_secret",
        ),
        defaults={"serving_pvc": SERVING_PVC},
    )
    where.add_argument("--output", metavar="FILE", help=output_help)
    data = comp.add_argument_group(
        "data and model (--allow-anomaly and --serving-data give the defaults of the pipeline parameters "
        "allowed_anomaly_types and serving_data_root)"
    )
    common.add_pipeline_settings(
        data,
        only=(
            "dataset",
            "schema_path",
            "feature_config_path",
            "module_file",
            "pipeline_name",
            "model_name",
            "allowed_anomaly_types",
            "serving_data_root",
            "drift_check",
        ),
    )
    common.add_evaluation_args(data)
    common.add_training_args(comp)
    k8s = comp.add_argument_group("cluster")
    settings.add_arguments(
        k8s,
        KubeflowConfig,
        only=(
            "gpus",
            "gpu_resource",
            "trainer_cpu",
            "trainer_memory",
            "step_cpu",
            "step_memory",
            "training_job",
            "training_job_timeout",
        ),
    )
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
    common.add_beam_args(comp.add_argument_group("Beam runner (pipeline/beam_runners.py)"), kubeflow=True)
    track = comp.add_argument_group("tracking (MLflow)")
    common.add_pipeline_settings(
        track,
        only=("tracking", "mlflow_uri", "experiment", "tracking_wait"),
        overrides={
            "tracking": {
                "choices": COMPILE_TRACKING,
                "type": _compile_tracking,
                "help": "required: the pipeline records each run in MLflow (its tracking steps need the store); "
                "off: it has no tracking steps ('on': deprecated spelling of required)",
            },
            "mlflow_uri": {"help": "$MLFLOW_TRACKING_URI of the tracking steps"},
            "tracking_wait": {
                "help": "how long each MLflow call of a tracking step waits for a server that stops answering; "
                "then the step fails, naming the server (KFP's retry policy may run it again)"
            },
        },
    )
    settings.add_arguments(track, KubeflowConfig, only=("mlflow_secret",))
    track.add_argument(
        "--mlflow-secret-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a key of --mlflow-secret, set as the variable of that name (repeatable; default: MLFLOW_TRACKING_URI): "
        "MLFLOW_TRACKING_URI, MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (basic auth), "
        "MLFLOW_TRACKING_TOKEN (bearer), MLFLOW_TRACKING_INSECURE_TLS, MLFLOW_TRACKING_SERVER_CERT_PATH, "
        "MLFLOW_TRACKING_CLIENT_CERT_PATH",
    )


def main(args: argparse.Namespace) -> int:
    from tfxflow.pipeline.kfp.client import KfpError  # kept out of `tfxflow --help`'s import

    try:
        if args.kubeflow_command == "compile":
            return _compile(args)
        if args.kubeflow_command == "training-job":
            return _training_job(args)
        if args.kubeflow_command == "check":
            return _check(args.spec)
        if args.kubeflow_command == "serving-config":
            return _serving_config(args)
        return _remote(args)
    except (ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KfpError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def _config(args: argparse.Namespace):
    """The KubeflowConfig of `compile`'s (and `training-job`'s) flags."""
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.kfp import compiler as kf

    shared = settings.from_args(PipelineSettings, args)
    if args.mlflow_secret_key and not args.mlflow_secret:
        raise config_lib.ConfigError("--mlflow-secret-key names a key of --mlflow-secret: pass --mlflow-secret too")

    user_module = user_module_lib.inspect(shared.module_file) if shared.module_file else None
    schema_path, features = inputs.load_schema_and_features(
        shared.dataset,
        shared.schema_path,
        shared.feature_config_path,
        roles_required=not (user_module and user_module.preprocessing_fn),
    )
    pipeline_name = shared.pipeline_name or f"tfxflow-{shared.dataset}"
    beam, beam_mode, beam_workers = common.beam_runner(args, kubeflow=True)
    profile = args.namespace and kf.profile_paths_apply(args.kfp_version)
    default_root = kf.profile_root(args.namespace) if profile else kf.DEFAULT_PIPELINE_ROOT
    root = (args.pipeline_root or default_root).rstrip("/")
    serving_dir = args.serving_dir or (
        f"{args.serving_mount.rstrip('/')}/models" if args.serving_pvc else f"{root}/serving"
    )
    config = kf.KubeflowConfig(
        pipeline_name=pipeline_name,
        model_name=shared.model_name or shared.dataset,
        image=args.image,
        pipeline_root=root,
        data_root=args.data_root,
        serving_dir=serving_dir,
        schema_path=schema_path,
        features=features,
        training=common.training_config(args),
        evaluation=common.evaluation_config(args),
        tuning=common.tuning_config(args),
        allowed_anomaly_types=shared.allowed_anomaly_types,
        serving_data_root=shared.serving_data_root or "",
        gpus=args.gpus,
        gpu_resource=args.gpu_resource,
        training_job=args.training_job,
        training_job_timeout=args.training_job_timeout,
        trainer_cpu=args.trainer_cpu,
        trainer_memory=args.trainer_memory,
        step_cpu=args.step_cpu,
        step_memory=args.step_memory,
        drift_check=shared.drift_check,
        node_selector=kf.parse_key_values(args.node_selector, "--node-selector"),
        tolerations=tuple(kf.Toleration.parse(t) for t in args.toleration),
        beam_mode=beam_mode,
        beam_workers=beam_workers,
        beam=beam,
        tracking=shared.tracking != "off",
        tracking_wait_s=shared.tracking_wait,
        experiment=shared.experiment or "",
        mlflow_uri=shared.mlflow_uri or "",
        mlflow_secret=args.mlflow_secret,
        mlflow_secret_keys=tuple(args.mlflow_secret_key) or (kf.TRACKING_ENV,),
        serving_pvc=args.serving_pvc or "",
        serving_mount=args.serving_mount,
        data_pvc=args.data_pvc,
        data_mount=args.data_mount,
        s3_endpoint=args.s3_endpoint,
        s3_region=args.s3_region,
        kfp_version=args.kfp_version,
        namespace=args.namespace or "",
        object_store_secret=args.object_store_secret,
        user_module=user_module,
    )
    return config


def _compile(args: argparse.Namespace) -> int:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.kfp import compiler as kf

    config = _config(args)
    pipeline_name = config.pipeline_name
    kf.check_kubeflow_config(config)  # before TensorFlow is imported: a wrong flag answers at once
    output = os.path.abspath(args.output or f"{pipeline_name}.yaml")
    import tempfile

    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.local.runner import configure_logging, stderr_to

    # TensorFlow's and TFX's import-time chatter goes to a log kept only when compiling fails.
    log_file = os.path.join(tempfile.gettempdir(), f"tfxflow-compile-{os.getpid()}.log")
    configure_logging(log_file)
    try:
        with stderr_to(log_file):
            result = kf.compile_pipeline(config, output)
    except Exception as err:  # the log gets the traceback, the console one line
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
        f"  spec:       {result.path}\n  image:      {config.image}\n  lane:       {kf.lane_line()}\n"
        f"  root:       {config.pipeline_root}\n"
        f"  store:      KFP {config.kfp_version}"
        + (f", {config.endpoint}" if config.endpoint else "")
        + (f", namespace {config.namespace}" if config.namespace else "")
        + "\n"
        + (
            f"  launcher:   {result.launcher_config} (apply it, or merge its providers into the namespace's "
            "kfp-launcher ConfigMap: the launcher reads s3:// roots by it)\n"
            if result.launcher_config
            else ""
        )
        + f"  schema:     {config.schema_path} (in the spec, sha256 {result.schema_sha256})\n"
        + (
            f"  module:     {config.user_module.describe()}; wheel(s) staged: {', '.join(result.staged)}\n"
            if config.user_module
            else ""
        )
        + f"  task:       {config.features.task} (label {config.features.label.name})\n"
        + (f"  fine-tunes: {result.pretrained}\n" if result.pretrained else "")
        + f"  serving:    {config.serving_dir}"
        + (f" on claim {config.serving_pvc}" if config.serving_pvc else "")
        + "\n  baselines:  the newest version under the serving directory"
        + ("" if config.drift_check else " (no drift check)")
        + "\n"
        f"  trainer:    GPUs {gpu}"
        + (
            f" per worker, {config.workers} workers in a {config.training_job} the step creates "
            "(tfxflow kubeflow training-job prints it)"
            if config.workers > 1
            else ""
        )
        + (f", node selector {dict(config.node_selector)}" if config.node_selector else "")
        + (f", {len(config.tolerations)} toleration(s)" if config.tolerations else "")
        + "\n"
        f"  beam:       {describe(config.beam_runner)}\n"
        "  parameters: " + ", ".join(f"{k}={v!r}" for k, v in sorted(result.parameters.items()))
    )
    return 0


def _training_job(args: argparse.Namespace) -> int:
    """Prints (or writes) the training job the compiled Trainer step would create, from a compile in a temporary
    folder (nothing staged in the store): the replicas' image, command, arguments, environment, resources and
    placement. The running step sets the name's suffix and resolves the executor input (`{{$}}`)."""
    import tempfile

    import yaml

    # kept out of `tfxflow --help`'s import
    from tfxflow.components import names
    from tfxflow.pipeline.kfp import compiler as kf
    from tfxflow.pipeline.kfp import training_job
    from tfxflow.pipeline.local.runner import configure_logging, stderr_to

    config = _config(args)
    if config.workers < 2:
        raise ConfigError("training-job: a pipeline creates a training job only with --workers N (N > 1)")
    kf.check_kubeflow_config(config)
    with tempfile.TemporaryDirectory(prefix="tfxflow-training-job-") as folder:
        log_file = os.path.join(folder, "compile.log")
        configure_logging(log_file)
        try:
            with stderr_to(log_file):
                result = kf.compile_pipeline(config, os.path.join(folder, "spec.yaml"), stage=False)
        except ValueError:
            raise
        except Exception as err:  # noqa: BLE001 (the compile's log has the traceback)
            with open(log_file, encoding="utf-8") as f:
                tail = f.read()[-2000:]
            print(f"error: compiling failed: {type(err).__name__}: {err}\n{tail}", file=sys.stderr)
            return 1
        spec, _ = kf.load_spec(result.path)
    label = spec["root"]["dag"]["tasks"][names.TRAINER]["componentRef"]["name"]
    executor = spec["components"][label]["executorLabel"]
    container = spec["deploymentSpec"]["executors"][executor]["container"]
    template, invocation = training_job.parse_launcher_args(container["args"])
    name = training_job.job_name(config.pipeline_name, "{{$.outputs}}")
    manifest = training_job.manifest(template, name, invocation, template.namespace or "<the step's namespace>")
    text = (
        f"# The {training_job.API[template.kind][3]} the Trainer step of {config.pipeline_name} creates "
        f"(image {config.image}).\n# The running step sets the name's suffix (from its output URI), the namespace "
        "when --namespace is not given (its own), and the executor input ({{$}}).\n"
        + yaml.safe_dump(manifest, sort_keys=False, width=120)
    )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"tfxflow: wrote {args.output}", file=sys.stderr)
    else:
        print(text, end="")
    return 0


def _serving_config(args: argparse.Namespace) -> int:
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


def _check(path: str) -> int:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.kfp import spec_check as kfp_check

    problems = kfp_check.check_file(path)
    if problems:
        print(kfp_check.format_problems(path, problems), file=sys.stderr)
        return 1
    print(f"tfxflow: {path}: admitted by the open-source KFP 2.x backend's rules (pipeline/kfp/spec_check/)")
    return 0


def _remote(args: argparse.Namespace) -> int:
    # kept out of `tfxflow --help`'s import
    from tfxflow.pipeline.kfp import client as kfp_client
    from tfxflow.pipeline.kfp import spec_check as kfp_check
    from tfxflow.pipeline.kfp.compiler import load_spec, parse_key_values

    connection = kfp_client.connection_from(args.host, args.namespace, args.token_file, os.environ)
    if args.kubeflow_command == "unschedule":
        experiment = args.kfp_experiment or args.pipeline_name or f"tfxflow-{DEFAULT_DATASET}"
        removed = kfp_client.unschedule(kfp_client.make_client(connection), experiment, args.name, connection.namespace)
        print(
            f"tfxflow: removed recurring run '{args.name}' from experiment {experiment}: {', '.join(removed)}"
            if removed
            else f"tfxflow: no recurring run '{args.name}' in experiment {experiment}; nothing to do"
        )
        return 0

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
    experiment = args.kfp_experiment or pipeline_name
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
