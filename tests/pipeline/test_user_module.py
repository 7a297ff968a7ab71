"""A TFX module file is checked by reading its source: what it defines, refused in one line when it cannot work."""

import os

import pytest
import tfx

from tfxflow.components.settings import ConfigError
from tfxflow.pipeline.user_module import inspect, label_name, preprocessing_outputs

EXAMPLES = os.path.join(os.path.dirname(tfx.__file__), "examples")


def _module(tmp_path, source, name="module.py"):
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def test_googles_own_module_files_define_what_tfx_calls():
    taxi = inspect(os.path.join(EXAMPLES, "chicago_taxi_pipeline", "taxi_utils_native_keras.py"))
    assert taxi.preprocessing_fn and taxi.run_fn and not taxi.stats_options_updater_fn
    assert taxi.describe() == "taxi_utils_native_keras.py: preprocessing_fn (Transform), run_fn (Trainer)"
    imdb = inspect(os.path.join(EXAMPLES, "imdb", "imdb_utils_native_keras.py"))
    assert imdb.preprocessing_fn and imdb.run_fn
    # The hash covers every Python file of the folder, as TFX's wheel of the module does.
    assert len(taxi.sha256) == 16 and taxi.sha256 != imdb.sha256
    assert not taxi.tuner_fn
    penguin = inspect(os.path.join(EXAMPLES, "penguin", "penguin_utils_keras.py"))
    assert penguin.preprocessing_fn and penguin.run_fn and penguin.tuner_fn  # preprocessing_fn bound by assignment
    assert penguin.describe() == (
        "penguin_utils_keras.py: preprocessing_fn (Transform), tuner_fn (Tuner, with --tune), run_fn (Trainer)"
    )


def test_either_function_alone_and_the_forms_python_binds_a_name_with(tmp_path):
    only_run = inspect(_module(tmp_path, "def run_fn(fn_args):\n    pass\n"))
    assert only_run.run_fn and not only_run.preprocessing_fn
    imported = inspect(
        _module(tmp_path, "from tfx.examples.chicago_taxi_pipeline.taxi_utils_native_keras import preprocessing_fn\n")
    )
    assert imported.preprocessing_fn and not imported.run_fn
    assigned = inspect(_module(tmp_path, "preprocessing_fn = lambda inputs, custom_config=None: inputs\n"))
    assert assigned.preprocessing_fn


def test_the_hash_changes_with_any_python_file_beside_the_module(tmp_path):
    path = _module(tmp_path, "def run_fn(fn_args):\n    pass\n")
    before = inspect(path).sha256
    (tmp_path / "helper.py").write_text("SIZE = 3\n")
    assert inspect(path).sha256 != before


@pytest.mark.parametrize(
    "source, message",
    [
        ("x = 1\n", "defines neither preprocessing_fn (for Transform) nor run_fn (for the Trainer)"),
        ("def run_fn(:\n", "line 1: does not parse"),
        ("def run_fn():\n    pass\n", "run_fn takes 0 positional argument(s); TFX calls it with 1"),
        (
            "def preprocessing_fn(a, b, c):\n    pass\n",
            "preprocessing_fn takes 3 positional argument(s); TFX calls it with 1 or 2",
        ),
        (
            "def run_fn(fn_args):\n    pass\ndef stats_options_updater_fn(kind, options):\n    return options\n",
            "stats_options_updater_fn is read by Transform with the module's preprocessing_fn",
        ),
        ("def run_fn(fn_args):\n    pass\ndef tuner_fn():\n    pass\n", "tuner_fn takes 0 positional argument(s)"),
    ],
)
def test_a_module_that_cannot_work_is_refused_in_one_line(tmp_path, source, message):
    path = _module(tmp_path, source)
    with pytest.raises(ConfigError) as err:
        inspect(path)
    assert str(err.value).startswith(f"--module-file {path}") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_file_or_one_that_is_not_python_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        inspect(str(tmp_path / "missing.py"))
    with pytest.raises(ConfigError, match=r"a module file is a Python source file \(\.py\)"):
        inspect(_module(tmp_path, "def run_fn(a):\n    pass\n", name="module.txt"))


PENGUIN_SCHEMA = "".join(
    f'feature {{ name: "{name}" type: {kind} presence {{ min_fraction: 1 }} shape {{ dim {{ size: 1 }} }} }}\n'
    for name, kind in (
        ("species", "INT"),
        ("culmen_length_mm", "FLOAT"),
        ("culmen_depth_mm", "FLOAT"),
        ("flipper_length_mm", "FLOAT"),
        ("body_mass_g", "FLOAT"),
    )
)


def test_a_preprocessing_fns_outputs_are_traced_on_the_schemas_features(tmp_path):
    """Google's penguin module names every output `<column>_xf`; the trace computes nothing, so it needs no data.
    A function that cannot be traced here gives None (Transform says what is wrong when it runs)."""
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(PENGUIN_SCHEMA)
    penguin = inspect(os.path.join(EXAMPLES, "penguin", "penguin_utils_keras.py"))
    assert preprocessing_outputs(penguin, str(schema)) == (
        "body_mass_g_xf",
        "culmen_depth_mm_xf",
        "culmen_length_mm_xf",
        "flipper_length_mm_xf",
        "species_xf",
    )
    configured = inspect(
        _module(
            tmp_path,
            "def preprocessing_fn(inputs, custom_config):\n"
            "    return {custom_config['features']['label']['name']: inputs['species']}\n",
        )
    )
    assert preprocessing_outputs(configured, str(schema), {"features": {"label": {"name": "y"}}}) == ("y",)
    sibling = inspect(_module(tmp_path, "import helper_only_in_the_wheel\ndef preprocessing_fn(inputs):\n    pass\n"))
    assert preprocessing_outputs(sibling, str(schema)) is None


@pytest.mark.parametrize(
    "label, outputs, found",
    [
        ("species_label", ["culmen_xf", "species_xf"], "species_xf"),  # Google's name for a drafted label
        ("species_xf", ["culmen_xf", "species_xf"], "species_xf"),  # the feature config names the module's own
        ("label", ["label_xf", "text_xf"], "label"),  # the raw column: TFMA reads it from the rows
        ("species_label", ["x", "species"], "species"),  # the column passed through under its own name
        ("species_label", ["transformed_species", "x"], "transformed_species"),
        ("species_label", ["species_xf", "species_onehot"], None),  # two candidates: not guessed
        ("species_label", ["a_xf", "b_xf"], None),
    ],
)
def test_the_label_is_the_output_named_for_its_column(label, outputs, found):
    column = "label" if label == "label" else "species"
    assert label_name(label, column, outputs) == found
