"""The test helpers that other tests' verdicts rest on."""

from tests import helpers


def test_a_snapshot_of_the_serving_folder_changes_with_an_empty_version_folder(tmp_path):
    (tmp_path / "taxi" / "1700000000" / "variables").mkdir(parents=True)
    (tmp_path / "taxi" / "1700000000" / "saved_model.pb").write_bytes(b"graph")
    before = helpers.tree_snapshot(str(tmp_path))
    assert helpers.tree_snapshot(str(tmp_path)) == before
    (tmp_path / "taxi" / "1700000001").mkdir()  # what TF Serving would try to load, and fail on
    assert helpers.tree_snapshot(str(tmp_path)) != before
