"""The package's layers, read from every import statement, those inside functions and relative ones included:
components never reach up into the pipeline (the settings machinery both use lives in components/), a component
subsystem imports only the shared modules and the subsystems before it, neither runner (pipeline/local,
pipeline/kfp) imports the other, and no two modules import each other, directly or round a longer cycle."""

import ast
import importlib
import inspect
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pipeline", "components", "schemas")
# components/'s subsystems in the order a module may import them: each may import the ones before it and the
# modules directly in components/ (the shared ones), never one after it.
SUBSYSTEMS = ("model", "ingest", "validation", "training", "tuning", "evaluation", "edge", "serving", "tracking")


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


def _subsystem(module: str):
    """The index of `module`'s subsystem in SUBSYSTEMS; -1 for the shared modules of components/; None outside."""
    parts = module.split(".")
    if parts[:2] != ["tfxflow", "components"]:
        return None
    if len(parts) == 2 or (len(parts) == 3 and parts[2] not in SUBSYSTEMS):
        return -1
    return SUBSYSTEMS.index(parts[2])


def test_every_folder_of_components_is_a_subsystem_in_the_order():
    folders = {
        name
        for name in os.listdir(os.path.join(REPO, "components"))
        if os.path.isfile(os.path.join(REPO, "components", name, "__init__.py"))
    }
    assert folders == set(SUBSYSTEMS)


def test_a_subsystem_imports_only_the_shared_modules_and_the_subsystems_before_it():
    graph = _graph()
    backwards = {
        module: sorted(i for i in imports if (_subsystem(i) or -1) > _subsystem(module))
        for module, imports in graph.items()
        if _subsystem(module) is not None
    }
    assert not {m: i for m, i in backwards.items() if i}
    # The rule reads real arrows: the Trainer reads what ingestion counted, the serving check the golden rows.
    assert "tfxflow.components.ingest.csv_input" in graph["tfxflow.components.training.trainer"]
    assert "tfxflow.components.evaluation.golden" in graph["tfxflow.components.serving.serving_check"]


def test_the_shared_modules_import_no_subsystem():
    graph = _graph()
    shared = [m for m in graph if _subsystem(m) == -1]
    assert len([m for m in shared if m != "tfxflow.components"]) <= 12  # components/ keeps at most a dozen modules
    assert not {m: sorted(graph[m]) for m in shared if any(_subsystem(i) != -1 for i in graph[m])}


@pytest.mark.parametrize("subsystem", SUBSYSTEMS)
def test_each_subsystem_exports_the_components_it_defines(subsystem):
    package = importlib.import_module(f"tfxflow.components.{subsystem}")
    assert all(callable(getattr(package, name)) for name in package.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        package.Nothing  # noqa: B018 (the attribute access is the test)
    # Every TFX component a module of the subsystem defines (a class or a function component) is exported.
    from tfx.dsl.components.base import base_component

    folder = os.path.join(REPO, "components", subsystem)
    defined = set()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name != "__init__.py" and name not in ("edge_probe.py",):
            module = importlib.import_module(f"tfxflow.components.{subsystem}.{name[:-3]}")
            defined |= {
                attribute
                for attribute, value in vars(module).items()
                if getattr(value, "__module__", None) == module.__name__
                and inspect.isclass(value)
                and issubclass(value, base_component.BaseComponent)
            }
    exported = {getattr(package, name).__name__ for name in package.__all__}
    assert defined <= exported, defined - exported


def test_no_two_modules_share_a_file_name():
    # A name a newcomer (or a traceback, or `git grep`) reads once should point at one file.
    folders = {}
    for package in ("components", "pipeline"):
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if name.endswith(".py") and name != "__init__.py":
                    folders.setdefault(name, []).append(os.path.relpath(folder, REPO))
    assert len(folders) > 50  # the walk found the modules
    shared = {name: sorted(where) for name, where in folders.items() if len(where) > 1}
    assert not shared, shared
