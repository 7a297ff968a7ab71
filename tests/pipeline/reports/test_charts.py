"""The SVG charts: well-formed XML, escaped text, values reflected in the geometry, same input same bytes."""

import xml.etree.ElementTree as ET

import pytest

from tfxflow.pipeline.reports import charts

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    return root


def rects(root: ET.Element, css_class: str = ""):
    return [r for r in root.iter(SVG + "rect") if not css_class or css_class in r.get("class", "").split()]


def texts(root: ET.Element):
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def test_hbars_widths_are_proportional_to_values_and_state_picks_the_colour():
    root = parse(
        charts.hbars(
            [("Transform", 30.0, "ran"), ("Trainer", 15.0, "cached"), ("DataGate", 0.0, "failed")], title="time"
        )
    )
    bars = rects(root, "bar")
    widths = [float(b.get("width")) for b in bars]
    assert widths[0] == pytest.approx(2 * widths[1]) and widths[2] == 0
    assert [b.get("fill") for b in bars] == [
        charts.STATE_COLOURS["ran"],
        charts.STATE_COLOURS["cached"],
        charts.STATE_COLOURS["failed"],
    ]
    assert "Transform" in texts(root) and "15 s cached" not in texts(root)
    assert root.find(SVG + "title").text == "time"


def test_text_is_escaped_in_labels_titles_and_hover_text():
    nasty = "<script>alert(\"x\")</script> & 'q'"
    for svg in (
        charts.hbars([(nasty, 1.0, "ran")], title=nasty),
        charts.top_values([(nasty, 3.0)], title=nasty),
        charts.paired_bars([nasty], [1.0], [2.0], title=nasty),
        charts.line_chart({nasty: [1.0, 2.0]}, title=nasty),
        charts.histogram([(0.0, 1.0, 2.0)], title=nasty),
        charts.threshold_gauge(0.2, 0.1, title=nasty),
    ):
        assert "<script" not in svg
        root = parse(svg)  # still well-formed
        assert root.get("aria-label") == nasty


def test_histogram_bar_heights_follow_the_counts():
    svg = charts.histogram([(0.0, 1.0, 10.0), (1.0, 2.0, 5.0), (2.0, 3.0, 0.0)], title="fare", height=64)
    root = parse(svg)
    path = next(root.iter(SVG + "path"))
    heights = [float(seg.split("v")[1].split("h")[0]) for seg in path.get("d").split("M")[1:]]
    assert heights[0] == pytest.approx(2 * heights[1]) and heights[2] == 0
    assert "rows per bin: 10, 5, 0" in path.find(SVG + "title").text
    assert texts(root) == ["0", "3"]  # the range


def test_paired_bars_compare_shares_not_counts():
    root = parse(charts.paired_bars(["a", "b"], [10.0, 30.0], [200.0, 200.0], title="drift"))
    base = [float(r.get("height")) for r in rects(root, "baseline")]
    cur = [float(r.get("height")) for r in rects(root, "current")]
    # shares: baseline 25% / 75%, current 50% / 50%; the largest share (75%) fills the plot
    assert base[1] == pytest.approx(3 * base[0], rel=0.01)
    assert cur[0] == pytest.approx(cur[1]) and cur[0] == pytest.approx(base[1] * 50 / 75, rel=0.01)
    assert {"baseline", "current"} <= set(texts(root))


def test_threshold_gauge_marks_the_threshold_and_colours_a_value_over_it():
    over = parse(charts.threshold_gauge(0.3, 0.1, title="js", width=300))
    under = parse(charts.threshold_gauge(0.05, 0.1, title="js", width=300))
    assert rects(over)[1].get("fill") == charts.OVER and rects(under)[1].get("fill") == charts.OK
    marker = next(under.iter(SVG + "line"))
    assert float(marker.get("x1")) == pytest.approx(150)  # the threshold sits mid-scale
    assert float(rects(under)[1].get("width")) == pytest.approx(75)


def test_line_chart_draws_one_line_per_series_with_a_legend():
    root = parse(
        charts.line_chart(
            {"train": [0.9, 0.5, 0.3], "validation": [0.8, 0.6, float("nan")]}, title="loss", dashed=("validation",)
        )
    )
    lines = list(root.iter(SVG + "polyline"))
    assert len(lines) == 2
    assert len(lines[0].get("points").split()) == 3 and len(lines[1].get("points").split()) == 2  # NaN skipped
    assert lines[1].get("stroke-dasharray") and not lines[0].get("stroke-dasharray")
    ys = [float(p.split(",")[1]) for p in lines[0].get("points").split()]
    assert ys[0] < ys[1] < ys[2]  # falling loss: larger y further down
    legend = texts(root)
    assert "train (0.3)" in legend and "validation (0.6)" in legend


def test_output_is_deterministic_across_processes_and_numbers_are_stable():
    from tests import helpers

    first, second = helpers.outputs_under_hash_seeds(
        "import sys\n"
        "from tfxflow.pipeline.reports import charts\n"
        "sys.stdout.write(charts.line_chart({'b': [1 / 3, 2 / 3], 'a': [0.5, 0.1]}, title='t')"
        " + charts.histogram([(0, 1, 1e-9)], title='h')"
        " + charts.top_values([('x', 3), ('y', 3), ('z', 1)], title='v'))"
    )
    assert first == second and first.count("<svg") == 3
    assert charts.num(-0.0001) == "0" and charts.num(1.005) in ("1", "1.01") and charts.num(12.5) == "12.5"
    assert charts.fmt(12345.6) == "12,346" and charts.fmt(0.0123) == "0.0123"


def test_empty_inputs_give_valid_charts():
    for svg in (
        charts.hbars([], title="none"),
        charts.histogram([], title="none"),
        charts.paired_bars([], [], [], title="none"),
        charts.line_chart({}, title="none"),
        charts.top_values([], title="none"),
    ):
        parse(svg)
