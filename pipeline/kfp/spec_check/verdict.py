"""The check of a compiled spec file and its report: every rule group run on the spec, in the order the backend
meets them, and the problems as one readable report."""

from __future__ import annotations

import textwrap
from typing import List, Sequence

import yaml

from tfxflow.pipeline.kfp.spec_check.dags import DagRules
from tfxflow.pipeline.kfp.spec_check.executors import ExecutorRules
from tfxflow.pipeline.kfp.spec_check.k8s_platform import PlatformRules
from tfxflow.pipeline.kfp.spec_check.rules import Problem, as_dict
from tfxflow.pipeline.kfp.spec_check.structure import StructureRules


class SpecChecker(StructureRules, DagRules, ExecutorRules, PlatformRules):
    """Runs the rules on one spec; collects Problems in `problems`."""

    def run(self) -> None:
        self.check_document()
        root = as_dict(self.spec.get("root"))
        self.walk("root", root)
        for name, component in self.reached.items():
            if name not in self.refused:
                self.check_component(name, component)
        self.check_dag("root", root)
        for name, component in self.reached.items():
            if "dag" in component and name not in self.refused:
                self.check_dag(name, component)
        self.check_root_parameters(root)
        self.check_pipeline_root()
        self.check_platform()


def check_file(path: str) -> List[Problem]:
    """Every problem of the compiled file at `path`; ValueError when it is not a KFP pipeline spec."""
    try:
        with open(path, encoding="utf-8") as f:
            documents = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not a KFP pipeline spec: invalid YAML: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the compiled spec: {e}") from e
    try:
        return check_spec(documents)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def check_spec(documents: Sequence[dict]) -> List[Problem]:
    """Every problem of a compiled spec given as its YAML documents (PipelineSpec, optional platform spec);
    empty when the backend admits and runs it as written. ValueError when no document is a pipeline spec."""
    specs = [d for d in documents if isinstance(d, dict) and "root" in d]
    if not specs:
        raise ValueError(
            "not a KFP pipeline spec: no YAML document has a 'root' component "
            "(expected the output of `tfxflow kubeflow compile`)"
        )
    problems = []
    if len(specs) > 1:
        problems.append(
            Problem(
                "pipeline",
                "spec-format",
                "more than one pipeline spec in the file; upload refuses it with 'multiple pipeline "
                "specs provided' (apiserver/template/v2_template.go NewV2SpecTemplate). Fix: keep "
                "one.",
            )
        )
    platforms = [d for d in documents if isinstance(d, dict) and "platforms" in d]
    checker = SpecChecker(specs[0], platforms)
    checker.run()
    return problems + checker.problems


def format_problems(path: str, problems: Sequence[Problem]) -> str:
    """A readable multi-line report of `check_file(path)`."""
    if not problems:
        return f"{path}: admitted: no problems the KFP backend would refuse or mishandle"
    lines = [f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''} for the KFP backend:"]
    for problem in problems:
        lines.append(f"  [{problem.rule}] {problem.where}")
        lines.append(
            textwrap.fill(
                problem.message,
                width=110,
                initial_indent=" " * 6,
                subsequent_indent=" " * 6,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines)
