"""The `kfp-launcher` ConfigMap a namespace needs for a pipeline whose root is on s3://: how KFP's launcher reaches
that store (its `providers` entry), and the object-store secret's keys the steps' variables come from."""

from __future__ import annotations

from typing import Any, Optional

# The secret the launcher reads (copied into every profile namespace): its keys and the boto3 variables they become
# in the steps.
OBJECT_STORE_KEYS = (("accesskey", "AWS_ACCESS_KEY_ID"), ("secretkey", "AWS_SECRET_ACCESS_KEY"))
LAUNCHER_CONFIG_MAP = "kfp-launcher"


def launcher_config_map(config: Any) -> Optional[dict]:
    """For an s3:// pipeline root, the `kfp-launcher` ConfigMap the namespace needs; None for other roots.
    `config`: the compiler's KubeflowConfig (its root, store endpoint, region, secret and namespace).

    Without a `providers` entry KFP's launcher opens s3:// buckets "from env" (config/s3.go
    `ProvideSessionInfo`): its own container's AWS_* variables, which KFP does not set, with virtual-host
    addressing and no region, so an S3-compatible store (or a bucket outside us-east-1) fails at the first
    upload. The entry gives it the steps' endpoint, region and secret, path-style (the field names are
    config/s3.go's JSON tags)."""
    if not config.pipeline_root.startswith("s3://"):
        return None
    import yaml

    default: dict = {"region": config.s3_region, "forcePathStyle": True}
    if config.s3_endpoint:
        scheme, _, host = config.s3_endpoint.partition("://")
        default["endpoint"] = host.rstrip("/")
        default["disableSSL"] = scheme == "http"
    else:
        default["endpoint"] = f"s3.{config.s3_region}.amazonaws.com"
        default["disableSSL"] = False
    if config.object_store_secret:
        accesskey, secretkey = (key for key, _ in OBJECT_STORE_KEYS)
        default["credentials"] = {
            "fromEnv": False,
            "secretRef": {
                "secretName": config.object_store_secret,
                "accessKeyKey": accesskey,
                "secretKeyKey": secretkey,
            },
        }
    else:  # the launcher's own identity (IAM roles for service accounts)
        default["credentials"] = {"fromEnv": True}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": LAUNCHER_CONFIG_MAP, "namespace": config.namespace or "kubeflow"},
        "data": {
            "defaultPipelineRoot": config.pipeline_root,
            "providers": yaml.safe_dump({"s3": {"default": default}}, sort_keys=True),
        },
    }
