"""A checkpoint's vocabulary and casing: its vocab.txt read and checked against the word embeddings' rows, and
whether it is uncased, from what its files (or Google's release name) say and what its vocabulary shows."""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.files import given

# google-research/bert's tokenization.py `validate_case_matches_checkpoint`, and the release names since (the
# miniatures `uncased_L-4_H-256_A-4`, whole-word masking `wwm_cased_L-24_H-1024_A-16`).
_UNCASED_RELEASE = re.compile(r"^(?:wwm_)?uncased_L-|^multilingual_L-|^chinese_L-")
_CASED_RELEASE = re.compile(r"^(?:wwm_|multi_)?cased_L-")


def read_tokens(path: str, uri: str) -> List[str]:
    from tfxflow.components.model import text  # imports TensorFlow: only when a checkpoint is read

    try:
        return text.read_vocabulary(uri)
    except text.VocabularyError as err:
        raise CheckpointError(f"{given(path)}: {err}") from err


def vocabulary_is_uncased(tokens: Sequence[str]) -> bool:
    """An uncased model's vocabulary has no word piece with an upper-case letter (the special tokens aside)."""
    return not any(t != t.lower() for t in tokens if not (t.startswith("[") and t.endswith("]")))


def release_casing(name: str) -> Optional[bool]:
    if _UNCASED_RELEASE.match(name):
        return True
    if _CASED_RELEASE.match(name):
        return False
    return None


def casing(path: str, tokens: Sequence[str], said: Optional[bool], source: str) -> Tuple[bool, str]:
    """(lower_case, where it was read): what the checkpoint's files say, else what its vocabulary shows. Raises
    when the two disagree (a cased vocabulary under a do_lower_case tokenizer loses every upper-case piece)."""
    uncased = vocabulary_is_uncased(tokens)
    if said is None:
        return uncased, "its vocabulary (" + ("no" if uncased else "some") + " upper-case word pieces)"
    if said and not uncased:
        raise CheckpointError(
            f"{given(path)}: {source} says uncased, and its vocabulary holds upper-case word pieces: the casing "
            "of the tokenizer and of the vocabulary differ"
        )
    return said, source


def check_vocabulary_rows(path: str, tokens: int, rows: int) -> None:
    if tokens > rows:
        raise CheckpointError(
            f"{given(path)}: vocab.txt has {tokens:,} word pieces and the word embeddings {rows:,} rows: ids past "
            f"{rows - 1:,} would have no embedding (a vocabulary of another model?)"
        )
