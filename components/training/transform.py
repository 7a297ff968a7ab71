"""TFX's Transform whose analyzers read at most `max_analyze_rows` rows of each analyzed split.

tf.Transform's analysis pass costs time with every input row (decoding each tf.Example, the preprocessing
graph's session runs, the analyzers' combiners), and what it computes has converged long before millions of
rows. A split over the bound N is analyzed on every k-th row, k the smallest that leaves at most N
(components/ingest/sampling.py): between N/2 and N rows. At the default N of 200,000, over 100,000 rows or more: a
mean's standard error is at most 0.32% of the column's deviation, a quantile's standard rank error at most 0.16%
against the quantile sketch's own 1% (epsilon 0.01, as tft.bucketize picks for ten buckets), and a value that
makes 30 in a million rows is left out of the sample, and so of its vocabulary, with a chance of at most e^-3
(5%; out-of-vocabulary values are hashed into the OOV buckets). benchmarks/transform_sample.py measures the
model's quality on a sample against the whole. Transform's time stops growing with the
data beyond the bound; the statistics the data gate judged still cover every row (StatisticsGen). The sample
is recorded on the transform graph (`analyze_sample`) and in the run's summary.

The sample holds the analyzed splits only, so only a Transform that reads nothing else is sampled: one that
materializes transformed examples (a module file's run_fn reads them) or computes TFX's pre- and post-transform
statistics reads every split whole. Which preprocessing may be sampled is the pipeline's choice
(pipeline/definition.py: not a module file's, not a multi-class label's vocabulary).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from tfx import types
from tfx.components.transform import component as tfx_transform
from tfx.components.transform import executor as tfx_transform_executor
from tfx.components.transform import executor_utils
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs
from tfx.types.component_spec import ExecutionParameter

from tfxflow.components.ingest import sampling

MAX_ROWS_KEY = "max_analyze_rows"
SAMPLE_PROPERTY = "analyze_sample"  # on the transform graph: {split: {"rows", "every", "sampled"}}
SAMPLE_FOLDER = ".analyze_sample"  # inside the transform graph while the analysis runs, removed after


def reads_only_analyzed_splits(output_dict: Dict[str, List[types.Artifact]], exec_properties: Dict[str, Any]) -> bool:
    """Whether TFX's executor reads nothing but the analyzed splits: it materializes no transformed examples and
    computes no statistics (each reads every transform split)."""
    materialized = output_dict.get(standard_component_specs.TRANSFORMED_EXAMPLES_KEY)
    statistics = not int(exec_properties.get(standard_component_specs.DISABLE_STATISTICS_KEY) or 0)
    return not materialized and not statistics


class Executor(tfx_transform_executor.Executor):
    """TFX's Transform executor on a sample of at most `max_analyze_rows` rows of each analyzed split, when it
    reads nothing else."""

    def Do(
        self,
        input_dict: Dict[str, List[types.Artifact]],
        output_dict: Dict[str, List[types.Artifact]],
        exec_properties: Dict[str, Any],
    ) -> None:
        exec_properties = dict(exec_properties)
        max_rows = int(exec_properties.pop(MAX_ROWS_KEY, 0) or 0)
        if not max_rows or not reads_only_analyzed_splits(output_dict, exec_properties):
            super().Do(input_dict, output_dict, exec_properties)
            return
        splits = executor_utils.ResolveSplitsConfig(
            exec_properties.get(standard_component_specs.SPLITS_CONFIG_KEY),
            input_dict[standard_component_specs.EXAMPLES_KEY],
        ).analyze
        graph = artifact_utils.get_single_instance(output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
        # Beside the output, not in a local temp folder: Beam workers elsewhere must read it.
        folder = os.path.join(graph.uri, SAMPLE_FOLDER)
        with sampling.sampled_input(input_dict, list(splits), max_rows, folder, graph, SAMPLE_PROPERTY) as sampled:
            super().Do(sampled, output_dict, exec_properties)


class TransformSpec(standard_component_specs.TransformSpec):
    """TFX's Transform contract plus the bound on the rows analyzed per split."""

    PARAMETERS = {
        **standard_component_specs.TransformSpec.PARAMETERS,
        MAX_ROWS_KEY: ExecutionParameter(type=int, optional=True),
    }


class Transform(tfx_transform.Transform):
    """TFX's Transform (every argument of it) whose analyzers read at most `max_analyze_rows` rows of each
    analyzed split (0: all), with `Executor`."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, max_analyze_rows: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        # TFX's constructor builds its own spec class, which SPEC_CLASS (checked there) must stay; this instance's
        # spec, which the compilers read, is the same inputs, outputs and parameters plus the bound.
        base = self.spec
        self.spec = TransformSpec(
            **base.inputs, **base.outputs, **base.exec_properties, **{MAX_ROWS_KEY: int(max_analyze_rows)}
        )
