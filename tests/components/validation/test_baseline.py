"""The drift baseline: the statistics behind the last blessed model, or data accepted after that blessing."""

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd
from tfx.types import standard_artifacts

from tfxflow.components.validation import baseline


def _store():
    config = mlmd.ConnectionConfig()
    config.fake_database.SetInParent()
    return metadata_store.MetadataStore(config)


def _artifact(store, kind, **int_properties):
    artifact = kind()
    artifact.uri = f"/pipeline_root/{kind.TYPE_NAME}"
    artifact.type_id = store.put_artifact_type(artifact.artifact_type)
    for key, value in int_properties.items():
        artifact.set_int_custom_property(key, value)
    [artifact.id] = store.put_artifacts([artifact.mlmd_artifact])
    artifact.set_mlmd_artifact(store.get_artifacts_by_id([artifact.id])[0])  # with its create time
    return artifact


def _execution(store, inputs, outputs):
    """An execution that read `inputs` and wrote `outputs` ({key: artifact})."""
    execution = mlmd.Execution(type_id=store.put_execution_type(mlmd.ExecutionType(name="node")))
    pairs = []
    for kind, artifacts in ((mlmd.Event.INPUT, inputs), (mlmd.Event.OUTPUT, outputs)):
        for key, artifact in artifacts.items():
            event = mlmd.Event(type=kind)
            event.path.steps.add().key = key
            pairs.append((artifact.mlmd_artifact, event))
    store.put_execution(execution, pairs, [])


def _lineage(store, blessed=1):
    """ExampleGen's examples -> StatisticsGen's statistics; the Evaluator read the examples and blessed."""
    examples = _artifact(store, standard_artifacts.Examples)
    statistics = _artifact(store, standard_artifacts.ExampleStatistics)
    _execution(store, {"examples": examples}, {"statistics": statistics})
    blessing = _artifact(store, standard_artifacts.ModelBlessing, blessed=blessed)
    _execution(store, {"examples": examples}, {"blessing": blessing})
    return statistics, blessing


def _resolve(store, statistics, blessings):
    resolved = baseline.BlessedDataStatisticsStrategy().resolve_artifacts(
        store, {baseline.STATISTICS_KEY: statistics, baseline.BLESSING_KEY: blessings}
    )
    return [a.id for a in resolved[baseline.STATISTICS_KEY]], [a.id for a in resolved[baseline.BLESSING_KEY]]


def test_the_data_behind_the_last_blessed_model():
    store = _store()
    first, first_blessing = _lineage(store)
    second, second_blessing = _lineage(store)
    refused = _artifact(store, standard_artifacts.ExampleStatistics)  # a later run the gate refused
    assert _resolve(store, [first, second, refused], [first_blessing, second_blessing]) == (
        [second.id],
        [second_blessing.id],
    )
    unblessed_store = _store()
    statistics, not_blessed = _lineage(unblessed_store, blessed=0)
    assert _resolve(unblessed_store, [statistics], [not_blessed]) == ([], [])


def test_data_accepted_after_the_last_blessing_is_the_baseline_until_the_next_blessing():
    store = _store()
    blessed_data, blessing = _lineage(store)
    blessed_at = blessing.mlmd_artifact.create_time_since_epoch
    assert blessed_at > 0
    accepted = _artifact(store, standard_artifacts.ExampleStatistics, **{baseline.ACCEPTED_AT: blessed_at + 1000})
    assert _resolve(store, [blessed_data, accepted], [blessing]) == ([accepted.id], [])
    # accepted before the model was blessed: the blessed model's data is newer
    stale = _artifact(store, standard_artifacts.ExampleStatistics, **{baseline.ACCEPTED_AT: blessed_at - 1000})
    assert _resolve(store, [blessed_data, stale], [blessing]) == ([blessed_data.id], [blessing.id])
    # no blessed model yet: accepted data is the baseline
    assert _resolve(_store(), [stale], []) == ([stale.id], [])


# --- ServedBaseline: the baselines read from the serving directory (Kubeflow) ---------------------------------


def _out(tmp_path, name, kind):
    from tfx.types import standard_artifacts as sa

    artifact = getattr(sa, kind)()
    artifact.uri = str(tmp_path / name)
    return artifact


def test_served_baseline_before_and_after_the_first_push(tmp_path):
    import json
    import os

    from tfxflow.components.evaluation import evaluator
    from tfxflow.components.serving import pusher
    from tfxflow.components.validation import baseline

    base = str(tmp_path / "serving" / "taxi")
    model, statistics = _out(tmp_path, "m1", "Model"), _out(tmp_path, "s1", "ExampleStatistics")
    baseline.ServedBaseline.test_call(model_base=base, model=model, statistics=statistics)
    assert baseline.served_info(statistics.uri) == {"model_base": base, "version": None, "statistics": False}
    assert not evaluator.has_saved_model(model)  # the Evaluator judges a first run's model alone

    source = tmp_path / "trained"
    (source / "variables").mkdir(parents=True)
    (source / "saved_model.pb").write_bytes(b"graph")
    stats = tmp_path / "stats" / "Split-train"
    stats.mkdir(parents=True)
    (stats / "FeatureStats.pb").write_bytes(b"train stats")
    pusher.push_atomically(str(source), base, 41, statistics_uri=str(tmp_path / "stats"))
    pusher.push_atomically(str(source), base, 42)  # an older release's push: no statistics
    os.makedirs(os.path.join(base, "43", "variables"))  # not loadable: ignored

    model, statistics = _out(tmp_path, "m2", "Model"), _out(tmp_path, "s2", "ExampleStatistics")
    baseline.ServedBaseline.test_call(model_base=base, model=model, statistics=statistics)
    assert baseline.served_info(model.uri)["version"] == 42
    assert baseline.served_info(statistics.uri)["statistics"] is False
    assert evaluator.has_saved_model(model)

    import shutil

    shutil.rmtree(os.path.join(base, "42"))
    model, statistics = _out(tmp_path, "m3", "Model"), _out(tmp_path, "s3", "ExampleStatistics")
    baseline.ServedBaseline.test_call(model_base=base, model=model, statistics=statistics)
    assert json.loads((tmp_path / "s3" / baseline.SERVED_INFO_FILE).read_text())["version"] == 41
    assert (tmp_path / "s3" / "Split-train" / "FeatureStats.pb").read_bytes() == b"train stats"
    assert statistics.split_names == '["train"]'
    assert statistics.get_int_custom_property("served_version") == 41
