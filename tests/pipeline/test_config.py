"""Run configuration: defaults, the home folder, and clear errors for bad paths and files."""

import os

import pytest

from tfxflow.components.model.features import FeatureConfigError
from tfxflow.pipeline import config as config_lib
from tfxflow.pipeline.beam_runners import BeamRunner


def test_defaults_use_the_bundled_taxi_data_and_schema(tmp_path):
    config = config_lib.build_run_config(environ={}, home=str(tmp_path))
    assert config.data_root.endswith(os.path.join("chicago_taxi_pipeline", "data", "simple"))
    assert os.path.isfile(os.path.join(config.data_root, "data.csv"))
    assert config.schema_path.endswith(os.path.join("schemas", "taxi", "schema.pbtxt"))
    assert config.pipeline_name == "tfxflow-taxi" and config.model_name == "taxi"
    assert config.features.label.name == "big_tipper"
    paths = config.paths
    for path in (paths.pipeline_root, paths.metadata_path, paths.serving_dir, paths.log_dir):
        assert path.startswith(str(tmp_path) + os.sep)


def test_home_comes_from_flag_then_environment_then_cwd(tmp_path, monkeypatch):
    assert config_lib.resolve_home("/a", {config_lib.HOME_ENV: "/b"}) == "/a"
    assert config_lib.resolve_home(None, {config_lib.HOME_ENV: "/b"}) == "/b"
    monkeypatch.chdir(tmp_path)
    assert config_lib.resolve_home(None, {}) == os.path.join(str(tmp_path), config_lib.DEFAULT_HOME)


def test_each_output_path_can_be_set_on_its_own(tmp_path):
    paths = config_lib.Paths.under(str(tmp_path / "home"), serving_dir=str(tmp_path / "srv"))
    assert paths.serving_dir == str(tmp_path / "srv")
    assert paths.pipeline_root == str(tmp_path / "home" / "pipeline_root")


def test_missing_data_root_is_named(tmp_path):
    with pytest.raises(config_lib.ConfigError, match=f"--data-root {tmp_path}/nope: no such folder"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), data_root=str(tmp_path / "nope"))


def test_data_root_without_csv_is_named(tmp_path):
    (tmp_path / "data").mkdir()
    for name in ("notes.txt", "data.csv.bak", "data.csv.zip"):
        (tmp_path / "data" / name).write_text("x")
    with pytest.raises(config_lib.ConfigError, match="holds no \\*.csv or \\*.csv.gz file"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), data_root=str(tmp_path / "data"))


def test_data_root_files_are_csv_and_gzip_compressed_csv(tmp_path):
    for name in ("b.csv.gz", "a.csv", "a.csv.bak", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert config_lib.check_data_root(str(tmp_path)) == (str(tmp_path / "a.csv"), str(tmp_path / "b.csv.gz"))


def test_unparsable_schema_is_named(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    schema.write_text("feature { name: 'x' type: NOPE }")
    with pytest.raises(config_lib.ConfigError, match=f"schema {schema}: does not parse"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), schema_path=str(schema))


def test_feature_config_naming_a_column_the_schema_lacks_is_named(tmp_path):
    features = tmp_path / "features.yaml"
    features.write_text("label: {name: y, column: tips}\nnumeric: [fare, fare_per_mile]\n")
    with pytest.raises(FeatureConfigError, match=r"\['fare_per_mile'\] not found in schema"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), feature_config_path=str(features))


def test_other_dataset_names_need_a_data_root(tmp_path):
    with pytest.raises(config_lib.ConfigError, match="only 'taxi' has bundled data"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), dataset="loans")


def test_beam_runner_default_is_the_in_memory_direct_runner(tmp_path):
    config = config_lib.build_run_config(environ={}, home=str(tmp_path))
    assert config.beam is None and config.beam_pipeline_args == []
    direct = config_lib.build_run_config(
        environ={}, home=str(tmp_path), beam=BeamRunner(direct_mode="multi_processing", direct_workers=0)
    )
    # One source for each setting: a direct runner's mode and workers are the config's.
    assert (direct.beam, direct.beam_mode, direct.beam_workers) == (None, "multi_processing", 0)
    assert direct.beam_pipeline_args == ["--direct_running_mode=multi_processing", "--direct_num_workers=0"]


def test_portable_runner_is_resolved_and_changes_the_run_fingerprint(tmp_path):
    from tfxflow.pipeline.staging import run_fingerprint

    direct = config_lib.build_run_config(environ={}, home=str(tmp_path), tracking_mode="off")
    portable = config_lib.build_run_config(
        environ={}, home=str(tmp_path), tracking_mode="off", beam=BeamRunner(runner="portable")
    )
    assert portable.beam == BeamRunner(runner="portable", job_endpoint="embed", environment_type="LOOPBACK")
    assert portable.beam_pipeline_args == [
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=LOOPBACK",
    ]
    # Another runner is another run: never answered "up to date" from the direct run's record.
    assert run_fingerprint(portable) != run_fingerprint(direct)


def test_beam_runner_errors_name_the_flag(tmp_path):
    with pytest.raises(config_lib.ConfigError, match="--beam-runner spark needs --spark-master-url"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), beam=BeamRunner(runner="spark"))
    with pytest.raises(config_lib.ConfigError, match="--beam-mode must be one of"):
        config_lib.build_run_config(environ={}, home=str(tmp_path), beam_mode="fast")
    with pytest.raises(
        config_lib.ConfigError, match="--beam-runner dataflow: Dataflow's workers cannot read this machine's files"
    ):
        config_lib.build_run_config(
            environ={},
            home=str(tmp_path),
            beam=BeamRunner(
                runner="dataflow",
                project="ml-prod-4711",
                region="us-central1",
                temp_location="gs://ml-tmp/t",
                image="registry.example.com/ml/tfxflow:0.1.0",
            ),
        )


@pytest.mark.parametrize(
    "training, evaluation, message",
    [
        (
            config_lib.TrainingConfig(eval_every_steps=0),
            config_lib.EvaluationConfig(),
            "--eval-every-steps must be >= 1",
        ),
        (
            config_lib.TrainingConfig(grad_accum_steps=0),
            config_lib.EvaluationConfig(),
            "--grad-accum-steps must be >= 1",
        ),
        (config_lib.TrainingConfig(), config_lib.EvaluationConfig(max_rows=-1), "--eval-max-rows must be >= 0"),
        (
            config_lib.TrainingConfig(transform_max_rows=-1),
            config_lib.EvaluationConfig(),
            "--transform-max-rows must be >= 0",
        ),
    ],
)
def test_shared_settings_are_checked_alike_for_a_run_and_a_compiled_pipeline(training, evaluation, message, tmp_path):
    from tests.pipeline.conftest import kubeflow_config
    from tfxflow.pipeline.kfp.compiler import check_kubeflow_config

    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.build_run_config(environ={}, home=str(tmp_path), training=training, evaluation=evaluation)
    with pytest.raises(config_lib.ConfigError, match=message):
        check_kubeflow_config(
            kubeflow_config("minio://mlpipeline/v2/artifacts", training=training, evaluation=evaluation)
        )


def test_trainer_custom_config_is_built_from_the_declared_keys():
    custom = config_lib.TrainingConfig(hidden_units=(8, 4), seed=3).custom_config(backup_root="/b")
    assert custom["model"] == {
        "preset": "default",
        "hidden_units": [8, 4],
        "max_embedding_dim": None,
        "learning_rate": 0.001,
        "dropout": 0.0,
        "optimizer": None,
        "init_checkpoint": None,
    }
    assert custom["training"] == {
        "batch_size": 256,
        "eval_every_steps": 100,
        "seed": 3,
        "grad_accum_steps": 1,
        "early_stopping_patience": 3,
        "profile_steps": None,
        "backup_root": "/b",
    }
    assert custom["hardware"]["precision"] == "auto"


def test_a_given_vocabulary_is_checked_before_any_work(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    schema.write_text('feature { name: "note" type: BYTES } feature { name: "y" type: INT }')
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nthe\n")
    features = tmp_path / "features.yaml"
    features.write_text("label: {name: y_label, column: y}\ntext: [note]\ntext_vocab_file: vocab.txt\n")
    with pytest.raises(config_lib.ConfigError, match=r"features.yaml: text_vocab_file: .*vocab.txt: a BERT vocabulary"):
        config_lib.load_schema_and_features("taxi", str(schema), str(features))
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    _, loaded = config_lib.load_schema_and_features("taxi", str(schema), str(features))
    assert loaded.text == ("note",) and loaded.text_vocab_file == str(vocab)  # beside the feature config
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nrun\nthe\n")
    with pytest.raises(config_lib.ConfigError, match=r"tokens listed twice: 'the' \(line 7\)"):
        config_lib.load_schema_and_features("taxi", str(schema), str(features))


def _text_features(vocab_file=None):
    from tfxflow.components.model.features import FeatureConfig

    data = {"label": {"name": "y", "column": "y"}, "text": ["body"], "sequence_length": 64}
    if vocab_file:
        data["text_vocab_file"] = str(vocab_file)
    return FeatureConfig.from_dict(data)


def test_an_init_checkpoint_that_cannot_fit_is_refused_before_any_work(tmp_path):
    from tests.components.model.test_warm_start import bert_checkpoint_values, write_name_based_checkpoint

    prefix = write_name_based_checkpoint(str(tmp_path / "bert_model.ckpt"), bert_checkpoint_values(2, 128, 12))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(7)]) + "\n")
    evaluation = config_lib.EvaluationConfig()

    def check(features, **training):
        config_lib.check_shared(config_lib.TrainingConfig(init_checkpoint=prefix, **training), evaluation, features)

    check(_text_features(vocab), model_preset="bert-tiny")  # 12 word pieces, 2 layers of 128: it fits
    with pytest.raises(config_lib.ConfigError, match=r"--model-preset bert-base is 12 layers, 768 wide .* bert-tiny"):
        check(_text_features(vocab), model_preset="bert-base")
    with pytest.raises(config_lib.ConfigError, match="set text_vocab_file in the feature config"):
        check(_text_features(), model_preset="bert-tiny")
    with pytest.raises(config_lib.ConfigError, match="--model-preset default has no Transformer"):
        check(_text_features(vocab))
    tabular = config_lib.FeatureConfig.from_dict({"label": {"name": "y", "column": "y"}, "numeric": ["x"]})
    with pytest.raises(config_lib.ConfigError, match="the feature config has no text column"):
        check(tabular, model_preset="bert-tiny")
    with pytest.raises(config_lib.ConfigError, match="neither a SavedModel folder"):
        config_lib.check_shared(
            config_lib.TrainingConfig(init_checkpoint=str(tmp_path / "nothing"), model_preset="bert-tiny"),
            evaluation,
            _text_features(vocab),
        )


def test_the_init_checkpoint_flag_makes_a_local_path_absolute_and_keeps_a_uri():
    from tfxflow.pipeline.settings import local_or_remote_path

    assert local_or_remote_path("ckpt/bert_model.ckpt", "--init-checkpoint") == os.path.abspath("ckpt/bert_model.ckpt")
    assert local_or_remote_path("s3://models/bert", "--init-checkpoint") == "s3://models/bert"
