"""The encoder families besides BERT read as transformers reads them: small DistilBERT, ELECTRA (discriminator,
embeddings narrower than the hidden width), RoBERTa and XLM-R folders that transformers' own save_pretrained wrote
(tests/data/hf_families.py), each described by its files, its encoder giving transformers' last hidden states on
Debian descriptions (English, European, Cyrillic, Greek and CJK text), WordPiece families tokenized by the Transform
graph as their own tokenizer does, and the checkpoints these families cannot serve refused in one line."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.components.model.checkpoints.folders import DATA, encoder_model, loaded
from tfxflow.components.model import checkpoints, presets, text, tokenization
from tfxflow.components.model.checkpoints import CheckpointError

TOLERANCE = 1e-4  # float32 against PyTorch's float32
FAMILIES = os.path.abspath(os.path.join(DATA, "hf_families"))
NAMES = ("distilbert", "electra", "roberta", "xlm-roberta")


def folder(name):
    return os.path.join(FAMILIES, name)


@pytest.fixture(scope="module", params=NAMES)
def family(request):
    checkpoint = checkpoints.locate(folder(request.param))
    return request.param, checkpoint, np.load(os.path.join(folder(request.param), "reference.npz"))


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "distilbert",
            dict(
                kind=tokenization.WORDPIECE,
                file="vocab.txt",
                special={"cls": 2, "sep": 3, "pad": 0, "unk": 1, "mask": 4},
                encoder=presets.Encoder(2, 32, 2, 64, 128, presets.GELU_ERF, 1e-12),
                pooling=presets.CLS,
                dropouts=(0.1, 0.1, 0.2),  # dropout, attention_dropout, seq_classif_dropout
            ),
        ),
        (
            "electra",
            dict(
                kind=tokenization.WORDPIECE,
                file="vocab.txt",
                special={"cls": 2, "sep": 3, "pad": 0, "unk": 1, "mask": 4},
                encoder=presets.Encoder(2, 32, 2, 64, 128, presets.GELU_ERF, 1e-12, embedding_size=16),
                pooling=presets.CLS,
                dropouts=(0.1, 0.1, 0.1),
            ),
        ),
        (
            "roberta",
            dict(
                kind=tokenization.BYTE_BPE,
                file="vocab.json",
                special={"cls": 0, "sep": 2, "pad": 1, "unk": 3, "mask": 4},
                encoder=presets.Encoder(2, 32, 2, 64, 64, presets.GELU_ERF, 1e-5),  # 66 rows from padding_idx + 1
                pooling=presets.CLS,  # RobertaForMaskedLM has no pooler
                dropouts=(0.1, 0.1, 0.1),
            ),
        ),
        (
            "xlm-roberta",
            dict(
                kind=tokenization.SENTENCEPIECE,
                file="sentencepiece.bpe.model",
                special={"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": 1499},
                encoder=presets.Encoder(2, 32, 2, 64, 64, presets.GELU_ERF, 1e-5),
                pooling=presets.POOLER,  # XLMRobertaModel's pooler
                dropouts=(0.1, 0.1, 0.1),
            ),
        ),
    ],
)
def test_each_family_is_described_by_its_own_files(name, expected):
    checkpoint = checkpoints.locate(folder(name))
    assert checkpoint.kind == checkpoints.HUGGING_FACE and checkpoint.family == name
    assert checkpoint.encoder == expected["encoder"]
    assert checkpoint.vocab_size == 1500
    assert checkpoint.tokenization.kind == expected["kind"]
    assert checkpoint.vocab_file == os.path.join(folder(name), expected["file"])
    assert checkpoint.merges_file == (os.path.join(folder(name), "merges.txt") if name == "roberta" else "")
    assert dict(checkpoint.special_tokens) == expected["special"]
    # transformers' tokenizer's own ids of the special tokens (tokenizer.json's added tokens).
    with open(os.path.join(folder(name), "tokenizer.json"), encoding="utf-8") as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    assert set(checkpoint.special_tokens.values()) == set(added.values())
    assert checkpoint.pooling == expected["pooling"] and checkpoint.has_pooler == (name == "xlm-roberta")
    assert (checkpoint.hidden_dropout, checkpoint.attention_dropout, checkpoint.head_dropout) == expected["dropouts"]
    assert checkpoints.Checkpoint.from_dict(json.loads(json.dumps(checkpoint.to_dict()))) == checkpoint


def test_the_encoder_gives_transformers_last_hidden_states(family):
    name, checkpoint, reference = family
    ids, mask = reference["input_ids"].astype(np.int64), reference["attention_mask"]
    assert len(ids) == 20 and mask.sum() == len(reference["hidden_states"])
    model = loaded(encoder_model(checkpoint, ids.shape[1], checkpoint.pooling), checkpoints.weights(checkpoint))
    states, _ = model([ids, mask.astype(np.int64)])
    np.testing.assert_allclose(states.numpy()[mask], reference["hidden_states"], atol=TOLERANCE, rtol=0)
    # Not a pass by accident: the states are of unit scale (layer-normed), and the padding's differ.
    assert np.abs(reference["hidden_states"]).mean() > 0.5


@pytest.mark.parametrize("name", ["distilbert", "electra"])
def test_wordpiece_families_are_tokenized_by_the_transform_graph_as_by_their_own_tokenizer(name):
    checkpoint = checkpoints.locate(folder(name))
    reference = np.load(os.path.join(folder(name), "reference.npz"))
    ids, mask = text.tokenize(
        tf.constant([str(t) for t in reference["texts"]]),
        checkpoint.vocab_file,
        reference["input_ids"].shape[1],
        checkpoint.tokenization,
        text.read_vocabulary(checkpoint.vocab_file),
    )
    np.testing.assert_array_equal(ids.numpy(), reference["input_ids"])
    np.testing.assert_array_equal(mask.numpy().astype(bool), reference["attention_mask"])


def copy(tmp_path, name, config=None, remove=()):
    target = str(tmp_path / name)
    shutil.copytree(folder(name), target)
    if config:
        path = os.path.join(target, "config.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**data, **config}, f)
    for file in remove:
        os.remove(os.path.join(target, file))
    return target


@pytest.mark.parametrize(
    "name, config, remove, message",
    [
        ("distilbert", {"model_type": "albert"}, (), r"model_type is 'albert': ALBERT shares one layer's weights"),
        ("roberta", {"model_type": "deberta-v2"}, (), r"model_type is 'deberta-v2': DeBERTa's disentangled"),
        ("roberta", {"model_type": "mpnet"}, (), r"model_type is 'mpnet': MPNet adds a learned relative-position"),
        ("roberta", {"model_type": "gpt2"}, (), r"model_type is 'gpt2'; the encoder builds the layouts of model_type"),
        (
            "electra",
            {"architectures": ["ElectraForMaskedLM"]},
            (),
            r"an ELECTRA generator \(config.json's architectures is ElectraForMaskedLM\)",
        ),
        (
            "distilbert",
            {"sinusoidal_pos_embds": True},
            (),
            r"config.json's sinusoidal_pos_embds is true: fixed sinusoidal positions",
        ),
        ("distilbert", None, ("vocab.txt",), r"has no vocab.txt \(a WordPiece vocabulary"),
        ("roberta", None, ("merges.txt",), r"has no merges.txt \(RoBERTa's byte-level BPE is vocab.json and merges"),
        ("xlm-roberta", None, ("sentencepiece.bpe.model",), r"has no sentencepiece.bpe.model \(XLM-R's SentencePiece"),
        ("xlm-roberta", {"vocab_size": 1000}, (), r"does not fit its own config"),
        ("roberta", {"pad_token_id": 0}, (), r"the position table has 66 rows|pad_token_id is 0"),
        (
            "distilbert",
            {"n_layers": 1},
            (),
            r"the weights hold more layers than config.json's n_layers 1 \(transformer.layer.1.",
        ),
    ],
)
def test_a_family_checkpoint_that_cannot_serve_is_refused_naming_the_file(tmp_path, name, config, remove, message):
    target = copy(tmp_path, name, config, remove)
    with pytest.raises(CheckpointError, match=message) as caught:
        checkpoints.locate(target)
    assert str(caught.value).startswith(f"--init-checkpoint {target}: ") and "\n" not in str(caught.value)


def test_a_sentencepiece_model_that_is_not_one_is_refused(tmp_path):
    target = copy(tmp_path, "xlm-roberta")
    with open(os.path.join(target, "sentencepiece.bpe.model"), "wb") as f:
        f.write(b"\x0f\xff")
    with pytest.raises(CheckpointError, match="sentencepiece.bpe.model is not a SentencePiece model"):
        checkpoints.locate(target)


@pytest.mark.parametrize("name", ["distilbert", "electra"])
def test_a_wordpiece_family_resolves_the_runs_settings(name):
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.components.model.keras_model import ModelParams
    from tfxflow.pipeline import config as config_lib

    features = FeatureConfig.from_dict(
        {"label": {"name": "y", "column": "y"}, "text": ["body"], "sequence_length": 128}
    )
    training, resolved = config_lib.resolve_shared(
        config_lib.TrainingConfig(init_checkpoint=folder(name)), config_lib.EvaluationConfig(), features
    )
    assert resolved.text_vocab_file == os.path.join(folder(name), "vocab.txt")
    assert (resolved.lower_case, resolved.tokenizer) == (True, "huggingface")
    assert training.pooling == "cls" and training.model_preset is None
    params = ModelParams.from_dict(training.custom_config()["model"])
    assert params.encoder == checkpoints.locate(folder(name)).encoder
    assert params.encoder.embedding_size == (16 if name == "electra" else None)


@pytest.mark.parametrize(
    "name, kind, files",
    [
        ("roberta", tokenization.BYTE_BPE, ("vocab.json", "merges.txt")),
        ("xlm-roberta", tokenization.SENTENCEPIECE, ("sentencepiece.bpe.model", "")),
    ],
)
def test_a_subword_familys_tokenizer_files_reach_the_feature_config(name, kind, files):
    """The Transform graph tokenizes with the checkpoint's own files (components/model/subword/): their kind and
    paths go into the feature config; a text_vocab_file of the user's is refused, the files come with it."""
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.pipeline import config as config_lib

    data = {"label": {"name": "y", "column": "y"}, "text": ["body"], "sequence_length": 64}
    _, resolved = config_lib.resolve_shared(
        config_lib.TrainingConfig(init_checkpoint=folder(name)),
        config_lib.EvaluationConfig(),
        FeatureConfig.from_dict(data),
    )
    vocabulary, merges = (os.path.join(folder(name), f) if f else "" for f in files)
    assert (resolved.tokenizer_kind, resolved.text_vocab_file, resolved.text_merges_file) == (kind, vocabulary, merges)
    assert resolved.tokenization.kind == kind
    own = FeatureConfig.from_dict(
        {**data, "text_vocab_file": __file__, "tokenizer_kind": kind, "text_merges_file": __file__}
    )
    with pytest.raises(config_lib.ConfigError, match="whose files come with it: leave text_vocab_file out"):
        config_lib.resolve_shared(
            config_lib.TrainingConfig(init_checkpoint=folder(name)), config_lib.EvaluationConfig(), own
        )


def test_an_electra_generators_weights_are_refused_whatever_its_config_says(tmp_path):
    """A generator's file holds `generator_predictions` beside `electra.`: refused by its weights too."""
    import struct

    target = copy(tmp_path, "electra", {"architectures": ["ElectraModel"]})
    path = os.path.join(target, "model.safetensors")
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header, data = json.loads(f.read(length)), f.read()
    extra = np.zeros((16, 32), np.float32).tobytes()
    header["generator_predictions.dense.weight"] = {
        "dtype": "F32",
        "shape": [16, 32],
        "data_offsets": [len(data), len(data) + len(extra)],
    }
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data + extra)
    with pytest.raises(CheckpointError, match=r"an ELECTRA generator \(its weights hold generator_predictions"):
        checkpoints.locate(target)


def test_tflite_with_a_subword_tokenizer_is_refused_before_any_work():
    """TFLite's edge tokenizer is TF Text's FastBertTokenizer (WordPiece): a RoBERTa run with --tflite would train
    and then convert nothing, so the flag is refused first, in one line."""
    from tfxflow.components.model.features import FeatureConfig
    from tfxflow.pipeline import config as config_lib

    features = FeatureConfig.from_dict({"label": {"name": "y", "column": "y"}, "text": ["body"], "sequence_length": 64})
    with pytest.raises(config_lib.ConfigError, match=r"^--tflite: the text columns' tokenizer is a byte-level BPE"):
        config_lib.resolve_shared(
            config_lib.TrainingConfig(init_checkpoint=folder("roberta")),
            config_lib.EvaluationConfig(tflite=True),
            features,
        )
