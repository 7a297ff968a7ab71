"""Shared test helpers: small data sets, raw tf.Examples, and reading the serving directory."""

from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
from typing import Dict, Iterable, List, Sequence, Tuple

import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tfxflow.pipeline.config import bundled_taxi_data_root

TFXFLOW = os.path.join(os.path.dirname(sys.executable), "tfxflow")


def write_taxi_sample(folder: str, rows: int) -> str:
    """Copies the header and the first `rows` rows of the bundled taxi CSV into `folder`/data.csv."""
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(bundled_taxi_data_root(), "data.csv")
    with open(source, encoding="utf-8") as src, open(os.path.join(folder, "data.csv"), "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(line)
    return folder


def write_taxi_samples(folders: Sequence[Tuple[str, int]], seed: int) -> List[str]:
    """Disjoint random samples of the bundled taxi CSV's rows: `rows` of them into each `folder`/data.csv.
    (The file's first rows are not a random sample: they differ from the rest in pickup area and hour.)"""
    with open(os.path.join(bundled_taxi_data_root(), "data.csv"), encoding="utf-8") as f:
        header, *lines = f.readlines()
    order = random.Random(seed).sample(range(len(lines)), sum(rows for _, rows in folders))
    start = 0
    for folder, rows in folders:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "data.csv"), "w", encoding="utf-8") as f:
            f.write(header + "".join(lines[i] for i in order[start : start + rows]))
        start += rows
    return [folder for folder, _ in folders]


def read_csv_rows(path: str, limit: int) -> List[Dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [row for _, row in zip(range(limit), csv.DictReader(f), strict=False)]


def serialize_examples(rows: Iterable[Dict[str, str]], schema_path: str, drop: Sequence[str] = ()) -> List[bytes]:
    """Raw CSV rows as serialized tf.Examples typed by the schema; empty cells and `drop` columns are left out."""
    schema = schema_pb2.Schema()
    with open(schema_path, encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    types = {feature.name: feature.type for feature in schema.feature}
    out = []
    for row in rows:
        feature = {}
        for name, value in row.items():
            if name in drop or value == "":
                continue
            if types[name] == schema_pb2.INT:
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(float(value))]))
            elif types[name] == schema_pb2.FLOAT:
                feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
            else:
                feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return out


def pushed_versions(serving_dir: str, model_name: str) -> List[str]:
    base = os.path.join(serving_dir, model_name)
    return sorted((n for n in os.listdir(base) if n.isdigit()), key=int) if os.path.isdir(base) else []


def run_cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Runs the installed `tfxflow` console script as a user would."""
    return subprocess.run([TFXFLOW, *args], capture_output=True, text=True, timeout=timeout, check=False)


def tree_snapshot(folder: str) -> Dict[str, tuple]:
    """Every file under `folder` with its size and modification time: equal snapshots, untouched folder."""
    snapshot = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            stat = os.stat(path)
            snapshot[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return snapshot


def rewrite_csv(source: str, target_dir: str, row_fn=None, columns_fn=None, name: str = "data.csv") -> str:
    """Copies the CSV `source` into `target_dir`/`name`, passing each row (a dict, with its 0-based index)
    through `row_fn` and the column list through `columns_fn`. Returns the folder."""
    os.makedirs(target_dir, exist_ok=True)
    with (
        open(source, encoding="utf-8") as src,
        open(os.path.join(target_dir, name), "w", newline="", encoding="utf-8") as dst,
    ):
        reader = csv.DictReader(src)
        columns = columns_fn(list(reader.fieldnames)) if columns_fn else reader.fieldnames
        writer = csv.DictWriter(dst, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for i, row in enumerate(reader):
            writer.writerow(row_fn(i, row) if row_fn else row)
    return target_dir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """A real `mlflow server` on 127.0.0.1: SQLite backend and artifact store in `folder`."""

    def __init__(self, folder: str):
        self.folder = folder
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process: "subprocess.Popen | None" = None

    def start(self, timeout: float = 120.0) -> "MlflowServer":
        import time
        import urllib.request

        os.makedirs(self.folder, exist_ok=True)
        mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
        log = open(os.path.join(self.folder, "server.log"), "wb")  # the server outlives this call
        self.process = subprocess.Popen(
            [
                mlflow,
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                "1",
                "--backend-store-uri",
                f"sqlite:///{self.folder}/mlflow.db",
                "--artifacts-destination",
                os.path.join(self.folder, "artifacts"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                    if response.read().strip() == b"OK":
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer on {self.uri} within {timeout:.0f} s")

    def stop(self) -> None:
        """Stops the server and the workers it spawned (uvicorn, job runners): its whole process group."""
        import signal

        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class S3Server:
    """moto's S3-compatible server on 127.0.0.1 (the protocol MinIO speaks), with test credentials."""

    ACCESS_KEY = "tfxflow-test-access"
    SECRET_KEY = "tfxflow-test-secret"

    def __init__(self, folder: str):
        self.folder = folder
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: "subprocess.Popen | None" = None

    @property
    def env(self) -> Dict[str, str]:
        """What a step needs to reach this server with boto3: endpoint, credentials, region."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.ACCESS_KEY,
            aws_secret_access_key=self.SECRET_KEY,
            region_name="us-east-1",
        )

    def start(self, timeout: float = 60.0) -> "S3Server":
        import time
        import urllib.request

        os.makedirs(self.folder, exist_ok=True)
        moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
        log = open(os.path.join(self.folder, "server.log"), "wb")  # the server outlives this call
        self.process = subprocess.Popen(
            [moto, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout:.0f} s")

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        import signal

        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self.process = None
