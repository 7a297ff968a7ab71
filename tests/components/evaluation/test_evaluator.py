"""The Evaluator's own additions to TFX's: how many rows it evaluates, and when it starts the serving check's
probe ahead of the check (a small evaluation in a process the check shares)."""

import os

import pytest
from google.protobuf import json_format
from tfx.types import standard_artifacts

from tests.components.split_examples import examples_of
from tfxflow.components.evaluation import evaluator
from tfxflow.components.model.features import FeatureConfig
from tfxflow.pipeline.config import EvaluationConfig
from tfxflow.pipeline.definition import eval_config

FEATURES = FeatureConfig.from_dict({"label": {"name": "y", "column": "t"}, "numeric": ["a"]})


def test_the_rows_evaluated_are_examplegens_count_within_the_bound(tmp_path):
    examples, result = examples_of(tmp_path, 4000)
    rows = result.split_rows["eval"]
    assert 800 < rows < 1200  # a quarter of the rows, by the hash split
    assert evaluator.evaluated_rows(examples, ["eval"], 0) == rows
    assert evaluator.evaluated_rows(examples, ["eval"], 300) == 300
    assert evaluator.evaluated_rows(examples, ["eval", "train"], 0) == 4000
    unrecorded = standard_artifacts.Examples()
    unrecorded.uri = str(tmp_path / "another-examplegen")
    assert evaluator.evaluated_rows(unrecorded, ["eval"], 0) is None


@pytest.mark.parametrize(
    ("warm", "bound", "started"),
    [(1, 10_000, True), (0, 10_000, False), (1, 100, False)],
    ids=["asked-and-small", "not-asked", "larger-than-the-bound"],
)
def test_the_serving_probe_starts_with_the_evaluation_when_asked_and_it_is_small(
    tmp_path, monkeypatch, warm, bound, started
):
    examples, _ = examples_of(tmp_path, 4000)  # about 1,000 eval rows
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(tmp_path / "evaluation")
    os.makedirs(evaluation.uri)
    calls = []
    monkeypatch.setattr(evaluator, "WARM_PROBE_MAX_ROWS", bound)
    monkeypatch.setattr(evaluator, "warm_up", lambda: calls.append("warm") or True)
    monkeypatch.setattr(evaluator, "check_model_contract", lambda model_dir, config: config)
    monkeypatch.setattr(evaluator.text, "load_ops_for", lambda model_dir: None)
    # TFX's own evaluation (TFMA) is not what this test is about; it sees the properties TFX's Evaluator takes.
    seen = {}
    monkeypatch.setattr(
        evaluator.tfx_evaluator.Executor, "Do", lambda self, i, o, props: seen.update(props) or calls.append("tfma")
    )
    evaluator.Executor().Do(
        {"examples": [examples], "model": [model]},
        {"evaluation": [evaluation], "blessing": [standard_artifacts.ModelBlessing()]},
        {
            "eval_config": json_format.MessageToJson(eval_config(EvaluationConfig(), FEATURES)),
            "example_splits": "null",
            evaluator.MAX_ROWS_KEY: 0,
            evaluator.WARM_PROBE_KEY: warm,
        },
    )
    assert calls == (["warm", "tfma"] if started else ["tfma"])
    assert evaluator.WARM_PROBE_KEY not in seen and evaluator.MAX_ROWS_KEY not in seen


def test_a_run_at_scale_starts_no_probe_beside_its_evaluation():
    # The default sample of a large eval split is over the bound: the probe would make the tree's peak there.
    assert evaluator.WARM_PROBE_MAX_ROWS < EvaluationConfig().max_rows
    assert evaluator.WARM_PROBE_MAX_ROWS > 3_726  # the taxi data's eval split: the 1x run starts it


def test_a_label_tfma_cannot_find_is_named_with_where_it_was_looked_for(tmp_path, monkeypatch):
    """TFMA's "no value provided for label" (a Beam stack trace) becomes one line: the label key, and the outputs
    of the model's transform_features where TFMA looked first."""
    from types import SimpleNamespace

    from tfxflow.components.errors import UserCodeError

    examples, _ = examples_of(tmp_path, 400)
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(tmp_path / "evaluation")
    os.makedirs(evaluation.uri)
    monkeypatch.setattr(evaluator, "check_model_contract", lambda model_dir, config: config)
    monkeypatch.setattr(evaluator.text, "load_ops_for", lambda model_dir: None)
    outputs = {"species_xf": None, "body_mass_g_xf": None}
    monkeypatch.setattr(
        evaluator, "_signature_defs", lambda model_dir: {"transform_features": SimpleNamespace(outputs=outputs)}
    )

    def tfma(self, inputs, outputs, properties):
        raise ValueError("add_input failed on _MultiClassConfusionMatrixCombiner: no value provided for label")

    monkeypatch.setattr(evaluator.tfx_evaluator.Executor, "Do", tfma)
    with pytest.raises(UserCodeError) as err:
        evaluator.Executor().Do(
            {"examples": [examples], "model": [model]},
            {"evaluation": [evaluation], "blessing": [standard_artifacts.ModelBlessing()]},
            {
                "eval_config": json_format.MessageToJson(eval_config(EvaluationConfig(), FEATURES)),
                "example_splits": "null",
                evaluator.MAX_ROWS_KEY: 0,
                evaluator.WARM_PROBE_KEY: 0,
            },
        )
    assert str(err.value) == (
        "the Evaluator found no label 'y' in the outputs of the model's transform_features signature "
        "(body_mass_g_xf, species_xf) or the raw examples' columns: name the label the module's preprocessing_fn "
        "outputs in the feature config (label: {name: ..., column: ...})"
    )
