"""`tfxflow compare`: pipeline runs side by side from MLflow: the params that differ, the key metrics, the best
marked; as a table, CSV or Markdown, and a PNG plot of one metric across runs."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from typing import Dict, List, Optional, Sequence

KEY_METRICS = (
    "eval.binary_accuracy",
    "eval.auc",
    "eval.precision",
    "eval.recall",
    "val.loss",
    "data.rows.train",
    "data.anomalies",
    "duration.pipeline",
)
VOLATILE_PARAMS = ("data.serving_data",)  # never worth a column on their own


@dataclasses.dataclass
class RunRow:
    run_id: str
    name: str
    status: str
    params: Dict[str, str]
    metrics: Dict[str, float]
    tags: Dict[str, str]


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


def load_runs(mlflow_client, experiment: str, last: int = 5, run_ids: Sequence[str] = ()) -> List[RunRow]:
    """The named runs, else the last `last` runs of `experiment`, oldest first."""
    if run_ids:
        runs = [mlflow_client.get_run(run_id) for run_id in run_ids]
    else:
        found = mlflow_client.get_experiment_by_name(experiment)
        if found is None:
            raise ValueError(f"--experiment {experiment}: no such MLflow experiment")
        runs = mlflow_client.search_runs(
            [found.experiment_id], order_by=["attributes.start_time DESC"], max_results=last
        )[::-1]
    return [
        RunRow(
            r.info.run_id,
            r.info.run_name or "",
            r.info.status,
            dict(r.data.params),
            dict(r.data.metrics),
            dict(r.data.tags),
        )
        for r in runs
    ]


def compare(
    runs: List[RunRow], best_metric: str = "eval.binary_accuracy", metrics: Sequence[str] = KEY_METRICS
) -> Comparison:
    """The params whose values differ between `runs`, the metrics any run has, and the best run by
    `best_metric` (highest, or lowest for losses and durations)."""
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
    return "loss" in metric or metric.startswith("duration.") or metric == "data.anomalies"


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


def plot(comparison: Comparison, metric: str, path: str) -> None:
    """A PNG bar chart of `metric` per run, the best run highlighted."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display
    import matplotlib.pyplot as plt

    runs = [run for run in comparison.runs if metric in run.metrics]
    if not runs:
        raise ValueError(f"--plot: no run has the metric '{metric}'")
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(runs)), 3.5))
    colors = ["tab:orange" if run.run_id == comparison.best_run else "tab:blue" for run in runs]
    ax.bar([run.run_id[:8] for run in runs], [run.metrics[metric] for run in runs], color=colors)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} across runs (best highlighted)")
    ax.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
