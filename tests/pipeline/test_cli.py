"""The `tfxflow` console script: configuration errors give one clear line and exit status 2."""

import os

from tests import helpers


def test_missing_data_root_is_one_clear_line(tmp_path):
    result = helpers.run_cli("run", "--home", str(tmp_path), "--data-root", str(tmp_path / "missing"), timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --data-root {tmp_path}/missing: no such folder"
    assert not os.path.exists(tmp_path / "serving")


def test_bad_feature_config_names_the_file(tmp_path):
    features = tmp_path / "features.yaml"
    features.write_text("label: {name: y, column: tips}\nnumeric: [fare]\nbuckets: 3\n")
    result = helpers.run_cli("run", "--home", str(tmp_path), "--feature-config", str(features), timeout=300)
    assert result.returncode == 2
    assert f"error: {features}: unknown key(s) ['buckets']" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_hidden_units_flag(tmp_path):
    result = helpers.run_cli("run", "--home", str(tmp_path), "--hidden-units", "64,x", timeout=300)
    assert result.returncode == 2 and "--hidden-units must be comma-separated integers" in result.stderr
