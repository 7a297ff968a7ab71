"""The set-up on a machine without Python 3.10: `make install` gets one with uv, or says in one line what to
install and leaves nothing half-made. The download of Python cannot happen here (its mirror is a closed port on
loopback, as it would be behind a firewall); the uv that tries it is the Makefile's own, from the PATH or PyPI."""

import os
import shutil
import subprocess

import pytest

from tests import helpers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = (
    *("make", "sh", "bash", "env", "mktemp", "rm", "tail", "head", "grep", "sed", "cat", "test", "dirname"),
    *("getconf", "awk", "sort", "ldconfig", "printf"),  # lanes/pick
)


def _machine(tmp_path, uv_on_path: bool):
    """A folder holding the Makefile and the lock, and a PATH with the usual tools and a python3 that is not 3.10."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Makefile", "requirements-compat.lock", "requirements-current.lock", "setup.py", ".python-version"):
        shutil.copy(os.path.join(REPO, name), project / name)
    shutil.copytree(os.path.join(REPO, "lanes"), project / "lanes")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    system_python = next(p for p in ("/usr/bin/python3.11", "/usr/bin/python3") if os.path.exists(p))
    os.symlink(system_python, bin_dir / "python3")
    if uv_on_path:
        os.symlink(os.path.join(REPO, ".venv", "bin", "uv"), bin_dir / "uv")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(scratch),
        "UV_PYTHON_INSTALL_DIR": str(tmp_path / "pythons"),
        # Where uv downloads Python builds from: nothing listens there.
        "UV_PYTHON_INSTALL_MIRROR": f"http://127.0.0.1:{helpers.free_port()}/python-build-standalone",
        "UV_HTTP_RETRIES": "0",
    }
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "UV_INDEX_URL"):
        if key in os.environ:  # the machine's own package registry
            env[key] = os.environ[key]
    return project, env


def _assert_refused_cleanly(tmp_path, project, result):
    assert result.returncode != 0
    assert "python3.10 is not on this machine: installing Python 3.10 with uv (uv python install 3.10)" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: python3.10 is not on this machine and uv could not download it (")
    assert "Failed to download `http://127.0.0.1:" in lines[0] and "Connection refused" in lines[0]
    assert lines[0].endswith(
        "install Python 3.10 (pyenv install 3.10, or your system's python3.10 package), then run make again"
    )
    # Nothing half-made: no venv, no scratch folder, no partly installed Python.
    assert not (project / ".venv").exists()
    assert os.listdir(tmp_path / "tmp") == []
    pythons = tmp_path / "pythons"
    assert not pythons.exists() or not [p for p in os.listdir(pythons) if p.startswith("cpython")]


@pytest.mark.integration
def test_without_python_310_uv_from_the_path_tries_and_the_refusal_says_what_to_install(tmp_path):
    project, env = _machine(tmp_path, uv_on_path=True)
    result = subprocess.run(["make", "install"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    _assert_refused_cleanly(tmp_path, project, result)


@pytest.mark.integration
def test_without_python_310_or_uv_the_pinned_uv_comes_from_pypi(tmp_path):
    project, env = _machine(tmp_path, uv_on_path=False)
    result = subprocess.run(["make", "install"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    _assert_refused_cleanly(tmp_path, project, result)


@pytest.mark.integration
def test_a_venv_two_checkouts_share_is_reinstalled_for_the_one_that_uses_it(tmp_path):
    """make test-current's venv lives in the Debian 13 root, shared by every checkout that runs it: the editable
    install belongs to the checkout that made it last, so an earlier checkout's stamp must not say it is current."""
    lock = tmp_path / "tiny.lock"
    lock.write_text("six==1.17.0\n")
    venv = tmp_path / "venv"
    checkouts = []
    for name in ("a", "b"):
        project = tmp_path / name
        project.mkdir()
        for file in ("Makefile", "setup.py", "README.md"):
            shutil.copy(os.path.join(REPO, file), project / file)
        shutil.copytree(os.path.join(REPO, "lanes"), project / "lanes")
        for folder in ("pipeline", "components", "schemas"):
            (project / folder).mkdir()
            (project / folder / "__init__.py").write_text("")
        checkouts.append(project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "MAKE"))}
    python = os.path.join(REPO, ".venv", "bin", "python")

    def install(project):
        args = ["make", "install", "LANE=compat", f"PYTHON={python}", f"VENV={venv}", f"LOCK={lock}"]
        result = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
        found = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import tfxflow.pipeline as p; print(p.__file__)"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout, os.path.dirname(os.path.dirname(found.stdout.strip()))

    (first,) = [install(checkouts[0])[1]]
    assert first == str(checkouts[0])
    assert install(checkouts[1])[1] == str(checkouts[1])
    out, again = install(checkouts[0])
    assert "uv pip install" in out and again == str(checkouts[0])
    # Used again with nothing changed, it is not reinstalled.
    out, again = install(checkouts[0])
    assert "uv pip" not in out and again == str(checkouts[0])
    # `make -s venv` (the README's `. "$(make -s venv)/bin/activate"`): the set-up's output goes to stderr, the
    # folder alone to stdout, installing where needed.
    args = ["make", "-s", "venv", "LANE=compat", f"PYTHON={python}", f"VENV={venv}", f"LOCK={lock}"]
    runs = [subprocess.run(args, cwd=checkouts[1], env=env, capture_output=True, text=True, timeout=600) for _ in "ab"]
    assert [(done.returncode, done.stdout) for done in runs] == [(0, f"{venv}\n")] * 2, runs[0].stderr
    # The venv was the other checkout's: it is this one's now.
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import tfxflow.pipeline as p; print(p.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert os.path.dirname(os.path.dirname(found.stdout.strip())) == str(checkouts[1])
