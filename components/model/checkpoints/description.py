"""What a located checkpoint is (`Checkpoint`, of one of KINDS) and the error that refuses one
(`CheckpointError`): what the readers of each format make and the Trainer's custom_config carries."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Tuple

from tfxflow.components.model import tokenization as tokenization_lib
from tfxflow.components.model.presets import Encoder

HUGGING_FACE = "huggingface"
GOOGLE_BERT = "bert"
MODEL_GARDEN = "model_garden"
SAVED_MODEL = "saved_model"
KINDS = (HUGGING_FACE, GOOGLE_BERT, MODEL_GARDEN, SAVED_MODEL)
KIND_NAMES = {
    HUGGING_FACE: "a Hugging Face model folder",
    GOOGLE_BERT: "a Google BERT checkpoint",
    MODEL_GARDEN: "a Model Garden BERT encoder checkpoint",
    SAVED_MODEL: "a SavedModel this pipeline pushed",
}


class CheckpointError(ValueError):
    """A checkpoint that cannot initialise the model: the message names the path, the file and what is wrong."""


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """What a pretrained checkpoint is: its `kind` (KINDS), a display `name`, the encoder's architecture, the
    vocabulary its word embeddings are indexed by (`vocab_file`, `vocab_size` rows), how its own tokenizer
    makes word pieces (`tokenization`, and where the casing was read: `casing_from`), its pooling (`pooling`,
    `pooling_from`; `has_pooler`: it holds BERT's pooler weights), its dropout rates, the file or prefix of its
    weights, its parameter count and a `fingerprint` that changes with any of its files.

    A Hugging Face folder also says its `family` (config.json's model_type: families/), and its tokenizer's files
    by kind (tokenization.kind): WordPiece's vocab.txt, a SentencePiece model (`vocab_file` its
    sentencepiece.bpe.model) or a byte-level BPE (`vocab_file` vocab.json, `merges_file` merges.txt), and the ids
    of the special tokens it uses (`special_tokens`: cls, sep, pad, unk, mask)."""

    path: str
    kind: str
    name: str
    encoder: Encoder
    vocab_size: int
    vocab_file: str
    tokenization: tokenization_lib.Tokenization
    casing_from: str
    pooling: str
    pooling_from: str
    has_pooler: bool
    hidden_dropout: float
    attention_dropout: float
    head_dropout: float
    weights: str
    parameters: int
    fingerprint: str
    files: Tuple[str, ...] = ()  # what it is made of (a SavedModel: its folder), for a copy of it elsewhere
    encoder_input: str = ""  # a SavedModel's: the text input its encoder was trained on
    family: str = ""  # a Hugging Face folder's model_type ("" is BERT's layout)
    merges_file: str = ""  # a byte-level BPE's merges.txt
    special_tokens: Mapping[str, int] = dataclasses.field(default_factory=dict, hash=False)

    def describe(self) -> str:
        """e.g. "all-MiniLM-L6-v2 (6 layers, 384 wide, 22.7M parameters)"."""
        return (
            f"{self.name} ({self.encoder.layers} layers, {self.encoder.hidden} wide, "
            f"{parameters_text(self.parameters)} parameters)"
        )

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON-able data (what the Trainer's custom_config carries)."""
        data = dataclasses.asdict(self)
        data["encoder"] = self.encoder.to_dict()
        data["tokenization"] = dataclasses.asdict(self.tokenization)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Checkpoint":
        values = dict(data)
        values["encoder"] = Encoder.from_dict(values["encoder"])
        values["tokenization"] = tokenization_lib.Tokenization(**values["tokenization"])
        values["files"] = tuple(values.get("files") or ())
        values["special_tokens"] = dict(values.get("special_tokens") or {})
        return cls(**values)


def parameters_text(count: int) -> str:
    """22.7M, or 53,248 below a million."""
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count:,}"
