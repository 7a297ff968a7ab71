"""The PyTorch reference's script and environment, checked without torch: its config keys and its pins."""

import ast
import json
import os
import re

import pytest

from benchmarks.reference import torch_finetune

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")
SCRIPT = os.path.join(HERE, "reference", "torch_finetune.py")
REQUIREMENTS = os.path.join(HERE, "reference", "requirements.txt")


def _tree():
    with open(SCRIPT, encoding="utf-8") as f:
        return ast.parse(f.read())


def _documented_keys(docstring):
    """The first word of each indented line under 'CONFIG.json keys:', up to the next blank line."""
    block = docstring.split("CONFIG.json keys:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


def test_the_config_keys_are_the_documented_ones_and_those_the_code_reads():
    tree = _tree()
    documented = _documented_keys(ast.get_docstring(tree))
    declared = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["CONFIG_KEYS"]
    )
    read = {
        node.slice.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "config"
        and isinstance(node.slice, ast.Constant)
    }
    assert documented == list(declared)
    assert read == set(declared)
    assert len(declared) == 15 and {"folder", "pooling", "warmup_timing_steps"} <= read


def test_the_script_imports_nothing_of_the_project():
    roots = set()
    for node in ast.walk(_tree()):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add(node.module.split(".")[0])
    assert roots == {"json", "os", "platform", "sys", "threading", "time", "numpy", "torch", "transformers"}


def test_a_config_with_a_key_too_many_or_too_few_is_refused(tmp_path):
    config = {key: 1 for key in torch_finetune.CONFIG_KEYS} | {"pooling": "mean"}
    good = tmp_path / "good.json"
    good.write_text(json.dumps(config))
    assert torch_finetune.read_config(str(good)) == config
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({k: v for k, v in config.items() if k != "seed"} | {"sed": 1}))
    with pytest.raises(SystemExit, match=r"missing \['seed'\], unknown \['sed'\]"):
        torch_finetune.read_config(str(bad))
    bad.write_text(json.dumps(config | {"pooling": "max"}))
    with pytest.raises(SystemExit, match="pooling is 'max'"):
        torch_finetune.read_config(str(bad))


def test_every_requirement_is_pinned_and_torch_is_the_cpu_builds_release_first():
    with open(REQUIREMENTS, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    bad = [line for line in lines if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.]*", line)]
    assert bad == []
    names = [line.split("==")[0].lower() for line in lines]
    assert len(names) == len(set(names))
    assert lines[0] == "torch==2.13.0"
    assert {"transformers", "safetensors", "tokenizers", "numpy"} <= set(names)
