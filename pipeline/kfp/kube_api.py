"""The few Kubernetes API calls the Trainer step's launcher makes (job_launcher.py), as plain dicts, through the
kubernetes client: the pod's own service account in a cluster, else the kubeconfig of `KUBECONFIG`. Reads are
retried over transient failures (a 5xx, 429 or dropped connection of an API server under load), so hours of
polling do not end on one of them."""

from __future__ import annotations

import os
import time
from typing import Iterator, List, Mapping, Optional

from tfxflow.pipeline.kfp import training_job

SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
RETRIES = 5
RETRY_S = 2.0  # doubled after each failed try
TRANSIENT = (429, 500, 502, 503, 504)


class Kube:
    """Creates, reads and deletes training jobs; lists and reads pods and their logs."""

    def __init__(self, api_client=None, retry_s: float = RETRY_S):
        from kubernetes import client, config

        if api_client is None:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # read now, not at import
            api_client = client.ApiClient()
        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.retry_s = retry_s

    @property
    def host(self) -> str:
        return self.api_client.configuration.host

    @staticmethod
    def namespace(default: str = "") -> str:
        """The pod's own namespace (its service account's), else `default`, else the kubeconfig's, else
        "default"."""
        try:
            with open(SA_NAMESPACE, encoding="utf-8") as f:
                return f.read().strip()
        except OSError:
            pass
        if default:
            return default
        from kubernetes import config

        try:
            _, context = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
            return context.get("context", {}).get("namespace") or "default"
        except (config.ConfigException, OSError, TypeError):
            return "default"

    def _read(self, fn, *args, **kwargs):
        """`fn`'s answer; None on 404; transient failures tried again, up to RETRIES times."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        wait = self.retry_s
        for attempt in range(RETRIES):
            try:
                return fn(*args, **kwargs)
            except ApiException as err:
                if err.status == 404:
                    return None
                if err.status not in TRANSIENT or attempt == RETRIES - 1:
                    raise
            except HTTPError:
                if attempt == RETRIES - 1:
                    raise
            time.sleep(wait)
            wait *= 2
        return None  # not reached

    def create(self, kind: str, namespace: str, body: Mapping) -> Optional[dict]:
        """The created object; None when one of that name exists already."""
        from kubernetes.client.rest import ApiException

        group, version, plural, _ = training_job.API[kind]
        try:
            return self.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
        except ApiException as err:
            if err.status == 409:
                return None
            raise

    def get(self, kind: str, namespace: str, name: str) -> Optional[dict]:
        group, version, plural, _ = training_job.API[kind]
        return self._read(self.custom.get_namespaced_custom_object, group, version, namespace, plural, name)

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Deletes the job and, through their owner references, its pods; False when it was gone."""
        group, version, plural, _ = training_job.API[kind]
        found = self._read(
            self.custom.delete_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            name,
            propagation_policy="Foreground",
        )
        return found is not None

    def pod(self, namespace: str, name: str) -> Optional[dict]:
        found = self._read(self.core.read_namespaced_pod, name, namespace)
        return None if found is None else self.api_client.sanitize_for_serialization(found)

    def pods(self, namespace: str, selector: str) -> List[dict]:
        listed = self._read(self.core.list_namespaced_pod, namespace, label_selector=selector)
        return [self.api_client.sanitize_for_serialization(p) for p in listed.items] if listed else []

    def log(self, namespace: str, pod: str, container: str, tail: Optional[int] = None) -> str:
        kwargs = {"tail_lines": tail} if tail else {}
        return self._read(self.core.read_namespaced_pod_log, pod, namespace, container=container, **kwargs) or ""

    def follow_log(self, namespace: str, pod: str, container: str, since_s: Optional[int] = None) -> Iterator[str]:
        """The container's log lines as they come, until it ends or the connection drops."""
        kwargs = {"since_seconds": since_s} if since_s else {}
        response = self.core.read_namespaced_pod_log(
            pod, namespace, container=container, follow=True, _preload_content=False, **kwargs
        )
        pending = b""
        try:
            for chunk in response.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace")
            if pending:
                yield pending.decode("utf-8", "replace")
        finally:
            response.release_conn()
