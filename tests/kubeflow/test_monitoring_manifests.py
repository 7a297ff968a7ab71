"""Monitoring of the TF Serving deployment (kubeflow/serving/monitoring/): TF Serving's Prometheus endpoint, the
ServiceMonitors and the plain scrape config, NVIDIA's DCGM exporter and the Grafana dashboard, all checked offline.

The reference data (the ServiceMonitor CRD schema, TF Serving's MonitoringConfig proto, the metric names TF Serving
and DCGM export, each with its source) is in tests/kubeflow/data/, whose README.md names the sources."""

import copy
import csv
import functools
import io
import json
import os
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

# _kustomize runs `kubectl kustomize` and fails (not skips) without kubectl, as the serving tests do.
from tests.kubeflow.test_serving_manifests import SERVING, _kubernetes_versions, _kustomize

MONITORING = os.path.join(SERVING, "monitoring")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# Every kustomization under monitoring/, by its path relative to kubeflow/serving/ ("" is the serving base).
KUSTOMIZATIONS = [
    "",
    "monitoring",
    "monitoring/dcgm-exporter",
    "monitoring/dcgm-exporter/base",
    "monitoring/prometheus",
]
METRICS_PATH = "/monitoring/prometheus/metrics"
# Kinds kubernetes-validate has no schema for, with the schema they are checked against instead.
CRD_SCHEMAS = {("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-v1.schema.json"}


@functools.lru_cache(maxsize=None)
def _built_text(path: str) -> str:
    return yaml.safe_dump_all(_kustomize(os.path.join(SERVING, path)))


def _built(path: str) -> list:
    return list(yaml.safe_load_all(_built_text(path)))


def _one(docs: list, kind: str, name: str = None) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return doc


def _data(name: str):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return json.load(f)


def _flags(container: dict) -> dict:
    return dict(arg[2:].split("=", 1) for arg in container["args"] if arg.startswith("--"))


def _comments(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)# ?(.*)$", f.read(), re.M))


# --- TF Serving's Prometheus endpoint ---


def _proto_messages(path: str) -> dict:
    """The message classes of a proto file of plain messages (scalar and message fields), built without protoc:
    tensorflow-serving-api ships no monitoring_config_pb2, so the test builds it from TF Serving's .proto."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    package = re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M).group(1)
    syntax = re.search(r'^\s*syntax\s*=\s*"(\w+)"\s*;', text, re.M).group(1)
    scalars = {
        "bool": "TYPE_BOOL",
        "string": "TYPE_STRING",
        "bytes": "TYPE_BYTES",
        "int32": "TYPE_INT32",
        "int64": "TYPE_INT64",
        "uint32": "TYPE_UINT32",
        "uint64": "TYPE_UINT64",
        "float": "TYPE_FLOAT",
        "double": "TYPE_DOUBLE",
    }
    FieldDescriptorProto = descriptor_pb2.FieldDescriptorProto
    file_proto = descriptor_pb2.FileDescriptorProto(name=os.path.basename(path), package=package, syntax=syntax)
    for name, body in re.findall(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        message = file_proto.message_type.add(name=name)
        statements = [s.strip() for s in body.split(";") if s.strip()]
        for statement in statements:
            # Every statement of the body is a field this parser understands, or the test fails.
            repeated, field_type, field_name, number = re.fullmatch(
                r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+)", statement
            ).groups()
            field = message.field.add(name=field_name, number=int(number))
            field.label = FieldDescriptorProto.LABEL_REPEATED if repeated else FieldDescriptorProto.LABEL_OPTIONAL
            if field_type in scalars:
                field.type = getattr(FieldDescriptorProto, scalars[field_type])
            else:
                field.type = FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = f".{package}.{field_type}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    get_class = getattr(message_factory, "GetMessageClass", None) or message_factory.MessageFactory(pool).GetPrototype
    return {m.name: get_class(pool.FindMessageTypeByName(f"{package}.{m.name}")) for m in file_proto.message_type}


def _monitoring_config_class():
    messages = _proto_messages(os.path.join(DATA, "monitoring_config.proto"))
    MonitoringConfig = messages["MonitoringConfig"]
    # The parser read what the .proto declares (tensorflow_serving/config/monitoring_config.proto, 2.16.1).
    assert set(MonitoringConfig.DESCRIPTOR.fields_by_name) == {"prometheus_config"}
    assert set(messages["PrometheusConfig"].DESCRIPTOR.fields_by_name) == {"enable", "path"}
    return MonitoringConfig


def test_tf_serving_serves_prometheus_metrics_on_its_rest_port():
    docs = _built("")
    deployment, configmap = _one(docs, "Deployment"), _one(docs, "ConfigMap")
    pod = deployment["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    flags = _flags(server)
    # The file TF Serving reads is the ConfigMap's monitoring.config, through the config volume.
    config_dir, config_name = os.path.split(flags["monitoring_config_file"])
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[config_dir]]["configMap"]["name"] == configmap["metadata"]["name"]
    MonitoringConfig = _monitoring_config_class()
    config = MonitoringConfig()
    text_format.Parse(configmap["data"][config_name], config)
    assert config.prometheus_config.enable is True
    assert config.prometheus_config.path == METRICS_PATH
    # ... parsed strictly, as TF Serving parses it: a misspelt field is an error.
    with pytest.raises(text_format.ParseError):
        text_format.Parse("prometheus_config { enabled: true }", MonitoringConfig())
    # Served by the REST server (http_server.cc), on the port named http.
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    assert ports["http"] == int(flags["rest_api_port"])
    # The annotations a Prometheus without the operator discovers it by.
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(ports["http"])
    assert annotations["prometheus.io/path"] == config.prometheus_config.path


def test_the_serving_base_needs_no_prometheus_operator():
    # kubectl apply -k kubeflow/serving/ works on a cluster without the operator's CRDs.
    assert not [doc["kind"] for doc in _built("") if doc["apiVersion"].startswith("monitoring.coreos.com/")]
    assert not [
        doc["kind"]
        for doc in _built("monitoring/dcgm-exporter/base") + _built("monitoring/prometheus")
        if doc["apiVersion"].startswith("monitoring.coreos.com/")
    ]


def test_the_kustomizations_render_what_they_promise():
    def kinds(path):
        return sorted((doc["kind"], doc["metadata"]["name"]) for doc in _built(path))

    assert kinds("monitoring") == [("ConfigMap", "tf-serving-grafana-dashboard"), ("ServiceMonitor", "tf-serving-taxi")]
    exporter = kinds("monitoring/dcgm-exporter/base")
    assert [kind for kind, _ in exporter] == ["ConfigMap", "DaemonSet", "Service"]
    assert kinds("monitoring/dcgm-exporter") == sorted(exporter + [("ServiceMonitor", "dcgm-exporter")])
    assert kinds("monitoring/prometheus") == [("ConfigMap", "tf-serving-prometheus-scrape-config")]
    # Each is applied with -n to a namespace of the user's choice: none names one itself.
    for path in KUSTOMIZATIONS:
        assert not [doc["kind"] for doc in _built(path) if "namespace" in doc["metadata"]], path


# --- Schemas ---


def _strict(schema):
    """The CRD schema as the API server applies it with kubectl's default strict field validation: an object
    with declared properties takes no others (unless it preserves unknown fields)."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@functools.lru_cache(maxsize=None)
def _crd_validator(name: str):
    schema = _strict(_data(name))
    # OpenAPI v3.0 schemas are JSON Schema draft 4 in the keywords they use.
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def test_every_rendered_object_validates_against_its_schema():
    versions = _kubernetes_versions()
    checked = set()
    for path in KUSTOMIZATIONS[1:]:  # the serving base: test_serving_manifests.py
        for doc in _built(path):
            crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
            if crd:
                # kubernetes-validate has no schema for it (if it gets one, use it here too).
                with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                    kubernetes_validate.validate(doc, versions[-1], strict=True)
                _crd_validator(crd).validate(doc)
            else:
                for version in versions:
                    assert kubernetes_validate.validate(doc, version, strict=True) == version, (path, doc["kind"])
            checked.add(doc["kind"])
    assert {"ServiceMonitor", "DaemonSet", "Service", "ConfigMap"} <= checked
    # The CRD schema does bite: a misspelt field, a malformed duration, a missing required field.
    monitor = _one(_built("monitoring"), "ServiceMonitor")
    validator = _crd_validator(CRD_SCHEMAS[("monitoring.coreos.com/v1", "ServiceMonitor")])
    for path, value in (
        (("spec", "endpoints", 0, "intervall"), "15s"),
        (("spec", "endpoints", 0, "interval"), "15 s"),
        (("spec", "endpoints", 0, "honorLabels"), "yes"),
    ):
        broken = copy.deepcopy(monitor)
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)
    broken = copy.deepcopy(monitor)
    del broken["spec"]["selector"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


# --- Who scrapes what ---


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # matchExpressions would need more than this
    return bool(selector["matchLabels"]) and selector["matchLabels"].items() <= labels.items()


def _service_port(service: dict, name: str) -> dict:
    (port,) = [p for p in service["spec"]["ports"] if p.get("name") == name]
    return port


def _container_port(container: dict, target) -> int:
    if isinstance(target, int):
        assert target in [p["containerPort"] for p in container["ports"]]
        return target
    (port,) = [p["containerPort"] for p in container["ports"] if p.get("name") == target]
    return port


def test_the_tf_serving_service_monitor_scrapes_the_metrics_port_of_the_service():
    base = _built("")
    service, deployment = _one(base, "Service"), _one(base, "Deployment")
    monitor = _one(_built("monitoring"), "ServiceMonitor")
    assert _selects(monitor["spec"]["selector"], service["metadata"].get("labels", {}))
    # Only that Service in the namespace: the serving base has one.
    assert "namespaceSelector" not in monitor["spec"]  # the ServiceMonitor's own namespace, TF Serving's
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == METRICS_PATH
    port = _service_port(service, endpoint["port"])
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    assert _container_port(server, port["targetPort"]) == int(_flags(server)["rest_api_port"])
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_the_dcgm_service_monitor_scrapes_every_exporter_pod_and_keeps_its_pod_labels():
    docs = _built("monitoring/dcgm-exporter")
    service, daemonset, monitor = _one(docs, "Service"), _one(docs, "DaemonSet"), _one(docs, "ServiceMonitor")
    assert _selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert "namespaceSelector" not in monitor["spec"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    # The exporter's pod/namespace labels name the pod that holds the GPU; the dashboard selects by them.
    assert endpoint["honorLabels"] is True
    (exporter,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert _container_port(exporter, _service_port(service, endpoint["port"])["targetPort"]) == 9400
    assert _selects({"matchLabels": service["spec"]["selector"]}, daemonset["spec"]["template"]["metadata"]["labels"])
    assert daemonset["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]


# Prometheus relabelling, enough of it to run the scrape jobs of prometheus.yml on the pods of the manifests.


def _relabel(labels: dict, configs: list):
    for config in configs:
        action = config.get("action", "replace")
        value = config.get("separator", ";").join(labels.get(name, "") for name in config.get("source_labels", []))
        # Prometheus anchors the regex at both ends; its RE2 syntax is Python's for these.
        match = re.fullmatch(config.get("regex", "(.*)"), value)
        if action == "keep" and not match or action == "drop" and match:
            return None
        if action == "replace" and match:
            replacement = re.sub(
                r"\$\{?(\w+)\}?", lambda g, m=match: m.group(int(g.group(1))) or "", config.get("replacement", "$1")
            )
            if replacement:
                labels[config["target_label"]] = replacement
            else:
                labels.pop(config["target_label"], None)
        assert action in ("keep", "drop", "replace"), action
    return labels


def _sanitize(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _discover_pod(pod_template: dict, namespace: str, name: str, ip: str) -> list:
    """The targets of Prometheus's Kubernetes discovery, role pod, for one pod: one per declared container port,
    one per container without ports."""
    meta = pod_template["metadata"]
    common = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": name}
    common.update({f"__meta_kubernetes_pod_label_{_sanitize(k)}": v for k, v in meta.get("labels", {}).items()})
    common.update(
        {f"__meta_kubernetes_pod_annotation_{_sanitize(k)}": v for k, v in meta.get("annotations", {}).items()}
    )
    targets = []
    spec = pod_template["spec"]
    for init, containers in (("true", spec.get("initContainers", [])), ("false", spec["containers"])):
        for container in containers:
            base = dict(
                common,
                __meta_kubernetes_pod_container_name=container["name"],
                __meta_kubernetes_pod_container_init=init,
            )
            for port in container.get("ports", []) or [None]:
                target = dict(base, __address__=ip if port is None else f"{ip}:{port['containerPort']}")
                if port is not None:
                    target.update(
                        __meta_kubernetes_pod_container_port_name=port.get("name", ""),
                        __meta_kubernetes_pod_container_port_number=str(port["containerPort"]),
                    )
                targets.append(target)
    return targets


def _scrape_targets(job: dict, pods: list) -> set:
    found = set()
    for pod in pods:
        for target in pod:
            labels = _relabel(dict(target, __metrics_path__="/metrics"), job.get("relabel_configs", []))
            if labels is not None:
                found.add(
                    (labels["__address__"], labels["__metrics_path__"], labels.get("namespace"), labels.get("pod"))
                )
    return found


def test_the_plain_prometheus_jobs_scrape_tf_serving_and_the_exporter():
    configmap = _one(_built("monitoring/prometheus"), "ConfigMap")
    with open(os.path.join(MONITORING, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        assert configmap["data"]["prometheus.yml"] == f.read()
    config = yaml.safe_load(configmap["data"]["prometheus.yml"])
    assert set(config) == {"scrape_configs"}
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"tf-serving", "dcgm-exporter"}
    for job in jobs.values():
        assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    # As the ServiceMonitor's honorLabels: the exporter's pod and namespace labels win.
    assert jobs["dcgm-exporter"]["honor_labels"] is True and not jobs["tf-serving"].get("honor_labels")

    serving = _one(_built(""), "Deployment")["spec"]["template"]
    exporter = _one(_built("monitoring/dcgm-exporter/base"), "DaemonSet")["spec"]["template"]
    pods = [
        _discover_pod(serving, "kubeflow-user-example-com", "tf-serving-taxi-7d9f-abcde", "10.0.0.5"),
        _discover_pod(exporter, "gpu-monitoring", "dcgm-exporter-x1y2z", "10.0.0.9"),
    ]
    # One target per pod, at the port and path the annotations name, with the namespace and pod labels.
    assert _scrape_targets(jobs["tf-serving"], pods) == {
        ("10.0.0.5:8501", METRICS_PATH, "kubeflow-user-example-com", "tf-serving-taxi-7d9f-abcde")
    }
    assert _scrape_targets(jobs["dcgm-exporter"], pods) == {
        ("10.0.0.9:9400", "/metrics", "gpu-monitoring", "dcgm-exporter-x1y2z")
    }
    # Under Istio's metrics merging the injector points the annotations at the sidecar's agent: followed too.
    merged = copy.deepcopy(serving)
    merged["metadata"]["annotations"].update({"prometheus.io/port": "15020", "prometheus.io/path": "/stats/prometheus"})
    assert _scrape_targets(jobs["tf-serving"], [_discover_pod(merged, "ns", "p", "10.0.0.6")]) == {
        ("10.0.0.6:15020", "/stats/prometheus", "ns", "p")
    }
    # A pod that does not opt in is not scraped.
    off = copy.deepcopy(serving)
    off["metadata"]["annotations"]["prometheus.io/scrape"] = "false"
    assert not _scrape_targets(jobs["tf-serving"], [_discover_pod(off, "ns", "p", "10.0.0.7")])


# --- NVIDIA DCGM exporter ---


def _counters(text: str) -> list:
    """dcgm-exporter's parsing of its -f file (internal/pkg/counters/counter_config.go): CSV, '#' comments, every
    record exactly three fields (name, Prometheus type, help), each trimmed of spaces."""
    rows = []
    for record in csv.reader(io.StringIO(text)):
        if not record or record[0].lstrip().startswith("#"):
            continue
        assert len(record) == 3, record
        rows.append(tuple(field.strip(" ") for field in record))
    return rows


def test_the_dcgm_counters_are_dcgm_fields():
    dcgm = _data("exported_metrics.json")["dcgm"]
    with open(os.path.join(MONITORING, "dcgm-exporter", "base", "dcgm-counters.csv"), encoding="utf-8") as f:
        text = f.read()
    rows = _counters(text)
    names = [name for name, _, _ in rows]
    assert len(names) == len(set(names))
    known = {field["name"] for field in dcgm["fields"]}
    assert set(names) <= known, set(names) - known
    assert {kind for _, kind, _ in rows} <= set(dcgm["csv_types"]["values"])
    assert all(help_text for _, _, help_text in rows)
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
    } <= set(names)
    # The exporter reads exactly this file: the generated ConfigMap, mounted where -f points.
    docs = _built("monitoring/dcgm-exporter/base")
    configmap, daemonset = _one(docs, "ConfigMap"), _one(docs, "DaemonSet")
    assert configmap["data"] == {"dcgm-counters.csv": text}
    pod = daemonset["spec"]["template"]["spec"]
    (exporter,) = pod["containers"]
    args = exporter["args"]
    counters_dir, counters_name = os.path.split(args[args.index("-f") + 1])
    assert counters_name in configmap["data"]
    (mount,) = [m for m in exporter["volumeMounts"] if m["mountPath"] == counters_dir]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]  # kustomize's hashed name


def test_the_dcgm_exporter_runs_on_the_gpu_nodes_as_restricted_as_dcgm_allows():
    daemonset = _one(_built("monitoring/dcgm-exporter/base"), "DaemonSet")
    serving = _one(_built(""), "Deployment")["spec"]["template"]["spec"]
    pod = daemonset["spec"]["template"]["spec"]
    (exporter,) = pod["containers"]
    dcgm = _data("exported_metrics.json")["dcgm"]
    # The image of the release whose field names and labels exported_metrics.json records, with a fixed tag.
    image, tag = exporter["image"].rsplit(":", 1)
    assert image == "nvcr.io/nvidia/k8s/dcgm-exporter"
    assert re.fullmatch(rf"{re.escape(dcgm['exporter_tag'])}-(ubuntu22\.04|ubi9|distroless)", tag), tag
    # The GPU nodes TF Serving runs on.
    for key in ("runtimeClassName", "nodeSelector", "tolerations"):
        assert pod[key] == serving[key], key
    env = {var["name"]: var.get("value") for var in exporter["env"]}
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"  # the pod/namespace labels the dashboard selects by
    assert env["DCGM_EXPORTER_LISTEN"] == ":9400"
    assert {p["name"]: p["containerPort"] for p in exporter["ports"]} == {"metrics": 9400}
    # Privileges: SYS_ADMIN only, for the profiling fields, and only while the CSV has profiling fields.
    context = {**pod.get("securityContext", {}), **exporter["securityContext"]}
    with open(os.path.join(MONITORING, "dcgm-exporter", "base", "dcgm-counters.csv"), encoding="utf-8") as f:
        profiling = [name for name, _, _ in _counters(f.read()) if name.startswith("DCGM_FI_PROF_")]
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["capabilities"].get("add", []) == (["SYS_ADMIN"] if profiling else [])
    assert context["allowPrivilegeEscalation"] is False and not context.get("privileged")
    assert context["seccompProfile"]["type"] == "RuntimeDefault"
    comments = _comments(os.path.join(MONITORING, "dcgm-exporter", "base", "daemonset.yaml"))
    assert "SYS_ADMIN" in comments and "profiling" in comments
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert pod["automountServiceAccountToken"] is False
    # The one host path is the kubelet's pod-resources directory, read-only.
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {"pod-resources": "/var/lib/kubelet/pod-resources"}
    (mount,) = [m for m in exporter["volumeMounts"] if m["name"] == "pod-resources"]
    assert mount["readOnly"] is True and mount["mountPath"] == "/var/lib/kubelet/pod-resources"
    for resource in ("cpu", "memory"):
        assert exporter["resources"]["requests"][resource] and exporter["resources"]["limits"][resource]
    assert exporter["readinessProbe"]["httpGet"]["port"] == "metrics"


# --- The Grafana dashboard ---


@functools.lru_cache(maxsize=None)
def _dashboard_text() -> str:
    with open(os.path.join(MONITORING, "grafana-dashboard.json"), encoding="utf-8") as f:
        return f.read()


def _dashboard() -> dict:
    return json.loads(_dashboard_text())


# PromQL words that look like metric names but are not.
PROMQL_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "inf",
    "nan",
    "atan2",
}
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}


def _metric_names(expr: str) -> set:
    """The metric names of a PromQL expression: identifiers outside strings, label matchers, ranges and
    grouping clauses that are neither function calls nor keywords."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^{}]*\}", " ", expr)
    expr = re.sub(r"\[[^\[\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()", expr):
        if match.group(1).lower() not in PROMQL_KEYWORDS:
            names.add(match.group(1))
    return names


def _label_names(expr: str) -> set:
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    labels = set()
    for matchers in re.findall(r"\{([^{}]*)\}", expr):
        labels.update(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    for grouping in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)", expr):
        labels.update(name.strip() for name in grouping.split(",") if name.strip())
    return labels


def test_the_metric_name_extraction():
    expr = (
        "histogram_quantile(0.99, sum by (le, model_name) "
        '(rate(:a:b_bucket{x=~"$ns", y!="by(z)"}[$__rate_interval])))'
        ' / on (pod) group_left 100 * DCGM_FI_X{pod=~"$pod"} or vector(0) and up offset 5m'
    )
    assert _metric_names(expr) == {":a:b_bucket", "DCGM_FI_X", "up"}
    assert _label_names(expr) == {"le", "model_name", "x", "y", "pod"}


def _known_series() -> dict:
    """Every series name TF Serving 2.16.1 and the DCGM exporter export, with its labels and source."""
    data = _data("exported_metrics.json")
    tf_serving, dcgm = data["tensorflow_serving"], data["dcgm"]
    series = {}
    for metric in tf_serving["metrics"]:
        # tensorflow_serving/util/prometheus_exporter.cc, GetPrometheusMetricName.
        name = re.sub(r"[^a-zA-Z0-9_]", ":", metric["name"])
        name = "_" + name if name[0].isdigit() else name
        assert name == metric["prometheus"], metric
        if metric["type"] == "histogram":
            for suffix in tf_serving["naming"]["histogram_series"]:
                labels = metric["labels"] + (["le"] if suffix == "_bucket" else [])
                series[name + suffix] = dict(metric, labels=labels, origin="tensorflow_serving")
        else:
            series[name] = dict(metric, origin="tensorflow_serving")
    dcgm_labels = dcgm["labels"]["gpu"] + dcgm["labels"]["kubernetes"]
    for field in dcgm["fields"]:
        series[field["name"]] = dict(field, labels=dcgm_labels, origin="dcgm")
    return series


def _expressions(dashboard: dict) -> list:
    """(where, PromQL, legend) of every panel target and every query variable."""
    found = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found.append((f"panel {panel['id']} {target['refId']}", target["expr"], target.get("legendFormat", "")))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"] if isinstance(variable["query"], str) else variable["query"]["query"]
            selector, label = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query).groups()
            found.append((f"variable {variable['name']}", selector, "{{%s}}" % label))
    return found


def test_the_dashboard_is_valid_grafana_json():
    dashboard = _dashboard()
    # Grafana 10.0 writes schemaVersion 38, 10.4 and 11.0 write 39; newer Grafanas migrate it up on load.
    assert dashboard["schemaVersion"] in (38, 39)
    assert dashboard["uid"] and len(dashboard["uid"]) <= 40 and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells = set()
    for panel in dashboard["panels"]:
        assert panel["datasource"] == datasource, panel["id"]
        refs = [target["refId"] for target in panel["targets"]]
        assert panel["targets"] and len(refs) == len(set(refs)), panel["id"]
        assert all(target["datasource"] == datasource and target["expr"] for target in panel["targets"])
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        panel_cells = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & panel_cells, f"panel {panel['id']} overlaps another"
        cells |= panel_cells
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == datasource, variable["name"]
    # Every $variable an expression uses is defined (or one of Grafana's own).
    for where, expr, _ in _expressions(dashboard):
        used = set(re.findall(r"\$\{?(\w+)", expr))
        assert used <= set(variables) | GRAFANA_VARIABLES, (where, used)


def test_the_dashboard_charts_what_was_asked():
    exprs = [expr for _, expr, _ in _expressions(_dashboard())]
    joined = "\n".join(exprs)

    def quantiles(series):
        return {float(q) for q in re.findall(rf"histogram_quantile\(([\d.]+),[^\n]*{re.escape(series)}\{{", joined)}

    assert re.search(r"sum by \(model_name, status\) \(rate\(:tensorflow:serving:request_count\{", joined)
    assert quantiles(":tensorflow:serving:request_latency_bucket") == {0.5, 0.95, 0.99}
    assert quantiles(":tensorflow:serving:runtime_latency_bucket") == {0.5, 0.95, 0.99}
    assert quantiles(":tensorflow:serving:batching_session:processed_batch_size_bucket")
    for field in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"):
        assert re.search(rf"\b{field}\{{", joined), field
    # A quantile of a histogram aggregates its buckets by le, over a rate.
    for expr in exprs:
        for grouping, series in re.findall(
            r"histogram_quantile\([\d.]+,\s*sum by \(([^()]*)\)\s*\(rate\(([\w:]+)\{", expr
        ):
            assert series.endswith("_bucket") and "le" in [g.strip() for g in grouping.split(",")], expr
        assert expr.count("histogram_quantile(") == len(re.findall(r"histogram_quantile\([\d.]+,\s*sum by \(", expr))


def test_every_metric_and_label_the_dashboard_queries_is_exported():
    known = _known_series()
    target_labels = set(_data("exported_metrics.json")["target_labels"]["labels"])
    with open(os.path.join(MONITORING, "dcgm-exporter", "base", "dcgm-counters.csv"), encoding="utf-8") as f:
        exported_fields = {name for name, kind, _ in _counters(f.read()) if kind != "label"}
    used = set()
    for where, expr, legend in _expressions(_dashboard()):
        names = _metric_names(expr)
        assert names, (where, expr)
        unknown = names - set(known)
        assert not unknown, f"{where}: {sorted(unknown)} is not a metric TF Serving 2.16.1 or DCGM exports"
        for name in names:
            if known[name]["origin"] == "dcgm":
                # The exporter exports only the fields of its CSV.
                assert name in exported_fields, f"{where}: {name} is not in dcgm-counters.csv"
            else:
                assert not known[name]["when"].startswith("TFRT"), f"{where}: {name} is TFRT-only"
        labels = set().union(*(known[name]["labels"] for name in names)) | target_labels
        assert _label_names(expr) <= labels, (where, _label_names(expr) - labels)
        assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) <= labels, (where, legend)
        used |= names
    # TF Serving's metrics as well as DCGM's are in use.
    assert {known[name]["origin"] for name in used} == {"tensorflow_serving", "dcgm"}


def test_the_dashboard_ships_in_a_configmap_for_the_grafana_sidecar():
    configmap = _one(_built("monitoring"), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    # A fixed name (no content hash), so that an update replaces the dashboard instead of adding a copy.
    assert configmap["metadata"]["name"] == "tf-serving-grafana-dashboard"
    ((key, text),) = configmap["data"].items()
    assert key.endswith(".json") and text == _dashboard_text()


def test_the_readme_names_what_exists():
    with open(os.path.join(MONITORING, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    repo = os.path.dirname(os.path.dirname(SERVING))
    for path in set(re.findall(r"apply -k (kubeflow/serving/monitoring/[^\s`]*)", readme)):
        assert os.path.isfile(os.path.join(repo, path, "kustomization.yaml")), path
    for path in KUSTOMIZATIONS[1:]:
        assert f"apply -k kubeflow/{os.path.join('serving', path)}/" in readme, path
    for name in set(re.findall(r"`([\w./-]+\.(?:yaml|yml|json|csv))`", readme)):
        assert any(os.path.exists(os.path.join(root, name)) for root in (MONITORING, repo)), name
