"""Chinese end to end through the CLI, as a user runs it: customer-service messages written without spaces
(tests/data/chinese_intents.py: 8 intents, full-width and ASCII punctuation, amounts, Latin names, emoji),
`infer-schema --init-checkpoint`'s drafts unchanged, and `tfxflow run --init-checkpoint --tflite` on a tiny
BERT Hugging Face folder whose vocabulary is made as bert-base-chinese's is (every character a token, with its
`##` form): the model is pushed, answers raw Chinese text, and its TFLite model answers as the served model on
every eval row. The folder's weights are random (a few thousand parameters): what is checked is the text's way
through the pipeline, not what a pretrained encoder knows.

One run, about 2 minutes on 2 cores."""

import json
import os
import struct

import numpy as np
import pytest
import tensorflow as tf
import yaml
from tokenizers import BertWordPieceTokenizer

from tests import edge_checks, helpers
from tests.components.model.checkpoints.folders import MINILM
from tests.data import chinese_intents
from tests.pipeline.test_tasks_e2e import _eval_split, _ok, _run, _served
from tfxflow.components import serving_dir
from tfxflow.components.edge import edge

pytestmark = pytest.mark.e2e

ROWS = 800  # about 600 training rows and 200 eval rows (the split is by a hash of each row)
HIDDEN, INTERMEDIATE, POSITIONS = 32, 64, 64
SIZES = {384: HIDDEN, 1536: INTERMEDIATE, 512: POSITIONS}  # all-MiniLM-L6-v2's dimensions -> the tiny model's


def _vocabulary():
    """[PAD] [UNK] [CLS] [SEP] [MASK], then every printable ASCII character and every character of the data set
    (lower-cased: the model is uncased), each also as a `##` continuation, as bert-base-chinese's vocab.txt is
    made; and a few whole Latin words."""
    characters = sorted({c.lower() for c in chinese_intents.characters()} | {chr(i) for i in range(33, 127)})
    characters = [c for c in characters if not c.isspace() and not ("A" <= c <= "Z")]
    words = ["iphone", "app", "vip", "wifi", "paypal", "express", "thanks", "hi", "no"]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters, *words, *(f"##{c}" for c in characters)]


def _safetensors_header(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def _write_safetensors(path, tensors):
    """The safetensors format (github.com/huggingface/safetensors: an 8-byte little-endian header size, a JSON
    header of each tensor's dtype, shape and byte offsets, then the bytes), float32 only."""
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def tiny_chinese_bert(folder):
    """A Hugging Face BERT folder of one layer, 32 wide, 64 positions: all-MiniLM-L6-v2's tensor names (its first
    layer's), shapes made small, random weights (layer norms 1, biases 0), and a vocabulary covering the data."""
    vocabulary = _vocabulary()
    os.makedirs(folder)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocabulary) + "\n")
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=POSITIONS,
        vocab_size=len(vocabulary),
        _name_or_path="tiny-chinese-bert",
    )
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": True, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer"}, f)
    rng = np.random.default_rng(0)
    tensors = {}
    for name, entry in sorted(_safetensors_header(os.path.join(MINILM, "model.safetensors")).items()):
        if name == "__metadata__" or (".layer." in name and ".layer.0." not in name):
            continue
        shape = [len(vocabulary) if n == 30522 else SIZES.get(n, n) for n in entry["shape"]]
        if name.endswith("LayerNorm.weight"):
            tensors[name] = np.ones(shape)
        elif name.endswith("bias"):
            tensors[name] = np.zeros(shape)
        else:
            tensors[name] = rng.normal(0, 0.02, shape)
    _write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("chinese")
    data = base / "data"
    data.mkdir()
    chinese_intents.write_csv(str(data / "messages.csv"), ROWS, seed=7)
    checkpoint = tiny_chinese_bert(str(base / "tiny-chinese-bert"))
    out = str(base / "draft")
    drafted = helpers.run_cli(
        "infer-schema", "--data-root", str(data), "--out", out, "--label", "intent", "--init-checkpoint", checkpoint
    )
    _ok(drafted)
    schema, features = os.path.join(out, "schema.pbtxt"), os.path.join(out, "features.yaml")
    home = str(base / "home")
    # A random encoder learns the intents at a larger rate than the fine-tuning recipe's 5e-5, in more epochs.
    result = _run(
        home,
        str(data),
        schema,
        features,
        "--init-checkpoint",
        checkpoint,
        "--learning-rate",
        "3e-3",
        "--train-epochs",
        "8",
        "--tflite",
        dataset="chinese",
    )
    return {"data": str(data), "schema": schema, "features": features, "home": home, "result": result,
            "checkpoint": checkpoint, "drafted": drafted}  # fmt: skip


def _reference(run):
    return BertWordPieceTokenizer(os.path.join(run["checkpoint"], "vocab.txt"), lowercase=True)


def test_the_message_is_drafted_as_text_with_a_sequence_length_from_its_word_pieces(run):
    with open(run["features"], encoding="utf-8") as f:
        drafted = yaml.safe_load(f)
    assert drafted["text"] == ["message"] and drafted["categorical"] == ["channel"]
    assert drafted["numeric"] == ["wait_minutes"] and sorted(drafted["label"]["classes"]) == sorted(
        chinese_intents.INTENTS
    )
    reference = _reference(run)
    pieces = sorted(len(reference.encode(m).ids) for m, _ in chinese_intents.rows(ROWS, seed=7))
    assert reference.token_to_id("[UNK]") not in {
        i for m, _ in chinese_intents.rows(ROWS, 7) for i in reference.encode(m).ids
    }
    p95 = pieces[-(-95 * ROWS // 100) - 1]  # [CLS] and [SEP] included
    assert drafted["sequence_length"] == min(max(16, -(-p95 // 8) * 8), POSITIONS)


def test_a_run_says_how_many_rows_its_sequence_length_cuts(run):
    _ok(run["result"])
    with open(run["features"], encoding="utf-8") as f:
        length = yaml.safe_load(f)["sequence_length"]
    reference = _reference(run)
    cut = sum(len(reference.encode(m).ids) > length for m, _ in chinese_intents.rows(ROWS, seed=7))
    assert (
        f"tfxflow: text column message: {cut} of {ROWS} rows ({cut / ROWS:.1%}) longer than sequence_length "
        f"{length} are cut (word pieces of its vocabulary)"
    ) in run["result"].stdout


def test_the_pushed_model_answers_raw_chinese_text(run):
    _ok(run["result"])
    model_dir, _ = _served(run["home"], "chinese")
    import tensorflow_text  # noqa: F401 (the served graph tokenizes with TF Text's ops)

    loaded = tf.saved_model.load(model_dir)
    raw = loaded.signatures["serving_raw"]
    messages = ["请问我的订单#1234567890什么时候发货？", "我要投诉！快递员态度太差😡", "退款￥99.5还没到账…"]
    channels = ["app", "电话", "web"]
    answer = raw(message=tf.constant(messages), channel=tf.constant(channels), wait_minutes=tf.constant([1.0] * 3))
    scores = answer["scores"].numpy()
    assert scores.shape == (3, 8) and np.allclose(scores.sum(axis=1), 1, atol=1e-5)
    rows = [{"message": m, "channel": c, "wait_minutes": "1.0"} for m, c in zip(messages, channels, strict=True)]
    examples = helpers.serialize_examples(rows, run["schema"])
    by_examples = loaded.signatures["serving_default"](examples=tf.constant(examples))
    np.testing.assert_allclose(scores, by_examples["scores"].numpy(), atol=1e-5)
    assert sorted(x.decode() for x in answer["classes"].numpy()[0]) == sorted(chinese_intents.INTENTS)
    # It learned the intents from the characters: 0.85 on the 189 eval rows when measured (the gate's bar: 0.5).
    records = _eval_split(run["home"])
    labels = loaded.signatures["transform_features"](examples=tf.constant(records))["intent_label"].numpy()
    predicted = loaded.signatures["serving_default"](examples=tf.constant(records))["scores"].numpy().argmax(axis=1)
    assert (predicted == labels.reshape(-1)).mean() >= 0.7


def test_the_tflite_tokenizer_makes_the_served_word_pieces_on_every_eval_row(run):
    """What the TFLite model's answers rest on: TF Text's FastBertTokenizer (text.edge_tokenize) gives the ids the
    served graph's tokenizer (text.tokenize) gives, for every eval message."""
    from tfxflow.components.model import text
    from tfxflow.components.model.tokenization import Tokenization

    with open(run["features"], encoding="utf-8") as f:
        length = yaml.safe_load(f)["sequence_length"]
    vocab_file = os.path.join(run["checkpoint"], "vocab.txt")
    vocabulary = text.read_vocabulary(vocab_file)
    messages = [r["message"] for r in _eval_rows(run["home"])]
    served, _ = text.tokenize(tf.constant(messages), vocab_file, length, Tokenization(lower_case=True), vocabulary)
    edge_ids, _ = text.edge_tokenize(tf.constant(messages), vocabulary, length, Tokenization(lower_case=True))
    differ = (served.numpy() != edge_ids.numpy()).any(axis=1)
    assert not differ.any(), (
        f"{differ.sum()} of {len(messages)} eval messages tokenized otherwise, e.g. "
        f"{[m for m, d in zip(messages, differ, strict=True) if d][:3]}"
    )


def _eval_rows(home):
    """The eval split's rows as the CSV had them (message, channel, wait_minutes)."""
    rows = []
    for record in _eval_split(home):
        example = tf.train.Example.FromString(record)
        feature = example.features.feature
        rows.append(
            {
                "message": feature["message"].bytes_list.value[0].decode(),
                "channel": feature["channel"].bytes_list.value[0].decode(),
                "wait_minutes": repr(feature["wait_minutes"].float_list.value[0]),
            }
        )
    return rows


def test_the_tflite_model_answers_as_the_served_model_on_every_eval_row(run):
    """The float32 TFLite model (TF Text's TFLite tokenizer ops) gives the served SavedModel's scores, within the
    edge gate's tolerance, on every row of the eval split: full-width punctuation, ￥ amounts, emoji included."""
    _ok(run["result"])
    line = run["result"].stdout.split("  edge (TFLite):  ", 1)[1].splitlines()[0]
    assert not line.startswith("the float32 TFLite model is not published"), line
    folder, result = edge_checks.published(os.path.join(run["home"], "serving"), "chinese")
    edge_checks.check_result(result, run["result"].stdout)
    assert result["text_ops"] == [
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>ByteSplitWithOffsets",
    ]
    rows = _eval_rows(run["home"])
    assert 150 < len(rows) < 250
    raw = tf.saved_model.load(folder).signatures["serving_raw"]
    specs = raw.structured_input_signature[1]  # {argument: TensorSpec named by the column}
    values = {arg: [r[spec.name] if spec.dtype == tf.string else float(r[spec.name]) for r in rows]
              for arg, spec in specs.items()}  # fmt: skip
    expected = raw(**{arg: tf.constant(values[arg], spec.dtype) for arg, spec in specs.items()})["scores"].numpy()
    feeds = {
        spec.name: np.array([v.encode() for v in values[arg]], dtype=object)
        if spec.dtype == tf.string
        else np.array(values[arg], dtype=spec.dtype.as_numpy_dtype)
        for arg, spec in specs.items()
    }
    path = os.path.join(folder, serving_dir.EDGE_DIR, edge.FILES["float32"])
    answer = edge_checks._interpreter(path, True).get_signature_runner("serving_raw")(**feeds)["scores"]
    tolerance = edge.TOLERANCES["float32"]
    differ = ~np.isclose(answer, expected, atol=tolerance, rtol=tolerance).all(axis=1)
    assert not differ.any(), (
        f"{differ.sum()} of {len(rows)} eval rows differ, e.g. "
        f"{[r['message'] for r, d in zip(rows, differ, strict=True) if d][:5]}"
    )
