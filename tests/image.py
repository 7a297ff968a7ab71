"""The Kubeflow step image, built here without a daemon, and commands run inside it.

The bases cannot be pulled on this machine, so `base_image(log, lane)` builds a stand-in for each lane's:

- compat, for `tensorflow/tfx:1.16.0`: a Debian 12 rootfs from Debian's archive (debootstrap) with the machine's
  pyenv CPython 3.10 at `/opt/conda` (where the real base, Google's Deep Learning VM image `tf2-gpu.2-16.py310`,
  has its conda Python), `WORKDIR /tfx/src` and root as the user, as in TFX's own Dockerfile
  (tfx/tools/docker/Dockerfile at v1.16.0). What differs from the real base: no CUDA, cuDNN or NVIDIA driver
  libraries, no conda, no TFX preinstalled (the project's Dockerfile installs the whole lock over whatever the base
  has, so the same packages end up in both), no Beam worker boot binary.
- current, for a glibc 2.38+ base such as `nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04`: a Debian 13 rootfs
  (glibc 2.41) with no Python, as that image has none, and uid 1000 taken by a user `ubuntu`, as in Ubuntu 24.04's
  images; the Dockerfile installs Python 3.13 with apt from Debian's archive. What differs: no CUDA or cuDNN, and
  Debian's packages instead of Ubuntu's.

Both set `SSL_CERT_FILE` to the machine's CA bundle (this machine reaches PyPI through a TLS-terminating proxy).

`project_image()` then builds `kubeflow/Dockerfile` as it is, with `--build-arg BASE_IMAGE` (and `LANE`), and
`ImageCommand` runs a step in a container of it the way a pod runs it: the image's user, working directory and
environment, the step's own command (a pod's `command` replaces the image's ENTRYPOINT), the given folders
mounted, the host's network (the S3 server on 127.0.0.1).

buildah (Debian's package) builds and runs as root with `--isolation chroot` (overlay storage, vfs where the cache
is itself on overlayfs); its store
is kept under `cache_dir()` so that an unchanged Dockerfile and context reuse every layer.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN_MIRROR = "http://deb.debian.org/debian"
COMPAT, CURRENT = "compat", "current"  # components/lane.py's names


@dataclasses.dataclass(frozen=True)
class StandIn:
    """How one lane's stand-in base is made (see the module's docstring)."""

    suite: str
    packages: Tuple[str, ...]
    python: bool  # this machine's CPython at BASE_PYTHON, as conda's in TFX's image
    workdir: str
    users: Tuple[Tuple[int, str], ...] = ()  # (uid, name) the real base already has
    version: int = 1  # changes the tag when the recipe changes in a way the fields do not show


# What pyenv's CPython and TensorFlow's wheels load from the system (the rest is in the wheels), and the C/C++
# compiler the lock's source-only packages (pyfarmhash, crcmod, ...) build with, which the real base has too.
STAND_INS = {
    COMPAT: StandIn(
        suite="bookworm",
        packages=(
            "g++",
            "make",
            "ca-certificates",
            "libssl3",
            "libsqlite3-0",
            "libffi8",
            "libbz2-1.0",
            "liblzma5",
            "zlib1g",
            "libreadline8",
            "libncursesw6",
            "libuuid1",
            "libgdbm6",
        ),
        python=True,
        workdir="/tfx/src",  # TFX's Dockerfile
        version=2,
    ),
    # Ubuntu 24.04's base: no Python, no compiler; CA certificates (nvidia/cuda's images have them).
    CURRENT: StandIn(
        suite="trixie", packages=("ca-certificates",), python=False, workdir="/", users=((1000, "ubuntu"),)
    ),
}
BASE_PYTHON = "/opt/conda"  # the Deep Learning VM image's Python prefix
PROJECT_TAGS = {COMPAT: "localhost/tfxflow-step:test", CURRENT: "localhost/tfxflow-step:test-current"}
PROJECT_TAG = PROJECT_TAGS[COMPAT]
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class ImageError(RuntimeError):
    """buildah, debootstrap or a build step failed; the message holds the command and its last output."""


def cache_dir() -> str:
    """Where the rootfs, buildah's store and the build logs stay between runs ($TFXFLOW_IMAGE_CACHE)."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "tfxflow", "image")
    return os.environ.get("TFXFLOW_IMAGE_CACHE", default)


def missing_tools() -> List[str]:
    """What building needs and this machine lacks (root, buildah, debootstrap)."""
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (buildah's chroot isolation and debootstrap run as root)")
    return missing


def storage_driver() -> str:
    """overlay, unless the cache folder is itself on overlayfs (a machine that is a container), where overlay
    cannot stack and buildah needs vfs (every layer a full copy). Asked once per cache folder."""
    return _storage_driver(cache_dir())


@functools.lru_cache(maxsize=None)
def _storage_driver(folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    kind = subprocess.run(["stat", "-f", "-c", "%T", folder], capture_output=True, text=True).stdout.strip()
    return "vfs" if kind == "overlayfs" else "overlay"


def _buildah_argv(*args: str) -> List[str]:
    store = os.path.join(cache_dir(), "store")
    root, run = os.path.join(store, "root"), os.path.join(store, "run")
    return ["buildah", "--root", root, "--runroot", run, "--storage-driver", storage_driver(), *args]


def _buildah(*args: str, log: Optional[str] = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return _run(_buildah_argv(*args), log=log, check=check, **kwargs)


def _run(argv: Sequence[str], log: Optional[str] = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    if log is not None:
        with open(log, "ab") as out:
            out.write(("\n$ " + " ".join(argv) + "\n").encode())
            out.flush()
            result = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, **kwargs)
    else:
        result = subprocess.run(list(argv), capture_output=True, **kwargs)
    if check and result.returncode != 0:
        if log is not None:
            with open(log, "rb") as f:
                tail = f.read()[-4000:].decode("utf-8", "replace")
        else:
            tail = (result.stdout or b"").decode("utf-8", "replace")[-2000:] + (result.stderr or b"").decode(
                "utf-8", "replace"
            )[-2000:]
        raise ImageError(f"{' '.join(argv[:8])} ... exited with {result.returncode}:\n{tail}")
    return result


def image_exists(tag: str) -> bool:
    return _buildah("inspect", "--type", "image", tag, check=False).returncode == 0


def image_config(tag: str) -> dict:
    """The OCI config of `tag`: User, WorkingDir, Env, Entrypoint, Cmd."""
    out = _buildah("inspect", "--type", "image", tag).stdout
    return json.loads(out)["OCIv1"]["config"]


def _python_prefix() -> str:
    """The CPython 3.10 this project's venv was made from: a self-contained build (pyenv's, or uv's), whose
    prefix holds nothing but that Python; a system Python (/usr, /usr/local) is not copied whole."""
    prefix = sys.base_prefix
    if prefix in ("/usr", "/usr/local", "/"):
        raise ImageError(
            f"the venv's Python lives in {prefix}, shared with the system: the stand-in base copies a "
            "self-contained Python's prefix (pyenv's 3.10, as .python-version selects)"
        )
    return prefix


def base_tag(lane: str = COMPAT) -> str:
    stand_in = STAND_INS[lane]
    recipe = [dataclasses.astuple(stand_in), BASE_PYTHON]
    name = f"localhost/tfxflow-standin-base:{lane}"
    if stand_in.python:
        version = ".".join(map(str, sys.version_info[:3]))
        recipe += [_python_prefix(), version]
        name += f"-py{version}"
    return f"{name}-{hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:10]}"


def base_image(log: str, lane: str = COMPAT) -> str:
    """The stand-in for `lane`'s base (see the module's docstring); built once, then reused."""
    stand_in = STAND_INS[lane]
    tag = base_tag(lane)
    if image_exists(tag):
        return tag
    work = os.path.join(cache_dir(), "base")
    packages = hashlib.sha256(",".join(stand_in.packages).encode()).hexdigest()[:10]
    rootfs = os.path.join(work, f"rootfs-{stand_in.suite}-{packages}")
    done = rootfs + ".done"
    if not os.path.exists(done):
        shutil.rmtree(rootfs, ignore_errors=True)
        os.makedirs(work, exist_ok=True)
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(stand_in.packages),
                stand_in.suite,
                rootfs,
                DEBIAN_MIRROR,
            ],
            log=log,
        )
        open(done, "w").close()
    with tempfile.TemporaryDirectory(dir=work) as context:
        layer = os.path.join(context, "rootfs")
        # The rootfs as debootstrap left it, plus Python; copied so the cached rootfs stays pristine.
        _run(["cp", "-a", rootfs, layer], log=log)
        if stand_in.python:
            prefix = os.path.join(layer, BASE_PYTHON.lstrip("/"))
            shutil.copytree(
                _python_prefix(),
                prefix,
                symlinks=True,
                # This machine's site hook that adds its proxy's CA to certifi: not part of a Python.
                ignore=shutil.ignore_patterns("_sandboxing_*", "__pycache__"),
            )
            _relocate_scripts(os.path.join(prefix, "bin"), _python_prefix(), BASE_PYTHON)
            # pyenv's build links libpython by an absolute RUNPATH under /root/.pyenv; the loader's cache finds it.
            with open(os.path.join(layer, "etc", "ld.so.conf.d", "python.conf"), "w") as f:
                f.write(f"{BASE_PYTHON}/lib\n")
            _run(["chroot", layer, "/sbin/ldconfig"], log=log)
        for uid, user in stand_in.users:
            _run(["chroot", layer, "useradd", "--uid", str(uid), "--user-group", "--create-home", user], log=log)
        shutil.copy(CA_BUNDLE, os.path.join(layer, CA_BUNDLE.lstrip("/")))
        _run(["tar", "-C", layer, "-cf", os.path.join(context, "rootfs.tar"), "."], log=log)
        shutil.rmtree(layer)
        path = (f"{BASE_PYTHON}/bin:" if stand_in.python else "") + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
        with open(os.path.join(context, "Containerfile"), "w") as f:
            f.write(
                "FROM scratch\n"
                "ADD rootfs.tar /\n"
                f"ENV PATH={path}:/sbin:/bin\n"
                f"ENV SSL_CERT_FILE={CA_BUNDLE}\n"
                "ENV LANG=C.UTF-8\n"
                f"WORKDIR {stand_in.workdir}\n"
                f'CMD ["{"python" if stand_in.python else "bash"}"]\n'
            )
        _buildah(
            "bud", "--isolation", "chroot", "-t", tag, "-f", os.path.join(context, "Containerfile"), context, log=log
        )
    return tag


def _relocate_scripts(bin_dir: str, old: str, new: str) -> None:
    """Point the `#!` lines of pip and friends at the relocated interpreter."""
    for name in os.listdir(bin_dir):
        path = os.path.join(bin_dir, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            head = f.read(2)
            if head != b"#!":
                continue
            text = f.read()
        with open(path, "wb") as f:
            f.write(b"#!" + text.replace(old.encode(), new.encode()))


_BUILDS: Dict[Tuple[str, str], "concurrent.futures.Future[str]"] = {}


def remove_leftovers() -> List[str]:
    """Removes what earlier sessions left in the store: working containers of builds that were stopped, and images
    no tag leads to (a rebuilt image's predecessor and the layers only it used: 4.7 GB each after a lock change).
    Only while no build runs: a running build's layers have no tag yet. Returns the removed images' ids."""
    if _BUILDS:
        raise RuntimeError("remove_leftovers() while builds run would remove their untagged layers")
    _buildah("rm", "--all", check=False)
    removed = _buildah("rmi", "--prune", check=False)
    return removed.stdout.decode().split() if removed.returncode == 0 else []


def project_image_in_background(log: str, lane: str = COMPAT) -> "concurrent.futures.Future[str]":
    """`project_image(log, lane)` on a thread of its own, started once per log and lane: a session starts it with
    its first test, so that the build's downloads and disk writes overlap the tests that keep the cores busy."""
    if (log, lane) not in _BUILDS:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"image-build-{lane}")
        _BUILDS[log, lane] = pool.submit(project_image, log, lane)
        pool.shutdown(wait=False)
    return _BUILDS[log, lane]


def project_image(log: str, lane: str = COMPAT, base: Optional[str] = None) -> str:
    """`kubeflow/Dockerfile` built as it is for `lane` on its stand-in base; layers are reused while their inputs
    match. Returns the tag."""
    base = base or base_image(log, lane)
    tag = PROJECT_TAGS[lane]
    _buildah(
        "bud",
        "--isolation",
        "chroot",
        "--layers",
        "--build-arg",
        f"BASE_IMAGE={base}",
        "--build-arg",
        f"LANE={lane}",
        "-t",
        tag,
        "-f",
        os.path.join(REPO, "kubeflow", "Dockerfile"),
        REPO,
        log=log,
    )
    return tag


class ImageCommand:
    """Runs commands in fresh containers of one image, as a pod would: the image's user, working directory and
    environment plus `env`; `mounts` are (host folder, container path) pairs."""

    def __init__(self, tag: str, hosts: Optional[Mapping[str, str]] = None):
        """`hosts`: name -> address entries of the containers' /etc/hosts, as a cluster's DNS would answer
        (e.g. seaweedfs.kubeflow -> 127.0.0.1, where the tests' S3 server listens)."""
        self.tag = tag
        self.hosts = dict(hosts or {})
        self.config = image_config(tag)

    @property
    def env(self) -> Dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        mounts: Sequence[Tuple[str, str]] = (),
        stdout=None,
        timeout: Optional[float] = None,
    ) -> int:
        added = [f"--add-host={name}:{address}" for name, address in self.hosts.items()]
        container = _buildah("from", "--pull-never", *added, self.tag).stdout.decode().strip()
        try:
            args = ["run", "--isolation", "chroot", "--network", "host"]
            for host, inside in mounts:
                args += ["--volume", f"{host}:{inside}:rw"]
            for key, value in env.items():
                args += ["--env", f"{key}={value}"]
            result = subprocess.run(
                _buildah_argv(*args, container, "--", *argv),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
            return result.returncode
        finally:
            _buildah("rm", container, check=False)


def output_of(tag: str, argv: Sequence[str], folder: str, mounts: Sequence[Tuple[str, str]] = ()) -> str:
    """What `argv` prints (stdout and stderr) in a container of `tag`, run as a pod runs a step; asserts it exits 0."""
    with open(os.path.join(folder, "output.txt"), "w+b") as f:
        code = ImageCommand(tag).run(argv, {}, mounts=mounts, stdout=f)
        f.seek(0)
        text = f.read().decode()
    assert code == 0, text[-4000:]
    return text


def assert_starts_steps_as_a_pod_needs(tag: str) -> None:
    """The image's user (numeric, non-root), its writable home as the working folder, the steps' command."""
    from tfxflow.pipeline.kfp import compiler

    config = image_config(tag)
    assert config["User"] == "1000:1000" and config["WorkingDir"] == "/home/tfxflow"
    assert config["Entrypoint"] == list(compiler.ENTRYPOINT)
