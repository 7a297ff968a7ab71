"""Container entry point of every Kubeflow step: TFX's `kubeflow_v2_run_executor`, adapted to what open-source
KFP's launcher (backend/src/v2/component/launcher_v2.go) gives a step and expects back.

1. Artifact types. TFX reads each artifact's class from the `type` in the executor input. Vertex AI passes the
   compiled instance schema (`title: tfx.Examples`); open-source KFP passes none, or a `system.*` title, and
   TFX fails before the executor starts (tensorflow/tfx#7768). The compiler (pipeline/kfp/compiler.py) adds
   `--tfxflow_artifact_types '{"examples": "tfx.Examples", ...}'`; the titles are restored where missing,
   and outputs the component does not declare (the launcher's `executor-logs`) are left to the launcher.
2. Local paths. The launcher downloads every input artifact from the pipeline root (minio://, s3://, gs://) to
   a local path before the step starts and uploads every output from its local path after it ends
   (`LocalPathForURI`: minio://b/k <-> /minio/b/k, s3:// <-> /s3/, gs:// <-> /gcs/). TFX executors use an
   artifact's `uri` as given, and TF has no S3 file system; so the executors get the local paths, and the
   executor output names the remote URIs again (the launcher takes an output's URI from that file, and uploads
   from the local path of that URI). TF then never writes to the store itself: no `dir/` marker objects, which
   the launcher fails to download (kubeflow/pipelines#13476).
3. Folders that are not artifacts: the input CSV folder (`input_base`) and the serving-data folder are copied
   from an object store to a local folder first. (The Trainer's backup and the Pusher's destination are
   written by those components through components/object_store.py.) So is the wheel of a module file that the
   compiler staged under the pipeline root (`module_path`), which TFX would read with TensorFlow's file I/O.
4. Value inputs (a `str` from another step, as MlflowStart's run id) are read before the executor runs; TFX's
   entry point leaves them unread and the step fails.
5. `--direct_num_workers=0` means one Beam worker per core of the pod (its CPU limit), not of the node.
6. Beam workers outside the pod (`--beam-runner flink`, `spark`, `dataflow`, or `portable` with workers that
   are not LOOPBACK: pipeline/beam_runners.py) cannot read the launcher's local copies: a Beam step then keeps
   its gs:// URIs (the compiler allows only gs:// roots and data for such runners), and afterwards deletes the
   zero-byte `dir/` objects TF's GCS file system wrote under its outputs, which the next step's launcher
   fails to download (#13476). Its local output paths stay empty; the launcher only warns about them.
7. Beam worker containers: the same image serves as the Beam SDK worker (DOCKER environments, Dataflow, a
   `--worker_pool` sidecar). Those start it with Beam's boot flags, which are handed on to Beam's boot
   (`/opt/apache/beam/boot`, from tensorflow/tfx:1.16.0, whose own entry point it is).

8. The lane (components/lane.py): the compiler adds `--tfxflow_lane current:1.21.0`, the lane and TFX that compiled
   the spec; a step in an image of the other lane stops before its executor starts, naming the build argument
   that makes the right image (TFX reads the IR its own version writes, and the lanes' locks differ).

9. A training job's replica (`--tfxflow_replica`, pipeline/kfp/replica.py): no launcher runs in its pod, so it
   downloads its inputs itself, and its chief uploads the outputs and the executor output file.

`TFXFLOW_KFP_LOCAL_ROOT` moves the launcher's local folders from `/` elsewhere, for running steps outside a
pod (the tests' KFP emulation).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import sys
import tempfile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from tfxflow.components import lane, object_store
from tfxflow.components.training import hardware
from tfxflow.pipeline import beam_runners, patches
from tfxflow.pipeline.heartbeat import HEARTBEAT_S, Heartbeat
from tfxflow.pipeline.kfp import replica, training_job

TYPES_FLAG = "--tfxflow_artifact_types"
LANE_FLAG = "--tfxflow_lane"
EXIT_WRONG_IMAGE = 3
INVOCATION_FLAG = "--json_serialized_invocation_args"
EXECUTOR_FLAG = "--executor_class_path"
BEAM_BOOT = "/opt/apache/beam/boot"
# Flags only Beam's runners pass when they start an SDK worker container (sdks/python/container/boot.go).
BEAM_WORKER_FLAGS = ("--provision_endpoint", "--worker_pool")
LOCAL_ROOT_ENV = "TFXFLOW_KFP_LOCAL_ROOT"
BEAM_WORKERS_FLAG = "--direct_num_workers"
# Execution properties that name folders a step reads without them being artifacts.
STAGED_FOLDERS = ("input_base", "serving_data_root")


def artifact_title(artifact_type: Mapping) -> Optional[str]:
    """The TFX type title of a KFP artifact type (`schemaTitle`, or the `title` of its instance schema)."""
    if artifact_type.get("schemaTitle"):
        return artifact_type["schemaTitle"]
    schema = artifact_type.get("instanceSchema")
    if schema:
        loaded = yaml.safe_load(schema)
        if isinstance(loaded, dict) and loaded.get("title"):
            return str(loaded["title"])
    return None


def restore_artifact_types(executor_input: dict, titles: Mapping[str, str]) -> List[str]:
    """Sets `title` from `titles` on every input and output artifact whose type is missing or a KFP `system.*`
    type; returns the keys it changed."""
    changed = []
    for side in ("inputs", "outputs"):
        for key, entry in (executor_input.get(side, {}).get("artifacts") or {}).items():
            title = titles.get(key)
            if not title:
                continue
            for artifact in entry.get("artifacts", []):
                current = artifact_title(artifact.get("type") or {})
                if current is None or current.startswith("system."):
                    artifact["type"] = {"instanceSchema": f"title: {title}\ntype: object\n"}
                    changed.append(key)
    return changed


def drop_launcher_outputs(executor_input: dict, titles: Mapping[str, str]) -> List[str]:
    """Removes output artifacts the component does not declare (the launcher's own `executor-logs`, which it
    writes itself); TFX would fail to load their `system.Artifact` class. Returns the keys removed."""
    outputs = executor_input.get("outputs", {}).get("artifacts") or {}
    foreign = [key for key in outputs if key not in titles]
    for key in foreign:
        del outputs[key]
    return foreign


def rewrite_argv(argv: Sequence[str]) -> List[str]:
    """`argv` without the types flag, and with the executor input's artifact types restored."""
    args = list(argv)
    titles: Dict[str, str] = {}
    if TYPES_FLAG in args:
        i = args.index(TYPES_FLAG)
        titles = json.loads(args[i + 1])
        del args[i : i + 2]
    if titles and INVOCATION_FLAG in args:
        i = args.index(INVOCATION_FLAG) + 1
        executor_input = json.loads(args[i])
        if restore_artifact_types(executor_input, titles) + drop_launcher_outputs(executor_input, titles):
            args[i] = json.dumps(executor_input)
    return args


def compiled_lane() -> str:
    """The value of the lane flag this installation's compiler writes, e.g. "current:1.21.0"."""
    return f"{lane.name()}:{lane.tfx_version()}"


def pop_lane(argv: Sequence[str]) -> Tuple[List[str], str]:
    """`argv` without the lane flag, and its value ("" for a spec compiled before the flag existed)."""
    args = list(argv)
    if LANE_FLAG not in args:
        return args, ""
    i = args.index(LANE_FLAG)
    value = args[i + 1]
    del args[i : i + 2]
    return args, value


def lane_mismatch(compiled: str) -> str:
    """Why a step of a spec compiled as `compiled` cannot run here; "" when it can."""
    if not compiled:
        return ""
    spec_lane, _, spec_tfx = compiled.partition(":")
    if spec_lane == lane.name():
        return ""
    return (
        f"the spec was compiled by the {spec_lane} lane (TFX {spec_tfx or '?'}) and this image is of the "
        f"{lane.name()} lane (TFX {lane.tfx_version()}): a step runs in an image of the lane that compiled it. "
        f"Build the image with `--build-arg LANE={spec_lane}` (kubeflow/Dockerfile), or compile the pipeline "
        f"with the {lane.name()} lane, and submit again"
    )


def localize_artifacts(executor_input: dict, root: str = "/") -> Dict[str, str]:
    """Points every input and output artifact with a remote URI at the launcher's local path for it; returns
    {local path: remote URI}."""
    remote_of = {}
    for side in ("inputs", "outputs"):
        for entry in (executor_input.get(side, {}).get("artifacts") or {}).values():
            for artifact in entry.get("artifacts", []):
                uri = artifact.get("uri", "")
                if object_store.is_remote(uri):
                    local = object_store.local_path_for_uri(uri, root)
                    remote_of[local] = uri
                    artifact["uri"] = local
    return remote_of


def stage_folders(executor_input: dict, workdir: str) -> Dict[str, str]:
    """Copies the remote folders named by `STAGED_FOLDERS` parameters into `workdir` and points the parameters
    there; returns {parameter: remote URI}."""
    values = executor_input.get("inputs", {}).get("parameterValues") or {}
    staged = {}
    for key in STAGED_FOLDERS:
        uri = values.get(key)
        if isinstance(uri, str) and object_store.is_remote(uri):
            local = os.path.join(workdir, key)
            count = object_store.download(uri, local)
            print(f"tfxflow: {key}: {count} file(s) from {uri}", file=sys.stderr)
            values[key] = local
            staged[key] = uri
    return staged


def stage_user_module(executor_input: dict, workdir: str) -> Optional[str]:
    """Copies a module file's wheel that the compiler staged in the object store (`module_path` is
    `module@<uri of the wheel>`) into `workdir` and points `module_path` at the copy, for TFX to install;
    returns the wheel's URI, or None when the step takes no such wheel."""
    values = executor_input.get("inputs", {}).get("parameterValues") or {}
    key = values.get("module_path")
    if not isinstance(key, str) or "@" not in key:
        return None
    module, wheel = key.split("@", 1)
    if not object_store.is_remote(wheel):
        return None
    local = os.path.join(workdir, "wheels", wheel.rsplit("/", 1)[-1])
    object_store.download(wheel, local)
    print(f"tfxflow: module file {module}: its wheel from {wheel}", file=sys.stderr)
    values["module_path"] = f"{module}@{local}"
    return wheel


def restore_output_uris(output_file: str, remote_of: Mapping[str, str]) -> int:
    """Puts the remote URIs back into the executor output file's artifacts; returns how many it changed."""
    if not os.path.exists(output_file):
        return 0
    with open(output_file, encoding="utf-8") as f:
        output = json.load(f)
    changed = 0
    for entry in (output.get("artifacts") or {}).values():
        for artifact in entry.get("artifacts", []):
            uri = artifact.get("uri", "").rstrip("/")
            if uri in remote_of:
                artifact["uri"] = remote_of[uri]
                changed += 1
    with open(output_file, "w", encoding="utf-8") as f:
        json.dump(output, f)
    return changed


def size_beam_workers(args: List[str], cpus: int) -> List[str]:
    """`--direct_num_workers=0` (one per core) made explicit with the pod's CPUs."""
    return [f"{BEAM_WORKERS_FLAG}={cpus}" if a == f"{BEAM_WORKERS_FLAG}=0" else a for a in args]


def is_beam_worker(argv: Sequence[str]) -> bool:
    """Whether a Beam runner started this container as an SDK worker (not a KFP step)."""
    return any(arg.split("=", 1)[0] in BEAM_WORKER_FLAGS for arg in argv[1:])


def remote_beam_step(args: Sequence[str]) -> bool:
    """Whether this step runs a Beam executor whose workers are outside the pod (item 6 above)."""
    if EXECUTOR_FLAG not in args or not beam_runners.workers_are_remote_in(args):
        return False
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.utils import import_utils

    executor = import_utils.import_class_by_path(args[args.index(EXECUTOR_FLAG) + 1])
    return issubclass(executor, BaseBeamExecutor)


def check_remote_uris(executor_input: dict) -> List[str]:
    """The gs:// URIs of the output artifacts of a step whose Beam workers are outside the pod; raises
    ValueError naming any artifact or input folder those workers could not read."""
    outputs = []
    for side in ("inputs", "outputs"):
        for key, entry in (executor_input.get(side, {}).get("artifacts") or {}).items():
            for artifact in entry.get("artifacts", []):
                uri = artifact.get("uri", "")
                if not uri.startswith("gs://"):
                    raise ValueError(
                        f"{side[:-1]} artifact {key} is at '{uri}': Beam workers outside the pod read and "
                        "write artifacts themselves, which needs a gs:// pipeline root"
                    )
                if side == "outputs":
                    outputs.append(uri)
    values = executor_input.get("inputs", {}).get("parameterValues") or {}
    for key in STAGED_FOLDERS:
        uri = values.get(key)
        if isinstance(uri, str) and uri and not uri.startswith("gs://"):
            raise ValueError(f"{key} '{uri}': Beam workers outside the pod read it themselves: give a gs:// URI")
    return outputs


def remove_dir_markers(uris: Sequence[str]) -> int:
    """Deletes the zero-byte `folder/` objects under each gs:// URI (TF's GCS file system writes one per
    folder it creates; KFP's launcher fails to download them, kubeflow/pipelines#13476). Returns how many."""
    removed = 0
    for uri in uris:
        store, key = object_store.backend(uri.rstrip("/"))
        with store.errors():
            markers = [k for k in store.walk(key + "/") if k.endswith("/")]
            if markers:
                store.delete_keys(markers)
        removed += len(markers)
    return removed


def reading_value_inputs(parse):
    """`parse` (TFX's `parse_raw_artifact_dict`) that also reads the value of every ValueArtifact whose file
    exists, i.e. each input one (a function component's `str` or `int` from another step).

    TFX's Kubeflow V2 entry point hands them over unread, and the component fails with "The artifact value has
    not yet been read from storage" (its local launcher reads them first). Outputs have no file yet."""
    from tfx.dsl.io import fileio
    from tfx.types.value_artifact import ValueArtifact

    @functools.wraps(parse)
    def parse_and_read(*args, **kwargs):
        parsed = parse(*args, **kwargs)
        for artifacts in parsed.values():
            for artifact in artifacts:
                if (
                    isinstance(artifact, ValueArtifact)
                    and fileio.exists(artifact.uri)
                    and not fileio.isdir(artifact.uri)
                ):
                    artifact.read()
        return parsed

    return parse_and_read


def step_label(args: Sequence[str]) -> str:
    """The step's name for its log, from its executor class: `transform` for tfx.components.transform.executor.
    Executor (and tfxflow.components.training.transform.Executor), `DataGate` for components.gate.DataGate_Executor,
    `csv_input` for components.csv_input.Executor."""
    if EXECUTOR_FLAG not in args:
        return "step"
    parts = args[args.index(EXECUTOR_FLAG) + 1].split(".")
    if parts[-1].endswith("_Executor"):
        return parts[-1][: -len("_Executor")]
    modules = [p for p in parts[:-1] if p != "executor"]
    return modules[-1] if modules else parts[-1]


def _run_and_restore(
    parsed,
    output_file: str,
    remote_of: Mapping[str, str],
    remote_outputs: Sequence[str],
    label: str = "step",
    heartbeat_s: Optional[float] = None,
    publish_to: str = "",
) -> None:
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as tfx_utils
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    # This process runs one step; TFX's entry point calls the parser through its module.
    tfx_utils.parse_raw_artifact_dict = reading_value_inputs(tfx_utils.parse_raw_artifact_dict)
    # The step's log (KFP keeps stdout and stderr) shows a long step's progress, as the local runner's console.
    with Heartbeat(sys.stderr, heartbeat_s or HEARTBEAT_S) as heartbeat:
        heartbeat.begin(f"tfxflow: {label}")
        tfx_entrypoint.main(parsed)
    restore_output_uris(output_file, remote_of)
    if publish_to:
        replica.publish_outputs(remote_of, output_file, publish_to)
    if remote_outputs:
        print(
            f"tfxflow: removed {remove_dir_markers(remote_outputs)} folder marker object(s) under the outputs",
            file=sys.stderr,
        )


CHECK_IMAGE_FLAG = "--check-image"


def check_image() -> List[str]:
    """Imports what a compiled step names by module path (the Transform and Trainer functions, the pipeline's
    components and their executors) and TFX's Kubeflow entry point; returns those paths. The image build runs it, so a
    renamed module fails the build instead of the first run."""
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor  # noqa: F401
    from tfx.utils import import_utils

    # lazy: it imports TensorFlow, TFX and Beam
    from tfxflow.pipeline import definition

    # The definition imports every component of the pipeline (their executors are named by module path); the
    # launcher of a Trainer on several workers is a step's command.
    importlib.import_module(training_job.LAUNCHER_MODULE)
    functions = [definition.PREPROCESSING_FN, definition.RUN_FN]
    for path in functions:
        module, _, name = path.rpartition(".")
        import_utils.import_func_from_module(module, name)
    return [definition.__name__, training_job.LAUNCHER_MODULE, *functions]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Runs the step's executor as TFX's Kubeflow V2 entry point does, on local copies of its artifacts; as a
    Beam SDK worker container, runs Beam's boot instead. `--check-image` only checks the image's imports."""
    argv = list(sys.argv if argv is None else argv)
    if is_beam_worker(argv):
        if not os.access(BEAM_BOOT, os.X_OK):  # the current lane's image: its base has no Beam SDK container
            print(
                f"tfxflow: started as a Beam SDK worker, and this image has no {BEAM_BOOT}: copy it from Beam's "
                f"SDK image of this Python and Beam (apache/beam_python{sys.version_info[0]}.{sys.version_info[1]}"
                f"_sdk:{lane.installed_version('apache-beam') or '<version>'}) into the image, or run the Beam "
                "steps with LOOPBACK or PROCESS workers",
                file=sys.stderr,
            )
            sys.exit(EXIT_WRONG_IMAGE)
        os.execv(BEAM_BOOT, [BEAM_BOOT, *argv[1:]])
    if argv[1:] == [CHECK_IMAGE_FLAG]:
        hardware.use_keras_2()
        for path in check_image():
            print(f"tfxflow image check: imports {path}")
        return
    argv, compiled = pop_lane(argv)
    in_job = replica.REPLICA_FLAG in argv  # a training job's replica (pipeline/kfp/replica.py)
    if in_job:
        argv.remove(replica.REPLICA_FLAG)
        replica.adopt_node_tf_config()
    problem = lane_mismatch(compiled)
    if problem:
        print(f"tfxflow: {step_label(argv)}: {problem}", file=sys.stderr)
        sys.exit(EXIT_WRONG_IMAGE)
    hardware.use_keras_2()
    hardware.use_arrow_jemalloc()
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    args = size_beam_workers(rewrite_argv(argv), hardware.pod_cpus())
    if EXECUTOR_FLAG in args and patches.runs_beam(args[args.index(EXECUTOR_FLAG) + 1]):
        patches.apply()  # only a step that runs Beam work
    workdir = tempfile.mkdtemp(prefix="tfxflow-step-")
    try:
        i = args.index(INVOCATION_FLAG) + 1
        executor_input = json.loads(args[i])
        remote_outputs: List[str] = []
        job_output = replica.job_output_uri(executor_input) if in_job else ""
        if remote_beam_step(args):
            remote_of = {}
            remote_outputs = check_remote_uris(executor_input)
        else:
            remote_of = localize_artifacts(executor_input, os.environ.get(LOCAL_ROOT_ENV, "/"))
            if in_job:
                replica.download_inputs(remote_of, executor_input)
                # no launcher reads it in this pod: the chief publishes it (publish_to)
                executor_input["outputs"]["outputFile"] = os.path.join(workdir, replica.OUTPUT_FILE)
            stage_folders(executor_input, workdir)
        stage_user_module(executor_input, workdir)
        args[i] = json.dumps(executor_input)
        output_file = executor_input.get("outputs", {}).get("outputFile", "")
        app.run(
            functools.partial(
                _run_and_restore,
                output_file=output_file,
                remote_of=remote_of,
                remote_outputs=remote_outputs,
                label=step_label(args),
                publish_to=job_output if in_job and replica.is_chief() else "",
            ),
            argv=args,
            flags_parser=tfx_entrypoint._parse_flags,  # noqa: SLF001 (TFX's own flag parser, as its main uses)
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
