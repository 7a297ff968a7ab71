"""The Trainer's executor on several workers: a worker that is not the chief trains into copies of the outputs
that point to a temporary folder, removed after; the custom_config's cluster section read as one worker without it."""

import json
import os

from tfx.types import standard_artifacts

from tfxflow.components.training import cluster, executor


def test_a_non_chief_workers_outputs_are_temporary_copies(tmp_path):
    model, run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, run.uri = str(tmp_path / "model" / "7"), str(tmp_path / "model_run" / "7")
    outputs = {"model": [model], "model_run": [run]}
    with executor.scratch_outputs(outputs) as scratch:
        copies = [scratch["model"][0], scratch["model_run"][0]]
        folder = os.path.dirname(copies[0].uri)
        assert [os.path.basename(c.uri) for c in copies] == ["model-0", "model_run-0"]
        assert os.path.dirname(copies[1].uri) == folder and os.path.isdir(folder)
        assert [type(c) for c in copies] == [standard_artifacts.Model, standard_artifacts.ModelRun]
        os.makedirs(copies[0].uri)  # what the run_fn writes
    assert not os.path.exists(folder)
    assert (model.uri, run.uri) == (str(tmp_path / "model" / "7"), str(tmp_path / "model_run" / "7"))


def test_the_cluster_settings_come_from_the_custom_config():
    custom = {"features": {}, "cluster": {"workers": 2, "collective": "ring", "join_timeout_s": 30}}
    assert executor.cluster_config({"custom_config": json.dumps(custom)}) == cluster.ClusterConfig(2, "ring", 30)
    assert executor.cluster_config({"custom_config": json.dumps({"features": {}})}).workers == 1
    assert executor.cluster_config({}).workers == 1
