"""The curated schema carried inside a compiled pipeline, for orchestrators whose steps cannot read the file.

A Kubeflow spec is compiled on one machine and run on a cluster; staging the schema in the object store would
need that store's credentials at compile time. The schema is small (kilobytes), so the spec carries its text;
this step writes it out as the Schema artifact ImportSchemaGen would have made. Its cache key is the text.

No `from __future__ import annotations` here: TFX's function-component parser needs real annotation objects.
"""

import os

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

SCHEMA_FILE = "schema.pbtxt"  # ImportSchemaGen's file name
SERVING_ENVIRONMENT = "SERVING"


def in_environment(feature, schema, environment: str) -> bool:
    """Whether `feature` of `schema` (tensorflow_metadata Schema protos) exists in `environment`, by TFDV's rule:
    its in_environment list if it has one, else not in not_in_environment and in the default environments."""
    if feature.in_environment:
        return environment in feature.in_environment
    if environment in feature.not_in_environment:
        return False
    return not schema.default_environment or environment in schema.default_environment


def serving_features(schema):
    """The schema's features present at serving (its SERVING environment)."""
    return [f for f in schema.feature if in_environment(f, schema, SERVING_ENVIRONMENT)]


def parse_schema(text: str, where: str = "the schema") -> schema_pb2.Schema:
    """The Schema proto of `text`; a ValueError naming `where` and the parse error otherwise."""
    schema = schema_pb2.Schema()
    try:
        text_format.Parse(text, schema)
    except text_format.ParseError as error:
        raise ValueError(f"{where}: not a valid Schema text proto: {error}") from error
    return schema


@component
def EmbeddedSchema(  # noqa: N802 (TFX's function components are named like classes)
    schema_text: Parameter[str],
    schema: OutputArtifact[standard_artifacts.Schema],
) -> None:
    """Writes `schema_text` (a tensorflow_metadata Schema in text format) as the run's Schema artifact."""
    parsed = parse_schema(schema_text)
    fileio.makedirs(schema.uri)
    with fileio.open(os.path.join(schema.uri, SCHEMA_FILE), "w") as f:
        f.write(text_format.MessageToString(parsed))
