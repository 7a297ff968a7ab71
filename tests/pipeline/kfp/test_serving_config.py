"""The canary model config: two versions, labelled, in the format TF Serving's protos read."""

import os

import pytest
import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from tests import helpers
from tfxflow.pipeline.config import ConfigError
from tfxflow.pipeline.kfp import serving_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _serving_dir(tmp_path, versions, incomplete=()):
    base = tmp_path / "serving" / "taxi"
    for version in versions:
        (base / str(version)).mkdir(parents=True)
        (base / str(version) / "saved_model.pb").write_bytes(b"")
    for version in incomplete:  # a push in progress, or one that died: no saved_model.pb
        (base / str(version)).mkdir(parents=True)
    return tmp_path / "serving"


def test_the_config_serves_both_versions_labelled():
    text = serving_config.config_text(serving_config.canary_config("taxi", "/serving/models/taxi", 17, 21))
    parsed = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    (model,) = parsed.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == ("taxi", "/serving/models/taxi", "tensorflow")
    assert list(model.model_version_policy.specific.versions) == [17, 21]
    assert dict(model.version_labels) == {"stable": 17, "canary": 21}


def test_versions_default_to_the_newest_and_the_one_before(tmp_path):
    serving = _serving_dir(tmp_path, [100, 200, 300], incomplete=[400])
    available = serving_config.served_versions(str(serving / "taxi"))
    assert available == [100, 200, 300]
    assert serving_config.choose_versions(available, None, None) == (200, 300)
    assert serving_config.choose_versions(available, 100, None) == (100, 300)
    assert serving_config.choose_versions(available, None, 200) == (100, 200)


def test_rolled_back_versions_are_neither_stable_nor_canary(tmp_path):
    from tfxflow.components import serving_dir

    serving = _serving_dir(tmp_path, [100, 200, 300, 400])
    # 300 was rolled back to 200, served again as 400 (the log `tfxflow rollback` writes).
    serving_dir.write_rollbacks(
        str(serving / "taxi"),
        [{"rolled_back_version": 300, "versions": [300], "fingerprint": "f", "to_version": 200, "new_version": 400}],
    )
    available = serving_config.served_versions(str(serving / "taxi"))
    assert available == [100, 200, 400]
    assert serving_config.choose_versions(available, None, None) == (200, 400)


@pytest.mark.parametrize(
    "available,stable,canary,message",
    [
        ([], None, None, "no pushed version to release as the canary"),
        ([300], None, None, "no version older than the canary 300"),
        ([100, 300], 100, 400, "--canary 400: not a complete version in the serving directory (there: 100, 300)"),
        ([], 5, 5, "--stable and --canary are both 5"),
        ([], 0, 5, "--stable 0: a version is a positive integer"),
    ],
)
def test_refusals_name_the_flag(available, stable, canary, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        serving_config.choose_versions(available, stable, canary)


@pytest.mark.integration
def test_cli_writes_the_config_from_a_serving_directory(tmp_path):
    serving = _serving_dir(tmp_path, [100, 200, 300])
    out = tmp_path / "models.config"
    result = helpers.run_cli("kubeflow", "serving-config", "--serving-dir", str(serving), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "taxi version 200 labelled stable, 300 labelled canary" in result.stdout
    parsed = text_format.Parse(out.read_text(), model_server_config_pb2.ModelServerConfig())
    assert dict(parsed.model_config_list.config[0].version_labels) == {"stable": 200, "canary": 300}
    refused = helpers.run_cli("kubeflow", "serving-config", "--serving-dir", str(tmp_path / "none"))
    assert refused.returncode == 2 and "no such folder" in refused.stderr


def test_the_gateway_routes_marked_requests_to_the_canary_label():
    with open(os.path.join(REPO, "kubeflow", "serving", "canary", "virtualservice.yaml"), encoding="utf-8") as f:
        service = yaml.safe_load(f)
    with open(os.path.join(REPO, "kubeflow", "serving", "service.yaml"), encoding="utf-8") as f:
        host = yaml.safe_load(f)["metadata"]["name"]
    routes = {r["name"]: r for r in service["spec"]["http"]}
    assert service["spec"]["hosts"] == [host]
    assert routes["canary"]["match"][0]["headers"]["x-model-track"]["exact"] == "canary"
    assert routes["canary"]["rewrite"]["uri"] == "/v1/models/taxi/labels/canary:predict"
    assert routes["stable"]["rewrite"]["uri"] == "/v1/models/taxi/labels/stable:predict"
    assert list(routes) == ["canary", "stable", "other"]  # first match wins: marked requests before the rest
    for route in routes.values():
        assert route["route"][0]["destination"] == {"host": host, "port": {"number": 8501}}
