"""`infer-schema` writes a schema, statistics and a feature config draft that the pipeline accepts."""

import os

import pytest
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tests import helpers
from tfxflow.components.model.features import FeatureConfig
from tfxflow.components.validation import drift
from tfxflow.pipeline.inputs import schema_columns
from tfxflow.pipeline.tools import infer_schema as schema_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def inferred(tmp_path_factory):
    base = tmp_path_factory.mktemp("infer")
    data = helpers.write_taxi_sample(str(base / "data"), rows=300)
    out = str(base / "out")
    return data, out, schema_tool.infer(data, out, label_column="tips")


def test_writes_schema_statistics_and_feature_config(inferred):
    _, out, result = inferred
    assert result.rows == 300
    assert result.columns["fare"] == "FLOAT" and result.columns["payment_type"] == "BYTES"
    assert result.columns["trip_start_hour"] == "INT"
    assert sorted(os.path.basename(p) for p in result.written) == [
        "features.yaml",
        "inferred_schema.pbtxt",
        "schema.pbtxt",
        "statistics.pb",
    ]
    schema = schema_pb2.Schema()
    with open(os.path.join(out, "schema.pbtxt"), encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    tips = next(f for f in schema.feature if f.name == "tips")
    assert list(tips.not_in_environment) == ["SERVING"]
    assert list(schema.default_environment) == ["TRAINING", "SERVING"]
    stats = tfdv.load_stats_binary(os.path.join(out, "statistics.pb"))
    assert stats.datasets[0].num_examples == 300
    # The shapes TFX's SchemaGen infers (TFDV's infer_feature_shape=True): one value in every row, a fixed shape
    # of 1 (a dense tensor); a column with empty cells none, and no minimum count, so empty cells stay valid.
    shaped = {f.name for f in tfdv.infer_schema(stats, infer_feature_shape=True).feature if f.HasField("shape")}
    assert {f.name for f in schema.feature if f.HasField("shape")} == shaped
    missing = {"company", "dropoff_latitude", "dropoff_longitude", "dropoff_census_tract", "pickup_census_tract"}
    assert missing <= {f.name for f in schema.feature} - shaped and {"fare", "tips", "payment_type"} <= shaped
    for feature in schema.feature:
        if feature.name in shaped:
            assert [d.size for d in feature.shape.dim] == [1] and not feature.HasField("value_count")
        else:
            assert not feature.value_count.HasField("min")


def test_feature_config_draft_is_valid_for_the_schema(inferred):
    _, out, _ = inferred
    config = FeatureConfig.load(os.path.join(out, "features.yaml"))
    config.check_columns(schema_columns(os.path.join(out, "schema.pbtxt")), "the inferred schema")
    assert config.label.column == "tips"
    assert "fare" in config.numeric and "payment_type" in config.categorical
    assert "trip_start_hour" in config.categorical  # 24 values: a category, not a number
    assert "tips" not in config.feature_columns


def _schema(path):
    schema = schema_pb2.Schema()
    text_format.Parse(_read(path), schema)
    return schema


def test_schema_draft_watches_every_feature_for_drift_and_skew(inferred):
    _, out, _ = inferred
    draft = {f.name: f for f in _schema(os.path.join(out, "schema.pbtxt")).feature}
    for comparator in ("drift_comparator", "skew_comparator"):
        assert getattr(draft["fare"], comparator).jensen_shannon_divergence.threshold == pytest.approx(0.01)
        assert getattr(draft["trip_start_hour"], comparator).jensen_shannon_divergence.threshold == pytest.approx(0.01)
        assert getattr(draft["payment_type"], comparator).infinity_norm.threshold == pytest.approx(0.05)
    # The label (a number: a regression): its drift, and no skew (requests carry no label).
    assert draft["tips"].drift_comparator.jensen_shannon_divergence.threshold == pytest.approx(0.01)
    assert not draft["tips"].HasField("skew_comparator")
    assert "remove them from columns that change by design" in _read(os.path.join(out, "schema.pbtxt"))
    # TFDV's raw inference is kept as it was
    assert not any(f.HasField("drift_comparator") for f in _schema(os.path.join(out, "inferred_schema.pbtxt")).feature)
    # the gate reads the draft: the data against itself compares every feature, the label too, at distance 0
    statistics = tfdv.load_stats_binary(os.path.join(out, "statistics.pb"))
    comparisons, _ = drift.compare_statistics(
        statistics, statistics, _schema(os.path.join(out, "schema.pbtxt")), "drift"
    )
    assert len(comparisons) == len(draft) and not any(c.value for c in comparisons)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_curated_files_are_kept_unless_forced(inferred):
    data, out, _ = inferred
    curated = os.path.join(out, "schema.pbtxt")
    with open(curated, "a", encoding="utf-8") as f:
        f.write("# curated\n")
    again = schema_tool.infer(data, out, label_column="tips")
    assert curated in again.kept and "# curated" in _read(curated)
    forced = schema_tool.infer(data, out, label_column="tips", force=True)
    assert curated in forced.written and "# curated" not in _read(curated)


def test_cli_refuses_bad_csv_and_unknown_label(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "data.csv").write_bytes(b"a,b\n1,2\n3\n")
    result = helpers.run_cli("infer-schema", "--data-root", str(bad), "--out", str(tmp_path / "out"), timeout=300)
    assert result.returncode == 3
    assert f"{bad}/data.csv line 3: wrong number of fields: 1 fields, the header has 2" in result.stderr
    assert "Traceback" not in result.stderr
    good = tmp_path / "good"
    good.mkdir()
    (good / "data.csv").write_text("a,b\n1,x\n2,y\n")
    result = helpers.run_cli(
        "infer-schema", "--data-root", str(good), "--out", str(tmp_path / "out"), "--label", "c", timeout=300
    )
    assert result.returncode == 2
    assert f"error: --label c: no such column in {good}; it has ['a', 'b']" in result.stderr
    result = helpers.run_cli(
        "infer-schema", "--data-root", str(good), "--out", str(tmp_path / "out"), "--init-checkpoint", str(bad)
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: --init-checkpoint {bad}: not a checkpoint this pipeline reads: ")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "column_type, counts, task, lines",
    [
        ("BYTES", {"Cash": 9, "Card": 5, "Voucher": 1}, "multiclass", ["  - Card", "  - Cash", "  - Voucher"]),
        ("INT", {"3": 4, "10": 2, "7": 1}, "multiclass", ["  - 3", "  - 7", "  - 10"]),  # numeric order
        ("INT", {"0": 90, "1": 10}, "binary", []),  # 0/1 as it is
        ("BYTES", {"no": 90, "yes": 10}, "binary", ["positive_values: ['yes']"]),  # says yes; quoted: a string
        ("BYTES", {"B": 357, "M": 212}, "binary", ["positive_values: [M]"]),  # else the rarer one
        ("INT", {str(v): 1 for v in range(21)}, "regression", []),  # over 20 distinct integers: a number
        ("FLOAT", {"1.5": 3, "2.5": 1}, "regression", []),
    ],
)
def test_the_task_is_drafted_from_the_label_columns_values(column_type, counts, task, lines):
    import collections

    draft = schema_tool.draft_task("y", column_type, collections.Counter(counts))
    assert draft.task == task and draft.why.startswith("'y' holds ")
    for line in lines:
        assert line in draft.label_lines
    assert draft.categorical == (column_type == "INT" and task != "regression")
    if task == "regression":
        assert draft.label_lines[0].startswith("transform: none")


def test_class_names_yaml_would_misread_are_quoted():
    import collections

    import yaml

    draft = schema_tool.draft_task("y", "BYTES", collections.Counter({"yes": 1, "no": 1, "null": 1, "1.0": 1}))
    listed = yaml.safe_load("classes:\n" + "\n".join(draft.label_lines[1:]))["classes"]
    assert sorted(listed) == ["1.0", "no", "null", "yes"] and all(isinstance(c, str) for c in listed)


@pytest.fixture(scope="module")
def drafted_tasks(tmp_path_factory):
    """infer-schema on scikit-learn's wine (string classes) and diabetes (a number), and on an integer class
    label made from the wine data (its cultivar as 1, 2, 3)."""
    base = tmp_path_factory.mktemp("tasks")
    wine = helpers.write_sklearn_dataset("wine", str(base / "wine"))
    diabetes = helpers.write_sklearn_dataset("diabetes", str(base / "diabetes"))
    numbered = helpers.rewrite_csv(
        os.path.join(wine, "data.csv"),
        str(base / "numbered"),
        lambda i, row: {**row, "cultivar": str(1 + int(row["cultivar"][-1]))},
    )
    return {
        name: (folder, str(base / f"{name}-out"), schema_tool.infer(folder, str(base / f"{name}-out"), label))
        for name, folder, label in (
            ("wine", wine, "cultivar"),
            ("diabetes", diabetes, "progression"),
            ("numbered", numbered, "cultivar"),
        )
    }


def test_drafts_of_each_task_load_and_watch_the_label_for_drift(drafted_tasks):
    expected = {"wine": "multiclass", "diabetes": "regression", "numbered": "multiclass"}
    for name, (_, out, result) in drafted_tasks.items():
        config = FeatureConfig.load(os.path.join(out, "features.yaml"))
        assert config.task == expected[name] and result.task.task == expected[name]
        label = next(f for f in _schema(os.path.join(out, "schema.pbtxt")).feature if f.name == config.label.column)
        assert not label.HasField("skew_comparator")  # requests carry no label
        if config.task == "multiclass":
            assert label.drift_comparator.infinity_norm.threshold == pytest.approx(0.05)  # the classes' shares
        else:
            assert label.drift_comparator.jensen_shannon_divergence.threshold == pytest.approx(0.01)
    assert FeatureConfig.load(os.path.join(drafted_tasks["wine"][1], "features.yaml")).label.classes == (
        "class_0",
        "class_1",
        "class_2",
    )
    numbered = _schema(os.path.join(drafted_tasks["numbered"][1], "schema.pbtxt"))
    assert next(f for f in numbered.feature if f.name == "cultivar").int_domain.is_categorical


def test_an_integer_class_label_is_compared_as_categories(drafted_tasks):
    """With the draft schema, TFDV counts an integer label's classes (is_categorical), so the drift check bins it
    by class, not by deciles."""
    from tfxflow.components.validation import folder_statistics

    folder, out, _ = drafted_tasks["numbered"]
    schema = _schema(os.path.join(out, "schema.pbtxt"))
    statistics = folder_statistics.csv_statistics(folder, schema)
    label = next(f for f in statistics.datasets[0].features if f.path.step[0] == "cultivar")
    assert label.WhichOneof("stats") == "string_stats"
    comparisons, _ = drift.compare_statistics(statistics, statistics, schema, "drift")
    (cultivar,) = [c for c in comparisons if c.feature == "cultivar"]
    assert cultivar.comparator == "infinity_norm" and cultivar.binning == "its values" and cultivar.bins == 3


DEBIAN = os.path.join(os.path.dirname(__file__), "..", "..", "data", "debian_packages.csv")


def test_free_text_over_several_lines_is_drafted_as_text_and_left_without_comparators(tmp_path):
    import csv
    import shutil

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(DEBIAN, data / "packages.csv")
    with open(DEBIAN, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="section")
    assert result.rows == len(rows) == 2816  # every description spans lines: one row each
    assert list(result.texts) == ["description"]  # not the package name: one word each
    mean = sum(len(r["description"].encode()) for r in rows) / len(rows)  # TFDV's lengths are in bytes
    assert result.texts["description"] == (
        f"free text: {mean:.0f} bytes on average, 100% of values distinct, 100% with spaces"
    )
    config = FeatureConfig.load(str(tmp_path / "out" / "features.yaml"))
    assert config.text == ("description",) and config.categorical == ("package",)
    words = [len(_reference_words(r["description"])) for r in rows]
    assert (config.task, config.text_vocab_size) == ("multiclass", 8000)
    assert config.sequence_length == result.sequence_length == _drafted(words, 512)
    assert config.label.classes == ("fonts", "games", "graphics", "net", "science", "sound")
    schema = schema_pb2.Schema()
    with open(tmp_path / "out" / "schema.pbtxt", encoding="utf-8") as f:
        text_format.Parse(f.read(), schema)
    features = {f.name: f for f in schema.feature}
    assert not features["description"].HasField("drift_comparator")
    assert not features["description"].HasField("skew_comparator")
    assert features["package"].HasField("skew_comparator")


@pytest.mark.parametrize(
    "values, text",
    [
        (["a long sentence with several words in it, number %d" % i for i in range(40)], True),
        (["one-long-identifier-without-any-space-%04d" % i for i in range(40)], False),  # ids, not text
        (["the same long sentence with several words"] * 40, False),  # one value: categorical
        (["short %d" % i for i in range(40)], False),  # under MIN_TEXT_BYTES
    ],
)
def test_text_needs_long_mostly_distinct_values_with_spaces(tmp_path, values, text):
    import csv

    data = tmp_path / "data"
    data.mkdir()
    with open(data / "d.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["note", "y"])
        writer.writerows([v, i % 2] for i, v in enumerate(values))
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="y")
    assert ("note" in result.texts) is text


@pytest.mark.parametrize(
    "values, text",
    [
        (["北京", "上海", "广州", "深圳", "杭州"] * 8, False),  # cities: a vocabulary of whole values
        (["%s第%d分店" % (c, i) for i, c in enumerate("北上广深杭成武西南重" * 4)], False),  # short names, distinct
        (["请问我的订单%d什么时候发货？谢谢" % i for i in range(40)], True),  # no space, many words
        (["ฉันอยากเปลี่ยนที่อยู่จัดส่งสินค้า%d" % i for i in range(40)], True),  # Thai: no spaces between words
        (["注文番号%dの配送状況を教えてください" % i for i in range(40)], True),
    ],
)
def test_text_in_scripts_without_spaces_is_counted_in_characters(tmp_path, values, text):
    import csv

    data = tmp_path / "data"
    data.mkdir()
    with open(data / "d.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["note", "y"])
        writer.writerows([v, i % 2] for i, v in enumerate(values))
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="y")
    assert ("note" in result.texts) is text


def test_chinese_messages_are_text_and_their_channel_categorical(tmp_path):
    from tests.data import chinese_intents

    data = tmp_path / "data"
    data.mkdir()
    chinese_intents.write_csv(str(data / "messages.csv"), 400, seed=1)
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="intent")
    assert list(result.texts) == ["message"]
    assert "with spaces, " in result.texts["message"] and "without spaces" in result.texts["message"]
    config = FeatureConfig.load(str(tmp_path / "out" / "features.yaml"))
    assert config.text == ("message",)
    assert (config.categorical, config.numeric) == (("channel",), ("wait_minutes",))
    assert config.task == "multiclass" and sorted(config.label.classes) == sorted(chinese_intents.INTENTS)
    with open(tmp_path / "out" / "features.yaml", encoding="utf-8") as f:
        assert "    - 优惠券\n" in f.read()  # as written, not as \u escapes


TRANSLATIONS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "debian_translations.csv")


def test_real_chinese_and_japanese_synopses_without_spaces_are_text(tmp_path):
    """Debian's Chinese and Japanese one-line synopses that hold no space ('以图形化的方式提供有关硬件配置的信息'):
    text by their characters, where a rule of spaces would have found none."""
    import csv
    import re

    with open(TRANSLATIONS, newline="", encoding="utf-8") as f:
        found = [r for r in csv.DictReader(f) if r["language"] in ("zh_CN", "ja")]
    synopses = [(r["description"].split("\n")[0], r["language"]) for r in found]
    unspaced = [(s, language) for s, language in synopses if not re.search(r"\s", s.strip())]
    assert len(unspaced) == 42
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "d.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["synopsis", "language"])
        writer.writerows(unspaced)
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="language")
    assert list(result.texts) == ["synopsis"]
    assert "distinct, 0% with spaces, " in result.texts["synopsis"]


def _reference_words(text):
    """The words of Hugging Face's BertNormalizer (uncased) and BertPreTokenizer."""
    from tokenizers import normalizers, pre_tokenizers

    normalized = normalizers.BertNormalizer(lowercase=True).normalize_str(text)
    return pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalized)


def _drafted(lengths, most):
    """The rule the draft states: the 95th percentile (nearest rank) + 2, rounded up to 8, in [16, most]."""
    p95 = sorted(lengths)[-(-95 * len(lengths) // 100) - 1]
    return min(max(16, -(-(p95 + 2) // 8) * 8), most)


def test_sequence_length_is_drafted_from_a_checkpoints_word_pieces(tmp_path):
    """With --init-checkpoint, the rows' word pieces as the checkpoint's own tokenizer (Hugging Face's
    BertWordPieceTokenizer of its vocab.txt) makes them; the draft says their distribution and what it cuts."""
    import yaml
    from tokenizers import BertWordPieceTokenizer

    from tests.components.model.checkpoints.folders import MINILM
    from tests.data import chinese_intents

    data = tmp_path / "data"
    data.mkdir()
    chinese_intents.write_csv(str(data / "messages.csv"), 300, seed=2)
    out = tmp_path / "out"
    assert (
        helpers.run_cli(
            "infer-schema",
            "--data-root",
            str(data),
            "--out",
            str(out),
            "--label",
            "intent",
            "--init-checkpoint",
            MINILM,
        ).returncode
        == 0
    )
    reference = BertWordPieceTokenizer(os.path.join(MINILM, "vocab.txt"), lowercase=True)
    pieces = [len(reference.encode(m, add_special_tokens=False).ids) for m, _ in chinese_intents.rows(300, seed=2)]
    drafted = _drafted(pieces, 512)
    over = sum(n + 2 > drafted for n in pieces)
    text = (out / "features.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["sequence_length"] == drafted
    median = sorted(pieces)[149]
    p95 = sorted(pieces)[-(-95 * 300 // 100) - 1]
    assert (
        f"# message: median {median}, p95 {p95}, max {max(pieces)} word pieces of all-MiniLM-L6-v2's tokenizer "
        "per row over 300 rows;\n"
        f"#   {over} of 300 rows ({over / 300:.1%}) longer than sequence_length {drafted} would be cut\n"
    ) in text
    assert "Counted in words" not in text


def test_sequence_length_words_without_a_checkpoint_and_its_bounds(tmp_path):
    """Without a checkpoint, words as Hugging Face's BertPreTokenizer splits them (a lower bound, said so); the
    draft is at least 16 for short rows and at most a checkpoint's positions."""
    import csv

    import yaml

    from tfxflow.components.model import text_lengths

    data = tmp_path / "data"
    data.mkdir()
    messages = ["请问我的订单%d什么时候发货？谢谢" % i for i in range(60)]
    with open(data / "d.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["note", "y"])
        writer.writerows([m, i % 2] for i, m in enumerate(messages))
    result = schema_tool.infer(str(data), str(tmp_path / "out"), label_column="y")
    assert {len(_reference_words(m)) for m in messages} == {16}  # 14 ideographs, the number, the mark
    assert result.sequence_length == 24 and result.lengths["note"].counts == {16: 60}
    text = (tmp_path / "out" / "features.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["sequence_length"] == 24 and "# Counted in words" in text
    assert "at least 0 of 60 rows (0.0%) longer than sequence_length 24" in text
    lengths = text_lengths.Lengths({2: 90, 3: 10}, "words", exact=False, total=100)
    assert (lengths.draft(512), lengths.draft(12)) == (16, 12)
    assert text_lengths.Lengths({100: 95, 700: 5}, "words", True, 100).draft(512) == 104
