"""This project's encoder layout (components/model/encoder.py) as every reader meets it: the architecture a
config file states, the shape of every weight, and getters of a format's tensors that name a missing one."""

from __future__ import annotations

import re
from typing import Callable, Dict, Mapping, Sequence, Tuple

import numpy as np

from tfxflow.components.model import presets
from tfxflow.components.model.checkpoints.description import CheckpointError
from tfxflow.components.model.checkpoints.files import Values, given
from tfxflow.components.model.presets import Encoder

# The encoder's variables, as encoder.py names them: "<input>_block_0/qkv/kernel:0" and so on. An input's name holds
# no "/": an optimizer's slot of the same variable ("AdamW/m/<input>_block_0/...") is not one.
ENCODER_VARIABLE = re.compile(
    r"^(?P<input>[^/]+?)_(?P<part>tokens|positions|embedding_norm|embedding_projection|block_\d+|pooled)/(?P<rest>.+):0$"
)


def encoder_shapes(encoder: Encoder, vocab_size: int, pooler: bool) -> Dict[str, Tuple[int, ...]]:
    """The shape of every weight of an encoder of this architecture, by its name here (encoder.py)."""
    hidden, width = encoder.hidden, encoder.embedding_width
    shapes = {
        "tokens/embeddings": (vocab_size, width),
        "positions/embeddings": (encoder.max_positions, width),
        "embedding_norm/gamma": (width,),
        "embedding_norm/beta": (width,),
    }
    if encoder.embedding_size is not None:
        shapes.update({"embedding_projection/kernel": (width, hidden), "embedding_projection/bias": (hidden,)})
    for i in range(encoder.layers):
        block = f"block_{i}"
        shapes.update(
            {
                f"{block}/qkv/kernel": (hidden, 3 * hidden),
                f"{block}/qkv/bias": (3 * hidden,),
                f"{block}/attention_output/kernel": (hidden, hidden),
                f"{block}/attention_output/bias": (hidden,),
                f"{block}/attention_norm/gamma": (hidden,),
                f"{block}/attention_norm/beta": (hidden,),
                f"{block}/up/kernel": (hidden, encoder.intermediate),
                f"{block}/up/bias": (encoder.intermediate,),
                f"{block}/down/kernel": (encoder.intermediate, hidden),
                f"{block}/down/bias": (hidden,),
                f"{block}/output_norm/gamma": (hidden,),
                f"{block}/output_norm/beta": (hidden,),
            }
        )
    if pooler:
        shapes.update({"pooled/kernel": (hidden, hidden), "pooled/bias": (hidden,)})
    return shapes


def check_shapes(path: str, mapped: Mapping[str, np.ndarray], expected: Mapping[str, Tuple[int, ...]], where: str):
    wrong = [
        f"'{key}' is missing"
        if key not in mapped
        else f"'{key}' is {list(mapped[key].shape)}, the config's architecture makes it {list(shape)}"
        for key, shape in expected.items()
        if key not in mapped or tuple(mapped[key].shape) != tuple(shape)
    ]
    if wrong:
        raise CheckpointError(f"{given(path)}: {where} does not fit its own config: " + "; ".join(wrong[:4]))


Getter = Callable[[str], np.ndarray]


def missing_tensor(path: str, where: str) -> Callable[[str], None]:
    def report(name: str):
        raise CheckpointError(f"{given(path)}: {where} has no tensor '{name}'")

    return report


def shaped(shapes: Mapping[str, Sequence[int]], path: str, where: str) -> Tuple[Getter, Callable[[str], bool]]:
    """A getter of zero-cost stand-ins of the tensors' shapes (a broadcast scalar): the layout functions run on
    them to check every tensor is there and of the architecture's shape, before any weight is read."""
    missing = missing_tensor(path, where)

    def get(name: str) -> np.ndarray:
        if name not in shapes:
            missing(name)
        return np.broadcast_to(np.float32(0), tuple(int(d) for d in shapes[name]))

    return get, lambda name: name in shapes


def tensor_getter(values: Mapping[str, np.ndarray], path: str, where: str) -> Getter:
    missing = missing_tensor(path, where)

    def get(name: str) -> np.ndarray:
        if name not in values:
            missing(name)
        return values[name]

    return get


def parameter_count(mapped: Mapping[str, np.ndarray]) -> int:
    """The encoder's parameter count as this model holds it (the token-type table folded into the positions)."""
    return int(sum(int(np.prod(value.shape)) for value in mapped.values()))


def encoder_of(config: Values, activation: str, epsilon_key: str) -> Encoder:
    """The architecture a config file states (BERT's names); its layer norms' epsilon from `epsilon_key`, else
    BERT's."""
    hidden = config.int("hidden_size")
    if config.data.get("embedding_size") not in (None, hidden):
        raise CheckpointError(
            f"{given(config.path)}: {config.where}'s embedding_size {config.data['embedding_size']} differs from "
            f"hidden_size {hidden} (ALBERT's factorized embeddings): not BERT's layout"
        )
    try:
        return Encoder(
            layers=config.int("num_hidden_layers"),
            hidden=hidden,
            heads=config.int("num_attention_heads"),
            intermediate=config.int("intermediate_size"),
            max_positions=config.int("max_position_embeddings", 512),
            activation=activation,
            layer_norm_epsilon=config.number(epsilon_key, presets.LAYER_NORM_EPSILON, 0.0, 1.0),
        )
    except ValueError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{given(config.path)}: {config.where}: {err}") from err
