"""The drift and skew measure: common bins, the distances, the test, and its verdicts on resampled and shifted
taxi data (a few seeded samples of what `make bench-drift` runs by the hundred)."""

import numpy as np
import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from scipy import stats
from tfx.utils import io_utils

from benchmarks import drift_calibration as calibration
from tests import helpers
from tfxflow.components.validation import drift


def test_jensen_shannon_in_bits():
    assert drift.jensen_shannon(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == 0
    assert drift.jensen_shannon(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    # m = (0.75, 0.25): 1/2 (0.5 log2(0.5/0.75) + 0.5 log2(0.5/0.25)) + 1/2 log2(1/0.75)
    assert drift.jensen_shannon(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == pytest.approx(0.31128, abs=1e-5)


def test_chi_squared_p_is_pearsons_test_of_homogeneity():
    baseline, current = np.array([120.0, 80.0, 0.0]), np.array([40.0, 60.0, 0.0])
    expected = stats.chi2_contingency(np.array([[120, 80], [40, 60]]), correction=False)[1]
    assert drift.chi_squared_p(baseline, current) == pytest.approx(expected)
    assert drift.chi_squared_p(np.array([5.0, 0.0]), np.array([7.0, 0.0])) == 1.0  # one bin: nothing to test


def test_a_small_shift_in_huge_data_is_significant_but_not_refused():
    """Both conditions are needed: 50.4/49.6% in 500,000 rows vs. 50/50% in 500,000 is no sampling noise
    (p = 6.3e-5 by scipy's own test, under the check's 1e-4), yet the distance (0.004) is far under the
    threshold (0.05): not refused."""
    binned = drift.Binned(
        ("Cash", "Card"), np.array([250_000.0, 250_000.0]), np.array([252_000.0, 248_000.0]), "values"
    )
    found = drift.compare_feature("payment_type", binned, "infinity_norm", 0.05)
    reference = stats.chi2_contingency(np.array([[250_000, 250_000], [252_000, 248_000]]), correction=False)[1]
    assert found.p_value == pytest.approx(reference) and found.p_value < found.alpha == drift.FALSE_REFUSAL_RATE
    assert found.value == pytest.approx(0.004)
    assert found.significant and not found.over_threshold and not found.shifted
    # And the other way round: far over the threshold on a handful of rows is noise, not refused either.
    few = drift.Binned(("Cash", "Card"), np.array([6.0, 4.0]), np.array([3.0, 7.0]), "values")
    noisy = drift.compare_feature("payment_type", few, "infinity_norm", 0.05)
    assert noisy.over_threshold and not noisy.significant and not noisy.shifted
    assert "within sampling noise at these sizes" in drift.summary([noisy], "drift")
    assert "within sampling noise" not in drift.summary([found], "drift")


def test_bins_too_sparse_for_the_test_are_pooled():
    # 2 of 10,002 baseline rows lack the feature, and 2 of 400 new ones (a row drawn twice). Unpooled, the
    # chi-squared approximation fails on the bin expected to hold 0.16 rows and reads p = 1e-6.
    baseline, current = np.array([5000.0, 5000.0, 2.0]), np.array([199.0, 199.0, 2.0])
    unpooled = stats.chi2_contingency(np.vstack([baseline, current]), correction=False)[1]
    assert unpooled < 1e-5
    assert drift.chi_squared_p(baseline, current) > 0.1


def test_a_point_mass_stays_on_one_side_of_an_edge():
    # TFDV spreads a value's mass over several quantile buckets: 40% of the values are 0, 30% are 1, 30% are 2.
    buckets = np.array([[0, 0, 2], [0, 0, 2], [0, 1, 1.5], [1, 1, 1.5], [1, 2, 1.5], [2, 2, 1.5]], dtype=float)
    assert drift.cdf(buckets, 0) == pytest.approx(0.4)
    assert drift.cdf(buckets, 1) == pytest.approx(0.7)
    assert drift.cdf(buckets, 2) == pytest.approx(1.0)
    assert [drift.quantile(buckets, q) for q in (0.1, 0.4, 0.5, 0.7, 0.9)] == [0, 0, 1, 1, 2]


def _stats(frame: pd.DataFrame):
    return tfdv.generate_statistics_from_dataframe(frame, drift.stats_options())


def _features(frame):
    return drift.feature_statistics(_stats(frame))[1]


def test_numeric_bins_are_the_baselines_deciles_read_to_within_one_percent():
    rng = np.random.default_rng(3)
    baseline = pd.DataFrame({"x": rng.lognormal(2.0, 1.0, 20_000)})  # a long tail, like trip_miles
    current = pd.DataFrame({"x": rng.lognormal(2.2, 1.1, 3_000)})
    binned = drift.numeric_bins(_features(baseline)["x"], _features(current)["x"])
    assert len(binned.labels) == 10 and binned.binning == "the baseline's deciles"
    np.testing.assert_allclose(binned.baseline / 20_000, 0.1, atol=0.01)
    edges = np.quantile(baseline["x"], np.arange(1, 10) / 10)
    exact = np.bincount(np.searchsorted(edges, current["x"], side="left"), minlength=10) / 3_000
    np.testing.assert_allclose(binned.current / 3_000, exact, atol=0.01)


def test_rare_values_are_pooled_and_missing_rows_get_a_bin():
    baseline = pd.DataFrame({"pay": ["Cash"] * 600 + ["Card"] * 395 + ["Pcard"] * 5})
    current = pd.DataFrame({"pay": ["Cash"] * 500 + ["Card"] * 300 + ["Bitcoin"] * 100 + [None] * 100})
    base_rows, base = drift.feature_statistics(_stats(baseline))
    cur_rows, cur = drift.feature_statistics(_stats(current))
    binned = drift.bin_feature(base["pay"], cur["pay"], base_rows, cur_rows)
    # Pcard holds 0.5% of the rows: pooled; Bitcoin, new, holds 10%: a bin of its own
    assert binned.labels == ("'Bitcoin'", "'Card'", "'Cash'", drift.OTHER, drift.MISSING)
    np.testing.assert_allclose(binned.baseline, [0, 395, 600, 5, 0])
    np.testing.assert_allclose(binned.current, [100, 300, 500, 0, 100])


SCHEMA = io_utils.SchemaReader().read(calibration.SCHEMA_PATH)


@pytest.fixture(scope="module")
def taxi():
    frame = calibration.read_strings(calibration.taxi_csv())
    return frame, calibration.statistics(frame, SCHEMA)


def _refused(taxi, sample: pd.DataFrame, kind: str = "drift"):
    comparisons, _ = drift.compare_statistics(taxi[1], calibration.statistics(sample, SCHEMA), SCHEMA, kind)
    assert len(comparisons) == 13  # every feature the curated schema watches was compared
    return sorted(c.feature for c in comparisons if c.shifted)


@pytest.mark.integration
@pytest.mark.parametrize(
    "rows,replace,seed",
    [
        (500, False, 1),
        (500, True, 2),
        (500, False, 3),
        (1000, True, 4),
        (2000, False, 5),
        (2000, True, 6),
        (15002, True, 7),
    ],
)
def test_a_random_sample_of_the_same_data_is_not_refused(taxi, rows, replace, seed):
    frame, baseline = taxi
    sample = frame.sample(rows, replace=replace, random_state=seed)
    assert _refused(taxi, sample) == []
    # The same sample through TFDV's own comparators, at the thresholds the schema had for them: refused.
    assert calibration.tfdv_refuses(calibration.statistics(sample, SCHEMA), baseline, SCHEMA)


SHIFTS = {(s.kind, s.magnitude): s for s in calibration.SHIFTS}


@pytest.mark.integration
@pytest.mark.parametrize(
    "shift,refused",
    [
        (("fare scaled", "x1.25"), ["fare"]),
        (("trip_miles scaled", "x1.609 (km)"), ["trip_miles"]),
        (("trip start shifted", "+3 h"), ["trip_start_hour"]),
        (("Credit Card -> Cash", "10 points"), ["payment_type"]),
        (("company vanishes", "Dispatch (10.9%)"), ["company"]),
    ],
)
def test_a_shift_a_data_owner_wants_to_hear_about_is_refused_at_2000_rows(taxi, shift, refused):
    frame, _ = taxi
    rng = np.random.default_rng(11)
    population = SHIFTS[shift].population(frame)
    sample = SHIFTS[shift].change(population.iloc[rng.choice(len(population), 2000, replace=False)], rng)
    assert _refused(taxi, sample) == refused


@pytest.mark.integration
def test_skew_is_measured_the_same_way_on_the_skew_comparators(taxi):
    frame, _ = taxi
    serving = frame.sample(2000, random_state=8).drop(columns=["tips"])
    assert _refused(taxi, serving, kind="skew") == []
    serving["payment_type"] = "Credit Card"
    assert _refused(taxi, serving, kind="skew") == ["payment_type"]


def _beam_statistics(batches, options, output: str):
    """TFDV's GenerateStatistics over `batches` in a Beam pipeline, as StatisticsGen runs it, and the largest
    batch its generators were given (TFDV's own `combine_batch_size` metric)."""
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter

    pipeline = beam.Pipeline()
    _ = pipeline | beam.Create(batches) | tfdv.GenerateStatistics(options) | tfdv.WriteStatisticsToTFRecord(output)
    result = pipeline.run()
    result.wait_until_finish()
    sizes = result.metrics().query(MetricsFilter().with_name("combine_batch_size"))["distributions"]
    return tfdv.load_statistics(output), max(d.committed.max for d in sizes)


def test_statistics_are_made_in_batches_of_8192_rows_and_equal_tfdvs_own_to_rounding(taxi, tmp_path):
    from tensorflow_data_validation.statistics import stats_impl

    frame = taxi[0]
    whole = calibration.record_batch(frame, SCHEMA)
    batches = [whole.slice(start, 500) for start in range(0, whole.num_rows, 500)]  # as the reader's batches
    assert drift.stats_options().desired_batch_size == drift.STATS_BATCH_ROWS == 8192
    assert stats_impl._CombinerStatsGeneratorsCombineFn([], 8192)._desired_batch_size == 8192
    ours, largest = _beam_statistics(batches, drift.stats_options(), str(tmp_path / "ours"))
    tfdvs, tfdv_largest = _beam_statistics(batches, drift.stats_options(desired_batch_size=None), str(tmp_path / "t"))
    assert (largest, tfdv_largest) == (8500, 1000)  # 17 reader batches of 500 rows, then their generators run
    ours_features = drift.feature_statistics(ours)[1]
    tfdv_features = drift.feature_statistics(tfdvs)[1]
    assert sorted(ours_features) == sorted(tfdv_features) and len(ours_features) == len(frame.columns)
    for name, feature in tfdv_features.items():
        mine = ours_features[name]
        assert mine.WhichOneof("stats") == feature.WhichOneof("stats")
        if feature.HasField("num_stats"):
            a, b = mine.num_stats, feature.num_stats
            assert (a.common_stats.num_non_missing, a.common_stats.num_missing) == (
                b.common_stats.num_non_missing,
                b.common_stats.num_missing,
            )
            assert (a.min, a.max, a.median) == (b.min, b.max, b.median)
            assert a.mean == pytest.approx(b.mean, rel=1e-12) and a.std_dev == pytest.approx(b.std_dev, rel=1e-9)
            assert list(a.histograms) == list(b.histograms)  # the quantiles the drift bins are read from
        else:
            assert mine.string_stats == feature.string_stats


# --- rows without a value: an empty CSV cell is a present feature with no value ----------------------------


@pytest.mark.integration
def test_empty_cells_are_missing_rows_and_a_change_in_their_share_is_drift(tmp_path):
    """Both samples hold the same 200 taxi rows with a company and a dropoff_census_tract; the baseline adds 800
    rows where both are empty (80% empty), the current sample 300 other such rows (60%). Their values are the
    same, so the only change is the share of empty cells: L-infinity |0.8 - 0.6| = 0.2 for company, and for
    dropoff_census_tract the Jensen-Shannon divergence of (0.2, 0.8) vs. (0.4, 0.6), whatever the values' bins.
    Reading TFDV's `num_non_missing` as rows with a value put the empty rows in the value bins: distance 0."""
    import csv
    import os

    from tfxflow.pipeline.inputs import bundled_taxi_data_root

    with open(os.path.join(bundled_taxi_data_root(), "data.csv"), encoding="utf-8") as f:
        header, *lines = f.readlines()
    rows = list(csv.DictReader([header, *lines]))
    assert len(rows) == len(lines) == 15002  # one record per line
    both = [i for i, r in enumerate(rows) if r["company"] and r["dropoff_census_tract"]]
    neither = [i for i, r in enumerate(rows) if not r["company"] and not r["dropoff_census_tract"]]
    samples = {"baseline": both[:200] + neither[:800], "current": both[:200] + neither[800:1100]}
    statistics = {
        k: helpers.ingested_taxi_statistics(tmp_path / k, header, [lines[i] for i in v]) for k, v in samples.items()
    }
    (base_rows, base), (cur_rows, cur) = (drift.feature_statistics(statistics[k]) for k in samples)
    assert (base_rows, cur_rows) == (1000, 500)
    # The cause: TFDV counts every row present (an empty list), none missing; the values tell the rows apart.
    common = base["company"].string_stats.common_stats
    assert (common.num_non_missing, common.num_missing, common.tot_num_values) == (1000, 0, 200)
    assert drift.rows_with_values(common) == (200, 200)

    watched = [f.name for f in SCHEMA.feature if drift.comparators(f, "drift")]
    assert len(watched) == 13
    for name in watched:  # every watched feature's missing bin holds the rows whose cell is empty in the CSV
        binned = drift.bin_feature(base[name], cur[name], base_rows, cur_rows)
        empty = [sum(1 for i in samples[k] if not rows[i][name]) for k in samples]
        if not any(empty):
            assert drift.MISSING not in binned.labels, name
            continue
        assert binned.labels[-1] == drift.MISSING, name
        for side, picked, count in zip((binned.baseline, binned.current), samples.values(), empty, strict=True):
            assert side[-1] / side.sum() == pytest.approx(count / len(picked), abs=1e-9), name
            assert side[:-1].sum() == pytest.approx(len(picked) - count), name  # value bins: rows with a value
    for name in ("company", "dropoff_census_tract"):
        assert [sum(1 for i in v if not rows[i][name]) for v in samples.values()] == [800, 300]

    comparisons, notes = drift.compare_statistics(statistics["baseline"], statistics["current"], SCHEMA, "drift")
    assert notes == []
    found = {c.feature: c for c in comparisons}
    p, q = np.array([0.2, 0.8]), np.array([0.4, 0.6])  # (with a value, missing) shares
    m = (p + q) / 2
    by_hand = 0.5 * float(np.sum(p * np.log2(p / m))) + 0.5 * float(np.sum(q * np.log2(q / m)))
    assert by_hand == pytest.approx(0.0349, abs=1e-4)  # over the 0.01 threshold
    company, tract = found["company"], found["dropoff_census_tract"]
    assert (company.comparator, tract.comparator) == ("infinity_norm", "jensen_shannon_divergence")
    assert company.value == pytest.approx(0.2, abs=1e-9)
    assert company.largest_change == f"80.0% -> 60.0% of rows in {drift.MISSING}"
    assert tract.value == pytest.approx(by_hand, rel=1e-6)
    assert company.shifted and tract.shifted
    assert (company.baseline_rows, company.current_rows) == (1000, 500)


def _arrow_statistics(columns: dict):
    """TFDV's statistics of lists of values per row (None: the feature absent, []: present with no value)."""
    import pyarrow as pa
    from tensorflow_data_validation.statistics.stats_impl import generate_statistics_in_memory

    batch = pa.RecordBatch.from_arrays(
        [pa.array(v, type=pa.list_(pa.float32())) for v in columns.values()], list(columns)
    )
    return drift.feature_statistics(generate_statistics_in_memory(batch, drift.stats_options()))


def test_rows_with_several_values_split_as_their_values_and_rows_with_none_are_missing():
    # 400 rows hold two values (1 and 2), 250 one (3), 300 an empty list, 50 lack the feature: 1,050 values.
    base_rows, base = _arrow_statistics({"x": [[1.0, 2.0]] * 400 + [[3.0]] * 250 + [[]] * 300 + [None] * 50})
    cur_rows, cur = _arrow_statistics({"x": [[1.0, 2.0]] * 100 + [[3.0]] * 300 + [[]] * 100})
    assert drift.rows_with_values(base["x"].num_stats.common_stats) == (650, 1050)
    assert drift.rows_with_values(cur["x"].num_stats.common_stats) == (400, 500)
    binned = drift.bin_feature(base["x"], cur["x"], base_rows, cur_rows)
    assert binned.labels == ("(-inf, 1]", "(1, 2]", "(2, 3]", "(3, inf)", drift.MISSING)
    # The rows with a value are split as their values fall: 400, 400 and 250 of 1,050 values over 650 rows;
    # the rows with an empty list and those without the feature are missing.
    np.testing.assert_allclose(binned.baseline, [650 * 400 / 1050, 650 * 400 / 1050, 650 * 250 / 1050, 0, 350])
    np.testing.assert_allclose(binned.current, [400 * 100 / 500, 400 * 100 / 500, 400 * 300 / 500, 0, 100])


def test_a_feature_without_a_value_on_one_side_is_compared_as_an_absent_one():
    base_rows, base = _arrow_statistics({"x": [[1.0]] * 90 + [[]] * 10, "empty": [[]] * 100})
    cur_rows, cur = _arrow_statistics({"x": [[]] * 100, "empty": [[]] * 100})
    # TFDV: every row present, no value, no histogram (the numeric bins cannot be made)
    assert drift.numeric_bins(base["x"], cur["x"]) is None
    for binned in (
        drift.bin_feature(base["x"], cur["x"], base_rows, cur_rows),
        drift.bin_feature(base["x"], None, base_rows, cur_rows),  # absent from every current row: the same
    ):
        assert binned.labels == ("(with a value)", drift.MISSING)
        np.testing.assert_allclose([binned.baseline, binned.current], [[90, 10], [0, 100]])
    # No value on either side: every row missing on both, the same distribution (a draft's data against itself
    # compares every feature, tests/pipeline/tools/test_infer_schema.py).
    empty = drift.bin_feature(base["empty"], cur["empty"], base_rows, cur_rows)
    np.testing.assert_allclose([empty.baseline, empty.current], [[0, 100], [0, 100]])
    assert drift.compare_feature("empty", empty, "jensen_shannon_divergence", 0.01).value == 0
    assert drift.bin_feature(None, None, base_rows, cur_rows) is None  # no statistics on either side


def test_statistics_without_value_counts_count_their_present_rows():
    from tensorflow_metadata.proto.v0 import statistics_pb2

    common = statistics_pb2.CommonStatistics(num_non_missing=90, num_missing=10)  # no valency: written by hand
    assert drift.rows_with_values(common) == (90, 90)
