"""The atomic Pusher: a version folder appears complete or not at all; old versions are pruned."""

import os
import resource
import signal
import subprocess
import sys

import pytest

from tfxflow.components import serving_dir
from tfxflow.components.serving import pusher


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
    code = (
        "import signal, sys; from tfxflow.components.serving import pusher\n"
        + ("" if ignore_sigxfsz else "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n")
        + "try:\n    pusher.push_atomically(sys.argv[1], sys.argv[2], int(sys.argv[3]))\n"
        "except Exception as err:\n    print(err); sys.exit(7)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, model, base, str(version)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _big_variables(model, size):
    with open(os.path.join(model, "variables", "variables.data-00000-of-00001"), "wb") as f:
        f.write(os.urandom(size))


@pytest.mark.integration
def test_process_killed_mid_copy_leaves_no_version(tmp_path):
    model = _saved_model(tmp_path / "model")
    _big_variables(model, 1 << 20)
    base = str(tmp_path / "serving" / "taxi")
    pusher.push_atomically(model, base, 1_800_000_000)
    before = sorted(os.listdir(os.path.join(base, "1800000000", "variables")))

    killed = _push_in_subprocess(model, base, 1_800_000_001, 64 << 10, ignore_sigxfsz=False)
    assert killed.returncode == -signal.SIGXFSZ, killed.stderr[-2000:]
    # The dead push left only a hidden folder, which TF Serving does not load; the served version is whole.
    assert serving_dir.versions(base) == [1_800_000_000]
    partial = [n for n in os.listdir(base) if n.startswith(pusher.INCOMING_PREFIX)]
    assert len(partial) == 1
    assert os.path.getsize(os.path.join(base, partial[0], "variables", "variables.data-00000-of-00001")) == 64 << 10
    assert sorted(os.listdir(os.path.join(base, "1800000000", "variables"))) == before

    pusher.push_atomically(model, base, 1_800_000_002)
    removed = pusher.prune(
        base, keep=5, now=os.stat(os.path.join(base, partial[0])).st_mtime + pusher.STALE_INCOMING_S + 1
    )
    assert [os.path.basename(p) for p in removed] == partial
    assert sorted(os.listdir(base)) == ["1800000000", "1800000002"]


@pytest.mark.integration
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
    assert serving_dir.versions(str(base)) == [3, 4]
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
    with open(os.path.join(pushed, serving_dir.STATISTICS_DIR, "Split-train", "FeatureStats.pb"), "rb") as f:
        assert f.read() == b"stats of train"
    assert serving_dir.served_versions(base) == [7]


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    from tfxflow.components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    yield s3_server
    object_store.clear_client_cache()


def test_push_to_an_object_store_uploads_the_graph_last_and_prunes(s3_env, tmp_path):
    """No rename on an object store: saved_model.pb goes last, so TF Serving never sees a version it could load
    before its variables are there; a version a dead push left without it is pruned."""
    from tfxflow.components import object_store

    bucket = s3_env.create_bucket("serving-push")
    base = f"minio://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    object_store.write_bytes(f"{base}/5/variables/variables.index", b"a dead push")  # no saved_model.pb
    pushed = pusher.push_atomically(model, base, 6, statistics_uri=_statistics_dir(tmp_path / "stats"))
    assert pushed == f"{base}/6"
    assert object_store.read_bytes(f"{pushed}/saved_model.pb") == b"graph"
    assert (
        object_store.read_bytes(f"{pushed}/{serving_dir.STATISTICS_DIR}/Split-eval/FeatureStats.pb") == b"stats of eval"
    )
    assert serving_dir.versions(base) == [5, 6] and serving_dir.served_versions(base) == [6]
    client = s3_env.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="models/taxi/6/")["Contents"]]
    assert keys and not [k for k in keys if k.endswith("/")]

    # A dead push's version goes once it is old; a younger incomplete one may be another run's upload.
    object_store.write_bytes(f"{base}/{6 + pusher.STALE_INCOMING_S}/variables/variables.index", b"uploading")
    removed = pusher.prune(base, keep=5, now=6 + pusher.STALE_INCOMING_S)
    assert removed == [f"{base}/5"]
    assert serving_dir.versions(base) == [6, 6 + pusher.STALE_INCOMING_S]


def test_a_push_to_an_object_store_that_fails_after_its_first_upload_serves_nothing(s3_env, tmp_path, monkeypatch):
    """The graph is the last upload: when the upload after the first one fails (a dropped connection), no version
    TF Serving could load exists. Uploaded first, the graph would sit beside missing variables."""
    from tfxflow.components import object_store

    bucket = s3_env.create_bucket("serving-cut")
    base = f"s3://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    upload, targets = object_store.upload, []

    def cut_after_the_first(source, target):
        targets.append(target)
        if len(targets) == 2:
            raise ConnectionResetError("the connection was reset during the upload")
        return upload(source, target)

    monkeypatch.setattr(object_store, "upload", cut_after_the_first)
    with pytest.raises(ConnectionResetError):
        pusher.push_atomically(model, base, 7)
    assert targets == [f"{base}/7", f"{base}/7/saved_model.pb"]
    assert serving_dir.served_versions(base) == []


def test_keep_versions_below_two_keeps_two(tmp_path):
    """TF Serving keeps serving the previous version while it loads a new one: the Pusher never prunes below 2,
    whatever its configuration says (the CLI refuses --keep-versions 1 before any work)."""
    model = _saved_model(tmp_path / "model")
    base = str(tmp_path / "serving" / "taxi")
    for i in range(3):
        pushed = _run_pusher(tmp_path, f"push{i}", model, base, keep_versions=1)
        assert pushed.get_int_custom_property("pushed") == 1
    assert len(serving_dir.versions(base)) == 2
    from tfxflow.pipeline import config as config_lib

    with pytest.raises(config_lib.ConfigError, match="--keep-versions must be >= 2"):
        config_lib.build_run_config(environ={}, home=str(tmp_path / "home"), keep_versions=1)


def test_first_push_to_an_empty_object_store(s3_env, tmp_path):
    from tfx.types import standard_artifacts

    from tfxflow.components.validation import baseline

    bucket = s3_env.create_bucket("serving-first")
    base = f"s3://{bucket}/models/taxi"
    assert serving_dir.versions(base) == [] and serving_dir.served_versions(base) == []
    assert pusher.next_version(base, 1_800_000_000) == 1_800_000_000
    model, statistics = standard_artifacts.Model(), standard_artifacts.ExampleStatistics()
    model.uri, statistics.uri = str(tmp_path / "model"), str(tmp_path / "statistics")
    baseline.ServedBaseline.test_call(model_base=base, model=model, statistics=statistics)
    assert baseline.served_info(model.uri) == {"model_base": base, "version": None, "statistics": False}


def test_two_pushes_in_the_same_second_get_their_own_versions_on_an_object_store(s3_env, tmp_path):
    """No rename-unless-exists on an object store: each push claims its version with a conditional write
    (S3 If-None-Match), so a second push started in the same second takes the next version, not the same
    folder; pruning drops the claims of pruned versions."""
    from tfxflow.components import object_store

    bucket = s3_env.create_bucket("serving-race")
    base = f"minio://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    first = pusher.push_atomically(model, base, 1_800_000_000)
    second = pusher.push_atomically(model, base, 1_800_000_000)  # the same `now` as the first
    assert (first, second) == (f"{base}/1800000000", f"{base}/1800000001")
    assert serving_dir.served_versions(base) == [1_800_000_000, 1_800_000_001]
    pusher.push_atomically(model, base, 1_800_000_002)
    pusher.prune(base, keep=2, now=1_800_000_002)
    assert serving_dir.versions(base) == [1_800_000_001, 1_800_000_002]
    assert object_store.list_names(f"{base}/{pusher.CLAIMS_DIR}") == ["1800000001", "1800000002"]


def test_create_is_exclusive_locally_and_on_an_object_store(s3_env, tmp_path):
    from tfxflow.components import object_store

    bucket = s3_env.create_bucket("create-once")
    for uri in (f"s3://{bucket}/claims/7", str(tmp_path / "claims" / "7")):
        assert object_store.create(uri, b"first") is True
        assert object_store.create(uri, b"second") is False
        assert object_store.read_bytes(uri) == b"first"


def _run_pusher(tmp_path, name, model_dir, base, blessing_properties=None, keep_versions=5):
    """Runs the Pusher's executor as TFX does: a Model whose Format-Serving/ is `model_dir`, a blessing, and
    the push destination; returns the PushedModel artifact."""
    import shutil

    from tfx.proto import pusher_pb2
    from tfx.types import standard_artifacts
    from tfx.utils import json_utils, proto_utils

    model = standard_artifacts.Model()
    model.uri = str(tmp_path / name / "model")
    shutil.copytree(model_dir, os.path.join(model.uri, "Format-Serving"))
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / name / "blessing")
    for key, value in (blessing_properties or {"blessed": 1}).items():
        if isinstance(value, int):
            blessing.set_int_custom_property(key, value)
        else:
            blessing.set_string_custom_property(key, value)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / name / "pushed")
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=base))
    pusher.Executor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed]},
        {
            "push_destination": proto_utils.proto_to_json(destination),
            "custom_config": json_utils.dumps({"keep_versions": keep_versions}),
        },
    )
    return pushed


def _entry(fingerprint, rolled_back_version, to_version, new_version):
    return {
        "rolled_back_version": rolled_back_version,
        "fingerprint": fingerprint,
        "versions": [rolled_back_version],
        "to_version": to_version,
        "new_version": new_version,
        "by": "ann@host",
        "at": "2026-11-30T12:00:00+00:00",
        "at_epoch": 1_796_040_000.0,
        "reason": "tips wrong at night",
    }


def test_the_pusher_refuses_a_rolled_back_model_and_says_why(tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    bad = _saved_model(tmp_path / "bad")
    first = _run_pusher(tmp_path, "first", bad, base)
    assert first.get_int_custom_property("pushed") == 1
    fingerprint = pusher.model_fingerprint(bad)
    assert first.get_string_custom_property(pusher.MODEL_FINGERPRINT) == fingerprint
    [version] = serving_dir.versions(base)
    serving_dir.write_rollbacks(base, [_entry(fingerprint, version, version - 10, version + 1)])

    # A cached Trainer (or an identical retrain) hands on the same model, blessed again: it is not pushed.
    again = _run_pusher(tmp_path, "again", bad, base)
    assert again.get_int_custom_property("pushed") == 0
    assert again.get_string_custom_property(pusher.NOT_PUSHED_REASON) == (
        f"this model is the one rolled back from version {version} on 2026-11-30T12:00:00+00:00 by ann@host: "
        "tips wrong at night; train a new model (new data or settings) to push again"
    )
    assert again.get_string_custom_property(pusher.MODEL_FINGERPRINT) == fingerprint
    assert serving_dir.versions(base) == [version]

    # A blessing `tfxflow rollback` revoked (a cached Evaluator hands it on) says the same.
    revoked = _run_pusher(
        tmp_path,
        "revoked",
        bad,
        base,
        {"blessed": 0, pusher.ROLLED_BACK: f"rolled back from version {version} on T by ann@host: tips wrong"},
    )
    assert revoked.get_int_custom_property("pushed") == 0
    assert revoked.get_string_custom_property(pusher.NOT_PUSHED_REASON) == (
        f"this model is the one rolled back from version {version} on T by ann@host: tips wrong; train a new "
        "model (new data or settings) to push again"
    )
    # A model that was simply not blessed has no such reason.
    plain = _run_pusher(tmp_path, "plain", bad, base, {"blessed": 0})
    assert plain.get_int_custom_property("pushed") == 0 and not plain.has_custom_property(pusher.NOT_PUSHED_REASON)


def test_a_push_after_a_rollback_says_what_it_replaces(tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    for version, content in ((1_800_000_000, b"good"), (1_800_000_010, b"bad"), (1_800_000_020, b"good")):
        model = _saved_model(tmp_path / f"m{version}")
        with open(os.path.join(model, "variables", "variables.index"), "wb") as f:
            f.write(content)
        pusher.push_atomically(model, base, version)
    bad = pusher.model_fingerprint(os.path.join(base, "1800000010"))
    serving_dir.write_rollbacks(base, [_entry(bad, 1_800_000_010, 1_800_000_000, 1_800_000_020)])

    new = _saved_model(tmp_path / "new")
    with open(os.path.join(new, "variables", "variables.index"), "wb") as f:
        f.write(b"new")
    pushed = _run_pusher(tmp_path, "new", new, base)
    assert pushed.get_int_custom_property("pushed") == 1
    assert pushed.get_string_custom_property(pusher.AFTER_ROLLBACK) == (
        "version 1800000010 had been rolled back to version 1800000000 (served as version 1800000020) on "
        "2026-11-30T12:00:00+00:00 by ann@host: tips wrong at night; this model was blessed and replaces it"
    )
    # The next push replaces a pushed model, not the rollback's copy.
    later = _run_pusher(tmp_path, "later", _saved_model(tmp_path / "later"), base)
    assert later.get_int_custom_property("pushed") == 1 and not later.has_custom_property(pusher.AFTER_ROLLBACK)


def test_a_rollback_log_that_does_not_parse_stops_the_push(tmp_path):
    base = tmp_path / "serving" / "taxi"
    base.mkdir(parents=True)
    (base / serving_dir.ROLLBACK_LOG).write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="the rollback log .* does not parse"):
        _run_pusher(tmp_path, "model", _saved_model(tmp_path / "model"), str(base))
    assert serving_dir.versions(str(base)) == []


def test_the_fingerprint_of_a_version_on_an_object_store(s3_env, tmp_path):
    bucket = s3_env.create_bucket("serving-fingerprint")
    base = f"s3://{bucket}/models/taxi"
    model = _saved_model(tmp_path / "model")
    pushed = pusher.push_atomically(model, base, 7, statistics_uri=_statistics_dir(tmp_path / "stats"))
    assert pusher.model_fingerprint(pushed) == pusher.model_fingerprint(model)
    serving_dir.write_rollbacks(base, [_entry(pusher.model_fingerprint(model), 7, 6, 8)])
    assert serving_dir.read_rollbacks(base)[0]["fingerprint"] == pusher.model_fingerprint(model)
