"""TFX's Evaluator with a bounded evaluation sample, and for a baseline found by a step rather than a resolver.

TFMA costs about 0.3 ms a row on two cores (it runs the model and its transform per batch and keeps the
metrics' histograms), so evaluating every row of a 10-million-row eval split would take longer than
everything else. With `max_eval_rows`, a larger split (its size as ExampleGen recorded it) is evaluated on
every k-th row: rows reach the split by a hash of their content, so every k-th of them, in file order, is a
sample of the data that does not follow the files' order; candidate and baseline are judged on the same rows.
The sample's size is recorded on the evaluation artifact and in the run's summary.

On Kubeflow the baseline model comes from `ServedBaseline` (components/baseline.py), whose output exists in
every run; with nothing served yet it holds no SavedModel. TFX's Evaluator would try to load it; this executor
drops such an empty baseline first, so a first run is judged on the candidate alone, as a resolver that found
nothing would have it.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence

from absl import logging
from tfx import types
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import json_utils, path_utils

from tfxflow.components import csv_input, names, tf_example

MAX_ROWS_KEY = "max_eval_rows"
SAMPLE_FOLDER = ".eval_sample"  # inside the evaluation artifact while TFMA runs, removed after


def has_saved_model(model: types.Artifact) -> bool:
    """Whether the Model artifact holds a SavedModel where TFMA looks for one."""
    return fileio.exists(os.path.join(path_utils.serving_model_path(model.uri), "saved_model.pb"))


def write_sample(files: Sequence[str], every: int, path: str) -> int:
    """Writes every `every`-th record of `files` (GZIP TFRecords, in order) to `path`; returns how many."""
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(list(files), compression_type="GZIP").shard(every, 0).batch(8192)
    with fileio.open(path, "wb") as stream:
        writer = tf_example.TFRecordGzipWriter(stream)
        for batch in dataset:
            writer.write(list(batch.numpy()))
        writer.close()
    return writer.records


def sampled_examples(
    examples: types.Artifact, splits: Sequence[str], max_rows: int, folder: str
) -> Optional[Dict[str, Dict[str, int]]]:
    """Writes a sample of at most `max_rows` rows of each of `splits` that holds more (their sizes from
    ExampleGen's record) under `folder` as an Examples artifact's splits; returns what was sampled per split
    ({"rows", "every", "sampled"}), or None when no split needs it (or no size was recorded)."""
    counts = csv_input.read_rows(examples.uri)
    if not max_rows or counts is None:
        return None
    sizes = {split: counts["split_rows"].get(split, 0) for split in splits}
    if all(rows <= max_rows for rows in sizes.values()):
        return None
    plan = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        source = artifact_utils.get_split_uri([examples], split)
        target = names.split_dir(folder, split)
        fileio.makedirs(target)
        files = sorted(fileio.glob(os.path.join(source, "*")))
        rows = sizes.get(split, 0)
        every = math.ceil(rows / max_rows) if split in sizes and rows > max_rows else 0
        if not every:  # evaluated whole (another split is sampled), or not evaluated
            if split in sizes:
                for name in files:
                    fileio.copy(name, os.path.join(target, os.path.basename(name)))
            continue
        sampled = write_sample(files, every, os.path.join(target, "data_tfrecord-00000-of-00001.gz"))
        plan[split] = {"rows": rows, "every": every, "sampled": sampled}
    return plan


class Executor(tfx_evaluator.Executor):
    """TFX's Evaluator on at most `max_eval_rows` rows per split, without a baseline model that holds no
    SavedModel."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        key = standard_component_specs.BASELINE_MODEL_KEY
        baselines = input_dict.get(key) or []
        if baselines and not all(has_saved_model(model) for model in baselines):
            logging.info("No baseline model (nothing served yet): the candidate is judged on its own thresholds.")
            input_dict = {k: v for k, v in input_dict.items() if k != key}
        exec_properties = dict(exec_properties)
        max_rows = int(exec_properties.pop(MAX_ROWS_KEY, 0) or 0)
        splits = json_utils.loads(exec_properties.get(standard_component_specs.EXAMPLE_SPLITS_KEY) or "null") or [
            "eval"
        ]
        examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
        # Beside the evaluation's output, not in a local temp folder: Beam workers elsewhere must read it.
        evaluation = artifact_utils.get_single_instance(output_dict[standard_component_specs.EVALUATION_KEY])
        folder = os.path.join(evaluation.uri, SAMPLE_FOLDER)
        try:
            plan = sampled_examples(examples, splits, max_rows, folder)
            if plan:
                sample = standard_artifacts.Examples()
                sample.uri = folder
                sample.split_names = examples.split_names
                for name in ("payload_format", "file_format"):
                    if examples.has_custom_property(name):
                        sample.set_string_custom_property(name, examples.get_string_custom_property(name))
                input_dict = {**input_dict, standard_component_specs.EXAMPLES_KEY: [sample]}
                evaluation.set_string_custom_property("eval_sample", json.dumps(plan, sort_keys=True))
                logging.info("Evaluator: a sample of %s", json.dumps(plan))
            super().Do(input_dict, output_dict, exec_properties)
        finally:
            if fileio.exists(folder):
                fileio.rmtree(folder)


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's Evaluator contract plus the bound on the rows evaluated per split."""

    PARAMETERS = {
        **standard_component_specs.EvaluatorSpec.PARAMETERS,
        MAX_ROWS_KEY: ExecutionParameter(type=int, optional=True),
    }


class Evaluator(base_beam_component.BaseBeamComponent):
    """TFMA evaluation and blessing of `model` (against `baseline_model`) on at most `max_eval_rows` rows of the
    eval split (0: all), with `Executor`."""

    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        model: types.BaseChannel,
        baseline_model: Optional[types.BaseChannel],
        eval_config,
        max_eval_rows: int = 0,
    ):
        super().__init__(
            spec=EvaluatorSpec(
                examples=examples,
                model=model,
                baseline_model=baseline_model,
                eval_config=eval_config,
                example_splits=json_utils.dumps(None),
                max_eval_rows=max_eval_rows,
                evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
                blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            )
        )
