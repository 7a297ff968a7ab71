"""Drift and skew on common bins: a distance between two datasets' statistics whose verdict means something.

TFDV's own comparators compare numeric features through equal-width histograms whose edges come from each
dataset's own range, so one long tail moves every edge, and a random sample of the very data behind the
baseline measures a Jensen-Shannon divergence of 0.3-0.7 (tensorflow/data-validation#207). Here both datasets
are put in the same bins first:

- numbers: the baseline's deciles (from the quantile histogram of its TFDV statistics, `QUANTILE_BUCKETS`
  quantiles, so a current dataset's share between two baseline deciles is read to within 1% of its rows);
- categories: every value holding at least `MIN_CATEGORY_SHARE` of the rows on either side, the rarer ones
  pooled as "(other values)";
- "(missing)" as one more bin when either side has rows without a value: the feature absent, or present with
  no value (how ingestion, like TFX's CsvExampleGen, writes an empty CSV cell; see `rows_with_values`).

On the two shares per bin, p (baseline) and q (current), the schema's comparator of the feature chooses the
distance and its threshold: `jensen_shannon_divergence` is JS(p, q) = 1/2 KL(p || m) + 1/2 KL(q || m),
m = (p + q) / 2, in bits (0: same shares, 1: no bin in common); `infinity_norm` is max |p_i - q_i|, the largest
change of one bin's share. Both are effect sizes: they do not grow with the number of rows. A small sample's
shares are noisy, though, so a feature is refused only when its distance is over the threshold AND a
chi-squared test of homogeneity on the same bins (rows per bin on both sides) says a difference this large
is not a sampling accident: p below `FALSE_REFUSAL_RATE` divided by the number of features compared
(Bonferroni), so that data drawn from the baseline's distribution is refused in at most one run in 10,000,
whatever its size. Large data can thus not be refused for a trivial difference, and a few hundred rows not
for noise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

QUANTILE_BUCKETS = 100  # quantiles kept in the statistics of every dataset that is compared
# Rows per batch of TFDV's generators (TFDV's default is 1,000): their fixed cost per batch and feature is spread
# over 8x the rows, the statistics equal to float rounding (tests/components/validation/test_drift.py holds them to
# TFDV's).
STATS_BATCH_ROWS = 8192
NUMERIC_BINS = 10  # the baseline's deciles
MIN_CATEGORY_SHARE = 0.01  # rarer values are pooled, so that 100 small categories do not read as noise
FALSE_REFUSAL_RATE = 1e-4  # per run and check, shared by the features compared
MIN_EXPECTED = 5.0  # rows a bin must be expected to hold on the smaller side for the chi-squared test
MISSING = "(missing)"
OTHER = "(other values)"
MEASURES = {  # schema comparator field -> (name in messages, TFDV anomaly type for --allow-anomaly)
    "jensen_shannon_divergence": ("Jensen-Shannon divergence", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH"),
    "infinity_norm": ("L-infinity distance", "COMPARATOR_L_INFTY_HIGH"),
}
# What `tfxflow infer-schema` drafts (calibrated on the taxi data by `make bench-drift`): JS 0.01 bits is about
# a population stability index of 0.055, below the 0.1 that the PSI's users call a moderate shift.
DEFAULT_COMPARATORS = {"numeric": ("jensen_shannon_divergence", 0.01), "categorical": ("infinity_norm", 0.05)}
HOW = (
    "each feature is put in common bins (the baseline's deciles for numbers, its values for categories); "
    "a feature is refused when the schema's distance between the two shares per bin is over its threshold "
    f"and a chi-squared test on the same bins gives p < {FALSE_REFUSAL_RATE:g} / the number of features "
    "compared, so that sampling noise in a small batch is not taken for a shift"
)


def stats_options(schema=None, **kwargs):
    """TFDV statistics options for every dataset that drift or skew may compare: enough quantiles to put
    another dataset's values in this one's deciles, in batches of STATS_BATCH_ROWS rows."""
    import tensorflow_data_validation as tfdv

    kwargs.setdefault("desired_batch_size", STATS_BATCH_ROWS)
    return tfdv.StatsOptions(schema=schema, num_quantiles_histogram_buckets=QUANTILE_BUCKETS, **kwargs)


@dataclasses.dataclass(frozen=True)
class Binned:
    """Two datasets' rows of one feature, in common bins."""

    labels: Tuple[str, ...]
    baseline: np.ndarray
    current: np.ndarray
    binning: str  # how the bins were made, in words


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One feature's distance between a baseline and a current dataset, with its test."""

    feature: str
    comparator: str  # a key of MEASURES
    value: float
    threshold: float
    p_value: float
    baseline_rows: int
    current_rows: int
    bins: int
    binning: str
    largest_change: str  # the bin whose share moved most: "10.1% -> 19.8% of rows in (9.75, 11.5]"
    alpha: float = FALSE_REFUSAL_RATE  # the p-value below which the difference is not sampling noise

    @property
    def measure(self) -> str:
        return MEASURES[self.comparator][0]

    @property
    def anomaly_type(self) -> str:
        return MEASURES[self.comparator][1]

    @property
    def over_threshold(self) -> bool:
        return self.value > self.threshold

    @property
    def significant(self) -> bool:
        return self.p_value < self.alpha

    @property
    def shifted(self) -> bool:
        return self.over_threshold and self.significant

    def __str__(self) -> str:
        return (
            f"{self.measure} {self.value:.4f} {'>' if self.over_threshold else '<='} threshold "
            f"{self.threshold:g} on {self.bins} bins ({self.binning}); chi-squared p = {_p_text(self.p_value)} "
            f"{'<' if self.significant else '>='} {self.alpha:.2g}; {self.baseline_rows:,} baseline rows vs. "
            f"{self.current_rows:,} new; largest change: {self.largest_change}"
        )


def _p_text(p: float) -> str:
    return "< 1e-300" if p < 1e-300 else f"{p:.2g}"


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """JS divergence of two share vectors, in bits."""
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / m[mask])))

    return max(0.0, (kl(p) + kl(q)) / 2)


def _pool_sparse(table: np.ndarray) -> np.ndarray:
    """The 2 x bins table with the bins expected to hold fewer than MIN_EXPECTED rows of the smaller side pooled
    into one (Cochran's rule): a bin of 2 rows of 11,000 where 2 rows of 400 fell by chance would otherwise
    read as p = 1e-6."""
    smaller = table.sum(axis=1).min() / table.sum()
    sparse = table.sum(axis=0) * smaller < MIN_EXPECTED
    if not sparse.any():
        return table
    table = np.hstack([table[:, ~sparse], table[:, sparse].sum(axis=1, keepdims=True)])
    if table.shape[1] > 1 and table[:, -1].sum() * smaller < MIN_EXPECTED:
        table[:, np.argmin(table[:, :-1].sum(axis=0))] += table[:, -1]
        table = table[:, :-1]
    return table


def chi_squared_p(baseline: np.ndarray, current: np.ndarray) -> float:
    """p-value of Pearson's chi-squared test that two sets of rows per bin come from one distribution; bins
    too sparse for the test are pooled first."""
    from scipy import stats

    table = np.vstack([baseline, current]).astype(float)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2 or min(table.sum(axis=1)) <= 0:
        return 1.0
    table = _pool_sparse(table)
    if table.shape[1] < 2:
        return 1.0
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
    statistic = float(np.sum((table - expected) ** 2 / expected))
    return float(stats.chi2.sf(statistic, table.shape[1] - 1))


# --- reading TFDV statistics -------------------------------------------------------------------------------


def feature_statistics(statistics) -> Tuple[int, Dict[str, object]]:
    """(rows, {feature name: FeatureNameStatistics}) of the first dataset of a DatasetFeatureStatisticsList."""
    dataset = statistics.datasets[0]
    return int(dataset.num_examples), {".".join(f.path.step) if f.path.step else f.name: f for f in dataset.features}


def _common(feature):
    return feature.num_stats.common_stats if feature.HasField("num_stats") else feature.string_stats.common_stats


def rows_with_values(common) -> Tuple[int, int]:
    """(rows with at least one value, values in all) of a feature's TFDV CommonStatistics.

    TFDV's `num_non_missing` counts the rows where the feature is present, and ingestion writes an empty cell
    as TFX's CsvExampleGen does, a present feature with an empty list: a column empty in all but one row has
    `num_non_missing` of every row and `num_missing` 0. Its values are in `tot_num_values`, and its rows
    without one in the number-of-values histogram (quantile buckets holding 0 values per row).
    The run page (pipeline/reports/page.py) counts a feature's rows with this rule too.
    """
    present = int(common.num_non_missing)
    values = int(common.tot_num_values)
    if common.min_num_values >= 1:  # every present row has a value
        return present, values or present
    buckets = common.num_values_histogram.buckets
    if not (buckets or values or common.max_num_values):
        # No value counts at all: not TFDV's statistics of an all-empty column (those carry the histogram),
        # but statistics written without valency; their present rows are all that is known.
        return present, present
    if common.max_num_values <= 1:  # one value at most per row (a CSV cell): rows with one = values
        return values, values
    # Rows of several values, some present with none: an estimate, from TFDV's quantiles of values per row
    # (10 buckets by default: to within a tenth of the present rows).
    empty = sum(b.sample_count for b in buckets if b.high_value <= 0)
    return max(0, present - int(round(empty))), values


def _quantile_buckets(feature) -> Optional[np.ndarray]:
    """(low, high, count) rows of a numeric feature's quantile histogram."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    for histogram in feature.num_stats.histograms:
        if histogram.type == statistics_pb2.Histogram.QUANTILES and histogram.buckets:
            return np.array([(b.low_value, b.high_value, b.sample_count) for b in histogram.buckets], dtype=float)
    return None


def cdf(buckets: np.ndarray, x: float) -> float:
    """Share of values <= x. A bucket holds its values in (low, high]: a point bucket (low == high) is its
    value's mass, a wider one is spread evenly; TFDV's quantile buckets sit between data values."""
    low, high, count = buckets[:, 0], buckets[:, 1], buckets[:, 2]
    width = high - low
    inside = np.where(width > 0, np.clip((x - low) / np.where(width > 0, width, 1), 0, 1), (x >= high) * 1.0)
    return float(np.sum(count * inside) / max(np.sum(count), 1e-300))


def quantile(buckets: np.ndarray, share: float) -> float:
    """The smallest bucket boundary with at least `share` of the values at or below it: a data value, so an
    integer feature's edges are integers and a value's whole mass falls on one side of an edge."""
    cumulative = np.cumsum(buckets[:, 2])
    i = int(np.searchsorted(cumulative, share * cumulative[-1] * (1 - 1e-9), side="left"))
    return float(buckets[min(i, len(buckets) - 1), 1])


def _number(x: float) -> str:
    return f"{x:.4g}"


def numeric_bins(baseline, current) -> Optional[Binned]:
    """Rows of each side with a value between the baseline's deciles; None without quantile histograms.

    A row may hold several values: the bins split the rows with a value as the values fall (each side's share of
    values per bin, times its rows with a value), so a bin's share is over rows with a value, whatever the
    valency, and the chi-squared test counts rows, not the values of one row as independent draws."""
    base, cur = _quantile_buckets(baseline), _quantile_buckets(current)
    if base is None or cur is None:
        return None
    # A value holding more than a tenth of the rows is several deciles at once: each edge counts once.
    edges = sorted({quantile(base, i / NUMERIC_BINS) for i in range(1, NUMERIC_BINS)})
    bounds = ["-inf"] + [_number(e) for e in edges] + ["inf"]
    labels = [f"({a}, {b}]" for a, b in zip(bounds[:-1], bounds[1:-1], strict=False)] + [f"({bounds[-2]}, inf)"]

    def rows(buckets: np.ndarray, non_missing: int) -> np.ndarray:
        cumulative = np.array([0.0] + [cdf(buckets, e) for e in edges] + [1.0])
        return np.diff(cumulative) * non_missing

    return Binned(
        tuple(labels),
        rows(base, _with_values(baseline)),
        rows(cur, _with_values(current)),
        "the baseline's deciles",
    )


def _value_counts(feature) -> Tuple[Dict[str, float], float]:
    """{value: count} listed in a categorical feature's statistics, and the count of values not listed."""
    stats = feature.string_stats
    if stats.rank_histogram.buckets:  # up to 1,000 values; top_values holds 20
        pairs = [(b.label, b.sample_count) for b in stats.rank_histogram.buckets]
    else:
        pairs = [(v.value, v.frequency) for v in stats.top_values]
    listed: Dict[str, float] = {}
    for value, count in pairs:
        listed[value] = listed.get(value, 0.0) + float(count)
    total = float(stats.common_stats.tot_num_values or sum(listed.values()))
    return listed, max(0.0, total - sum(listed.values()))


def categorical_bins(baseline, current) -> Binned:
    """Rows of each side with a value, per value; values under MIN_CATEGORY_SHARE on both sides pooled. Rows with
    several values are split as their values are (as in `numeric_bins`)."""
    sides = []
    for feature in (baseline, current):
        listed, unlisted = _value_counts(feature)
        with_values = _with_values(feature)
        scale = with_values / max(sum(listed.values()) + unlisted, 1e-300)
        sides.append(({k: v * scale for k, v in listed.items()}, unlisted * scale, with_values))
    kept = sorted(
        {
            value
            for listed, _, rows in sides
            for value, count in listed.items()
            if rows and count / rows >= MIN_CATEGORY_SHARE
        }
    )
    labels = [repr(v) for v in kept]
    vectors = []
    for listed, unlisted, _ in sides:
        other = unlisted + sum(count for value, count in listed.items() if value not in kept)
        vectors.append(np.array([listed.get(v, 0.0) for v in kept] + [other]))
    if vectors[0][-1] == vectors[1][-1] == 0:  # every value has a bin of its own
        return Binned(tuple(labels), vectors[0][:-1], vectors[1][:-1], "its values")
    return Binned(tuple(labels + [OTHER]), vectors[0], vectors[1], "its values")


def _with_values(feature) -> int:
    """Rows with at least one value of the feature; 0 for None (the feature absent from every row)."""
    return 0 if feature is None else rows_with_values(_common(feature))[0]


def bin_feature(baseline, current, baseline_rows: int, current_rows: int) -> Optional[Binned]:
    """Both sides of one feature in common bins, "(missing)" included when either side has rows without a value
    (the feature absent, or present with an empty list: an empty CSV cell). `baseline` or `current` may be None:
    the feature is missing from every row of that dataset, as it is when present with no value in any row.
    A feature with statistics but no value on either side is compared too (every row missing on both: distance
    0). None when the two sides cannot be compared (no statistics on either side, or numbers on one side,
    strings on the other)."""
    with_values = (_with_values(baseline), _with_values(current))
    if not with_values[0] or not with_values[1]:
        if baseline is None and current is None:
            return None
        binned = Binned(
            ("(with a value)",),
            np.array([with_values[0]], dtype=float),
            np.array([with_values[1]], dtype=float),
            "with a value or missing",
        )
    elif baseline.WhichOneof("stats") != current.WhichOneof("stats"):
        return None
    elif baseline.WhichOneof("stats") == "num_stats":
        binned = numeric_bins(baseline, current)
    elif baseline.WhichOneof("stats") == "string_stats":
        binned = categorical_bins(baseline, current)
    else:
        return None
    if binned is None:
        return None
    missing = (baseline_rows - with_values[0], current_rows - with_values[1])
    if max(missing) > 0:
        binned = Binned(
            binned.labels + (MISSING,),
            np.append(binned.baseline, max(0, missing[0])),
            np.append(binned.current, max(0, missing[1])),
            binned.binning,
        )
    return binned


def _largest_change(binned: Binned, p: np.ndarray, q: np.ndarray) -> str:
    i = int(np.argmax(np.abs(p - q)))
    return f"{100 * p[i]:.1f}% -> {100 * q[i]:.1f}% of rows in {binned.labels[i]}"


def comparators(feature_schema, kind: str) -> List[Tuple[str, float]]:
    """(comparator, threshold) pairs of a schema feature's `drift_comparator` or `skew_comparator`."""
    comparator = getattr(feature_schema, f"{kind}_comparator")
    return [(name, getattr(comparator, name).threshold) for name in MEASURES if comparator.HasField(name)]


def compare_feature(name: str, binned: Binned, comparator: str, threshold: float) -> Comparison:
    """The distance `comparator` between the two sides of `binned`, with its chi-squared test."""
    p = binned.baseline / max(binned.baseline.sum(), 1e-300)
    q = binned.current / max(binned.current.sum(), 1e-300)
    value = jensen_shannon(p, q) if comparator == "jensen_shannon_divergence" else float(np.max(np.abs(p - q)))
    return Comparison(
        feature=name,
        comparator=comparator,
        value=value,
        threshold=threshold,
        p_value=chi_squared_p(binned.baseline, binned.current),
        baseline_rows=int(round(binned.baseline.sum())),
        current_rows=int(round(binned.current.sum())),
        bins=len(binned.labels),
        binning=binned.binning,
        largest_change=_largest_change(binned, p, q),
    )


def compare_statistics(baseline, current, schema, kind: str) -> Tuple[List[Comparison], List[str]]:
    """Every feature of `schema` with a `<kind>_comparator` (kind: drift or skew), `current` against
    `baseline` (DatasetFeatureStatisticsLists). Returns the comparisons and notes on features not compared."""
    base_rows, base_features = feature_statistics(baseline)
    cur_rows, cur_features = feature_statistics(current)
    found, notes = [], []
    for feature in schema.feature:
        pairs = comparators(feature, kind)
        if not pairs:
            continue
        binned = bin_feature(base_features.get(feature.name), cur_features.get(feature.name), base_rows, cur_rows)
        if binned is None or binned.baseline.sum() <= 0 or binned.current.sum() <= 0:
            notes.append(f"{feature.name}: not compared (no comparable values on both sides)")
            continue
        found += [compare_feature(feature.name, binned, comparator, threshold) for comparator, threshold in pairs]
    return [dataclasses.replace(c, alpha=FALSE_REFUSAL_RATE / len(found)) for c in found], notes


def summary(comparisons: Sequence[Comparison], what: str) -> str:
    """One line on the comparison nearest its threshold (a refused one first), e.g. "drift vs. ...: 13 features
    compared (11,276 vs. 2,225 rows), largest fare Jensen-Shannon divergence 0.0041 (threshold 0.01, p = 0.2)"."""
    if not comparisons:
        return f"{what}: no feature has a comparator in the schema"
    worst = max(comparisons, key=lambda c: (c.shifted, c.value / c.threshold if c.threshold else math.inf))
    features = len({c.feature for c in comparisons})
    noise = ", within sampling noise at these sizes" if worst.over_threshold and not worst.shifted else ""
    return (
        f"{what}: {features} feature{'s' if features != 1 else ''} compared ({worst.baseline_rows:,} vs. "
        f"{worst.current_rows:,} rows), largest {worst.feature} {worst.measure} {worst.value:.4f} "
        f"(threshold {worst.threshold:g}, p = {_p_text(worst.p_value)}{noise})"
    )
