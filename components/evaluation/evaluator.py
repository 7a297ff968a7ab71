"""TFX's Evaluator with a bounded evaluation sample, and for a baseline found by a step rather than a resolver.

TFMA's cost grows with every row (it runs the model and its transform per batch and keeps the metrics'
histograms), so evaluating every row of a very large eval split would take longer than everything else. With
`max_eval_rows`, a larger split (its size as ExampleGen recorded it) is evaluated on every k-th row: rows reach
the split by a hash of their content, so every k-th of them, in file order, is a sample of the data that does
not follow the files' order; candidate and baseline are judged on the same rows. The sample's size is recorded
on the evaluation artifact and in the run's summary.

On Kubeflow the baseline model comes from `ServedBaseline` (components/validation/baseline.py), whose output exists in
every run; with nothing served yet it holds no SavedModel. TFX's Evaluator would try to load it; this executor
drops such an empty baseline first, so a first run is judged on the candidate alone, as a resolver that found
nothing would have it.

Before TFMA loads the candidate, its signatures are checked against what the eval config needs (a model of a
user's own run_fn may export none the Evaluator can use): one line says what is missing. A model without
`transform_features` is evaluated on the raw examples, so the label must then be a raw column; a label found in
neither is named in one line. For a regression model, a sample of (label, prediction) pairs of the evaluated rows
is kept beside TFMA's output (`predictions_sample.json`) for the run page's predicted-vs-actual and residual
charts.

With `warm_serving_probe` (a local run: the ServingCheck runs next in the same process), `warm_up` is called
when the evaluation begins: the local runner sets it to the serving check's `warm_probe`, so the probe's
TensorFlow import runs beside TFMA on the other core; only for an evaluation of at most `WARM_PROBE_MAX_ROWS`
rows. The Evaluator knows nothing of the check: the runner that runs both in one process connects them.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from absl import logging
from tfx import types
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import json_utils, path_utils

from tfxflow.components import artifact_files, names
from tfxflow.components.errors import UserCodeError
from tfxflow.components.evaluation import golden
from tfxflow.components.ingest import sampling
from tfxflow.components.model import text

MAX_ROWS_KEY = "max_eval_rows"
WARM_PROBE_KEY = "warm_serving_probe"
# Up to this many evaluated rows the Evaluator takes seconds and the serving probe's TensorFlow import (seconds
# too) is worth running beside it. Beyond, the import is a few percent of the run, and the probe's resident
# memory beside TFMA's larger working set makes the process tree's peak (`make bench ARGS="--scale 100"`
# reports the peak per component): there the probe starts with the check instead.
WARM_PROBE_MAX_ROWS = 20_000
SAMPLE_FOLDER = ".eval_sample"  # inside the evaluation artifact while TFMA runs, removed after
PREDICTIONS_FILE = "predictions_sample.json"  # a regression model's (label, prediction) pairs, for the run page
PREDICTION_PAIRS = 1000
# What a small evaluation starts beside itself for the component that runs next in this process (set by the
# local runner; None elsewhere). Returns whether it started anything.
warm_up: Optional[Callable[[], bool]] = None


def has_saved_model(model: types.Artifact) -> bool:
    """Whether the Model artifact holds a SavedModel where TFMA looks for one."""
    return fileio.exists(os.path.join(path_utils.serving_model_path(model.uri), "saved_model.pb"))


def _signature_defs(model_dir: str) -> Dict[str, Any]:
    """{signature: SignatureDef} of a SavedModel's serving graph, read from its saved_model.pb (nothing is loaded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with fileio.open(os.path.join(model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    found = {}
    for meta_graph in saved_model.meta_graphs:
        if "serve" not in meta_graph.meta_info_def.tags:
            continue
        for name, signature in meta_graph.signature_def.items():
            if not name.startswith("__"):
                found[name] = signature
    return found


def signature_inputs(model_dir: str) -> Dict[str, Dict[str, str]]:
    """{signature: {input name: dtype}} of a SavedModel, read from its saved_model.pb (nothing is loaded)."""
    import tensorflow as tf

    return {
        name: {key: tf.dtypes.as_dtype(t.dtype).name for key, t in signature.inputs.items()}
        for name, signature in _signature_defs(model_dir).items()
    }


def missing_label(model_dir: str, eval_config) -> UserCodeError:
    """The one-line error for TFMA's "no value provided for label": where the Evaluator looked for the label."""
    spec = eval_config.model_specs[0]
    where = "the raw examples' columns"
    for name in spec.preprocessing_function_names:
        outputs = sorted(_signature_defs(model_dir).get(name, {}).outputs) if name else []
        where = f"the outputs of the model's {name} signature ({', '.join(outputs) or 'none'}) or " + where
    return UserCodeError(
        f"the Evaluator found no label '{spec.label_key}' in {where}: name the label the module's "
        "preprocessing_fn outputs in the feature config (label: {name: ..., column: ...})"
    )


def check_model_contract(model_dir: str, eval_config) -> Optional[Any]:
    """Raises UserCodeError, in one line, when the model lacks what the eval config needs: a serving signature
    that takes serialized tf.Examples, and TFMA's `transform_features` where the label comes from it. Returns
    the eval config to use: without `transform_features` and with a raw-column label, one that reads the label
    from the raw examples."""
    signatures = signature_inputs(model_dir)
    spec = eval_config.model_specs[0]
    serving = spec.signature_name or names.SERVING_SIGNATURE
    has = ", ".join(sorted(signatures)) or "none"
    inputs = signatures.get(serving)
    if inputs is None or len(inputs) != 1 or next(iter(inputs.values())) != "string":
        raise UserCodeError(
            f"the trained model has no '{serving}' signature that takes serialized tf.Examples (one string "
            f"input), which the Evaluator and TF Serving's predict API call; its signatures: {has} "
            "(run_fn must save one: see TFX's examples, e.g. taxi_utils_native_keras.py's "
            "_get_tf_examples_serving_signature)"
        )
    missing = [name for name in spec.preprocessing_function_names if name not in signatures]
    if not missing:
        return eval_config
    updated = type(eval_config)()
    updated.CopyFrom(eval_config)
    del updated.model_specs[0].preprocessing_function_names[:]
    return updated


def prediction_pairs(model_dir: str, eval_config, files: Sequence[str], rows: int = PREDICTION_PAIRS):
    """(labels, predictions) of the first `rows` records of `files` (GZIP TFRecords of raw tf.Examples): the
    label as the eval config reads it (the model's `transform_features`, else the raw column), the prediction
    of its serving signature."""
    import numpy as np
    import tensorflow as tf
    from google.protobuf import json_format

    records = [r.numpy() for r in tf.data.TFRecordDataset(list(files), compression_type="GZIP").take(rows)]
    if not records:
        return np.zeros([0]), np.zeros([0])
    spec = eval_config.model_specs[0]
    outputs = golden.evaluator_predictions(model_dir, json_format.MessageToJson(eval_config), records)
    prediction = outputs.get(spec.prediction_key) if spec.prediction_key else next(iter(outputs.values()))
    if spec.preprocessing_function_names:
        transformed = tf.saved_model.load(model_dir).signatures[spec.preprocessing_function_names[0]](
            examples=tf.constant(records)
        )
        labels = np.asarray(transformed[spec.label_key], np.float64).reshape(-1)
    else:
        parsed = tf.io.parse_example(tf.constant(records), {spec.label_key: tf.io.VarLenFeature(tf.float32)})
        labels = tf.sparse.to_dense(parsed[spec.label_key], default_value=np.nan).numpy()[:, 0].astype(np.float64)
    return labels, np.asarray(prediction, np.float64).reshape(len(records), -1)[:, 0]


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
        from google.protobuf import json_format
        from tensorflow_model_analysis.proto import config_pb2 as tfma_config

        candidate = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
        model_dir = path_utils.serving_model_path(candidate.uri)
        text.load_ops_for(model_dir)  # before TFMA loads it (and the baseline, of the same task)
        config_key = standard_component_specs.EVAL_CONFIG_KEY
        eval_config = json_format.Parse(exec_properties[config_key], tfma_config.EvalConfig())
        checked = check_model_contract(model_dir, eval_config)
        if checked is not eval_config:
            logging.info(
                "The model has no %s signature: the Evaluator reads the label '%s' from the raw examples.",
                list(eval_config.model_specs[0].preprocessing_function_names),
                eval_config.model_specs[0].label_key,
            )
            exec_properties[config_key] = json_format.MessageToJson(checked)
        max_rows = int(exec_properties.pop(MAX_ROWS_KEY, 0) or 0)
        splits = json_utils.loads(exec_properties.get(standard_component_specs.EXAMPLE_SPLITS_KEY) or "null") or [
            "eval"
        ]
        if int(exec_properties.pop(WARM_PROBE_KEY, 0) or 0):
            rows = evaluated_rows(input_dict[standard_component_specs.EXAMPLES_KEY][0], splits, max_rows)
            if rows is not None and rows <= WARM_PROBE_MAX_ROWS and warm_up is not None:
                warm_up()
        # Beside the evaluation's output, not in a local temp folder: Beam workers elsewhere must read it.
        evaluation = artifact_utils.get_single_instance(output_dict[standard_component_specs.EVALUATION_KEY])
        folder = os.path.join(evaluation.uri, SAMPLE_FOLDER)
        with sampling.sampled_input(input_dict, splits, max_rows, folder, evaluation, "eval_sample") as input_dict:
            try:
                super().Do(input_dict, output_dict, exec_properties)
            except Exception as err:
                # TFMA's message names neither the label key nor where it looked (a Beam stack trace).
                if "no value provided for label" in str(err):
                    raise missing_label(model_dir, checked) from err
                raise
            if _is_regression(checked):
                examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
                files = sorted(fileio.glob(os.path.join(artifact_utils.get_split_uri([examples], splits[0]), "*")))
                labels, predictions = prediction_pairs(model_dir, checked, files)
                with fileio.open(os.path.join(evaluation.uri, PREDICTIONS_FILE), "w") as f:
                    f.write(json.dumps({"label": labels.tolist(), "prediction": predictions.tolist()}))


def evaluated_rows(examples: types.Artifact, splits: Sequence[str], max_rows: int) -> Optional[int]:
    """How many rows of `splits` the Evaluator reads (each split's size as ExampleGen recorded it, bounded by
    `max_rows` when set); None when no size was recorded."""
    sizes = sampling.split_sizes(examples, splits)
    if sizes is None:
        return None
    return sum(min(size, max_rows) if max_rows else size for size in sizes.values())


def _is_regression(eval_config) -> bool:
    """Whether the config evaluates a regression (its metrics are this project's regression metrics)."""
    return any(m.class_name == "RSquared" for spec in eval_config.metrics_specs for m in spec.metrics)


def read_prediction_pairs(evaluation_uri: str) -> Optional[Dict[str, List[float]]]:
    """The (label, prediction) sample the Evaluator kept for a regression model, or None."""
    return artifact_files.read_json(evaluation_uri, PREDICTIONS_FILE)


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's Evaluator contract plus the bound on the rows evaluated per split and whether to start the serving
    check's probe (1) as the evaluation begins."""

    PARAMETERS = {
        **standard_component_specs.EvaluatorSpec.PARAMETERS,
        MAX_ROWS_KEY: ExecutionParameter(type=int, optional=True),
        WARM_PROBE_KEY: ExecutionParameter(type=int, optional=True),
    }


class Evaluator(base_beam_component.BaseBeamComponent):
    """TFMA evaluation and blessing of `model` (against `baseline_model`) on at most `max_eval_rows` rows of the
    eval split (0: all), with `Executor`; `warm_serving_probe` where a ServingCheck runs next in this process."""

    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        model: types.BaseChannel,
        baseline_model: Optional[types.BaseChannel],
        eval_config,
        max_eval_rows: int = 0,
        warm_serving_probe: bool = False,
    ):
        super().__init__(
            spec=EvaluatorSpec(
                examples=examples,
                model=model,
                baseline_model=baseline_model,
                eval_config=eval_config,
                example_splits=json_utils.dumps(None),
                max_eval_rows=max_eval_rows,
                warm_serving_probe=int(warm_serving_probe),
                evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
                blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            )
        )
