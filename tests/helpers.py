"""Shared test helpers: small data sets, raw tf.Examples, and reading the serving directory."""

from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tfxflow.components.tracking import tracking_outbox
from tfxflow.pipeline import tracking_store
from tfxflow.pipeline.inputs import bundled_taxi_data_root

TFXFLOW = os.path.join(os.path.dirname(sys.executable), "tfxflow")


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doc_files() -> List[str]:
    """The user documentation, relative to the repository: README.md, then the chapters in docs/."""
    chapters = sorted(f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
    return ["README.md", *(os.path.join("docs", f) for f in chapters)]


def docs_text() -> str:
    """README.md and the chapters in docs/, one text (a block or table may be in any of them)."""
    parts = []
    for path in doc_files():
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            parts.append(f.read())
    return "\n".join(parts)


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


# Palmer penguins' measurements per species (Gorman, Williams and Fraser 2014; the data set of TFX's penguin
# example): (mean, deviation) of culmen length and depth (mm), flipper length (mm) and body mass (g) of Adelie,
# Chinstrap and Gentoo, which TFX's processed file labels 0, 1 and 2.
PENGUIN_COLUMNS = ("culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g")
PENGUIN_SPECIES = {
    0: ((38.8, 2.7), (18.3, 1.2), (190.0, 6.5), (3701.0, 459.0)),
    1: ((48.8, 3.3), (18.4, 1.1), (195.8, 7.1), (3733.0, 384.0)),
    2: ((47.5, 3.1), (15.0, 1.0), (217.2, 6.5), (5076.0, 504.0)),
}


def write_penguins(folder: str, rows: int, seed: int) -> str:
    """`rows` penguins drawn from each species' measurements (PENGUIN_SPECIES, species in equal shares) into
    `folder`/data.csv, in the columns of TFX's penguin example: its four measurements and `species` (0 to 2),
    every cell filled."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "data.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["species", *PENGUIN_COLUMNS])
        for species in rng.integers(0, 3, size=rows):
            measured = [rng.normal(mean, deviation) for mean, deviation in PENGUIN_SPECIES[int(species)]]
            writer.writerow([int(species), *(f"{v:.1f}" for v in measured)])
    return folder


def write_sklearn_dataset(name: str, folder: str, seed: int = 0) -> str:
    """One of the data sets scikit-learn's wheel bundles (no download), as `folder`/data.csv in a shuffled order
    (`seed`): `wine` (178 wines, 13 measurements, the cultivar as a string label `cultivar`: class_0 to
    class_2) or `diabetes` (442 patients, 10 measurements, `progression`: a disease measure a year later)."""
    from sklearn import datasets

    if name == "wine":
        loaded = datasets.load_wine(as_frame=True)
        frame = loaded.frame.drop(columns="target")
        frame["cultivar"] = [str(loaded.target_names[t]) for t in loaded.target]
    elif name == "diabetes":
        frame = datasets.load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": "progression"})
    else:
        raise ValueError(f"no bundled data set '{name}'")
    os.makedirs(folder, exist_ok=True)
    frame.sample(frac=1.0, random_state=seed).to_csv(os.path.join(folder, "data.csv"), index=False)
    return folder


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


def run_cli(*args: str, timeout: int = 900, env: "Dict[str, str] | None" = None) -> subprocess.CompletedProcess:
    """Runs the installed `tfxflow` console script as a user would; `env` adds to (or with None values, removes
    from) this process's environment."""
    environ = None
    if env is not None:
        environ = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
        for key in [k for k, v in env.items() if v is None]:
            environ.pop(key, None)
    return subprocess.run([TFXFLOW, *args], capture_output=True, text=True, timeout=timeout, check=False, env=environ)


environment = tracking_outbox.environment  # this process's environment with some variables set for a block


def patch_env(monkeypatch, env: "Dict[str, str | None]") -> None:
    """Sets each variable of `env` through `monkeypatch` (undone after the test), or removes it where its value
    is None: the same meaning `run_cli`'s `env` has."""
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


def champion_and_served_predictions(tracking_uri: str, data_csv: str, home: str, rows: int = 8):
    """(what `models:/taxi@champion`, loaded through MLflow's pyfunc from `tracking_uri`, predicts for the first
    `rows` rows of `data_csv`; what the newest taxi SavedModel pushed under `home` predicts for them)."""
    import base64

    import mlflow
    import numpy as np

    from tfxflow.components.tracking.model_registry import fluent_api_at
    from tfxflow.pipeline.inputs import bundled_dataset_dir

    examples = serialize_examples(
        read_csv_rows(data_csv, rows), os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"), drop=("tips",)
    )
    with fluent_api_at(tracking_uri):
        encoded = np.array([base64.urlsafe_b64encode(e).decode() for e in examples], dtype=object)
        predicted = mlflow.pyfunc.load_model("models:/taxi@champion").predict(encoded)
    served = pushed_versions(os.path.join(home, "serving"), "taxi")
    serving = tf.saved_model.load(os.path.join(home, "serving", "taxi", served[-1])).signatures["serving_default"]
    return predicted, serving(examples=tf.constant(examples))["probabilities"].numpy()


def tree_snapshot(folder: str) -> Dict[str, tuple]:
    """Every file under `folder` with its size and modification time, and every folder (an empty version folder
    is one TF Serving tries to load): equal snapshots, untouched folder."""
    snapshot = {}
    for root, folders, files in os.walk(folder):
        for name in folders:
            snapshot[os.path.relpath(os.path.join(root, name), folder) + "/"] = ("folder",)
        for name in files:
            path = os.path.join(root, name)
            stat = os.stat(path)
            snapshot[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return snapshot


def outputs_under_hash_seeds(code: str, seeds=("0", "1")) -> List[str]:
    """What `code` (Python, run from the repository's root) prints, once per PYTHONHASHSEED in `seeds`: each run
    its own process, so set and dict orders that depend on string hashing differ between them."""
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=repository,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for seed in seeds
    ]


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


class LocalServer:
    """A server process on 127.0.0.1 that a test session starts: its own process group, its output in
    `folder`/server.log, and a readiness probe (`_ready`) polled until it answers."""

    NAME = "server"
    STOP_SIGNAL = "SIGTERM"

    def __init__(self, folder: str):
        self.folder = folder
        self.port = free_port()
        self.process: "subprocess.Popen | None" = None

    def _ready(self) -> bool:
        """Whether the server answers yet."""
        raise NotImplementedError

    def _launch(self, command: List[str], timeout: float, env: "Dict[str, str] | None" = None, **popen) -> None:
        """Starts `command` and waits up to `timeout` seconds for `_ready`; stops it and raises, naming the
        log, if it exits or does not answer."""
        import time

        os.makedirs(self.folder, exist_ok=True)
        log = open(os.path.join(self.folder, "server.log"), "wb")  # the server outlives this call
        self.process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **popen
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.NAME} exited with {self.process.returncode}; see {log.name}")
            if self._ready():
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{self.NAME} did not answer on port {self.port} within {timeout:.0f} s; see {log.name}")

    def stop(self) -> None:
        """Stops the server and what it spawned (workers, job runners): its whole process group."""
        import signal

        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, getattr(signal, self.STOP_SIGNAL))
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process = None


NO_JOBS = ("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")  # mlflow/environment_variables.py


class MlflowServer(LocalServer):
    """A real `mlflow server` on 127.0.0.1: SQLite backend and artifact store in `folder`."""

    NAME = "mlflow server"
    tls: "TlsFiles | None" = None

    def __init__(self, folder: str):
        super().__init__(folder)
        self.uri = f"http://127.0.0.1:{self.port}"

    def _arguments(self) -> List[str]:
        """The `mlflow server` options besides host, port and workers."""
        return [
            "--backend-store-uri",
            f"sqlite:///{self.folder}/mlflow.db",
            "--artifacts-destination",
            os.path.join(self.folder, "artifacts"),
        ]

    def _environment(self) -> "Dict[str, str] | None":
        """The server's environment; None: this process's."""
        return None

    def start(self, timeout: float = 180.0) -> "MlflowServer":
        mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
        os.makedirs(self.folder, exist_ok=True)
        arguments, env = self._arguments(), self._environment()
        backend = arguments[arguments.index("--backend-store-uri") + 1]
        if backend.startswith("sqlite:///"):  # MLflow's empty store copied, as a run's embedded store starts
            tracking_store.seed_sqlite_store(backend[len("sqlite:///") :])
        # Without MLflow's job runner (a huey consumer process per server, for GenAI scoring and trace archival,
        # which this project's client never asks for): a start took 22 s instead of 42 on a loaded 2-core machine.
        env = {**(os.environ if env is None else env), NO_JOBS[0]: NO_JOBS[1]}
        self._launch(
            [mlflow, "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", *arguments],
            timeout,
            env,
            cwd=self.folder,
        )
        return self

    def _ready(self) -> bool:
        try:
            return self.request("GET", "/health", timeout=2).text.strip() == "OK"
        except OSError:  # requests' ConnectionError and SSLError are OSErrors
            return False

    def request(self, method: str, endpoint: str, **kwargs):
        """A request to the server, with the client certificate its TLS asks for."""
        import requests

        if self.tls is not None:
            kwargs.update(verify=self.tls.ca, cert=(self.tls.client_cert, self.tls.client_key))
        return requests.request(method, f"{self.uri}{endpoint}", **kwargs)


class S3Server(LocalServer):
    """moto's S3-compatible server on 127.0.0.1 (the protocol MinIO speaks), with test credentials."""

    ACCESS_KEY = "tfxflow-test-access"
    SECRET_KEY = "tfxflow-test-secret"
    NAME = "moto_server"

    def __init__(self, folder: str, host: str = "127.0.0.1", port: Optional[int] = None):
        """`host`: another loopback address (127.0.0.2, ...) lets two servers listen on the same port."""
        super().__init__(folder)
        self.host, self.port = host, port or self.port
        self.endpoint = f"http://{host}:{self.port}"

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
        moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
        # Path-style for any host name, as MinIO and SeaweedFS serve it: moto would otherwise take the first
        # label of a name such as seaweedfs.kubeflow for a bucket (virtual-hosted style).
        env = {**os.environ, "S3_IGNORE_SUBDOMAIN_BUCKETNAME": "true"}
        self._launch([moto, "-H", self.host, "-p", str(self.port)], timeout, env=env)
        return self

    def _ready(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                return True
        except OSError:
            return False

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name


def _as_postgres_user(command: List[str]) -> List[str]:
    """PostgreSQL refuses to run as root: there, run it as `nobody`."""
    return ["runuser", "-u", "nobody", "--", *command] if os.geteuid() == 0 else command


class PostgresServer(LocalServer):
    """A throwaway PostgreSQL cluster (PostgreSQL's server binaries: `binaries()`) on a free port of 127.0.0.1, its
    unix socket in its own folder; trust authentication on loopback only."""

    NAME = "postgres"
    STOP_SIGNAL = "SIGINT"  # PostgreSQL's fast shutdown

    @staticmethod
    def binaries() -> "str | None":
        """The folder of PostgreSQL's server binaries: `initdb`'s on PATH, else the newest of Debian's packages
        (which keeps them off PATH, in /usr/lib/postgresql/<version>/bin)."""
        import glob
        import shutil

        found = shutil.which("initdb")
        if found:
            return os.path.dirname(os.path.realpath(found))
        debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
        return os.path.dirname(debian[-1]) if debian else None

    def __init__(self):
        import tempfile

        # Not under pytest's tmp folders: those are private to root, and the server may run as `nobody`.
        super().__init__(tempfile.mkdtemp(prefix="tfxflow-pg-"))

    def uri(self, database: str) -> str:
        """SQLAlchemy's URI of `database` (its default PostgreSQL driver: psycopg2)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=database)

    def start(self, timeout: float = 60.0) -> "PostgresServer":
        binaries = self.binaries()
        if binaries is None:
            raise RuntimeError(
                "PostgreSQL's server binaries (initdb, postgres) are neither on PATH nor in /usr/lib/postgresql: "
                "`make system-deps` installs Debian's"
            )
        if os.geteuid() == 0:
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
        data = os.path.join(self.folder, "data")
        subprocess.run(
            _as_postgres_user(
                [os.path.join(binaries, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            ),
            cwd=self.folder,
            check=True,
            capture_output=True,
        )
        command = [os.path.join(binaries, "postgres"), "-D", data, "-h", "127.0.0.1", "-p", str(self.port)]
        self._launch(_as_postgres_user([*command, "-k", self.folder]), timeout, cwd=self.folder)
        return self

    def _ready(self) -> bool:
        import psycopg2

        try:
            self.connect().close()
            return True
        except psycopg2.OperationalError:  # until the server accepts connections
            return False

    def create_database(self, name: str) -> str:
        connection = self.connect()
        connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        connection.close()
        return self.uri(name)

    def dump(self, database: str) -> str:
        """Every row of every table of `database`, as text: what a secret must not be found in."""
        connection = self.connect(database)
        lines = []
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
            for (table,) in cursor.fetchall():
                cursor.execute(f'SELECT * FROM "{table}"')
                lines += [f"{table}: {row!r}" for row in cursor.fetchall()]
        connection.close()
        return "\n".join(lines)

    def stop(self) -> None:
        """A fast shutdown, then the folder goes."""
        import shutil

        super().stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class TlsFiles(NamedTuple):
    """A throwaway certificate authority, and the server's (for 127.0.0.1) and a client's keys it signed."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    client_bundle: str  # certificate and key in one file: what $MLFLOW_TRACKING_CLIENT_CERT_PATH names

    @classmethod
    def create(cls, folder: str) -> "TlsFiles":
        """Made with the `openssl` command: a CA, a server certificate for IP 127.0.0.1, a client certificate."""
        os.makedirs(folder, exist_ok=True)

        def path(name: str) -> str:
            return os.path.join(folder, name)

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

        openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=tfxflow test CA",
            "-keyout", path("ca.key"), "-out", path("ca.pem"),
        )  # fmt: skip
        for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
            openssl(
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=tfxflow test {name}",
                "-keyout", path(f"{name}.key"), "-out", path(f"{name}.csr"),
            )  # fmt: skip
            with open(path(f"{name}.ext"), "w", encoding="utf-8") as f:
                f.write(extension + "\n")
            openssl(
                "x509", "-req", "-in", path(f"{name}.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", path(f"{name}.ext"), "-out", path(f"{name}.pem"),
            )  # fmt: skip
        with open(path("client-bundle.pem"), "w", encoding="utf-8") as bundle:
            for name in ("client.pem", "client.key"):
                with open(path(name), encoding="utf-8") as part:
                    bundle.write(part.read())
        return cls(
            *(path(name) for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")),
            path("client-bundle.pem"),
        )


class TeamMlflowServer(MlflowServer):
    """`mlflow server --app-name basic-auth` as teams run it: runs in PostgreSQL, users in another PostgreSQL
    database, artifacts proxied to an S3-compatible store; default permission READ."""

    ADMIN = "admin"
    ADMIN_PASSWORD = "tfxflow-admin-pw-4Qz"
    WRITER = ("writer", "Wr1ter:s3cret@tfxflow")  # ':' and '@' must survive a URI
    READER = ("reader", "Re4der-s3cret-tfxflow")
    # Bearer tokens of the same users, where the server takes tokens (`tokens=`).
    WRITER_TOKEN = "tfxflow-writer-token-7Hc2"
    READER_TOKEN = "tfxflow-reader-token-Q9xe"

    def __init__(
        self,
        folder: str,
        postgres: PostgresServer,
        s3: S3Server,
        bucket: str,
        tls: "TlsFiles | None" = None,
        tokens: "Dict[str, str] | None" = None,
    ):
        """With `tls`, it serves HTTPS only and asks each client for a certificate signed by `tls.ca`; with
        `tokens` ({token: username}), a bearer token authenticates as its user (tests.mlflow_token_auth)."""
        super().__init__(folder)
        self.postgres = postgres
        self.s3 = s3
        self.bucket = bucket
        self.tls = tls
        self.tokens = tokens
        if tls is not None:
            self.uri = f"https://127.0.0.1:{self.port}"
        # One cluster may serve several servers in a session: databases of their own.
        self.databases = (f"mlflow_{self.port}", f"mlflow_auth_{self.port}")

    def _arguments(self) -> List[str]:
        backend = self.postgres.uri(self.databases[0])
        tls = []
        if self.tls is not None:
            tls = [
                "--uvicorn-opts",
                f"--ssl-certfile {self.tls.server_cert} --ssl-keyfile {self.tls.server_key} "
                f"--ssl-ca-certs {self.tls.ca} --ssl-cert-reqs 2",  # 2: ssl.CERT_REQUIRED
            ]
        return [
            "--app-name",
            "basic-auth",
            "--backend-store-uri",
            backend,
            "--artifacts-destination",
            f"s3://{self.bucket}/mlflow",
            *tls,
        ]

    def _environment(self) -> Dict[str, str]:
        """Creates the databases, the bucket and the auth config the server's environment points at."""
        _, users = (self.postgres.create_database(name) for name in self.databases)
        self.s3.create_bucket(self.bucket)
        config = os.path.join(self.folder, "basic_auth.ini")
        authorization = "mlflow.server.auth:authenticate_request_basic_auth"
        extra_env: Dict[str, str] = {}
        if self.tokens is not None:
            import json

            from tests import mlflow_token_auth

            authorization = f"{mlflow_token_auth.__name__}:authenticate_request"
            tokens_file = os.path.join(self.folder, "tokens.json")
            with open(tokens_file, "w", encoding="utf-8") as f:
                json.dump(self.tokens, f)
            repo_root = os.path.dirname(os.path.dirname(os.path.abspath(mlflow_token_auth.__file__)))
            extra_env = {mlflow_token_auth.TOKENS_FILE_ENV: tokens_file, "PYTHONPATH": repo_root}
        with open(config, "w", encoding="utf-8") as f:
            f.write(
                "[mlflow]\ndefault_permission = READ\n"
                f"database_uri = {users}\nadmin_username = {self.ADMIN}\nadmin_password = {self.ADMIN_PASSWORD}\n"
                f"authorization_function = {authorization}\n"
                # Checking a password costs a PBKDF2 hash, about a second per request on a busy machine.
                "auth_cache_ttl_seconds = 300\n"
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING_", "AWS_", "MLFLOW_S3_"))}
        env.update(
            MLFLOW_AUTH_CONFIG_PATH=config,
            MLFLOW_FLASK_SERVER_SECRET_KEY="tfxflow-test-flask-key",
            MLFLOW_S3_ENDPOINT_URL=self.s3.endpoint,
            AWS_ACCESS_KEY_ID=self.s3.ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=self.s3.SECRET_KEY,
            AWS_DEFAULT_REGION="us-east-1",
            **extra_env,
        )
        return env

    def admin(self, endpoint: str, method: str = "POST", **kwargs) -> dict:
        """A call of MLflow's REST or auth API as the admin."""
        response = self.request(method, endpoint, auth=(self.ADMIN, self.ADMIN_PASSWORD), timeout=30, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else {}

    def create_user(self, username: str, password: str) -> None:
        self.admin("/api/2.0/mlflow/users/create", json={"username": username, "password": password})


def save_scale_models(root) -> dict:
    """Three different tiny SavedModels with a serving signature y = value * x: {"a": path, "b": path, "c": path}
    for values 1, 2 and 3, saved under `root`."""
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self, value: float):
            super().__init__()
            self.value = tf.Variable(value, dtype=tf.float32)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def serve(self, x):
            return {"y": self.value * x}

    models = {}
    for name, value in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        module = Scale(value)
        models[name] = os.path.join(str(root), name)
        tf.saved_model.save(module, models[name], signatures={"serving_default": module.serve})
    return models


def ingested_taxi_statistics(folder, header: str, lines):
    """TFDV's statistics of taxi CSV `lines` (after `header`) as a run makes them: ingested into tf.Examples by
    the pipeline's ExampleGen code (an empty cell a present feature with an empty list, as TFX's CsvExampleGen
    writes it), then TFDV's GenerateStatistics with StatisticsGen's options and the taxi schema. `folder`: a
    pathlib folder to work in."""
    import tensorflow_data_validation as tfdv

    from tfxflow.components.ingest import csv_check, csv_input
    from tfxflow.components.validation import drift
    from tfxflow.pipeline.inputs import bundled_dataset_dir

    schema = tfdv.load_schema_text(os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"))
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "data.csv").write_text(header + "".join(lines), encoding="utf-8")
    examples = folder / "examples"
    examples.mkdir()
    csv_input.ingest(
        [str(folder / "in" / "data.csv")], {"train": str(examples)}, [1], csv_check.rules_from_schema(schema)
    )
    return tfdv.generate_statistics_from_tfrecord(str(examples / "*"), stats_options=drift.stats_options(schema=schema))
