"""The atomic Pusher: a version folder appears complete or not at all; old versions are pruned."""

import os

import pytest

from components import pusher


def _saved_model(folder):
    os.makedirs(os.path.join(folder, "variables"))
    with open(os.path.join(folder, "saved_model.pb"), "wb") as f:
        f.write(b"graph")
    with open(os.path.join(folder, "variables", "variables.index"), "wb") as f:
        f.write(b"index")
    return str(folder)


def test_push_is_complete_and_versions_increase(tmp_path):
    model = _saved_model(tmp_path / "model")
    base = str(tmp_path / "serving" / "taxi")
    first = pusher.push_atomically(model, base, pusher.next_version(base, 1_800_000_000))
    assert sorted(os.listdir(first)) == ["saved_model.pb", "variables"]
    # A clock behind the newest version still gives a newer one.
    assert pusher.next_version(base, 1_700_000_000) == 1_800_000_001
    assert [n for n in os.listdir(base)] == ["1800000000"]


def test_crash_mid_copy_leaves_no_version(tmp_path, monkeypatch):
    model = _saved_model(tmp_path / "model")
    base = str(tmp_path / "serving" / "taxi")
    real_copy = pusher.io_utils.copy_dir

    def dies_half_way(src, dst, *args, **kwargs):
        os.makedirs(os.path.join(dst, "variables"))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pusher.io_utils, "copy_dir", dies_half_way)
    with pytest.raises(OSError, match="No space left"):
        pusher.push_atomically(model, base, 1_800_000_000)
    assert pusher.versions(base) == []  # only a hidden .incoming-* folder, which TF Serving ignores
    monkeypatch.setattr(pusher.io_utils, "copy_dir", real_copy)
    pusher.push_atomically(model, base, 1_800_000_001)
    assert pusher.versions(base) == [1_800_000_001]


def test_model_without_variables_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"graph")
    base = str(tmp_path / "serving" / "taxi")
    with pytest.raises(RuntimeError, match="no variables; nothing was pushed"):
        pusher.push_atomically(str(model), base, 1_800_000_000)
    assert os.listdir(base) == []


def test_prune_keeps_the_newest_and_removes_dead_incoming(tmp_path):
    base = tmp_path / "serving" / "taxi"
    for version in (1, 2, 3, 4):
        (base / str(version)).mkdir(parents=True)
    dead = base / ".incoming-5-deadbeef"
    dead.mkdir()
    os.utime(dead, (1_000, 1_000))
    live = base / ".incoming-6-cafebabe"
    live.mkdir()
    removed = pusher.prune(str(base), keep=2, now=1_000 + pusher.STALE_INCOMING_S + 1)
    assert pusher.versions(str(base)) == [3, 4]
    assert sorted(os.path.basename(p) for p in removed) == [".incoming-5-deadbeef", "1", "2"]
    assert live.exists()
