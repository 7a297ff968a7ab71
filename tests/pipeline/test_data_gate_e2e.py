"""Bad data stops the run at the gate, with a message naming split, feature and rule; the served model stays."""

import csv
import os

import pytest

from pipeline.local_runner import NAME_WIDTH
from tests import helpers

pytestmark = pytest.mark.e2e

FLAGS = ["--train-steps", "40", "--batch-size", "64", "--eval-every-steps", "20"]


def _corrupt(source_dir, target_dir):
    """The sample with an unknown payment type and negative fares in every 50th row."""
    os.makedirs(target_dir)
    with open(os.path.join(source_dir, "data.csv"), encoding="utf-8") as src, \
            open(os.path.join(target_dir, "data.csv"), "w", newline="", encoding="utf-8") as dst:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(dst, fieldnames=reader.fieldnames)
        writer.writeheader()
        for i, row in enumerate(reader):
            if i % 50 == 0:
                row["payment_type"] = "Bitcoin"
                row["fare"] = "-3.5"
            writer.writerow(row)
    return target_dir


def test_bad_data_stops_at_the_gate_and_leaves_the_served_model(tmp_path):
    good = helpers.write_taxi_sample(str(tmp_path / "good"), rows=1500)
    home = str(tmp_path / "home")
    first = helpers.run_cli("run", "--home", home, "--data-root", good, *FLAGS)
    assert first.returncode == 0, first.stderr[-3000:]
    serving = os.path.join(home, "serving")
    served = helpers.pushed_versions(serving, "taxi")
    assert len(served) == 1
    model_files = sorted(os.listdir(os.path.join(serving, "taxi", served[0])))

    bad = _corrupt(good, str(tmp_path / "bad"))
    result = helpers.run_cli("run", "--home", home, "--data-root", bad, *FLAGS)
    assert result.returncode == 3, result.stderr[-3000:]
    err = result.stderr
    assert "data gate:" in err and "nothing was trained or pushed" in err
    assert "feature 'payment_type': ENUM_TYPE_UNEXPECTED_STRING_VALUES" in err and "Bitcoin" in err
    assert "feature 'fare': FLOAT_TYPE_SMALL_FLOAT" in err
    assert "split 'train'" in err
    assert "Traceback" not in err
    assert f"{'DataGate':<{NAME_WIDTH}} FAILED" in result.stdout
    assert "Transform" not in result.stdout.split("DataGate")[-1]  # nothing after the gate ran
    # The model being served is untouched.
    assert helpers.pushed_versions(serving, "taxi") == served
    assert sorted(os.listdir(os.path.join(serving, "taxi", served[0]))) == model_files

    allowed = helpers.run_cli("run", "--home", home, "--data-root", bad, *FLAGS,
                              "--allow-anomaly", "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
                              "--allow-anomaly", "FLOAT_TYPE_SMALL_FLOAT")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert "data gate:      passed" in allowed.stdout
