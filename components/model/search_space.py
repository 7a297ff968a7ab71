"""The tuning step's search space: which Trainer settings a trial samples, over which ranges (plain data, so the
CLI parses and checks `--tune-space` without importing TensorFlow).

A space is a tuple of `Dimension`s. `--tune-space` replaces or adds dimensions of the model's default space, e.g.
`learning_rate=1e-4:1e-2:log,dropout=0:0.3,batch_size=64|128` (a range `low:high`, `:log` for a log scale; a
choice `a|b|c`); `name=off` drops a default dimension.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

Value = Union[int, float]


@dataclasses.dataclass(frozen=True)
class Knob:
    """A setting a trial may change: the Trainer's custom_config section and key it overrides, and its type."""

    section: str  # "model" or "training"
    key: str
    type: type
    check: Tuple[float, float]  # the values the Trainer accepts: low <= v < high (inf: no bound)
    help: str


INF = float("inf")
KNOBS: Dict[str, Knob] = {
    "learning_rate": Knob("model", "learning_rate", float, (0.0, INF), "the optimizer's learning rate"),
    "dropout": Knob("model", "dropout", float, (0.0, 1.0), "dropout after each hidden layer (and in an encoder)"),
    "head_dropout": Knob("model", "head_dropout", float, (0.0, 1.0), "dropout before the output layer"),
    "warmup_share": Knob("model", "warmup_share", float, (0.0, 1.0), "adamw's warmup, a share of the steps"),
    "weight_decay": Knob("model", "weight_decay", float, (0.0, INF), "adamw's weight decay"),
    "width": Knob(
        "model", "hidden_units", int, (1.0, INF), "the first hidden layer's units (the others keep the preset's ratios)"
    ),
    "batch_size": Knob("training", "batch_size", int, (1.0, INF), "examples per replica in a batch"),
    "sequence_length": Knob(
        "model",
        "sequence_length",
        int,
        (3.0, INF),
        "a text input's tokens the model reads: the first this many of the Transform graph's, its [SEP] kept "
        "(at most the feature config's sequence_length)",
    ),
}


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One setting's range (`low`..`high`, on a log scale with `log`) or its `choices`."""

    name: str
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    choices: Tuple[Value, ...] = ()

    def __post_init__(self):
        if self.name not in KNOBS:
            raise ValueError(f"{self.name}: not a setting the tuning can change; known: {', '.join(sorted(KNOBS))}")
        knob = KNOBS[self.name]
        values = self.choices or (self.low, self.high)
        if self.choices:
            if len(set(self.choices)) < 2:
                raise ValueError(f"{self.name}: give at least two different choices")
        elif self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"{self.name}: a range needs low < high, got {self.low}:{self.high}")
        if self.log and not self.choices and self.low <= 0:
            raise ValueError(f"{self.name}: a log scale needs low > 0, got {self.low:g}")
        for value in values:
            if not knob.check[0] <= value < knob.check[1]:
                high = "" if knob.check[1] == INF else f" and < {knob.check[1]:g}"
                raise ValueError(f"{self.name}={value:g}: must be >= {knob.check[0]:g}{high}")
            if knob.type is int and float(value) != int(value):
                raise ValueError(f"{self.name}={value:g}: must be a whole number")

    def describe(self) -> str:
        """As `--tune-space` spells it."""
        if self.choices:
            return f"{self.name}=" + "|".join(f"{v:g}" for v in self.choices)
        return f"{self.name}={self.low:g}:{self.high:g}" + (":log" if self.log else "")

    def to_dict(self) -> Dict[str, Any]:
        values = dataclasses.asdict(self)
        # What a dimension does not use is left out (never a bound of 0, which equals False).
        return {k: v for k, v in values.items() if not (v is None or v == () or (k == "log" and v is False))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Dimension":
        data = dict(data)
        if "choices" in data:
            data["choices"] = tuple(data["choices"])
        return cls(**data)


# From scratch: the taxi-sized MLP's neighbourhood of presets.py's defaults.
SCRATCH = (
    Dimension("learning_rate", 1e-4, 3e-2, log=True),
    Dimension("width", choices=(32, 64, 128, 256)),
    Dimension("dropout", 0.0, 0.5),
    Dimension("batch_size", choices=(64, 128, 256, 512)),
)
# A Transformer encoder (a bert-* preset or a pretrained checkpoint): BERT's fine-tuning ranges (Devlin et al.
# 2019, appendix A.3: learning rates 2e-5 to 5e-5 at batch 16 or 32), widened by half a decade.
ENCODER = (
    Dimension("learning_rate", 1e-5, 1e-4, log=True),
    Dimension("warmup_share", 0.0, 0.2),
    Dimension("dropout", 0.0, 0.2),
    Dimension("batch_size", choices=(16, 32)),
)


# A text model's tokens read, as shares of the feature config's sequence_length (the Transform graph's): attention
# costs grow with its square, and many texts end well before it.
TEXT_LENGTH_SHARES = (0.25, 0.5, 1.0)
MIN_TEXT_LENGTH = 8


def text_lengths(sequence_length: int) -> Tuple[int, ...]:
    """The default choices of `sequence_length` for a graph that makes `sequence_length` tokens."""
    lengths = {int(sequence_length * share) for share in TEXT_LENGTH_SHARES}
    return tuple(sorted(n for n in lengths if n >= min(MIN_TEXT_LENGTH, sequence_length)))


def default_space(encoder: bool, sequence_length: int = 0) -> Tuple[Dimension, ...]:
    """The model's default dimensions; with text inputs (`sequence_length`: the graph's tokens), the tokens read."""
    space = ENCODER if encoder else SCRATCH
    lengths = text_lengths(sequence_length) if sequence_length else ()
    return space + ((Dimension("sequence_length", choices=lengths),) if len(lengths) > 1 else ())


def parse(text: str) -> Dict[str, Optional[Dimension]]:
    """`--tune-space`'s value: {name: its Dimension, or None for `name=off`}; raises ValueError naming the part."""
    found: Dict[str, Optional[Dimension]] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, spec = part.partition("=")
        name = name.strip()
        if not sep or not spec:
            raise ValueError(f"{part!r}: write name=low:high[:log], name=a|b|c or name=off")
        try:
            if spec == "off":
                if name not in KNOBS:
                    raise ValueError(f"{name}: not a setting the tuning can change; known: {', '.join(sorted(KNOBS))}")
                found[name] = None
            elif "|" in spec:
                found[name] = Dimension(name, choices=tuple(_number(v) for v in spec.split("|")))
            else:
                bounds = spec.split(":")
                log = bounds[-1] == "log"
                if log:
                    bounds = bounds[:-1]
                if len(bounds) != 2:
                    raise ValueError("write low:high or low:high:log")
                found[name] = Dimension(name, _number(bounds[0]), _number(bounds[1]), log=log)
        except ValueError as err:
            raise ValueError(f"{part!r}: {err}") from None
    return found


def _number(text: str) -> Value:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def resolve(encoder: bool, overrides: str = "", sequence_length: int = 0) -> Tuple[Dimension, ...]:
    """The default space of the model, with `--tune-space`'s dimensions replacing, adding or dropping
    (`name=off`) its own; `sequence_length`: the tokens the Transform graph makes of each text input (0: the model
    has none). Raises ValueError when nothing is left to tune, or for tokens the graph does not make."""
    changes = parse(overrides)
    space = {d.name: d for d in default_space(encoder, sequence_length)}
    for name, dimension in changes.items():
        if dimension is None:
            space.pop(name, None)
        else:
            space[name] = dimension
    if not space:
        raise ValueError("the search space is empty: every dimension was turned off")
    length = space.get("sequence_length")
    if length is not None:
        if not sequence_length:
            raise ValueError("sequence_length: the model has no text input")
        largest = max(length.choices or (length.high,))
        if largest > sequence_length:
            raise ValueError(
                f"{length.describe()}: over the feature config's sequence_length {sequence_length}, the tokens the "
                "Transform graph makes of each text"
            )
    return tuple(space.values())


def apply(values: Mapping[str, Value], custom_config: Mapping[str, Any], preset_units: Sequence[int]) -> dict:
    """The Trainer's custom_config with a trial's `values` in place of its settings. `width` scales the hidden
    layers (`preset_units`, the model's own) so the first has that many units and the others keep their ratios."""
    custom = {section: dict(body) if isinstance(body, Mapping) else body for section, body in custom_config.items()}
    for name, value in values.items():
        knob = KNOBS[name]
        if name == "width":
            units = tuple(preset_units) or (int(value),)
            value = [max(1, round(int(value) * u / units[0])) for u in units]
        else:
            value = knob.type(value)
        custom.setdefault(knob.section, {})[knob.key] = value
    return custom


# The Keras metric a trial is judged by, per blessing metric, where it is not itself one of the model's
# per-epoch metrics: r2 = 1 - mse / var orders models on one split as rmse does; precision and recall alone
# reward a one-sided model, the loss does not.
OBJECTIVE_STAND_INS = {"r2": "rmse"}


def objective_metric(blessing_metric: str, training_metrics: Sequence[str]) -> str:
    """The per-epoch validation metric (a Keras history key without `val_`) that judges a trial."""
    name = OBJECTIVE_STAND_INS.get(blessing_metric, blessing_metric)
    return name if name in training_metrics else "loss"
