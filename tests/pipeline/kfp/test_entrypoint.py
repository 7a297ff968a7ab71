"""The Kubeflow container entry point runs a compiled step from the executor input open-source KFP passes."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tfxflow.components import lane
from tfxflow.pipeline.kfp.entrypoint import (
    EXIT_WRONG_IMAGE,
    lane_mismatch,
    localize_artifacts,
    pop_lane,
    restore_artifact_types,
    restore_output_uris,
    rewrite_argv,
    size_beam_workers,
    stage_folders,
)

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def _import_schema_step(spec: dict, out: str, launcher_type: dict):
    """EmbeddedSchema's command line with an executor input shaped like open-source KFP's launcher's."""
    container = spec["deploymentSpec"]["executors"][spec["components"]["EmbeddedSchema"]["executorLabel"]]["container"]
    schema_text = spec["root"]["dag"]["tasks"]["EmbeddedSchema"]["inputs"]["parameters"]["schema_text"]
    executor_input = {
        "inputs": {"parameterValues": {"schema_text": schema_text["runtimeValue"]["constant"]}},
        "outputs": {
            "artifacts": {
                "schema": {
                    "artifacts": [
                        {"name": "run-1/EmbeddedSchema/schema", "type": launcher_type, "uri": f"{out}/schema"}
                    ]
                }
            },
            "outputFile": f"{out}/executor_output.json",
        },
    }
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
    assert args[0] == "--tfxflow_lane" and args[2] == "--tfxflow_artifact_types"
    plain = args[4:]  # the same arguments without the project's flags
    failed = subprocess.run([sys.executable, "-m", TFX_ENTRYPOINT, *plain], capture_output=True, text=True, timeout=300)
    assert failed.returncode != 0
    assert "Could not import system.Artifact" in failed.stderr or "UnboundLocalError" in failed.stderr, failed.stderr[
        -2000:
    ]
    assert not os.path.exists(tmp_path / "tfx" / "schema" / "schema.pbtxt")


def test_restore_keeps_known_types_and_fixes_missing_ones():
    executor_input = {
        "inputs": {
            "artifacts": {
                "statistics": {"artifacts": [{"type": {"schemaTitle": "system.Artifact"}, "uri": "s"}]},
                "schema": {
                    "artifacts": [{"type": {"instanceSchema": "title: tfx.Schema\ntype: object\n"}, "uri": "x"}]
                },
            }
        },
        "outputs": {"artifacts": {"anomalies": {"artifacts": [{"uri": "a"}]}}},
    }
    titles = {"statistics": "tfx.ExampleStatistics", "schema": "tfx.Schema", "anomalies": "tfx.ExampleAnomalies"}
    assert sorted(restore_artifact_types(executor_input, titles)) == ["anomalies", "statistics"]
    statistics = executor_input["inputs"]["artifacts"]["statistics"]["artifacts"][0]["type"]
    assert statistics == {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}
    assert executor_input["inputs"]["artifacts"]["schema"]["artifacts"][0]["type"]["instanceSchema"].startswith(
        "title: tfx.Schema"
    )
    anomalies = executor_input["outputs"]["artifacts"]["anomalies"]["artifacts"][0]["type"]
    assert anomalies["instanceSchema"].startswith("title: tfx.ExampleAnomalies")


OTHER_LANE = {lane.COMPAT: "current:1.21.0", lane.CURRENT: "compat:1.16.0"}


@pytest.mark.e2e
def test_a_step_of_a_spec_the_other_lane_compiled_stops_before_its_executor_naming_the_build_argument(
    compiled, tmp_path
):
    _, spec, _, _ = compiled
    command, args = _import_schema_step(spec, str(tmp_path), {})
    assert args[:2] == ["--tfxflow_lane", f"{lane.name()}:{lane.tfx_version()}"]
    other = OTHER_LANE[lane.name()]
    done = subprocess.run(
        [sys.executable, "-m", command[2], args[0], other, *args[2:]], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == EXIT_WRONG_IMAGE, done.stderr[-3000:]
    spec_lane = other.split(":")[0]
    assert (
        f"tfxflow: EmbeddedSchema: the spec was compiled by the {spec_lane} lane (TFX {other.split(':')[1]}) "
        f"and this image is of the {lane.name()} lane (TFX {lane.tfx_version()})"
    ) in done.stderr
    assert f"--build-arg LANE={spec_lane}" in done.stderr
    assert "Traceback" not in done.stderr and not os.path.exists(tmp_path / "schema")


def test_the_lane_flag_is_taken_off_and_a_spec_without_it_runs_anywhere():
    argv = ["prog", "--tfxflow_lane", OTHER_LANE[lane.name()], "--executor_class_path", "m.E"]
    assert pop_lane(argv) == (["prog", "--executor_class_path", "m.E"], OTHER_LANE[lane.name()])
    assert pop_lane(["prog", "--executor_class_path", "m.E"]) == (["prog", "--executor_class_path", "m.E"], "")
    assert lane_mismatch("") == "" and lane_mismatch(f"{lane.name()}:0.0.0") == ""
    assert lane_mismatch(OTHER_LANE[lane.name()]).startswith("the spec was compiled by the")


def test_rewrite_argv_drops_the_flag_and_leaves_beam_args():
    argv = [
        "prog",
        "--tfxflow_artifact_types",
        json.dumps({"schema": "tfx.Schema"}),
        "--executor_class_path",
        "m.E",
        "--json_serialized_invocation_args",
        json.dumps({"outputs": {"artifacts": {"schema": {"artifacts": [{"uri": "u"}]}}}}),
        "--direct_running_mode=multi_processing",
    ]
    out = rewrite_argv(argv)
    assert "--tfxflow_artifact_types" not in out
    assert out[-1] == "--direct_running_mode=multi_processing" and out[1:3] == ["--executor_class_path", "m.E"]
    fixed = json.loads(out[4])
    assert fixed["outputs"]["artifacts"]["schema"]["artifacts"][0]["type"]["instanceSchema"].startswith(
        "title: tfx.Schema"
    )


def test_artifacts_on_the_launchers_local_paths_and_back():
    """TFX gets the paths where KFP's launcher put the inputs and will upload the outputs from
    (LocalPathForURI); the executor output names the remote URIs again, which is what the launcher uploads to."""
    executor_input = {
        "inputs": {
            "artifacts": {
                "examples": {"artifacts": [{"uri": "minio://mlpipeline/v2/run/CsvExampleGen/examples"}]},
                "schema": {"artifacts": [{"uri": "gs://b/run/EmbeddedSchema/schema"}]},
            }
        },
        "outputs": {"artifacts": {"statistics": {"artifacts": [{"uri": "s3://b/run/StatisticsGen/statistics"}]}}},
    }
    remote_of = localize_artifacts(executor_input, "/tmp/launcher")
    assert (
        executor_input["inputs"]["artifacts"]["examples"]["artifacts"][0]["uri"]
        == "/tmp/launcher/minio/mlpipeline/v2/run/CsvExampleGen/examples"
    )
    assert (
        executor_input["inputs"]["artifacts"]["schema"]["artifacts"][0]["uri"]
        == "/tmp/launcher/gcs/b/run/EmbeddedSchema/schema"
    )
    local = "/tmp/launcher/s3/b/run/StatisticsGen/statistics"
    assert executor_input["outputs"]["artifacts"]["statistics"]["artifacts"][0]["uri"] == local
    assert remote_of[local] == "s3://b/run/StatisticsGen/statistics"
    assert localize_artifacts(executor_input, "/") == {}  # already local: nothing to map


def test_restore_output_uris(tmp_path):
    output = tmp_path / "executor_output.json"
    local = "/minio/mlpipeline/v2/run/Trainer/model"
    output.write_text(
        json.dumps(
            {
                "artifacts": {
                    "model": {"artifacts": [{"uri": local, "metadata": {"a": 1}}]},
                    "other": {"artifacts": [{"uri": "/somewhere/else"}]},
                }
            }
        )
    )
    assert restore_output_uris(str(output), {local: "minio://mlpipeline/v2/run/Trainer/model"}) == 1
    written = json.loads(output.read_text())
    assert written["artifacts"]["model"]["artifacts"][0] == {
        "uri": "minio://mlpipeline/v2/run/Trainer/model",
        "metadata": {"a": 1},
    }
    assert written["artifacts"]["other"]["artifacts"][0]["uri"] == "/somewhere/else"


def test_beam_workers_follow_the_pods_cpus():
    args = ["--executor_class_path", "x", "--direct_running_mode=multi_processing", "--direct_num_workers=0"]
    assert size_beam_workers(args, 3)[-1] == "--direct_num_workers=3"
    assert size_beam_workers(args[:-1] + ["--direct_num_workers=5"], 3)[-1] == "--direct_num_workers=5"


def test_remote_data_folder_is_staged(s3_server, monkeypatch, tmp_path):
    from tfxflow.components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    bucket = s3_server.create_bucket("staging-test")
    s3_server.client().put_object(Bucket=bucket, Key="data/day1/a.csv", Body=b"x,y\n1,2\n")
    executor_input = {
        "inputs": {
            "parameterValues": {
                "input_base": f"minio://{bucket}/data/day1",
                "serving_data_root": "",
                "other": "minio://b/k",
            }
        }
    }
    staged = stage_folders(executor_input, str(tmp_path))
    values = executor_input["inputs"]["parameterValues"]
    assert staged == {"input_base": f"minio://{bucket}/data/day1"}
    assert values["input_base"] == str(tmp_path / "input_base") and values["other"] == "minio://b/k"
    assert (tmp_path / "input_base" / "a.csv").read_bytes() == b"x,y\n1,2\n"


def test_the_launchers_own_log_output_is_left_to_it():
    argv = [
        "prog",
        "--tfxflow_artifact_types",
        json.dumps({"schema": "tfx.Schema"}),
        "--executor_class_path",
        "m.E",
        "--json_serialized_invocation_args",
        json.dumps(
            {
                "outputs": {
                    "artifacts": {
                        "schema": {"artifacts": [{"uri": "u"}]},
                        "executor-logs": {"artifacts": [{"uri": "l", "type": {"schemaTitle": "system.Artifact"}}]},
                    }
                }
            }
        ),
    ]
    fixed = json.loads(rewrite_argv(argv)[4])
    assert list(fixed["outputs"]["artifacts"]) == ["schema"]


def test_value_inputs_are_read_before_the_executor_runs(tmp_path):
    """A `str` from another step (MlflowStart's run id) arrives as a ValueArtifact file; TFX's V2 entry point
    leaves it unread and the function component fails, so the parser the entry point uses reads it."""
    from tfx.types import standard_artifacts

    from tfxflow.pipeline.kfp.entrypoint import reading_value_inputs

    (tmp_path / "run_id").write_text("abc123")
    given, made = standard_artifacts.String(), standard_artifacts.String()
    given.uri, made.uri = str(tmp_path / "run_id"), str(tmp_path / "out" / "run_id")
    parsed = reading_value_inputs(lambda raw, names: {"run_id": [given], "out": [made]})({}, {})
    assert parsed["run_id"][0].value == "abc123"
    with pytest.raises(ValueError, match="not yet been read"):
        _ = parsed["out"][0].value  # an output: no file yet, left for the step to write


def test_beam_worker_containers_are_handed_to_beams_boot(monkeypatch):
    """The step image is also the Beam workers' image: Beam's runners start it with the boot's flags."""
    from tfxflow.pipeline.kfp import entrypoint as kfp_entrypoint

    class Replaced(Exception):
        """os.execv replaces the process: nothing after it runs."""

    calls = []

    def execv(path, argv):
        calls.append((path, argv))
        raise Replaced

    monkeypatch.setattr(kfp_entrypoint.os, "execv", execv)
    monkeypatch.setattr(kfp_entrypoint.os, "access", lambda path, mode: path == kfp_entrypoint.BEAM_BOOT)
    docker = [
        "pipeline/kfp/entrypoint.py",
        "--id=1-1",
        "--logging_endpoint=localhost:39027",
        "--artifact_endpoint=localhost:33271",
        "--provision_endpoint=localhost:41443",
        "--control_endpoint=localhost:45193",
    ]
    for argv in (docker, ["pipeline/kfp/entrypoint.py", "--worker_pool"]):
        with pytest.raises(Replaced):
            kfp_entrypoint.main(argv)
    assert calls == [
        ("/opt/apache/beam/boot", ["/opt/apache/beam/boot", *docker[1:]]),
        ("/opt/apache/beam/boot", ["/opt/apache/beam/boot", "--worker_pool"]),
    ]
    assert not kfp_entrypoint.is_beam_worker(["prog", "--executor_class_path", "x", INVOCATION, "{}"])


def test_a_beam_worker_start_in_an_image_without_beams_boot_says_where_to_get_it(monkeypatch, tmp_path, capsys):
    from tfxflow.pipeline.kfp import entrypoint as kfp_entrypoint

    monkeypatch.setattr(kfp_entrypoint, "BEAM_BOOT", str(tmp_path / "boot"))  # absent, as in the current lane's image
    with pytest.raises(SystemExit) as exited:
        kfp_entrypoint.main(["pipeline/kfp/entrypoint.py", "--worker_pool"])
    assert exited.value.code == EXIT_WRONG_IMAGE
    beam = importlib.metadata.version("apache-beam")
    python = "%d.%d" % sys.version_info[:2]
    err = capsys.readouterr().err
    assert f"this image has no {tmp_path / 'boot'}: copy it from Beam's SDK image" in err
    assert f"(apache/beam_python{python}_sdk:{beam})" in err and "LOOPBACK or PROCESS" in err


INVOCATION = "--json_serialized_invocation_args"


def test_step_labels():
    from tfxflow.pipeline.kfp.entrypoint import step_label

    assert step_label(["--executor_class_path", "tfx.components.transform.executor.Executor"]) == "transform"
    assert step_label(["--executor_class_path", "tfxflow.components.training.transform.Executor"]) == "transform"
    assert step_label(["--executor_class_path", "tfxflow.components.validation.gate.DataGate_Executor"]) == "DataGate"
    assert step_label(["--executor_class_path", "tfxflow.components.ingest.csv_input.Executor"]) == "csv_input"
    assert step_label([]) == "step"


def test_only_beam_steps_with_remote_workers_keep_their_gcs_uris():
    from tfxflow.pipeline.beam_runners import BeamRunner, beam_pipeline_args
    from tfxflow.pipeline.kfp.entrypoint import remote_beam_step

    flink = beam_pipeline_args(
        BeamRunner(runner="flink", flink_master="jm:8081", image="registry.example.com/ml/tfxflow:0.1.0")
    )
    statistics = ["--executor_class_path", "tfx.components.statistics_gen.executor.Executor"]
    assert remote_beam_step(statistics + flink)
    assert not remote_beam_step(statistics + ["--direct_running_mode=multi_processing", "--direct_num_workers=0"])
    assert not remote_beam_step(statistics + beam_pipeline_args(BeamRunner(runner="portable")))
    # The Trainer and the other plain executors run in the pod, on the launcher's local copies.
    assert not remote_beam_step(["--executor_class_path", "tfx.components.trainer.executor.GenericExecutor"] + flink)


def test_remote_beam_steps_need_gcs_and_their_folder_markers_are_removed(monkeypatch):
    from tfxflow.components import object_store
    from tfxflow.pipeline.kfp.entrypoint import check_remote_uris, remove_dir_markers

    executor_input = {
        "inputs": {
            "artifacts": {"examples": {"artifacts": [{"uri": "gs://ml/root/run/CsvExampleGen/examples"}]}},
            "parameterValues": {"input_base": "gs://ml-data/taxi"},
        },
        "outputs": {"artifacts": {"statistics": {"artifacts": [{"uri": "gs://ml/root/run/StatisticsGen/statistics"}]}}},
    }
    assert check_remote_uris(executor_input) == ["gs://ml/root/run/StatisticsGen/statistics"]
    executor_input["inputs"]["parameterValues"]["input_base"] = "/data/taxi"
    with pytest.raises(ValueError, match="input_base '/data/taxi': Beam workers outside the pod read it themselves"):
        check_remote_uris(executor_input)
    executor_input["inputs"]["parameterValues"]["input_base"] = "gs://ml-data/taxi"
    executor_input["outputs"]["artifacts"]["statistics"]["artifacts"][0]["uri"] = "minio://mlpipeline/v2/s"
    with pytest.raises(ValueError, match="output artifact statistics is at 'minio://mlpipeline/v2/s'"):
        check_remote_uris(executor_input)

    class Store:
        """What TF's GCS file system leaves: objects, and a zero-byte `folder/` object per folder it made."""

        keys = [
            "root/stats/",
            "root/stats/Split-train/",
            "root/stats/Split-train/FeatureStats.pb",
            "root/stats/Split-eval/FeatureStats.pb",
        ]
        deleted = []

        def errors(self):
            import contextlib

            return contextlib.nullcontext()

        def walk(self, prefix):
            return [k for k in self.keys if k.startswith(prefix)]

        def delete_keys(self, keys):
            self.deleted += keys

    store = Store()
    monkeypatch.setattr(object_store, "backend", lambda uri: (store, object_store.split(uri)[2]))
    assert remove_dir_markers(["gs://ml/root/stats/"]) == 2
    assert store.deleted == ["root/stats/", "root/stats/Split-train/"]


def test_a_step_logs_a_heartbeat_while_its_executor_runs(monkeypatch, capsys):
    import time

    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    from tfxflow.pipeline.kfp import entrypoint as kfp_entrypoint

    monkeypatch.setattr(tfx_entrypoint, "main", lambda parsed: time.sleep(0.7))
    kfp_entrypoint._run_and_restore(None, "", {}, [], label="transform", heartbeat_s=0.2)
    beats = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tfxflow: transform ... ")]
    assert 2 <= len(beats) <= 4, beats
    assert all(" elapsed, " in b and b.endswith(" MB resident") for b in beats)
