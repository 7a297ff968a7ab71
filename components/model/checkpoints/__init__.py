"""Pretrained BERT-family checkpoints as users hold them (`--init-checkpoint PATH`), read without PyTorch, on a
local disk or an object store (gs://, s3://, minio://): found and described (locate, description, files), their
vocabulary and casing (vocabulary), one reader per format (hugging_face, tf_checkpoint, model_garden,
saved_model), the Hugging Face encoder families (families/: BERT, DistilBERT, ELECTRA, RoBERTa, XLM-R) and their
tokenizers' files (subword_files), and their weights in this project's encoder layout (weights, layout).

The formats:

- a Hugging Face model folder: `config.json` (`model_type` bert, distilbert, electra, roberta or xlm-roberta), the
  weights in `model.safetensors` (or shards listed by `model.safetensors.index.json`), the tokenizer's files
  (`vocab.txt`; XLM-R's `sentencepiece.bpe.model`; RoBERTa's `vocab.json` and `merges.txt`), and where present
  `tokenizer_config.json` (casing) and sentence-transformers' `1_Pooling/config.json` (pooling).
  `pytorch_model.bin` alone is refused, naming the command that converts it (hugging_face.py);
- a Google BERT release (google-research/bert's zips: `bert_config.json`, `bert_model.ckpt.{index,data-*}`,
  `vocab.txt`, no `checkpoint` state file), as its folder or its checkpoint prefix; a folder of TF checkpoints
  whose `checkpoint` file names the latest (tf_checkpoint.py);
- a TF2 checkpoint of Model Garden's BertEncoder (official/nlp/tools/tf2_bert_encoder_checkpoint_converter.py:
  `encoder/layer_with_weights-N/...`), with its `bert_config.json` and `vocab.txt` (model_garden.py);
- a SavedModel this pipeline pushed (a text model's encoder; its vocabulary asset and tokenization;
  saved_model.py).

`locate` (locate.py) reads only what describes a checkpoint (its configs, its vocabulary and casing:
vocabulary.py, the weights' header or index) and refuses anything else, naming the file and what is missing or
wrong; `weights` (weights.py) reads the tensors, in this project's encoder layout (components/model/encoder.py;
layout.py): BERT's separate query, key and value kernels become one `qkv` kernel, PyTorch's [out, in] matrices are
transposed, Model Garden's per-head kernels flattened, and the first segment's token-type embedding (every token is
of the first segment) is folded into the positions. A `Checkpoint` (description.py) is what `locate` found.
"""

from tfxflow.components.model.checkpoints.description import (
    GOOGLE_BERT,
    HUGGING_FACE,
    KIND_NAMES,
    KINDS,
    MODEL_GARDEN,
    SAVED_MODEL,
    Checkpoint,
    CheckpointError,
    parameters_text,
)
from tfxflow.components.model.checkpoints.hugging_face import read_safetensors, safetensors_header
from tfxflow.components.model.checkpoints.layout import ENCODER_VARIABLE, encoder_shapes
from tfxflow.components.model.checkpoints.locate import local_copy, locate, unchanged
from tfxflow.components.model.checkpoints.vocabulary import vocabulary_is_uncased
from tfxflow.components.model.checkpoints.weights import weights

__all__ = [
    "ENCODER_VARIABLE",
    "GOOGLE_BERT",
    "HUGGING_FACE",
    "KINDS",
    "KIND_NAMES",
    "MODEL_GARDEN",
    "SAVED_MODEL",
    "Checkpoint",
    "CheckpointError",
    "encoder_shapes",
    "local_copy",
    "locate",
    "parameters_text",
    "read_safetensors",
    "safetensors_header",
    "unchanged",
    "vocabulary_is_uncased",
    "weights",
]
