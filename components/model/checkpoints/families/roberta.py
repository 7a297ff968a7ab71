"""RoBERTa and XLM-RoBERTa (`model_type` roberta, xlm-roberta): BERT's layout and names, weights under `roberta.`,
a pooler where the file holds one (RobertaModel's), layer norms of config.json's layer_norm_eps (1e-5). Positions
count from padding_idx + 1 (fairseq's; padding_idx is config.json's pad_token_id, 1): the position table's rows
from there are positions 0, 1, ..., so an encoder takes max_position_embeddings - padding_idx - 1 positions (514
rows: 512). The single token type (type_vocab_size 1) is folded into the positions as BERT's first segment.
RoBERTa's tokenizer is a byte-level BPE (vocab.json, merges.txt), XLM-R's a SentencePiece model
(sentencepiece.bpe.model)."""

from __future__ import annotations

from typing import Mapping, Sequence

from tfxflow.components.model import tokenization
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.families.bert import activation, check_absolute_positions
from tfxflow.components.model.checkpoints.families.family import Family, bert_encoder
from tfxflow.components.model.checkpoints.files import Values, given
from tfxflow.components.model.checkpoints.layout import encoder_of
from tfxflow.components.model.presets import Encoder

PADDING_IDX = 1  # fairseq's dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3


def architecture(config: Values, shapes: Mapping[str, Sequence[int]]) -> Encoder:
    check_absolute_positions(config)
    padding_idx = config.int("pad_token_id", PADDING_IDX, minimum=0)
    rows = config.int("max_position_embeddings", 514)
    if rows <= padding_idx + 1:
        raise CheckpointError(
            f"{given(config.path)}: config.json's max_position_embeddings {rows} leaves no position after "
            f"padding_idx {padding_idx} (positions start at padding_idx + 1)"
        )
    table = shapes.get("embeddings.position_embeddings.weight")
    if table is not None and int(table[0]) != rows:
        raise CheckpointError(
            f"{given(config.path)}: the position table has {int(table[0])} rows and config.json's "
            f"max_position_embeddings is {rows}"
        )
    positions = dict(config.data, max_position_embeddings=rows - padding_idx - 1)
    return encoder_of(
        Values(config.path, config.where, positions), activation(config, "hidden_act", "gelu"), "layer_norm_eps"
    )


def layout(get, has, encoder: Encoder, pooler: bool):
    table = get("embeddings.position_embeddings.weight")
    # Position i is row padding_idx + 1 + i: the last max_positions rows.
    return bert_encoder(get, has, encoder, pooler, table[len(table) - encoder.max_positions :])


ROBERTA = Family(
    model_type="roberta",
    title="RoBERTa",
    prefix="roberta.",
    layer="encoder.layer.{}.",
    architecture=architecture,
    layout=layout,
    tokenizer=tokenization.BYTE_BPE,
)
XLM_ROBERTA = Family(
    model_type="xlm-roberta",
    title="XLM-RoBERTa",
    prefix="roberta.",
    layer="encoder.layer.{}.",
    architecture=architecture,
    layout=layout,
    tokenizer=tokenization.SENTENCEPIECE,
)
