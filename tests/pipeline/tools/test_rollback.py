"""`tfxflow rollback`: an earlier model is served again as a new, highest version; the rolled-back model is
recorded so the Pusher refuses it; MLflow's champion alias and ML Metadata's blessings follow."""

import json
import os
import shutil

import pytest
import tensorflow as tf

from tests import helpers
from tfxflow.components import serving_dir
from tfxflow.components.serving import pusher
from tfxflow.pipeline.cli import main as cli
from tfxflow.pipeline.config import ConfigError
from tfxflow.pipeline.tools import rollback

NOW = 1_800_000_000


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Three different tiny SavedModels, saved once: {"a": path, "b": path, "c": path}."""
    root = tmp_path_factory.mktemp("models")
    return helpers.save_scale_models(root)


def _statistics(folder, text: str) -> str:
    os.makedirs(os.path.join(folder, "Split-train"))
    with open(os.path.join(folder, "Split-train", "FeatureStats.pb"), "wb") as f:
        f.write(text.encode())
    return str(folder)


def _serve(base: str, pushes, tmp_path) -> None:
    """Pushes each (version, model path) with statistics naming the version, as the Pusher would."""
    for version, model in pushes:
        pusher.push_atomically(model, base, version, _statistics(tmp_path / f"stats-{version}", f"stats {version}"))


def _predict(version_dir: str) -> float:
    return float(tf.saved_model.load(version_dir).signatures["serving_default"](x=tf.constant([1.0]))["y"][0])


def test_fingerprint_is_the_model_not_its_folder(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(100, models["a"])], tmp_path)
    fingerprint = pusher.model_fingerprint(models["a"])
    # The version folder holds the statistics (and could hold warmup requests) besides: the same model.
    assert os.path.isdir(os.path.join(base, "100", serving_dir.STATISTICS_DIR))
    assert pusher.model_fingerprint(os.path.join(base, "100")) == fingerprint
    assert pusher.model_fingerprint(models["b"]) != fingerprint
    changed = shutil.copytree(models["a"], str(tmp_path / "changed"))
    data = [f for f in os.listdir(os.path.join(changed, "variables")) if f.startswith("variables.data")][0]
    with open(os.path.join(changed, "variables", data), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    assert pusher.model_fingerprint(changed) != fingerprint
    with pytest.raises(FileNotFoundError, match="no saved_model.pb"):
        pusher.model_fingerprint(str(tmp_path / "stats-100"))


def test_default_rollback_serves_the_previous_model_as_the_highest_version(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)
    done = rollback.rollback(base, reason="precision fell on the night shift", by="ann@host", clock=lambda: NOW + 20)

    assert (done.plan.current, done.plan.target, done.plan.rolled_back) == (NOW + 10, NOW, [NOW + 10])
    assert done.new_version == NOW + 20
    # The copy is the highest complete version, so TF Serving's `latest` policy serves it; the bad one stays.
    assert serving_dir.served_versions(base) == [NOW, NOW + 10, NOW + 20]
    assert sorted(os.listdir(base)) == [serving_dir.ROLLBACK_LOG, str(NOW), str(NOW + 10), str(NOW + 20)]
    copy = os.path.join(base, str(NOW + 20))
    assert pusher.model_fingerprint(copy) == pusher.model_fingerprint(models["a"])
    assert _predict(copy) == 1.0
    with open(os.path.join(copy, serving_dir.STATISTICS_DIR, "Split-train", "FeatureStats.pb"), "rb") as f:
        assert f.read() == f"stats {NOW}".encode()  # the target's training data statistics came with it

    with open(os.path.join(base, serving_dir.ROLLBACK_LOG), encoding="utf-8") as f:
        [entry] = json.load(f)
    assert entry == {
        "rolled_back_version": NOW + 10,
        "fingerprint": pusher.model_fingerprint(models["b"]),
        "versions": [NOW + 10],
        "to_version": NOW,
        "to_fingerprint": pusher.model_fingerprint(models["a"]),
        "new_version": NOW + 20,
        "by": "ann@host",
        "at": pusher.iso_time(NOW + 20),
        "at_epoch": NOW + 20,
        "reason": "precision fell on the night shift",
    }
    assert done.entries == [entry] and done.log_path == os.path.join(base, serving_dir.ROLLBACK_LOG)
    assert pusher.rolled_back_text(entry) == (
        f"rolled back from version {NOW + 10} on {entry['at']} by ann@host: precision fell on the night shift"
    )


def test_to_rolls_back_every_newer_model_and_later_rollbacks_skip_them(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"]), (NOW + 20, models["c"])], tmp_path)
    done = rollback.rollback(base, to=NOW, by="ann@host", clock=lambda: NOW + 30)
    assert (done.plan.target, done.plan.rolled_back, done.new_version) == (NOW, [NOW + 10, NOW + 20], NOW + 30)
    assert [e["fingerprint"] for e in serving_dir.read_rollbacks(base)] == [
        pusher.model_fingerprint(models["b"]),
        pusher.model_fingerprint(models["c"]),
    ]
    assert _predict(os.path.join(base, str(NOW + 30))) == 1.0

    # Served: a copy of A; B and C were rolled back, so nothing earlier holds another model.
    with pytest.raises(ConfigError, match="nothing to roll back to .* pass --to VERSION"):
        rollback.rollback(base, clock=lambda: NOW + 40)
    with pytest.raises(
        ConfigError,
        match=f"--to {NOW + 10} holds a model that was rolled back from version "
        f"{NOW + 10} on .* by ann@host: no reason given; choose another version",
    ):
        rollback.rollback(base, to=NOW + 10, clock=lambda: NOW + 40)

    # C pushed again by a Pusher without the check: rolling it back serves the rollback's copy of A again, and
    # C's new entry names both versions that hold it.
    _serve(base, [(NOW + 50, models["c"])], tmp_path)
    again = rollback.rollback(base, clock=lambda: NOW + 60)
    assert (again.plan.target, again.plan.rolled_back, again.new_version) == (NOW + 30, [NOW + 50], NOW + 60)
    assert again.entries[0]["versions"] == [NOW + 20, NOW + 50]
    assert serving_dir.served_versions(base)[-1] == NOW + 60 and _predict(os.path.join(base, str(NOW + 60))) == 1.0


def test_default_target_skips_copies_of_the_served_model(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    _serve(
        base, [(NOW, models["a"]), (NOW + 10, models["b"]), (NOW + 20, models["c"]), (NOW + 30, models["c"])], tmp_path
    )
    done = rollback.rollback(base, clock=lambda: NOW + 40)
    # NOW + 20 holds the served model (C pushed twice): the target is B, and C is one rolled-back model.
    assert (done.plan.target, done.plan.rolled_back) == (NOW + 10, [NOW + 30])
    assert done.entries[0]["versions"] == [NOW + 20, NOW + 30]
    assert _predict(os.path.join(base, str(NOW + 40))) == 2.0


def _refused(base, to=None):
    before = sorted(os.listdir(base)) if os.path.isdir(base) else None
    with pytest.raises(ConfigError) as refused:
        rollback.rollback(base, to=to, clock=lambda: NOW + 100)
    assert (sorted(os.listdir(base)) if os.path.isdir(base) else None) == before  # nothing changed
    return str(refused.value)


def test_refusals_change_nothing(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    assert _refused(base).startswith(f"no model versions in {base}: nothing to roll back")
    _serve(base, [(NOW, models["a"])], tmp_path)
    assert _refused(base) == f"only one version in {base} ({NOW}): there is no earlier model to roll back to"
    _serve(base, [(NOW + 10, models["b"]), (NOW + 20, models["b"])], tmp_path)
    os.makedirs(os.path.join(base, str(NOW + 5), "variables"))  # no saved_model.pb: not a complete version
    assert _refused(base, to=NOW + 5) == (
        f"--to {NOW + 5}: not a complete version in {base} (complete versions: {NOW}, {NOW + 10}, {NOW + 20})"
    )
    assert "not a complete version" in _refused(base, to=123)
    assert _refused(base, to=NOW + 20) == f"--to {NOW + 20} is the version being served: nothing to roll back"
    assert _refused(base, to=NOW + 10) == (
        f"--to {NOW + 10} holds the same model as the served version {NOW + 20}: serving it again would change nothing"
    )
    with open(os.path.join(base, serving_dir.ROLLBACK_LOG), "w", encoding="utf-8") as f:
        f.write("[{")
    assert "does not parse" in _refused(base)


def test_cli_rolls_back_and_says_what_moved(models, tmp_path, capsys):
    home = tmp_path / "home"
    base = str(home / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)
    code = cli.main(
        ["rollback", "--home", str(home), "--reason", "bad tips", "--mlflow-uri", f"sqlite:///{tmp_path}/none.db"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    new = serving_dir.served_versions(base)[-1]
    assert out.startswith(f"tfxflow: taxi rolled back: version {NOW + 10} -> {new}, a copy of version {NOW} (model ")
    assert f"  served now: {base}/{new}\n" in out
    assert f"  rolled back: {NOW + 10} (model {pusher.model_fingerprint(models['b'])[:12]}) by " in out
    assert f"  mlflow:     no MLflow store at sqlite:///{tmp_path}/none.db: nothing moved in MLflow\n" in out
    assert f"  metadata:   no metadata store at {home}/metadata/metadata.sqlite: no blessing revoked\n" in out
    assert out.rstrip().endswith(
        f"TF Serving loads version {new} at its next poll of {base} "
        f"(--file_system_poll_wait_seconds, 1 s by default), then unloads version {NOW + 10}."
    )

    code = cli.main(["rollback", "--home", str(home), "--to", str(NOW + 10)])
    captured = capsys.readouterr()
    assert code == cli.EXIT_CONFIG_ERROR
    assert captured.err.startswith(f"error: --to {NOW + 10} holds a model that was rolled back from version ")
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


@pytest.mark.integration
def test_mlflow_champion_moves_back_and_the_rollback_is_tagged(models, tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model("taxi")
    for pushed in (NOW, NOW + 10):  # as MlflowFinish registers each push
        version = client.create_model_version(
            "taxi", source=str(tmp_path / f"m{pushed}"), tags={"tfxflow.pushed_version": str(pushed)}
        )
    client.set_registered_model_alias("taxi", "champion", version.version)
    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)

    done = rollback.rollback(
        base, reason="bad tips", by="ann@host", tracking_uri=uri, registered_name="taxi", clock=lambda: NOW + 20
    )
    assert done.tracking == [
        f"alias champion of 'taxi' moved from version 2 to version 1 (tagged tfxflow.republished_as {NOW + 20})",
        "tfxflow.rolled_back set on registered version 2",
    ]
    champion = client.get_model_version_by_alias("taxi", "champion")
    assert str(champion.version) == "1" and champion.tags["tfxflow.pushed_version"] == str(NOW)
    assert champion.tags["tfxflow.republished_as"] == str(NOW + 20)
    at = pusher.iso_time(NOW + 20)
    assert client.get_model_version("taxi", "2").tags["tfxflow.rolled_back"] == (
        f"by ann@host at {at}: bad tips; served now: version {NOW + 20}, a copy of version {NOW}"
    )
    assert client.get_registered_model("taxi").tags["tfxflow.last_rollback"] == (
        f"version {NOW + 10} -> {NOW + 20} (a copy of {NOW}) by ann@host at {at}: bad tips"
    )

    # C is pushed and registered; rolling it back serves the copy of A again: found by its republished number.
    client.create_model_version("taxi", source=str(tmp_path / "mc"), tags={"tfxflow.pushed_version": str(NOW + 30)})
    client.set_registered_model_alias("taxi", "champion", "3")
    _serve(base, [(NOW + 30, models["c"])], tmp_path)
    again = rollback.rollback(base, by="ann@host", tracking_uri=uri, registered_name="taxi", clock=lambda: NOW + 40)
    assert again.plan.target == NOW + 20
    assert str(client.get_model_version_by_alias("taxi", "champion").version) == "1"
    assert client.get_model_version("taxi", "1").tags["tfxflow.republished_as"] == f"{NOW + 20},{NOW + 40}"
    assert "tfxflow.rolled_back" in client.get_model_version("taxi", "3").tags


def test_unreachable_tracking_still_rolls_back(models, tmp_path):
    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)
    uri = f"http://127.0.0.1:{helpers.free_port()}"
    done = rollback.rollback(base, tracking_uri=uri, registered_name="taxi", clock=lambda: NOW + 20)
    assert serving_dir.served_versions(base)[-1] == NOW + 20
    [line] = done.tracking
    assert line.startswith(f"not updated: MLflow tracking server {uri} cannot be reached")


def test_rollback_on_an_object_store(models, tmp_path, s3_server, monkeypatch):
    from tfxflow.components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    try:
        bucket = s3_server.create_bucket("serving-rollback")
        base = f"minio://{bucket}/models/taxi"
        _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)
        assert pusher.model_fingerprint(f"{base}/{NOW}") == pusher.model_fingerprint(models["a"])
        done = rollback.rollback(base, reason="bad", clock=lambda: NOW + 20)
        assert done.new_version == NOW + 20 and serving_dir.served_versions(base) == [NOW, NOW + 10, NOW + 20]
        assert pusher.model_fingerprint(f"{base}/{NOW + 20}") == pusher.model_fingerprint(models["a"])
        assert (
            object_store.read_bytes(f"{base}/{NOW + 20}/{serving_dir.STATISTICS_DIR}/Split-train/FeatureStats.pb")
            == f"stats {NOW}".encode()
        )
        assert [e["rolled_back_version"] for e in serving_dir.read_rollbacks(base)] == [NOW + 10]
    finally:
        object_store.clear_client_cache()


# ---------------------------------------------------------------------------------------------------------
# ML Metadata: a real SQLite store with the lineage TFX records, and TFX's own resolver strategies
# ---------------------------------------------------------------------------------------------------------


class _Lineage:
    """Writes artifacts, executions and events into a real MLMD store the way TFX's launcher does."""

    def __init__(self, path: str):
        from ml_metadata.proto import metadata_store_pb2 as mlmd

        from tfxflow.pipeline.reports.run_record import open_store

        self.mlmd = mlmd
        config = mlmd.ConnectionConfig()
        config.sqlite.filename_uri = path
        config.sqlite.connection_mode = mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        from ml_metadata import metadata_store

        metadata_store.MetadataStore(config)  # creates the store
        self.store = open_store(path, readonly=False)
        context_type = self.store.put_context_type(mlmd.ContextType(name="pipeline"))
        [context_id] = self.store.put_contexts([mlmd.Context(type_id=context_type, name="tfxflow-taxi")])
        [self.context] = self.store.get_contexts_by_id([context_id])

    def artifact(self, cls, uri: str, **properties):
        from tfx.types import artifact_utils

        artifact = cls()
        artifact.uri = uri
        artifact.type_id = self.store.put_artifact_type(artifact.artifact_type)
        for key, value in properties.items():
            if isinstance(value, int):
                artifact.set_int_custom_property(key, value)
            else:
                artifact.set_string_custom_property(key, value)
        [artifact.id] = self.store.put_artifacts([artifact.mlmd_artifact])
        [stored] = self.store.get_artifacts_by_id([artifact.id])
        return artifact_utils.deserialize_artifact(self.store.get_artifact_types_by_id([stored.type_id])[0], stored)

    def execution(self, name: str, inputs: dict, outputs: dict) -> None:
        mlmd = self.mlmd
        type_id = self.store.put_execution_type(mlmd.ExecutionType(name=name))
        events = []
        for kind, artifacts in ((mlmd.Event.INPUT, inputs), (mlmd.Event.OUTPUT, outputs)):
            for key, artifact in artifacts.items():
                event = mlmd.Event(type=kind)
                event.path.steps.add().key = key
                event.path.steps.add().index = 0
                [stored] = self.store.get_artifacts_by_id([artifact.id])
                events.append((stored, event))
        self.store.put_execution(
            mlmd.Execution(type_id=type_id, last_known_state=mlmd.Execution.COMPLETE), events, [self.context]
        )

    def run(self, n: int, fingerprint: str, version: int) -> dict:
        """One pipeline run's lineage: examples, their statistics, a model, its blessing and its push."""
        from tfx.types import standard_artifacts as sa

        examples = self.artifact(sa.Examples, f"/root/examples/{n}")
        statistics = self.artifact(sa.ExampleStatistics, f"/root/statistics/{n}")
        self.execution("StatisticsGen", {"examples": examples}, {"statistics": statistics})
        model = self.artifact(sa.Model, f"/root/model/{n}")
        self.execution("Trainer", {"examples": examples}, {"model": model})
        blessing = self.artifact(sa.ModelBlessing, f"/root/blessing/{n}", blessed=1, current_model_id=model.id)
        self.execution("Evaluator", {"examples": examples, "model": model}, {"blessing": blessing})
        pushed = self.artifact(
            sa.PushedModel, f"/root/pushed/{n}", pushed=1, pushed_version=str(version), model_fingerprint=fingerprint
        )
        self.execution("Pusher", {"model": model, "model_blessing": blessing}, {"pushed_model": pushed})
        return {"examples": examples, "statistics": statistics, "model": model, "blessing": blessing, "pushed": pushed}

    def resolve(self, strategy, **channels):
        """What a resolver of `strategy` resolves over every artifact of the given types, as TFX hands them."""
        from tfx.types import artifact_utils

        input_dict = {}
        for key, cls in channels.items():
            [artifact_type] = [t for t in self.store.get_artifact_types() if t.name == cls.TYPE_NAME]
            input_dict[key] = [
                artifact_utils.deserialize_artifact(artifact_type, a)
                for a in self.store.get_artifacts_by_type(cls.TYPE_NAME)
            ]
        return strategy().resolve_artifacts(self.store, input_dict)


def test_rollback_revokes_the_blessing_so_the_resolvers_take_the_served_model(models, tmp_path):
    from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
    from tfx.types import standard_artifacts as sa

    from tfxflow.components.validation.baseline import BlessedDataStatisticsStrategy

    base = str(tmp_path / "serving" / "taxi")
    _serve(base, [(NOW, models["a"]), (NOW + 10, models["b"])], tmp_path)
    metadata = str(tmp_path / "metadata" / "metadata.sqlite")
    os.makedirs(os.path.dirname(metadata))
    lineage = _Lineage(metadata)
    first = lineage.run(1, pusher.model_fingerprint(models["a"]), NOW)
    second = lineage.run(2, pusher.model_fingerprint(models["b"]), NOW + 10)
    last_run = os.path.join(os.path.dirname(metadata), "last_run.json")
    with open(last_run, "w", encoding="utf-8") as f:
        f.write("{}")
    assert (
        lineage.resolve(LatestBlessedModelStrategy, model=sa.Model, model_blessing=sa.ModelBlessing)["model"][0].id
        == second["model"].id
    )

    done = rollback.rollback(
        base,
        reason="bad tips",
        by="ann@host",
        metadata_path=metadata,
        pipeline_name="tfxflow-taxi",
        clock=lambda: NOW + 20,
    )
    assert done.metadata == [
        f"blessing {second['blessing'].id} of model {second['model'].id} (version {NOW + 10}) revoked",
        f"removed {last_run}: an unchanged `tfxflow run` runs again",
    ]
    assert not os.path.exists(last_run)
    store = lineage.store
    stored = {
        a.id: a for a in store.get_artifacts_by_id([second["blessing"].id, second["pushed"].id, first["blessing"].id])
    }
    blessing, pushed, kept = (stored[a.id] for a in (second["blessing"], second["pushed"], first["blessing"]))
    assert blessing.custom_properties["blessed"].int_value == 0
    expected = pusher.rolled_back_text(done.entries[0])
    for artifact in (blessing, pushed):
        assert artifact.custom_properties[pusher.ROLLED_BACK].string_value == expected
        assert artifact.custom_properties[pusher.ROLLED_BACK_BY].string_value == "ann@host"
        assert artifact.custom_properties[pusher.ROLLED_BACK_REASON].string_value == "bad tips"
        assert artifact.custom_properties[pusher.ROLLED_BACK_AT].int_value == (NOW + 20) * 1000
    assert kept.custom_properties["blessed"].int_value == 1 and pusher.ROLLED_BACK not in kept.custom_properties

    # TFX's resolvers now take the served model (A) as the model to beat and its data as the drift baseline.
    resolved = lineage.resolve(LatestBlessedModelStrategy, model=sa.Model, model_blessing=sa.ModelBlessing)
    assert resolved["model"][0].id == first["model"].id
    resolved = lineage.resolve(
        BlessedDataStatisticsStrategy, statistics=sa.ExampleStatistics, model_blessing=sa.ModelBlessing
    )
    assert resolved["statistics"][0].id == first["statistics"].id

    # A later run re-blesses the rolled-back model (its Pusher refuses it): revoking again catches that blessing.
    third = lineage.artifact(sa.ModelBlessing, "/root/blessing/3", blessed=1, current_model_id=second["model"].id)
    refused = lineage.artifact(
        sa.PushedModel, "/root/pushed/3", pushed=0, model_fingerprint=pusher.model_fingerprint(models["b"])
    )
    lineage.execution("Pusher", {"model": second["model"], "model_blessing": third}, {"pushed_model": refused})
    assert rollback.revoke_blessings(metadata, "tfxflow-taxi", serving_dir.read_rollbacks(base)) == [
        f"blessing {third.id} of model {second['model'].id} (version {NOW + 10}) revoked"
    ]
    assert rollback.revoke_blessings(metadata, "tfxflow-taxi", serving_dir.read_rollbacks(base)) == [
        "no blessed model of a rolled-back version in ML Metadata: nothing revoked"
    ]
    assert rollback.revoke_blessings(metadata, "other", serving_dir.read_rollbacks(base)) == [
        f"no pipeline other in {metadata}: no blessing revoked (--pipeline-name?)"
    ]
