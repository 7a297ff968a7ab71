"""The atomic Pusher: a version folder appears complete or not at all; old versions are pruned."""

import os
import resource
import signal
import subprocess
import sys

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


def _push_in_subprocess(model, base, version, file_size_limit, ignore_sigxfsz):
    """Runs push_atomically in a new process whose files cannot grow past `file_size_limit` bytes: the kernel
    kills it with SIGXFSZ mid-copy (a crash), or with SIGXFSZ ignored, fails the write (a full disk)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, resource.RLIM_INFINITY))

    # Python ignores SIGXFSZ at start-up; the default action kills the process at the write past the limit.
    code = ("import signal, sys; from components import pusher\n"
            + ("" if ignore_sigxfsz else "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n") +
            "try:\n    pusher.push_atomically(sys.argv[1], sys.argv[2], int(sys.argv[3]))\n"
            "except Exception as err:\n    print(err); sys.exit(7)")
    return subprocess.run([sys.executable, "-c", code, model, base, str(version)], preexec_fn=limit,
                          capture_output=True, text=True, timeout=300, check=False)


def _big_variables(model, size):
    with open(os.path.join(model, "variables", "variables.data-00000-of-00001"), "wb") as f:
        f.write(os.urandom(size))


def test_process_killed_mid_copy_leaves_no_version(tmp_path):
    model = _saved_model(tmp_path / "model")
    _big_variables(model, 1 << 20)
    base = str(tmp_path / "serving" / "taxi")
    pusher.push_atomically(model, base, 1_800_000_000)
    before = sorted(os.listdir(os.path.join(base, "1800000000", "variables")))

    killed = _push_in_subprocess(model, base, 1_800_000_001, 64 << 10, ignore_sigxfsz=False)
    assert killed.returncode == -signal.SIGXFSZ, killed.stderr[-2000:]
    # The dead push left only a hidden folder, which TF Serving does not load; the served version is whole.
    assert pusher.versions(base) == [1_800_000_000]
    partial = [n for n in os.listdir(base) if n.startswith(pusher.INCOMING_PREFIX)]
    assert len(partial) == 1
    assert os.path.getsize(os.path.join(base, partial[0], "variables", "variables.data-00000-of-00001")) == 64 << 10
    assert sorted(os.listdir(os.path.join(base, "1800000000", "variables"))) == before

    pusher.push_atomically(model, base, 1_800_000_002)
    removed = pusher.prune(base, keep=5, now=os.stat(os.path.join(base, partial[0])).st_mtime
                           + pusher.STALE_INCOMING_S + 1)
    assert [os.path.basename(p) for p in removed] == partial
    assert sorted(os.listdir(base)) == ["1800000000", "1800000002"]


def test_full_disk_mid_copy_leaves_nothing_behind(tmp_path):
    model = _saved_model(tmp_path / "model")
    _big_variables(model, 1 << 20)
    base = str(tmp_path / "serving" / "taxi")
    os.makedirs(base)
    failed = _push_in_subprocess(model, base, 1_800_000_000, 64 << 10, ignore_sigxfsz=True)
    assert failed.returncode == 7, failed.stderr[-2000:]
    assert "File too large" in failed.stdout
    assert os.listdir(base) == []  # no version, and the partial copy was removed


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


def _statistics_dir(folder):
    for split in ("train", "eval"):
        os.makedirs(os.path.join(folder, f"Split-{split}"))
        with open(os.path.join(folder, f"Split-{split}", "FeatureStats.pb"), "wb") as f:
            f.write(f"stats of {split}".encode())
    return str(folder)


def test_each_version_carries_its_training_data_statistics(tmp_path):
    model = _saved_model(tmp_path / "model")
    base = str(tmp_path / "serving" / "taxi")
    pushed = pusher.push_atomically(model, base, 7, statistics_uri=_statistics_dir(tmp_path / "stats"))
    with open(os.path.join(pushed, pusher.STATISTICS_DIR, "Split-train", "FeatureStats.pb"), "rb") as f:
        assert f.read() == b"stats of train"
    assert pusher.served_versions(base) == [7]


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    from components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    yield s3_server
    object_store.clear_client_cache()


def test_push_to_an_object_store_uploads_the_graph_last_and_prunes(s3_env, tmp_path):
    """No rename on an object store: saved_model.pb goes last, so TF Serving never sees a version it could load
    before its variables are there; a version a dead push left without it is pruned."""
    from components import object_store

    bucket = s3_env.create_bucket("serving-push")
    base = f"minio://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    object_store.write_bytes(f"{base}/5/variables/variables.index", b"a dead push")  # no saved_model.pb
    pushed = pusher.push_atomically(model, base, 6, statistics_uri=_statistics_dir(tmp_path / "stats"))
    assert pushed == f"{base}/6"
    assert object_store.read_bytes(f"{pushed}/saved_model.pb") == b"graph"
    assert object_store.read_bytes(f"{pushed}/{pusher.STATISTICS_DIR}/Split-eval/FeatureStats.pb") == b"stats of eval"
    assert pusher.versions(base) == [5, 6] and pusher.served_versions(base) == [6]
    client = s3_env.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="models/taxi/6/")["Contents"]]
    assert keys and not [k for k in keys if k.endswith("/")]

    # A dead push's version goes once it is old; a younger incomplete one may be another run's upload.
    object_store.write_bytes(f"{base}/{6 + pusher.STALE_INCOMING_S}/variables/variables.index", b"uploading")
    removed = pusher.prune(base, keep=5, now=6 + pusher.STALE_INCOMING_S)
    assert removed == [f"{base}/5"]
    assert pusher.versions(base) == [6, 6 + pusher.STALE_INCOMING_S]


def test_first_push_to_an_empty_object_store(s3_env, tmp_path):
    from tfx.types import standard_artifacts

    from components import baseline

    bucket = s3_env.create_bucket("serving-first")
    base = f"s3://{bucket}/models/taxi"
    assert pusher.versions(base) == [] and pusher.served_versions(base) == []
    assert pusher.next_version(base, 1_800_000_000) == 1_800_000_000
    model, statistics = standard_artifacts.Model(), standard_artifacts.ExampleStatistics()
    model.uri, statistics.uri = str(tmp_path / "model"), str(tmp_path / "statistics")
    baseline.ServedBaseline.test_call(model_base=base, model=model, statistics=statistics)
    assert baseline.served_info(model.uri) == {"model_base": base, "version": None, "statistics": False}


def test_two_pushes_in_the_same_second_get_their_own_versions_on_an_object_store(s3_env, tmp_path):
    """No rename-unless-exists on an object store: each push claims its version with a conditional write
    (S3 If-None-Match), so a second push started in the same second takes the next version, not the same
    folder; pruning drops the claims of pruned versions."""
    from components import object_store

    bucket = s3_env.create_bucket("serving-race")
    base = f"minio://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    first = pusher.push_atomically(model, base, 1_800_000_000)
    second = pusher.push_atomically(model, base, 1_800_000_000)  # the same `now` as the first
    assert (first, second) == (f"{base}/1800000000", f"{base}/1800000001")
    assert pusher.served_versions(base) == [1_800_000_000, 1_800_000_001]
    pusher.push_atomically(model, base, 1_800_000_002)
    pusher.prune(base, keep=2, now=1_800_000_002)
    assert pusher.versions(base) == [1_800_000_001, 1_800_000_002]
    assert object_store.list_names(f"{base}/{pusher.CLAIMS_DIR}") == ["1800000001", "1800000002"]


def test_create_is_exclusive_locally_and_on_an_object_store(s3_env, tmp_path):
    from components import object_store

    bucket = s3_env.create_bucket("create-once")
    for uri in (f"s3://{bucket}/claims/7", str(tmp_path / "claims" / "7")):
        assert object_store.create(uri, b"first") is True
        assert object_store.create(uri, b"second") is False
        assert object_store.read_bytes(uri) == b"first"
