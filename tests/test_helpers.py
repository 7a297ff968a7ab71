"""The test helpers that other tests' verdicts rest on."""

import pytest

from tests import helpers


def test_a_snapshot_of_the_serving_folder_changes_with_an_empty_version_folder(tmp_path):
    (tmp_path / "taxi" / "1700000000" / "variables").mkdir(parents=True)
    (tmp_path / "taxi" / "1700000000" / "saved_model.pb").write_bytes(b"graph")
    before = helpers.tree_snapshot(str(tmp_path))
    assert helpers.tree_snapshot(str(tmp_path)) == before
    (tmp_path / "taxi" / "1700000001").mkdir()  # what TF Serving would try to load, and fail on
    assert helpers.tree_snapshot(str(tmp_path)) != before


def test_the_test_servers_turn_off_a_job_runner_mlflow_still_has():
    from mlflow import environment_variables

    name, value = helpers.NO_JOBS
    assert environment_variables.MLFLOW_SERVER_ENABLE_JOB_EXECUTION.name == name
    assert environment_variables.MLFLOW_SERVER_ENABLE_JOB_EXECUTION.default is True  # on unless turned off


@pytest.mark.integration
def test_an_mlflow_server_starts_without_its_job_runner(mlflow_server):
    with open(f"{mlflow_server.folder}/server.log", encoding="utf-8") as f:
        log = f.read()
    assert "Uvicorn running on" in log and "Job executor backend" not in log
    assert mlflow_server.request("GET", "/health", timeout=10).text.strip() == "OK"


@pytest.mark.image
def test_the_image_store_loses_what_a_rebuild_left_and_keeps_what_a_tag_leads_to(tmp_path):
    """tests/image.py's remove_leftovers, on a store of its own (a subprocess, no build running there): an image a
    rebuild untagged and a stopped build's working container go; the tagged image stays."""
    import os
    import subprocess
    import sys

    script = """
import json
from tests import image
def commit(content):
    container = image._buildah("from", "scratch").stdout.decode().strip()
    mount = image._buildah("mount", container).stdout.decode().strip()
    open(mount + "/file", "w").write(content)
    image._buildah("commit", container, "localhost/tfxflow-leftover:t")
    image._buildah("rm", container)
    found = image._buildah("images", "--quiet", "--no-trunc", "localhost/tfxflow-leftover:t").stdout.decode()
    return found.strip().removeprefix("sha256:")
old, new = commit("one"), commit("two")
image._buildah("from", "--name", "stopped-build", "localhost/tfxflow-leftover:t")
removed = image.remove_leftovers()
left = image._buildah("containers", "--quiet").stdout.decode().split()
print(json.dumps({"old": old, "new": new, "removed": removed, "left": left,
                  "tagged": image.image_exists("localhost/tfxflow-leftover:t")}))
"""
    env = {**os.environ, "TFXFLOW_IMAGE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["old"] != found["new"] and found["tagged"] and found["left"] == []
    assert found["old"] in found["removed"] and found["new"] not in found["removed"]
