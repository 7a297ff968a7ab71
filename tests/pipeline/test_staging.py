"""The run fingerprint: an identical re-run is recognised, and any change to data, schema or settings is not."""

import dataclasses
import os
import shutil

from tests import helpers
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline import inputs
from tfxflow.pipeline.staging import record_last_run, run_fingerprint, up_to_date


def _config(tmp_path, **overrides):
    return config_lib.build_run_config(
        environ={}, home=str(tmp_path / "home"), data_root=str(tmp_path / "data"), tracking_mode="off", **overrides
    )


def test_fingerprint_follows_data_schema_and_settings(tmp_path):
    helpers.write_taxi_sample(str(tmp_path / "data"), rows=50)
    schema = tmp_path / "schema.pbtxt"
    shutil.copyfile(os.path.join(inputs.bundled_dataset_dir("taxi"), "schema.pbtxt"), schema)
    config = _config(tmp_path, schema_path=str(schema))
    base = run_fingerprint(config)
    assert run_fingerprint(_config(tmp_path, schema_path=str(schema))) == base
    changed_knob = dataclasses.replace(config, training=dataclasses.replace(config.training, learning_rate=0.003))
    assert run_fingerprint(changed_knob) != base
    with open(tmp_path / "data" / "data.csv", "a", encoding="utf-8") as f:
        f.write(",12.45,5,19,6,1400269500,,,,,0.0,,,Cash,Taxi Affiliation Services,0,,0.0\n")
    after_data = run_fingerprint(config)
    assert after_data != base
    with open(schema, "a", encoding="utf-8") as f:
        f.write("\n# a curated comment\n")
    assert run_fingerprint(config) not in (base, after_data)


def test_up_to_date_needs_the_same_fingerprint_and_the_outputs(tmp_path):
    helpers.write_taxi_sample(str(tmp_path / "data"), rows=50)
    config = _config(tmp_path)
    os.makedirs(os.path.dirname(config.paths.metadata_path))
    fingerprint = run_fingerprint(config)
    pushed = os.path.join(config.paths.serving_dir, "taxi", "1795987755")
    assert up_to_date(config, fingerprint) is None  # no run yet
    record_last_run(config, fingerprint, {"run_id": "r1", "pushed_version": "1795987755", "pushed_destination": pushed})
    assert up_to_date(config, fingerprint) is None  # no metadata store, no pushed model
    open(config.paths.metadata_path, "w").close()
    os.makedirs(pushed)
    assert up_to_date(config, fingerprint)["run_id"] == "r1"
    assert up_to_date(config, "another") is None
    shutil.rmtree(pushed)  # the served model was removed: run again
    assert up_to_date(config, fingerprint) is None


def test_staging_names_neither_runner():
    """tracking_params reads the SharedConfig both configs extend: staging imports no compiler (no cycle)."""
    import ast

    from tfxflow.pipeline import staging

    with open(staging.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module is not None}
    assert not {m for m in imported if m.startswith(("tfxflow.pipeline.kfp", "tfxflow.pipeline.local"))}
