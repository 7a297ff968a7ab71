"""A text column tokenized by a pretrained model's subword tokenizer in the built-in preprocessing_fn, and the
Transform assets that make the SavedModel self-contained: `<column>_wordpiece` (text.asset_name, the name every
reader of a text column's vocabulary uses) holds the tokens one a line, the line number the id, as a WordPiece
vocabulary does; `<column>_sentencepiece` the sentencepiece model itself, `<column>_merges` merges.txt. The
byte-level BPE's lookup tables read the assets; the sentencepiece op holds its model as an attribute. The
folder's tokenizer.json, where there is one beside the vocabulary, says which special tokens take the whitespace
beside them and whether the byte-level BPE adds a prefix space."""

from __future__ import annotations

import os
import uuid
from typing import Callable, List, Tuple

import tensorflow as tf

from tfxflow.components.model import text
from tfxflow.components.model.subword import byte_bpe, sentencepiece
from tfxflow.components.model.subword import tokenizer_files as files
from tfxflow.components.model.tokenization import BYTE_BPE, SENTENCEPIECE, Tokenization

SENTENCEPIECE_SUFFIX, MERGES_SUFFIX = "_sentencepiece", "_merges"


def model_asset_name(column: str) -> str:
    """The Transform asset that holds a text column's sentencepiece model."""
    return column + SENTENCEPIECE_SUFFIX


def merges_asset_name(column: str) -> str:
    """The Transform asset that holds a text column's merges.txt."""
    return column + MERGES_SUFFIX


def check_files(tokenization: Tokenization, vocab_file: str, merges_file: str = "") -> List[str]:
    """The tokens, in id order, of a subword tokenizer's files; VocabularyError naming a file that cannot serve."""
    if tokenization.kind == SENTENCEPIECE:
        tokens = sentencepiece.vocabulary(sentencepiece.read_model(vocab_file))
        files.read_folder_tokenizer(vocab_file)
        return tokens
    if tokenization.kind == BYTE_BPE:
        tokens = files.read_byte_bpe_vocabulary(vocab_file)
        files.read_merges(merges_file)
        files.read_folder_tokenizer(vocab_file)
        return tokens
    raise ValueError(f"{tokenization.kind} is not a subword tokenizer's kind")


def _asset(values, filename: str, content: bytes):
    """The path of a Transform asset named `filename` holding `content` (written by an analyzer, so that the
    export copies it into the SavedModel's assets)."""
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam

    class WriteAsset(tft_beam.experimental.PTransformAnalyzer):
        """Writes the file once, whatever the data; its path is the one output."""

        def expand(self, pcoll):
            def write(_):
                folder = os.path.join(self.base_temp_dir, uuid.uuid4().hex)
                path = os.path.join(folder, filename)
                tf.io.gfile.makedirs(folder)
                with tf.io.gfile.GFile(path, "wb") as f:
                    f.write(content)
                return path.encode()

            return pcoll | "Count" >> beam.combiners.Count.Globally() | "Write" >> beam.Map(write)

    (path,) = tft.experimental.ptransform_analyzer(
        [values], WriteAsset(), [tf.string], [[]], output_asset_default_values=[content], name=f"{filename}_asset"
    )
    tft.annotate_asset(filename, filename)
    return path


def _lines(tokens: List[str]) -> bytes:
    return ("\n".join(tokens) + "\n").encode("utf-8")


def tokenize(
    values: tf.Tensor, column: str, tokenization: Tokenization, vocab_file: str, merges_file: str, sequence_length: int
) -> Tuple[tf.Tensor, tf.Tensor]:
    """([batch, sequence_length] int64 ids, the 0/1 attention mask) of `values` ([batch] strings) by the
    subword tokenizer of `tokenization.kind`, its files carried as the column's Transform assets."""
    if tokenization.kind == SENTENCEPIECE:
        model = sentencepiece.read_model(vocab_file)
        _asset(values, text.asset_name(column), _lines(sentencepiece.vocabulary(model)))
        _asset(values, model_asset_name(column), model)
        folder = files.read_folder_tokenizer(vocab_file)
        return sentencepiece.tokenize(values, model, sequence_length, folder.lstrip, folder.rstrip)
    if tokenization.kind == BYTE_BPE:
        tokens = files.read_byte_bpe_vocabulary(vocab_file)
        _, merges = files.read_merges(merges_file)  # one a line, the line number its rank: no header, no blank line
        vocab_path = _asset(values, text.asset_name(column), _lines(tokens))
        merges_path = _asset(values, merges_asset_name(column), _lines(merges))
        special = byte_bpe.special_ids(tokens)
        folder = files.read_folder_tokenizer(vocab_file)
        return byte_bpe.tokenize(
            values, vocab_path, merges_path, special, sequence_length,
            bool(folder.add_prefix_space), folder.lstrip, folder.rstrip,
        )  # fmt: skip
    raise ValueError(f"{tokenization.kind} is not a subword tokenizer's kind")


def piece_counter(tokenization: Tokenization, vocab_file: str, merges_file: str = "") -> Callable:
    """A function of [batch] strings giving their [batch, pieces] ragged ids by the subword tokenizer of
    `tokenization.kind`, without <s> and </s>, in eager TensorFlow (no Transform assets): what infer-schema and a
    run count. The files are read once; call `close()` on it when done (a BPE's tables read files it wrote)."""
    import tempfile

    folder = files.read_folder_tokenizer(vocab_file)
    if tokenization.kind == SENTENCEPIECE:
        model = sentencepiece.read_model(vocab_file)

        def count(values):
            return sentencepiece.pieces(values, model, folder.lstrip, folder.rstrip)

        count.close = lambda: None
        return count
    if tokenization.kind == BYTE_BPE:
        tokens = files.read_byte_bpe_vocabulary(vocab_file)
        _, merges = files.read_merges(merges_file)
        special = byte_bpe.special_ids(tokens)
        work = tempfile.TemporaryDirectory()  # the tables read files, as they read the assets in the graph
        vocab_path, merges_path = os.path.join(work.name, "vocabulary"), os.path.join(work.name, "merges")
        for path, content in ((vocab_path, _lines(tokens)), (merges_path, _lines(merges))):
            with open(path, "wb") as f:
                f.write(content)

        def count(values):
            return byte_bpe.pieces(
                values, vocab_path, merges_path, special, bool(folder.add_prefix_space), folder.lstrip, folder.rstrip
            )

        count.close = work.cleanup
        return count
    raise ValueError(f"{tokenization.kind} is not a subword tokenizer's kind")
