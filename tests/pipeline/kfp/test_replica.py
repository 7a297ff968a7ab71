"""One replica of a training job (pipeline/kfp/replica.py): its TF_CONFIG on a TrainJob node, which replica
writes, and the launcher's share of the work it does itself (inputs down, the chief's outputs up)."""

import json
import os

import pytest

from tests import helpers
from tfxflow.components import object_store
from tfxflow.pipeline.kfp import replica


def test_a_trainjob_node_builds_tf_config_from_its_index_and_jobsets_host_names():
    env = {replica.NODES_ENV: "3", replica.JOBSET_NAME_ENV: "taxi-train-1", replica.COMPLETION_INDEX_ENV: "0"}
    config = json.loads(replica.tf_config_for_node(env))
    hosts = [f"taxi-train-1-node-0-{i}.taxi-train-1:2222" for i in range(3)]
    assert config == {
        "cluster": {"chief": hosts[:1], "worker": hosts[1:]},
        "task": {"type": "chief", "index": 0},
        "environment": "cloud",
    }
    config = json.loads(replica.tf_config_for_node({**env, replica.COMPLETION_INDEX_ENV: "2"}))
    assert config["task"] == {"type": "worker", "index": 1}
    assert replica.tf_config_for_node({replica.NODES_ENV: "3"}) is None  # not a TrainJob's node
    given = {**env, "TF_CONFIG": '{"cluster": {}}'}
    replica.adopt_node_tf_config(given)
    assert given["TF_CONFIG"] == '{"cluster": {}}'  # a runtime's own TF_CONFIG wins
    replica.adopt_node_tf_config(env)
    assert json.loads(env["TF_CONFIG"])["task"]["type"] == "chief"


@pytest.mark.parametrize(
    "tf_config, chief",
    [
        (None, True),  # one replica is its own chief
        ({"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}, True),
        ({"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker", "index": 0}}, False),
        ({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}, True),  # TF's rule
    ],
)
def test_the_chief_is_tensorflows(tf_config, chief):
    assert replica.is_chief({"TF_CONFIG": json.dumps(tf_config)} if tf_config else {}) is chief


def test_the_chief_leaves_the_output_file_beside_the_steps_outputs():
    executor_input = {
        "outputs": {
            "artifacts": {
                "model": {"artifacts": [{"uri": "minio://mlpipeline/v2/artifacts/p/run/Trainer/u1/model"}]},
                "model_run": {"artifacts": [{"uri": "minio://mlpipeline/v2/artifacts/p/run/Trainer/u1/model_run"}]},
            }
        }
    }
    assert replica.job_output_uri(executor_input) == (
        "minio://mlpipeline/v2/artifacts/p/run/Trainer/u1/tfxflow-job/output_metadata.json"
    )
    with pytest.raises(ValueError, match="no output artifact in an object store"):
        replica.job_output_uri({"outputs": {"artifacts": {"model": {"artifacts": [{"uri": "/local/model"}]}}}})


@pytest.mark.integration
def test_inputs_come_down_and_only_the_outputs_go_up(tmp_path, s3_server):
    with helpers.environment(s3_server.env):
        object_store.clear_client_cache()
        s3_server.create_bucket("replica")
        root = "minio://replica/root/run"
        source = tmp_path / "examples"
        (source / "Split-train").mkdir(parents=True)
        (source / "Split-train" / "data.gz").write_bytes(b"rows")
        object_store.upload(str(source), f"{root}/Gen/u0/examples")
        local_in = str(tmp_path / "pod" / "minio" / "replica" / "root" / "run" / "Gen" / "u0" / "examples")
        local_out = str(tmp_path / "pod" / "minio" / "replica" / "root" / "run" / "Trainer" / "u1" / "model")
        remote_of = {local_in: f"{root}/Gen/u0/examples", local_out: f"{root}/Trainer/u1/model"}
        executor_input = {"inputs": {"artifacts": {"examples": {"artifacts": [{"uri": local_in}]}}}}
        assert replica.download_inputs(remote_of, executor_input) == 1
        assert open(os.path.join(local_in, "Split-train", "data.gz"), "rb").read() == b"rows"

        os.makedirs(os.path.join(local_out, "Format-Serving"))
        with open(os.path.join(local_out, "Format-Serving", "saved_model.pb"), "wb") as f:
            f.write(b"model")
        output_file = str(tmp_path / "output_metadata.json")
        with open(output_file, "w", encoding="utf-8") as f:
            json.dump({"artifacts": {"model": {"artifacts": [{"uri": f"{root}/Trainer/u1/model"}]}}}, f)
        destination = f"{root}/Trainer/u1/tfxflow-job/output_metadata.json"
        assert replica.publish_outputs(remote_of, output_file, destination) == 2
        assert object_store.read_bytes(f"{root}/Trainer/u1/model/Format-Serving/saved_model.pb") == b"model"
        assert json.loads(object_store.read_bytes(destination))["artifacts"]["model"]
        # The input was not uploaded again.
        assert object_store.list_files(f"{root}/Gen/u0/examples") == ["Split-train/data.gz"]
    object_store.clear_client_cache()
