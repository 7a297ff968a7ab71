"""Writes hf_families/<family>/: small Hugging Face folders of the encoder families that `--init-checkpoint` reads
besides BERT (distilbert, electra, roberta, xlm-roberta), each written by transformers' own `save_pretrained` (random
weights, seeded; safetensors), with tokenizer files that transformers' tokenizers wrote, and `reference.npz`: what
transformers computes on 20 Debian descriptions (English, and German, French, Russian, Greek, Japanese, Chinese,
Korean and Vietnamese translations), for the encoder's parity tests (tests/components/model/checkpoints/).

- distilbert: DistilBertForMaskedLM (`distilbert.` prefix, learned positions), a WordPiece vocabulary (uncased,
  tokenizers' BertWordPieceTokenizer trained on the descriptions) saved by DistilBertTokenizerFast;
- electra: ElectraForPreTraining (the discriminator, `electra.` prefix) with embedding_size < hidden_size (the
  embeddings' projection), the same WordPiece vocabulary saved by ElectraTokenizerFast;
- roberta: RobertaForMaskedLM (`roberta.` prefix, no pooler), a byte-level BPE (tokenizers' ByteLevelBPETokenizer)
  saved by RobertaTokenizerFast (vocab.json, merges.txt, tokenizer.json);
- xlm-roberta: XLMRobertaModel (no prefix, with its pooler), a SentencePiece unigram model (sentencepiece's trainer)
  converted by XLMRobertaTokenizer (tokenizer.json), the model itself kept as sentencepiece.bpe.model.

reference.npz holds the tokenizer's input_ids and attention_mask (padded to LENGTH), the model's last hidden states
(float32, eval mode) of the tokens the mask keeps, in order, and the versions. Each vocabulary's size is the model's
vocab_size. It needs PyTorch, transformers, tokenizers and sentencepiece, which the project's lock does not hold: run
it in an environment of its own, e.g.

    python3.11 -m venv /tmp/reference && /tmp/reference/bin/pip install torch transformers tokenizers sentencepiece
    /tmp/reference/bin/python tests/data/hf_families.py [OUT_FOLDER]
"""

import csv
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 1500
LENGTH = 40
SEED = 20261207
TINY = {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64}
LANGUAGES = ("de", "fr", "ru", "el", "ja", "zh_CN", "ko", "vi")


def _rows(name):
    with open(os.path.join(HERE, name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def corpus():
    """Every description of both CSVs: the tokenizers' training text."""
    return [r["description"] for r in _rows("debian_packages.csv")] + [
        r["description"] for r in _rows("debian_translations.csv")
    ]


def sentences():
    """10 English synopses and descriptions, and per language its first description and synopsis (two Chinese)."""
    packages = _rows("debian_packages.csv")
    english = [r["description"].split("\n", 1)[0] for r in packages[:6]] + [r["description"] for r in packages[6:10]]
    by_language = {}
    for row in _rows("debian_translations.csv"):
        by_language.setdefault(row["language"], []).append(row["description"])
    other = [by_language[language][0] for language in LANGUAGES]
    other += [by_language["zh_CN"][1].split("\n", 1)[0], by_language["ja"][1].split("\n", 1)[0]]
    return english + other


def saved(tokenizer, folder, source, files):
    """The tokenizer as transformers saves it, with the files it was made from: transformers 5 writes tokenizer.json
    alone, and the releases of these families hold both."""
    tokenizer.save_pretrained(folder)
    for name in files:
        if not os.path.exists(os.path.join(folder, name)):
            shutil.copy(os.path.join(source, name), folder)
    return type(tokenizer).from_pretrained(folder)


def wordpiece(folder, texts, cls):
    import tokenizers

    trainer = tokenizers.BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(texts, vocab_size=VOCAB, min_frequency=2)
    with tempfile.TemporaryDirectory() as tmp:
        trainer.save_model(tmp)
        tokenizer = cls.from_pretrained(tmp, do_lower_case=True)
        return saved(tokenizer, folder, tmp, ["vocab.txt"])


def byte_bpe(folder, texts):
    import tokenizers
    import transformers

    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        texts, vocab_size=VOCAB, min_frequency=2, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        trainer.save_model(tmp)
        tokenizer = transformers.RobertaTokenizerFast.from_pretrained(tmp)
        return saved(tokenizer, folder, tmp, ["vocab.json", "merges.txt"])


def unigram(folder, texts):
    import sentencepiece
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(line for t in texts for line in t.split("\n") if line.strip()))
        sentencepiece.SentencePieceTrainer.train(
            input=text,
            model_prefix=os.path.join(tmp, "sentencepiece.bpe"),
            vocab_size=VOCAB - 2,  # XLM-R adds <pad> before and <mask> after the model's pieces
            model_type="unigram",
            character_coverage=0.9995,
            input_sentence_size=200000,
            shuffle_input_sentence=True,
            seed_sentencepiece_size=100000,
            bos_id=1,
            eos_id=2,
            unk_id=0,
            pad_id=-1,
            num_threads=2,
        )
        os.remove(text)
        tokenizer = transformers.XLMRobertaTokenizer.from_pretrained(tmp)
        return saved(tokenizer, folder, tmp, ["sentencepiece.bpe.model"])


def build(family, folder, texts):
    import torch
    import transformers

    torch.manual_seed(SEED)
    h = TINY
    if family == "distilbert":
        tokenizer = wordpiece(folder, texts, transformers.DistilBertTokenizerFast)
        config = transformers.DistilBertConfig(
            vocab_size=len(tokenizer),
            dim=h["hidden"],
            n_layers=h["layers"],
            n_heads=h["heads"],
            hidden_dim=h["intermediate"],
            max_position_embeddings=64,
            sinusoidal_pos_embds=False,
            activation="gelu",
            pad_token_id=tokenizer.pad_token_id,
        )
        model = transformers.DistilBertForMaskedLM(config)
        base = model.distilbert
    elif family == "electra":
        tokenizer = wordpiece(folder, texts, transformers.ElectraTokenizerFast)
        config = transformers.ElectraConfig(
            vocab_size=len(tokenizer),
            embedding_size=16,
            hidden_size=h["hidden"],
            num_hidden_layers=h["layers"],
            num_attention_heads=h["heads"],
            intermediate_size=h["intermediate"],
            max_position_embeddings=64,
            pad_token_id=tokenizer.pad_token_id,
        )
        model = transformers.ElectraForPreTraining(config)
        base = model.electra
    elif family == "roberta":
        tokenizer = byte_bpe(folder, texts)
        config = transformers.RobertaConfig(
            vocab_size=len(tokenizer),
            hidden_size=h["hidden"],
            num_hidden_layers=h["layers"],
            num_attention_heads=h["heads"],
            intermediate_size=h["intermediate"],
            max_position_embeddings=66,  # 64 positions after padding_idx + 1
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = transformers.RobertaForMaskedLM(config)
        base = model.roberta
    elif family == "xlm-roberta":
        tokenizer = unigram(folder, texts)
        config = transformers.XLMRobertaConfig(
            vocab_size=len(tokenizer),
            hidden_size=h["hidden"],
            num_hidden_layers=h["layers"],
            num_attention_heads=h["heads"],
            intermediate_size=h["intermediate"],
            max_position_embeddings=66,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = transformers.XLMRobertaModel(config)
        base = model
    else:
        raise ValueError(family)
    model.eval()
    # Random initial weights are small (std 0.02); wider values make the parity test see more of each layer.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                parameter.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
            else:
                parameter.normal_(0.0, 0.2)
    model.save_pretrained(folder)
    return tokenizer, base


def reference(family, folder, tokenizer, base, texts):
    import numpy as np
    import tokenizers
    import torch
    import transformers

    batch = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
    with torch.no_grad():
        states = base(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].numpy().astype(bool)
    np.savez_compressed(
        os.path.join(folder, "reference.npz"),
        texts=np.array(texts),
        input_ids=batch["input_ids"].numpy().astype(np.int32),
        attention_mask=mask,
        hidden_states=states.numpy()[mask].astype(np.float32),
        versions=np.array(
            [
                f"torch {torch.__version__}",
                f"transformers {transformers.__version__}",
                f"tokenizers {tokenizers.__version__}",
            ]
        ),
    )


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "hf_families")
    texts = corpus()
    examples = sentences()
    for family in ("distilbert", "electra", "roberta", "xlm-roberta"):
        folder = os.path.join(out, family)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        tokenizer, base = build(family, folder, texts)
        reference(family, folder, tokenizer, base, examples)


if __name__ == "__main__":
    main(sys.argv)
