"""How text becomes word pieces, as plain data (the CLI and the feature config read it without TensorFlow): the
kind of tokenizer (BERT's WordPiece, a SentencePiece model, a byte-level BPE) and the rules of the reference BERT
tokenizers (components/model/text.py applies them in the Transform graph)."""

from __future__ import annotations

import dataclasses
from typing import Optional

# The kinds of tokenizer a checkpoint comes with: BERT's WordPiece (vocab.txt; DistilBERT's and ELECTRA's too),
# a SentencePiece model (XLM-R's sentencepiece.bpe.model), a byte-level BPE (RoBERTa's vocab.json and merges.txt).
WORDPIECE, SENTENCEPIECE, BYTE_BPE = "wordpiece", "sentencepiece", "byte_bpe"
KINDS = (WORDPIECE, SENTENCEPIECE, BYTE_BPE)
KIND_NAMES = {
    WORDPIECE: "WordPiece",
    SENTENCEPIECE: "a SentencePiece model",
    BYTE_BPE: "a byte-level BPE",
}
# The kinds the Transform graph tokenizes (components/model/text.py, components/model/subword/); a checkpoint of
# another is refused before any work.
TRANSFORM_KINDS = KINDS
HUGGING_FACE, GOOGLE = "huggingface", "google"
TOKENIZER_RULES = (HUGGING_FACE, GOOGLE)
# A longer word is [UNK]: Hugging Face's WordPiece model (`max_input_chars_per_word`), google-research/bert's
# WordpieceTokenizer (`max_input_chars_per_word`).
MAX_CHARS_PER_WORD = {HUGGING_FACE: 100, GOOGLE: 200}
# Model Garden's copy of Google's tokenization.py (official/nlp/tools/tokenization.py) allows 400.
MODEL_GARDEN_MAX_CHARS_PER_WORD = 400


@dataclasses.dataclass(frozen=True)
class Tokenization:
    """How text is made word pieces, as a checkpoint's own tokenizer does it.

    `lower_case`: an uncased model's vocabulary (BERT's do_lower_case); `strip_accents`: None strips them
    exactly when lower-casing (Hugging Face's default; Google's tokenizer always does so); `rules`: HUGGING_FACE
    (a Hugging Face folder's tokenizer: Σ lower-cases to σ anywhere, the special tokens written in the text are
    those tokens) or GOOGLE (google-research/bert's tokenization.py: Python's str.lower, so a word's final Σ
    becomes ς; "[SEP]" in the text is three words); `max_chars_per_word`: None for the rules' own (100 or
    200); `kind`: KINDS (the casing and rules are WordPiece's; a SentencePiece model or BPE holds its own
    normalization)."""

    lower_case: bool = True
    strip_accents: Optional[bool] = None
    rules: str = HUGGING_FACE
    max_chars_per_word: Optional[int] = None
    kind: str = WORDPIECE

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"tokenizer kind must be one of {KINDS}, got {self.kind!r}")
        if self.rules not in TOKENIZER_RULES:
            raise ValueError(f"tokenizer rules must be one of {TOKENIZER_RULES}, got {self.rules!r}")
        if self.rules == GOOGLE and self.strip_accents not in (None, self.lower_case):
            raise ValueError("google-research/bert's tokenizer strips accents exactly when it lower-cases")
        if self.max_chars_per_word is not None and self.max_chars_per_word < 1:
            raise ValueError(f"max_chars_per_word must be >= 1, got {self.max_chars_per_word}")

    @property
    def accents_stripped(self) -> bool:
        return self.lower_case if self.strip_accents is None else self.strip_accents

    @property
    def max_chars(self) -> int:
        return self.max_chars_per_word or MAX_CHARS_PER_WORD[self.rules]

    def describe(self) -> str:
        """e.g. "uncased (accents stripped), Hugging Face's rules, words of up to 100 characters"."""
        if self.kind != WORDPIECE:
            return KIND_NAMES[self.kind]
        case = "uncased" if self.lower_case else "cased"
        accents = " (accents stripped)" if self.accents_stripped else ""
        rules = "Hugging Face's" if self.rules == HUGGING_FACE else "google-research/bert's"
        return f"{case}{accents}, {rules} rules, words of up to {self.max_chars} characters"
