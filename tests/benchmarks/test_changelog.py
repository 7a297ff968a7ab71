"""A pipeline benchmark's ratio that moved by more than 10% since the previous results file of its lane is named in
the CHANGELOG: its results file and the new figure."""

import glob
import json
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOVED = 0.10


def ratios(result):
    """{name: figure} of a pipeline results file: ours against Google's at 1x, each scale against the 1x wall."""
    found = {}
    cold = result.get("cold", {})
    if "ours" in cold and "google" in cold:
        found["1x vs Google"] = cold["ours"]["median_s"] / cold["google"]["median_s"]
    series = {e["scale"]: e for e in result.get("scale_series", []) if e.get("returncode") == 0 and "wall_s" in e}
    if 1 in series:
        for scale, entry in series.items():
            if scale > 1:
                found[f"{scale}x"] = entry["wall_s"] / series[1]["wall_s"]
    return found


def _order(path):
    """Results files of a lane in the order they were written: their date, then their number (none is the first)."""
    match = re.match(r"pipeline-(?:current-)?(\d{8})(?:-(.+))?\.json$", os.path.basename(path))
    suffix = match.group(2) or "1"
    return (match.group(1), int(suffix) if suffix.isdigit() else 0, os.path.basename(path))


def lanes():
    """{lane: its pipeline results files, oldest first}."""
    found = {}
    for path in glob.glob(os.path.join(REPO, "benchmarks", "results", "pipeline-*.json")):
        if not re.search(r"pipeline-(?:current-)?\d{8}", path):
            continue
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        found.setdefault(result.get("machine", {}).get("lane", "compat"), []).append((path, result))
    return {lane: sorted(files, key=lambda item: _order(item[0])) for lane, files in found.items()}


def moved(files):
    """[(ratio name, before, after)] of the newest file's ratios that moved by more than MOVED since the latest
    earlier file that has the same ratio."""
    (_, newest), earlier = files[-1], files[:-1]
    found = []
    for name, after in ratios(newest).items():
        before = next((ratios(r)[name] for _, r in reversed(earlier) if name in ratios(r)), None)
        if before is not None and abs(after / before - 1) > MOVED + 1e-9:
            found.append((name, before, after))
    return found


def test_a_ratio_that_moved_by_more_than_ten_percent_is_named_in_the_changelog():
    with open(os.path.join(REPO, "CHANGELOG.md"), encoding="utf-8") as f:
        changelog = f.read()
    checked = 0
    for lane, files in lanes().items():
        newest = os.path.basename(files[-1][0])
        for name, before, after in moved(files):
            assert newest in changelog, f"{lane}: {newest} moved {name} from {before:.2f} to {after:.2f}"
            assert f"{after:.2f}" in changelog, f"{lane}: the CHANGELOG names {newest} but not {name} at {after:.2f}"
            checked += 1
    assert set(lanes()) == {"compat", "current"}


def test_the_ratios_and_the_move_are_read_from_the_files():
    one = {"cold": {"ours": {"median_s": 30.0}, "google": {"median_s": 100.0}}, "scale_series": []}
    series = [{"scale": 1, "wall_s": 30.0, "returncode": 0}, {"scale": 40, "wall_s": 84.0, "returncode": 0}]
    two = {"cold": {"ours": {"median_s": 33.0}, "google": {"median_s": 100.0}}, "scale_series": series}
    assert ratios(two) == {"1x vs Google": 0.33, "40x": 2.8}
    # 1x moved by exactly 10%: not more; 40x has nothing before it.
    assert moved([("a.json", one), ("b.json", two)]) == []
    three = {**two, "cold": {"ours": {"median_s": 37.0}, "google": {"median_s": 100.0}}}
    assert moved([("a.json", one), ("b.json", two), ("c.json", three)]) == [("1x vs Google", 0.33, 0.37)]
    assert (
        _order("/x/pipeline-20261207-1x.json")
        < _order("/x/pipeline-20261207.json")
        < _order("x/pipeline-20261207-2.json")
    )
