"""The step image installs the environment the tests run with: the same lock file, the same uv, the project."""

import importlib.metadata
import os
import re

from tests import helpers
from tfxflow.components import lane

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts: str) -> str:
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def _lock_pins() -> dict:
    """The pins of this lane's lock (a marker of the current lane's is read for this interpreter)."""
    from packaging.markers import Marker

    pins = {}
    for line in _read(f"requirements-{lane.name()}.lock").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version, marker = re.fullmatch(
                r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^;\s]+)\s*(?:;(.*))?", line
            ).groups()
            if marker is None or Marker(marker.strip()).evaluate():
                pins[name.lower()] = version
    return pins


def test_image_installs_the_lock_the_makefile_installs():
    dockerfile, makefile = _read("kubeflow", "Dockerfile"), _read("Makefile")
    assert re.search(r"^ARG BASE_IMAGE=tensorflow/tfx:1\.16\.0$", dockerfile, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", dockerfile, re.M)
    # One Dockerfile for both lanes: the build argument names the lock, as the Makefile's lane does.
    assert re.search(r"^ARG LANE=compat$", dockerfile, re.M)
    assert "COPY requirements-${LANE}.lock ./" in dockerfile
    commands = re.sub(r"\s*\\\n\s*", " ", dockerfile)  # continued lines joined
    assert re.search(r"uv pip install [^\n]*--no-deps -r requirements-\$\{LANE\}\.lock", commands)
    assert re.search(r"^LOCK := requirements-\$\(or \$\(LANE\),compat\)\.lock$", makefile, re.M)
    assert re.search(r"uv pip sync [^\n]*\$\(LOCK\)", makefile)
    for name in (lane.COMPAT, lane.CURRENT):
        assert os.path.exists(os.path.join(REPO, f"requirements-{name}.lock"))
    uv_image = re.search(r"^ARG UV_VERSION=(\S+)$", dockerfile, re.M).group(1)
    uv_make = re.search(r"^UV_VERSION := (\S+)$", makefile, re.M).group(1)
    assert uv_image == uv_make
    for source in re.findall(r"^COPY (\S+) \./", dockerfile, re.M) + ["setup.py", "README.md"]:
        for name in (lane.COMPAT, lane.CURRENT):  # what each lane's build copies
            assert os.path.exists(os.path.join(REPO, source.replace("${LANE}", name))), source
    for package in ("pipeline", "components", "schemas"):
        assert f"COPY {package} ./{package}" in dockerfile


def test_the_tests_run_on_exactly_the_locked_versions():
    pins = _lock_pins()
    if lane.name() == lane.COMPAT:
        assert pins["tfx"] == "1.16.0" and pins["apache-beam"].startswith("2.59.")
    else:
        assert pins["tfx"] == "1.21.0" and pins["tensorflow"].startswith("2.21.")
    mismatched = {}
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            mismatched[name] = (version, installed)
    assert not mismatched, f"locked vs installed: {mismatched}"


def test_the_image_never_receives_local_state():
    ignored = _read(".dockerignore").split()
    for path in (".venv", ".git", "tfxflow_home", "mlruns"):
        assert path in ignored


def test_image_runs_as_a_numeric_non_root_user():
    """KFP does not force it (its executor template sets a seccomp profile only and its own test asserts no
    RunAsNonRoot, argocompiler/security_context.go), but a pod or namespace that demands runAsNonRoot (Pod
    Security "restricted") refuses root and named users; so the steps run as a numeric user."""
    dockerfile = _read("kubeflow", "Dockerfile")
    users = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert users, "no USER: the steps would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert dockerfile.index("USER") > dockerfile.rindex("RUN uv pip install")  # installs ran as root
    # The folder a step starts in is the user's own (a root-owned WORKDIR is not writable by it).
    workdirs = re.findall(r"^WORKDIR (\S+)$", dockerfile, re.M)
    home = re.search(r"--home-dir (\S+)", dockerfile).group(1)
    assert workdirs[-1] == home and dockerfile.rindex("WORKDIR") > dockerfile.index("USER")


def test_the_image_build_checks_every_module_path_the_compiled_spec_names():
    """The check the Dockerfile runs imports what the compiler puts into the spec, by the same names."""
    from tfxflow.pipeline import definition
    from tfxflow.pipeline.kfp import compiler, entrypoint

    dockerfile = _read("kubeflow", "Dockerfile")
    assert f"python -m {compiler.ENTRYPOINT[2]} {entrypoint.CHECK_IMAGE_FLAG}" in dockerfile
    assert re.search(r'^ENTRYPOINT \["python", "-m", "tfxflow\.pipeline\.kfp\.entrypoint"\]$', dockerfile, re.M)
    assert tuple(compiler.ENTRYPOINT) == ("python", "-m", "tfxflow.pipeline.kfp.entrypoint")
    from tfxflow.pipeline.kfp import training_job

    paths = entrypoint.check_image()
    assert definition.PREPROCESSING_FN in paths and definition.RUN_FN in paths
    assert training_job.LAUNCHER_MODULE in paths  # the Trainer step's command with several workers
    # Every dotted tfxflow name the Dockerfile's comments give is importable (they went stale once).
    import importlib

    for name in re.findall(r"\btfxflow(?:\.\w+)+", dockerfile):
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module), attr), name


def test_the_environment_holds_compiled_bytecode_for_the_heavy_imports():
    """`make install` compiles site-packages: without it every process compiles TensorFlow's, TFX's and Beam's
    sources again where $PYTHONDONTWRITEBYTECODE is set (CI, images), about 7 s a process."""
    import importlib.util

    for name in ("tensorflow", "tfx.components", "apache_beam", "tensorflow_model_analysis", "mlflow"):
        source = importlib.util.find_spec(name).origin
        cached = importlib.util.cache_from_source(source)
        assert os.path.exists(cached), f"{cached} missing: reinstall with `rm .venv/.installed && make install`"


def test_every_build_argument_the_docs_give_is_one_the_dockerfile_declares():
    dockerfile = _read("kubeflow", "Dockerfile")
    declared = set(re.findall(r"^ARG (\w+)", dockerfile, re.M))
    given = [
        found
        for doc in (*((path,) for path in helpers.doc_files()), ("kubeflow", "README.md"), ("kubeflow", "Dockerfile"))
        for found in re.findall(r"--build-arg[ =](\w+)=([\w:/@<>.-]*[\w>])", _read(*doc))
    ]
    assert {"LANE", "BASE_IMAGE"} <= {name for name, _ in given}
    assert not sorted({name for name, _ in given} - declared)
    assert {value for name, value in given if name == "LANE"} <= {lane.COMPAT, lane.CURRENT}
