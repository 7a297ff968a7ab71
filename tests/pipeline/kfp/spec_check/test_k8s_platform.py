"""The Kubernetes platform spec: its shape and each executor's secrets, volumes, node selector, tolerations and
security context."""

import pytest

from tests.pipeline.kfp.spec_check.specs import (
    assert_caught,
    k8s_of,
)

# (id, change, expected rule, where the problem is)
CASES = [
    (
        "root with runAsNonRoot",
        lambda s, p: k8s_of(p, "Consumer").update(securityContext={"runAsUser": 0, "runAsNonRoot": True}),
        "security-context",
        "platform executor Consumer_executor",
    ),
    (
        "platform label",
        lambda s, p: p["platforms"]["kubernetes"]["deploymentSpec"]["executors"].update(Nope_executor={}),
        "platform-spec",
        "platform executor Nope_executor",
    ),
    (
        "platform field",
        lambda s, p: k8s_of(p, "Consumer").update(secretsAsEnv=[]),
        "platform-spec",
        "platform executor Consumer_executor",
    ),
    (
        "platform document",
        lambda s, p: p["platforms"]["kubernetes"].update(executors={}),
        "platform-spec",
        "platform spec",
    ),
    (
        "secret without name",
        lambda s, p: k8s_of(p, "Consumer")["secretAsEnv"][0].pop("secretName"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "secret without key",
        lambda s, p: k8s_of(p, "Consumer")["secretAsEnv"][0]["keyToEnv"][0].pop("secretKey"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "bad env name",
        lambda s, p: k8s_of(p, "Consumer")["secretAsEnv"][0]["keyToEnv"][0].update(envVar="1 bad"),
        "secret-env",
        "platform executor Consumer_executor",
    ),
    (
        "pvc without mount path",
        lambda s, p: k8s_of(p, "Consumer")["pvcMount"][0].pop("mountPath"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc without claim",
        lambda s, p: k8s_of(p, "Consumer")["pvcMount"][0].pop("constant"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc name upper case",
        lambda s, p: k8s_of(p, "Consumer")["pvcMount"][0].update(constant="Serving_Models"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "pvc on a KFP mount",
        lambda s, p: k8s_of(p, "Consumer")["pvcMount"][0].update(mountPath="/gcs"),
        "pvc-mount",
        "platform executor Consumer_executor",
    ),
    (
        "node selector key",
        lambda s, p: k8s_of(p, "Producer")["nodeSelector"]["labels"].update({"bad key": "x"}),
        "node-selector",
        "platform executor Producer_executor",
    ),
    (
        "toleration Exists with value",
        lambda s, p: k8s_of(p, "Producer")["tolerations"][0].update(value="x"),
        "toleration",
        "platform executor Producer_executor",
    ),
    (
        "toleration effect",
        lambda s, p: k8s_of(p, "Producer")["tolerations"][1].update(effect="NoRun"),
        "toleration",
        "platform executor Producer_executor",
    ),
]


@pytest.mark.parametrize("change, rule, where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_catches_its_violation(change, rule, where):
    assert_caught(change, rule, where)
