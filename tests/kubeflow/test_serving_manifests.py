"""TF Serving manifests: a GPU pod with server-side batching that serves what the Pusher writes to the claim."""

import copy
import functools
import os
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from tfxflow.pipeline.cli.main import _parser

SERVING = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "kubeflow", "serving"
)
# The fields of tensorflow_serving's BatchingParameters proto (session_bundle_config.proto).
BATCHING_FIELDS = {
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "num_batch_threads",
    "thread_pool_name",
    "allowed_batch_sizes",
    "pad_variable_length_inputs",
}


def _manifests() -> dict:
    with open(os.path.join(SERVING, "kustomization.yaml"), encoding="utf-8") as f:
        kustomization = yaml.safe_load(f)
    found = {}
    for name in kustomization["resources"]:
        with open(os.path.join(SERVING, name), encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                found[doc["kind"]] = doc
    return found


def _flags(container: dict) -> dict:
    return dict(arg[2:].split("=", 1) for arg in container["args"])


def test_gpu_pod_with_batching():
    manifests = _manifests()
    assert set(manifests) == {"PersistentVolumeClaim", "ConfigMap", "Deployment", "Service"}
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    (container,) = pod["containers"]
    assert container["image"].endswith("-gpu")
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    flags = _flags(container)
    assert flags["enable_batching"] == "true"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_dir, batching_name = os.path.split(flags["batching_parameters_file"])
    config_volume = volumes[mounts[config_dir]["name"]]
    configmap = manifests["ConfigMap"]
    assert config_volume["configMap"]["name"] == configmap["metadata"]["name"]
    batching = configmap["data"][batching_name]
    fields = set(re.findall(r"^(\w+)", batching, re.M))
    assert fields and fields <= BATCHING_FIELDS, fields - BATCHING_FIELDS
    assert int(re.search(r"max_batch_size \{ value: (\d+) \}", batching).group(1)) >= 1


def test_serves_the_pushed_models_from_the_claim_the_pusher_writes():
    manifests = _manifests()
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flags = _flags(container)
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(manifests["ConfigMap"]["data"][os.path.basename(flags["model_config_file"])], config)
    (model,) = config.model_config_list.config

    # The compile defaults: Pusher writes <mount>/models/<model-name>/<version>/ on the claim --serving-pvc names.
    compile_args = ["kubeflow", "compile", "--image", "r/i:1", "--pipeline-root", "gs://b/r", "--data-root", "gs://b/d"]
    args = _parser().parse_args(compile_args)
    assert model.base_path == f"{args.serving_mount}/models/{args.dataset}"
    assert model.name == args.dataset
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    claim_volume = next(v for v in pod["volumes"] if "persistentVolumeClaim" in v)
    assert claim_volume["persistentVolumeClaim"]["claimName"] == args.serving_pvc
    assert manifests["PersistentVolumeClaim"]["metadata"]["name"] == args.serving_pvc
    assert "ReadWriteMany" in manifests["PersistentVolumeClaim"]["spec"]["accessModes"]
    mount = mounts[claim_volume["name"]]
    assert mount["mountPath"] == args.serving_mount and mount["readOnly"] is True
    # Ready only while a version of this model is AVAILABLE: its metadata needs the loaded servable.
    assert container["readinessProbe"]["httpGet"]["path"] == f"/v1/models/{model.name}/metadata"


# --- The rendered kustomization: what `kubectl apply -k kubeflow/serving` sends to the cluster. ---

# Kubeflow 1.9 supports Kubernetes 1.27-1.29 (1.31 from 1.9.1) and 1.10 targets 1.31-1.33 (runs on 1.29/1.30):
# the manifests must validate against every minor version from the oldest of those to the newest schema the
# installed kubernetes-validate ships (1.37 with the locked 1.37.0).
OLDEST_KUBERNETES = "1.27"


def _kubectl() -> str:
    kubectl = shutil.which("kubectl") or ("/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None)
    # The machines this project builds on have kubectl's client; without it the rendered manifests go
    # unchecked, which must fail rather than pass quietly.
    assert kubectl, "kubectl (client only, works offline) is needed to render kubeflow/serving/ with kustomize"
    return kubectl


def _kustomize(path: str) -> list:
    out = subprocess.run([_kubectl(), "kustomize", path], check=True, capture_output=True, text=True, timeout=120)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@functools.lru_cache(maxsize=None)
def _rendered_text() -> str:
    return yaml.safe_dump_all(_kustomize(SERVING))


def _rendered() -> dict:
    docs = list(yaml.safe_load_all(_rendered_text()))
    by_kind = {doc["kind"]: doc for doc in docs}
    assert len(by_kind) == len(docs), [doc["kind"] for doc in docs]
    return by_kind


def _kubernetes_versions() -> list:
    newest = kubernetes_validate.latest_version()
    minors = range(int(OLDEST_KUBERNETES.split(".")[1]), int(newest.split(".")[1]) + 1)
    return [f"1.{minor}" for minor in minors]


def _containers(pod: dict) -> list:
    return pod.get("initContainers", []) + pod["containers"]


def _comments(name: str) -> str:
    with open(os.path.join(SERVING, name), encoding="utf-8") as f:
        return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)# ?(.*)$", f.read(), re.M))


def test_every_rendered_object_validates_against_the_kubernetes_schemas():
    versions = _kubernetes_versions()
    assert versions[0] == OLDEST_KUBERNETES and versions[-1] >= "1.32", versions
    docs = list(yaml.safe_load_all(_rendered_text()))
    assert {doc["kind"] for doc in docs} == {"PersistentVolumeClaim", "ConfigMap", "Deployment", "Service"}
    for version in versions:
        for doc in docs:
            # strict: unknown fields (a misspelt or misplaced key) fail too. The schema used is the version's own.
            assert kubernetes_validate.validate(doc, version, strict=True) == version, (version, doc["kind"])
    # strict mode does bite: a field Kubernetes does not know is an error.
    deployment = copy.deepcopy(_rendered()["Deployment"])
    deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureTreshold"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, versions[-1], strict=True)


def test_the_claim_names_a_read_write_many_storage_class():
    claim = _rendered()["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    storage_class = claim["spec"].get("storageClassName")
    assert storage_class, "without a class the claim goes to the default class, usually ReadWriteOnce only"
    # The comment lists which classes provide ReadWriteMany, the default among them, and how to change it.
    comments = _comments("pvc.yaml")
    listed = set(re.findall(r"^\s{2,}([a-z0-9-]+(?:, [a-z0-9-]+)*)\s{2,}", comments, re.M))
    listed = {name for names in listed for name in names.split(", ")}
    assert {storage_class, "standard-rwx", "efs-sc", "azurefile-csi", "nfs-client"} <= listed, listed
    assert re.search(rf"^Default: {re.escape(storage_class)}\.", comments, re.M)
    assert "path: /spec/storageClassName" in comments


def test_the_documented_patch_changes_the_storage_class(tmp_path):
    # The patch pvc.yaml's comment shows, in an overlay that uses this directory as its base.
    with open(tmp_path / "kustomization.yaml", "w", encoding="utf-8") as f:
        f.write(
            f"resources: [{os.path.relpath(SERVING, tmp_path)}]\n"
            "patches:\n"
            "  - target: {kind: PersistentVolumeClaim, name: tf-serving-models}\n"
            "    patch: |-\n"
            "      - {op: replace, path: /spec/storageClassName, value: standard-rwx}\n"
        )
    (claim,) = [doc for doc in _kustomize(str(tmp_path)) if doc["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["storageClassName"] == "standard-rwx"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_probes_wait_for_the_model_without_restarting_the_server():
    pod = _rendered()["Deployment"]["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    ports = {port["name"]: port["containerPort"] for port in server["ports"]}
    probes = {kind: server[kind] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    for kind, probe in probes.items():
        (handler,) = [key for key in ("httpGet", "tcpSocket", "grpc", "exec") if key in probe]
        port = probe[handler]["port"]
        assert port in ports, f"{kind} uses port {port!r}, not one of the named ports {sorted(ports)}"
    # TF Serving opens its ports only once the models have loaded: the startup probe watches the REST port, and
    # its budget covers at least what the comment promises for loading a model.
    startup = probes["startupProbe"]
    assert startup["tcpSocket"]["port"] == "http"
    budget = startup["failureThreshold"] * startup.get("periodSeconds", 10)
    minutes = re.search(r"startup budget: (\d+) minutes \((\d+) x (\d+) s\)", _comments("deployment.yaml"))
    assert minutes, "deployment.yaml states the startup probe's budget"
    assert budget >= int(minutes.group(1)) * 60
    assert (int(minutes.group(2)), int(minutes.group(3))) == (startup["failureThreshold"], startup["periodSeconds"])
    # Liveness checks the process, not the model; readiness (which gates traffic) needs an AVAILABLE version.
    assert "tcpSocket" in probes["livenessProbe"]
    assert "initialDelaySeconds" not in probes["livenessProbe"]  # the startup probe holds it back instead
    readiness = probes["readinessProbe"]["httpGet"]
    assert readiness["port"] == "http" and readiness["path"].startswith("/v1/models/")
    # The wait for the first push is an init container's: it has no probe that could restart it.
    (wait,) = pod["initContainers"]
    assert not any(key.endswith("Probe") for key in wait)
    # The Service sends traffic to the same named ports.
    for port in _rendered()["Service"]["spec"]["ports"]:
        assert ports[port["targetPort"]] == port["port"]


def _quantity(value) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value)).groups()
    return float(number) * units.get(unit, 1)


def test_every_container_has_cpu_and_memory_requests_and_limits():
    pod = _rendered()["Deployment"]["spec"]["template"]["spec"]
    for container in _containers(pod):
        resources = container["resources"]
        for resource in ("cpu", "memory"):
            request, limit = resources["requests"][resource], resources["limits"][resource]
            assert 0 < _quantity(request) <= _quantity(limit), (container["name"], resource, request, limit)


def test_containers_run_as_non_root_without_privileges():
    pod = _rendered()["Deployment"]["spec"]["template"]["spec"]
    pod_context = pod["securityContext"]
    assert pod_context["seccompProfile"]["type"] == "RuntimeDefault"
    for container in _containers(pod):
        context = {**pod_context, **container.get("securityContext", {})}
        assert context["runAsNonRoot"] is True and context["runAsUser"] > 0, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["capabilities"]["drop"] == ["ALL"] and not context["capabilities"].get("add")
        assert not context.get("privileged")
        # Containers that request no GPU do not get the node's GPUs through the image's NVIDIA_VISIBLE_DEVICES=all.
        if "nvidia.com/gpu" not in container["resources"]["limits"]:
            env = {var["name"]: var.get("value") for var in container.get("env", [])}
            assert env.get("NVIDIA_VISIBLE_DEVICES") == "void", container["name"]
    (wait,) = pod["initContainers"]
    assert wait["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_init_container_waits_on_what_tf_serving_reads():
    manifests = _rendered()
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    (wait,), (server,) = pod["initContainers"], pod["containers"]
    assert wait["image"] == server["image"]  # one image to pull
    env = {var["name"]: var["value"] for var in wait["env"]}
    assert env["MODELS_CONFIG"] == _flags(server)["model_config_file"]  # the very file TF Serving reads
    # ... through the same volumes at the same paths.
    assert wait["volumeMounts"] == server["volumeMounts"]
    assert os.path.basename(env["MODELS_CONFIG"]) in manifests["ConfigMap"]["data"]


def _kubelet_expand(text: str, env: dict) -> str:
    """What the kubelet does to command and args before the shell sees them: $(NAME) of a variable the container
    defines becomes its value, $$ becomes $, and anything else after a $ stays as written."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            if text[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if text[i + 1] == "(" and ")" in text[i + 2 :]:
                name = text[i + 2 : text.index(")", i + 2)]
                out.append(env[name] if name in env else f"$({name})")
                i += len(name) + 3
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _start_waiting(tmp_path, models_config: str) -> subprocess.Popen:
    pod = _rendered()["Deployment"]["spec"]["template"]["spec"]
    (wait,) = pod["initContainers"]
    assert wait["command"] == ["/bin/sh", "-c"]
    script = _kubelet_expand(wait["args"][0], {var["name"]: var["value"] for var in wait["env"]})
    config = tmp_path / "models.config"
    config.write_text(models_config, encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MODELS_CONFIG": str(config), "POLL_SECONDS": "0.05"}
    return subprocess.Popen(
        ["/bin/sh", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _still_waiting(process: subprocess.Popen, seconds: float = 0.5) -> bool:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_the_init_container_waits_for_a_loadable_version(tmp_path):
    # The real models.config, with its base paths moved under tmp_path.
    models_config = _rendered()["ConfigMap"]["data"]["models.config"]
    moved = re.sub(r'base_path: "/', f'base_path: "{tmp_path}/', models_config)
    assert moved != models_config
    base = tmp_path / re.search(r'base_path: "/([^"]+)"', models_config).group(1)
    process = _start_waiting(tmp_path, moved)
    try:
        assert _still_waiting(process)  # no base folder yet
        # What TF Serving would not load: the Pusher's hidden copy in progress, a non-numeric name, no SavedModel.
        for name in (".incoming-17-0a1b2c3d", "17x"):
            (base / name).mkdir(parents=True)
            (base / name / "saved_model.pb").write_bytes(b"")
        (base / "16" / "variables").mkdir(parents=True)
        assert _still_waiting(process)
        (base / "17").mkdir()
        (base / "17" / "saved_model.pb").write_bytes(b"")
        assert process.wait(timeout=10) == 0
        output = process.stdout.read()
        assert f"waiting for a model version in {base}/" in output and f"{base}/ holds a model version" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_init_container_fails_on_a_config_without_base_path(tmp_path):
    process = _start_waiting(tmp_path, "model_config_list {}\n")
    try:
        assert process.wait(timeout=10) == 1
        assert "no base_path" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
