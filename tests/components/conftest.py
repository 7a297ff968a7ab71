"""Fixtures shared by the component tests."""

import pytest

from tests.components.tiny_transform import write_tiny_transform


@pytest.fixture(scope="session")
def tiny_transform(tmp_path_factory):
    """A real, small tf.Transform output: see tests.components.tiny_transform."""
    return write_tiny_transform(str(tmp_path_factory.mktemp("tiny_transform")))
