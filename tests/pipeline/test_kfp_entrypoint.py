"""The Kubeflow container entry point runs a compiled step from the executor input open-source KFP passes."""

import json
import os
import subprocess
import sys

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.kfp_entrypoint import restore_artifact_types, rewrite_argv

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def _import_schema_step(spec: dict, out: str, launcher_type: dict):
    """ImportSchemaGen's command line with an executor input shaped like open-source KFP's launcher's."""
    container = spec["deploymentSpec"]["executors"][spec["components"]["ImportSchemaGen"]["executorLabel"]]["container"]
    schema_file = spec["root"]["dag"]["tasks"]["ImportSchemaGen"]["inputs"]["parameters"]["schema_file"]
    executor_input = {
        "inputs": {"parameterValues": {"schema_file": schema_file["runtimeValue"]["constant"]}},
        "outputs": {"artifacts": {"schema": {"artifacts": [{
            "name": "run-1/ImportSchemaGen/schema", "type": launcher_type, "uri": f"{out}/schema"}]}},
            "outputFile": f"{out}/executor_output.json"}}
    args = [json.dumps(executor_input) if a == "{{$}}" else a for a in container["args"]]
    return container["command"], args


@pytest.mark.e2e
@pytest.mark.parametrize("launcher_type", [{"schemaTitle": "system.Artifact"}, {}], ids=["system-type", "no-type"])
def test_step_runs_where_tfx_entrypoint_fails(compiled, tmp_path, launcher_type):
    result, spec, _, _ = compiled
    command, args = _import_schema_step(spec, str(tmp_path / "ours"), launcher_type)
    assert command[:2] == ["python", "-m"]
    done = subprocess.run([sys.executable, "-m", command[2], *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    schema = schema_pb2.Schema()
    with open(tmp_path / "ours" / "schema" / "schema.pbtxt", encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    assert "trip_miles" in {feature.name for feature in schema.feature}
    with open(tmp_path / "ours" / "executor_output.json", encoding="utf-8") as f:
        output = json.load(f)
    assert output["artifacts"]["schema"]["artifacts"][0]["uri"] == str(tmp_path / "ours" / "schema")

    # TFX's own entry point fails on the same input (tensorflow/tfx#7768): what the wrapper is for.
    _, args = _import_schema_step(spec, str(tmp_path / "tfx"), launcher_type)
    assert args[0] == "--tfxflow_artifact_types"
    plain = args[2:]  # the same arguments without the types flag
    failed = subprocess.run([sys.executable, "-m", TFX_ENTRYPOINT, *plain], capture_output=True, text=True,
                            timeout=300)
    assert failed.returncode != 0
    assert ("Could not import system.Artifact" in failed.stderr or "UnboundLocalError" in failed.stderr), \
        failed.stderr[-2000:]
    assert not os.path.exists(tmp_path / "tfx" / "schema" / "schema.pbtxt")


def test_restore_keeps_known_types_and_fixes_missing_ones():
    executor_input = {
        "inputs": {"artifacts": {
            "statistics": {"artifacts": [{"type": {"schemaTitle": "system.Artifact"}, "uri": "s"}]},
            "schema": {"artifacts": [{"type": {"instanceSchema": "title: tfx.Schema\ntype: object\n"}, "uri": "x"}]}}},
        "outputs": {"artifacts": {"anomalies": {"artifacts": [{"uri": "a"}]}}}}
    titles = {"statistics": "tfx.ExampleStatistics", "schema": "tfx.Schema", "anomalies": "tfx.ExampleAnomalies"}
    assert sorted(restore_artifact_types(executor_input, titles)) == ["anomalies", "statistics"]
    statistics = executor_input["inputs"]["artifacts"]["statistics"]["artifacts"][0]["type"]
    assert statistics == {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}
    assert executor_input["inputs"]["artifacts"]["schema"]["artifacts"][0]["type"]["instanceSchema"].startswith(
        "title: tfx.Schema")
    anomalies = executor_input["outputs"]["artifacts"]["anomalies"]["artifacts"][0]["type"]
    assert anomalies["instanceSchema"].startswith("title: tfx.ExampleAnomalies")


def test_rewrite_argv_drops_the_flag_and_leaves_beam_args():
    argv = ["prog", "--tfxflow_artifact_types", json.dumps({"schema": "tfx.Schema"}), "--executor_class_path", "m.E",
            "--json_serialized_invocation_args",
            json.dumps({"outputs": {"artifacts": {"schema": {"artifacts": [{"uri": "u"}]}}}}),
            "--direct_running_mode=multi_processing"]
    out = rewrite_argv(argv)
    assert "--tfxflow_artifact_types" not in out
    assert out[-1] == "--direct_running_mode=multi_processing" and out[1:3] == ["--executor_class_path", "m.E"]
    fixed = json.loads(out[4])
    assert fixed["outputs"]["artifacts"]["schema"]["artifacts"][0]["type"]["instanceSchema"].startswith(
        "title: tfx.Schema")
