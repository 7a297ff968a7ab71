"""The package's layers, read from every import statement, those inside functions and relative ones included:
components never reach up into the pipeline (the settings machinery both use lives in components/), neither
runner (pipeline/local, pipeline/kfp) imports the other, and no two modules import each other, directly or round a
longer cycle."""

import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pipeline", "components", "schemas")


def _graph() -> dict:
    """{module: {tfxflow modules it imports}} over the three package folders."""
    graph = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                module = "tfxflow." + ".".join(parts)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                package_of = module.split(".")[:-1] if name != "__init__.py" else module.split(".")
                imported = set()
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        imported |= {alias.name for alias in node.names}
                    elif isinstance(node, ast.ImportFrom):
                        base = _absolute(node, package_of)
                        imported |= ({base} if base else set()) | {
                            f"{base}.{alias.name}" if base else alias.name for alias in node.names
                        }
                graph[module] = {m for m in imported if m.startswith("tfxflow.")}
    known = set(graph)
    # `from tfxflow.pipeline import config` names the module tfxflow.pipeline.config; keep only modules.
    return {m: {i for i in imports if i in known and i != m} for m, imports in graph.items()}


def _absolute(node: ast.ImportFrom, package: list) -> str:
    """The module an ImportFrom names: `from ..x import y` in tfxflow.a.b.c is tfxflow.a.x."""
    if not node.level:
        return node.module or ""
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def test_the_graph_reads_the_imports_it_should():
    graph = _graph()
    assert "tfxflow.pipeline.heartbeat" in graph["tfxflow.pipeline.local.runner"]
    assert "tfxflow.pipeline.beam_runners" in graph["tfxflow.pipeline.config"]
    assert len(graph) > 60


def test_relative_imports_are_read_as_the_modules_they_name():
    package = ["tfxflow", "components", "model"]
    (sibling, parent, own) = (
        ast.parse(code).body[0]
        for code in ("from .hardware import HardwareConfig", "from ...pipeline import config", "from . import text")
    )
    assert _absolute(sibling, package) == "tfxflow.components.model.hardware"
    assert _absolute(parent, package) == "tfxflow.pipeline"
    assert _absolute(own, package) == "tfxflow.components.model"


def test_components_never_import_the_pipeline():
    graph = _graph()
    reaching_up = {
        module: sorted(i for i in imports if i.startswith("tfxflow.pipeline"))
        for module, imports in graph.items()
        if module.startswith("tfxflow.components")
    }
    assert not {m: i for m, i in reaching_up.items() if i}
    # The settings machinery both layers declare their flags with imports nothing of the project.
    assert not graph["tfxflow.components.settings"]


def test_neither_runner_imports_the_other():
    graph = _graph()
    for runner, other in (
        ("tfxflow.pipeline.local", "tfxflow.pipeline.kfp"),
        ("tfxflow.pipeline.kfp", "tfxflow.pipeline.local"),
    ):
        crossing = {
            m: sorted(i for i in imports if i.startswith(other)) for m, imports in graph.items() if m.startswith(runner)
        }
        assert not {m: i for m, i in crossing.items() if i}, runner


def test_no_import_cycle():
    graph = _graph()
    state, cycles = {}, []

    def visit(module, path):
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                cycles.append(path[path.index(imported) :] + [imported] if imported in path else [module, imported])
            elif imported not in state:
                visit(imported, path + [imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package's __init__ importing its own submodules is not a cycle of layers.
    cycles = [c for c in cycles if not all(m.startswith(c[0] + ".") or m == c[0] for m in c[1:])]
    assert not cycles, cycles
