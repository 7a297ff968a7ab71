"""The schema compiled into a pipeline: written out as the Schema artifact, or refused when it does not parse."""

import os

import pytest
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from tfxflow.components.validation import schema
from tfxflow.pipeline.inputs import bundled_dataset_dir


def test_embedded_schema_writes_what_import_schema_gen_would(tmp_path):
    with open(os.path.join(bundled_dataset_dir("taxi"), "schema.pbtxt"), encoding="utf-8") as f:
        text = f.read()
    out = standard_artifacts.Schema()
    out.uri = str(tmp_path / "schema")
    schema.EmbeddedSchema.test_call(schema_text=text, schema=out)
    written = io_utils.SchemaReader().read(os.path.join(out.uri, schema.SCHEMA_FILE))
    assert written == schema.parse_schema(text)
    assert "trip_miles" in {feature.name for feature in written.feature}


def test_a_schema_that_does_not_parse_is_refused():
    with pytest.raises(ValueError, match="not a valid Schema text proto"):
        schema.parse_schema('feature { name: "x" type: NOT_A_TYPE }')
