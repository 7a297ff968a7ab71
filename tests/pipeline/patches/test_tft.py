"""pipeline/patches/tft.py against the pinned TFX and tf.Transform: the Transform executor still inspects the
preprocessing_fn three times through impl_helper, and the shared trace gives tf.Transform's columns."""

import importlib

import pytest

from tfxflow.pipeline.patches import tft as tft_patch


def test_the_pinned_tfx_inspects_the_preprocessing_fn_three_times_with_the_same_arguments(tmp_path, monkeypatch):
    """What `tft-one-trace` shares: TFX's Transform executor, run on real examples, inspects the columns twice for
    the analysis and once for the transform, each time with the same preprocessing_fn and type specs, and each
    inspection is tf.Transform's own (it traces through impl_helper). The executor is stopped at its third
    inspection, before any Beam work."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from tfx.components.transform import executor
    from tfx.types import standard_artifacts

    class Inspected(Exception):
        pass

    calls = []

    def counted(name, real):
        def inspect_columns(preprocessing_fn, specs, force_tf_compat_v1=False):
            calls.append((name, preprocessing_fn, dict(specs), force_tf_compat_v1))
            if len(calls) == 3:
                raise Inspected()
            return real(preprocessing_fn, specs, force_tf_compat_v1=force_tf_compat_v1)

        return inspect_columns

    for name in ("get_analyze_input_columns", "get_transform_input_columns"):
        fn = getattr(tft, name)
        assert fn.__module__ == tft_patch.INSPECTIONS  # tf.Transform's inspection, which traces through impl_helper
        assert "impl_helper" in vars(importlib.import_module(fn.__module__))
        monkeypatch.setattr(executor.tft, name, counted(name, fn))
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["train", "eval"]'
    for split in ("train", "eval"):
        (tmp_path / "examples" / f"Split-{split}").mkdir(parents=True)
        path = str(tmp_path / "examples" / f"Split-{split}" / "data_tfrecord-00000-of-00001.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for i in range(4):
                features = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[i])) for k in "xyz"}
                writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "schema.pbtxt").write_text(
        "".join(
            f'feature {{ name: "{k}" type: FLOAT presence {{ min_fraction: 1 }} shape {{ dim {{ size: 1 }} }} }}\n'
            for k in "xyz"
        )
    )
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(tmp_path / "graph")
    properties = {"preprocessing_fn": f"{__name__}._preprocessing_fn", "disable_statistics": 1}
    with pytest.raises(Inspected):
        executor.Executor().Do({"examples": [examples], "schema": [schema]}, {"transform_graph": [graph]}, properties)
    assert [name for name, *_ in calls] == [
        "get_analyze_input_columns",
        "get_analyze_input_columns",
        "get_transform_input_columns",
    ]
    assert all(fn is calls[0][1] for _, fn, _, _ in calls) and calls[0][1].__name__ == "_preprocessing_fn"
    assert all((specs, force) == calls[0][2:] for _, _, specs, force in calls)
    assert sorted(calls[0][2]) == ["x", "y", "z"]


def _preprocessing_fn(inputs):
    import tensorflow_transform as tft

    return {"x_scaled": tft.scale_to_z_score(inputs["x"]), "y": inputs["y"] * 2, "z": inputs["z"]}


def test_inspections_read_one_trace_and_give_tf_transforms_columns():
    import tensorflow as tf
    from tensorflow_transform import impl_helper

    specs = {name: tf.TensorSpec([None], tf.float32) for name in ("x", "y", "z", "unused")}
    traced = []

    class Counting:
        def __getattr__(self, name):
            return getattr(impl_helper, name)

        def trace_preprocessing_function(self, *args, **kwargs):
            traced.append(args[0])
            return impl_helper.trace_preprocessing_function(*args, **kwargs)

    inspections = importlib.import_module(tft_patch.INSPECTIONS)
    shared = tft_patch.TraceReused(Counting())
    saved = inspections.impl_helper
    try:

        def columns(helper):
            inspections.impl_helper = helper
            return (
                sorted(inspections.get_analyze_input_columns(_preprocessing_fn, specs, force_tf_compat_v1=True)),
                sorted(inspections.get_analyze_input_columns(_preprocessing_fn, dict(specs), force_tf_compat_v1=True)),
                sorted(inspections.get_transform_input_columns(_preprocessing_fn, specs, force_tf_compat_v1=True)),
            )

        expected = columns(impl_helper)  # tf.Transform's own: three traces
        assert expected == (["x"], ["x"], ["x", "y", "z"])
        assert columns(shared) == expected
        assert traced == [_preprocessing_fn]  # one trace for the three
        columns(shared)
        assert len(traced) == 2  # a fourth inspection traces again
        other = {**specs, "unused": tf.TensorSpec([None], tf.int64)}
        inspections.impl_helper = shared
        inspections.get_transform_input_columns(_preprocessing_fn, other, force_tf_compat_v1=True)
        assert len(traced) == 3  # other arguments: another trace
    finally:
        inspections.impl_helper = saved
