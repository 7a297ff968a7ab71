"""Writes model_garden_bert/: a small BERT encoder checkpoint in Model Garden's TF2 format, made by Model Garden's
own converter from a google-research/bert (TF1) checkpoint of random weights, and what Model Garden's BertEncoder
computes from it (reference.npz), for the checkpoint reader's test
(tests/components/model/checkpoints/test_model_garden.py).

The folder is named as Google's releases are (`uncased_L-2_H-32_A-4`): `bert_config.json`, `vocab.txt`, the
converter's `bert_model.ckpt-1.{index,data-00000-of-00001}` and its `checkpoint` file.

It needs tf-models-official 2.16 (Model Garden), which the project's lock does not hold: run it in an environment
of its own that sees the project's packages, e.g.

    python3.10 -m venv /tmp/garden && echo "$PWD/.venv/lib/python3.10/site-packages" \\
        > /tmp/garden/lib/python3.10/site-packages/project.pth
    /tmp/garden/bin/pip install --no-deps tf-models-official==2.16.0 gin-config
    /tmp/garden/bin/python tests/data/model_garden_reference.py
"""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS, HIDDEN, HEADS, POSITIONS = 2, 32, 4, 64
WORDS = ["the", "a", "game", "of", "chess", "board", "play", "##s", "##ing", "font", "sound", "net"]
VOCABULARY = ["[PAD]"] + [f"[unused{i}]" for i in range(4)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def google_checkpoint(prefix: str):
    """A TF1 checkpoint in google-research/bert's names, of random weights (a layer norm's gamma near 1)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(7)
    vocab = len(VOCABULARY)
    values = {
        "bert/embeddings/word_embeddings": rng.normal(0, 0.5, (vocab, HIDDEN)),
        "bert/embeddings/token_type_embeddings": rng.normal(0, 0.5, (2, HIDDEN)),
        "bert/embeddings/position_embeddings": rng.normal(0, 0.5, (POSITIONS, HIDDEN)),
        "bert/pooler/dense/kernel": rng.normal(0, 0.2, (HIDDEN, HIDDEN)),
        "bert/pooler/dense/bias": rng.normal(0, 0.2, (HIDDEN,)),
    }
    norms = ["bert/embeddings/LayerNorm"] + [
        f"bert/encoder/layer_{i}/{n}" for i in range(LAYERS) for n in ("attention/output/LayerNorm", "output/LayerNorm")
    ]
    for scope in norms:
        values[scope + "/gamma"] = rng.normal(1, 0.1, (HIDDEN,))
        values[scope + "/beta"] = rng.normal(0, 0.1, (HIDDEN,))
    shapes = {
        "attention/self/query": (HIDDEN, HIDDEN),
        "attention/self/key": (HIDDEN, HIDDEN),
        "attention/self/value": (HIDDEN, HIDDEN),
        "attention/output/dense": (HIDDEN, HIDDEN),
        "intermediate/dense": (HIDDEN, 4 * HIDDEN),
        "output/dense": (4 * HIDDEN, HIDDEN),
    }
    for i in range(LAYERS):
        for name, shape in shapes.items():
            values[f"bert/encoder/layer_{i}/{name}/kernel"] = rng.normal(0, 1 / np.sqrt(shape[0]), shape)
            values[f"bert/encoder/layer_{i}/{name}/bias"] = rng.normal(0, 0.1, shape[1:])
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[values[n].astype(np.float32) for n in names],
    )


def main(argv):
    import numpy as np
    import tensorflow as tf
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    release = f"uncased_L-{LAYERS}_H-{HIDDEN}_A-{HEADS}"  # Google's release names say the casing
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "model_garden_bert", release)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    config = {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": 4 * HIDDEN,
        "max_position_embeddings": POSITIONS,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "type_vocab_size": 2,
        "vocab_size": len(VOCABULARY),
    }
    with open(os.path.join(out, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCABULARY) + "\n")
    with tempfile.TemporaryDirectory() as scratch:
        google_checkpoint(os.path.join(scratch, "bert_model.ckpt"))
        converter.convert_checkpoint(
            configs.BertConfig.from_dict(config),
            os.path.join(out, "bert_model.ckpt"),
            os.path.join(scratch, "bert_model.ckpt"),
            checkpoint_model_name="encoder",
            converted_model="encoder",
        )
    encoder = converter._create_bert_model(configs.BertConfig.from_dict(config))  # the converter's own builder
    tf.train.Checkpoint(encoder=encoder).read(tf.train.latest_checkpoint(out)).assert_existing_objects_matched()
    ids = np.array([[6, 9, 11, 12, 7, 0, 0, 0], [6, 14, 15, 16, 17, 18, 19, 7]], np.int32)
    mask = (ids != 0).astype(np.int32)
    outputs = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=np.zeros_like(ids)), training=False)
    if not isinstance(outputs, dict):  # the converter's encoder answers [sequence_output, pooled_output]
        outputs = {"sequence_output": outputs[0], "pooled_output": outputs[1]}
    np.savez_compressed(
        os.path.join(os.path.dirname(out), "reference.npz"),
        input_ids=ids,
        attention_mask=mask,
        sequence_output=outputs["sequence_output"].numpy(),
        pooled_output=outputs["pooled_output"].numpy(),
    )


if __name__ == "__main__":
    main(sys.argv)
