"""The checkpoints several test modules read, made or located once for the package."""

import pytest

from tests.components.model.checkpoints.folders import MINILM, google_release
from tfxflow.components.model import checkpoints


@pytest.fixture(scope="package")
def minilm():
    return checkpoints.locate(MINILM)


@pytest.fixture(scope="package")
def minilm_weights(minilm):
    return checkpoints.weights(minilm)


@pytest.fixture(scope="package")
def release(tmp_path_factory):
    return google_release(str(tmp_path_factory.mktemp("google") / "uncased_L-6_H-384_A-12"))
