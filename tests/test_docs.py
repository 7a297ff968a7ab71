"""What the READMEs and the Dockerfile name must exist: every module path of the package they give, every
`from ... import ...` in their commands, every flag of their `tfxflow` command lines, and the KFP version
table's endpoints. A rename then fails here instead of in a user's terminal."""

import importlib
import os
import re
import shlex

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", os.path.join("kubeflow", "README.md"), os.path.join("kubeflow", "Dockerfile"))


def _read(path: str) -> str:
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def _resolves(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ModuleNotFoundError:
        module, _, attr = name.rpartition(".")
        return bool(module) and _resolves(module) and hasattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_path_the_docs_name_exists(doc):
    names = set(re.findall(r"\btfxflow\.(?:pipeline|components|schemas)(?:\.\w+)*", _read(doc)))
    assert names, doc
    assert not sorted(n for n in names if not _resolves(n))


@pytest.mark.parametrize("doc", DOCS[:2])
def test_every_python_import_in_the_docs_commands_works(doc):
    imports = re.findall(r"from ((?:tfxflow|pipeline|components|schemas)[\w.]*) import (\w+)", _read(doc))
    broken = [f"{m}.{n}" for m, n in imports if not _resolves(f"{m}.{n}")]
    assert not broken


def _commands(doc: str):
    """Each `tfxflow <command> [<sub>] ...` line of the doc's code blocks, with its continuation lines."""
    text = _read(doc)
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S):
        for command in re.sub(r"\\\n\s*", " ", block).splitlines():
            command = command.split(" #")[0].strip()
            if re.match(r"(\.venv/bin/)?tfxflow ", command):
                yield shlex.split(command[command.index("tfxflow ") :].replace("$", "X"))


@pytest.mark.parametrize("doc", DOCS[:2])
def test_every_flag_of_the_docs_command_lines_parses(doc):
    from tfxflow.pipeline.cli.main import build_parser

    parser, parsed = build_parser(), 0
    for argv in _commands(doc):
        if len(argv) < 2 or argv[1] in ("-h", "--help"):
            continue
        try:
            parser.parse_args(argv[1:])
        except SystemExit as e:
            raise AssertionError(f"{doc}: {' '.join(argv)}") from e
        parsed += 1
    assert parsed >= 3, doc


def test_the_kfp_version_table_is_the_compilers():
    from tfxflow.pipeline.kfp import compiler as kf

    rows = re.findall(r"^\| ([0-9., tto]+) \| [^|]+ \| `(http://[^`]+)` \|", _read("kubeflow/README.md"), re.M)
    covered = set()
    for versions, endpoint in rows:
        if " to " in versions:
            first, last = (int(v.split(".")[1]) for v in versions.split(" to "))
            listed = [f"2.{m}" for m in range(first, last + 1)]
        else:
            listed = [v.strip() for v in versions.split(",")]
        for version in listed:
            assert kf.kfp_object_store(version) == endpoint, version
            covered.add(version)
    assert covered == set(kf.KFP_VERSIONS)
