"""Evaluator executor for a baseline found by a step rather than by a resolver.

On Kubeflow the baseline model comes from `ServedBaseline` (components/baseline.py), whose output exists in
every run; with nothing served yet it holds no SavedModel. TFX's Evaluator would try to load it; this executor
drops such an empty baseline first, so a first run is judged on the candidate alone, as a resolver that found
nothing would have it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.io import fileio
from tfx.types import standard_component_specs
from tfx.utils import path_utils


def has_saved_model(model: types.Artifact) -> bool:
    """Whether the Model artifact holds a SavedModel where TFMA looks for one."""
    return fileio.exists(os.path.join(path_utils.serving_model_path(model.uri), "saved_model.pb"))


class Executor(tfx_evaluator.Executor):
    """TFX's Evaluator, without a baseline model that holds no SavedModel."""

    def Do(self, input_dict: Dict[str, List[types.Artifact]], output_dict: Dict[str, List[types.Artifact]],
           exec_properties: Dict[str, Any]) -> None:
        key = standard_component_specs.BASELINE_MODEL_KEY
        baselines = input_dict.get(key) or []
        if baselines and not all(has_saved_model(model) for model in baselines):
            logging.info("No baseline model (nothing served yet): the candidate is judged on its own thresholds.")
            input_dict = {k: v for k, v in input_dict.items() if k != key}
        super().Do(input_dict, output_dict, exec_properties)
