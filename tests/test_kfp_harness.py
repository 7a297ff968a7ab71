"""The local KFP emulation (tests/kfp_harness.py) on small hand-written specs whose steps are `python -c` scripts,
against the session's moto S3 server. No TFX."""

from __future__ import annotations

import json
import os
import re
import textwrap
import uuid
from typing import Dict, Optional

import pytest
import yaml

from tests import kfp_sdk_pipeline
from tests.kfp_harness import CACHED, FAILED, NOT_RUN, SUCCEEDED, LocalKfp, NotEmulated, Refused

pytestmark = pytest.mark.integration

# Every step starts with this: the executor input from argv[1], and KFP's LocalPathForURI under the local root
# the harness gives the step (a pod's launcher uses / itself).
PRELUDE = """
import json, os, sys
ei = json.loads(sys.argv[1])
ROOT = os.environ["TFXFLOW_KFP_LOCAL_ROOT"]
def lp(uri):
    for scheme, folder in (("minio://", "minio"), ("s3://", "s3"), ("gs://", "gcs")):
        if uri.startswith(scheme):
            return os.path.join(ROOT, folder, uri[len(scheme):])
    raise ValueError(uri)
def out(key):
    return lp(ei["outputs"]["artifacts"][key]["artifacts"][0]["uri"])
def inp(key):
    return lp(ei["inputs"]["artifacts"][key]["artifacts"][0]["uri"])
P = ei["inputs"].get("parameterValues", {})
"""


def const(value):
    return {"runtimeValue": {"constant": value}}


def root_param(name):
    return {"componentInputParameter": name}


def task_out(task, key):
    return {"taskOutputParameter": {"producerTask": task, "outputParameterKey": key}}


class Spec:
    """A pipeline spec as the KFP SDK compiles it (schema 2.1.0), built step by step."""

    def __init__(self, name: str, root_params: Optional[dict] = None):
        self.name = name
        self.root_params = root_params or {}
        self.tasks: Dict[str, dict] = {}
        self.components: Dict[str, dict] = {}
        self.executors: Dict[str, dict] = {}
        self.platform: Dict[str, dict] = {}

    def step(
        self,
        name: str,
        script: str = "",
        *,
        params=None,
        artifacts=None,
        outputs=None,
        out_params=None,
        deps=(),
        cache=False,
        args=("{{$}}",),
        env=None,
        k8s=None,
        executor=None,
        component_params=None,
    ):
        label = f"exec-{name}"
        component = {"executorLabel": label}
        inputs: dict = {}
        if params:
            component.setdefault("inputDefinitions", {})["parameters"] = {
                p: {"parameterType": ptype} for p, (ptype, _) in params.items()
            }
            inputs["parameters"] = {p: spec for p, (_, spec) in params.items()}
        if component_params:
            component.setdefault("inputDefinitions", {}).setdefault("parameters", {}).update(component_params)
        if artifacts:
            component.setdefault("inputDefinitions", {})["artifacts"] = {
                a: {"artifactType": {"schemaTitle": title, "schemaVersion": "0.0.1"}}
                for a, (_, _, title) in artifacts.items()
            }
            inputs["artifacts"] = {
                a: {"taskOutputArtifact": {"producerTask": p, "outputArtifactKey": k}}
                for a, (p, k, _) in artifacts.items()
            }
        if outputs or out_params:
            component["outputDefinitions"] = {}
        if outputs:
            component["outputDefinitions"]["artifacts"] = {
                k: {"artifactType": {"schemaTitle": title, "schemaVersion": "0.0.1"}} for k, title in outputs.items()
            }
        if out_params:
            component["outputDefinitions"]["parameters"] = {k: {"parameterType": t} for k, t in out_params.items()}
        self.components[f"comp-{name}"] = component
        if executor is None:
            container = {
                "image": "r/i:1",
                "command": ["python", "-c", PRELUDE + textwrap.dedent(script)],
                "args": list(args),
            }
            if env:
                container["env"] = [{"name": k, "value": v} for k, v in env.items()]
            executor = {"container": container}
        self.executors[label] = executor
        task = {
            "componentRef": {"name": f"comp-{name}"},
            "taskInfo": {"name": name},
            "cachingOptions": {"enableCache": cache},
        }
        if inputs:
            task["inputs"] = inputs
        if deps:
            task["dependentTasks"] = sorted(deps)
        self.tasks[name] = task
        if k8s:
            self.platform[label] = k8s
        return self

    def write(self, path) -> str:
        spec = {
            "pipelineInfo": {"name": self.name},
            "schemaVersion": "2.1.0",
            "sdkVersion": "kfp-2.5.0",
            "defaultPipelineRoot": "gs://never-used/root",  # the backend ignores it; so does the harness
            "root": {"dag": {"tasks": self.tasks}},
            "components": self.components,
            "deploymentSpec": {"executors": self.executors},
        }
        if self.root_params:
            spec["root"]["inputDefinitions"] = {"parameters": self.root_params}
        docs = [spec]
        if self.platform:
            docs.append({"platforms": {"kubernetes": {"deploymentSpec": {"executors": self.platform}}}})
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(docs, f, sort_keys=True)
        return str(path)


@pytest.fixture
def bucket(s3_server):
    return s3_server.create_bucket(f"kh-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def kfp(tmp_path, s3_server, bucket):
    return LocalKfp(str(tmp_path / "kfp"), s3_server.env, default_pipeline_root=f"minio://{bucket}/pipeline-root")


def keys(s3_server, bucket, prefix=""):
    pages = s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def read(s3_server, bucket, key) -> str:
    return s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read().decode()


def key_of(uri: str, bucket: str) -> str:
    prefix = f"minio://{bucket}/"
    assert uri.startswith(prefix), uri
    return uri[len(prefix) :]


MAKE = """
assert sys.argv[3] == "2", sys.argv[3]                       # {{$.inputs.parameters['count']}}
assert sys.argv[4] == out("data"), (sys.argv[4], out("data"))  # {{$.outputs.artifacts['data'].path}}
assert os.path.isdir(os.path.dirname(out("data"))) and not os.path.exists(out("data"))
with open(out("data"), "w") as f:
    f.write(P["text"] * int(P["count"]))
with open(sys.argv[2], "w") as f:                             # {{$.outputs.parameters['n'].output_file}}
    f.write(str(len(P["text"]) * int(P["count"])))
print("made", P["text"])
"""

SHOUT = """
with open(sys.argv[2]) as f:                                  # {{$.inputs.artifacts['data'].path}}
    text = f.read()
assert sys.argv[2] == inp("data")
os.makedirs(os.path.join(out("folder"), "sub"))
with open(os.path.join(out("folder"), "a.txt"), "w") as f:
    f.write(text.upper())
with open(os.path.join(out("folder"), "sub", "b.txt"), "w") as f:
    f.write("b")
"""

CHECK = """
with open(os.path.join(inp("folder"), "a.txt")) as f:
    a = f.read()
with open(os.path.join(inp("folder"), "sub", "b.txt")) as f:
    b = f.read()
with open(inp("data")) as f:
    assert f.read().upper() == a
with open(out("report"), "w") as f:
    f.write("line 1\\nline 2\\n")
summary = f"{a}|{b}|n={int(P['n'])}"
os.makedirs(os.path.dirname(ei["outputs"]["outputFile"]), exist_ok=True)
with open(ei["outputs"]["outputFile"], "w") as f:
    json.dump({"parameterValues": {"summary": summary},
               "artifacts": {"report": {"artifacts": [{"metadata": {"lines": 2, "ok": True, "tags": ["x"]}}]}}}, f)
"""


def three_steps() -> Spec:
    spec = Spec(
        "three-steps",
        root_params={
            "text": {"parameterType": "STRING", "defaultValue": "hello", "isOptional": True},
            "count": {"parameterType": "NUMBER_INTEGER", "defaultValue": 2.0, "isOptional": True},
        },
    )
    spec.step(
        "make",
        MAKE,
        params={
            "text": ("STRING", root_param("text")),
            "count": ("NUMBER_INTEGER", root_param("count")),
            "job": ("STRING", const("{{$.pipeline_job_uuid}}")),
            "me": ("STRING", const("{{$.pipeline_task_name}}")),
        },
        outputs={"data": "system.Dataset"},
        out_params={"n": "NUMBER_INTEGER"},
        args=(
            "{{$}}",
            "{{$.outputs.parameters['n'].output_file}}",
            "{{$.inputs.parameters['count']}}",
            "{{$.outputs.artifacts['data'].path}}",
        ),
    )
    spec.step(
        "shout",
        SHOUT,
        artifacts={"data": ("make", "data", "system.Dataset")},
        outputs={"folder": "system.Artifact"},
        deps=["make"],
        args=("{{$}}", "{{$.inputs.artifacts['data'].path}}"),
    )
    spec.step(
        "check",
        CHECK,
        artifacts={"data": ("make", "data", "system.Dataset"), "folder": ("shout", "folder", "system.Artifact")},
        params={"n": ("NUMBER_INTEGER", task_out("make", "n"))},
        outputs={"report": "system.Artifact"},
        out_params={"summary": "STRING"},
        deps=["make", "shout"],
    )
    return spec


def test_artifacts_and_parameters_flow_through_the_store(tmp_path, kfp, s3_server, bucket):
    path = three_steps().write(tmp_path / "spec.yaml")
    run = kfp.run(path, parameters={"text": "abc"})  # count keeps its default (2)

    assert run.state == SUCCEEDED, {n: (t.state, t.error, run.log(n)) for n, t in run.tasks.items()}
    assert [t.state for t in run.tasks.values()] == [SUCCEEDED] * 3
    assert run.failed_task is None
    assert run.run_root == f"minio://{bucket}/pipeline-root/three-steps/{run.run_id}"  # not the spec's gs:// root

    # Output URIs: <pipeline root>/<pipeline name>/<run id>/<task>/<uuid>/<key>, as provisionOutputs makes them.
    (data_uri,) = run.task_outputs("make", "data")
    assert re.fullmatch(
        rf"minio://{bucket}/pipeline-root/three-steps/{run.run_id}/make/[0-9a-f-]{{36}}/data", data_uri
    ), data_uri
    assert read(s3_server, bucket, key_of(data_uri, bucket)) == "abcabc"
    (folder_uri,) = run.task_outputs("shout", "folder")
    folder_key = key_of(folder_uri, bucket)
    assert keys(s3_server, bucket, folder_key) == [folder_key + "/a.txt", folder_key + "/sub/b.txt"]
    assert read(s3_server, bucket, folder_key + "/a.txt") == "ABCABC"  # the consumer read the producer's bytes
    (report_uri,) = run.task_outputs("check", "report")
    assert read(s3_server, bucket, key_of(report_uri, bucket)) == "line 1\nline 2\n"

    # Parameters: a file (TextToPbValue), or the executor output file's parameterValues.
    assert run.tasks["make"].output_parameters == {"n": 6.0}
    assert run.tasks["check"].output_parameters == {"summary": "ABCABC|b|n=6"}

    # The executor input, in protojson form.
    make_input = run.tasks["make"].executor_input
    assert make_input["inputs"]["parameterValues"] == {"count": 2, "job": run.run_id, "me": "make", "text": "abc"}
    assert make_input["outputs"]["parameters"]["n"]["outputFile"].endswith("/local/tmp/kfp/outputs/n")
    task_root_key = key_of(data_uri, bucket).rsplit("/", 1)[0]
    assert make_input["outputs"]["outputFile"] == os.path.join(
        kfp.workdir, run.run_id, "make", "local", "minio", bucket, task_root_key, "output_metadata.json"
    )
    assert make_input["outputs"]["artifacts"]["data"]["artifacts"][0] == {
        "name": "data",
        "type": {"schemaTitle": "system.Dataset", "schemaVersion": "0.0.1"},
        "uri": data_uri,
    }
    assert set(make_input["outputs"]["artifacts"]) == {"data", "executor-logs"}  # publish_logs, as deployed
    raw = open(os.path.join(kfp.workdir, run.run_id, "make", "executor_input.json"), encoding="utf-8").read()
    assert '"count":2,' in raw and '"parameterValues":' in raw  # Go writes the number 2.0 as 2
    check_input = run.tasks["check"].executor_input
    data_in = check_input["inputs"]["artifacts"]["data"]["artifacts"][0]
    assert data_in["uri"] == data_uri and data_in["name"].isdigit()  # the MLMD artifact id
    assert data_in["type"] == {"instanceSchema": ""}  # what the driver passes for an upstream artifact
    assert data_in["metadata"]["display_name"] == "data"
    assert json.loads(data_in["metadata"]["store_session_info"])["Provider"] == "minio"
    assert check_input["inputs"]["parameterValues"] == {"n": 6}

    # Artifact metadata from the executor output, as MLMD stores it and a consumer would see it.
    (report,) = run.tasks["check"].outputs["report"]
    assert report["metadata"]["lines"] == 2.0 and report["metadata"]["ok"] == 1.0
    assert report["metadata"]["tags"] == {"list": ["x"]}

    # The step's output is in the pod log and in the uploaded executor-logs artifact.
    assert "made abc" in run.log("make")
    (logs_uri,) = run.task_outputs("make", "executor-logs")
    assert "made abc" in read(s3_server, bucket, key_of(logs_uri, bucket))
    # The launcher names it by the attempt (qualifyExecutorLogsURI): "executor-logs-0", in {{$}} too.
    assert logs_uri.endswith("/executor-logs-0")
    assert make_input["outputs"]["artifacts"]["executor-logs"]["artifacts"][0]["uri"] == logs_uri

    # The defaults apply when nothing is given; `download` fetches an artifact as a consumer would.
    again = kfp.run(path)
    assert again.state == SUCCEEDED and again.run_id != run.run_id
    assert again.tasks["check"].output_parameters == {"summary": "HELLOHELLO|b|n=10"}
    folder = kfp.download(again.task_outputs("shout", "folder")[0], str(tmp_path / "folder"))
    assert sorted(os.listdir(folder)) == ["a.txt", "sub"]


CACHEABLE = """
import uuid
with open(out("data"), "w") as f:
    f.write(f"{P['seed']}:{uuid.uuid4()}")
"""
USE = """
with open(inp("data")) as f, open(out("copy"), "w") as g:
    g.write(f.read())
"""
ALWAYS = """
with open(out("stamp"), "w") as f:
    f.write("x")
"""


def cache_spec() -> Spec:
    spec = Spec("cache-me", root_params={"seed": {"parameterType": "STRING", "defaultValue": "1", "isOptional": True}})
    spec.step(
        "gen",
        CACHEABLE,
        params={"seed": ("STRING", root_param("seed"))},
        outputs={"data": "system.Dataset"},
        cache=True,
    )
    spec.step(
        "use",
        USE,
        artifacts={"data": ("gen", "data", "system.Dataset")},
        outputs={"copy": "system.Dataset"},
        deps=["gen"],
        cache=True,
    )
    spec.step("always", ALWAYS, outputs={"stamp": "system.Artifact"}, cache=False)
    return spec


def test_cache_reuses_an_earlier_execution_unless_disabled(tmp_path, kfp, s3_server, bucket):
    path = cache_spec().write(tmp_path / "spec.yaml")
    first = kfp.run(path)
    assert {n: t.state for n, t in first.tasks.items()} == {"gen": SUCCEEDED, "use": SUCCEEDED, "always": SUCCEEDED}
    assert first.tasks["gen"].cache_key and first.tasks["use"].cache_key
    assert first.tasks["always"].cache_key == ""  # enableCache false: no fingerprint, no cache entry

    second = kfp.run(path)
    assert {n: t.state for n, t in second.tasks.items()} == {"gen": CACHED, "use": CACHED, "always": SUCCEEDED}
    assert second.tasks["gen"].cache_key == first.tasks["gen"].cache_key
    # The cached task hands on the first run's artifacts: same MLMD ids and URIs (in the first run's folder).
    assert second.tasks["gen"].outputs["data"] == first.tasks["gen"].outputs["data"]
    assert second.task_outputs("use", "copy") == first.task_outputs("use", "copy")
    assert f"/{first.run_id}/gen/" in second.task_outputs("gen", "data")[0]
    assert "Use cache for task gen" in second.log("gen")
    assert not keys(s3_server, bucket, f"pipeline-root/cache-me/{second.run_id}/gen/")  # nothing ran, nothing written
    assert second.task_outputs("always", "stamp") != first.task_outputs("always", "stamp")

    third = kfp.run(path, parameters={"seed": "2"})  # another input value: another fingerprint
    assert {n: t.state for n, t in third.tasks.items()} == {"gen": SUCCEEDED, "use": SUCCEEDED, "always": SUCCEEDED}
    assert third.tasks["gen"].cache_key != first.tasks["gen"].cache_key

    # The cache belongs to one emulated deployment; a server with the cache disabled never uses it.
    other = LocalKfp(str(tmp_path / "other"), s3_server.env, default_pipeline_root=f"minio://{bucket}/pipeline-root")
    assert other.run(path).tasks["gen"].state == SUCCEEDED
    off = LocalKfp(
        str(tmp_path / "off"),
        s3_server.env,
        default_pipeline_root=f"minio://{bucket}/pipeline-root",
        cache_disabled=True,
    )
    off.run(path)
    assert {n: t.state for n, t in off.run(path).tasks.items()} == {
        "gen": SUCCEEDED,
        "use": SUCCEEDED,
        "always": SUCCEEDED,
    }


def test_a_failing_step_fails_the_run_and_stops_its_dependants(tmp_path, kfp, s3_server, bucket):
    spec = Spec("fails")
    spec.step(
        "boom",
        """
print("about to fail")
sys.stderr.write("kaboom\\n")
with open(out("data"), "w") as f:
    f.write("partial")
sys.exit(3)
""",
        outputs={"data": "system.Dataset"},
    )
    spec.step(
        "after",
        USE,
        artifacts={"data": ("boom", "data", "system.Dataset")},
        outputs={"copy": "system.Dataset"},
        deps=["boom"],
    )
    spec.step("side", ALWAYS, outputs={"stamp": "system.Artifact"})
    run = kfp.run(spec.write(tmp_path / "spec.yaml"))

    assert run.state == FAILED and run.failed_task == "boom"
    assert {n: t.state for n, t in run.tasks.items()} == {"boom": FAILED, "after": NOT_RUN, "side": SUCCEEDED}
    log = run.log("boom")
    assert "kaboom" in log and "about to fail" in log and "exit status 3" in log
    assert os.path.exists(run.tasks["boom"].log_path)
    assert "exit status 3" in run.tasks["boom"].error
    # A failed step uploads and records its executor logs only.
    assert set(run.tasks["boom"].outputs) == {"executor-logs"}
    logs_key = key_of(run.task_outputs("boom", "executor-logs")[0], bucket)
    assert "kaboom" in read(s3_server, bucket, logs_key)
    assert not [k for k in keys(s3_server, bucket, f"pipeline-root/fails/{run.run_id}/boom/") if k.endswith("/data")]
    assert run.tasks["after"].executor_input is None


def test_the_backend_refuses_specs_it_cannot_run(tmp_path, kfp):
    marker = tmp_path / "ran"
    spec = Spec("refused")
    spec.step("first", f"open({str(marker)!r}, 'w').close()", outputs={"data": "system.Dataset"})
    spec.step(
        "resolver",
        executor={
            "resolver": {"outputArtifactQueries": {"model": {"filter": 'schema_title="tfx.Model" AND state=LIVE'}}}
        },
        outputs={"model": "system.Model"},
    )
    with pytest.raises(Refused, match="non-container and non-importer executor not implemented"):
        kfp.run(spec.write(tmp_path / "resolver.yaml"))

    del spec.tasks["resolver"]
    spec.tasks["first"]["componentRef"] = {"name": ""}
    with pytest.raises(Refused, match="component ref name is empty"):
        kfp.run(spec.write(tmp_path / "no-ref.yaml"))

    good = Spec("refused")
    good.step("first", f"open({str(marker)!r}, 'w').close()")
    with pytest.raises(Refused, match="not required by pipeline: extra"):
        kfp.run(good.write(tmp_path / "good.yaml"), parameters={"extra": "x"})
    assert not marker.exists()  # refused before anything ran
    with pytest.raises(NotEmulated, match="gs://"):
        kfp.run(good.write(tmp_path / "good.yaml"), pipeline_root="gs://bucket/root")
    assert kfp.run(str(tmp_path / "good.yaml")).state == SUCCEEDED and marker.exists()


MARKER_PRODUCER = """
import boto3
folder = out("model")
os.makedirs(os.path.join(folder, "variables"))
with open(os.path.join(folder, "saved_model.pb"), "wb") as f:
    f.write(b"pb")
with open(os.path.join(folder, "variables", "variables.index"), "wb") as f:
    f.write(b"index")
# What TensorFlow's GCS/S3 file systems do when they make a folder: a zero-byte "<folder>/" object.
uri = ei["outputs"]["artifacts"]["model"]["artifacts"][0]["uri"]
bucket, key = uri[len("minio://"):].split("/", 1)
boto3.client("s3").put_object(Bucket=bucket, Key=key + "/variables/", Body=b"")
"""
MARKER_CONSUMER = """
print(sorted(os.listdir(inp("model"))))
"""


def test_a_directory_marker_object_breaks_the_consumers_download(tmp_path, kfp, s3_server, bucket):
    secrets = {"minio-creds": {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}}
    kfp = LocalKfp(kfp.workdir, s3_server.env, secrets=secrets, default_pipeline_root=kfp.default_pipeline_root)
    creds = {
        "secretAsEnv": [
            {
                "secretName": "minio-creds",
                "keyToEnv": [
                    {"secretKey": "accesskey", "envVar": "AWS_ACCESS_KEY_ID"},
                    {"secretKey": "secretkey", "envVar": "AWS_SECRET_ACCESS_KEY"},
                ],
            }
        ]
    }
    spec = Spec("markers")
    spec.step(
        "train",
        MARKER_PRODUCER,
        outputs={"model": "system.Model"},
        k8s=creds,
        env={"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_DEFAULT_REGION": "us-east-1"},
    )
    spec.step("serve", MARKER_CONSUMER, artifacts={"model": ("train", "model", "system.Model")}, deps=["train"])
    run = kfp.run(spec.write(tmp_path / "spec.yaml"))

    assert run.tasks["train"].state == SUCCEEDED, run.log("train")
    model_key = key_of(run.task_outputs("train", "model")[0], bucket)
    assert keys(s3_server, bucket, model_key + "/") == [
        f"{model_key}/saved_model.pb",
        f"{model_key}/variables/",
        f"{model_key}/variables/variables.index",
    ]
    # kubeflow/pipelines#13476: the marker becomes a file named `variables`, then the next object needs a folder.
    assert run.state == FAILED and run.failed_task == "serve"
    error = run.tasks["serve"].error
    assert 'failed to download input artifact "model"' in error
    assert re.search(r"mkdir \S+/variables: not a directory", error), error
    assert "not a directory" in run.log("serve")
    with pytest.raises(RuntimeError, match="not a directory"):
        kfp.download(run.task_outputs("train", "model")[0], str(tmp_path / "inspect"))


ENV_STEP = """
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({k: os.environ.get(k) for k in ("TOKEN", "USER_NAME", "PLAIN", "MAYBE", "KFP_POD_NAME")}))
with open(os.path.join(sys.argv[3], "written.txt"), "w") as f:
    f.write("on the claim")
"""


def test_secrets_env_and_volumes_reach_the_step(tmp_path, s3_server, bucket):
    secrets = {"api": {"token": "s3cr3t", "user": "ann"}}
    base = {k: v for k, v in os.environ.items() if k not in ("TOKEN", "USER_NAME", "PLAIN", "MAYBE")}
    kfp = LocalKfp(
        str(tmp_path / "kfp"),
        s3_server.env,
        secrets=secrets,
        base_env=base,
        default_pipeline_root=f"minio://{bucket}/pipeline-root",
    )
    mount = tmp_path / "claims" / "models"
    k8s = {
        "secretAsEnv": [
            {"secretNameParameter": const("api"), "keyToEnv": [{"secretKey": "token", "envVar": "TOKEN"}]},
            {"secretName": "api", "keyToEnv": [{"secretKey": "user", "envVar": "USER_NAME"}]},
            {"secretName": "absent", "optional": True, "keyToEnv": [{"secretKey": "x", "envVar": "MAYBE"}]},
        ],
        "pvcMount": [{"constant": "models-pvc", "mountPath": str(mount)}],
        "nodeSelector": {"labels": {"pool": "cpu"}},
    }
    spec = Spec("env")
    spec.step(
        "show",
        ENV_STEP,
        out_params={"env": "STRUCT"},
        k8s=k8s,
        env={"PLAIN": "plain"},
        args=("{{$}}", "{{$.outputs.parameters['env'].output_file}}", str(mount)),
        cache=True,
    )
    run = kfp.run(spec.write(tmp_path / "spec.yaml"))

    assert run.state == SUCCEEDED, run.log("show")
    env = run.tasks["show"].output_parameters["env"]
    assert env["TOKEN"] == "s3cr3t" and env["USER_NAME"] == "ann" and env["PLAIN"] == "plain"
    assert env["MAYBE"] is None  # an optional secret that does not exist leaves the variable out
    assert env["KFP_POD_NAME"]
    assert (mount / "written.txt").read_text() == "on the claim"  # the claim is the host folder at mountPath
    assert run.tasks["show"].pod["nodeSelector"] == {"labels": {"pool": "cpu"}}  # recorded, not enforced
    assert run.tasks["show"].pod["pvcMounts"] == [{"pvc": "models-pvc", "mountPath": str(mount), "subPath": ""}]

    # A secret the cluster does not have: the pod cannot start.
    k8s["secretAsEnv"][0]["secretNameParameter"] = const("nope")
    spec.platform["exec-show"] = k8s
    spec.tasks["show"]["cachingOptions"]["enableCache"] = False
    failed = kfp.run(spec.write(tmp_path / "missing.yaml"))
    assert failed.state == FAILED
    assert 'secret "nope" not found' in failed.tasks["show"].error
    assert 'secret "nope" not found' in failed.log("show")


def test_launcher_rules_for_outputs_and_importers(tmp_path, kfp, s3_server, bucket):
    s3_server.client().put_object(Bucket=bucket, Key="imported/table.csv", Body=b"a,b\n1,2\n")
    spec = Spec("rules")
    # An output the step never writes: only a warning; the artifact is recorded, and a consumer gets nothing.
    spec.step("lazy", "print('wrote nothing')", outputs={"data": "system.Dataset"})
    spec.step(
        "reader",
        "print('exists:', os.path.exists(inp('data')))",
        artifacts={"data": ("lazy", "data", "system.Dataset")},
        deps=["lazy"],
    )
    # An output parameter whose file the step did not write fails the task.
    spec.step("no_param", "pass", out_params={"n": "NUMBER_INTEGER"})
    # An executor output naming a URI outside the pipeline root fails the upload.
    spec.step(
        "elsewhere",
        """
with open(out("data"), "w") as f:
    f.write("x")
with open(ei["outputs"]["outputFile"], "w") as f:
    json.dump({"artifacts": {"data": {"artifacts": [{"uri": "minio://elsewhere/x"}]}}}, f)
""",
        outputs={"data": "system.Dataset"},
    )
    # An importer, and a step reading what it imported.
    spec.step(
        "load",
        outputs={"artifact": "system.Dataset"},
        params={"uri": ("STRING", root_param("table"))},
        executor={
            "importer": {
                "artifactUri": {"runtimeParameter": "uri"},
                "typeSchema": {"schemaTitle": "system.Dataset"},
                "metadata": {"source": "test"},
            }
        },
    )
    spec.step(
        "use_import",
        """
with open(inp("table")) as f:
    print("rows:", f.read().count("\\n"))
""",
        artifacts={"table": ("load", "artifact", "system.Dataset")},
        deps=["load"],
    )
    spec.root_params = {
        "table": {"parameterType": "STRING", "defaultValue": f"minio://{bucket}/imported/table.csv", "isOptional": True}
    }
    run = kfp.run(spec.write(tmp_path / "spec.yaml"))

    states = {n: t.state for n, t in run.tasks.items()}
    assert states == {
        "lazy": SUCCEEDED,
        "reader": SUCCEEDED,
        "no_param": FAILED,
        "elsewhere": FAILED,
        "load": SUCCEEDED,
        "use_import": SUCCEEDED,
    }, {n: t.error for n, t in run.tasks.items()}
    assert run.state == FAILED
    assert "does not exist" in run.log("lazy")
    assert run.task_outputs("lazy", "data") and "exists: False" in run.log("reader")
    assert 'failed to read output parameter name="n"' in run.tasks["no_param"].error
    assert "does not have expected bucket prefix" in run.tasks["elsewhere"].error
    assert run.task_outputs("load", "artifact") == [f"minio://{bucket}/imported/table.csv"]
    assert run.tasks["load"].outputs["artifact"][0]["metadata"]["source"] == "test"
    assert "rows: 2" in run.log("use_import")


def test_the_specs_default_pipeline_root_is_not_used(tmp_path, s3_server):
    """KFP's root DAG driver takes the run's pipeline root, else the kfp-launcher ConfigMap's default; never the
    spec's defaultPipelineRoot. With the default root's bucket missing, the upload says so."""
    spec = Spec("no-bucket")
    spec.step("write", ALWAYS, outputs={"stamp": "system.Artifact"})
    assert LocalKfp(str(tmp_path / "kfp"), s3_server.env).default_pipeline_root == "minio://mlpipeline/v2/artifacts"
    absent = f"absent-{uuid.uuid4().hex[:12]}"
    kfp = LocalKfp(str(tmp_path / "kfp"), s3_server.env, default_pipeline_root=f"minio://{absent}/v2/artifacts")
    run = kfp.run(spec.write(tmp_path / "spec.yaml"))
    assert run.run_root.startswith(f"minio://{absent}/v2/artifacts/no-bucket/")
    assert run.state == FAILED and "NoSuchBucket" in run.tasks["write"].error
    assert "KFP does not read the spec's defaultPipelineRoot (gs://never-used/root)" in run.tasks["write"].error


def test_a_producer_missing_from_dependent_tasks_is_still_waited_for(tmp_path, kfp, bucket):
    """dag.go addImplicitDependencies: KFP's compiler adds every producer an input names to dependentTasks, so a
    consumer of a failed step is NOT_RUN even when the spec does not list the producer; an unknown producer
    refuses the run."""
    spec = Spec("implicit")
    spec.step("boom", "sys.exit(3)", outputs={"data": "system.Dataset"})
    spec.step("after", USE, artifacts={"data": ("boom", "data", "system.Dataset")}, outputs={"copy": "system.Dataset"})
    path = spec.write(tmp_path / "spec.yaml")
    documents = list(yaml.safe_load_all(open(path, encoding="utf-8")))
    assert "dependentTasks" not in documents[0]["root"]["dag"]["tasks"]["after"]
    run = kfp.run(path)
    assert {n: t.state for n, t in run.tasks.items()} == {"boom": FAILED, "after": NOT_RUN}
    assert "boom did not succeed" in run.tasks["after"].error

    documents[0]["root"]["dag"]["tasks"]["after"]["inputs"]["artifacts"]["data"]["taskOutputArtifact"][
        "producerTask"
    ] = "gone"
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(documents, f)
    with pytest.raises(Refused, match='failed to add implicit deps: unknown producer task "gone" in DAG'):
        kfp.run(path)


def test_an_s3_root_needs_the_launcher_providers_entry_the_compiler_writes(tmp_path, s3_server, bucket):
    """config/s3.go: without a kfp-launcher `providers` entry the launcher opens s3:// from its own environment
    (nothing, on KFP) and the first upload fails; with the ConfigMap `tfxflow kubeflow compile` writes for an
    s3:// root, it reaches the store by the endpoint, region, path style and secret named there."""
    from tests.pipeline.conftest import kubeflow_config
    from tfxflow.pipeline.kfp import launcher_config

    root = f"s3://{bucket}/tfxflow"
    config = kubeflow_config(root, data_root=f"s3://{bucket}/data", s3_endpoint=s3_server.endpoint, namespace="ml")
    launcher = launcher_config.launcher_config_map(config)
    assert launcher["metadata"] == {"name": "kfp-launcher", "namespace": "ml"}
    assert launcher["data"]["defaultPipelineRoot"] == root
    # The fields config/s3.go reads (its JSON tags), and nothing else.
    default = yaml.safe_load(launcher["data"]["providers"])["s3"]["default"]
    assert set(default) == {"endpoint", "region", "disableSSL", "forcePathStyle", "credentials"}
    assert default["endpoint"] == s3_server.endpoint.split("://")[1] and default["disableSSL"] is True
    assert default["credentials"] == {
        "fromEnv": False,
        "secretRef": {
            "secretName": "mlpipeline-minio-artifact",
            "accessKeyKey": "accesskey",
            "secretKeyKey": "secretkey",
        },
    }
    assert launcher_config.launcher_config_map(kubeflow_config(f"minio://{bucket}/v2/artifacts")) is None

    spec = three_steps().write(tmp_path / "spec.yaml")
    secrets = {"mlpipeline-minio-artifact": {"accesskey": s3_server.ACCESS_KEY, "secretkey": s3_server.SECRET_KEY}}
    without = LocalKfp(str(tmp_path / "without"), s3_server.env, secrets=secrets).run(spec, pipeline_root=root)
    assert without.state == FAILED and without.failed_task == "make"
    assert "no kfp-launcher providers entry for s3://" in without.tasks["make"].error

    kfp = LocalKfp(str(tmp_path / "with"), s3_server.env, secrets=secrets, launcher_config=launcher)
    run = kfp.run(spec, pipeline_root=root)
    assert run.state == SUCCEEDED, run.tasks["make"].error
    (data,) = run.tasks["make"].outputs["data"]
    assert data["uri"].startswith(f"{root}/three-steps/{run.run_id}/make/")
    session = json.loads(data["metadata"]["store_session_info"])
    assert session["Provider"] == "s3" and session["Params"]["secretName"] == "mlpipeline-minio-artifact"
    assert session["Params"]["forcePathStyle"] == "true" and session["Params"]["region"] == "us-east-1"


def test_a_pipeline_the_kfp_sdk_compiles_runs(tmp_path, kfp, s3_server, bucket):
    from tfxflow.pipeline.kfp import spec_check

    path = kfp_sdk_pipeline.two_steps(tmp_path / "sdk.yaml")
    assert spec_check.check_file(path) == []
    run = kfp.run(path, parameters={"text": "ab"})
    assert run.state == SUCCEEDED, {n: (t.state, t.error, run.log(n)) for n, t in run.tasks.items()}
    (loud,) = run.task_outputs("shout", "loud")
    assert read(s3_server, bucket, key_of(loud, bucket)) == "ABAB"


def _task(spec: dict, name: str) -> dict:
    return spec["root"]["dag"]["tasks"][name]


# Broken forms of the SDK's spec: (what is broken, how). The backend refuses each when the run is created, but
# for a root default of the wrong type, which the API server does not check: the driver fails the task.
BROKEN = {
    "empty component ref": lambda s: _task(s, "make")["componentRef"].update(name=""),
    "unknown component": lambda s: _task(s, "make")["componentRef"].update(name="comp-nope"),
    "dependency on a task that does not exist": lambda s: _task(s, "shout")["dependentTasks"].append("ghost"),
    "artifact of a task that does not exist": lambda s: _task(s, "shout")["inputs"]["artifacts"]["data"][
        "taskOutputArtifact"
    ].update(producerTask="ghost"),
    "dependency cycle": lambda s: _task(s, "make").update(dependentTasks=["shout"]),
    "root default of the wrong type": lambda s: s["root"]["inputDefinitions"]["parameters"]["count"].update(
        defaultValue="two"
    ),
    "executor that is neither container nor importer": lambda s: s["deploymentSpec"]["executors"].update(
        {"exec-make": {"resolver": {"outputArtifactQueries": {}}}}
    ),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_the_offline_check_refuses_what_the_backend_refuses(tmp_path, kfp, broken):
    """The spec check (`tfxflow kubeflow check`) and the harness's run creation, held against each other on the
    same broken specs: each refuses what the other refuses."""
    from tfxflow.pipeline.kfp import spec_check

    with open(kfp_sdk_pipeline.two_steps(tmp_path / "sdk.yaml"), encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    BROKEN[broken](spec)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(spec))
    if broken == "root default of the wrong type":
        run = kfp.run(str(path))
        assert run.state == FAILED and run.failed_task == "make", (run.state, run.failed_task)
    else:
        with pytest.raises(Refused):
            kfp.run(str(path))
    assert spec_check.check_spec([spec]), broken


# A `python -m` step for LocalKfp(fork_steps=...): `--warm` is its warm-up (it imports probe_dep and records the
# process); otherwise it reports what it sees as a step, or fails the way its second argument says.
PROBE_STEP = """
import json, os, sys, time
if sys.argv[1:] == ["--warm"]:
    import probe_dep
    with open(os.environ["PROBE_WARM_LOG"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    sys.exit(0)
mode = sys.argv[2]
print("step", mode)
sys.stderr.write("to stderr\\n")
if mode == "fail":
    sys.exit(3)
if mode == "crash":
    raise ValueError("boom")
if mode == "sleep":
    time.sleep(120)
report = {
    "argv": sys.argv[2:], "cwd": os.getcwd(), "path0": sys.path[0], "main": __name__, "pid": os.getpid(),
    "ppid": os.getppid(), "token": os.environ.get("TOKEN"), "plain": os.environ.get("PLAIN"),
    "warm_log": os.environ.get("PROBE_WARM_LOG"), "preloaded": "probe_dep" in sys.modules,
}
with open(sys.argv[3], "w") as f:
    json.dump(report, f)
"""


def _probe_spec(*modes) -> Spec:
    spec = Spec("probe")
    for mode in modes:
        env = [{"name": "PLAIN", "value": "p"}]
        command = {"image": "r/i:1", "command": ["python", "-m", "probe_step"], "env": env}
        if mode == "show":
            command["args"] = ["{{$}}", mode, "{{$.outputs.parameters['report'].output_file}}"]
        else:
            command["args"] = ["{{$}}", mode]
        spec.step(
            mode,
            executor={"container": command},
            out_params={"report": "STRUCT"} if mode == "show" else None,
            k8s={"secretAsEnv": [{"secretName": "api", "keyToEnv": [{"secretKey": "token", "envVar": "TOKEN"}]}]},
        )
    return spec


@pytest.mark.parametrize("forked", [False, True], ids=["fresh", "forked"])
def test_forked_steps_run_as_a_fresh_process_would(tmp_path, s3_server, bucket, forked):
    """LocalKfp(fork_steps=...) against plain processes on the same spec: the same argv, directory, sys.path,
    `__main__`, environment (the pod's, secrets included), output and exit statuses; the forked steps come from
    one server, warmed up once for every LocalKfp, with what the warm-up imported already loaded; a step past
    the timeout is killed and the server serves the next."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "probe_step.py").write_text(PROBE_STEP)
    (modules / "probe_dep.py").write_text("VALUE = 1\n")
    warm_log = tmp_path / "warm.log"

    def harness(name, **kwargs):
        return LocalKfp(
            str(tmp_path / name),
            s3_server.env,
            secrets={"api": {"token": "s3cr3t"}},
            env={"PYTHONPATH": str(modules), "PROBE_WARM_LOG": str(warm_log)},
            default_pipeline_root=f"minio://{bucket}/pipeline-root",
            fork_steps={"probe_step": ("--warm",)} if forked else None,
            **kwargs,
        )

    runs = [harness(f"kfp{i}").run(_probe_spec("show", "fail", "crash").write(tmp_path / "spec.yaml")) for i in (1, 2)]
    for run in runs:
        assert {n: t.state for n, t in run.tasks.items()} == {"show": SUCCEEDED, "fail": FAILED, "crash": FAILED}
        report = run.tasks["show"].output_parameters["report"]
        cwd = os.path.join(os.path.dirname(run.tasks["show"].log_path), "cwd")
        assert report["argv"][0] == "show" and report["argv"][1].endswith("/tmp/kfp/outputs/report")
        assert report["cwd"] == report["path0"] == cwd and report["main"] == "__main__"
        assert (report["token"], report["plain"], report["warm_log"]) == ("s3cr3t", "p", str(warm_log))
        assert "step show" in run.log("show") and "to stderr" in run.log("show")
        assert "exit status 3" in run.tasks["fail"].error and "step fail" in run.log("fail")
        assert "exit status 1" in run.tasks["crash"].error
        assert "Traceback" in run.log("crash") and "ValueError: boom" in run.log("crash")
    reports = [run.tasks["show"].output_parameters["report"] for run in runs]
    if not forked:
        assert not warm_log.exists()
        assert [r["ppid"] for r in reports] == [os.getpid()] * 2 and not any(r["preloaded"] for r in reports)
        return
    (server,) = warm_log.read_text().split()  # one warm-up for both harnesses
    assert [r["ppid"] for r in reports] == [int(server)] * 2 and all(r["preloaded"] for r in reports)

    slow = harness("slow", task_timeout=3).run(_probe_spec("sleep").write(tmp_path / "slow.yaml"))
    assert slow.state == FAILED and "stopped the command after 3 s" in slow.tasks["sleep"].error
    after = harness("after").run(_probe_spec("show").write(tmp_path / "after.yaml"))
    assert after.state == SUCCEEDED and after.tasks["show"].output_parameters["report"]["ppid"] == int(server)
