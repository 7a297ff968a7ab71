"""A run's page as one self-contained HTML file: inline CSS and SVG, nothing fetched from anywhere.

The Content-Security-Policy meta tag makes a browser refuse any script, font, stylesheet or image that is
not inline (images only as data: URIs), so the page stays readable offline and leaks nothing when opened.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Iterable, List, Optional, Sequence, Union

from tfxflow.pipeline.reports import charts
from tfxflow.pipeline.reports.charts import esc, fmt
from tfxflow.pipeline.reports.page import FeatureSummary, RunPage, SplitSummary

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
SECTIONS = (  # (anchor, heading): the page's order and its table of contents
    ("run", "Run"),
    ("timing", "Time per component"),
    ("data", "Data"),
    ("gate", "Data gate"),
    ("drift", "Drift and skew"),
    ("tuning", "Tuning"),
    ("training", "Training"),
    ("evaluation", "Evaluation"),
    ("serving", "Serving check"),
    ("lineage", "Lineage"),
)
TRAINING_METRICS = ("loss", "binary_accuracy", "accuracy", "auc", "rmse", "mae")  # first in this order, then the rest
MAX_TRAINING_CHARTS = 4
MAX_DRIFT_CHARTS = 50  # one per checked feature, the most shifted first, up to the feature cap; the table lists all
ABSENT = "—"  # a figure the data does not give (a mean of no values), as opposed to 0

STYLE = """
:root{--fg:#1f2933;--muted:#52606d;--line:#e4e7eb;--bg:#fff;--soft:#f5f7fa;--ok:#2e8b57;--bad:#c0392b;
--warn:#d08c2f;--accent:#2f6fb3}
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg);font-size:14px;line-height:1.45}
header{padding:20px 32px;border-bottom:4px solid var(--accent);background:var(--soft)}
header.refused,header.failed,header.stopped{border-color:var(--bad)}
header.succeeded.notpushed{border-color:var(--warn)}
h1{margin:0 0 4px;font-size:22px}
h2{font-size:18px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}
main{padding:0 32px 40px;max-width:1200px}
nav{padding:8px 32px;border-bottom:1px solid var(--line);font-size:13px}
nav a{margin-right:14px;color:var(--accent);text-decoration:none}
.verdict{font-size:17px;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;
background:var(--muted);vertical-align:middle}
.badge.succeeded,.badge.yes{background:var(--ok)}.badge.refused,.badge.failed,.badge.no{background:var(--bad)}
.badge.stopped,.badge.running{background:var(--warn)}
.meta{color:var(--muted);font-size:13px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:var(--muted);font-style:italic;margin:6px 0}
pre{background:var(--soft);padding:10px 12px;border-left:4px solid var(--bad);white-space:pre-wrap;
font-size:12.5px;overflow-x:auto}
.grid{display:flex;flex-wrap:wrap;gap:14px 28px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 10px}
.card h3{margin:0 0 4px;font-size:13px}
.over{color:var(--bad);font-weight:600}.ok{color:var(--ok)}
code{font-size:12.5px;word-break:break-all}
svg.chart{display:block}
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped unless they are `Markup`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    head = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""  # a key-value table needs no header row
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="n"' if i in numeric else ""
            cells.append(f"<td{cls}>{cell if isinstance(cell, Markup) else esc(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>{head}<tbody>{''.join(body)}</tbody></table>"


class Markup(str):
    """Text that is already HTML (a chart, a badge): not escaped again."""


def _badge(text: str, kind: str) -> Markup:
    return Markup(f'<span class="badge {esc(kind)}">{esc(text)}</span>')


def _note(text: Optional[str]) -> str:
    return f'<p class="note">{esc(text)}</p>' if text else ""


def _section(anchor: str, heading: str, body: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(heading)}</h2>{body}</section>'


def _value(x: Optional[Union[float, str]]) -> str:
    """A number formatted for a label; text (a setting keras-tuner searched as a string) as it is."""
    if x is None:
        return ""
    return fmt(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def _header(page: RunPage) -> str:
    kind = page.status + (" notpushed" if page.status == "succeeded" and not page.pushed else "")
    when = f"{page.started} \u2013 {page.finished}" if page.started else ""
    wall = f" ({page.wall_s:.1f} s)" if page.wall_s is not None else ""
    return (
        f'<header class="{esc(kind)}"><h1>{esc(page.pipeline_name)} <span class="meta">run {esc(page.run_id)}'
        f"</span></h1>"
        f'<div class="verdict">{_badge(page.status, page.status)} {esc(page.verdict)}</div>'
        f'<div class="meta">{esc(when + wall)}</div></header>'
    )


def _run(page: RunPage) -> str:
    rows: List[Sequence[object]] = [("pipeline", page.pipeline_name), ("run id", page.run_id)]
    if page.started:
        rows += [("started", page.started), ("finished", page.finished), ("wall time", f"{page.wall_s:.1f} s")]
    rows.append(("status", _badge(page.status, page.status)))
    if page.pushed:
        rows.append(("pushed", f"version {page.pushed_version} \u2192 {page.pushed_destination}"))
    else:
        rows.append(("pushed", f"no: {page.not_pushed or 'nothing was pushed'}"))
    rows.append(("MLflow run", page.mlflow_run_id or "not tracked"))
    rows.append(("code commit", page.code_commit or "not known"))
    rows += [(name, version) for name, version in page.versions.items()]
    body = _table(("", ""), rows)
    if page.failure:
        where = f" at {page.failed_component}" if page.failed_component else ""
        body += f"<h3>What stopped the run{esc(where)}</h3><pre>{esc(page.failure)}</pre>"
    if page.settings:
        defaults = any(default is not None for _, default in page.settings.values())
        body += "<h3>Settings that differ from the defaults</h3>" if defaults else "<h3>Settings</h3>"
        body += _table(
            ("setting", "value", "default") if defaults else ("setting", "value"),
            [(k, v, d if d is not None else "(none)") if defaults else (k, v) for k, (v, d) in page.settings.items()],
        )
    else:
        body += _note("every setting at its default (or the settings were not given)")
    return body


def _timing(page: RunPage) -> str:
    if not page.components:
        return _note("no component ran")
    chart = charts.hbars(
        [(c.name, c.seconds, c.state) for c in page.components],
        title="seconds per component",
        unit=" s",
        width=760,
        label_width=240,
    )
    return chart + _note("bars: blue ran, grey cached, red failed; from ML Metadata's execution times")


def _figure(feature: FeatureSummary, x: Optional[float]) -> str:
    """A numeric feature's mean, std, min or max; "—" where its values give none (no value, or one for a
    spread), so that an empty column does not read as zeros. Blank for a feature that has no such figures."""
    if x is None:
        return ABSENT if feature.kind == "numeric" else ""
    return _value(x)


def _split(split: SplitSummary) -> str:
    rows = []
    for f in split.features:
        if f.kind == "numeric" and f.histogram:
            chart = charts.histogram(f.histogram, title=f"{f.name} ({split.split}): histogram", width=180, height=44)
        elif f.kind == "categorical" and f.top_values:
            chart = charts.top_values(f.top_values, title=f"{f.name} ({split.split}): top values", width=220)
        else:
            chart = ""
        rows.append(
            (
                f.name,
                f.kind,
                f"{f.count:,}",
                f"{f.missing:,}",
                *(_figure(f, x) for x in (f.mean, f.std, f.min, f.max)),
                "" if f.unique is None else f"{f.unique:,}",
                Markup(chart),
            )
        )
    capped = (
        _note(f"the first {len(split.features)} of {split.features_total} features")
        if split.features_total > len(split.features)
        else ""
    )
    return (
        f'<h3 id="data-{esc(split.split)}">Split {esc(split.split)}: {split.rows:,} rows</h3>'
        + _table(
            ("feature", "kind", "count", "missing", "mean", "std", "min", "max", "unique", "distribution"),
            rows,
            numeric=(2, 3, 4, 5, 6, 7, 8),
        )
        + capped
    )


def _data(page: RunPage) -> str:
    body = ""
    if page.rows:
        body += _table(("split", "rows"), [(s, f"{n:,}") for s, n in page.rows.items()], numeric=(1,))
    body += "".join(_split(s) for s in page.splits)
    return body + _note(page.notes.get("data")) if body else _note(page.notes.get("data") or "no statistics")


def _gate(page: RunPage) -> str:
    if "gate" in page.notes:
        return _note(page.notes["gate"])
    body = ""
    if page.gate_checks:
        body += "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in page.gate_checks) + "</ul>"
    allowed = set(page.allowed_anomaly_types)
    if page.anomalies:
        body += _table(
            ("split", "feature", "type", "description", "allowed"),
            [
                (a.split, a.feature or "(dataset)", a.type, a.description, "yes" if a.type in allowed else "no")
                for a in page.anomalies
            ],
        )
    else:
        body += _note("ExampleValidator found no anomalies against the schema")
    if page.allowed_anomaly_types:
        body += _note("allowed anomaly types: " + ", ".join(page.allowed_anomaly_types))
    return body


def _drift(page: RunPage) -> str:
    if not page.distances:
        return _note(page.notes.get("drift") or "nothing was compared") + _note(page.notes.get("skew"))
    compared = []
    if any(d.kind == "drift" for d in page.distances):
        compared.append(f"drift: the training split against {page.baseline_name}")
    if any(d.kind == "skew" for d in page.distances):
        compared.append("skew: the serving data against the training split")
    body = (
        f"<p>{esc('; '.join(compared))}, on common bins. A feature is refused when the distance is over its "
        "threshold and the chi-squared test says it is not sampling noise.</p>"
    )
    rows = []
    for d in page.distances:
        verdict = "refused" if d.shifted else ("over, within noise" if d.over_threshold else "ok")
        rows.append(
            (
                d.feature,
                d.kind,
                d.measure,
                Markup(f'<span class="{"over" if d.over_threshold else "ok"}">{esc(f"{d.value:.4f}")}</span>'),
                f"{d.threshold:g}",
                "< 1e-300" if d.p_value < 1e-300 else f"{d.p_value:.2g}",
                verdict,
                Markup(charts.threshold_gauge(d.value, d.threshold, title=f"{d.feature}: {d.measure} vs. threshold")),
            )
        )
    body += _table(("feature", "check", "measure", "value", "threshold", "p", "verdict", ""), rows, (3, 4, 5))
    cards = []
    for d in page.distances[:MAX_DRIFT_CHARTS]:
        if not d.labels:
            continue
        chart = charts.paired_bars(
            d.labels,
            d.baseline,
            d.current,
            title=f"{d.feature} ({d.kind}): baseline vs. current",
            names=("baseline", "current") if d.kind == "drift" else ("training", "serving"),
            width=min(520, max(260, 46 * len(d.labels))),
            height=140,
        )
        state = "over" if d.shifted else "ok"
        cards.append(
            f'<div class="card"><h3>{esc(d.feature)} ({esc(d.kind)}) <span class="{state}">'
            f"{esc(d.measure)} {d.value:.4f} (threshold {d.threshold:g})</span></h3>{chart}</div>"
        )
    body += '<div class="grid">' + "".join(cards) + "</div>"
    if len(page.distances) > MAX_DRIFT_CHARTS:
        body += _note(f"charts for the first {MAX_DRIFT_CHARTS} of {len(page.distances)} checks")
    return body + _note(page.notes.get("drift")) + _note(page.notes.get("skew"))


def _training_order(metrics: Iterable[str]) -> List[str]:
    names = list(metrics)
    first = [m for m in TRAINING_METRICS if m in names]
    return (first + sorted(m for m in names if m not in first))[:MAX_TRAINING_CHARTS]


def _training(page: RunPage) -> str:
    if not page.training:
        return _note(page.notes.get("training") or "no training in this run")
    cards = []
    for metric in _training_order(page.training):
        sides = page.training[metric]
        chart = charts.line_chart(
            {side: sides[side] for side in ("train", "validation") if side in sides},
            title=f"{metric} per epoch",
            width=360,
            height=190,
            dashed=("validation",),
        )
        cards.append(f'<div class="card"><h3>{esc(metric)}</h3>{chart}</div>')
    body = '<div class="grid">' + "".join(cards) + "</div>"
    info = {k: v for k, v in page.training_info.items() if k != "backup_dir"}
    if info:
        body += "<h3>How it trained</h3>" + _table(
            ("", ""), [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in info.items()]
        )
    return body


def _tuning(page: RunPage) -> str:
    """The tuning's trials: the objective per trial and against each searched setting (a log axis for a setting
    searched on one), and a row per trial, the best marked."""
    tuned = page.tuning
    if not tuned:
        return _note(page.notes.get("tuning") or "no tuning in this run (tfxflow run --tune)")
    objective = tuned["monitor"]
    done = [t for t in tuned["trials"] if t.get("value") is not None]
    cards = [
        charts.scatter(
            [(t["number"], t["value"]) for t in done],
            title=f"{objective} per trial",
            x_label="trial",
            y_label=objective,
        )
    ]
    for dimension in tuned["space"]:
        name, log = dimension["name"], dimension.get("log", False)
        points = [
            (math.log10(v) if log else float(v), t["value"])
            for t in done
            # a number (a module's keras-tuner may search strings or booleans, which have no axis here)
            if isinstance(v := t["values"].get(name), (int, float)) and not isinstance(v, bool) and (v > 0 or not log)
        ]
        label = f"log10 {name}" if log else name
        cards.append(charts.scatter(points, title=f"{objective} by {name}", x_label=label, y_label=objective))
    body = _note(tuned.get("summary")) + '<div class="grid">'
    body += "".join(f'<div class="card">{chart}</div>' for chart in cards) + "</div>"
    names_ = [d["name"] for d in tuned["space"]]
    best = (tuned.get("best") or {}).get("number")
    rows = []
    for t in tuned["trials"]:
        note = t.get("error") or (f"pruned after epoch {t['pruned_at_epoch']}" if "pruned_at_epoch" in t else "")
        state = _badge("best", "yes") if t["number"] == best else t["state"]
        rows.append(
            [
                t["number"],
                state,
                *(_value(t["values"].get(n)) for n in names_),
                _value(t.get("value")),
                _value(t.get("seconds")),
                note,
            ]
        )
    return body + _table(("trial", "state", *names_, objective, "seconds", ""), rows, numeric=range(2, 4 + len(names_)))


def _evaluation(page: RunPage) -> str:
    ev = page.evaluation
    if ev is None:
        return _note(page.notes.get("evaluation") or "no evaluation in this run")
    verdict = {True: ("blessed", "yes"), False: ("not blessed", "no"), None: ("no verdict", "")}[ev.blessed]
    body = f"<p>{_badge(verdict[0], verdict[1])}"
    body += f" evaluated on {esc(ev.sample)}</p>" if ev.sample else "</p>"
    if ev.blessing_failures:
        body += "<ul>" + "".join(f'<li class="over">{esc(r)}</li>' for r in ev.blessing_failures) + "</ul>"
    if ev.revoked:
        body += _note(f"blessing revoked: {ev.revoked}")
    if ev.thresholds:
        body += "<h3>Blessing thresholds</h3><ul>" + "".join(f"<li>{esc(t)}</li>" for t in ev.thresholds) + "</ul>"
    overall = ev.overall
    names = sorted(set(overall) | set(ev.baseline_metrics))
    if names:
        rows = []
        for name in names:
            value, base = overall.get(name), ev.baseline_metrics.get(name)
            change = f"{value - base:+.4f}" if value is not None and base is not None else ""
            rows.append((name, _value(value), _value(base), change))
        body += "<h3>Overall</h3>" + _table(
            ("metric", "candidate", "baseline model", "change"), rows, numeric=(1, 2, 3)
        )
    body += _per_class(ev) + _confusion(ev) + _residuals(ev)
    slices = {k: {m: v for m, v in values.items() if "." not in m} for k, values in ev.slices.items() if k != "overall"}
    if slices:
        columns = sorted({m for values in slices.values() for m in values})
        body += "<h3>By slice</h3>" + _table(
            ("slice", *columns),
            [(name, *(_value(values.get(m)) for m in columns)) for name, values in slices.items()],
            numeric=tuple(range(1, len(columns) + 1)),
        )
    return body + _note(page.notes.get("evaluation"))


def _per_class(ev) -> str:
    rows = ev.per_class()
    if not rows:
        return ""
    return "<h3>Per class</h3>" + _table(
        ("class", "precision", "recall", "F1", "eval rows"),
        [
            (
                name,
                *(_value(v.get(m)) for m in ("precision", "recall", "f1")),
                f"{v['rows']:,.0f}" if "rows" in v else "",
            )
            for name, v in rows
        ],
        numeric=(1, 2, 3, 4),
    )


def _confusion(ev) -> str:
    """The confusion matrix as a table: a row per actual class, a column per predicted class, each cell
    shaded by its share of the row (so a small class's errors show as clearly as a large one's)."""
    if not ev.confusion:
        return ""
    classes = list(ev.classes)
    columns = classes + (["(none)"] if len(ev.confusion[0]) > len(classes) else [])
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    rows = []
    for name, counts in zip(classes, ev.confusion, strict=False):
        total = sum(counts) or 1.0
        cells = []
        for j, count in enumerate(counts):
            share = count / total
            colour = "46,139,87" if j < len(classes) and classes[j] == name else "192,57,43"
            style = f' style="background:rgba({colour},{share * 0.8:.2f})"' if count else ""
            cells.append(f'<td class="n"{style} title="{esc(f"{share:.1%} of {name}")}">{count:,.0f}</td>')
        rows.append(f"<tr><th>{esc(name)}</th>{''.join(cells)}</tr>")
    return (
        "<h3>Confusion matrix</h3><p>Rows: the label; columns: the class with the highest score "
        "(TFMA's, over the evaluated rows).</p>"
        f'<table class="confusion"><tr><th>actual \\ predicted</th>{head}</tr>{"".join(rows)}</table>'
    )


def _residuals(ev) -> str:
    pairs = ev.pairs or {}
    labels, predictions = pairs.get("label") or [], pairs.get("prediction") or []
    if not labels:
        return ""
    points = list(zip(labels, predictions, strict=False))
    residuals = [p - y for y, p in points]
    scatter = charts.scatter(points, title="prediction vs. label", x_label="label", y_label="prediction", diagonal=True)
    histogram = charts.histogram(charts.equal_bins(residuals), title="residuals", width=320, height=140)
    return (
        f"<h3>Predictions</h3><p>{len(points):,} evaluated rows: prediction against label (the dashed line is a "
        "perfect prediction), and the residuals (prediction - label).</p>"
        f'<div class="grid"><div class="card"><h3>prediction vs. label</h3>{scatter}</div>'
        f'<div class="card"><h3>residuals (prediction - label)</h3>{histogram}</div></div>'
    )


def _serving(page: RunPage) -> str:
    check = page.serving_check
    if check is None:
        return _note(page.notes.get("serving") or "no serving check")
    from tfxflow.components.serving.serving_check import figures, summary_line  # light: no TFX at import of this module

    passed = bool(check.get("blessed"))
    body = f"<p>{_badge('passed' if passed else 'failed', 'yes' if passed else 'no')} {esc(summary_line(check))}</p>"
    if check.get("reasons"):
        body += "<ul>" + "".join(f'<li class="over">{esc(r)}</li>' for r in check["reasons"]) + "</ul>"
    body += _table(("figure", "value"), [(k, fmt(v)) for k, v in sorted(figures(check).items())], numeric=(1,))
    throughput = check.get("throughput") or []
    if throughput:
        body += charts.hbars(
            [(f"batch {t['batch']}", float(t["examples_per_s"]), "ran") for t in throughput],
            title="rows per second by batch size",
            unit=" rows/s",
            width=560,
            label_width=90,
        )
    return body + _edge(page)


def _edge(page: RunPage) -> str:
    """The TFLite models of a --tflite run: each variant's size, agreement and latency, or why there are none."""
    if page.edge is None:
        return ""
    # lazy: it imports TensorFlow and TFX
    from tfxflow.components.edge import edge

    body = f"<h3>TensorFlow Lite</h3><p>{esc(edge.summary_line(page.edge))}</p>"
    rows = [
        (
            entry["file"],
            "yes" if entry.get("published") else "no",
            f"{entry['bytes'] / 1024:,.0f} KiB",
            fmt(max(entry.get("max_diff", {}).values(), default=float("nan"))),
            fmt(entry.get("eval", {}).get("value", float("nan"))),
            fmt(entry.get("p50_ms", float("nan"))),
            fmt(entry.get("load_ms", float("nan"))),
            entry.get("reason", ""),
        )
        for _, entry in sorted(page.edge.get("variants", {}).items())
    ]
    if rows:
        scored = page.edge.get("eval", {})
        metric = (
            f"{scored['metric']} on {scored['rows']:,} eval rows (SavedModel {fmt(scored['saved_model'])})"
            if "metric" in scored
            else "eval metric"
        )
        headers = ("file", "published", "size", "max difference", metric, "p50 ms at batch 1", "load ms", "why not")
        body += _table(headers, rows, numeric=(2, 3, 4, 5, 6))
    return body


def _lineage(page: RunPage) -> str:
    rows = [(k, Markup(f"<code>{esc(v)}</code>")) for k, v in page.lineage.items()]
    if page.mlflow_run_id:
        rows.append(("MLflow run", Markup(f"<code>{esc(page.mlflow_run_id)}</code>")))
    return _table(("what", "ML Metadata id or URI"), rows) if rows else _note("nothing recorded")


RENDERERS = {
    "run": _run,
    "timing": _timing,
    "data": _data,
    "gate": _gate,
    "drift": _drift,
    "tuning": _tuning,
    "training": _training,
    "evaluation": _evaluation,
    "serving": _serving,
    "lineage": _lineage,
}


def render(page: RunPage) -> str:
    """The page as one HTML document."""
    nav = "".join(f'<a href="#{a}">{esc(h)}</a>' for a, h in SECTIONS)
    sections = "".join(_section(a, h, RENDERERS[a](page)) for a, h in SECTIONS)
    title = f"{page.pipeline_name} run {page.run_id}: {page.status}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body>{_header(page)}<nav>{nav}</nav><main>{sections}</main>"
        f'<footer class="meta" style="padding:12px 32px">tfxflow {esc(page.versions.get("tfxflow", ""))}'
        "</footer></body></html>\n"
    )


def write(page: RunPage, path: str) -> str:
    """Writes the page to `path` (folders created) through a temporary file in the same folder, so a reader
    never sees half a page; returns the path."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(render(page))
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the page from a web server or another user
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
