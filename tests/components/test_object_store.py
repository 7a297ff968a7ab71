"""components/object_store.py against moto's S3 server (s3:// and minio://) and the local file system."""

import os
import subprocess
import sys
import uuid

import pytest

from tests import helpers
from tfxflow.components import object_store as store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Values from kubeflow/pipelines backend/src/v2/component/launcher_v2.go (LocalPathForURI) and its test.
KFP_PATHS = [
    ("gs://bucket/path/to/artifact", "/gcs/bucket/path/to/artifact"),
    ("s3://bucket/path/to/artifact", "/s3/bucket/path/to/artifact"),
    ("minio://mlpipeline/v2/artifacts/run/task/model", "/minio/mlpipeline/v2/artifacts/run/task/model"),
    ("gs://bucket", "/gcs/bucket"),
]


@pytest.fixture(autouse=True)
def _fresh_clients():
    store.clear_client_cache()
    yield
    store.clear_client_cache()


def _isolate_aws(monkeypatch, tmp_path, env):
    """Only `env` reaches boto3: no profile, config file, shared credentials or instance metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3(s3_server, monkeypatch, tmp_path):
    """The moto server's environment set, and a new bucket on it."""
    _isolate_aws(monkeypatch, tmp_path, s3_server.env)
    bucket = s3_server.create_bucket(f"bucket-{uuid.uuid4().hex[:12]}")
    return s3_server, bucket


@pytest.fixture(scope="module")
def auth_s3_server(tmp_path_factory):
    """A second moto server that checks credentials (no access key is known to it: every one is wrong)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")
        server = helpers.S3Server(str(tmp_path_factory.mktemp("s3_auth_server"))).start()
    yield server
    server.stop()


def _make_tree(folder):
    files = {
        "data.csv": b"a,b\n1,2\n",
        "nested/deeper/model.bin": bytes(range(256)) * 40,
        "nested/readme.txt": "température\n".encode(),
        "variables/variables.index": b"",  # a zero-byte file is a file, not a marker
    }
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(folder, "empty_dir"))
    return files


def _read_tree(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder).replace(os.sep, "/")] = f.read()
    return out


def _keys(server, bucket):
    return sorted(item["Key"] for item in server.client().list_objects_v2(Bucket=bucket).get("Contents", ()))


# --- URIs and KFP's local paths ----------------------------------------------------------------------------


@pytest.mark.parametrize("uri,path", KFP_PATHS)
def test_local_path_mapping_matches_kfp_launcher(uri, path):
    assert store.local_path_for_uri(uri) == path
    assert store.uri_for_local_path(path) == uri


@pytest.mark.parametrize("uri,path", KFP_PATHS)
@pytest.mark.parametrize("root", ["/tmp/kfp", "/tmp/kfp/"])
def test_local_path_mapping_under_a_root(uri, path, root):
    assert store.local_path_for_uri(uri, root=root) == "/tmp/kfp" + path
    assert store.uri_for_local_path("/tmp/kfp" + path, root=root) == uri
    assert store.uri_for_local_path(path, root=root) is None


def test_local_path_mapping_edges():
    assert store.local_path_for_uri("gs://b/k/") == "/gcs/b/k/"
    assert store.uri_for_local_path("/gcs/b/k/") == "gs://b/k/"
    assert store.uri_for_local_path("/s3/b/x/../k") == "s3://b/k"
    for path in ["/data/taxi", "/gcs", "/gcs/", "/minio", "gcs/b/k", "/gcsx/b/k", ""]:
        assert store.uri_for_local_path(path) is None, path
    for uri in ["oci://registry/model", "http://host/x", "/gcs/b/k", "file:///x", "S3://b/k"]:
        with pytest.raises(ValueError, match="unsupported storage scheme"):
            store.local_path_for_uri(uri)


def test_split_and_is_remote():
    assert store.split("s3://b/a/b.csv") == ("s3", "b", "a/b.csv")
    assert store.split("minio://mlpipeline/v2/") == ("minio", "mlpipeline", "v2")
    assert store.split("gs://b") == ("gs", "b", "")
    assert [store.is_remote(u) for u in ["gs://b/k", "s3://b", "minio://b/k", "/data", "http://x/y", "oci://x"]] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="Not an object-store URI"):
        store.split("/data/taxi")
    with pytest.raises(ValueError, match="Unsupported scheme 'hdfs'"):
        store.split("hdfs://b/k")
    with pytest.raises(ValueError, match="No bucket"):
        store.split("s3:///key")


def test_import_creates_no_client():
    code = (
        "import sys, components.object_store as o\n"
        "assert not o._GCS_CLIENT and not o._S3_CLIENTS\n"
        "heavy = [m for m in ('boto3', 'botocore', 'google.cloud.storage') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert o.local_path_for_uri('gs://b/k') == '/gcs/b/k'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# --- s3:// and minio:// against moto -------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["s3", "minio"])
def test_folder_round_trip(s3, scheme, tmp_path):
    server, bucket = s3
    files = _make_tree(str(tmp_path / "src"))
    uri = f"{scheme}://{bucket}/runs/1/model"
    assert store.upload(str(tmp_path / "src"), uri) == len(files)
    keys = _keys(server, bucket)
    assert keys == sorted(f"runs/1/model/{rel}" for rel in files)
    assert not [k for k in keys if k.endswith("/")]

    assert store.download(uri, str(tmp_path / "dst")) == len(files)
    assert _read_tree(str(tmp_path / "dst")) == files
    assert store.download(uri + "/", str(tmp_path / "dst2")) == len(files)
    assert _read_tree(str(tmp_path / "dst2")) == files


def test_whole_bucket_download(s3, tmp_path):
    _, bucket = s3
    files = _make_tree(str(tmp_path / "src"))
    store.upload(str(tmp_path / "src"), f"s3://{bucket}")
    assert store.download(f"minio://{bucket}", str(tmp_path / "dst")) == len(files)
    assert _read_tree(str(tmp_path / "dst")) == files


def test_single_object_download_and_bytes(s3, tmp_path):
    server, bucket = s3
    source = tmp_path / "schema.pbtxt"
    source.write_bytes(b'feature { name: "fare" }\n')
    assert store.upload(str(source), f"s3://{bucket}/schemas/schema.pbtxt") == 1
    target = tmp_path / "out" / "schema.pbtxt"
    assert store.download(f"s3://{bucket}/schemas/schema.pbtxt", str(target)) == 1
    assert target.read_bytes() == source.read_bytes()
    assert [p.name for p in target.parent.iterdir()] == ["schema.pbtxt"]  # no temporary left behind

    store.write_bytes(f"minio://{bucket}/a/b.txt", b"hello")
    assert store.read_bytes(f"s3://{bucket}/a/b.txt") == b"hello"
    assert server.client().get_object(Bucket=bucket, Key="a/b.txt")["Body"].read() == b"hello"
    with pytest.raises(ValueError, match="must name the object"):
        store.upload(str(source), f"s3://{bucket}/dir/")


def test_download_skips_marker_objects(s3, tmp_path):
    server, bucket = s3
    client = server.client()
    client.put_object(Bucket=bucket, Key="data/", Body=b"")
    client.put_object(Bucket=bucket, Key="data/sub/", Body=b"")
    client.put_object(Bucket=bucket, Key="data/sub/part.csv", Body=b"x\n")
    assert store.download(f"s3://{bucket}/data", str(tmp_path / "d")) == 1
    assert _read_tree(str(tmp_path / "d")) == {"sub/part.csv": b"x\n"}
    assert store.list_names(f"s3://{bucket}/data") == ["sub"]
    # A folder holding only markers exists but has no files.
    client.put_object(Bucket=bucket, Key="only-markers/", Body=b"")
    assert store.download(f"s3://{bucket}/only-markers", str(tmp_path / "m")) == 0
    assert os.listdir(tmp_path / "m") == []


def test_list_names_exists_delete(s3, tmp_path):
    server, bucket = s3
    _make_tree(str(tmp_path / "src"))
    base = f"minio://{bucket}/serving/taxi"
    store.upload(str(tmp_path / "src"), base)
    store.write_bytes(f"{base}-other/x", b"1")  # shares the prefix "taxi" but not "taxi/"

    assert store.list_names(base) == ["data.csv", "nested", "variables"]
    assert store.list_names(base + "/") == ["data.csv", "nested", "variables"]
    assert store.list_names(f"{base}/nested") == ["deeper", "readme.txt"]
    assert store.list_names(f"s3://{bucket}") == ["serving"]
    assert store.list_names(f"s3://{bucket}/serving") == ["taxi", "taxi-other"]
    with pytest.raises(FileNotFoundError, match=f"s3://{bucket}/nothing"):
        store.list_names(f"s3://{bucket}/nothing")
    with pytest.raises(NotADirectoryError):
        store.list_names(f"{base}/data.csv")

    assert store.exists(base) and store.exists(f"{base}/nested/deeper/model.bin") and store.exists(f"{base}/nested")
    assert store.exists(f"s3://{bucket}")
    assert not store.exists(f"{base}/nest") and not store.exists(f"{base}/missing.csv")

    assert store.delete(f"{base}/nested") == 2
    assert not store.exists(f"{base}/nested")
    assert store.list_names(base) == ["data.csv", "variables"]
    assert store.delete(f"{base}/data.csv") == 1
    assert store.delete(f"{base}/data.csv") == 0
    assert store.delete(base) == 1
    assert _keys(server, bucket) == ["serving/taxi-other/x"]
    with pytest.raises(ValueError, match="whole bucket"):
        store.delete(f"s3://{bucket}")


def test_missing_object_or_prefix(s3, tmp_path):
    _, bucket = s3
    uri = f"s3://{bucket}/no/such/prefix"
    with pytest.raises(FileNotFoundError, match=uri):
        store.download(uri, str(tmp_path / "x"))
    with pytest.raises(FileNotFoundError, match=uri):
        store.read_bytes(uri)
    assert not os.path.exists(tmp_path / "x")
    assert not store.exists(uri)


def test_missing_bucket(s3, tmp_path):
    (tmp_path / "f").write_bytes(b"1")
    for call, uri in [
        (lambda u: store.download(u, str(tmp_path / "x")), "s3://no-such-bucket-tfxflow/data"),
        (lambda u: store.upload(str(tmp_path / "f"), u), "minio://no-such-bucket-tfxflow/f"),
        (store.read_bytes, "s3://no-such-bucket-tfxflow/f"),
        (store.list_names, "s3://no-such-bucket-tfxflow/d"),
        (store.exists, "s3://no-such-bucket-tfxflow/d"),
    ]:
        with pytest.raises(store.ObjectStoreError) as info:
            call(uri)
        message = str(info.value)
        assert uri in message and "no-such-bucket-tfxflow" in message and "does not exist" in message, message
        assert s3[0].endpoint in message, message


@pytest.mark.integration
def test_wrong_credentials(auth_s3_server, monkeypatch, tmp_path):
    _isolate_aws(monkeypatch, tmp_path, auth_s3_server.env)
    (tmp_path / "f").write_bytes(b"1")
    for call, uri in [
        (store.read_bytes, "minio://mlpipeline/data/f.csv"),
        (lambda u: store.download(u, str(tmp_path / "x")), "s3://mlpipeline/data"),
        (lambda u: store.upload(str(tmp_path / "f"), u), "s3://mlpipeline/data/f"),
        (store.list_names, "minio://mlpipeline/data"),
    ]:
        with pytest.raises(store.ObjectStoreError) as info:
            call(uri)
        message = str(info.value)
        assert uri in message and auth_s3_server.endpoint in message, message
        assert "AWS_ACCESS_KEY_ID" in message and "mlpipeline-minio-artifact" in message, message


def test_missing_credentials(s3_server, monkeypatch, tmp_path):
    _isolate_aws(monkeypatch, tmp_path, {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_DEFAULT_REGION": "us-east-1"})
    uri = "minio://mlpipeline/schema.pbtxt"
    with pytest.raises(store.ObjectStoreError) as info:
        store.read_bytes(uri)
    message = str(info.value)
    assert uri in message and "AWS_ACCESS_KEY_ID" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "mlpipeline-minio-artifact" in message


def test_unreachable_endpoint(s3_server, monkeypatch, tmp_path):
    endpoint = f"http://127.0.0.1:{helpers.free_port()}"
    _isolate_aws(monkeypatch, tmp_path, dict(s3_server.env, AWS_ENDPOINT_URL=endpoint))
    uri = "s3://mlpipeline/data"
    with pytest.raises(store.ObjectStoreError) as info:
        store.list_names(uri)
    message = str(info.value)
    assert uri in message and endpoint in message and "AWS_ENDPOINT_URL" in message, message


def test_minio_needs_an_endpoint(s3_server, monkeypatch, tmp_path):
    env = dict(s3_server.env)
    env.pop("AWS_ENDPOINT_URL")
    _isolate_aws(monkeypatch, tmp_path, env)
    with pytest.raises(store.ObjectStoreError) as info:
        store.exists("minio://mlpipeline/data")
    message = str(info.value)
    assert "minio://mlpipeline/data" in message and "AWS_ENDPOINT_URL" in message
    # Both of Kubeflow's stores, by the KFP versions they ship with (backend/src/v2/objectstore/config.go).
    assert "http://seaweedfs.kubeflow:9000 from KFP 2.16, http://minio-service.kubeflow:9000 before" in message


def test_client_cache_follows_the_environment(s3, monkeypatch, tmp_path):
    _, bucket = s3
    store.write_bytes(f"s3://{bucket}/k", b"1")
    assert store.read_bytes(f"s3://{bucket}/k") == b"1"
    assert len(store._S3_CLIENTS) == 1
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{helpers.free_port()}")
    with pytest.raises(store.ObjectStoreError, match="cannot reach"):
        store.read_bytes(f"s3://{bucket}/k")


# --- local absolute paths ------------------------------------------------------------------------------------


def test_local_paths_round_trip(tmp_path):
    files = _make_tree(str(tmp_path / "src"))
    dest = str(tmp_path / "volume" / "models" / "taxi")
    assert store.upload(str(tmp_path / "src"), dest) == len(files)
    assert _read_tree(dest) == files
    assert os.path.isdir(os.path.join(dest, "empty_dir"))
    assert store.download(dest, str(tmp_path / "back")) == len(files)
    assert _read_tree(str(tmp_path / "back")) == files
    # Into an existing folder: merged, files replaced.
    (tmp_path / "src" / "data.csv").write_bytes(b"new\n")
    assert store.upload(str(tmp_path / "src"), dest) == len(files)
    assert _read_tree(dest)["data.csv"] == b"new\n"
    assert not [n for n in os.listdir(tmp_path / "volume" / "models") if n != "taxi"]  # no temporaries

    assert store.download(os.path.join(dest, "data.csv"), str(tmp_path / "one.csv")) == 1
    assert (tmp_path / "one.csv").read_bytes() == b"new\n"
    store.write_bytes(str(tmp_path / "w" / "x.bin"), b"\x00\x01")
    assert store.read_bytes(str(tmp_path / "w" / "x.bin")) == b"\x00\x01"
    assert store.exists(dest) and not store.exists(str(tmp_path / "nope"))
    assert store.list_names(dest) == ["data.csv", "empty_dir", "nested", "variables"]
    assert store.delete(os.path.join(dest, "nested")) == 2
    assert store.delete(dest) == 2
    assert store.delete(dest) == 0
    with pytest.raises(FileNotFoundError):
        store.download(str(tmp_path / "nope"), str(tmp_path / "x"))


def test_local_paths_must_be_absolute(tmp_path):
    with pytest.raises(ValueError, match="absolute path"):
        store.download("data/taxi", str(tmp_path / "x"))
    with pytest.raises(ValueError, match="absolute path"):
        store.upload(str(tmp_path), "relative/dest")
    with pytest.raises(ValueError, match="Unsupported scheme 'hdfs'"):
        store.exists("hdfs://namenode/data")
