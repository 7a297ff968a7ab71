"""`make bench-drift` runs end to end on a few samples: JSON with the commit, the docs' block rendered from it, and an
exit status that fails on a false refusal."""

import json

import pytest

from benchmarks import drift_calibration, provenance, readme_tables

pytestmark = pytest.mark.integration


def test_prints_both_tables_and_writes_the_samples(tmp_path, capsys):
    out = tmp_path / "drift.json"
    status = drift_calibration.main(
        [
            "--sizes",
            "500",
            "--shift-sizes",
            "2000",
            "--resamples",
            "2",
            "--shift-samples",
            "1",
            "--workers",
            "1",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert "| 500 | without replacement | 2 | 0/2 | 2/2 |" in printed  # TFDV's comparators refuse both
    assert "| fare scaled | x1.25 * | 1/1 | fare |" in printed
    assert status == 0  # nothing the same-distribution draws refused, every marked shift caught
    result = json.loads(out.read_text())
    assert len(result["same_distribution"]) == 4 and not any(r["refused"] for r in result["same_distribution"])
    assert len(result["shifted"]) == len(drift_calibration.SHIFTS)
    assert result["commit"] == provenance.commit() and result["catch_from_rows"] == 2000
    assert readme_tables.drift(result) in printed  # what it prints is the docs' block of its file
