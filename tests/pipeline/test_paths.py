"""The home folder and the paths under it."""

import os

from tfxflow.pipeline import paths as paths_lib


def test_home_comes_from_flag_then_environment_then_cwd(tmp_path, monkeypatch):
    assert paths_lib.resolve_home("/a", {paths_lib.HOME_ENV: "/b"}) == "/a"
    assert paths_lib.resolve_home(None, {paths_lib.HOME_ENV: "/b"}) == "/b"
    monkeypatch.chdir(tmp_path)
    assert paths_lib.resolve_home(None, {}) == os.path.join(str(tmp_path), paths_lib.DEFAULT_HOME)


def test_each_output_path_can_be_set_on_its_own(tmp_path):
    paths = paths_lib.Paths.under(str(tmp_path / "home"), serving_dir=str(tmp_path / "srv"))
    assert paths.serving_dir == str(tmp_path / "srv")
    assert paths.pipeline_root == str(tmp_path / "home" / "pipeline_root")
