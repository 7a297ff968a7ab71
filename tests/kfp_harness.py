"""A local emulation of how open-source Kubeflow Pipelines 2.x runs a compiled pipeline spec, task by task, the
way its driver and launcher do, against an S3-compatible server (moto, standing in for MinIO) on 127.0.0.1.

It is the KFP side, written from KFP's Go source (kubeflow/pipelines at 7b70c7b9, master of 2026-08, after
2.17.0; see "Versions" at the end for what older backends do differently), not from this project's code. What
it follows, by file:

- Run creation (backend/src/apiserver/template/v2_template.go `NewV2SpecTemplate`, `validatePipelineJobInputs`;
  backend/src/v2/compiler/visitor.go `pipelineDFS.dfs`; compiler/argocompiler/argo.go `Compile`): the spec must
  have schemaVersion 2.1.0, a pipeline name and a root; every task reachable from the root needs a componentRef
  naming a component; every executor label must exist and be a container or an importer ("non-container and
  non-importer executor not implemented"); run parameters must be declared by the root, of the declared type,
  and present unless optional or defaulted; root defaults (else null for optional ones) fill the rest. Any of
  these raises `Refused` before a task runs.
- Scheduling (compiler/argocompiler/dag.go `depends`: "<task>.Succeeded" for each of `dependentTasks`, to which
  `addImplicitDependencies` added every producer an input names, an unknown one refusing the run; Argo's DAG
  then runs every task whose upstreams succeeded): tasks run one at a time in a topological order (over
  dependentTasks plus producer references); a task whose upstream did not succeed is NOT_RUN (Argo: Omitted);
  independent branches run on after a failure; the run is FAILED if any task failed.
- Pipeline root (driver/root_dag.go `RootDAG`, metadata/client.go `GetPipeline`): the run's own pipeline root
  (`run(pipeline_root=...)`, what `kfp.Client.run_pipeline(pipeline_root=...)` sends), else the `kfp-launcher`
  ConfigMap's `defaultPipelineRoot` (`LocalKfp(default_pipeline_root=...)`), else "minio://mlpipeline/v2/
  artifacts". NOTE: the backend never reads the spec's `defaultPipelineRoot`; this harness does not either.
  The run's root is `<root>/<pipeline name>/<run id>` (GenerateOutputURI).
- Driver for a container task (driver/container.go `Container`, resolve.go `resolveInputs`/
  `resolveInputParameter`/`resolveUpstreamArtifacts`, util.go `resolveContainerArgs`): input parameters from
  runtimeValue.constant (whole-value `{{$.pipeline_job_uuid}}` -> run id, `{{$.pipeline_job_name}}` -> run
  display name, `{{$.pipeline_job_resource_name}}` -> workflow name, `{{$.pipeline_task_name}}` -> task name,
  `{{$.pipeline_task_uuid}}` -> the parent DAG's execution id (sic), create/schedule time placeholders),
  componentInputParameter (the run's parameters), taskOutputParameter (the producer's output parameters); then
  the type check/conversion of `handleParamTypeValidationAndConversion` (non-strings given to STRING inputs
  become text; optional inputs without a value are left out for the launcher). Input artifacts are the
  producers' MLMD artifacts as `toRuntimeArtifact` gives them: name = the MLMD artifact id, type =
  {"instanceSchema": ""} (OutputArtifact.ToRuntimeArtifact with the empty schema GetOutputArtifactsByExecutionId
  sets), metadata = the artifact's custom properties (display_name, store_session_info, and the executor's
  metadata, converted by StructValueToMLMDValue and back: bools become 1/0, lists {"list": [...]}, structs
  {"struct": {...}}). Outputs (driver.go `provisionOutputs`, publish_logs on as the API server deploys it):
  task root `<run root>/<task>/<uuid4>`, artifact `<task root>/<key>` with name = key, the component's
  artifactType and metadata; an extra `executor-logs` artifact (system.Artifact); parameter files
  /tmp/kfp/outputs/<key>; outputFile `LocalPathForURI(task root)/output_metadata.json`. Container command and
  args get `{{$.inputs.parameters['x']}}` and IfPresent resolved (driver), then `{{$}}` and the launcher's
  placeholders (component/launcher_v2.go `compileCmdAndArgs`/`getPlaceholders`: inputs' and outputs' `.uri` and
  `.path`, `{{$.outputs.parameters['x'].output_file}}`; the command's first element only gets `{{$}}`, as in
  the Go code). `{{$}}` is the ExecutorInput in protojson form (camelCase names, maps sorted, numbers as Go
  writes them: 6.0 -> 6), after `addDefaultParams` added the component's input defaults.
- Cache (driver/cache.go `getFingerPrint`, cacheutils/cache.go `GenerateCacheKey`/`GenerateFingerPrint`): for
  tasks with cachingOptions.enableCache (and unless `cache_disabled`), the fingerprint is the sha256 of the
  CacheKey (input artifact names = MLMD ids, input parameter values, output artifact specs without URI, output
  parameter types, command+args, image, sorted PVC names; or componentRef name + custom cacheKey) as
  encoding/json re-formats its protojson. A hit (the newest SUCCEEDED execution of this LocalKfp with that
  fingerprint, same pipeline name and namespace, across runs) reuses that execution's output parameters and
  MLMD artifacts (same ids and URIs) without running: state CACHED. Only executions that ran and succeeded
  with a fingerprint create cache entries (launcher_v2.go `Execute`).
- Pod (driver/driver.go `initPodSpecPatch`, driver/k8s.go `extendPodSpecPatch`/`makeVolumeMountPatch`;
  argocompiler/common.go `commonEnvs`): environment = os.environ (or `LocalKfp(base_env=...)`) +
  `LocalKfp(env=...)` + KFP_POD_NAME/KFP_POD_UID + container.env + secretAsEnv (`secrets[secretName]
  [secretKey]`; a missing secret or key fails the task, as the pod could not start; `optional: true` leaves the
  variable out) + TFXFLOW_KFP_LOCAL_ROOT.
  pvcMount: the PVC name is resolved (and goes into the fingerprint); the claim is emulated by the host folder
  at mountPath, which must be absolute and is created if missing. nodeSelector, tolerations, affinity,
  resources, image, pod metadata and the like are recorded in `TaskResult.pod`, not enforced.
- Launcher (component/launcher_v2.go `Execute`/`executeV2`/`execute`): prepareOutputFolders (the parent folder
  of each output artifact's local path and of each parameter file, not the artifact path itself); every input
  artifact downloaded to `LocalPathForURI(uri)` (gs://b/k -> /gcs/b/k, s3:// -> /s3/, minio:// -> /minio/) with
  objectstore/object_store.go `DownloadBlob`: every object listed under the key prefix that is the key or under
  `key/`, written to the local path of its key relative to the artifact's key (a zero-byte `dir/` marker becomes
  an empty FILE named `dir`, so a later `dir/x` fails with "mkdir ...: not a directory", kubeflow/pipelines
  #13476); the executor-logs file created before the command starts, which writes stdout+stderr into it; the
  command run; then `getExecutorOutputFile` (absent = empty; strict protojson field names), `collectOutputParameters`
  (the output file's parameterValues win, else the parameter file, parsed by `TextToPbValue`; missing = task
  failure), `uploadOutputArtifacts` (`mergeRuntimeArtifacts`: an artifact URI in the output file replaces the
  generated one, metadata merged; upload from `LocalPathForURI(final URI)`, files and folders recursively,
  empty folders giving no objects; a missing local path is only a warning and the artifact is still recorded;
  a URI outside the pipeline root's bucket/prefix fails the task; the artifact type needs a title), then the
  MLMD record (`RecordArtifact`: display_name, store_session_info). A failed command uploads and records
  executor-logs only.
- Importer executors (component/importer_launcher.go): artifactUri constant or runtime parameter (a component
  input parameter), metadata, reimport=false reusing an artifact of the same URI and type in the pipeline.

Where this differs from a cluster (what this does not cover):
- Local paths are rooted at `<workdir>/<run id>/<task>/local` instead of `/` (no writing to /minio here): every
  local path in `{{$}}` (outputFile, parameter files) and in `.path` placeholders is under that root, and the
  step gets it as TFXFLOW_KFP_LOCAL_ROOT. URIs are unchanged. KFP's own paths are /minio/..., /tmp/kfp/outputs.
- One S3 endpoint and credentials (`s3_env`) serve minio:// and s3:// for the launcher's own transfers; the
  launcher's session info (the mlpipeline-minio-artifact secret, kfp-launcher providers) is not read, only
  recorded as MLMD's store_session_info with KFP's defaults. gs:// is not emulated: a gs:// pipeline root raises
  `NotEmulated`, a gs:// input artifact fails its task. oci:// (Modelcar) and mem:// are not emulated.
- Tasks run one at a time; retries (retryPolicy), timeouts (activeDeadlineSeconds) and resource limits are not
  applied; a missing secret fails the task at once (a real pod would sit in CreateContainerConfigError).
- Not emulated (raise `NotEmulated` at run start): nested DAG components, ParallelFor iterators, conditions
  (triggerPolicy), exit handlers / task final status, parameter expression selectors, root input artifacts,
  workspaces, secret/configmap volumes, configMapAsEnv, fieldPathAsEnv, emptyDir/ephemeral volumes, shared
  memory, init containers. `lifecycle.preCacheCheck` is ignored, as the open-source backend does.
- Without `LocalKfp(image=...)` the command runs on this machine, not in the image: a first command element
  `python`/`python3` is replaced by `LocalKfp(python=...)`; the working directory is a fresh folder per task.
  With `LocalKfp(fork_steps=...)`, a `python -m <module>` command is a process forked from a server that
  imported the module's dependencies once (tests/step_forks.py), not a fresh interpreter: the same code from
  the module's `__main__` on, with the pod's environment, directory and output, without 10-15 s of imports.
  In the image (tests/image.py's ImageCommand, a buildah container per step): the image's user, working
  directory, environment and Python; the pod's environment is the image's plus what the spec and secrets set
  (not this process's); the launcher's folders are at their real paths (/minio, /s3, /gcs; /tmp/kfp inside the
  image's own /tmp), owned by the image's user; each claim's host folder is mounted at its mountPath (a new
  claim's root world-writable, as dynamic provisioners make it); the network is this machine's, so names of
  cluster services resolve only as the ImageCommand's hosts entries say.
- MLMD and the KFP cache table are in-memory (per LocalKfp); ids count from 1; DAG states, pod names and the
  UI are not modelled. The pod log is `TaskResult.log_path`: launcher/driver messages of this harness plus the
  command's output.

Versions (checked against the release tags in the same repository): the output URI layout
`<root>/<pipeline>/<run id>/<task>/<uuid>/<key>`, executor-logs (publish_logs, on by default), the upload rules
for a step that succeeded and the marker failure (#13476) are the same from 2.5 on. Older backends differ in:
the executor output file is /tmp/kfp_outputs/output_metadata.json before 2.15; PVC names join the cache key
from 2.15; store_session_info names minio-service.kubeflow:9000 before 2.16; before 2.17 the driver does not
resolve `{{$.inputs.parameters[...]}}` in command/args (the launcher does, writing numbers as FormatFloat 'f':
0.5 -> "0.5", 1e-7 -> "0.0000001"), and DownloadBlob takes every key that merely starts with the artifact's key
(for `model` also `model_run/...`, written to `<local path>/../model_run/...`) without the path-traversal
check; the custom cacheKey is newer than 2.17.0.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime
import decimal
import hashlib
import json
import os
import posixpath
import random
import re
import select
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import yaml

DEFAULT_PIPELINE_ROOT = "minio://mlpipeline/v2/artifacts"  # backend/src/v2/config/env.go
LOCAL_ROOT_ENV = "TFXFLOW_KFP_LOCAL_ROOT"
EXECUTOR_LOGS = "executor-logs"
SUCCEEDED, FAILED, CACHED, NOT_RUN = "SUCCEEDED", "FAILED", "CACHED", "NOT_RUN"


class Refused(Exception):
    """The KFP API server would refuse this spec or these parameters when the run is created."""


class NotEmulated(NotImplementedError):
    """KFP would run this, but the harness does not emulate it (see the module docstring)."""


class _TaskError(Exception):
    """A driver, pod or launcher failure: the task is FAILED with this message."""


@dataclasses.dataclass
class TaskResult:
    """One task of a run. `executor_input`: the `{{$}}` the step got (None if it never started); `outputs`: per
    output key, the MLMD artifacts as a consumer receives them ({name: MLMD id, type, uri, metadata}), including
    `executor-logs`; `output_parameters`: as published to MLMD; `cache_key`: the fingerprint ("" when the task
    does not cache); `error`: why it FAILED or was NOT_RUN; `pod`: what the pod spec would carry, recorded."""

    name: str
    state: str
    executor_input: Optional[dict]
    outputs: Dict[str, List[dict]]
    output_parameters: Dict[str, Any]
    log_path: str
    seconds: float
    cache_key: str
    error: str = ""
    execution_id: int = 0
    command: List[str] = dataclasses.field(default_factory=list)
    pod: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RunResult:
    """A run: `run_id` is what `{{$.pipeline_job_uuid}}` resolved to; `run_root` = <pipeline root>/<pipeline
    name>/<run id>; `error` is set when the root DAG driver failed (then no task ran)."""

    run_id: str
    state: str
    tasks: Dict[str, TaskResult]
    failed_task: Optional[str]
    pipeline_root: str = ""
    run_root: str = ""
    error: str = ""

    def log(self, name: str) -> str:
        path = self.tasks[name].log_path
        if not path or not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def task_outputs(self, task: str, key: str) -> List[str]:
        return [a["uri"] for a in self.tasks[task].outputs.get(key, [])]


# ---------------------------------------------------------------------------------------------------------------
# JSON as Go writes it (protojson for `{{$}}`, encoding/json for the cache fingerprint)


def _go_float(x: float, fmt: str = "json") -> str:
    """strconv.AppendFloat(-1 precision) the way encoding/json and protojson use it ('f', or 'e' outside
    [1e-6, 1e21)); fmt='f' is FormatFloat(x, 'f', -1)."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{x} is not valid JSON")
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    d = decimal.Decimal(repr(x))
    if fmt == "json" and (abs(x) < 1e-6 or abs(x) >= 1e21):
        sign, digits, exp = d.as_tuple()
        ds = "".join(map(str, digits)).rstrip("0") or "0"
        e = exp + len(digits) - 1
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        out = f"{'-' if sign else ''}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
        return re.sub(r"e-0(\d)$", r"e-\1", out)
    out = format(d, "f")
    if "." in out:
        out = out.rstrip("0").rstrip(".")
    return out


def _go_g(x: float) -> str:
    """fmt.Sprintf("%g", x) with Go's shortest digits."""
    d = decimal.Decimal(repr(float(x)))
    sign, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    dp = exp + len(digits)  # decimal point position: value = 0.ds * 10**dp
    e = dp - 1
    if e < -4 or e >= 6:
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return _go_float(x, "f")


def _go_json(value: Any, sort_keys: bool = False, html: bool = False) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _go_float(value)
    if isinstance(value, str):
        out = json.dumps(value, ensure_ascii=False)
        if html:
            out = (
                out.replace("<", "\\u003c")
                .replace(">", "\\u003e")
                .replace("&", "\\u0026")
                .replace("\u2028", "\\u2028")
                .replace("\u2029", "\\u2029")
            )
        return out
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_json(v, sort_keys, html) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        return (
            "{"
            + ",".join(f"{_go_json(str(k), sort_keys, html)}:{_go_json(v, sort_keys, html)}" for k, v in items)
            + "}"
        )
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _canon(value: Any) -> Any:
    """A google.protobuf.Value: maps sorted (protojson writes map entries in key order), numbers as float64."""
    if isinstance(value, dict):
        return {k: _canon(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"not a protobuf Value: {value!r}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "struct"
    return "unknown"


def _pb_value_to_text(value: Any) -> str:
    """metadata/converter.go PbValueToText."""
    kind = _kind(value)
    if kind == "null":
        return ""
    if kind == "string":
        return value
    if kind == "number":
        return _go_float(value, "f")
    if kind == "bool":
        return "true" if value else "false"
    return _go_json(_canon(value), sort_keys=True, html=True)


def _pb_value_to_string(value: Any) -> str:
    """driver/util.go pbValueToString (container argument placeholders)."""
    kind = _kind(value)
    if kind == "string":
        return value
    if kind == "number":
        n = float(value)
        if n == int(n) and abs(n) < 2**63:
            return str(int(n))
        return _go_g(n)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "null":
        return ""
    return _go_json(_canon(value), sort_keys=True, html=True)


def _text_to_pb_value(text: str, ptype: str) -> Any:
    """metadata/converter.go TextToPbValue."""

    def fail(err: str) -> _TaskError:
        return _TaskError(f'TextToPbValue(text={json.dumps(text)}, type="{ptype}") failed: {err}')

    if ptype == "STRING":
        return text
    if ptype == "NUMBER_INTEGER":
        try:
            return float(int(text.strip(), 10))
        except ValueError as e:
            raise fail(str(e)) from None
    if ptype == "NUMBER_DOUBLE":
        try:
            return float(text.strip())
        except ValueError as e:
            raise fail(str(e)) from None
    if ptype == "BOOLEAN":
        t = text.strip()
        if t in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if t in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise fail(f'strconv.ParseBool: parsing "{t}": invalid syntax')
    if ptype in ("LIST", "STRUCT"):
        try:
            value = json.loads(text)
        except ValueError as e:
            raise fail(str(e)) from None
        if _kind(value) != ptype.lower():
            raise fail("unexpected type")
        return _canon(value)
    raise fail("unknown type. Expected STRING, NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN, LIST or STRUCT")


# ---------------------------------------------------------------------------------------------------------------
# Object store addressing (objectstore/config.go, component/launcher_v2.go LocalPathForURI)

_BUCKET_PATTERN = re.compile(r"(^[a-z][a-z0-9]+:///?)([^/?]+)(/[^?]*)?(\?.+)?$")
_SCHEMES = ("gs://", "s3://", "minio://", "mem://")


@dataclasses.dataclass
class _BucketConfig:
    scheme: str
    bucket: str
    prefix: str = ""
    query: str = ""

    def prefixed_bucket(self) -> str:
        return (
            self.scheme + posixpath.normpath(posixpath.join(self.bucket, self.prefix))
            if self.prefix
            else self.scheme + self.bucket
        )

    def key_from_uri(self, uri: str) -> str:
        prefixed = self.prefixed_bucket()
        if not uri.startswith(prefixed):
            raise _TaskError(f'URI "{uri}" does not have expected bucket prefix "{prefixed}"')
        key = uri[len(prefixed) :].lstrip("/")
        if not key:
            raise _TaskError(f'URI "{uri}" has empty key given prefixed bucket "{prefixed}"')
        return key


def _parse_bucket_config(path: str, with_prefix: bool = True) -> _BucketConfig:
    match = _BUCKET_PATTERN.match(path)
    if not match:
        raise _TaskError(f'parse bucket config failed: unrecognized pipeline root format: "{path}"')
    scheme, bucket, prefix, query = match.group(1), match.group(2), match.group(3) or "", match.group(4) or ""
    if scheme not in _SCHEMES:
        raise _TaskError(f'parse bucket config failed: unsupported Cloud bucket: "{path}"')
    if not with_prefix:
        return _BucketConfig(scheme, bucket)
    prefix = prefix.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return _BucketConfig(scheme, bucket, prefix, query)


def local_path_for_uri(uri: str, root: str = "/") -> str:
    """LocalPathForURI, rooted at `root` instead of `/`."""
    for scheme, folder in (("gs://", "gcs"), ("minio://", "minio"), ("s3://", "s3")):
        if uri.startswith(scheme):
            return os.path.join(root, folder, uri[len(scheme) :])
    if uri.startswith("oci://"):
        return os.path.join(root, "oci", uri[len("oci://") :].replace("/", "_"), "models")
    raise _TaskError(f"failed to generate local path for URI {uri}: unsupported storage scheme")


def generate_output_uri(root: str, paths: Iterable[str], preserve_query: bool) -> str:
    """metadata/client.go GenerateOutputURI."""
    parts = root.split("?")
    query = ""
    if len(parts) == 2:
        root = parts[0]
        if preserve_query:
            query = "?" + parts[1]
    joined = [p for p in paths if p]
    tail = posixpath.normpath(posixpath.join(*joined)) if joined else ""
    return f"{root.rstrip('/')}/{tail}{query}"


def _s3_provider_params(providers: Mapping[str, Any]) -> Optional[Dict[str, str]]:
    """config/s3.go ProvideSessionInfo's params from the `providers` entry's s3 default; None without one (the
    launcher then opens the bucket "from env")."""
    default = (providers.get("s3") or {}).get("default")
    if not default:
        return None
    credentials = default.get("credentials")
    if credentials is None:
        raise _TaskError("invalid provider config: missing default credentials")
    params = {
        "endpoint": default.get("endpoint", ""),
        "region": default.get("region", ""),
        "disableSSL": "true" if default.get("disableSSL") else "false",
        "forcePathStyle": "false" if default.get("forcePathStyle") is False else "true",
        "maxRetries": str(default.get("maxRetries", 5)),
        "fromEnv": "true" if credentials.get("fromEnv") else "false",
    }
    if not credentials.get("fromEnv"):
        ref = credentials.get("secretRef") or {}
        params.update(
            secretName=ref.get("secretName", ""),
            accessKeyKey=ref.get("accessKeyKey", ""),
            secretKeyKey=ref.get("secretKeyKey", ""),
        )
    return params


def _s3_client(endpoint: str, access_key, secret_key, region: str, path_style: bool):
    """A boto3 S3 client from its own session (boto3's default session is not safe across LocalKfps on threads)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=Config(s3={"addressing_style": "path" if path_style else "virtual"}),
    )


def _store_session_info(root: str, providers: Optional[Mapping[str, Any]] = None) -> str:
    """config/env.go GetStoreSessionInfo (with the kfp-launcher ConfigMap's `providers`), as json.Marshal
    writes it."""
    scheme = root.split("://", 1)[0]
    s3_params = _s3_provider_params(providers or {}) if scheme == "s3" and "?" not in root else None
    if s3_params is not None:
        params = s3_params
    elif scheme == "minio" and "?" not in root:
        params = {
            "region": "minio",
            "endpoint": "seaweedfs.kubeflow:9000",
            "disableSSL": "true",
            "fromEnv": "false",
            "maxRetries": "5",
            "secretName": "mlpipeline-minio-artifact",
            "accessKeyKey": "accesskey",
            "secretKeyKey": "secretkey",
        }
    else:
        params = {"fromEnv": "true"}
    return _go_json({"Provider": scheme, "Params": params}, sort_keys=True, html=True)


def _go_mkdir_all(path: str) -> None:
    """os.MkdirAll, with Go's error text."""
    if os.path.isdir(path):
        return
    if os.path.lexists(path):
        raise _TaskError(f"mkdir {path}: not a directory")
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path:
        _go_mkdir_all(parent)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not os.path.isdir(path):
            raise _TaskError(f"mkdir {path}: not a directory") from None
    except OSError as e:
        raise _TaskError(f"mkdir {path}: {e.strerror.lower() if e.strerror else e}") from None


# ---------------------------------------------------------------------------------------------------------------
# The spec


def _load_spec(spec_path: str) -> Tuple[dict, dict]:
    with open(spec_path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    spec, platform = None, {}
    for doc in docs:
        if isinstance(doc, dict) and "platforms" in doc:
            if platform:
                raise Refused("multiple platform specs provided")
            platform = doc
        elif isinstance(doc, dict) and spec is None:
            spec = doc
    if spec is None:
        raise Refused(f"{spec_path}: no pipeline spec")
    k8s = ((platform.get("platforms") or {}).get("kubernetes") or {}).get("deploymentSpec") or {}
    return spec, k8s.get("executors") or {}


def _check_spec(spec: dict) -> None:
    """What the API server and the Argo compiler refuse when a run is created."""
    if spec.get("schemaVersion") != "2.1.0":
        raise Refused(
            f"KFP only supports schema version 2.1.0, but the pipeline spec has version {spec.get('schemaVersion')}"
        )
    if not (spec.get("pipelineInfo") or {}).get("name"):
        raise Refused("invalid v2 pipeline spec: name is empty")
    if not spec.get("root"):
        raise Refused("invalid v2 pipeline spec: root component is empty")
    components = spec.get("components") or {}
    executors = (spec.get("deploymentSpec") or {}).get("executors") or {}
    visited = set()

    def dfs(name: str, component: dict) -> None:
        if name in visited:
            return
        visited.add(name)
        label = component.get("executorLabel")
        if label:
            executor = executors.get(label)
            if executor is None:
                raise Refused(
                    f'error processing component name="{name}": executor(label="{label}") not found '
                    "in deployment config"
                )
            if "container" not in executor and "importer" not in executor:
                raise Refused(
                    f'error processing component name="{name}": executor(label="{label}"): '
                    "non-container and non-importer executor not implemented"
                )
            return
        dag = component.get("dag")
        if dag is None:
            raise Refused(f'error processing component name="{name}": unknown component implementation')
        tasks = dag.get("tasks") or {}
        for key in sorted(tasks):
            task = tasks[key]
            ref = (task.get("componentRef") or {}).get("name", "")
            if not ref:
                raise Refused(
                    f'error processing component name="{name}": component ref name is empty for task '
                    f'name="{(task.get("taskInfo") or {}).get("name", "")}"'
                )
            if ref not in components:
                raise Refused(f'error processing component name="{name}": cannot find component ref name="{ref}"')
            dfs(ref, components[ref])
        for key, task in tasks.items():
            for dep in task.get("dependentTasks") or []:
                if dep not in tasks:
                    raise Refused(f"task {key} depends on {dep}, which is not a task of the DAG")
            for producer in _producers(task):  # dag.go addImplicitDependencies
                if producer not in tasks:
                    raise Refused(f'failed to add implicit deps: unknown producer task "{producer}" in DAG')

    dfs("root", spec["root"])


_NOT_EMULATED_K8S = (
    "secretAsVolume",
    "configMapAsVolume",
    "configMapAsEnv",
    "fieldPathAsEnv",
    "emptyDirMounts",
    "genericEphemeralVolume",
    "enabledSharedMemory",
    "initContainers",
)


def _check_emulated(spec: dict, k8s_executors: dict) -> None:
    root = spec["root"]
    if (root.get("inputDefinitions") or {}).get("artifacts"):
        raise NotEmulated("root input artifacts")
    for name, task in (root["dag"].get("tasks") or {}).items():
        component = spec["components"][task["componentRef"]["name"]]
        if "dag" in component:
            raise NotEmulated(f"task {name}: nested DAG components")
        for key in ("parameterIterator", "artifactIterator", "iteratorPolicy"):
            if task.get(key):
                raise NotEmulated(f"task {name}: {key} (ParallelFor)")
        policy = task.get("triggerPolicy") or {}
        if policy.get("condition") or policy.get("strategy") not in (None, "", "ALL_UPSTREAM_TASKS_SUCCEEDED"):
            raise NotEmulated(f"task {name}: triggerPolicy {policy}")
        inputs = task.get("inputs") or {}
        for pname, pspec in (inputs.get("parameters") or {}).items():
            if "taskFinalStatus" in pspec or pspec.get("parameterExpressionSelector"):
                raise NotEmulated(f"task {name}: input {pname}: {sorted(pspec)}")
        for aname, aspec in (inputs.get("artifacts") or {}).items():
            if "taskOutputArtifact" not in aspec:
                raise NotEmulated(f"task {name}: input artifact {aname}: {sorted(aspec)}")
        for key in _NOT_EMULATED_K8S:
            if k8s_executors.get(component.get("executorLabel", ""), {}).get(key):
                raise NotEmulated(f"task {name}: kubernetes {key}")


def _validate_run_parameters(spec: dict, parameters: Mapping[str, Any]) -> Dict[str, Any]:
    """v2_template.go validatePipelineJobInputs, then argo.go's filling of root defaults."""
    declared = ((spec["root"].get("inputDefinitions") or {}).get("parameters")) or {}
    checks = {
        "NUMBER_DOUBLE": ("number", "double or integer"),
        "NUMBER_INTEGER": ("number", "double or integer"),
        "STRING": ("string", "string"),
        "BOOLEAN": ("bool", "bool"),
        "LIST": ("list", "list"),
        "STRUCT": ("struct", "struct"),
    }
    for name, param in declared.items():
        if name not in parameters:
            if not param.get("isOptional") and "defaultValue" not in param:
                raise Refused(
                    f"parameter {name} is not optional, yet has neither default value nor user provided value"
                )
            continue
        ptype = param.get("parameterType", "PARAMETER_TYPE_ENUM_UNSPECIFIED")
        if ptype not in checks:
            raise Refused(f"input parameter {name} requires type {ptype}")
        kind, words = checks[ptype]
        if _kind(parameters[name]) != kind:
            raise Refused(
                f"input parameter {name} requires type {words}, but the parameter value is not of "
                f"{words.split(' ')[-1]} value type"
            )
        literals = param.get("literals")
        if literals and parameters[name] not in literals:
            raise Refused(f"input parameter {name}: value {parameters[name]!r} is not one of {literals}")
    extra = [name for name in parameters if name not in declared]
    if extra:
        raise Refused(f"parameter(s) provided are not required by pipeline: {', '.join(extra)}")
    values = {name: _canon(value) for name, value in parameters.items()}
    for name, param in declared.items():
        if name not in values:
            if "defaultValue" in param:
                values[name] = _canon(param["defaultValue"])
            elif param.get("isOptional"):
                values[name] = None
    return values


def _producers(task: dict) -> List[str]:
    inputs = task.get("inputs") or {}
    out = list(task.get("dependentTasks") or [])
    for spec in (inputs.get("parameters") or {}).values():
        producer = (spec.get("taskOutputParameter") or {}).get("producerTask")
        if producer:
            out.append(producer)
    for spec in (inputs.get("artifacts") or {}).values():
        producer = (spec.get("taskOutputArtifact") or {}).get("producerTask")
        if producer:
            out.append(producer)
    return out


def _topological(tasks: Mapping[str, dict]) -> List[str]:
    upstream = {name: set(_producers(task)) for name, task in tasks.items()}
    for name, deps in upstream.items():
        missing = deps - set(tasks)
        if missing:
            raise Refused(f"task {name} refers to tasks that do not exist: {sorted(missing)}")
    order, done = [], set()
    while len(order) < len(tasks):
        ready = sorted(n for n in tasks if n not in done and upstream[n] <= done)
        if not ready:
            raise Refused(f"dependency cycle among {sorted(set(tasks) - done)}")
        order.append(ready[0])
        done.add(ready[0])
    return order


def _artifact_type_json(artifact_type: Mapping) -> dict:
    out = {}
    for key in ("schemaTitle", "schemaUri", "instanceSchema"):
        if key in artifact_type:
            out[key] = artifact_type[key]
            break
    if artifact_type.get("schemaVersion"):
        out["schemaVersion"] = artifact_type["schemaVersion"]
    return out


def _artifact_schema(artifact_type: Mapping) -> str:
    """launcher_v2.go getArtifactSchema."""
    if "instanceSchema" in artifact_type:
        return artifact_type["instanceSchema"]
    if "schemaTitle" in artifact_type:
        return "title: " + artifact_type["schemaTitle"]
    if "schemaUri" in artifact_type:
        raise _TaskError("SchemaUri is unsupported")
    raise _TaskError(f"unknown type in ArtifactTypeSchema {dict(artifact_type)}")


def _schema_title(schema: str) -> str:
    """metadata/client.go SchemaToArtifactType: the schema's `title` (glog.Fatal without one)."""
    try:
        loaded = yaml.safe_load(schema) if schema else None
    except yaml.YAMLError:
        loaded = None
    title = loaded.get("title") if isinstance(loaded, dict) else None
    if not title:
        raise _TaskError("launcher exited: F SchemaToArtifactType: No title specified")
    return str(title)


def _to_mlmd_value(value: Any) -> Tuple[str, Any]:
    """metadata/converter.go StructValueToMLMDValue."""
    kind = _kind(value)
    if kind == "string":
        return "string", value
    if kind == "number":
        return "double", float(value)
    if kind == "bool":
        return "int", 1 if value else 0
    if kind == "list":
        return "struct", {"list": _canon(value)}
    if kind == "struct":
        return "struct", {"struct": _canon(value)}
    raise _TaskError(f"unknown/unsupported value type {kind}")


def _from_mlmd_value(mlmd_value: Tuple[str, Any]) -> Any:
    kind, value = mlmd_value
    return float(value) if kind in ("int", "double") else value


# ---------------------------------------------------------------------------------------------------------------
# The emulation


@dataclasses.dataclass
class _Artifact:  # an MLMD artifact
    id: int
    uri: str
    custom: Dict[str, Tuple[str, Any]]
    title: str
    pipeline: str

    def runtime(self) -> dict:
        """OutputArtifact.ToRuntimeArtifact as the driver hands it to a consumer."""
        metadata = {k: _from_mlmd_value(self.custom[k]) for k in sorted(self.custom)}
        return {"name": str(self.id), "type": {"instanceSchema": ""}, "uri": self.uri, "metadata": metadata}


@dataclasses.dataclass
class _Execution:  # an MLMD execution
    id: int
    task: str
    state: str
    output_parameters: Dict[str, Any]
    output_artifacts: Dict[str, List[int]]
    fingerprint: str = ""


class _Run:
    def __init__(self, kfp: "LocalKfp", spec: dict, k8s: dict, params: Dict[str, Any], root: str, run_name: str):
        self.kfp, self.spec, self.k8s, self.params, self.root = kfp, spec, k8s, params, root
        self.run_id = str(uuid.uuid4())
        self.pipeline_name = spec["pipelineInfo"]["name"]
        self.display_name = run_name or f"{self.pipeline_name} {time.strftime('%Y-%m-%d %H-%M-%S')}"
        valid = re.sub(r"[^a-z0-9-]", "", self.pipeline_name.split("/")[-1].lower())[:57] or "pipeline"
        self.resource_name = f"{valid}-{''.join(random.choices(string.ascii_lowercase + string.digits, k=5))}"
        self.created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.run_root = generate_output_uri(root, [self.pipeline_name, self.run_id], True)
        self.dir = os.path.join(kfp.workdir, self.run_id)
        self.executions: Dict[str, _Execution] = {}
        self.results: Dict[str, TaskResult] = {}
        self.dag_execution_id = kfp._next_execution_id()
        source = (
            "run(pipeline_root=...)"
            if root != kfp.default_pipeline_root
            else "LocalKfp(default_pipeline_root=...), the kfp-launcher ConfigMap's defaultPipelineRoot"
        )
        self.root_note = (
            f"pipeline root {root}, from {source}; KFP does not read the spec's defaultPipelineRoot "
            f"({spec.get('defaultPipelineRoot', 'none')})"
        )

    # -- parameters -------------------------------------------------------------------------------------------

    def resolve_parameter(self, spec: dict, task_name: str) -> Any:
        """resolve.go resolveInputParameter. Returns `_NULL` for a null component input."""
        if "componentInputParameter" in spec:
            name = spec["componentInputParameter"]
            if not name:
                raise _TaskError("resolving input parameter: empty component input")
            if name not in self.params:
                raise _TaskError(f"resolving input parameter: parent DAG does not have input parameter {name}")
            if self.params[name] is None:
                return _NULL
            return self.params[name]
        if "taskOutputParameter" in spec:
            ref = spec["taskOutputParameter"]
            producer, key = ref.get("producerTask", ""), ref.get("outputParameterKey", "")
            if not producer:
                raise _TaskError("resolving input parameter: producerTaskName is empty")
            if not key:
                raise _TaskError("resolving input parameter: output parameter key is empty")
            execution = self.executions.get(producer)
            if execution is None:
                raise _TaskError(
                    f"resolving input parameter: producer task, {producer}_{self.dag_execution_id}, not in tasks"
                )
            return execution.output_parameters.get(key, _MISSING)
        if "runtimeValue" in spec:
            runtime = spec["runtimeValue"]
            if "constant" not in runtime:
                raise _TaskError(f"param runtime value spec {runtime} not implemented")
            value = runtime["constant"]
            if isinstance(value, str) and "{{$.workspace_path}}" in value:
                return value.replace("{{$.workspace_path}}", "/kfp-workspace")
            special = {
                "{{$.pipeline_job_name}}": self.display_name,
                "{{$.pipeline_job_resource_name}}": self.resource_name,
                "{{$.pipeline_job_uuid}}": self.run_id,
                "{{$.pipeline_task_name}}": task_name,
                "{{$.pipeline_task_uuid}}": str(self.dag_execution_id),
                "{{$.pipeline_job_create_time_utc}}": self.created,
                "{{$.pipeline_job_schedule_time_utc}}": self.created,
            }
            if isinstance(value, str) and value in special:
                return special[value]
            return _canon(value)
        raise _TaskError(f"parameter spec {spec} not implemented yet")

    def resolve_inputs(self, name: str, task: dict, component: dict) -> dict:
        """resolve.go resolveInputs for a task of the root DAG."""
        inputs_spec = (component.get("inputDefinitions") or {}).get("parameters") or {}
        values: Dict[str, Any] = {}
        for pname, pspec in ((task.get("inputs") or {}).get("parameters") or {}).items():
            comp_param = inputs_spec.get(pname)
            if comp_param and comp_param.get("parameterType") == "TASK_CONFIG":
                continue
            value = self.resolve_parameter(pspec, name)
            if value is _NULL:
                if comp_param and comp_param.get("isOptional"):
                    continue
                raise _TaskError(f"the resolved input parameter is null: {pspec.get('componentInputParameter')}")
            literals = (comp_param or {}).get("literals")
            if literals and value is not _MISSING and value not in literals:
                raise _TaskError(f'validating parameter "{pname}": value {value!r} is not one of {literals}')
            values[pname] = value
        artifacts: Dict[str, dict] = {}
        for aname, aspec in ((task.get("inputs") or {}).get("artifacts") or {}).items():
            ref = aspec["taskOutputArtifact"]
            producer, key = ref.get("producerTask", ""), ref.get("outputArtifactKey", "")
            if not producer:
                raise _TaskError(f"failed to resolve input artifact {aname}: producer task is empty")
            execution = self.executions.get(producer)
            if execution is None:
                raise _TaskError(
                    f"failed to resolve input artifact {aname}: cannot find producer task "
                    f'"{producer}_{self.dag_execution_id}"'
                )
            ids = execution.output_artifacts.get(key)
            if not ids:
                raise _TaskError(
                    f"failed to resolve input artifact {aname}: cannot find output artifact key "
                    f'"{key}" in producer task "{producer}"'
                )
            artifacts[aname] = {"artifacts": [self.kfp._artifacts[ids[0]].runtime()]}
        # handleParamTypeValidationAndConversion
        for pname, pspec in inputs_spec.items():
            has_value = pname in values
            if not has_value:
                if pspec.get("isOptional"):
                    continue  # the launcher's addDefaultParams supplies the default
                if "defaultValue" not in pspec:
                    raise _TaskError(f'neither value nor default value provided for non-optional parameter "{pname}"')
            value = values.get(pname, _MISSING)
            ptype = pspec.get("parameterType", "")
            if ptype == "STRING":
                if not isinstance(value, str):
                    values[pname] = _pb_value_to_text(None if value is _MISSING else value)
                continue
            if value is _MISSING:
                raise _TaskError(f"parameter {pname} has unknown protobuf.Value type: <nil>")
            kind = _kind(value)
            mismatch = f'input parameter "{pname}" type mismatch: expect {ptype}, got '
            if kind == "null":
                raise _TaskError(f'got null for input parameter "{pname}"')
            if kind == "string":
                raise _TaskError(mismatch + "string")
            if kind == "number" and ptype not in ("NUMBER_DOUBLE", "NUMBER_INTEGER"):
                raise _TaskError(mismatch + "number")
            if kind == "bool" and ptype != "BOOLEAN":
                raise _TaskError(mismatch + "bool")
            if kind == "list" and ptype != "LIST":
                raise _TaskError(mismatch + "list")
            if kind == "struct" and ptype not in ("STRUCT", "TASK_FINAL_STATUS", "TASK_CONFIG"):
                raise _TaskError(mismatch + "struct")
        for pname, value in values.items():
            if value is _MISSING:
                raise _TaskError(f"input parameter {pname}: the producer has no such output parameter")
        out: Dict[str, Any] = {}
        if artifacts:
            out["artifacts"] = {k: artifacts[k] for k in sorted(artifacts)}
        if values:
            out["parameterValues"] = {k: values[k] for k in sorted(values)}
        return out

    # -- outputs ----------------------------------------------------------------------------------------------

    def provision_outputs(self, name: str, component: dict, local_root: str) -> dict:
        """driver.go provisionOutputs (local paths rooted at `local_root`)."""
        spec = component.get("outputDefinitions") or {}
        artifacts = dict(spec.get("artifacts") or {})
        if self.kfp.publish_logs:
            artifacts[EXECUTOR_LOGS] = {"artifactType": {"schemaTitle": "system.Artifact"}}
        task_root = generate_output_uri(self.run_root, [name, str(uuid.uuid4())], False)
        out: Dict[str, Any] = {}
        if spec.get("parameters"):
            out["parameters"] = {
                key: {"outputFile": os.path.join(local_root, "tmp/kfp/outputs", key)}
                for key in sorted(spec["parameters"])
            }
        if artifacts:
            out["artifacts"] = {}
            for key in sorted(artifacts):
                artifact = {
                    "name": key,
                    "type": _artifact_type_json(artifacts[key].get("artifactType") or {}),
                    "uri": generate_output_uri(task_root, [key], False),
                }
                if artifacts[key].get("metadata") is not None:
                    artifact["metadata"] = _canon(artifacts[key]["metadata"])
                out["artifacts"][key] = {"artifacts": [artifact]}
        try:
            out["outputFile"] = os.path.join(local_path_for_uri(task_root, local_root), "output_metadata.json")
        except _TaskError:
            out["outputFile"] = os.path.join(local_root, "tmp/kfp_outputs/output_metadata.json")
        return out


_NULL = object()
_MISSING = object()


class _StepForks:
    """The harness's side of tests/step_forks.py: a server for `python -m <module>` steps, shared by every LocalKfp
    of the session with the same Python, module, warm-up and PYTHONPATH (what decides which files it imported),
    started with its first step's environment and ended with the session. Steps through it run one at a time."""

    SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_forks.py")
    _servers: Dict[Tuple[str, ...], "_StepForks"] = {}
    _lock = threading.Lock()

    def __init__(self, python: str, module: str, warm_up: Tuple[str, ...], env: Mapping[str, str]):
        self.workdir = tempfile.mkdtemp(prefix="kfp-step-forks-")
        self.log_path = os.path.join(self.workdir, "server.log")
        with open(self.SOURCE, encoding="utf-8") as f:
            source = f.read()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [python, "-c", source, module, *warm_up],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=dict(env),
                cwd=self.workdir,
            )
        self.lock = threading.Lock()
        self.ready = self._read(None)

    @classmethod
    def get(cls, python: str, module: str, warm_up: Tuple[str, ...], env: Mapping[str, str]) -> "_StepForks":
        key = (python, module, env.get("PYTHONPATH", ""), *warm_up)
        with cls._lock:
            server = cls._servers.get(key)
            if server is None or server.process.poll() is not None:
                server = cls._servers[key] = cls(python, module, warm_up, env)
                atexit.register(server.close)
            return server

    def _read(self, timeout: Optional[float]) -> dict:
        if timeout is not None and not select.select([self.process.stdout], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.process.args[:1], timeout)
        line = self.process.stdout.readline()
        if not line:
            raise _TaskError(f"the step server ended (exit status {self.process.wait()}); its log: {self.log_path}")
        return json.loads(line)

    def run(self, module: str, argv: List[str], env: Mapping[str, str], cwd: str, out: str, timeout) -> int:
        """Runs `python -m module argv` forked from the server, its output appended to the file `out`; its exit
        status (negative: the signal that ended it). Past `timeout` seconds it is killed: TimeoutExpired."""
        preload = [argv[i + 1].rpartition(".")[0] for i, a in enumerate(argv[:-1]) if a == "--executor_class_path"]
        request = {"module": module, "argv": argv, "env": dict(env), "cwd": cwd, "out": out, "preload": preload}
        with self.lock:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
            pid = self._read(None)["pid"]
            try:
                return self._read(timeout)["exit"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._read(None)
                raise

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class LocalKfp:
    """Runs compiled KFP specs the way KFP's driver and launcher do, on this machine and an S3 server."""

    def __init__(
        self,
        workdir: str,
        s3_env: Mapping[str, str],
        secrets: Optional[Mapping[str, Mapping[str, str]]] = None,
        python: str = sys.executable,
        env: Optional[Mapping[str, str]] = None,
        *,
        default_pipeline_root: str = DEFAULT_PIPELINE_ROOT,
        publish_logs: bool = True,
        cache_disabled: bool = False,
        namespace: str = "kubeflow",
        task_timeout: Optional[float] = None,
        base_env: Optional[Mapping[str, str]] = None,
        image=None,
        launcher_config: Optional[Mapping[str, Any]] = None,
        fork_steps: Optional[Mapping[str, Sequence[str]]] = None,
    ):
        """`base_env`: the environment a pod starts from instead of os.environ (e.g. without AWS_* variables, so
        that only secretAsEnv can deliver credentials). `image`: a tests/image.py ImageCommand; each step's
        command then runs in a container of that image (see the module docstring). `launcher_config`: the
        namespace's `kfp-launcher` ConfigMap; its `providers` s3 default is how the launcher reaches s3://
        (without one it opens s3:// "from env", which KFP leaves empty, and fails). `fork_steps`: {module: warm-up
        arguments}; a step whose command is `python -m module ...` then runs in a process forked from a server
        that ran `python -m module <warm-up arguments>` once (tests/step_forks.py), instead of a fresh Python
        that imports everything again; not with `image`."""
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.s3_env = dict(s3_env)
        self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
        self.python = python
        self.env = dict(env or {})
        self.default_pipeline_root = default_pipeline_root
        self.publish_logs = publish_logs
        self.cache_disabled = cache_disabled
        self.namespace = namespace
        self.task_timeout = task_timeout
        self.base_env = None if base_env is None else dict(base_env)
        self.image = image
        self.fork_steps = {module: tuple(args) for module, args in (fork_steps or {}).items()}
        providers = ((launcher_config or {}).get("data") or {}).get("providers") or ""
        self.providers = yaml.safe_load(providers) or {} if providers else {}
        self._provider_client = None
        self._ids = {"execution": 0, "artifact": 0}
        self._artifacts: Dict[int, _Artifact] = {}
        self._executions: Dict[int, _Execution] = {}
        self._cache: List[Tuple[str, str, str, int]] = []  # (fingerprint, "pipeline/<name>", namespace, execution)
        self._client = None
        self._root_note = ""

    # -- helpers ----------------------------------------------------------------------------------------------

    def _next_execution_id(self) -> int:
        self._ids["execution"] += 1
        return self._ids["execution"]

    def _next_artifact_id(self) -> int:
        self._ids["artifact"] += 1
        return self._ids["artifact"]

    def s3(self, config: Optional[_BucketConfig] = None):
        """The launcher's S3 client for `config`'s bucket: s3:// by the kfp-launcher providers entry, minio://
        (and the tests' own reads) by `s3_env`."""
        if config is not None and config.scheme == "s3://":
            return self._s3_by_providers(config)
        if self._client is None:
            self._client = _s3_client(
                self.s3_env["AWS_ENDPOINT_URL"],
                self.s3_env.get("AWS_ACCESS_KEY_ID"),
                self.s3_env.get("AWS_SECRET_ACCESS_KEY"),
                self.s3_env.get("AWS_DEFAULT_REGION", "us-east-1"),
                path_style=True,
            )
        return self._client

    def _s3_by_providers(self, config: _BucketConfig):
        params = _s3_provider_params(self.providers)
        if params is None:
            raise _TaskError(
                f'failed to open bucket "{config.bucket}": no kfp-launcher providers entry for s3://, so the '
                "launcher's S3 client is built from its own environment, in which KFP sets no endpoint, region "
                "or credentials (config/s3.go ProvideSessionInfo, objectstore/object_store.go)"
            )
        if params["fromEnv"] == "true":
            raise NotEmulated(
                "credentials fromEnv: the launcher's own identity (an IAM role for its service account) is not "
                "emulated; give the providers entry a secretRef"
            )
        if self._provider_client is None:
            secret = self.secrets.get(params["secretName"]) or {}
            missing = [k for k in (params["accessKeyKey"], params["secretKeyKey"]) if k not in secret]
            if missing:
                raise _TaskError(
                    f'failed to get credentials from secret "{params["secretName"]}": keys {missing} not found'
                )
            scheme = "http" if params["disableSSL"] == "true" else "https"
            self._provider_client = _s3_client(
                f"{scheme}://{params['endpoint']}",
                secret[params["accessKeyKey"]],
                secret[params["secretKeyKey"]],
                params["region"],
                path_style=params["forcePathStyle"] == "true",
            )
        return self._provider_client

    def _store(self, config: _BucketConfig) -> None:
        if config.scheme == "gs://":
            raise _TaskError(
                "gs:// is not emulated by this harness: there is no GCS server here "
                "(use minio:// or s3:// for the pipeline root and artifacts)"
            )
        if config.scheme not in ("minio://", "s3://"):
            raise _TaskError(f"{config.scheme} object stores are not emulated by this harness")

    def _download_blob(self, config: _BucketConfig, local_dir: str, blob_dir: str) -> int:
        """objectstore.DownloadBlob: `blob_dir` is a key relative to the config's prefix."""
        self._store(config)
        count = 0
        paginator = self.s3(config).get_paginator("list_objects_v2")
        full = config.prefix + blob_dir
        try:
            pages = list(paginator.paginate(Bucket=config.bucket, Prefix=full))
        except Exception as e:  # noqa: BLE001 - any listing error fails the download, as in Go
            raise _TaskError(
                f'failed to list objects in remote storage "{blob_dir}": {e}{self._bucket_hint(e)}'
            ) from None
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"][len(config.prefix) :]
                trimmed = blob_dir.rstrip("/")
                if not (key == trimmed or key.startswith(trimmed + "/")):
                    continue
                local_path = self._sanitize(local_dir, blob_dir, key)
                self._download_file(config, key, local_path)
                count += 1
        return count

    @staticmethod
    def _sanitize(local_dir: str, blob_dir: str, key: str) -> str:
        if ".." in key.split("/"):
            raise _TaskError(f"path traversal detected: blob key \"{key}\" contains '..' component")
        relative = os.path.relpath(posixpath.normpath(key), posixpath.normpath(blob_dir))
        local_path = os.path.normpath(os.path.join(local_dir, relative))
        base = os.path.abspath(local_dir)
        if os.path.abspath(local_path) != base and not os.path.abspath(local_path).startswith(base + os.sep):
            raise _TaskError(
                f'path traversal detected: blob key "{key}" resolves to "{local_path}" which is '
                f'outside target directory "{base}"'
            )
        return local_path

    def _download_file(self, config: _BucketConfig, key: str, local_path: str) -> None:
        def fail(err: str) -> _TaskError:
            return _TaskError(
                f'downloadFile(): unable to complete copying "{key}" to local storage "{local_path}": {err}'
            )

        try:
            body = self.s3(config).get_object(Bucket=config.bucket, Key=config.prefix + key)["Body"]
        except Exception as e:  # noqa: BLE001
            raise fail(f"unable to open reader for bucket: {e}") from None
        local_dir = os.path.dirname(local_path)
        try:
            _go_mkdir_all(local_dir)
        except _TaskError as e:
            raise fail(f'failed to create local directory "{local_dir}": {e}') from None
        try:
            with open(local_path, "wb") as f:
                shutil.copyfileobj(body, f)
        except IsADirectoryError:
            raise fail(
                f'unable to open local file "{local_path}" for writing: open {local_path}: is a directory'
            ) from None
        except OSError as e:
            raise fail(f'unable to open local file "{local_path}" for writing: {e}') from None

    def _upload_blob(self, config: _BucketConfig, local_path: str, blob_path: str) -> int:
        """objectstore.UploadBlob; FileNotFoundError for a missing local path (os.ErrNotExist)."""
        if not os.path.exists(local_path):
            raise FileNotFoundError(local_path)
        if not os.path.isdir(local_path):
            self._upload_file(config, local_path, blob_path)
            return 1
        count = 0
        for entry in sorted(os.scandir(local_path), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                count += self._upload_blob(config, entry.path, blob_path + "/" + entry.name)
            else:
                self._upload_file(config, entry.path, posixpath.normpath(posixpath.join(blob_path, entry.name)))
                count += 1
        return count

    def _upload_file(self, config: _BucketConfig, local_file: str, blob_file: str) -> None:
        try:
            with open(local_file, "rb") as f:
                self.s3(config).upload_fileobj(f, config.bucket, config.prefix + blob_file)
        except Exception as e:  # noqa: BLE001
            raise _TaskError(
                f'uploadFile(): unable to complete copying "{local_file}" to remote storage '
                f'"{blob_file}": {e}{self._bucket_hint(e)}'
            ) from None

    def _bucket_hint(self, error: Exception) -> str:
        return f" ({self._root_note})" if "NoSuchBucket" in str(error) and self._root_note else ""

    def download(self, uri: str, local_dir: str) -> str:
        """Fetches an artifact as the launcher would for a consumer: `local_dir` becomes the artifact's local path
        (a file artifact is written AT that path, a folder artifact INTO it). Returns `local_dir`."""
        try:
            config = _parse_bucket_config(uri, with_prefix=False)
            self._download_blob(config, local_dir, config.key_from_uri(uri))
        except _TaskError as e:
            raise RuntimeError(str(e)) from None
        return local_dir

    # -- a run ------------------------------------------------------------------------------------------------

    def run(
        self,
        spec_path: str,
        parameters: Optional[Mapping[str, Any]] = None,
        pipeline_root: Optional[str] = None,
        run_name: Optional[str] = None,
    ) -> RunResult:
        spec, k8s = _load_spec(spec_path)
        _check_spec(spec)
        params = _validate_run_parameters(spec, dict(parameters or {}))
        tasks = spec["root"]["dag"].get("tasks") or {}
        order = _topological(tasks)
        _check_emulated(spec, k8s)
        root = pipeline_root or self.default_pipeline_root
        if root.startswith("gs://"):
            raise NotEmulated(
                f"pipeline root {root}: gs:// is not emulated (no GCS server here); use minio:// or s3://"
            )
        run = _Run(self, spec, k8s, params, root, run_name or "")
        os.makedirs(run.dir, exist_ok=True)
        try:  # the root DAG driver
            _parse_bucket_config(root)
            provider = root.split("://", 1)[0]
            if provider not in ("minio", "s3", "gs"):
                raise _TaskError(f"Encountered unsupported provider in provider config {provider}")
        except _TaskError as e:
            results = {name: TaskResult(name, NOT_RUN, None, {}, {}, "", 0.0, "") for name in order}
            return RunResult(run.run_id, FAILED, results, None, root, run.run_root, f"driver.RootDAG failed: {e}")
        for name in order:
            run.results[name] = self._task(run, name, tasks[name])
        failed = [name for name in order if run.results[name].state == FAILED]
        return RunResult(
            run.run_id, FAILED if failed else SUCCEEDED, run.results, failed[0] if failed else None, root, run.run_root
        )

    def _task(self, run: _Run, name: str, task: dict) -> TaskResult:
        task_dir = os.path.join(run.dir, name)
        os.makedirs(task_dir, exist_ok=True)
        log_path = os.path.join(task_dir, "log.txt")
        result = TaskResult(name, NOT_RUN, None, {}, {}, log_path, 0.0, "")
        upstream = sorted(set(_producers(task)))  # dependentTasks plus the implicit ones (addImplicitDependencies)
        not_done = [
            u for u in upstream if run.results.get(u) is None or run.results[u].state not in (SUCCEEDED, CACHED)
        ]
        with open(log_path, "a", encoding="utf-8") as log:
            if not_done:
                log.write(f"[kfp-harness] omitted: depends condition not met ({', '.join(not_done)} did not succeed)\n")
                result.error = f"upstream {', '.join(not_done)} did not succeed"
                return result
            start = time.monotonic()
            log.write(f"[kfp-harness] {run.root_note}\n")
            self._root_note = run.root_note
            try:
                self._execute_task(run, name, task, task_dir, log, result)
            except _TaskError as e:
                result.state = FAILED
                result.error = str(e)
                log.write(f"[kfp-harness] {e}\n")
            finally:
                result.seconds = time.monotonic() - start
        return result

    def _execute_task(self, run: _Run, name: str, task: dict, task_dir: str, log, result: TaskResult) -> None:
        component = run.spec["components"][task["componentRef"]["name"]]
        label = component["executorLabel"]
        executor = run.spec["deploymentSpec"]["executors"][label]
        k8s = run.k8s.get(label) or {}
        if "importer" in executor:
            self._importer(run, name, task, component, executor["importer"], log, result)
            return
        container = executor["container"]
        local_root = os.path.join(task_dir, "local")
        driver = f"driver.Container(pipelineName={run.pipeline_name}, runID={run.run_id}, taskName={name})"
        try:
            inputs = run.resolve_inputs(name, task, component)
        except _TaskError as e:
            raise _TaskError(f"{driver} failed: failed to resolve inputs: {e}") from None
        outputs = run.provision_outputs(name, component, local_root)
        executor_input = {"inputs": inputs, "outputs": outputs}
        execution_id = self._next_execution_id()
        result.execution_id = execution_id
        result.pod = {
            "image": container.get("image", ""),
            "resources": container.get("resources") or {},
            "kubernetes": k8s,
        }

        pvc_names, mounts = self._pvc_mounts(run, name, k8s)
        result.pod["pvcMounts"] = mounts
        fingerprint = ""
        caching = task.get("cachingOptions") or {}
        if not self.cache_disabled and caching.get("enableCache"):
            fingerprint = self._fingerprint(task, component, container, executor_input, pvc_names)
        result.cache_key = fingerprint
        if fingerprint:
            cached = self._lookup_cache(fingerprint, run.pipeline_name)
            if cached is not None:
                self._reuse(run, name, executor_input, cached, execution_id, log, result)
                return
        execution = _Execution(execution_id, name, FAILED, {}, {}, fingerprint)
        self._executions[execution_id] = execution
        run.executions[name] = execution

        # Pod spec: the driver resolves input parameter placeholders in command and args.
        try:
            command = _resolve_container_args(container.get("command") or [], executor_input)
            args = _resolve_container_args(container.get("args") or [], executor_input)
        except _TaskError as e:
            raise _TaskError(f"{driver} failed: failed to init podSpecPatch: {e}") from None
        env = self._pod_env(run, name, container, k8s, local_root, result)

        # The launcher.
        with_defaults = json.loads(json.dumps(executor_input))
        values = with_defaults["inputs"].setdefault("parameterValues", {})
        for pname, pspec in ((component.get("inputDefinitions") or {}).get("parameters") or {}).items():
            if "defaultValue" in pspec and pname not in values:
                values[pname] = _canon(pspec["defaultValue"])
        with_defaults["inputs"]["parameterValues"] = {k: values[k] for k in sorted(values)}
        if not with_defaults["inputs"]["parameterValues"]:
            del with_defaults["inputs"]["parameterValues"]
        if self.publish_logs:  # qualifyExecutorLogsForRetry: no retries here, so attempt 0
            _qualify_executor_logs(with_defaults, "0")
        input_json = _go_json(with_defaults)
        result.executor_input = json.loads(input_json)
        with open(os.path.join(task_dir, "executor_input.json"), "w", encoding="utf-8") as f:
            f.write(input_json)
        if not command:
            raise _TaskError("failed to create component launcher v2: command and arguments are empty")
        cmd, argv = _compile_cmd_and_args(with_defaults, input_json, command, args, local_root)
        if self.image is None and os.path.basename(cmd) in ("python", "python3"):
            cmd = self.python
        result.command = [cmd, *argv]
        pipeline_root_config = _parse_bucket_config(run.root)

        self._prepare_output_folders(with_defaults, local_root)
        executor_output: dict = {}
        try:
            self._download_artifacts(with_defaults, pipeline_root_config, local_root)
            self._prepare_output_folders(with_defaults, local_root)
            code = self._run_command(result.command, env, task_dir, with_defaults, local_root, log, mounts)
            if code != 0:
                raise _TaskError(f"exit status {code}")
            executor_output = _read_executor_output(with_defaults["outputs"]["outputFile"], log)
        except _TaskError as e:
            log.write(f"[kfp-harness] E Component failed to execute successfully: {e}\n")
            try:  # executor-logs only; errors here are ignored, as in executeV2
                self._upload_and_record(
                    run, with_defaults, executor_output, pipeline_root_config, False, log, execution, result, local_root
                )
            except _TaskError as upload_error:
                log.write(f"[kfp-harness] W uploading executor-logs of the failed step: {upload_error}\n")
            raise _TaskError(f"failed to execute component: {e}") from None
        try:
            parameters = _collect_output_parameters(with_defaults, executor_output, component)
            self._upload_and_record(
                run, with_defaults, executor_output, pipeline_root_config, True, log, execution, result, local_root
            )
        except _TaskError as e:
            raise _TaskError(f"failed to execute component: {e}") from None
        execution.output_parameters = parameters
        execution.state = SUCCEEDED
        result.output_parameters = dict(parameters)
        result.state = SUCCEEDED
        if fingerprint:
            self._cache.append((fingerprint, "pipeline/" + run.pipeline_name, self.namespace, execution_id))

    # -- driver pieces ----------------------------------------------------------------------------------------

    def _fingerprint(
        self, task: dict, component: dict, container: dict, executor_input: dict, pvc_names: List[str]
    ) -> str:
        caching = task.get("cachingOptions") or {}
        if caching.get("cacheKey"):
            h = hashlib.sha256()
            ref = (task.get("componentRef") or {}).get("name", "")
            if ref:
                h.update(ref.encode() + b"\0")
            h.update(caching["cacheKey"].encode())
            return h.hexdigest()
        key: Dict[str, Any] = {}
        names = {
            k: {"artifactNames": [a.get("name", "") for a in v["artifacts"]]} if v["artifacts"] else {}
            for k, v in executor_input["inputs"].get("artifacts", {}).items()
        }
        if names:
            key["inputArtifactNames"] = names
        specs = {}
        for k, v in executor_input["outputs"].get("artifacts", {}).items():
            artifact = v["artifacts"][0]
            spec = {"name": artifact["name"], "type": artifact["type"]}
            if "metadata" in artifact:
                spec["metadata"] = artifact["metadata"]
            specs[k] = spec
        if specs:
            key["outputArtifactsSpec"] = specs
        out_params = (component.get("outputDefinitions") or {}).get("parameters") or {}
        types = {
            k: out_params[k].get("parameterType", "PARAMETER_TYPE_ENUM_UNSPECIFIED")
            for k in executor_input["outputs"].get("parameters", {})
        }
        if types:
            key["outputParametersSpec"] = types
        container_spec: Dict[str, Any] = {}
        if container.get("image"):
            container_spec["image"] = container["image"]
        cmd_args = list(container.get("command") or []) + list(container.get("args") or [])
        if cmd_args:
            container_spec["cmdArgs"] = cmd_args
        if pvc_names:
            container_spec["pvcNames"] = pvc_names
        key["containerSpec"] = container_spec
        if executor_input["inputs"].get("parameterValues"):
            key["inputParameterValues"] = executor_input["inputs"]["parameterValues"]
        return hashlib.sha256(_go_json(key, sort_keys=True, html=True).encode()).hexdigest()

    def _lookup_cache(self, fingerprint: str, pipeline_name: str) -> Optional[_Execution]:
        for fp, pipeline, namespace, execution_id in reversed(self._cache):  # created_at desc, page size 1
            if fp == fingerprint and pipeline == "pipeline/" + pipeline_name and namespace == self.namespace:
                return self._executions[execution_id]
        return None

    def _reuse(
        self, run: _Run, name: str, executor_input: dict, cached: _Execution, execution_id: int, log, result: TaskResult
    ) -> None:
        """driver/cache.go reuseCachedOutputs."""
        for key in executor_input["outputs"].get("artifacts", {}):
            if key not in cached.output_artifacts:
                raise _TaskError(
                    f"failed collect output artifact metadata from cache: unable to find artifact "
                    f"with name {key} in mlmd output artifacts"
                )
        execution = _Execution(
            execution_id,
            name,
            CACHED,
            dict(cached.output_parameters),
            {k: list(v) for k, v in cached.output_artifacts.items()},
        )
        self._executions[execution_id] = execution
        run.executions[name] = execution
        log.write(f"[kfp-harness] Use cache for task {name} (execution {cached.id}, fingerprint {result.cache_key})\n")
        result.state = CACHED
        result.executor_input = json.loads(_go_json(executor_input))
        result.output_parameters = dict(cached.output_parameters)
        result.outputs = {k: [self._artifacts[i].runtime() for i in v] for k, v in cached.output_artifacts.items()}

    def _pvc_mounts(self, run: _Run, name: str, k8s: dict) -> Tuple[List[str], List[dict]]:
        """k8s.go makeVolumeMountPatch; the claim is the host folder at mountPath."""
        names, mounts = [], []
        for mount in k8s.get("pvcMount") or []:
            if mount.get("pvcNameParameter"):
                spec = mount["pvcNameParameter"]
            elif mount.get("constant"):
                spec = {"runtimeValue": {"constant": mount["constant"]}}
            elif mount.get("taskOutputParameter"):
                spec = {"taskOutputParameter": mount["taskOutputParameter"]}
            elif mount.get("componentInputParameter"):
                spec = {"componentInputParameter": mount["componentInputParameter"]}
            else:
                raise _TaskError("failed to make podSpecPatch: volume mount: volume name not provided")
            value = run.resolve_parameter(spec, name)
            if not isinstance(value, str) or not value:
                raise _TaskError(
                    f"failed to resolve pvc name: resolving input parameter with spec {spec}. "
                    "Expected a non-empty string"
                )
            path = mount.get("mountPath", "")
            if not value or not path:
                raise _TaskError("failed to mount volume, missing mountpath or pvc name")
            if not os.path.isabs(path):
                raise _TaskError(f"pod cannot be created: volumeMounts mountPath {path!r} must be an absolute path")
            os.makedirs(path, exist_ok=True)
            if self.image is not None:  # a new claim's root, as dynamic provisioners (local-path, NFS) make it
                os.chmod(path, 0o777)
            names.append(value)
            mounts.append({"pvc": value, "mountPath": path, "subPath": mount.get("subPath", "")})
        return sorted(set(names)), mounts

    def _pod_env(
        self, run: _Run, name: str, container: dict, k8s: dict, local_root: str, result: TaskResult
    ) -> Dict[str, str]:
        # A pod's environment is the image's (applied by the container) plus what the pod spec sets.
        default_base = {} if self.image is not None else os.environ
        env = dict(default_base if self.base_env is None else self.base_env)
        env.update(self.env)
        env["KFP_POD_NAME"] = f"{run.resource_name}-system-container-impl-{random.randint(10**9, 10**10 - 1)}"
        env["KFP_POD_UID"] = str(uuid.uuid4())
        for item in container.get("env") or []:
            env[item["name"]] = str(item.get("value", ""))
        for secret in k8s.get("secretAsEnv") or []:
            if secret.get("secretNameParameter"):
                secret_name = run.resolve_parameter(secret["secretNameParameter"], name)
                if secret_name is _NULL:
                    continue
                if not isinstance(secret_name, str) or not secret_name:
                    raise _TaskError("failed to resolve secret name: expected a non-empty string")
            elif secret.get("secretName"):
                secret_name = secret["secretName"]
            else:
                raise _TaskError(
                    "missing either SecretName or SecretNameParameter for secret environment variable "
                    "in executor config"
                )
            for mapping in secret.get("keyToEnv") or []:
                data = self.secrets.get(secret_name)
                key = mapping.get("secretKey", "")
                if data is None or key not in data:
                    if secret.get("optional"):
                        continue
                    why = (
                        f'secret "{secret_name}" not found'
                        if data is None
                        else f"couldn't find key {key} in Secret {self.namespace}/{secret_name}"
                    )
                    raise _TaskError(
                        f"pod cannot start: CreateContainerConfigError: {why} (env "
                        f"{mapping.get('envVar')}; LocalKfp(secrets=...) has "
                        f"{sorted(self.secrets) if data is None else sorted(data)})"
                    )
                env[mapping["envVar"]] = data[key]
        for key in (
            "nodeSelector",
            "tolerations",
            "nodeAffinity",
            "podAffinity",
            "podMetadata",
            "imagePullSecret",
            "imagePullPolicy",
            "activeDeadlineSeconds",
            "securityContext",
        ):
            if k8s.get(key):
                result.pod[key] = k8s[key]
        if self.image is None:
            env[LOCAL_ROOT_ENV] = local_root
        return env

    def _importer(
        self, run: _Run, name: str, task: dict, component: dict, importer: dict, log, result: TaskResult
    ) -> None:
        """component/importer_launcher.go."""
        execution_id = self._next_execution_id()
        result.execution_id = execution_id
        schema = _artifact_schema(importer.get("typeSchema") or {})
        title = _schema_title(schema)
        uri_spec = importer.get("artifactUri") or {}
        if "constant" in uri_spec:
            uri = uri_spec["constant"]
            if not uri:
                raise _TaskError("failed to execute importer component: empty Artifact URI constant value")
        elif uri_spec.get("runtimeParameter"):
            param = uri_spec["runtimeParameter"]
            task_input = ((task.get("inputs") or {}).get("parameters") or {}).get(param)
            if task_input is None:
                raise _TaskError(f"cannot find parameter {param} in task input to fetch artifact uri")
            uri = run.params.get(task_input.get("componentInputParameter", ""))
            if not isinstance(uri, str) or not uri:
                raise _TaskError(f"empty artifact URI runtime value for parameter {param}")
        else:
            raise _TaskError("artifact uri not provided")
        custom = {k: _to_mlmd_value(v) for k, v in (importer.get("metadata") or {}).items()}
        provider = uri.split("://", 1)[0] if "://" in uri else ""
        if provider not in ("gs", "s3", "minio", "mem"):
            raise _TaskError(f"no provider scheme found in artifact URI: {uri}")
        custom["store_session_info"] = (
            "string",
            _go_json({"Provider": provider, "Params": {"fromEnv": "true"}}, sort_keys=True, html=True),
        )
        artifact = None
        if not importer.get("reimport"):
            for existing in self._artifacts.values():
                if existing.uri == uri and existing.title == title and existing.pipeline == run.pipeline_name:
                    artifact = existing
                    break
        if artifact is None:
            artifact = _Artifact(self._next_artifact_id(), uri, custom, title, run.pipeline_name)
            self._artifacts[artifact.id] = artifact
        keys = list(((component.get("outputDefinitions") or {}).get("artifacts") or {}))
        if len(keys) != 1:
            raise _TaskError(f"importer component has {len(keys)} output artifacts, expected one")
        execution = _Execution(execution_id, name, SUCCEEDED, {}, {keys[0]: [artifact.id]})
        self._executions[execution_id] = execution
        run.executions[name] = execution
        result.outputs = {keys[0]: [artifact.runtime()]}
        result.state = SUCCEEDED
        log.write(f"[kfp-harness] importer: {keys[0]} = {uri} (artifact {artifact.id})\n")

    # -- launcher pieces --------------------------------------------------------------------------------------

    @staticmethod
    def _prepare_output_folders(executor_input: dict, local_root: str) -> None:
        outputs = executor_input.get("outputs") or {}
        for key, param in (outputs.get("parameters") or {}).items():
            folder = os.path.dirname(param["outputFile"])
            try:
                _go_mkdir_all(folder)
            except _TaskError as e:
                raise _TaskError(f'failed to create directory "{folder}" for output parameter "{key}": {e}') from None
        for key, entry in (outputs.get("artifacts") or {}).items():
            for artifact in entry.get("artifacts") or []:
                try:
                    local = _artifact_path(artifact, local_root)
                except _TaskError as e:
                    raise _TaskError(
                        f'failed to generate local storage path for output artifact "{key}": {e}'
                    ) from None
                try:
                    _go_mkdir_all(os.path.dirname(local))
                except _TaskError as e:
                    raise _TaskError(
                        f'unable to create directory "{os.path.dirname(local)}" for output artifact "{key}": {e}'
                    ) from None

    def _download_artifacts(self, executor_input: dict, default: _BucketConfig, local_root: str) -> None:
        for key in sorted((executor_input.get("inputs") or {}).get("artifacts") or {}):
            for artifact in executor_input["inputs"]["artifacts"][key].get("artifacts") or []:
                uri = artifact.get("uri", "")
                try:
                    local = _artifact_path(artifact, local_root)
                except _TaskError:
                    continue  # "does not have a recognized storage URI ... Skipping downloading"
                if uri.startswith("oci://"):
                    raise _TaskError(f'input artifact "{key}": oci:// (Modelcar) is not emulated')
                try:
                    config = default
                    if not uri.startswith(default.prefixed_bucket()):
                        config = _parse_bucket_config(uri, with_prefix=False)
                    self._download_blob(config, local, config.key_from_uri(uri))
                except _TaskError as e:
                    raise _TaskError(
                        f'failed to download input artifact "{key}" from remote storage URI "{uri}": {e}'
                    ) from None

    def _run_command(
        self,
        argv: List[str],
        env: Dict[str, str],
        task_dir: str,
        executor_input: dict,
        local_root: str,
        log,
        mounts: Iterable[dict] = (),
    ) -> int:
        cwd = os.path.join(task_dir, "cwd")
        os.makedirs(cwd, exist_ok=True)
        logs_path = None
        entry = ((executor_input.get("outputs") or {}).get("artifacts") or {}).get(EXECUTOR_LOGS)
        if self.publish_logs and entry and len(entry.get("artifacts") or []) == 1:
            try:
                logs_path = _artifact_path(entry["artifacts"][0], local_root)
            except _TaskError:
                logs_path = None
        out = None
        if logs_path:
            try:
                out = open(logs_path, "w+b")  # os.Create before the command starts
            except OSError as e:
                log.write(f"[kfp-harness] E Error creating logFilePath, {logs_path}: {e}\n")
        if out is None:
            out = open(os.path.join(task_dir, "stdout.txt"), "w+b")
        forked = (
            self.image is None
            and argv[0] == self.python
            and argv[1:2] == ["-m"]
            and argv[2:3] != []
            and argv[2] in self.fork_steps
        )
        where = f"image {self.image.tag}" if self.image is not None else cwd
        how = ", forked from a process that imported its libraries" if forked else ", a new process"
        log.write(f"[kfp-harness] running {argv[0]} with {len(argv) - 1} argument(s) in {where}{how}\n")
        log.flush()
        try:
            try:
                if self.image is not None:
                    code = self._run_in_image(argv, env, local_root, mounts, out)
                elif forked:
                    out.flush()
                    server = _StepForks.get(self.python, argv[2], self.fork_steps[argv[2]], env)
                    code = server.run(argv[2], argv[3:], env, cwd, out.name, self.task_timeout)
                else:
                    code = subprocess.run(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        timeout=self.task_timeout,
                        check=False,
                    ).returncode
            except FileNotFoundError as e:
                raise _TaskError(f'exec: "{argv[0]}": executable file not found in $PATH ({e})') from None
            except subprocess.TimeoutExpired:
                raise _TaskError(f"the harness stopped the command after {self.task_timeout} s") from None
            finally:
                out.flush()
                out.seek(0)
                text = out.read().decode("utf-8", errors="replace")
                log.write(text if not text or text.endswith("\n") else text + "\n")
        finally:
            out.close()
        log.write(f"[kfp-harness] command exited with {code}\n")
        return code

    def _run_in_image(self, argv: List[str], env: Dict[str, str], local_root: str, mounts: Iterable[dict], out) -> int:
        """The command in a container of the image: the launcher's local folders (under `local_root` here) at
        their real paths (/minio, /s3, /gcs, /tmp/kfp), owned by the image's user as the launcher (the same
        container, the same user) leaves them; each claim at its mountPath."""

        def pod_paths(text: str) -> str:
            return text.replace(local_root, "")

        user = self.image.config.get("User") or ""
        uid, _, gid = user.partition(":")
        if uid.isdigit() and int(uid) != 0:
            for folder, _, files in os.walk(local_root):
                for path in [folder, *(os.path.join(folder, f) for f in files)]:
                    os.lchown(path, int(uid), int(gid or uid))
        # KFP's emptyDirs are /minio, /s3, /gcs (argocompiler/container.go); the parameter files' /tmp/kfp and
        # the executor output's folder are in the container's own /tmp, which stays the image's.
        volumes = []
        for top in sorted(os.listdir(local_root)):
            if top == "tmp":
                tmp = os.path.join(local_root, "tmp")
                volumes += [(os.path.join(tmp, sub), "/tmp/" + sub) for sub in sorted(os.listdir(tmp))]
            else:
                volumes.append((os.path.join(local_root, top), "/" + top))
        volumes += [(m["mountPath"], m["mountPath"]) for m in mounts]
        return self.image.run(
            [pod_paths(a) for a in argv],
            {k: pod_paths(v) for k, v in env.items()},
            volumes,
            stdout=out,
            timeout=self.task_timeout,
        )

    def _upload_and_record(
        self,
        run: _Run,
        executor_input: dict,
        executor_output: dict,
        config: _BucketConfig,
        succeeded: bool,
        log,
        execution: _Execution,
        result: TaskResult,
        local_root: str,
    ) -> None:
        """launcher_v2.go uploadOutputArtifacts + metadata RecordArtifact."""
        artifacts = (executor_input.get("outputs") or {}).get("artifacts") or {}
        if not succeeded:
            artifacts = {k: v for k, v in artifacts.items() if k == EXECUTOR_LOGS}
        recorded: Dict[str, List[int]] = {}
        for key in sorted(artifacts):
            for artifact in artifacts[key].get("artifacts") or []:
                artifact = json.loads(json.dumps(artifact))
                if executor_output and key != EXECUTOR_LOGS:
                    given = ((executor_output.get("artifacts") or {}).get(key) or {}).get("artifacts") or []
                    if given:
                        _merge_runtime_artifacts(given[0], artifact)
                try:
                    local = _artifact_path(artifact, local_root)
                except _TaskError:
                    log.write(
                        f'[kfp-harness] W Output Artifact "{key}" does not have a recognized storage URI '
                        f'"{artifact.get("uri")}". Skipping uploading to remote storage.\n'
                    )
                    if key == EXECUTOR_LOGS:
                        continue
                    local = None
                if local is not None and not artifact["uri"].startswith("oci://"):
                    try:
                        blob_key = config.key_from_uri(artifact["uri"])
                    except _TaskError as e:
                        if not succeeded:
                            continue
                        raise _TaskError(f'failed to upload output artifact "{key}": {e}') from None
                    try:
                        self._store(config)
                        count = self._upload_blob(config, local, blob_key)
                        log.write(f"[kfp-harness] uploaded {count} file(s) of {key} to {artifact['uri']}\n")
                    except FileNotFoundError:
                        log.write(f'[kfp-harness] W Local filepath "{local}" does not exist\n')
                        if key == EXECUTOR_LOGS:
                            continue
                    except _TaskError as e:
                        if not succeeded:
                            continue
                        raise _TaskError(
                            f'failed to upload output artifact "{key}" to remote storage URI "{artifact["uri"]}": {e}'
                        ) from None
                try:
                    title = _schema_title(_artifact_schema(artifact.get("type") or {}))
                except _TaskError as e:
                    raise _TaskError(f'failed to determine schema for output "{key}": {e}') from None
                custom = {}
                for mkey, mvalue in (artifact.get("metadata") or {}).items():
                    if mkey == "_kfp_workspace":
                        continue
                    try:
                        custom[mkey] = _to_mlmd_value(mvalue)
                    except _TaskError as e:
                        raise _TaskError(
                            f'unable to produce MLMD artifact for output "{key}": failed to convert '
                            f"RuntimeArtifact to MLMD artifact: {e}"
                        ) from None
                custom.setdefault("display_name", ("string", key))
                custom.setdefault("store_session_info", ("string", _store_session_info(run.root, self.providers)))
                record = _Artifact(self._next_artifact_id(), artifact["uri"], custom, title, run.pipeline_name)
                self._artifacts[record.id] = record
                recorded.setdefault(key, []).append(record.id)
        execution.output_artifacts = recorded
        result.outputs = {k: [self._artifacts[i].runtime() for i in v] for k, v in recorded.items()}


def _qualify_executor_logs(executor_input: dict, retry_index: str) -> None:
    """launcher_v2.go qualifyExecutorLogsURI (2.16.1 on): the executor-logs artifact's URI (and custom path)
    gets "-<retry index>", once, before the command's placeholders are compiled."""
    entry = ((executor_input.get("outputs") or {}).get("artifacts") or {}).get(EXECUTOR_LOGS)
    if not entry or len(entry.get("artifacts") or []) != 1:
        return
    artifact = entry["artifacts"][0]
    suffix = "-" + retry_index
    for key in ("uri", "customPath"):
        value = artifact.get(key)
        if value and not value.endswith(suffix):
            artifact[key] = value + suffix


def _artifact_path(artifact: dict, local_root: str) -> str:
    """retrieveArtifactPath: customPath, else LocalPathForURI (rooted)."""
    if artifact.get("customPath"):
        return artifact["customPath"]
    return local_path_for_uri(artifact.get("uri", ""), local_root)


def _merge_runtime_artifacts(src: dict, dst: dict) -> None:
    if src.get("uri"):
        dst["uri"] = src["uri"]
    if src.get("metadata") is not None:
        if dst.get("metadata") is None:
            dst["metadata"] = src["metadata"]
        else:
            dst["metadata"].update(src["metadata"])
    if src.get("customPath"):
        dst["customPath"] = src["customPath"]


_OUTPUT_FIELDS = {
    "parameters": "parameters",
    "artifacts": "artifacts",
    "parameterValues": "parameterValues",
    "parameter_values": "parameterValues",
}
_ARTIFACT_FIELDS = {
    "name": "name",
    "type": "type",
    "uri": "uri",
    "properties": "properties",
    "customProperties": "customProperties",
    "custom_properties": "customProperties",
    "metadata": "metadata",
    "customPath": "customPath",
    "custom_path": "customPath",
}


def _read_executor_output(path: str, log) -> dict:
    """getExecutorOutputFile: no file = empty output; otherwise protojson.Unmarshal (unknown fields refused)."""
    if not os.path.exists(path):
        log.write(f"[kfp-harness] output metadata file does not exist in {path}\n")
        return {}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fail = f'failed to unmarshall ExecutorOutput in file "{path}": '
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise _TaskError(fail + str(e)) from None
    if not isinstance(raw, dict):
        raise _TaskError(fail + "not a JSON object")
    out: Dict[str, Any] = {}
    for field, value in raw.items():
        if field not in _OUTPUT_FIELDS:
            raise _TaskError(fail + f'unknown field "{field}"')
        out[_OUTPUT_FIELDS[field]] = value
    for key, entry in (out.get("artifacts") or {}).items():
        if not isinstance(entry, dict) or set(entry) - {"artifacts"}:
            raise _TaskError(fail + f"artifacts[{key}] is not an ArtifactList")
        fixed = []
        for artifact in entry.get("artifacts") or []:
            unknown = set(artifact) - set(_ARTIFACT_FIELDS)
            if unknown:
                raise _TaskError(fail + f'unknown field "{sorted(unknown)[0]}"')
            fixed.append({_ARTIFACT_FIELDS[k]: v for k, v in artifact.items()})
        entry["artifacts"] = fixed
    log.write(f"[kfp-harness] ExecutorOutput: {text.strip()}\n")
    return out


def _collect_output_parameters(executor_input: dict, executor_output: dict, component: dict) -> Dict[str, Any]:
    values = {k: _canon(v) for k, v in (executor_output.get("parameterValues") or {}).items()}
    specs = (component.get("outputDefinitions") or {}).get("parameters") or {}
    for name, param in ((executor_input.get("outputs") or {}).get("parameters") or {}).items():
        if name in values:
            continue
        if name not in specs:
            raise _TaskError(f'failed to find output parameter name="{name}" in component spec')
        ptype = specs[name].get("parameterType", "")
        path = param["outputFile"]
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise _TaskError(
                f'failed to read output parameter name="{name}" type="{ptype}" path="{path}": '
                f"open {path}: {e.strerror.lower() if e.strerror else e}"
            ) from None
        try:
            values[name] = _text_to_pb_value(text, ptype)
        except _TaskError as e:
            raise _TaskError(
                f'failed to read output parameter name="{name}" type="{ptype}" path="{path}": {e}'
            ) from None
    return values


_PARAM_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['(.+?)']}}")


def _resolve_placeholders(arg: str, executor_input: dict) -> str:
    values = executor_input["inputs"].get("parameterValues") or {}

    def one(match: re.Match) -> str:
        if match.group(1) not in values:
            raise _TaskError(
                f'failed to resolve input parameters: parameter "{match.group(1)}" not found in executor input'
            )
        return _pb_value_to_string(values[match.group(1)])

    return _PARAM_PLACEHOLDER.sub(one, arg)


def _resolve_container_args(args: List[str], executor_input: dict) -> List[str]:
    """driver/util.go resolveContainerArgs."""
    out: List[str] = []
    values = executor_input["inputs"].get("parameterValues") or {}
    for arg in args:
        arg = str(arg)
        if "$.outputs" in arg:
            out.append(arg)
        elif arg.strip().startswith('{"IfPresent":'):
            try:
                clause = json.loads(arg)["IfPresent"]
            except (ValueError, KeyError, TypeError) as e:
                raise _TaskError(f"failed to resolve condition: failed to parse IfPresent JSON: {e}") from None
            present = clause.get("InputName") in values and values[clause.get("InputName")] is not None
            chosen = clause.get("Then") if present else clause.get("Else")
            if chosen is None:
                continue
            for item in [chosen] if isinstance(chosen, str) else chosen:
                if not isinstance(item, str):
                    raise _TaskError(
                        f"failed to resolve condition: non-string item in IfPresent Then/Else array: "
                        f"{type(item).__name__}"
                    )
                out.append(_resolve_placeholders(item, executor_input))
        else:
            out.append(_resolve_placeholders(arg, executor_input))
    return out


def _compile_cmd_and_args(
    executor_input: dict, input_json: str, command: List[str], args: List[str], local_root: str
) -> Tuple[str, List[str]]:
    """launcher_v2.go compileCmdAndArgs: the launcher gets command+args as one list; the first element is the
    command, which only gets `{{$}}` replaced."""
    everything = list(command) + list(args)
    placeholders = _launcher_placeholders(executor_input, local_root)
    cmd = everything[0].replace("{{$}}", input_json)
    compiled = []
    for arg in everything[1:]:
        arg = arg.replace("{{$}}", input_json)
        for placeholder, replacement in placeholders.items():
            arg = arg.replace(placeholder, replacement)
        compiled.append(arg)
    return cmd, compiled


def _launcher_placeholders(executor_input: dict, local_root: str) -> Dict[str, str]:
    """launcher_v2.go getPlaceholders."""
    out: Dict[str, str] = {}
    inputs, outputs = executor_input.get("inputs") or {}, executor_input.get("outputs") or {}
    for name, entry in (inputs.get("artifacts") or {}).items():
        if not entry.get("artifacts"):
            continue
        artifact = entry["artifacts"][0]
        out[f"{{{{$.inputs.artifacts['{name}'].uri}}}}"] = artifact.get("uri", "")
        try:
            out[f"{{{{$.inputs.artifacts['{name}'].path}}}}"] = _artifact_path(artifact, local_root)
        except _TaskError:
            pass
    for name, entry in (outputs.get("artifacts") or {}).items():
        if not entry.get("artifacts"):
            continue
        artifact = entry["artifacts"][0]
        out[f"{{{{$.outputs.artifacts['{name}'].uri}}}}"] = artifact.get("uri", "")
        try:
            out[f"{{{{$.outputs.artifacts['{name}'].path}}}}"] = _artifact_path(artifact, local_root)
        except _TaskError as e:
            raise _TaskError(
                f'failed to get placeholders: resolve output artifact "{name}"\'s local path: {e}'
            ) from None
    for name, value in (inputs.get("parameterValues") or {}).items():
        key = f"{{{{$.inputs.parameters['{name}']}}}}"
        kind = _kind(value)
        if kind == "string":
            out[key] = value
        elif kind == "number":
            out[key] = _go_float(value, "f")
        elif kind == "bool":
            out[key] = "true" if value else "false"
        elif kind in ("list", "struct"):
            out[key] = _go_json(_canon(value), sort_keys=True, html=True)
        else:
            raise _TaskError(f"failed to get placeholders: unknown PipelineSpec Value type {kind}")
    for name, param in (outputs.get("parameters") or {}).items():
        out[f"{{{{$.outputs.parameters['{name}'].output_file}}}}"] = param.get("outputFile", "")
    return out
