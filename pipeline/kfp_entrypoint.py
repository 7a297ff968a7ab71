"""Container entry point of every Kubeflow step: TFX's `kubeflow_v2_run_executor`, with the artifact types put
back that open-source KFP's launcher leaves out.

TFX reads each artifact's class from the `type` the launcher passes in the executor input. Vertex AI passes the
compiled instance schema (`title: tfx.Examples`); open-source KFP passes none, or a `system.*` title, and TFX
fails before the executor starts (tensorflow/tfx#7768). The compiler (pipeline/kubeflow_runner.py) adds
`--tfxflow_artifact_types '{"examples": "tfx.Examples", ...}'` for the step's inputs and outputs; this module
restores those titles where the launcher's are missing, then hands over to TFX unchanged.
"""

from __future__ import annotations

import json
import sys
from typing import Dict, List, Mapping, Optional, Sequence

import yaml

TYPES_FLAG = "--tfxflow_artifact_types"
INVOCATION_FLAG = "--json_serialized_invocation_args"


def artifact_title(artifact_type: Mapping) -> Optional[str]:
    """The TFX type title of a KFP artifact type (`schemaTitle`, or the `title` of its instance schema)."""
    if artifact_type.get("schemaTitle"):
        return artifact_type["schemaTitle"]
    schema = artifact_type.get("instanceSchema")
    if schema:
        loaded = yaml.safe_load(schema)
        if isinstance(loaded, dict) and loaded.get("title"):
            return str(loaded["title"])
    return None


def restore_artifact_types(executor_input: dict, titles: Mapping[str, str]) -> List[str]:
    """Sets `title` from `titles` on every input and output artifact whose type is missing or a KFP `system.*`
    type; returns the keys it changed."""
    changed = []
    for side in ("inputs", "outputs"):
        for key, entry in (executor_input.get(side, {}).get("artifacts") or {}).items():
            title = titles.get(key)
            if not title:
                continue
            for artifact in entry.get("artifacts", []):
                current = artifact_title(artifact.get("type") or {})
                if current is None or current.startswith("system."):
                    artifact["type"] = {"instanceSchema": f"title: {title}\ntype: object\n"}
                    changed.append(key)
    return changed


def rewrite_argv(argv: Sequence[str]) -> List[str]:
    """`argv` without the types flag, and with the executor input's artifact types restored."""
    args = list(argv)
    titles: Dict[str, str] = {}
    if TYPES_FLAG in args:
        i = args.index(TYPES_FLAG)
        titles = json.loads(args[i + 1])
        del args[i:i + 2]
    if titles and INVOCATION_FLAG in args:
        i = args.index(INVOCATION_FLAG) + 1
        executor_input = json.loads(args[i])
        if restore_artifact_types(executor_input, titles):
            args[i] = json.dumps(executor_input)
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Runs the step's executor as TFX's Kubeflow V2 entry point does."""
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    app.run(tfx_entrypoint.main, argv=rewrite_argv(sys.argv if argv is None else argv),
            flags_parser=tfx_entrypoint._parse_flags)  # pylint: disable=protected-access


if __name__ == "__main__":
    main()
