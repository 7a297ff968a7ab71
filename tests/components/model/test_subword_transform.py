"""A feature config with a sentencepiece or byte-level BPE tokenizer through real tf.Transform: the built-in
preprocessing_fn's ids and mask are Hugging Face's fast tokenizers' (tests/data/subword_reference.npz), and the
tokenizer's files travel as the SavedModel's assets: the transform graph, moved away from every file it was built
from, gives the same ids."""

import csv
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam

from tfxflow.components.model import features as features_lib
from tfxflow.components.model import text
from tfxflow.components.model.preprocessing import preprocessing_fn
from tfxflow.components.model.subword import assets as subword
from tfxflow.components.serving_probe import model_ops

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")
FAMILIES = os.path.join(DATA, "hf_families")
LENGTH = 32
ROWS = 30


def debian_rows():
    with open(os.path.join(DATA, "debian_packages.csv"), newline="", encoding="utf-8") as f:
        return [row for _, row in zip(range(ROWS), csv.DictReader(f), strict=False)]


def reference(family):
    """Hugging Face's ids of the first ROWS descriptions (the reference corpus starts with them)."""
    data = np.load(os.path.join(DATA, "subword_reference.npz"))
    ids, splits = data[f"{family}_ids"].astype(np.int64), data[f"{family}_splits"]
    return [ids[splits[i] : splits[i + 1]].tolist() for i in range(ROWS)]


def config(folder, **knobs):
    data = {
        "task": "multiclass",
        "label": {"name": "section_label", "column": "section", "classes": ["games", "science", "net", "libs"]},
        "text": ["description"],
        "sequence_length": LENGTH,
        **knobs,
    }
    return features_lib.FeatureConfig.from_dict(data, source=folder)


def transform(cfg, temp_dir):
    spec = {"description": tf.io.VarLenFeature(tf.string), "section": tf.io.FixedLenFeature([], tf.string)}
    raw = [{"description": [r["description"].encode()], "section": r["section"].encode()} for r in debian_rows()]
    out = os.path.join(temp_dir, "transform_fn_out")
    # As the pipeline's Transform runs it (pipeline/definition.py): traced in TF1 graph mode, where == on tensors
    # is identity, not an op.
    with tft_beam.Context(temp_dir=os.path.join(temp_dir, "tmp"), force_tf_compat_v1=True):
        (data, _), transform_fn = (raw, tft.DatasetMetadata.from_feature_spec(spec)) | (
            tft_beam.AnalyzeAndTransformDataset(lambda inputs: preprocessing_fn(inputs, {"features": cfg.to_dict()}))
        )
        _ = transform_fn | tft_beam.WriteTransformFn(out)
    return data, out


def moved(out, temp_dir, elsewhere):
    """The transform output copied to `elsewhere`, everything it was built from removed."""
    shutil.copytree(out, elsewhere)
    shutil.rmtree(temp_dir)
    return tft.TFTransformOutput(elsewhere)


def framed(full):
    want = full if len(full) <= LENGTH else full[: LENGTH - 1] + [2]
    return want + [1] * (LENGTH - len(want)), [1] * len(want) + [0] * (LENGTH - len(want))


@pytest.mark.integration
@pytest.mark.parametrize("family", ["roberta", "xlm_roberta"])
def test_the_transform_graph_makes_hugging_faces_ids_and_carries_the_tokenizer_as_assets(tmp_path, family):
    if family == "roberta":
        folder = os.path.join(FAMILIES, "roberta")
        cfg = config(
            folder,
            tokenizer_kind="byte_bpe",
            text_vocab_file=os.path.join(folder, "vocab.json"),
            text_merges_file=os.path.join(folder, "merges.txt"),
        )
        # merges.txt's merges one a line in rank order (tokenizers' "#version" header line left out).
        merges = open(os.path.join(folder, "merges.txt"), encoding="utf-8").read().splitlines()
        assert merges[0].startswith("#version")
        carried = {subword.merges_asset_name("description"): ("\n".join(merges[1:]) + "\n").encode("utf-8")}
    else:
        folder = os.path.join(FAMILIES, "xlm-roberta")
        model = os.path.join(folder, "sentencepiece.bpe.model")
        cfg = config(folder, tokenizer_kind="sentencepiece", text_vocab_file=model)
        carried = {subword.model_asset_name("description"): open(model, "rb").read()}
    work = tmp_path / "work"
    data, out = transform(cfg, str(work))
    theirs = reference(family)
    for row, full in zip(data, theirs, strict=True):
        ids, mask = framed(full)
        assert list(row["description_xf"]) == ids and list(row["description_xf_mask"]) == mask
    assert sum(len(full) > LENGTH for full in theirs) > 10  # truncation was exercised

    output = moved(out, str(work), str(tmp_path / "elsewhere"))
    assets = os.path.join(str(tmp_path / "elsewhere"), "transform_fn", "assets")
    for name, content in carried.items():
        with open(os.path.join(assets, name), "rb") as mine:
            assert mine.read() == content
    # The tokens one a line, as a WordPiece vocabulary: the id range the Trainer reads (fit.id_ranges).
    tokens = open(output.vocabulary_file_by_name(text.asset_name("description")), encoding="utf-8").read()
    assert len(tokens.splitlines()) == 1500 and tokens.splitlines()[:3] == ["<s>", "<pad>", "</s>"]

    descriptions = [r["description"] for r in debian_rows()]
    # As the Trainer and the served model read a TF1 transform_fn: through its Keras layer.
    got = output.transform_features_layer()(
        {"description": tf.sparse.from_dense(tf.constant(descriptions)[:, tf.newaxis])}
    )
    assert got["description_xf"].numpy().tolist() == [framed(full)[0] for full in theirs]
    # Only TensorFlow's ops (tf.raw_ops) and the TF Text ops TF Serving 2.16 links.
    ops = model_ops(os.path.join(str(tmp_path / "elsewhere"), "transform_fn"))
    assert [op for op in sorted(ops) if not hasattr(tf.raw_ops, op) and op not in text.TF_SERVING_TEXT_OPS] == []
    assert "RegexSplitWithOffsets" in ops and ("SentencepieceTokenizeOp" in ops) == (family == "xlm_roberta")
