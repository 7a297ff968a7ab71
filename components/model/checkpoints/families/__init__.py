"""The Hugging Face encoder families `--init-checkpoint` reads, by config.json's `model_type`: for each, the
architecture its config states (in presets.Encoder's terms), the prefix and names of its weights mapped into this
project's encoder layout (layout.py), its dropout rates' keys and its tokenizer's kind (tokenization.py). One module
per family: bert (BERT and every BertModel checkpoint), distilbert, electra (the discriminator) and roberta (RoBERTa
and XLM-RoBERTa). Other model types are refused, naming what differs (REFUSED)."""

from __future__ import annotations

from typing import Dict

from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.families import bert, distilbert, electra, roberta
from tfxflow.components.model.checkpoints.families.family import Family
from tfxflow.components.model.checkpoints.files import Values, given

FAMILIES: Dict[str, Family] = {
    family.model_type: family
    for family in (bert.FAMILY, distilbert.FAMILY, electra.FAMILY, roberta.ROBERTA, roberta.XLM_ROBERTA)
}
# Model types of encoders whose layout this encoder does not build, and what differs.
REFUSED = {
    "albert": "ALBERT shares one layer's weights across the layers and factorizes its embeddings",
    "deberta": "DeBERTa's disentangled attention adds relative-position terms to every attention score",
    "deberta-v2": "DeBERTa's disentangled attention adds relative-position terms to every attention score",
    "mpnet": "MPNet adds a learned relative-position bias to every attention score",
    "camembert": "CamemBERT's SentencePiece ids follow fairseq's dictionary, not XLM-R's offset",
    "xlnet": "XLNet is a permutation language model with relative positions, not a BERT encoder",
    "longformer": "Longformer's sliding-window attention differs from full self-attention",
    "modernbert": "ModernBERT is pre-layer-norm with rotary positions and gated feed-forward layers",
    "nomic_bert": "nomic-bert uses rotary positions and a gated feed-forward layer",
    "new": "gte's 'new' architecture uses rotary positions and a gated feed-forward layer",
    "t5": "T5 is an encoder-decoder with relative-position buckets",
}


def family_of(path: str, config: Values) -> Family:
    """The family of config.json's model_type, else CheckpointError naming why that model type is refused."""
    model_type = config.data.get("model_type")
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    loads = ", ".join(repr(t) for t in FAMILIES)
    why = f": {REFUSED[model_type]}" if model_type in REFUSED else ""
    raise CheckpointError(
        f"{given(path)}: config.json's model_type is {model_type!r}{why}; the encoder builds the layouts of "
        f"model_type {loads} (BERT, MiniLM, bge, e5 and other BertModel checkpoints are 'bert')"
    )


__all__ = ["FAMILIES", "REFUSED", "Family", "family_of"]
