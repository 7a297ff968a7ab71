"""The Beam runner of a run: one validated description, and the exact `beam_pipeline_args` it stands for.

Every Beam component gets the same arguments, through the pipeline-level `beam_pipeline_args` of
`create_pipeline`: StatisticsGen, Transform and the Evaluator run Beam pipelines; CsvExampleGen's executor is a
Beam executor that streams its files itself (components/ingest/csv_input.py). Presets (`--beam-runner`):

- `direct`: Beam's DirectRunner in this process (`--beam-mode`, `--beam-workers`).
- `portable`: Beam's PortableRunner against a job service: `embed` (Beam's in-process job service, which runs
  the pipeline with its Python FnApiRunner) or the host:port of a running one, such as Beam's Flink or Spark
  job server. With `embed` and LOOPBACK workers it is the code path of the Flink and Spark runners (pipeline
  proto, artifact staging, SDK workers over the Fn API) on this machine alone.
- `flink`, `spark`: Beam's FlinkRunner and SparkRunner. They start Beam's job server for the cluster from a
  jar where the pipeline is submitted (`java` on the PATH; the jar is downloaded from Maven Central on first use
  unless `--beam-arg=--flink_job_server_jar=...` / `--spark_job_server_jar=...`). Where that is not possible,
  run Beam's job server as a service and use `portable` with its endpoint.
- `dataflow`: Google Cloud Dataflow.

Where the user code runs (`--environment-type`): LOOPBACK, in this process (the portable default with
`embed`); DOCKER, a container of the worker image started on each worker node (the default otherwise);
EXTERNAL, a worker pool at host:port (e.g. a sidecar of each Flink task manager running the worker image with
`--worker_pool`); PROCESS, a command on each worker node (JSON: {"command": ...}).

Worker dependencies. For any non-empty Beam arguments, TFX's BaseBeamExecutor calls
`tfx.utils.dependency_utils.make_beam_dependency_flags`: unless one of `--extra_packages`, `--setup_file`,
`--requirements_file`, `--worker_harness_container_image` or `--sdk_container_image` is set, it builds an
sdist of the installed TFX (in every Beam component) and adds `--extra_package=<sdist>` for remote
workers to pip-install at start-up. Workers that run the project image (kubeflow/Dockerfile:
tensorflow/tfx:1.16.0, which carries Beam's SDK worker boot, plus the lock file and this package) need no
sdist, and as a non-root user could not install one. So every preset whose workers are not this process
names that image with `--sdk_container_image` (Dataflow starts it; portable runners start the image of
`--environment_config` and ignore the option), and TFX stages nothing. The image's entry point hands Beam's
worker flags on to Beam's boot (pipeline/kfp/entrypoint.py). With `direct` options or LOOPBACK workers, the
workers are this process or its children, which need no sdist and never start a container: their arguments
carry `IN_PROCESS_WORKERS`, a `--sdk_container_image` that no in-process runner reads, so TFX leaves the
arguments as given (unless the user's `--beam-arg`s already name one of TFX's dependency options).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Dict, List, Optional, Sequence, Tuple

from tfxflow.components import lane
from tfxflow.components.settings import ConfigError

BEAM_MODES = ("in_memory", "multi_threading", "multi_processing")  # the DirectRunner's

RUNNERS = ("direct", "portable", "flink", "spark", "dataflow")
DIRECT_MODES = BEAM_MODES
ENVIRONMENT_TYPES = ("LOOPBACK", "DOCKER", "EXTERNAL", "PROCESS")
EMBEDDED_JOB_SERVICE = "embed"
RUNNER_CLASSES = {
    "portable": "PortableRunner",
    "flink": "FlinkRunner",
    "spark": "SparkRunner",
    "dataflow": "DataflowRunner",
}

# Beam's in-process runner, which its DirectRunner runs these pipelines on; by its path, which Beam 2.59 (whose
# short names lack it) and 2.7x both resolve.
FN_API_RUNNER = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"

# The options whose presence makes TFX's Beam executors take the arguments as given, with no sdist of TFX built
# (tfx/utils/dependency_utils.py, make_beam_dependency_flags).
TFX_DEPENDENCY_OPTIONS = (
    "extra_packages",
    "setup_file",
    "requirements_file",
    "worker_harness_container_image",
    "sdk_container_image",
)
# Given where the workers are this process or its children: Beam's DirectRunner, its in-process runner and LOOPBACK
# workers never start a container, so they never read the image; TFX reads that an image is named.
IN_PROCESS_WORKERS = "--sdk_container_image=none:workers-in-this-process"

_HOST_PORT = r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?:[0-9]{1,5}"
# Google Cloud's rules for project ids, region names and machine types.
_GCP_PROJECT = r"[a-z][-a-z0-9]{4,28}[a-z0-9]"
_GCP_REGION = r"[a-z]+-[a-z]+[0-9]+"
_MACHINE_TYPE = r"[a-z][-a-z0-9]*[a-z0-9]"


@dataclasses.dataclass(frozen=True)
class BeamRunner:
    """Which Beam runner every Beam component uses, and its settings. An empty or None field is unset; a
    field of another runner's (say `flink_master` with `runner="spark"`) is refused by `check`."""

    runner: str = "direct"
    direct_mode: Optional[str] = None  # direct: None is in_memory
    direct_workers: Optional[int] = None  # direct: None is 1; 0 is one per core
    job_endpoint: str = ""  # portable: "" is `embed`, Beam's in-process job service
    environment_type: str = ""  # portable, flink, spark: "" is LOOPBACK with `embed`, else DOCKER
    environment_config: str = ""  # DOCKER: the image; EXTERNAL: host:port; PROCESS: {"command": ...}
    image: str = ""  # the image the workers run (the project image); Kubeflow: --image unless set
    flink_master: str = ""  # host:port of the Flink JobManager's REST endpoint
    parallelism: int = 0  # flink: 0 is the cluster's default
    spark_master_url: str = ""  # spark://host:port
    project: str = ""  # dataflow
    region: str = ""
    temp_location: str = ""  # gs://bucket/path
    machine_type: str = ""  # "" is Dataflow's default
    extra_args: Tuple[str, ...] = ()  # appended verbatim (--beam-arg), for options no flag covers

    @property
    def workers_in_this_process(self) -> bool:
        """Whether Beam's workers are this process itself (the DirectRunner in memory or in threads), so what it
        pickles for them never leaves it."""
        return self.runner == "direct" and self.direct_mode in (None, "in_memory", "multi_threading")

    @property
    def workers_are_remote(self) -> bool:
        """Whether Beam's workers run outside this process, so they read and write every path themselves."""
        if self.runner == "direct":
            return False
        return self.runner != "portable" or resolved_environment_type(self) != "LOOPBACK"


# Each field but `runner` and `extra_args`: (its flag, the runners that use it).
_FIELDS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "direct_mode": ("--beam-mode", ("direct",)),
    "direct_workers": ("--beam-workers", ("direct",)),
    "job_endpoint": ("--job-endpoint", ("portable",)),
    "environment_type": ("--environment-type", ("portable", "flink", "spark")),
    "environment_config": ("--environment-config", ("portable", "flink", "spark")),
    "image": ("--beam-image", ("portable", "flink", "spark", "dataflow")),
    "flink_master": ("--flink-master", ("flink",)),
    "parallelism": ("--flink-parallelism", ("flink",)),
    "spark_master_url": ("--spark-master-url", ("spark",)),
    "project": ("--dataflow-project", ("dataflow",)),
    "region": ("--dataflow-region", ("dataflow",)),
    "temp_location": ("--dataflow-temp-location", ("dataflow",)),
    "machine_type": ("--dataflow-machine-type", ("dataflow",)),
}


def flag_of(field: str) -> str:
    """The command-line flag of a BeamRunner field."""
    return _FIELDS[field][0]


def resolved_environment_type(runner: BeamRunner) -> str:
    if runner.environment_type:
        return runner.environment_type
    if runner.runner == "portable" and (runner.job_endpoint or EMBEDDED_JOB_SERVICE) == EMBEDDED_JOB_SERVICE:
        return "LOOPBACK"
    return "DOCKER"


def _pinned(image: str) -> bool:
    last = image.rsplit("/", 1)[-1]
    return "@" in last or (":" in last and not last.endswith(":latest"))


def _check_image(image: str, flag: str) -> None:
    if not image or re.search(r"\s", image):
        raise ConfigError(
            f"{flag} '{image}': expected an image reference such as registry.example.com/ml/tfxflow:0.1.0"
        )
    if not _pinned(image):
        raise ConfigError(
            f"{flag} '{image}': give a pinned tag or digest (repo/name:tag); with a moving tag the "
            "workers of one job may run different code"
        )


def check(runner: BeamRunner) -> BeamRunner:
    """Raises ConfigError naming the flag at fault; returns `runner` with its defaults resolved
    (job endpoint, environment type, and a DOCKER environment's image)."""
    name = runner.runner
    if name not in RUNNERS:
        raise ConfigError(f"--beam-runner must be one of {RUNNERS}, got '{name}'")
    defaults = BeamRunner()
    for field, (flag, users) in _FIELDS.items():
        if name not in users and getattr(runner, field) != getattr(defaults, field):
            used_by = " or ".join(users)
            raise ConfigError(f"{flag} is a setting of --beam-runner {used_by}, not of --beam-runner {name}")
    for arg in runner.extra_args:
        if not arg.startswith("--"):
            raise ConfigError(f"--beam-arg '{arg}': expected a Beam option such as --beam-arg=--max_num_workers=8")
    checker = {
        "direct": _check_direct,
        "portable": _check_portable,
        "flink": _check_cluster,
        "spark": _check_cluster,
        "dataflow": _check_dataflow,
    }[name]
    resolved = checker(runner)
    managed = {_option_name(arg) for arg in _preset_args(resolved)}
    for arg in runner.extra_args:
        if _option_name(arg) in managed:
            raise ConfigError(
                f"--beam-arg '{arg}': --beam-runner {name} sets {_option_name(arg)} itself; use its flag instead"
            )
    return resolved


def _check_direct(runner: BeamRunner) -> BeamRunner:
    if runner.direct_mode is not None and runner.direct_mode not in DIRECT_MODES:
        raise ConfigError(f"--beam-mode must be one of {DIRECT_MODES}, got '{runner.direct_mode}'")
    if runner.direct_workers is not None and runner.direct_workers < 0:
        raise ConfigError("--beam-workers must be >= 0 (0: one per core)")
    return runner


def _check_environment(runner: BeamRunner) -> BeamRunner:
    """The environment's type and config, and the worker image every environment but LOOPBACK needs."""
    env = resolved_environment_type(runner)
    name = runner.runner
    allowed = ENVIRONMENT_TYPES if name == "portable" else ENVIRONMENT_TYPES[1:]
    if env not in allowed:
        why = (
            " (a cluster's workers cannot call back into this process reliably; use --beam-runner portable "
            "for LOOPBACK)"
            if env == "LOOPBACK"
            else ""
        )
        raise ConfigError(f"--environment-type must be one of {allowed} with --beam-runner {name}, got '{env}'{why}")
    config, image = runner.environment_config, runner.image
    if env == "LOOPBACK":
        if config:
            raise ConfigError("--environment-config: LOOPBACK workers are this process and take no configuration")
        if image:
            raise ConfigError("--beam-image: LOOPBACK workers are this process, not a container")
        return dataclasses.replace(runner, environment_type=env)
    if env == "DOCKER":
        if config and image and config != image:
            raise ConfigError(
                f"--environment-config '{config}' and --beam-image '{image}' name different images; "
                "a DOCKER environment runs one: give --beam-image"
            )
        image = image or config
        if not image:
            raise ConfigError(
                f"--beam-runner {name} with DOCKER workers needs --beam-image: the project image "
                "(kubeflow/Dockerfile), which has this package installed"
            )
        _check_image(image, "--beam-image")
        return dataclasses.replace(runner, environment_type=env, environment_config=image, image=image)
    if env == "EXTERNAL" and not re.fullmatch(_HOST_PORT, config):
        raise ConfigError(
            f"--environment-type EXTERNAL needs --environment-config host:port (a Beam worker pool), got '{config}'"
        )
    if env == "PROCESS":
        try:
            command = json.loads(config).get("command") if config else None
        except (ValueError, AttributeError):
            command = None
        if not command:
            raise ConfigError(
                '--environment-type PROCESS needs --environment-config \'{"command": "..."}\' (the '
                f"worker command on each node), got '{config}'"
            )
    if not image:
        raise ConfigError(
            f"--environment-type {env} needs --beam-image: the image the workers run, with this "
            "package installed (without it TFX stages an sdist of itself for the workers to install)"
        )
    _check_image(image, "--beam-image")
    return dataclasses.replace(runner, environment_type=env)


def _check_portable(runner: BeamRunner) -> BeamRunner:
    endpoint = runner.job_endpoint or EMBEDDED_JOB_SERVICE
    if endpoint != EMBEDDED_JOB_SERVICE and not re.fullmatch(_HOST_PORT, endpoint):
        raise ConfigError(
            f"--job-endpoint '{endpoint}': expected '{EMBEDDED_JOB_SERVICE}' (Beam's in-process job "
            "service) or host:port of a Beam job server"
        )
    return _check_environment(dataclasses.replace(runner, job_endpoint=endpoint))


def _check_cluster(runner: BeamRunner) -> BeamRunner:
    if runner.runner == "flink":
        master = runner.flink_master
        if not re.fullmatch(rf"(https?://)?{_HOST_PORT}", master):
            raise ConfigError(
                "--beam-runner flink needs --flink-master host:port (the JobManager's REST "
                "endpoint, e.g. flink-jobmanager:8081)" + (f", got '{master}'" if master else "")
            )
        if runner.parallelism < 0:
            raise ConfigError("--flink-parallelism must be >= 1 (0: the cluster's default)")
    else:
        url = runner.spark_master_url
        if not re.fullmatch(rf"spark://{_HOST_PORT}", url):
            raise ConfigError(
                "--beam-runner spark needs --spark-master-url spark://host:port (e.g. "
                "spark://spark-master:7077)" + (f", got '{url}'" if url else "")
            )
    return _check_environment(runner)


def _check_dataflow(runner: BeamRunner) -> BeamRunner:
    if not re.fullmatch(_GCP_PROJECT, runner.project):
        raise ConfigError(
            "--beam-runner dataflow needs --dataflow-project PROJECT_ID (6 to 30 lowercase letters, "
            "digits or hyphens)" + (f", got '{runner.project}'" if runner.project else "")
        )
    if not re.fullmatch(_GCP_REGION, runner.region):
        raise ConfigError(
            "--beam-runner dataflow needs --dataflow-region REGION (e.g. us-central1)"
            + (f", got '{runner.region}'" if runner.region else "")
        )
    if not re.fullmatch(r"gs://[a-z0-9][-a-z0-9_.]{1,221}[a-z0-9](/.*)?", runner.temp_location):
        raise ConfigError(
            "--beam-runner dataflow needs --dataflow-temp-location gs://bucket/path (where Dataflow "
            "stages and writes temporary files)" + (f", got '{runner.temp_location}'" if runner.temp_location else "")
        )
    if runner.machine_type and not re.fullmatch(_MACHINE_TYPE, runner.machine_type):
        raise ConfigError(
            f"--dataflow-machine-type '{runner.machine_type}': expected a Compute Engine machine "
            "type such as n2-standard-8"
        )
    if not runner.image:
        raise ConfigError(
            "--beam-runner dataflow needs --beam-image: the project image (kubeflow/Dockerfile), "
            "which Dataflow runs as its workers' container"
        )
    _check_image(runner.image, "--beam-image")
    return runner


def _option_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _environment_args(runner: BeamRunner) -> List[str]:
    args = [f"--environment_type={runner.environment_type}"]
    if runner.environment_config:
        args.append(f"--environment_config={runner.environment_config}")
    if runner.image:
        args.append(f"--sdk_container_image={runner.image}")  # the workers have TFX: TFX stages no sdist
    return args


def _preset_args(runner: BeamRunner) -> List[str]:
    """The arguments of a checked runner, without `extra_args`."""
    name = runner.runner
    if name == "direct":
        mode = runner.direct_mode or "in_memory"
        workers = 1 if runner.direct_workers is None else runner.direct_workers
        # Where Beam's DirectRunner would first fetch Prism from GitHub (Beam 2.7x), its in-process runner is
        # named: the one the DirectRunner of Beam 2.59 picks for these pipelines, and no download.
        named = [f"--runner={FN_API_RUNNER}"] if lane.direct_runner_tries_prism() else []
        if (mode, workers) == ("in_memory", 1):
            # Beam's own default.
            return named
        return named + [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    args = [f"--runner={RUNNER_CLASSES[name]}"]
    if name == "portable":
        return args + [f"--job_endpoint={runner.job_endpoint}"] + _environment_args(runner)
    if name == "flink":
        args.append(f"--flink_master={runner.flink_master}")
        if runner.parallelism:
            args.append(f"--parallelism={runner.parallelism}")
        return args + _environment_args(runner)
    if name == "spark":
        return args + [f"--spark_master_url={runner.spark_master_url}"] + _environment_args(runner)
    args += [f"--project={runner.project}", f"--region={runner.region}", f"--temp_location={runner.temp_location}"]
    if runner.machine_type:
        args.append(f"--machine_type={runner.machine_type}")
    return args + [f"--sdk_container_image={runner.image}"]


def beam_pipeline_args(runner: BeamRunner) -> List[str]:
    """The exact `beam_pipeline_args` of `runner` (checked first; raises ConfigError): where the workers are this
    process or its children, `IN_PROCESS_WORKERS` first, unless a dependency option of TFX's is given."""
    resolved = check(runner)
    args = _preset_args(resolved) + list(resolved.extra_args)
    named = {_option_name(arg).lstrip("-") for arg in args}
    if workers_are_remote_in(args) or named.intersection(TFX_DEPENDENCY_OPTIONS):
        return args
    return [IN_PROCESS_WORKERS] + args


def workers_are_remote_in(args: Sequence[str]) -> bool:
    """Whether a command line's Beam options (`--runner=...`, `--environment_type=...`) put the workers
    outside this process: any runner but Beam's DirectRunner, and PortableRunner with LOOPBACK workers."""
    values = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if sep and name in ("--runner", "--environment_type"):
            values[name] = value
    runner = values.get("--runner", "DirectRunner")
    if runner in (
        "DirectRunner",
        "Direct",
        "BundleBasedDirectRunner",
        "SwitchingDirectRunner",
        FN_API_RUNNER,
        "FnApiRunner",
    ):
        return False
    if runner in ("PortableRunner", "Portable"):
        return values.get("--environment_type", "DOCKER") != "LOOPBACK"
    return True


def describe(runner: BeamRunner) -> str:
    """One line for the console: the runner and where its workers are."""
    resolved = check(runner)
    name = resolved.runner
    if name == "direct":
        workers = 1 if resolved.direct_workers is None else resolved.direct_workers
        count = "one worker per core" if workers == 0 else f"{workers} worker" + ("s" if workers > 1 else "")
        return f"direct ({resolved.direct_mode or 'in_memory'}, {count})"
    where = {
        "portable": f"job service {resolved.job_endpoint}",
        "flink": f"Flink at {resolved.flink_master}",
        "spark": f"Spark at {resolved.spark_master_url}",
        "dataflow": f"Dataflow, {resolved.project} in {resolved.region}",
    }[name]
    env = (
        "workers in this process (LOOPBACK)"
        if resolved.environment_type == "LOOPBACK"
        else f"workers run {resolved.image}"
    )
    return f"{name} ({where}; {env})"


def beam_runner_of(beam: Optional[BeamRunner], beam_mode: str, beam_workers: int) -> BeamRunner:
    """`beam`, or the DirectRunner with `beam_mode` and `beam_workers` when it is None."""
    return beam if beam is not None else BeamRunner(direct_mode=beam_mode, direct_workers=beam_workers)


def split_beam_runner(beam: Optional[BeamRunner], beam_mode: str, beam_workers: int):
    """(beam, beam_mode, beam_workers) with one source for each setting: a direct `beam` becomes None and its
    mode and workers the config's. Raises ConfigError naming the flag at fault."""
    runner = check(beam_runner_of(beam, beam_mode, beam_workers))
    if runner.runner != "direct":
        return runner, beam_mode, beam_workers
    workers = 1 if runner.direct_workers is None else runner.direct_workers
    return None, runner.direct_mode or "in_memory", workers
