"""The analysis-sample benchmark's comparison: paired differences per seed, each side's mean."""

from benchmarks.pipeline_benchmark import Measured
from benchmarks.transform_sample import compare


def _run(name, **metrics):
    return Measured(name, 60.0, 1000.0, 0, {}, metrics, {}, "")


def test_compare_gives_each_sides_mean_and_the_paired_differences():
    runs = {
        "all-1": _run("all-1", binary_accuracy=0.90, auc=0.95),
        "sample-1": _run("sample-1", binary_accuracy=0.89, auc=0.96),
        "all-2": _run("all-2", binary_accuracy=0.88, auc=0.94),
        "sample-2": _run("sample-2", binary_accuracy=0.91, auc=0.94),
    }
    found = compare(runs, [1, 2])
    assert found["binary_accuracy"] == {
        "all_mean": 0.89,
        "sample_mean": 0.9,
        "diff_mean": 0.01,
        "diff_min": -0.01,
        "diff_max": 0.03,
    }
    assert found["auc"]["diff_min"] == 0.0 and found["auc"]["diff_max"] == 0.01
    assert set(found) == {"binary_accuracy", "auc"}  # a metric some run lacks is left out
