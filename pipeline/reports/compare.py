"""`tfxflow compare`: pipeline runs side by side from MLflow: the params that differ, the key metrics, the best
marked; as a table, CSV or Markdown, and a PNG plot: one metric per run beside its baseline, and each run's
validation curve per epoch.

By default only runs that trained a model are compared: a run the data gate refused has no metric to compare,
and a few of them would otherwise fill `--last N`."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from typing import Dict, List, Optional, Sequence, Tuple

from tfxflow.components import names
from tfxflow.components.model import tasks

# Each task's summary metrics (a run shows those it has), then what every run records.
KEY_METRICS = tuple(
    dict.fromkeys(
        f"eval.{name}"
        for task in tasks.TASK_SPECS.values()
        for name in task.summary_metrics
        if name not in ("example_count", "mean_label", "mean_prediction")
    )
) + ("val.loss", "data.rows.train", "data.anomalies", "duration.pipeline")
TASK_TAG = "tfxflow.task"  # components/tracking/tracking.py's MlflowRecord sets it
VOLATILE_PARAMS = ("data.serving_data",)  # never worth a column on their own


@dataclasses.dataclass
class RunRow:
    run_id: str
    name: str
    status: str
    params: Dict[str, str]
    metrics: Dict[str, float]
    tags: Dict[str, str]

    @property
    def trained(self) -> bool:
        """Whether the run trained a model (the Trainer's per-epoch curves or the Evaluator's metrics)."""
        return any(name.startswith(("train.", "val.", "eval.")) for name in self.metrics)


@dataclasses.dataclass
class LoadedRuns:
    """The runs to compare, oldest first, and how many newer runs were left out for not having trained."""

    runs: List[RunRow]
    skipped: int = 0


@dataclasses.dataclass
class Comparison:
    runs: List[RunRow]
    params: List[str]  # those that differ between the runs
    metrics: List[str]
    best_metric: str
    best_run: Optional[str]  # run id

    def header(self) -> List[str]:
        return ["run", "status", "blessed", "pushed"] + self.params + self.metrics + ["best"]

    def rows(self) -> List[List[str]]:
        out = []
        for run in self.runs:
            values = [
                run.run_id[:8],
                run.status,
                run.tags.get("tfxflow.blessed", ""),
                run.tags.get("tfxflow.pushed_version", ""),
            ]
            values += [run.params.get(p, "") for p in self.params]
            values += [_format(run.metrics.get(m)) for m in self.metrics]
            values.append("*" if run.run_id == self.best_run else "")
            out.append(values)
        return out


def _format(value: Optional[float]) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "nan"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.4f}"


def load_runs(
    mlflow_client, experiment: str, last: int = 5, run_ids: Sequence[str] = (), include_all: bool = False
) -> LoadedRuns:
    """The named runs, else the last `last` runs of `experiment` that trained a model (every run with
    `include_all`), oldest first, with the count of runs left out between them."""
    if run_ids:
        return LoadedRuns([_row(mlflow_client.get_run(run_id)) for run_id in run_ids])
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        raise ValueError(f"--experiment {experiment}: no such MLflow experiment")
    kept: List[RunRow] = []
    skipped = 0
    page_token = None
    while len(kept) < last:
        page = mlflow_client.search_runs(
            [found.experiment_id],
            order_by=["attributes.start_time DESC"],
            max_results=max(last, 100) if not include_all else last,
            page_token=page_token,
        )
        for run in page:
            if names.PARENT_RUN_TAG in run.data.tags:  # a tuning trial: part of its pipeline run, not a run of its own
                continue
            row = _row(run)
            if include_all or row.trained:
                kept.append(row)
                if len(kept) == last:
                    break
            else:
                skipped += 1
        page_token = page.token
        if not page_token:
            break
    return LoadedRuns(kept[::-1], skipped)


def load_trials(mlflow_client, run_id: str) -> Tuple[LoadedRuns, str]:
    """The tuning trials of pipeline run `run_id` (its nested runs) in trial order, and the metric that judged
    them (`objective.<metric>`)."""
    parent = mlflow_client.get_run(run_id)
    objective = parent.data.params.get("tuning.objective")
    if not objective:
        raise ValueError(f"--trials {run_id}: this run did not tune (no tuning.objective param); run with --tune")
    found = mlflow_client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`{names.PARENT_RUN_TAG}` = '{run_id}'", max_results=1000
    )
    rows = sorted((_row(run) for run in found), key=lambda row: int(row.tags.get(names.TRIAL_TAG, "0")))
    return LoadedRuns(rows), "objective." + objective.removeprefix("val_")


TRIAL_METRICS = ("seconds", "val.loss")


def _row(run) -> RunRow:
    return RunRow(
        run.info.run_id,
        run.info.run_name or "",
        run.info.status,
        dict(run.data.params),
        dict(run.data.metrics),
        dict(run.data.tags),
    )


def default_metric(runs: Sequence[RunRow]) -> str:
    """The blessing metric of the runs' task (`eval.binary_accuracy`, `eval.accuracy` or `eval.r2`); runs of
    several tasks, or none recorded, take the binary one."""
    found = {run.tags.get(TASK_TAG) for run in runs} - {None}
    task = found.pop() if len(found) == 1 else tasks.DEFAULT_TASK
    return f"eval.{tasks.spec(task).default_metric}"


def compare(runs: List[RunRow], best_metric: Optional[str] = None, metrics: Sequence[str] = KEY_METRICS) -> Comparison:
    """The params whose values differ between `runs`, the metrics any run has, and the best run by
    `best_metric` (default: the runs' task's blessing metric; highest, or lowest for losses, errors and
    durations)."""
    best_metric = best_metric or default_metric(runs)
    names = sorted({p for run in runs for p in run.params} - set(VOLATILE_PARAMS))
    differing = [p for p in names if len({run.params.get(p) for run in runs}) > 1]
    shown = [m for m in dict.fromkeys([best_metric, *metrics]) if any(m in run.metrics for run in runs)]
    scored = [
        (run.metrics[best_metric], run.run_id)
        for run in runs
        if best_metric in run.metrics and not math.isnan(run.metrics[best_metric])
    ]
    best = None
    if scored:
        best = (min(scored) if _lower_is_better(best_metric) else max(scored))[1]
    return Comparison(runs, differing, shown, best_metric, best)


def _lower_is_better(metric: str) -> bool:
    return (
        metric.startswith("duration.") or metric == "data.anomalies" or tasks.lower_is_better(metric.split(".", 1)[-1])
    )


def as_text(comparison: Comparison) -> str:
    table = [comparison.header()] + comparison.rows()
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    if not comparison.params:
        lines.append("(no param differs between these runs)")
    lines.append(
        f"best by {comparison.best_metric}: "
        f"{comparison.best_run[:8] if comparison.best_run else 'none (no run has it)'}"
    )
    return "\n".join(lines)


def as_markdown(comparison: Comparison) -> str:
    header = comparison.header()
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in comparison.rows()]
    return "\n".join(lines) + "\n"


def as_csv(comparison: Comparison) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(comparison.header())
    writer.writerows(comparison.rows())
    return out.getvalue()


def baseline_metric(metric: str) -> Optional[str]:
    """The MLflow metric of the baseline model's value of an eval metric (`eval.auc` -> `baseline.auc`)."""
    return "baseline." + metric[len("eval.") :] if metric.startswith("eval.") else None


def curve_metric(metric: str) -> str:
    """The per-epoch validation series closest to `metric` (`eval.auc` -> `val.auc`; else `val.loss`)."""
    name = metric.split(".", 1)[-1]
    return f"val.{name}" if metric.startswith(("eval.", "val.", "train.")) else "val.loss"


def plot(comparison: Comparison, metric: str, path: str, curves: Optional[Dict[str, List[float]]] = None) -> None:
    """A PNG of two panels: `metric` per run with the baseline model's value beside it (the best run marked),
    and each run's validation curve per epoch overlaid (`curves`: run id -> values by epoch)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display
    import matplotlib.pyplot as plt

    runs = [run for run in comparison.runs if metric in run.metrics]
    if not runs:
        have = sorted({m for run in comparison.runs for m in run.metrics if m.startswith("eval.")})
        raise ValueError(
            f"--plot: none of these {len(comparison.runs)} runs has the metric '{metric}'"
            + (f" (they have: {', '.join(have)})" if have else " (none trained a model)")
        )
    curves = {run_id: values for run_id, values in (curves or {}).items() if values}
    fig, axes = plt.subplots(1, 2 if curves else 1, figsize=(max(6.0, 1.4 * len(runs)) + (6 if curves else 0), 4))
    bars = axes[0] if curves else axes
    labels = [_label(run, comparison.params) for run in runs]
    positions = range(len(runs))
    width = 0.4
    baseline = baseline_metric(metric)
    bars.bar(
        [x - width / 2 for x in positions],
        [run.metrics[metric] for run in runs],
        width,
        label="this run's model",
        color=["tab:orange" if run.run_id == comparison.best_run else "tab:blue" for run in runs],
    )
    if baseline and any(baseline in run.metrics for run in runs):
        bars.bar(
            [x + width / 2 for x in positions],
            [run.metrics.get(baseline, math.nan) for run in runs],
            width,
            label="baseline (the last blessed model)",
            color="tab:gray",
        )
    bars.set_xticks(list(positions), labels, rotation=30, ha="right", fontsize=8)
    values = [v for run in runs for v in (run.metrics[metric], run.metrics.get(baseline or "")) if v is not None]
    low, high = min(values), max(values)
    if low > 0 and high - low < 0.5 * high:  # close values: a zoomed axis shows the differences
        bars.set_ylim(max(0.0, low - (high - low) - 0.02 * high), high + 0.35 * (high - low) + 0.01 * high)
    bars.set_ylabel(metric)
    bars.set_title(f"{metric} per run (best in orange)")
    bars.legend(fontsize=8, loc="upper left", ncols=2)
    if curves:
        series = curve_metric(metric)
        for run in comparison.runs:
            if run.run_id in curves:
                values = curves[run.run_id]
                axes[1].plot(range(1, len(values) + 1), values, marker="o", label=_label(run, comparison.params))
        axes[1].xaxis.get_major_locator().set_params(integer=True)
        axes[1].set_xlabel("epoch")
        axes[1].set_ylabel(series)
        axes[1].set_title(f"{series} per epoch")
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _label(run: RunRow, params: Sequence[str]) -> str:
    """The run's short id and the values of the params that differ (e.g. `1a2b3c4d lr=0.003`)."""
    shown = [f"{p.rsplit('.', 1)[-1]}={run.params[p]}" for p in params[:2] if p in run.params]
    return " ".join([run.run_id[:8], *shown])


def validation_curves(mlflow_client, runs: Sequence[RunRow], metric: str) -> Dict[str, List[float]]:
    """Each run's validation series for `metric` by epoch (MLflow keeps one value per step)."""
    series = curve_metric(metric)
    curves = {}
    for run in runs:
        history = sorted(mlflow_client.get_metric_history(run.run_id, series), key=lambda m: m.step)
        curves[run.run_id] = [m.value for m in history]
    return curves
