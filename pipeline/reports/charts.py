"""Small SVG charts for the run page: pure Python, no plotting library, no script, same input same bytes.

Every function returns one `<svg>` element as a string, sized in pixels, with a `<title>` for screen readers and
hover text. All text is escaped here, so callers pass raw labels (feature values come from user data).
"""

from __future__ import annotations

import html
import math
from typing import Dict, Mapping, Optional, Sequence, Tuple

# Colours by meaning, shared with the page's CSS (html.py).
STATE_COLOURS = {"ran": "#2f6fb3", "done": "#2f6fb3", "cached": "#9aa5b1", "failed": "#c0392b", "other": "#d08c2f"}
BASELINE = "#9aa5b1"
CURRENT = "#2f6fb3"
OVER = "#c0392b"
OK = "#2e8b57"
SERIES = ("#2f6fb3", "#d08c2f", "#2e8b57", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"
TEXT = "#1f2933"
GRID = "#e4e7eb"


def esc(text: object) -> str:
    """Text safe in SVG/HTML content and attribute values."""
    return html.escape(str(text), quote=True)


def num(x: float) -> str:
    """A coordinate: two decimals at most, no "-0", so the output is stable across platforms."""
    value = round(float(x), 2)
    if value == 0:
        value = 0.0
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def fmt(x: float) -> str:
    """A value for a label: 4 significant digits, thousands separated for large numbers."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x != 0 and abs(x) >= 10_000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _svg(width: float, height: float, title: str, body: Sequence[str], css_class: str = "chart") -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(css_class)}" width="{num(width)}" '
        f'height="{num(height)}" viewBox="0 0 {num(width)} {num(height)}" role="img" aria-label="{esc(title)}" '
        f'font-size="11" fill="{TEXT}" style="{FONT}">'
        f"<title>{esc(title)}</title>" + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: object, size: int = 11, anchor: str = "start", fill: str = TEXT) -> str:
    # The root <svg> sets the usual font size and colour; only departures from them are written.
    attrs = f' font-size="{size}"' if size != 11 else ""
    attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
    attrs += f' fill="{fill}"' if fill != TEXT else ""
    return f'<text x="{num(x)}" y="{num(y)}"{attrs}>{esc(text)}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str = "", css_class: str = "") -> str:
    cls = f' class="{esc(css_class)}"' if css_class else ""
    inner = f"<title>{esc(tip)}</title>" if tip else ""
    return (
        f'<rect{cls} x="{num(x)}" y="{num(y)}" width="{num(max(w, 0.0))}" height="{num(max(h, 0.0))}" '
        f'fill="{fill}">{inner}</rect>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1, dash: str = "") -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" stroke="{stroke}" '
        f'stroke-width="{num(width)}"{dashed}/>'
    )


def _clip(text: str, chars: int) -> str:
    text = str(text)
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "\u2026"


def hbars(
    items: Sequence[Tuple[str, float, str]],
    *,
    title: str,
    unit: str = "",
    width: int = 640,
    bar_height: int = 18,
    label_width: int = 200,
    colours: Optional[Mapping[str, str]] = None,
) -> str:
    """Horizontal bars, one per (label, value, kind); `kind` picks the colour (`colours`, default by state)
    and is named in the bar's hover text. Values are scaled to the largest."""
    palette = dict(STATE_COLOURS, **(colours or {}))
    gap, pad = 6, 2  # pad: room for the glyphs of the first and last labels
    value_width = 90
    size = 11 if bar_height >= 14 else 10
    span = max(width - label_width - value_width, 40)
    top = max((v for _, v, _ in items), default=0.0) or 1.0
    chars = max(int((label_width - 8) / (0.56 * size)), 4)  # a character is about 0.56 em wide
    body = []
    for i, (label, value, kind) in enumerate(items):
        y = pad + i * (bar_height + gap)
        baseline = y + bar_height / 2 + 0.35 * size  # text centred on the bar
        w = span * max(value, 0.0) / top
        body.append(_text(label_width - 6, baseline, _clip(label, chars), size=size, anchor="end"))
        tip = f"{label}: {fmt(value)}{unit}" + (f" ({kind})" if kind else "")
        body.append(_rect(label_width, y, w, bar_height, palette.get(kind, palette["other"]), tip, f"bar {kind}"))
        suffix = f" {kind}" if kind in ("cached", "failed") else ""
        body.append(_text(label_width + w + 4, baseline, f"{fmt(value)}{unit}{suffix}", size=10))
    height = max(len(items) * (bar_height + gap) - gap, bar_height) + 2 * pad
    return _svg(width, height, title, body, "chart hbars")


def histogram(buckets: Sequence[Tuple[float, float, float]], *, title: str, width: int = 220, height: int = 64) -> str:
    """A numeric feature's histogram from (low, high, count) buckets, bars side by side by bucket order
    (TFDV's standard histogram has equal-width buckets), with the range below."""
    axis = 12
    plot_h = height - axis
    top = max((c for _, _, c in buckets), default=0.0) or 1.0
    w = width / max(len(buckets), 1)
    body = [_line(0, plot_h, width, plot_h, GRID)]
    # One path for all bars, its counts in one hover text: a page shows dozens of these, each bar a
    # <rect> with its own <title> would be most of the page's bytes.
    bars = []
    for i, (_, _, count) in enumerate(buckets):
        h = plot_h * count / top
        bars.append(f"M{num(i * w + 0.5)} {num(plot_h)}v{num(-h)}h{num(max(w - 1, 0.5))}v{num(h)}z")
    if buckets:
        counts = ", ".join(fmt(c) for _, _, c in buckets)
        body.append(
            f'<path class="bins" fill="{CURRENT}" d="{"".join(bars)}"><title>rows per bin: {esc(counts)}</title></path>'
        )
    if buckets:
        body.append(_text(0, height - 1, fmt(buckets[0][0]), size=9))
        body.append(_text(width, height - 1, fmt(buckets[-1][1]), size=9, anchor="end"))
    return _svg(width, height, title, body, "chart histogram")


def top_values(items: Sequence[Tuple[str, float]], *, title: str, width: int = 220, limit: int = 5) -> str:
    """A categorical feature's most frequent values as small horizontal bars."""
    shown = list(items)[:limit]
    return hbars(
        [(label, count, "value") for label, count in shown],
        title=title,
        width=width,
        bar_height=10,
        label_width=90,
        colours={"value": CURRENT},
    )


def paired_bars(
    labels: Sequence[str],
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    title: str,
    width: int = 640,
    height: int = 150,
    names: Tuple[str, str] = ("baseline", "current"),
) -> str:
    """Baseline and current shares per bin, side by side (bars scaled to the largest share), with a legend.
    Inputs are row counts or shares; each side is normalised to shares of its own total."""

    def shares(values: Sequence[float]) -> list:
        total = float(sum(values))
        return [float(v) / total if total > 0 else 0.0 for v in values]

    p, q = shares(baseline), shares(current)
    legend_h, axis = 16, 28
    plot_top, plot_h = legend_h + 4, height - legend_h - 4 - axis
    top = max(p + q, default=0.0) or 1.0
    slot = width / max(len(labels), 1)
    bar_w = max(slot * 0.38, 1.0)
    body = [
        _rect(0, 2, 10, 10, BASELINE),
        _text(14, 11, names[0], size=10),
        _rect(90, 2, 10, 10, CURRENT),
        _text(104, 11, names[1], size=10),
        _line(0, plot_top + plot_h, width, plot_top + plot_h, GRID),
    ]
    chars = max(int(slot / 5.5), 3)
    for i, label in enumerate(labels):
        x = i * slot + slot * 0.1
        for j, (share, colour, name) in enumerate(((p[i], BASELINE, names[0]), (q[i], CURRENT, names[1]))):
            h = plot_h * share / top
            tip = f"{label}: {name} {100 * share:.1f}%"
            body.append(_rect(x + j * bar_w, plot_top + plot_h - h, bar_w, h, colour, tip, f"bin {name}"))
        body.append(_text(i * slot + slot / 2, height - 14, _clip(label, chars), size=9, anchor="middle"))
    body.append(_text(width, height - 2, f"share of rows per bin (largest {100 * top:.1f}%)", size=9, anchor="end"))
    return _svg(width, height, title, body, "chart paired")


def threshold_gauge(value: float, threshold: float, *, title: str, width: int = 240, height: int = 22) -> str:
    """A bar for a distance with a marker at its threshold; red when over it. The scale runs to twice the
    threshold (or the value, if larger), so the marker sits mid-way unless the value is far over."""
    scale = max(2 * threshold, value, 1e-12)
    x_marker = width * threshold / scale
    colour = OVER if value > threshold else OK
    body = [
        _rect(0, 5, width, height - 10, GRID),
        _rect(0, 5, width * max(value, 0.0) / scale, height - 10, colour, f"{fmt(value)} (threshold {fmt(threshold)})"),
        threshold_marker(x_marker, 0, height),
    ]
    return _svg(width, height, title, body, "chart gauge")


def threshold_marker(x: float, y_top: float, y_bottom: float, label: str = "") -> str:
    """A dashed vertical line at `x` (an SVG fragment, for use inside a chart), with an optional label."""
    mark = _line(x, y_top, x, y_bottom, TEXT, 1.5, "3,2")
    return mark + (_text(x + 3, y_top + 9, label, size=9) if label else "")


def line_chart(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    width: int = 420,
    height: int = 200,
    x_label: str = "epoch",
    dashed: Sequence[str] = (),
) -> str:
    """Lines over x = 1..n, one per named series (in the order given), a y axis from the data's range and a
    legend below. Series named in `dashed` are drawn dashed (validation beside training). Non-finite
    values are skipped."""
    left, right, top_pad = 44, 10, 8
    names_ = list(series)
    legend_rows = math.ceil(len(names_) / 2)
    bottom = 22 + 14 * legend_rows
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    values = [v for vs in series.values() for v in vs if math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    n = max((len(vs) for vs in series.values()), default=1)

    def xy(i: int, v: float) -> Tuple[float, float]:
        x = left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)
        return x, top_pad + plot_h * (1 - (v - lo) / (hi - lo))

    body = []
    for k in range(3):  # three gridlines with their values
        v = lo + (hi - lo) * k / 2
        _, y = xy(0, v)
        body.append(_line(left, y, left + plot_w, y, GRID))
        body.append(_text(left - 4, y + 3, fmt(v), size=9, anchor="end"))
    body.append(_text(left, top_pad + plot_h + 12, "1", size=9))
    body.append(_text(left + plot_w, top_pad + plot_h + 12, f"{x_label} {n}", size=9, anchor="end"))
    colours: Dict[str, str] = {}
    for s, name in enumerate(names_):
        colour = SERIES[s % len(SERIES)]
        colours[name] = colour
        points = [xy(i, v) for i, v in enumerate(series[name]) if math.isfinite(v)]
        dash = ' stroke-dasharray="5,3"' if name in dashed else ""
        if len(points) > 1:
            path = " ".join(f"{num(x)},{num(y)}" for x, y in points)
            body.append(
                f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}">'
                f"<title>{esc(name)}</title></polyline>"
            )
        for x, y in points:
            body.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="2.5" fill="{colour}"/>')
    for s, name in enumerate(names_):
        lx = left + (s % 2) * (plot_w / 2)
        ly = top_pad + plot_h + 22 + 14 * (s // 2)
        dash = "3,2" if name in dashed else ""
        body.append(_line(lx, ly - 4, lx + 16, ly - 4, colours[name], 2, dash))
        last = next((v for v in reversed(series[name]) if math.isfinite(v)), None)
        body.append(_text(lx + 20, ly, f"{name}" + (f" ({fmt(last)})" if last is not None else ""), size=10))
    return _svg(width, height, title, body, "chart lines")


def scatter(
    points: Sequence[Tuple[float, float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 320,
    height: int = 300,
    diagonal: bool = False,
) -> str:
    """Points (x, y) on common axes from the data's range, with `diagonal` the line y = x (a perfect
    prediction). One path of small squares: a page shows a thousand points in a few kilobytes."""
    left, bottom, top_pad, right = 44, 30, 8, 10
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    finite = [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]
    xs = [x for x, _ in finite] or [0.0, 1.0]
    ys = [y for _, y in finite] or [0.0, 1.0]
    if diagonal:  # the same scale on both axes, so the diagonal is at 45 degrees
        xs = ys = xs + ys
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    x_hi, y_hi = (x_hi if x_hi - x_lo > 1e-12 else x_lo + 1), (y_hi if y_hi - y_lo > 1e-12 else y_lo + 1)

    def xy(x: float, y: float) -> Tuple[float, float]:
        return left + plot_w * (x - x_lo) / (x_hi - x_lo), top_pad + plot_h * (1 - (y - y_lo) / (y_hi - y_lo))

    body = [
        _line(left, top_pad + plot_h, left + plot_w, top_pad + plot_h, GRID),
        _line(left, top_pad, left, top_pad + plot_h, GRID),
    ]
    for k in range(3):
        v = y_lo + (y_hi - y_lo) * k / 2
        _, y = xy(x_lo, v)
        body.append(_text(left - 4, y + 3, fmt(v), size=9, anchor="end"))
    body.append(_text(left, top_pad + plot_h + 12, fmt(x_lo), size=9))
    body.append(_text(left + plot_w, top_pad + plot_h + 12, fmt(x_hi), size=9, anchor="end"))
    body.append(_text(left + plot_w / 2, height - 4, x_label, size=10, anchor="middle"))
    body.append(
        f'<text x="10" y="{num(top_pad + plot_h / 2)}" font-size="10" text-anchor="middle" '
        f'transform="rotate(-90 10 {num(top_pad + plot_h / 2)})">{esc(y_label)}</text>'
    )
    if diagonal:
        (x1, y1), (x2, y2) = xy(x_lo, x_lo), xy(x_hi, x_hi)
        body.append(_line(x1, y1, x2, y2, OVER, 1, "4,3"))
    marks = "".join(f"M{num(px - 1.5)} {num(py - 1.5)}h3v3h-3z" for px, py in (xy(x, y) for x, y in finite))
    if marks:
        body.append(
            f'<path class="points" fill="{CURRENT}" fill-opacity="0.5" d="{marks}"><title>{esc(title)}: '
            f"{len(finite):,} rows</title></path>"
        )
    return _svg(width, height, title, body, "chart scatter")


def equal_bins(values: Sequence[float], bins: int = 20) -> list:
    """(low, high, count) of `bins` equal-width bins over the values' range, for `histogram`."""
    finite = sorted(v for v in values if math.isfinite(v))
    if not finite:
        return []
    lo, hi = finite[0], finite[-1]
    if hi - lo < 1e-12:
        return [(lo, hi, float(len(finite)))]
    step = (hi - lo) / bins
    counts = [0.0] * bins
    for v in finite:
        counts[min(int((v - lo) / step), bins - 1)] += 1
    return [(lo + i * step, lo + (i + 1) * step, c) for i, c in enumerate(counts)]
