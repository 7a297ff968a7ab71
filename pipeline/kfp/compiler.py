"""Compiles `create_pipeline` for Kubeflow Pipelines v2 (open source) with TFX's `KubeflowV2DagRunner`.

The compiled file is a KFP PipelineSpec (first YAML document) and its Kubernetes platform spec (second
document), what `kfp.Client` uploads and runs. On top of what TFX emits, the compiler:
- builds the pipeline with only container steps: the open-source backend runs no resolver, so the baselines
  (the model to beat, the data to compare with) come from the `ServedBaseline` step, which reads the serving
  directory; the schema travels inside the spec (compiling needs no access to the store);
- exposes the per-run knobs as pipeline parameters with defaults (TFX leaves the defaults out of a bare spec);
- sets the default pipeline root (TFX puts it only in a PipelineJob, which KFP does not take);
- requests `nvidia.com/gpu` for the Trainer, with optional node selector and tolerations, and CPU and memory
  for every step;
- runs every step through `tfxflow.pipeline.kfp.entrypoint` (artifact types restored, artifacts on local paths);
- gives the steps the object store's endpoint and credentials (a Kubernetes secret) for what is not an
  artifact: the data folder, the Trainer's backup, the serving directory;
- never caches CsvExampleGen (a KFP cache key covers the data folder's path, not the files in it),
  ServedBaseline (the serving directory changes between runs) nor MlflowStart (one MLflow run per run);
- drops TFX's ExampleGen `lifecycle.preCacheCheck` hook (Vertex AI's; open-source KFP never runs it);
- gives the tracking steps their MLflow URI from the environment: a plain value or a Kubernetes secret;
- refuses, before writing, a spec the KFP backend would refuse (pipeline/kfp/spec_check/);
- with a module file of the user's, stages the wheel TFX makes of it under `<pipeline root>/_wheels/` itself
  (TFX writes it with TensorFlow's file I/O, which has no S3 file system), so the steps that import it
  (Transform, Trainer) find it by URI; this is the only thing compiling writes to the store, with the
  compiling machine's credentials and endpoint (AWS_ENDPOINT_URL for minio:// and s3://).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Dict, Mapping, Optional, Sequence, Tuple

from tfxflow.components import lane, names, object_store
from tfxflow.components.model.checkpoints import Checkpoint
from tfxflow.components.settings import setting
from tfxflow.components.tracking import mlflow_auth
from tfxflow.components.tracking import mlflow_runs as tracking_lib
from tfxflow.pipeline import beam_runners
from tfxflow.pipeline.beam_runners import BeamRunner
from tfxflow.pipeline.config import (
    DEFAULT_TRACKING_WAIT_S,
    ConfigError,
    SharedConfig,
    TrainingConfig,
    check_tuning,
    check_user_trainer,
    resolve_shared,
)
from tfxflow.pipeline.inputs import resolve_module_label
from tfxflow.pipeline.kfp import entrypoint
from tfxflow.pipeline.kfp import spec_check as kfp_check
from tfxflow.pipeline.kfp import training_job as training_job_lib
from tfxflow.pipeline.kfp.launcher_config import LAUNCHER_CONFIG_MAP, OBJECT_STORE_KEYS, launcher_config_map
from tfxflow.pipeline.staging import tracking_params
from tfxflow.pipeline.tracking_store import TRACKING_ENV

GPU_RESOURCE = "nvidia.com/gpu"
SERVING_PVC = "tf-serving-models"  # kubeflow/serving/'s claim
ENTRYPOINT = ("python", "-m", "tfxflow.pipeline.kfp.entrypoint")
# Resolved by KFP backends 2.5 and later (kubeflow/pipelines#11599); MlflowStart falls back to its output
# folder on older ones.
RUN_KEY = "{{$.pipeline_job_uuid}}"
NEVER_CACHED = (names.MLFLOW_START, names.EXAMPLE_GEN, names.SERVED_BASELINE)
PIPELINE_ROOT_SCHEMES = object_store.REMOTE_SCHEMES  # what KFP's launcher uploads to (launcher_v2.go)
# An open-source Kubeflow install's object store, as its launcher finds it (backend/src/v2/objectstore/config.go,
# config/env.go): MinIO's `minio-service` up to 2.15 (2.15 runs SeaweedFS behind that name), SeaweedFS's own
# service from 2.16 (kubeflow/pipelines#12613 removed the alias). The steps' own S3 calls use the same one.
MINIO_ENDPOINT = object_store.KUBEFLOW_MINIO_ENDPOINT
SEAWEEDFS_ENDPOINT = object_store.KUBEFLOW_SEAWEEDFS_ENDPOINT
# The backend releases (kubeflow/pipelines tags: 2.0.0 to 2.5.0, then 2.14.0 to 2.17.0).
KFP_VERSIONS = ("2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.14", "2.15", "2.16", "2.17")
PROFILE_POLICY_FROM = 15  # KFP 2.15: per-profile store keys and prefixes (pipelines-profile-controller/sync.py)
KFP_VERSION = "2.17"  # the current release
DEFAULT_PIPELINE_ROOT = "minio://mlpipeline/v2/artifacts"  # backend/src/v2/config/env.go
BUCKET = "mlpipeline"
# The secret the launcher reads (copied into every profile namespace); its keys become boto3's standard
# variables in the steps.
OBJECT_STORE_SECRET = object_store.KUBEFLOW_CREDENTIALS_SECRET
TRACKING_STEPS = (names.MLFLOW_START, names.MLFLOW_RECORD, names.MLFLOW_FINISH)
TOLERATION_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclasses.dataclass(frozen=True)
class Toleration:
    """A Kubernetes toleration, parsed from kubectl's taint syntax: `key=value:Effect`, `key:Effect`, `key`."""

    key: str
    operator: str = "Exists"
    value: str = ""
    effect: str = ""

    @classmethod
    def parse(cls, text: str) -> "Toleration":
        body, _, effect = text.partition(":")
        key, has_value, value = body.partition("=")
        toleration = cls(
            key=key.strip(), operator="Equal" if has_value else "Exists", value=value.strip(), effect=effect.strip()
        )
        if not toleration.key or toleration.effect not in TOLERATION_EFFECTS:
            raise ConfigError(
                f"--toleration '{text}': expected key[=value][:effect] with effect one of "
                f"{[e for e in TOLERATION_EFFECTS if e]}"
            )
        return toleration

    def to_dict(self) -> dict:
        data = {"key": self.key, "operator": self.operator}
        if self.value:
            data["value"] = self.value
        if self.effect:
            data["effect"] = self.effect
        return data


@dataclasses.dataclass(frozen=True, kw_only=True)
class KubeflowConfig(SharedConfig):
    """Everything a compiled Kubeflow pipeline needs, validated: the fields a local run has too (SharedConfig),
    and the cluster's. Paths are object-store URIs (gs://, s3://) or paths inside the containers (a mounted
    volume); `data_root` and `serving_data_root` are the defaults of the pipeline parameters of those names,
    `schema_path` the local curated schema, whose content is compiled into the spec."""

    image: str
    pipeline_root: str  # gs://, s3:// or minio:// (KFP's launcher uploads nowhere else)
    serving_dir: str
    serving_data_root: str = ""  # empty: no skew check
    beam_mode: str = "multi_processing"  # the DirectRunner's in each step's pod, when `beam` is None
    beam_workers: int = 0  # 0: one per core of the step's pod
    gpus: int = setting(1, metavar="N", help="GPUs the Trainer requests (0: none)")
    gpu_resource: str = setting(GPU_RESOURCE, metavar="NAME", help="Kubernetes resource name of the GPU")
    trainer_cpu: str = setting("4", metavar="CPUS", help="CPUs of the Trainer (request and limit; '': none)")
    trainer_memory: str = setting("16G", metavar="SIZE", help="memory of the Trainer (request and limit)")
    step_cpu: str = setting("2", metavar="CPUS", help="CPUs of every other step (request and limit; '': none)")
    step_memory: str = setting("8G", metavar="SIZE", help="memory of every other step (request and limit)")
    node_selector: Tuple[Tuple[str, str], ...] = ()
    tolerations: Tuple[Toleration, ...] = ()
    tracking: bool = True
    tracking_wait_s: float = DEFAULT_TRACKING_WAIT_S  # per MLflow call of a tracking step
    mlflow_uri: str = ""  # set as $MLFLOW_TRACKING_URI in the tracking steps
    mlflow_secret: str = setting(
        "",
        metavar="SECRET",
        help="Kubernetes secret whose keys (--mlflow-secret-key) become the tracking steps' environment",
    )
    mlflow_secret_keys: Tuple[str, ...] = (TRACKING_ENV,)
    # The command line's default is kubeflow/serving/'s claim (SERVING_PVC); a config built in code has none.
    serving_pvc: str = setting(
        "", metavar="CLAIM", help="PersistentVolumeClaim of the serving directory (kubeflow/serving/); '': none"
    )
    serving_mount: str = setting("/serving", metavar="DIR", help="where --serving-pvc is mounted")
    data_pvc: str = setting(
        "", metavar="CLAIM", help="PersistentVolumeClaim holding --data-root and --serving-data when they are paths"
    )
    data_mount: str = setting("/data", metavar="DIR", help="where --data-pvc is mounted")
    # s3:// and minio:// locations: the endpoint (empty: AWS for s3://, the install's store for minio://) and
    # the secret holding the credentials (empty: the pod's own identity, e.g. IAM roles for service accounts).
    s3_endpoint: str = setting(
        "",
        metavar="URL",
        help="S3 endpoint of s3:// and minio:// locations (default for minio://: the --kfp-version's store)",
    )
    kfp_version: str = setting(
        KFP_VERSION,
        metavar="X.Y",
        choices=KFP_VERSIONS,
        help=f"the KFP backend the runs go to; picks its object store for minio:// ({MINIO_ENDPOINT} up to 2.15, "
        f"{SEAWEEDFS_ENDPOINT} from 2.16)",
    )
    s3_region: str = setting(
        "us-east-1",
        metavar="REGION",
        help="region of s3:// locations (the launcher's S3 client needs one; S3-compatible stores accept any)",
    )
    namespace: str = setting(
        "",
        metavar="NAME",
        help="the profile namespace of multi-user Kubeflow the runs belong to: from KFP 2.15, minio:// paths must "
        "be the profile's own, and the default --pipeline-root is its root",
    )
    training_job: str = setting(
        training_job_lib.TFJOB,
        choices=training_job_lib.KINDS,
        help="with --workers N>1, the job the Trainer step creates: tfjob (Training Operator v1: a Chief and N-1 "
        "Workers) or trainjob (Trainer v2, on kubeflow/training/'s ClusterTrainingRuntime)",
    )
    training_job_timeout: int = setting(
        0,
        metavar="SECONDS",
        help="with --workers N>1, the training job's activeDeadlineSeconds; past it the step deletes the job and "
        "fails (0: none)",
    )
    object_store_secret: str = setting(
        OBJECT_STORE_SECRET,
        metavar="SECRET",
        help="secret with the keys accesskey and secretkey for s3:// and minio:// ('': the pod's own identity)",
    )

    @property
    def trainer_backup_dir(self) -> str:
        return f"{self.pipeline_root.rstrip('/')}/_trainer_backup"

    @property
    def workers(self) -> int:
        """The Trainer's workers: more than one makes its step create a training job (pipeline/kfp/job_launcher.py)."""
        return self.training.cluster.workers

    @property
    def uses_s3(self) -> bool:
        """Whether any location is on an S3-compatible store, which the steps reach with boto3."""
        return any(
            _scheme(uri) in ("s3", "minio")
            for uri in (
                self.pipeline_root,
                self.data_root,
                self.serving_dir,
                self.serving_data_root,
                self.training.init_checkpoint or "",
            )
        )

    @property
    def endpoint(self) -> str:
        if self.s3_endpoint:
            return self.s3_endpoint
        return (
            kfp_object_store(self.kfp_version)
            if "minio"
            in {
                _scheme(self.pipeline_root),
                _scheme(self.data_root),
                _scheme(self.serving_dir),
                _scheme(self.serving_data_root),
                _scheme(self.training.init_checkpoint or ""),
            }
            else ""
        )

    def parameter_defaults(self) -> Dict[str, str]:
        """The pipeline parameters a run or a schedule may set, with their compiled defaults."""
        return {
            "data_root": self.data_root,
            # 0: the Trainer's own count (--train-epochs passes over the training split)
            "train_args": json.dumps({"num_steps": self.training.train_steps or 0}),
            "serving_data_root": self.serving_data_root,
            "allowed_anomaly_types": ",".join(self.allowed_anomaly_types),
        }


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def kfp_object_store(version: str) -> str:
    """The endpoint KFP `version`'s launcher uses for minio:// (MinIO's service up to 2.15, SeaweedFS's after)."""
    return MINIO_ENDPOINT if _minor(version) <= 15 else SEAWEEDFS_ENDPOINT


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def profile_paths_apply(version: str) -> bool:
    """Whether KFP `version` gives each profile its own store prefixes (2.15 and later)."""
    return _minor(version) >= PROFILE_POLICY_FROM


def profile_root(namespace: str) -> str:
    """A profile's default pipeline root (pipelines-profile-controller/sync.py, `defaultPipelineRoot`)."""
    return f"minio://{BUCKET}/private-artifacts/{namespace}/v2/artifacts"


def profile_prefixes(namespace: str) -> Tuple[str, ...]:
    """Where a profile's object-store key may write in the `mlpipeline` bucket (sync.py's policy, KFP 2.15+)."""
    return ("artifacts/", f"private-artifacts/{namespace}/", f"private/{namespace}/", "shared/")


def usable_gpus(config: "KubeflowConfig") -> int:
    """The GPUs the Trainer's pod gets and may use: --gpus, fewer when --visible-gpus names fewer."""
    visible = config.training.hardware.visible_gpus
    return config.gpus if visible is None else min(config.gpus, len(visible))


def _check_profile_paths(config: "KubeflowConfig") -> None:
    """On multi-user Kubeflow the profile's key writes and reads only its own prefixes of the bucket: a
    location outside them is refused by the store at the first upload, after the run started."""
    allowed = profile_prefixes(config.namespace)
    for flag, uri in (
        ("--pipeline-root", config.pipeline_root),
        ("--data-root", config.data_root),
        ("--serving-dir", config.serving_dir),
        ("--serving-data", config.serving_data_root),
    ):
        if _scheme(uri) != "minio":
            continue
        bucket, _, key = uri.split("://", 1)[1].partition("/")
        if bucket == BUCKET and not (key.rstrip("/") + "/").startswith(allowed):
            raise ConfigError(
                f"{flag} '{uri}': profile '{config.namespace}' may only write minio://{BUCKET}/ under "
                f"{', '.join(p + '*' for p in allowed)} (the profile controller's policy, KFP 2.15+); e.g. "
                + (
                    profile_root(config.namespace)
                    if flag == "--pipeline-root"
                    else f"minio://{BUCKET}/private/{config.namespace}/data"
                )
            )


def _scheme(uri: str) -> str:
    return uri.split("://", 1)[0] if "://" in uri else ""


def _location(flag: str, uri: str, claim: str, mount: str, claim_flag: str) -> None:
    """An object-store URI, or an absolute path on the volume `claim` mounts at `mount`."""
    if not uri:
        return
    if "://" in uri:
        if _scheme(uri) not in PIPELINE_ROOT_SCHEMES:
            raise ConfigError(
                f"{flag} '{uri}': the steps read gs://, s3:// and minio:// URIs, or paths on a mounted volume"
            )
        return
    if not uri.startswith("/"):
        raise ConfigError(
            f"{flag} '{uri}': an object-store URI (gs://, s3://, minio://) or an absolute path on "
            "a volume the steps mount"
        )
    if not claim:
        raise ConfigError(
            f"{flag} {uri} is a path: name the claim that holds it ({claim_flag}), or give an object-store URI"
        )
    if not (uri.rstrip("/") + "/").startswith(mount.rstrip("/") + "/"):
        raise ConfigError(f"{flag} {uri} is not on the volume {claim_flag} mounts at {mount}")


def _check_tracking_credentials(config: "KubeflowConfig") -> None:
    """No credential in the compiled spec: they come from --mlflow-secret's keys, which must be names MLflow's
    client reads (a misspelt key would leave the steps unauthenticated without a word)."""
    if mlflow_auth.split_credentials(config.mlflow_uri)[1] is not None:
        raise ConfigError(
            f"--mlflow-uri {mlflow_auth.redact_uri(config.mlflow_uri)} carries credentials, which would be "
            "written into the compiled spec in clear: give it without them and put them in --mlflow-secret "
            f"(keys {mlflow_auth.USERNAME_ENV} and {mlflow_auth.PASSWORD_ENV}, or {mlflow_auth.TOKEN_ENV}, each "
            "named with --mlflow-secret-key)"
        )
    if not config.mlflow_secret:
        return
    keys = config.mlflow_secret_keys
    for key in keys:
        if key.startswith("MLFLOW_TRACKING_") and key not in mlflow_auth.CLIENT_ENV:
            raise ConfigError(
                f"--mlflow-secret-key {key}: not a variable MLflow's client reads; "
                f"expected one of {', '.join(mlflow_auth.CLIENT_ENV)}"
            )
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--mlflow-secret-key: a key is given twice ({', '.join(keys)})")
    if (mlflow_auth.USERNAME_ENV in keys) != (mlflow_auth.PASSWORD_ENV in keys):
        raise ConfigError(
            f"--mlflow-secret-key: basic auth needs both {mlflow_auth.USERNAME_ENV} and {mlflow_auth.PASSWORD_ENV}"
        )
    if TRACKING_ENV not in keys and not config.mlflow_uri:
        raise ConfigError(
            f"--mlflow-secret {config.mlflow_secret}: the tracking steps get no ${TRACKING_ENV}: add "
            f"--mlflow-secret-key {TRACKING_ENV}, or pass --mlflow-uri"
        )


def check_kubeflow_config(config: KubeflowConfig) -> KubeflowConfig:
    """Raises ConfigError naming the flag at fault; returns the config with defaults filled in."""
    last = config.image.rsplit("/", 1)[-1]
    if not ("@" in last or (":" in last and not last.endswith(":latest"))):
        raise ConfigError(
            f"--image '{config.image}': give a pinned tag or digest (repo/name:tag); a moving tag "
            "runs different code in each step of one run"
        )
    if _scheme(config.pipeline_root) not in PIPELINE_ROOT_SCHEMES:
        raise ConfigError(
            f"--pipeline-root '{config.pipeline_root}': KFP's launcher stores artifacts only under "
            "gs://, s3:// or minio:// (launcher_v2.go refuses other output URIs); e.g. "
            "minio://mlpipeline/v2/artifacts on an open-source install"
        )
    _location("--data-root", config.data_root, config.data_pvc, config.data_mount, "--data-pvc")
    _location("--serving-data", config.serving_data_root, config.data_pvc, config.data_mount, "--data-pvc")
    _location("--serving-dir", config.serving_dir, config.serving_pvc, config.serving_mount, "--serving-pvc")
    if config.gpus < 0:
        raise ConfigError("--gpus must be >= 0")
    if config.kfp_version not in KFP_VERSIONS:
        raise ConfigError(f"--kfp-version '{config.kfp_version}': one of {', '.join(KFP_VERSIONS)}")
    if config.s3_endpoint and not re.fullmatch(r"https?://[^/\s:]+(:[0-9]+)?/?", config.s3_endpoint):
        raise ConfigError(
            f"--s3-endpoint '{config.s3_endpoint}': expected http://host[:port] or https://host[:port] "
            "(the steps' S3 client and the launcher's providers entry both need the scheme)"
        )
    if config.namespace:
        if not _K8S_NAME.match(config.namespace):
            raise ConfigError(f"--namespace '{config.namespace}' is not a valid Kubernetes namespace name")
        if profile_paths_apply(config.kfp_version):
            _check_profile_paths(config)
    # The compile reads the checkpoint's description where the steps read its files: an object store both reach.
    checkpoint = config.training.init_checkpoint
    if checkpoint and _scheme(checkpoint) not in PIPELINE_ROOT_SCHEMES:
        raise ConfigError(
            f"--init-checkpoint {checkpoint}: the Trainer and Transform pods read it, and the compile checks it: "
            "give its gs://, s3:// or minio:// URI"
        )
    check_user_trainer(config.training, config.user_module)
    features = config.features
    if features is not None:
        features = resolve_module_label(features, config.user_module, config.schema_path)
    training, features = resolve_shared(config.training, config.evaluation, features)
    check_tuning(config.tuning, config.user_module, training, features)
    for key in ("text_vocab_file", "text_merges_file"):
        if features is not None and features.text and getattr(features, key):
            _location(
                f"{features.source}: {key}", getattr(features, key), config.data_pvc, config.data_mount, "--data-pvc"
            )
    config = dataclasses.replace(config, training=training, features=features)
    beam, beam_mode, beam_workers = beam_runners.split_beam_runner(config.beam, config.beam_mode, config.beam_workers)
    if beam is not None and beam.workers_are_remote:
        _remote_worker_locations(config, beam)
    if config.training_job_timeout < 0:
        raise ConfigError(f"--training-job-timeout {config.training_job_timeout}: expected 0 (none) or seconds")
    for name in (config.mlflow_secret, config.serving_pvc, config.data_pvc, config.object_store_secret):
        if name and not _K8S_NAME.match(name):
            raise ConfigError(f"'{name}' is not a valid Kubernetes object name")
    if config.tracking and not (config.mlflow_uri or config.mlflow_secret):
        raise ConfigError(
            "tracking needs --mlflow-uri or --mlflow-secret (the tracking steps read "
            f"${TRACKING_ENV} from either), or --tracking off"
        )
    if config.tracking:
        _check_tracking_credentials(config)
    for flag, size in (("--trainer-memory", config.trainer_memory), ("--step-memory", config.step_memory)):
        if size:
            _gigabytes(size, flag)
    for flag, cpu in (("--trainer-cpu", config.trainer_cpu), ("--step-cpu", config.step_cpu)):
        if cpu and not re.fullmatch(r"[0-9]+(\.[0-9]+)?", cpu):
            raise ConfigError(f"{flag} '{cpu}': expected a number of CPUs such as 2 or 0.5")
    # The Trainer stops at once, naming what to check, when its pod got fewer GPUs than it requested.
    hardware = config.training.hardware
    training = dataclasses.replace(
        config.training,
        hardware=dataclasses.replace(hardware, require_gpus=max(hardware.require_gpus, usable_gpus(config))),
    )
    return dataclasses.replace(
        config,
        training=training,
        experiment=config.experiment or config.pipeline_name,
        beam=beam,
        beam_mode=beam_mode,
        beam_workers=beam_workers,
    )


def _remote_worker_locations(config: KubeflowConfig, beam: BeamRunner) -> None:
    """Beam workers outside the step's pod read the data and read and write the artifacts themselves (the entry
    point hands a Beam step the gs:// URIs instead of the launcher's local copies): so both must be on GCS,
    which TensorFlow and Beam read natively. TensorFlow 2.16 has no S3 file system, and a claim mounted in
    the step's pod is not mounted on the workers."""
    for flag, uri in (("--pipeline-root", config.pipeline_root), ("--data-root", config.data_root)):
        if _scheme(uri) != "gs":
            raise ConfigError(
                f"--beam-runner {beam.runner} runs the Beam workers outside the step's pod, and they "
                f"read and write {flag} themselves: it must be a gs:// URI, got '{uri}' (TensorFlow "
                "has no S3 file system, and the pod's volumes are not mounted on the workers); "
                "use --beam-runner direct or portable with LOOPBACK workers otherwise"
            )


def build_pipeline(config: KubeflowConfig, schema_text: str, params: Optional[Mapping] = None):
    """The TFX pipeline of `create_pipeline` with pipeline parameters and the Trainer's GPU request;
    `schema_text` is the content of `config.schema_path`, carried by the spec."""
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.data_types import RuntimeParameter

    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.pipeline.definition import Orchestrator, create_pipeline

    defaults = config.parameter_defaults()

    def parameter(name: str):
        return RuntimeParameter(name=name, ptype=str, default=defaults[name])

    tracking = None
    if config.tracking:
        # A step has no outbox: a server that stops answering fails it, naming the server.
        tracking = tracking_lib.TrackingSettings(
            uri="", experiment=config.experiment, run_key=RUN_KEY, params=params or {}, wait_s=config.tracking_wait_s
        )
    pipeline = create_pipeline(
        config,
        orchestrator=Orchestrator.kubeflow(schema_text, {name: parameter(name) for name in defaults}),
        pipeline_root=config.pipeline_root,
        serving_dir=config.serving_dir,
        trainer_backup_dir=config.trainer_backup_dir,
        tracking=tracking,
    )
    resources = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec()
    if config.gpus:
        # KFP's driver takes the accelerator type as the Kubernetes resource name of the limit.
        resources.accelerator.type = config.gpu_resource
        resources.accelerator.count = config.gpus
    if resources.ByteSize():
        for node in pipeline.components:
            # a trial trains as the Trainer does; with several workers the Trainer's replicas get the GPUs
            if node.id == names.TUNER or (node.id == names.TRAINER and config.workers == 1):
                node.with_platform_config(resources)
    return pipeline


def _gigabytes(text: str, flag: str = "--trainer-memory") -> float:
    match = re.fullmatch(r"\s*([0-9.]+)\s*([GgMm]i?)?\s*", text)
    if not match:
        raise ConfigError(f"{flag} '{text}': expected a size such as 32G or 16384M")
    value, unit = float(match.group(1)), (match.group(2) or "G").upper()
    return value / 1024 if unit.startswith("M") else value


def _titles(component: Mapping) -> Dict[str, str]:
    """{artifact key: TFX type title} of a compiled component's inputs and outputs."""
    titles = {}
    for side in ("inputDefinitions", "outputDefinitions"):
        for key, spec in (component.get(side, {}).get("artifacts") or {}).items():
            title = entrypoint.artifact_title(spec.get("artifactType", {}))
            if title:
                titles[key] = title
    return titles


def _resources(cpu: str, memory: str) -> dict:
    """A step's CPU and memory, requested and limited alike (KFP spec fields; memory in gigabytes)."""
    resources = {}
    if cpu:
        resources.update(cpuRequest=float(cpu), cpuLimit=float(cpu))
    if memory:
        resources.update(memoryRequest=_gigabytes(memory), memoryLimit=_gigabytes(memory))
    return resources


def finish_spec(spec: dict, runtime_values: Mapping, config: KubeflowConfig) -> Tuple[dict, dict]:
    """Adds what TFX's compiler leaves out (see the module docstring); returns the pipeline spec and the
    Kubernetes platform spec."""
    spec["defaultPipelineRoot"] = config.pipeline_root
    for name, definition in spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        if name in runtime_values:
            definition["defaultValue"] = runtime_values[name]
            definition["isOptional"] = True
    tasks = spec["root"]["dag"]["tasks"]
    for name in NEVER_CACHED:
        if name in tasks:
            tasks[name]["cachingOptions"] = {"enableCache": False}
    executors = spec["deploymentSpec"]["executors"]
    platform: Dict[str, dict] = {}
    for name, component in spec["components"].items():
        label = component.get("executorLabel")
        container = executors.get(label, {}).get("container")
        if container is None:
            continue
        container.pop("lifecycle", None)
        titles = _titles(component)
        if titles:
            container["args"] = [entrypoint.TYPES_FLAG, json.dumps(titles, sort_keys=True)] + container["args"]
        container["args"] = [entrypoint.LANE_FLAG, entrypoint.compiled_lane()] + container["args"]
        env, secrets = [], []
        # Not the tracking steps: AWS_ENDPOINT_URL would send MLflow's own S3 artifact uploads to this store.
        if config.uses_s3 and name not in TRACKING_STEPS:
            if config.endpoint:
                env.append({"name": "AWS_ENDPOINT_URL", "value": config.endpoint})
            if config.object_store_secret:
                secrets.append(
                    {
                        "secretName": config.object_store_secret,
                        "keyToEnv": [{"secretKey": key, "envVar": var} for key, var in OBJECT_STORE_KEYS],
                    }
                )
        if name in TRACKING_STEPS and config.tracking:
            if config.mlflow_uri:
                env.append({"name": TRACKING_ENV, "value": config.mlflow_uri})
            if config.mlflow_secret:
                secrets.append(
                    {
                        "secretName": config.mlflow_secret,
                        "keyToEnv": [{"secretKey": key, "envVar": key} for key in config.mlflow_secret_keys],
                    }
                )
        if env:
            container["env"] = env
        if secrets:
            platform.setdefault(label, {})["secretAsEnv"] = secrets
        resources = container.setdefault("resources", {})
        if name == names.TRAINER and config.workers > 1:
            _launch_training_job(container, env, secrets, config)
            resources.update(_resources(config.step_cpu, config.step_memory))
        elif name in (names.TUNER, names.TRAINER):
            resources.update(_resources(config.trainer_cpu, config.trainer_memory))
            if config.node_selector:
                platform.setdefault(label, {})["nodeSelector"] = {"labels": dict(config.node_selector)}
            if config.tolerations:
                platform.setdefault(label, {})["tolerations"] = [t.to_dict() for t in config.tolerations]
        else:
            resources.update(_resources(config.step_cpu, config.step_memory))
        if not resources:
            del container["resources"]
        mounts = []
        if name in (names.PUSHER, names.SERVED_BASELINE) and config.serving_pvc and not _scheme(config.serving_dir):
            mounts.append({"constant": config.serving_pvc, "mountPath": config.serving_mount})
        if name in (names.EXAMPLE_GEN, names.DATA_GATE) and config.data_pvc:
            mounts.append({"constant": config.data_pvc, "mountPath": config.data_mount})
        if mounts:
            platform.setdefault(label, {})["pvcMount"] = mounts
    platform_spec = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": platform}}}} if platform else {}
    return spec, platform_spec


def job_template(
    config: KubeflowConfig, env: Sequence[Mapping], secrets: Sequence[Mapping]
) -> training_job_lib.JobTemplate:
    """What every replica of the Trainer's training job gets: the one-pod Trainer's image, environment, secrets
    (as secretKeyRef variables), resources (its GPUs per replica) and placement."""
    variables = [dict(e) for e in env]
    for secret in secrets:
        for pair in secret["keyToEnv"]:
            variables.append(
                {
                    "name": pair["envVar"],
                    "valueFrom": {"secretKeyRef": {"name": secret["secretName"], "key": pair["secretKey"]}},
                }
            )
    limits: Dict[str, str] = {}
    if config.trainer_cpu:
        limits["cpu"] = config.trainer_cpu
    if config.trainer_memory:  # KFP's memoryLimit unit, gigabytes (10^9), whatever spelling the flag took
        limits["memory"] = f"{_gigabytes(config.trainer_memory):g}G"
    requests = dict(limits)
    if config.gpus:
        limits[config.gpu_resource] = str(config.gpus)
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    return training_job_lib.JobTemplate(
        kind=config.training_job,
        workers=config.workers,
        image=config.image,
        env=tuple(variables),
        resources=resources,
        node_selector=dict(config.node_selector),
        tolerations=tuple(t.to_dict() for t in config.tolerations),
        namespace=config.namespace,
        timeout_s=config.training_job_timeout,
        pipeline_name=config.pipeline_name,
    )


def _launch_training_job(container: dict, env: Sequence[Mapping], secrets: Sequence[Mapping], config) -> None:
    """Turns the Trainer's container into the launcher of its training job (the replicas run its arguments)."""
    template = job_template(config, env, secrets)
    container["command"] = ["python", "-m", training_job_lib.LAUNCHER_MODULE]
    container["args"] = training_job_lib.launcher_args(template, container["args"])


def stage_user_module(pipeline, pipeline_root: str, upload: bool = True) -> Tuple[str, ...]:
    """Builds the wheel TFX makes of a module file (its folder's Python files) for each component that takes
    one, uploads it to `<pipeline_root>/_wheels/`, and points the component's `module_path` at it, as TFX's
    own staging does for a gs:// root; returns the URIs. The step's entry point copies the wheel to the pod
    before TFX installs it (pipeline/kfp/entrypoint.py)."""
    import tempfile

    from tfx.components.util import udf_utils

    staged = []
    for component in pipeline.components:
        module_file = component.exec_properties.get("module_file")
        if not isinstance(module_file, str) or not module_file:
            continue
        with tempfile.TemporaryDirectory(prefix="tfxflow-wheel-") as local_root:
            dist, module_path = udf_utils.package_user_module_file(component.id, module_file, local_root)
            remote = f"{pipeline_root.rstrip('/')}/_wheels/{os.path.basename(dist)}"
            try:
                if upload:
                    object_store.upload(dist, remote)
            except object_store.ObjectStoreError as err:
                raise ConfigError(
                    f"--module-file {module_file}: its wheel could not be staged at {remote}: {err}"
                ) from err
        component.spec.exec_properties["module_path"] = f"{module_path.split('@', 1)[0]}@{remote}"
        component.spec.exec_properties["module_file"] = None  # TFX's own staging then has nothing to do
        staged.append(remote)
    return tuple(dict.fromkeys(staged))


@dataclasses.dataclass(frozen=True)
class CompileResult:
    path: str
    schema_sha256: str
    parameters: Dict[str, str]
    steps: Tuple[str, ...]
    seconds: float
    staged: Tuple[str, ...] = ()  # a module file's wheels under the pipeline root
    launcher_config: str = ""  # the kfp-launcher ConfigMap written beside the spec (s3:// roots)
    pretrained: str = ""  # what the Trainer fine-tunes (--init-checkpoint), in words


def compile_pipeline(config: KubeflowConfig, output_path: str, stage: bool = True) -> CompileResult:
    """Compiles `config` to `output_path` (YAML: the pipeline spec, then the platform spec when there is one).
    The schema goes into the spec; the only store read is an --init-checkpoint's description (its configs,
    vocabulary and the weights' header or index), checked before anything is written. Raises ConfigError,
    writing nothing, when the checkpoint does not fit or KFP's backend would refuse the result."""
    import hashlib
    import time

    import yaml
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    started = time.monotonic()
    config = check_kubeflow_config(config)
    with open(config.schema_path, encoding="utf-8") as f:
        schema_text = f.read()
    schema_sha256 = hashlib.sha256(schema_text.encode("utf-8")).hexdigest()[:16]
    params = tracking_params(config, config.schema_path) if config.tracking else None
    if params:
        params["pipeline"]["orchestrator"] = "kubeflow"
    pipeline = build_pipeline(config, schema_text, params)
    staged = stage_user_module(pipeline, config.pipeline_root, upload=stage) if config.user_module else ()
    runner = v2.KubeflowV2DagRunner(
        v2.KubeflowV2DagRunnerConfig(
            default_image=config.image, default_commands=list(ENTRYPOINT), use_pipeline_spec_2_1=True
        )
    )
    runtime_values = config.parameter_defaults()
    job = runner.run(pipeline, parameter_values=runtime_values, write_out=False)
    spec, platform_spec = finish_spec(job["pipelineSpec"], runtime_values, config)
    documents = [spec] + ([platform_spec] if platform_spec else [])
    problems = kfp_check.check_spec(documents)
    if problems:
        raise ConfigError(kfp_check.format_problems(output_path, problems))
    header = (
        f"# {config.pipeline_name}: compiled by `tfxflow kubeflow compile` from create_pipeline\n"
        f"# image: {config.image}\n# lane: {lane_line()}\n# parameters: {', '.join(sorted(runtime_values))}\n"
    )
    with open(output_path, "w", encoding="utf-8") as f:
        f.write(header)
        yaml.safe_dump_all(documents, f, sort_keys=True)
    launcher = launcher_config_map(config)
    launcher_path = ""
    if launcher is not None:
        launcher_path = os.path.splitext(output_path)[0] + f".{LAUNCHER_CONFIG_MAP}.yaml"
        with open(launcher_path, "w", encoding="utf-8") as f:
            f.write(f"# kubectl apply -f {os.path.basename(launcher_path)}: KFP's launcher reads s3:// roots by it\n")
            yaml.safe_dump(launcher, f, sort_keys=True)
    return CompileResult(
        path=output_path,
        schema_sha256=schema_sha256,
        parameters=dict(runtime_values),
        steps=tuple(spec["root"]["dag"]["tasks"]),
        seconds=time.monotonic() - started,
        staged=staged,
        launcher_config=launcher_path,
        pretrained=describe_pretrained(config.training),
    )


def lane_line() -> str:
    """The lane that compiles, and the image it needs, in words (the compiled file's header, the summary)."""
    return (
        f"{lane.name()} (TFX {lane.tfx_version()}): its steps run in an image built with "
        f"--build-arg LANE={lane.name()} (kubeflow/Dockerfile)"
    )


def describe_pretrained(training: TrainingConfig) -> str:
    """e.g. "all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters) from s3://models/minilm"; "" without one."""
    if not training.pretrained:
        return ""

    return f"{Checkpoint.from_dict(training.pretrained).describe()} from {training.init_checkpoint}"


def load_spec(path: str) -> Tuple[dict, dict]:
    """The pipeline spec and the platform spec (empty when absent) of a compiled file."""
    import yaml

    with open(path, encoding="utf-8") as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    if not documents or "root" not in documents[0]:
        raise ConfigError(f"{path}: not a compiled pipeline spec")
    return documents[0], (documents[1] if len(documents) > 1 else {})


def parse_key_values(items: Sequence[str], flag: str) -> Tuple[Tuple[str, str], ...]:
    """["a=b", ...] -> (("a", "b"), ...); raises naming the flag."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} '{item}': expected KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)
