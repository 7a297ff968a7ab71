"""Fixtures shared by the component tests."""

import pytest

from tests.components.tiny_transform import write_tiny_transform


@pytest.fixture(scope="session")
def tiny_transform(tmp_path_factory):
    """A real, small tf.Transform output: see tests.components.tiny_transform."""
    return write_tiny_transform(str(tmp_path_factory.mktemp("tiny_transform")))


@pytest.fixture(scope="session")
def task_transforms(tmp_path_factory):
    """The tiny Transform output of each task: {task: tiny transform}."""
    return {
        task: write_tiny_transform(str(tmp_path_factory.mktemp(f"tiny_{task}")), task)
        for task in ("multiclass", "regression")
    }


@pytest.fixture(scope="session")
def text_transform(tmp_path_factory):
    """The tiny Transform output of a text column beside a number (tests.components.tiny_transform, "text")."""
    return write_tiny_transform(str(tmp_path_factory.mktemp("tiny_text")), "text")


@pytest.fixture(scope="session")
def task_models(task_transforms, tmp_path_factory):
    """A model of each task trained on its tiny Transform output's raw examples and exported:
    {task: {"export_dir", "info", "tiny"}}."""
    from tfxflow.components.model import export
    from tfxflow.components.model import keras_model as model_lib
    from tfxflow.components.training.fit import train
    from tfxflow.components.training.train_params import TrainParams

    found = {}
    for task, tiny in task_transforms.items():
        folder = tmp_path_factory.mktemp(f"model_{task}")
        model, _, info = train(
            tiny["config"],
            tiny["output"],
            tiny["raw_train"],
            tiny["raw_eval"],
            train_steps=60,
            eval_steps=0,
            model_params=model_lib.ModelParams(hidden_units=(16,), learning_rate=0.01),
            train_params=TrainParams(batch_size=32, eval_every_steps=20, early_stopping_patience=0),
            log_dir=str(folder / "logs"),
            raw_examples=True,
        )
        export_dir = str(folder / "export")
        export.export_serving_model(
            model, tiny["output"], tiny["config"], export_dir, class_names=info.get("class_names", ())
        )
        found[task] = {"export_dir": export_dir, "info": info, "tiny": tiny}
    return found
