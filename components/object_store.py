"""Reading and writing the locations a Kubeflow step handles itself: gs://, s3://, minio:// or a local path.

KFP's launcher moves *artifacts* between the object store and local paths (`LocalPathForURI`:
gs://b/k <-> /gcs/b/k, s3://b/k <-> /s3/b/k, minio://b/k <-> /minio/b/k). Other locations (the input CSV
folder, the schema file, serving data, the Trainer's backup folder, the Pusher's destination) are read and
written by the step itself through this module:

* s3:// and minio:// through boto3 (TF 2.16 has no S3 file system). The endpoint comes from the standard
  variable AWS_ENDPOINT_URL (boto3 reads it itself), the credentials from boto3's own chain
  (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ...). minio:// requires an endpoint.
* gs:// through google-cloud-storage, which never writes zero-byte `dir/` marker objects
  (KFP's launcher fails downloading them: kubeflow/pipelines#13476).
* An absolute local path (a mounted volume): plain file system, each file written atomically.

No function here writes a marker object: only files are uploaded, and empty folders are not recreated
remotely. boto3 and google.cloud.storage are imported on first use, never at import time.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import threading
import uuid
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

REMOTE_SCHEMES = ("gs", "s3", "minio")

# KFP's launcher (backend/src/v2/component/launcher_v2.go, LocalPathForURI): scheme -> top-level folder.
_LOCAL_FOLDERS = {"gs": "gcs", "s3": "s3", "minio": "minio"}
_SCHEME_FOR_FOLDER = {folder: scheme for scheme, folder in _LOCAL_FOLDERS.items()}

# Open-source Kubeflow's object store for minio:// URIs: MinIO's service up to KFP 2.15, SeaweedFS from 2.16.
KUBEFLOW_MINIO_ENDPOINT = "http://minio-service.kubeflow:9000"
KUBEFLOW_SEAWEEDFS_ENDPOINT = "http://seaweedfs.kubeflow:9000"
KUBEFLOW_CREDENTIALS_SECRET = "mlpipeline-minio-artifact"

_CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (on Kubeflow they come from the "
    f"`{KUBEFLOW_CREDENTIALS_SECRET}` secret, keys accesskey / secretkey)"
)
_GCS_CREDENTIALS_HINT = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run the step with Workload Identity"
)


class ObjectStoreError(Exception):
    """The object store could not be used: missing credentials, no such bucket, access denied, endpoint
    unreachable. The message names the URI, the endpoint and what to set."""


# ---------------------------------------------------------------------------------------------------------
# URIs and KFP's local paths
# ---------------------------------------------------------------------------------------------------------


def _scheme_of(uri: str) -> Optional[str]:
    head, sep, _ = uri.partition("://")
    return head if sep else None


def is_remote(uri: str) -> bool:
    """True for a gs://, s3:// or minio:// URI."""
    return isinstance(uri, str) and _scheme_of(uri) in REMOTE_SCHEMES


def tf_cannot_read(uri: Optional[str]) -> bool:
    """True for an s3:// or minio:// URI: TensorFlow's file system reads and writes local paths and gs:// itself,
    not these (TF 2.16 has no S3 file system)."""
    return is_remote(uri) and _scheme_of(uri) != "gs"


def split(uri: str) -> Tuple[str, str, str]:
    """(scheme, bucket, key) of a gs://, s3:// or minio:// URI; the key has no leading or trailing "/" and is
    empty for the bucket itself. ValueError for anything else."""
    if not isinstance(uri, str):
        raise ValueError(f"Not an object-store URI: {uri!r}")
    scheme = _scheme_of(uri)
    if scheme is None:
        raise ValueError(f"Not an object-store URI: {uri!r} (expected gs://, s3:// or minio://bucket/key)")
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(
            f"Unsupported scheme {scheme!r} in {uri!r}: expected one of " + ", ".join(f"{s}://" for s in REMOTE_SCHEMES)
        )
    rest = uri[len(scheme) + 3 :]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"No bucket in {uri!r}: expected {scheme}://bucket/key")
    if any(c.isspace() for c in bucket) or bucket in (".", ".."):
        raise ValueError(f"Invalid bucket name {bucket!r} in {uri!r}")
    return scheme, bucket, key.strip("/")


def local_path_for_uri(uri: str, root: str = "/") -> str:
    """The local path KFP's launcher uses for `uri` (LocalPathForURI: gs://b/k -> /gcs/b/k,
    s3://b/k -> /s3/b/k, minio://b/k -> /minio/b/k), with "/" replaced by `root`."""
    scheme = _scheme_of(uri) if isinstance(uri, str) else None
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(
            f"Failed to generate local path for URI {uri!r}: unsupported storage scheme "
            f"(expected one of {', '.join(s + '://' for s in REMOTE_SCHEMES)})"
        )
    return root.rstrip("/") + "/" + _LOCAL_FOLDERS[scheme] + "/" + uri[len(scheme) + 3 :]


def uri_for_local_path(path: str, root: str = "/") -> Optional[str]:
    """The inverse of local_path_for_uri: the URI whose artifact KFP puts at `path`, or None when `path` is
    not under `root`/gcs, `root`/s3 or `root`/minio (with a bucket)."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    trailing = "/" if path.endswith("/") and path.rstrip("/") else ""
    norm = posixpath.normpath(path)
    base = posixpath.normpath(root) if root else "/"
    if base == "/":
        rel = norm.lstrip("/")
    elif norm.startswith(base + "/"):
        rel = norm[len(base) + 1 :]
    else:
        return None
    folder, _, rest = rel.partition("/")
    if folder not in _SCHEME_FOR_FOLDER or not rest:
        return None
    return f"{_SCHEME_FOR_FOLDER[folder]}://{rest}{trailing}"


def _local(path: str) -> str:
    """`path` as a local path, or ValueError for a relative path or an unsupported URI."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"Not a path or URI: {path!r}")
    scheme = _scheme_of(path)
    if scheme is not None:
        raise ValueError(
            f"Unsupported scheme {scheme!r} in {path!r}: expected one of "
            + ", ".join(f"{s}://" for s in REMOTE_SCHEMES)
            + " or an absolute path"
        )
    if not os.path.isabs(path):
        raise ValueError(f"{path!r} is neither a gs://, s3:// or minio:// URI nor an absolute path")
    return path


def _join(uri_prefix: str, key: str) -> str:
    return uri_prefix.rstrip("/") + "/" + key if key else uri_prefix


# ---------------------------------------------------------------------------------------------------------
# Clients and error translation
# ---------------------------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_S3_CLIENTS: Dict[tuple, object] = {}
_GCS_CLIENT: Dict[str, object] = {}


def clear_client_cache() -> None:
    """Forgets every cached client (the next call creates new ones from the current environment)."""
    with _LOCK:
        _S3_CLIENTS.clear()
        _GCS_CLIENT.clear()


def _s3_endpoint_from_env() -> Optional[str]:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _s3_client(scheme: str, uri: str):
    endpoint = _s3_endpoint_from_env()
    if scheme == "minio" and not endpoint:
        raise ObjectStoreError(
            f"{uri}: a minio:// URI needs the object store's endpoint; set AWS_ENDPOINT_URL (on Kubeflow: "
            f"{KUBEFLOW_SEAWEEDFS_ENDPOINT} from KFP 2.16, {KUBEFLOW_MINIO_ENDPOINT} before); also {_CREDENTIALS_HINT}"
        )
    # The client depends on the AWS_* environment (endpoint, credentials, region, retries): key on it, so
    # a changed environment gets a new client.
    cache_key = (scheme, tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))
    with _LOCK:
        client = _S3_CLIENTS.get(cache_key)
        if client is None:
            import boto3
            from botocore.config import Config

            options: dict = {}
            if endpoint:
                # MinIO and other S3-compatible stores: path-style addressing (no bucket.host DNS names), and
                # checksums only where the API requires them (older MinIO rejects boto3's default CRC trailers).
                options["s3"] = {"addressing_style": "path"}
                if "AWS_REQUEST_CHECKSUM_CALCULATION" not in os.environ:
                    options["request_checksum_calculation"] = "when_required"
                if "AWS_RESPONSE_CHECKSUM_VALIDATION" not in os.environ:
                    options["response_checksum_validation"] = "when_required"
            session = boto3.session.Session()
            try:
                client = session.client("s3", config=Config(**options))
            except Exception as e:  # invalid endpoint URL, unknown profile, ...
                raise ObjectStoreError(
                    f"{uri}: cannot create an S3 client for endpoint "
                    f"{endpoint or 'AWS default'}: {e} (check AWS_ENDPOINT_URL and "
                    "the AWS_* variables)"
                ) from e
            if len(_S3_CLIENTS) >= 8:
                _S3_CLIENTS.clear()
            _S3_CLIENTS[cache_key] = client
    return client


def _gcs_client(uri: str):
    with _LOCK:
        client = _GCS_CLIENT.get("client")
        if client is None:
            from google.cloud import storage

            try:
                client = storage.Client()
            except Exception as e:  # google.auth.exceptions.DefaultCredentialsError and friends
                raise ObjectStoreError(f"{uri}: no Google Cloud credentials: {e}; {_GCS_CREDENTIALS_HINT}") from e
            _GCS_CLIENT["client"] = client
    return client


def _client_error_code(e) -> str:
    error = getattr(e, "response", {}).get("Error", {})
    return str(error.get("Code") or getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


_NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}
_DENIED_CODES = {"403", "AccessDenied", "Forbidden", "AllAccessDisabled", "AccountProblem"}
_REJECTED_CREDENTIALS_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidSecurity",
    "AuthorizationHeaderMalformed",
}


def _s3_error(e: Exception, uri: str, client, bucket: str) -> Optional[Exception]:
    """The ObjectStoreError (or FileNotFoundError) for a botocore / boto3 exception; None for others."""
    import botocore.exceptions as bce
    from boto3.exceptions import RetriesExceededError, S3UploadFailedError

    endpoint = getattr(getattr(client, "meta", None), "endpoint_url", None) or _s3_endpoint_from_env() or "AWS S3"
    where = f"{uri} (endpoint {endpoint})"
    if isinstance(e, (S3UploadFailedError, RetriesExceededError)):
        cause = getattr(e, "last_exception", None) or e.__context__ or e.__cause__
        if isinstance(cause, Exception) and cause is not e:
            translated = _s3_error(cause, uri, client, bucket)
            if translated is not None:
                return translated
        return ObjectStoreError(f"{where}: {e}")
    if isinstance(e, (bce.NoCredentialsError, bce.PartialCredentialsError, bce.CredentialRetrievalError)):
        return ObjectStoreError(f"{where}: no usable credentials ({e}); {_CREDENTIALS_HINT}")
    if isinstance(
        e,
        (
            bce.EndpointConnectionError,
            bce.ConnectTimeoutError,
            bce.ReadTimeoutError,
            bce.ConnectionClosedError,
            bce.ProxyConnectionError,
            bce.SSLError,
            bce.HTTPClientError,
        ),
    ):
        return ObjectStoreError(
            f"{where}: cannot reach the endpoint ({e}); set AWS_ENDPOINT_URL to the "
            f"S3-compatible endpoint (Kubeflow's: {KUBEFLOW_SEAWEEDFS_ENDPOINT} from KFP 2.16, "
            f"{KUBEFLOW_MINIO_ENDPOINT} before)"
        )
    if isinstance(e, bce.ClientError):
        code = _client_error_code(e)
        if code == "NoSuchBucket":
            return ObjectStoreError(f"{where}: bucket {bucket!r} does not exist; create it or fix the URI")
        if code in _REJECTED_CREDENTIALS_CODES:
            return ObjectStoreError(f"{where}: the credentials were rejected ({code}); {_CREDENTIALS_HINT}")
        if code in _DENIED_CODES:
            return ObjectStoreError(
                f"{where}: access denied ({code}); check the credentials ({_CREDENTIALS_HINT}) and the bucket policy"
            )
        if code in _NOT_FOUND_CODES:
            return FileNotFoundError(f"No such object: {uri}")
        return ObjectStoreError(f"{where}: {e}")
    if isinstance(e, bce.BotoCoreError):
        return ObjectStoreError(f"{where}: {e}")
    return None


def _gcs_error(e: Exception, uri: str, bucket: str) -> Optional[Exception]:
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
    except ImportError:  # pragma: no cover - google-cloud-storage is installed
        return None
    import requests

    where = f"{uri} (endpoint https://storage.googleapis.com)"
    if isinstance(e, auth_exc.GoogleAuthError):
        return ObjectStoreError(f"{where}: no usable Google Cloud credentials ({e}); {_GCS_CREDENTIALS_HINT}")
    if isinstance(e, gexc.NotFound):
        return ObjectStoreError(f"{where}: bucket {bucket!r} does not exist or is not visible ({e.message})")
    if isinstance(e, (gexc.Forbidden, gexc.Unauthorized)):
        return ObjectStoreError(
            f"{where}: access denied ({e.message}); check the service account's "
            f"permissions on bucket {bucket!r}, or {_GCS_CREDENTIALS_HINT}"
        )
    if isinstance(e, gexc.GoogleAPIError):
        return ObjectStoreError(f"{where}: {e}")
    if isinstance(e, requests.exceptions.RequestException):
        return ObjectStoreError(f"{where}: cannot reach Google Cloud Storage ({e})")
    return None


# ---------------------------------------------------------------------------------------------------------
# Backends: the same few primitives for S3 (and MinIO) and GCS
# ---------------------------------------------------------------------------------------------------------


class _S3:
    def __init__(self, scheme: str, bucket: str, uri: str):
        self.bucket, self.uri = bucket, uri
        self.client = _s3_client(scheme, uri)

    @contextmanager
    def errors(self, uri: Optional[str] = None) -> Iterator[None]:
        try:
            yield
        except Exception as e:
            translated = _s3_error(e, uri or self.uri, self.client, self.bucket)
            if translated is None:
                raise
            raise translated from e

    def is_object(self, key: str) -> bool:
        import botocore.exceptions as bce

        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except bce.ClientError as e:
            if _client_error_code(e) in _NOT_FOUND_CODES:
                return False  # or no such bucket: the listing that follows tells
            raise

    def walk(self, prefix: str, limit: Optional[int] = None) -> Iterator[str]:
        """Every key under `prefix` (which ends in "/", or is empty for the whole bucket)."""
        kwargs = {"Bucket": self.bucket, "Prefix": prefix}
        if limit:
            kwargs["PaginationConfig"] = {"MaxItems": limit}
        for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
            for item in page.get("Contents", ()):
                yield item["Key"]

    def children(self, prefix: str) -> Tuple[List[str], List[str]]:
        """(keys of the objects, prefixes of the "folders") immediately under `prefix`."""
        keys, prefixes = [], []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        ):
            keys.extend(item["Key"] for item in page.get("Contents", ()))
            prefixes.extend(item["Prefix"] for item in page.get("CommonPrefixes", ()))
        return keys, prefixes

    def get_file(self, key: str, path: str) -> None:
        self.client.download_file(self.bucket, key, path)

    def put_file(self, path: str, key: str) -> None:
        self.client.upload_file(path, self.bucket, key)

    def get_bytes(self, key: str) -> bytes:
        import botocore.exceptions as bce

        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except bce.ClientError as e:
            if _client_error_code(e) in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"No such object: {self.uri}") from e
            raise

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        end = start + length - 1
        return self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end}")["Body"].read()

    def stat(self, key: str) -> Tuple[int, str]:
        import botocore.exceptions as bce

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except bce.ClientError as e:
            if _client_error_code(e) in _NOT_FOUND_CODES:
                raise FileNotFoundError(f"No such object: {self.uri}") from e
            raise
        return int(head["ContentLength"]), str(head.get("ETag", "")).strip('"')

    def create_bytes(self, key: str, data: bytes) -> bool:
        import botocore.exceptions as bce

        try:  # a conditional write (AWS S3 and MinIO since 2024)
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except bce.ClientError as e:
            if _client_error_code(e) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return False
            raise

    def delete_keys(self, keys: List[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            response = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
            )
            failed = response.get("Errors") or []
            if failed:
                first = failed[0]
                raise ObjectStoreError(
                    f"{self.uri}: could not delete {len(failed)} object(s), e.g. {first.get('Key')!r}: "
                    f"{first.get('Code')} {first.get('Message', '')}".rstrip()
                )


class _GCS:
    def __init__(self, bucket: str, uri: str):
        self.bucket_name, self.uri = bucket, uri
        self.client = _gcs_client(uri)
        self.bucket = self.client.bucket(bucket)

    @contextmanager
    def errors(self, uri: Optional[str] = None) -> Iterator[None]:
        try:
            yield
        except Exception as e:
            translated = _gcs_error(e, uri or self.uri, self.bucket_name)
            if translated is None:
                raise
            raise translated from e

    def is_object(self, key: str) -> bool:
        return self.bucket.get_blob(key) is not None  # None for a missing object (or bucket)

    def walk(self, prefix: str, limit: Optional[int] = None) -> Iterator[str]:
        for blob in self.client.list_blobs(self.bucket_name, prefix=prefix or None, max_results=limit):
            yield blob.name

    def children(self, prefix: str) -> Tuple[List[str], List[str]]:
        iterator = self.client.list_blobs(self.bucket_name, prefix=prefix or None, delimiter="/")
        keys = [blob.name for blob in iterator]  # consuming the pages fills iterator.prefixes
        return keys, sorted(iterator.prefixes)

    def get_file(self, key: str, path: str) -> None:
        self.bucket.blob(key).download_to_filename(path)

    def put_file(self, path: str, key: str) -> None:
        self.bucket.blob(key).upload_from_filename(path)

    def get_bytes(self, key: str) -> bytes:
        from google.api_core import exceptions as gexc

        blob = self.bucket.get_blob(key)
        if blob is None:
            raise FileNotFoundError(f"No such object: {self.uri}")
        try:
            return blob.download_as_bytes()
        except gexc.NotFound as e:
            raise FileNotFoundError(f"No such object: {self.uri}") from e

    def put_bytes(self, key: str, data: bytes) -> None:
        self.bucket.blob(key).upload_from_string(data)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        return self.bucket.blob(key).download_as_bytes(start=start, end=start + length - 1)

    def stat(self, key: str) -> Tuple[int, str]:
        blob = self.bucket.get_blob(key)
        if blob is None:
            raise FileNotFoundError(f"No such object: {self.uri}")
        return int(blob.size), str(blob.generation)

    def create_bytes(self, key: str, data: bytes) -> bool:
        from google.api_core import exceptions as gexc

        try:
            self.bucket.blob(key).upload_from_string(data, if_generation_match=0)
            return True
        except gexc.PreconditionFailed:
            return False

    def delete_keys(self, keys: List[str]) -> None:
        from google.api_core import exceptions as gexc

        for key in keys:
            try:
                self.bucket.blob(key).delete()
            except gexc.NotFound:
                pass  # already gone


def backend(uri: str):
    """(the store of `uri`'s scheme and bucket, the key within it)."""
    scheme, bucket, key = split(uri)
    store = _GCS(bucket, uri) if scheme == "gs" else _S3(scheme, bucket, uri)
    return store, key


# ---------------------------------------------------------------------------------------------------------
# Local files, written atomically
# ---------------------------------------------------------------------------------------------------------


def _temp_sibling(path: str) -> str:
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")


def _replace_into(path: str, write) -> None:
    """Calls write(temp) on a temporary sibling of `path`, then renames it to `path` (atomic on POSIX)."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder; cannot replace it with a file")
    temp = _temp_sibling(path)
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.remove(temp)
        raise


def _copy_local(src: str, dst: str) -> int:
    """Copies a file or a folder tree; returns the number of files copied."""
    src, dst = _local(src), _local(dst)
    if not os.path.exists(src):
        raise FileNotFoundError(f"No such file or folder: {src}")
    if os.path.isfile(src):
        _replace_into(dst, lambda temp: shutil.copy2(src, temp))
        return 1
    if os.path.abspath(dst) == os.path.abspath(src):
        return sum(len(files) for _, _, files in os.walk(src))
    if os.path.abspath(dst).startswith(os.path.abspath(src).rstrip("/") + "/"):
        raise ValueError(f"Cannot copy {src} into itself ({dst})")
    if not os.path.lexists(dst):
        # A new folder: copy it whole next to its destination, then rename it into place in one step.
        parent = os.path.dirname(dst.rstrip("/")) or "/"
        os.makedirs(parent, exist_ok=True)
        temp = _temp_sibling(dst.rstrip("/"))
        try:
            shutil.copytree(src, temp)
            count = sum(len(files) for _, _, files in os.walk(temp))
            os.rename(temp, dst.rstrip("/"))
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return count
    if not os.path.isdir(dst):
        raise NotADirectoryError(f"Cannot copy the folder {src} onto the file {dst}")
    count = 0
    for folder, _, files in os.walk(src):
        rel = os.path.relpath(folder, src)
        target_dir = dst if rel == "." else os.path.join(dst, rel)
        os.makedirs(target_dir, exist_ok=True)
        for name in files:
            source = os.path.join(folder, name)
            _replace_into(os.path.join(target_dir, name), lambda temp, s=source: shutil.copy2(s, temp))
            count += 1
    return count


def _safe_relative(key: str, prefix: str, uri: str) -> str:
    """The key's path below `prefix` as a local relative path; refuses keys that would escape the folder."""
    rel = key[len(prefix) :]
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ObjectStoreError(f"{uri}: refusing to download the object {key!r}: its name is not a safe relative path")
    return os.path.join(*parts)


# ---------------------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------------------


def download(uri: str, local_path: str) -> int:
    """Copies `uri` to `local_path` and returns the number of files written.

    A single object becomes the file `local_path`; otherwise every object under the prefix `key/` becomes a
    file under the folder `local_path` (zero-byte "folder/" marker objects are skipped). A local absolute
    path is copied. FileNotFoundError when `uri` matches nothing."""
    if not is_remote(uri):
        return _copy_local(uri, local_path)
    local_path = _local(local_path)
    store, key = backend(uri)
    with store.errors():
        if key and not uri.endswith("/") and store.is_object(key):
            _replace_into(local_path, lambda temp: store.get_file(key, temp))
            return 1
        prefix = key + "/" if key else ""
        keys = list(store.walk(prefix))
    if not keys:
        raise FileNotFoundError(f"No object at or under {uri}")
    count = 0
    os.makedirs(local_path, exist_ok=True)
    for object_key in keys:
        if object_key.endswith("/"):
            continue  # a "folder" marker (kubeflow/pipelines#13476): nothing to write
        target = os.path.join(local_path, _safe_relative(object_key, prefix, uri))
        with store.errors(_join(uri, object_key[len(prefix) :])):
            _replace_into(target, lambda temp, k=object_key: store.get_file(k, temp))
        count += 1
    return count


def upload(local_path: str, uri: str) -> int:
    """Copies the file or folder tree `local_path` to `uri` and returns the number of files written.

    A file becomes the object `uri`; a folder's files become objects under `uri`/ (files only: no marker
    objects, empty folders are not recreated). To a local absolute path: the tree is copied."""
    if not is_remote(uri):
        return _copy_local(local_path, uri)
    local_path = _local(local_path)
    if not os.path.exists(local_path):
        raise FileNotFoundError(f"No such file or folder: {local_path}")
    store, key = backend(uri)
    if os.path.isfile(local_path):
        if not key or uri.endswith("/"):
            raise ValueError(
                f"Cannot upload the file {local_path} to {uri}: the URI must name the object "
                "(bucket/key, without a trailing /)"
            )
        with store.errors():
            store.put_file(local_path, key)
        return 1
    count = 0
    for folder, dirs, files in os.walk(local_path):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, local_path).replace(os.sep, "/")
            object_key = f"{key}/{rel}" if key else rel
            with store.errors(_join(uri, rel)):
                store.put_file(path, object_key)
            count += 1
    return count


def exists(uri: str) -> bool:
    """True when `uri` is an object, or a prefix with objects under it (a local path: it exists).
    For the bucket itself (no key): whether it holds any object."""
    if not is_remote(uri):
        return os.path.exists(_local(uri))
    store, key = backend(uri)
    with store.errors():
        if key and not uri.endswith("/") and store.is_object(key):
            return True
        return any(True for _ in store.walk(key + "/" if key else "", limit=1))


def list_names(uri: str) -> List[str]:
    """The names immediately under `uri`, like os.listdir (files and "folders"), sorted.
    FileNotFoundError when nothing is there; NotADirectoryError when `uri` is a single object."""
    if not is_remote(uri):
        return sorted(os.listdir(_local(uri)))
    store, key = backend(uri)
    prefix = key + "/" if key else ""
    with store.errors():
        keys, prefixes = store.children(prefix)
        names = {k[len(prefix) :] for k in keys} | {p[len(prefix) :].rstrip("/") for p in prefixes}
        names.discard("")  # the folder's own marker object, or keys with "//"
        if not names and not keys and not prefixes:
            if key and store.is_object(key):
                raise NotADirectoryError(f"Not a folder: {uri}")
            raise FileNotFoundError(f"No object under {uri}")
    return sorted(names)


def list_files(uri: str) -> List[str]:
    """The paths, relative to `uri`, of every object (file) under it, sorted; empty when there is none."""
    if not is_remote(uri):
        root = _local(uri)
        return sorted(
            os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            for folder, _, files in os.walk(root)
            for name in files
        )
    store, key = backend(uri)
    prefix = key + "/" if key else ""
    with store.errors():
        return sorted(k[len(prefix) :] for k in store.walk(prefix) if not k.endswith("/"))


def read_bytes(uri: str) -> bytes:
    """The content of the object (or local file) `uri`; FileNotFoundError when it does not exist."""
    if not is_remote(uri):
        with open(_local(uri), "rb") as f:
            return f.read()
    store, key = backend(uri)
    if not key or uri.endswith("/"):
        raise ValueError(f"{uri} names a bucket or folder, not an object")
    with store.errors():
        return store.get_bytes(key)


def read_range(uri: str, start: int, length: int) -> bytes:
    """`length` bytes of the object (or local file) `uri` from byte `start` (fewer at its end)."""
    if not is_remote(uri):
        with open(_local(uri), "rb") as f:
            f.seek(start)
            return f.read(length)
    store, key = backend(uri)
    with store.errors():
        return store.get_range(key, start, length)


def stat(uri: str) -> Tuple[int, str]:
    """(size in bytes, a tag that changes when the content does: the modification time of a local file, the
    ETag or generation of an object); FileNotFoundError when it does not exist."""
    if not is_remote(uri):
        info = os.stat(_local(uri))
        return info.st_size, str(info.st_mtime_ns)
    store, key = backend(uri)
    with store.errors():
        return store.stat(key)


def write_bytes(uri: str, data: bytes) -> None:
    """Writes `data` as the object (or local file, atomically, creating its folder) `uri`."""
    if not is_remote(uri):
        path = _local(uri)

        def write(temp: str) -> None:
            with open(temp, "wb") as f:
                f.write(data)

        _replace_into(path, write)
        return
    store, key = backend(uri)
    if not key or uri.endswith("/"):
        raise ValueError(f"Cannot write to {uri}: the URI must name an object (bucket/key, without a trailing /)")
    with store.errors():
        store.put_bytes(key, bytes(data))


def create(uri: str, data: bytes = b"") -> bool:
    """Writes the object (or local file) `uri` only if it does not exist, in one step that two writers cannot
    both win; True when this call created it."""
    if not is_remote(uri):
        path = _local(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True
    store, key = backend(uri)
    if not key or uri.endswith("/"):
        raise ValueError(f"Cannot create {uri}: the URI must name an object (bucket/key, without a trailing /)")
    with store.errors():
        return store.create_bytes(key, bytes(data))


def delete(uri: str) -> int:
    """Deletes the object `uri` and everything under the prefix `uri`/ (a local path: the file or folder
    tree). Returns the number of objects (files) deleted; 0 when nothing was there.
    Refuses a whole bucket and the local root."""
    if not is_remote(uri):
        path = _local(uri)
        if os.path.abspath(path) == "/":
            raise ValueError("Refusing to delete /")
        if os.path.isdir(path) and not os.path.islink(path):
            count = sum(len(files) for _, _, files in os.walk(path))
            shutil.rmtree(path)
            return count
        if os.path.lexists(path):
            os.remove(path)
            return 1
        return 0
    store, key = backend(uri)
    if not key:
        raise ValueError(f"Refusing to delete the whole bucket {uri}: name a key under it")
    with store.errors():
        keys = list(store.walk(key + "/"))
        if not uri.endswith("/") and store.is_object(key):
            keys.append(key)
        if keys:
            store.delete_keys(keys)
    return len(keys)
