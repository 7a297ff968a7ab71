"""A model card for a pushed model, in Markdown and HTML, from the same RunPage as the run page.

Both formats come from one list of blocks (heading, paragraph, list, table), so they say the same thing.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple, Union

from tfxflow.components.model.checkpoints import parameters_text
from tfxflow.components.model.features import ROLES, LabelSpec
from tfxflow.pipeline.reports.charts import esc, fmt
from tfxflow.pipeline.reports.html import CSP, STYLE
from tfxflow.pipeline.reports.page import RunPage, features_of

MAX_CARD_FEATURES = 30


@dataclasses.dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclasses.dataclass(frozen=True)
class Paragraph:
    text: str


@dataclasses.dataclass(frozen=True)
class Bullets:
    items: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Table:
    headers: Tuple[str, ...]
    rows: Tuple[Tuple[str, ...], ...]


Block = Union[Heading, Paragraph, Bullets, Table]


def label_rule(label: dict, task: str = "binary") -> str:
    """The label's rule in words, as components/model/features.py's LabelSpec.describe says it."""
    return LabelSpec.from_dict({**label, "task": task}).describe()


def _what(config: dict, classes: List[str]) -> str:
    """What the model predicts and answers, per task."""
    label = config.get("label", {})
    task = config.get("task", "binary")
    name, column = label.get("name", "?"), label.get("column", "?")
    signatures = "for tf.Examples without the label (`serving_default`)" + (
        " or one tensor per raw column (`serving_raw`)" if any(config.get(k) for k in ROLES) else ""
    )
    if task == "multiclass":
        listed = ", ".join(f"`{c}`" for c in classes) or "the classes of the training split"
        return (
            f"A classifier of `{name}` into one of {len(classes) or 'K'} classes, the value of label column "
            f"`{column}`: {listed}. The served model answers `scores` (one per class, summing to 1) and `classes` "
            f"(their names, in the same order) {signatures}."
        )
    if task == "regression":
        transform = label.get("transform", "none")
        trained = f", trained on {transform}(`{column}`)" if transform != "none" else ""
        return (
            f"A regression of `{name}`, the number in label column `{column}`{trained}. The served model answers "
            f"`predictions` in the label's own units {signatures}."
        )
    return (
        f"A binary classifier of `{name}`: the probability that {label_rule(label)} (label column `{column}`). "
        f"The served model answers `probabilities` {signatures}."
    )


def _title(page: RunPage) -> str:
    version = f" version {page.pushed_version}" if page.pushed else " (not pushed)"
    return f"Model card: {page.pipeline_name}{version}"


def _purpose(page: RunPage) -> List[Block]:
    blocks: List[Block] = [Heading("What it predicts")]
    config = page.features
    if not config:
        return blocks + [Paragraph("The run recorded no feature config: the label and inputs are not known here.")]
    classes = list(page.evaluation.classes) if page.evaluation is not None else []
    blocks.append(Paragraph(_what(config, classes)))
    rows = [(kind, ", ".join(config.get(kind, []))) for kind in ROLES if config.get(kind)]
    if not rows:
        rows = [("all", "the transformed features of the module file's preprocessing_fn")]
    options = [(key, str(config[key])) for key in ("num_buckets", "vocab_top_k", "num_oov_buckets") if key in config]
    blocks.append(Table(("inputs", "columns"), tuple(rows)))
    if options:
        blocks.append(Table(("feature option", "value"), tuple(options)))
    info = page.training_info or {}
    if info.get("init_checkpoint_name"):
        blocks.append(
            Paragraph(
                f"The text encoder was fine-tuned from `{info['init_checkpoint_name']}` ({info['encoder_layers']} "
                f"layers, {info['encoder_hidden']} wide, {parameters_text(info['init_checkpoint_parameters'])} "
                f"parameters; `{info.get('init_checkpoint', '?')}`), with its vocabulary and its tokenizer's "
                f"rules ({info.get('tokenizer', '?')}), {info.get('pooling', '?')} pooling."
            )
        )
    return blocks


def _data(page: RunPage) -> List[Block]:
    blocks: List[Block] = [Heading("Training data")]
    if page.rows:
        blocks.append(
            Paragraph("Rows per split: " + ", ".join(f"{split} {rows:,}" for split, rows in page.rows.items()) + ".")
        )
    data_root = next((v for k, (v, _) in page.settings.items() if k in ("data.root", "data_root")), None)
    if data_root:
        blocks.append(Paragraph(f"Read from `{data_root}`."))
    train = next((s for s in page.splits if s.split == "train"), None)
    if train is None:
        return blocks + [Paragraph("No statistics of the training split were recorded.")]
    used = set(features_of(page))
    rows = []
    for f in train.features[:MAX_CARD_FEATURES]:
        if used and f.name not in used:
            continue
        spread = (
            f"mean {fmt(f.mean)}, std {fmt(f.std)}, range {fmt(f.min)} to {fmt(f.max)}"
            if f.kind == "numeric" and f.mean is not None
            else f"{f.unique:,} values, most often " + ", ".join(f"{v} ({c:,.0f})" for v, c in f.top_values[:3])
            if f.kind == "categorical" and f.unique is not None
            else ""
        )
        rows.append((f.name, f.kind, f"{f.count:,}", f"{f.missing:,}", spread))
    blocks.append(Table(("feature", "kind", "rows with a value", "missing", "distribution"), tuple(rows)))
    if page.baseline_name and page.distances:
        worst = page.distances[0]
        blocks.append(
            Paragraph(
                f"Compared with {page.baseline_name}: largest change {worst.feature}, {worst.measure} "
                f"{worst.value:.4f} (threshold {worst.threshold:g})."
            )
        )
    return blocks


def _metrics(page: RunPage) -> List[Block]:
    blocks: List[Block] = [Heading("Evaluation")]
    ev = page.evaluation
    if ev is None:
        return blocks + [Paragraph("The model was not evaluated in this run.")]
    verdict = {True: "Blessed", False: "Not blessed", None: "No verdict"}[ev.blessed]
    blocks.append(Paragraph(f"{verdict} by the Evaluator" + (f", on {ev.sample}." if ev.sample else ".")))
    overall = ev.overall
    names = sorted(set(overall) | set(ev.baseline_metrics))
    rows = tuple(
        (
            name,
            fmt(overall[name]) if name in overall else "",
            fmt(ev.baseline_metrics[name]) if name in ev.baseline_metrics else "",
        )
        for name in names
    )
    blocks.append(Table(("metric (overall)", "this model", "previous blessed model"), rows))
    per_class = ev.per_class()
    if per_class:
        blocks.append(Heading("By class", 3))
        blocks.append(
            Table(
                ("class", "precision", "recall", "F1", "eval rows"),
                tuple(
                    (
                        name,
                        *(fmt(v[m]) if m in v else "" for m in ("precision", "recall", "f1")),
                        f"{v.get('rows', 0):,.0f}",
                    )
                    for name, v in per_class
                ),
            )
        )
    slices = {k: {m: x for m, x in v.items() if "." not in m} for k, v in ev.slices.items() if k != "overall"}
    if slices:
        columns = tuple(sorted({m for values in slices.values() for m in values}))
        blocks.append(Heading("By slice", 3))
        blocks.append(
            Table(
                ("slice", *columns),
                tuple((name, *(fmt(v[m]) if m in v else "" for m in columns)) for name, v in slices.items()),
            )
        )
    blocks.append(Heading("Blessing thresholds", 3))
    blocks.append(Bullets(tuple(ev.thresholds) or ("none recorded",)))
    if ev.blessing_failures:
        blocks.append(Bullets(tuple(f"failed: {r}" for r in ev.blessing_failures)))
    if page.serving_check:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.serving.serving_check import summary_line

        line = summary_line(page.serving_check)
        blocks.append(Heading("Serving", 3))
        blocks.append(
            Paragraph(
                ("Passed" if page.serving_check.get("blessed") else "Failed")
                + " the serving check in a TensorFlow-only process"
                + (f": {line}." if line else ".")
            )
        )
    if page.edge is not None:
        # lazy: it imports TensorFlow and TFX
        from tfxflow.components.edge import edge

        blocks.append(Paragraph(f"TensorFlow Lite (--tflite): {edge.summary_line(page.edge)}."))
    return blocks


def _limitations(page: RunPage) -> List[Block]:
    items = []
    train_rows = page.rows.get("train")
    if train_rows is not None:
        items.append(f"Trained on {train_rows:,} rows; it knows only the values and ranges seen there.")
    if page.evaluation is not None and page.evaluation.sample:
        items.append(f"Evaluated on {page.evaluation.sample}, not on every eval row.")
    if page.evaluation is not None and not page.evaluation.baseline_metrics:
        items.append("There was no earlier blessed model: the blessing checked the absolute thresholds only.")
    slices = page.evaluation.slices if page.evaluation else {}
    small = [name for name, v in slices.items() if name != "overall" and v.get("example_count", 1e9) < 100]
    if small:
        items.append(f"{len(small)} slice(s) have fewer than 100 eval rows; their metrics are noisy.")
    if page.anomalies:
        items.append(f"The data had {len(page.anomalies)} anomalies that the configuration allowed.")
    items.append("The blessing judges the overall slice only; no slice, fairness or robustness threshold was applied.")
    items.append(
        "Data that drifts from this training data is refused by the data gate of the next run, not by the "
        "served model: predictions on such data are not checked."
    )
    return [Heading("Limitations"), Bullets(tuple(items))]


def _provenance(page: RunPage) -> List[Block]:
    rows = [("pipeline run", page.run_id)]
    if page.finished:
        rows.append(("trained", page.finished))
    if page.pushed:
        rows.append(("served copy", page.pushed_destination or ""))
    model = next((v for k, v in page.lineage.items() if k.startswith("model artifact")), None)
    if model:
        rows.append(("model artifact", model))
    rows.append(("MLflow run", page.mlflow_run_id or "not tracked"))
    rows.append(("code commit", page.code_commit or "not known"))
    rows += [(name, version) for name, version in page.versions.items()]
    return [Heading("Versions and lineage"), Table(("", ""), tuple(rows))]


def blocks(page: RunPage) -> List[Block]:
    """The card's content, in order."""
    intro = (
        f"Trained and pushed by pipeline run {page.run_id}."
        if page.pushed
        else f"Not pushed: {page.not_pushed or page.verdict}. This card describes the candidate of run {page.run_id}."
    )
    return [
        Heading(_title(page), 1),
        Paragraph(intro),
        *_purpose(page),
        *_data(page),
        *_metrics(page),
        *_limitations(page),
        *_provenance(page),
    ]


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(page: RunPage) -> str:
    """The card as Markdown (GitHub flavour: pipe tables)."""
    out: List[str] = []
    for block in blocks(page):
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + block.text)
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
        else:
            headers = [h or " " for h in block.headers]
            lines = ["| " + " | ".join(map(_md_cell, headers)) + " |", "|" + "---|" * len(headers)]
            lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block.rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Escaped text with Markdown's `code` spans as <code>."""
    parts = str(text).split("`")
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}<tbody>{body}</tbody></table>"


def render_html(page: RunPage, title: Optional[str] = None) -> str:
    """The card as one self-contained HTML document (same CSP and style as the run page)."""
    parts = []
    for block in blocks(page):
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>")
        else:
            parts.append(_html_table(block.headers, block.rows))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title or _title(page))}</title><style>{STYLE}</style></head>"
        f'<body><main style="padding-top:16px">{"".join(parts)}</main></body></html>\n'
    )
