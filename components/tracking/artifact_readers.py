"""What the pipeline's artifacts say, read for MLflow and for the run's reports (pipeline/reports): rows per split
(StatisticsGen), the candidate's and the baseline's metrics and why a model was not blessed (TFMA's Evaluator),
the Tuner's trials, and EdgeExport's published variants.

Imports TFMA, TFDV and the components' modules only when a reader is called.
"""

import os
from typing import Any, Dict, List, Optional, Tuple

from tfx.dsl.io import fileio

from tfxflow.components import names
from tfxflow.components.tracking.mlflow_runs import ERROR_TAG, now_ms


def split_rows(statistics_uri: str) -> Dict[str, int]:
    """Rows per split, from StatisticsGen's output."""
    import tensorflow_data_validation as tfdv

    rows = {}
    for entry in sorted(fileio.listdir(statistics_uri)):
        name = entry.rstrip("/")
        path = os.path.join(statistics_uri, name, "FeatureStats.pb")
        if names.split_of(name) and fileio.exists(path):
            rows[names.split_of(name)] = int(tfdv.load_stats_binary(path).datasets[0].num_examples)
    return rows


def metric_label(key, class_names=()) -> str:
    """A TFMA metric key's name; a per-class metric (sub-key `class_id`) as `f1.<class name>`."""
    # lazy: it imports Beam and TFMA
    from tfxflow.components.evaluation.eval_metrics import class_metric_name

    class_id = key.sub_key.class_id.value if key.HasField("sub_key") and key.sub_key.HasField("class_id") else None
    return class_metric_name(key.name, class_id, class_names)


def evaluation_metrics(evaluation_uri: str, class_names=()) -> Dict[str, Dict[str, float]]:
    """{slice name: {metric: value}} of the candidate model; the overall slice is "overall". `class_names`: a
    multi-class model's classes in index order, which name its per-class metrics."""
    import tensorflow_model_analysis as tfma

    result: Dict[str, Dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        keys = metrics.slice_key.single_slice_keys
        name = (
            "overall"
            if not keys
            else ",".join(
                f"{k.column}={k.bytes_value.decode() if k.HasField('bytes_value') else k.int64_value or k.float_value}"
                for k in keys
            )
        )
        for kv in metrics.metric_keys_and_values:
            if kv.key.is_diff or kv.key.model_name == "baseline" or not kv.value.HasField("double_value"):
                continue
            result.setdefault(name, {})[metric_label(kv.key, class_names)] = float(kv.value.double_value.value)
    return result


def confusion_matrix(evaluation_uri: str, model_name: str = ""):
    """A multi-class model's confusion matrix of the overall slice (TFMA's, at the top-scoring class) as
    ({(actual class id, predicted class id): rows}), or None; predicted -1: no class scored above 0."""
    import tensorflow_model_analysis as tfma

    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for kv in metrics.metric_keys_and_values:
            if kv.key.model_name != model_name or not kv.value.HasField("multi_class_confusion_matrix_at_thresholds"):
                continue
            matrix = kv.value.multi_class_confusion_matrix_at_thresholds.matrices[0]
            return {(e.actual_class_id, e.predicted_class_id): float(e.num_weighted_examples) for e in matrix.entries}
    return None


def overall_metrics(evaluation_uri: str):
    """(candidate, baseline) metrics of the overall slice, from the Evaluator's output (per-class metrics are
    named `f1.class_<id>` here: `evaluation_metrics` names them by class)."""
    import tensorflow_model_analysis as tfma

    candidate: Dict[str, float] = {}
    baseline: Dict[str, float] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for kv in metrics.metric_keys_and_values:
            if kv.key.is_diff or not kv.value.HasField("double_value"):
                continue
            target = baseline if kv.key.model_name == "baseline" else candidate
            target[metric_label(kv.key)] = float(kv.value.double_value.value)
    return candidate, baseline


def blessing_failures(evaluation_uri: str, overall=None) -> List[str]:
    """Each threshold the candidate failed, in words with the values: why the Evaluator did not bless it.
    `overall`: `overall_metrics(evaluation_uri)` when the caller has it already."""
    import tensorflow_model_analysis as tfma

    if not fileio.exists(os.path.join(evaluation_uri, "validations.tfrecord")):
        return []
    metrics, baseline = overall or overall_metrics(evaluation_uri)
    result = tfma.load_validation_result(evaluation_uri)
    reasons = []
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            name = failure.metric_key.name
            value = failure.metric_value.double_value.value
            threshold = failure.metric_threshold
            if failure.metric_key.is_diff and threshold.HasField("change_threshold"):
                allowed = threshold.change_threshold.absolute.value
                compared = (
                    f"{metrics[name]:.4f} vs. {baseline[name]:.4f} for the last blessed model"
                    if name in metrics and name in baseline
                    else "vs. the last blessed model"
                )
                # Higher is better: the allowed change is -max_regression; lower is better (rmse): +max_regression.
                reasons.append(
                    f"{name} {compared}: a change of {value:+.4f}, beyond the allowed {allowed:+.4f} (--max-regression)"
                )
            elif threshold.value_threshold.HasField("lower_bound"):
                reasons.append(
                    f"{name} {value:.4f} is below the minimum {threshold.value_threshold.lower_bound.value:.4f} "
                    "(--blessing-threshold)"
                )
            elif threshold.value_threshold.HasField("upper_bound"):
                reasons.append(
                    f"{name} {value:.4f} is above the maximum {threshold.value_threshold.upper_bound.value:.4f} "
                    "(--blessing-threshold)"
                )
            else:
                reasons.append(f"{name} {value:.4f} failed its threshold")
    if not reasons and result.missing_thresholds:
        reasons.append("a threshold could not be computed (missing metric or baseline)")
    return reasons


# A trial's state as an MLflow run status; the tag says pruned apart from killed.
TRIAL_STATUS = {"complete": "FINISHED", "pruned": "KILLED", "failed": "FAILED"}
OBJECTIVE_PREFIX = "objective."  # a trial's metric: objective.<the validation metric that judged it>


def tuning_records(results_uri: str):
    """What the pipeline run records of its Tuner (metrics, params and tags of its own) and a `log_trial`
    operation per trial: a run nested under it with the trial's values, per-epoch metrics, state and time."""
    # lazy: it imports ML Metadata
    from tfxflow.components.tuning import tuner as tuner_lib

    results = tuner_lib.read_results(results_uri) or {"trials": []}
    now = now_ms()
    counts = {state: sum(t["state"] == state for t in results["trials"]) for state in TRIAL_STATUS}
    metrics = [(f"tuning.trials.{state}", float(n), now, 0) for state, n in counts.items()]
    metrics.append(("tuning.seconds", float(results.get("seconds", 0.0)), now, 0))
    best = results.get("best")
    params = [
        ("tuning.objective", tuner_lib.monitor(results) if "objective" in results else ""),
        ("tuning.study", results.get("study", "")),
    ]
    if best:
        metrics.append(("tuning.best_value", float(best["value"]), now, 0))
        params += [(f"tuning.best.{k}", str(v)) for k, v in sorted(best["values"].items())]
        params.append(("tuning.best_trial", str(best["number"])))
    tags = {
        "tfxflow.tuning_uri": results_uri,
        "tfxflow.tuning": tuner_lib.summary(results) if results["trials"] else "",
    }
    trial_ops = []
    for trial in results["trials"]:
        at = trial.get("end_time_ms") or now
        trial_metrics = [
            (f"val.{k[4:]}" if k.startswith("val_") else f"train.{k}", float(v), at, epoch)
            for k, values in sorted(trial.get("history", {}).items())
            for epoch, v in enumerate(values, start=1)
        ]
        if trial.get("value") is not None:
            trial_metrics.append((f"{OBJECTIVE_PREFIX}{results['objective']}", float(trial["value"]), at, 0))
        if trial.get("seconds") is not None:
            trial_metrics.append(("seconds", float(trial["seconds"]), at, 0))
        trial_ops.append(
            {
                "op": "log_trial",
                "number": trial["number"],
                "status": TRIAL_STATUS[trial["state"]],
                "tags": {
                    "tfxflow.trial_state": trial["state"],
                    "tfxflow.tuning_uri": results_uri,
                    **({ERROR_TAG: trial["error"][:5000]} if trial.get("error") else {}),
                    **(
                        {"tfxflow.pruned_at_epoch": str(trial["pruned_at_epoch"])} if "pruned_at_epoch" in trial else {}
                    ),
                },
                "params": [(k, str(v)) for k, v in sorted(trial["values"].items())],
                "metrics": trial_metrics,
                "start_time": trial.get("start_time_ms"),
                "end_time": trial.get("end_time_ms"),
            }
        )
    return metrics, params, tags, trial_ops


def edge_figures(result: Optional[Dict[str, Any]]) -> Dict[str, float]:
    """MLflow metrics of EdgeExport's edge.json: per published variant its size, largest difference from the
    SavedModel, p50 latency at batch 1, load time and its metric on the eval rows (`edge.<variant>.<metric>`)."""
    figures: Dict[str, float] = {}
    for variant in (result or {}).get("published", []):
        entry = result["variants"][variant]
        figures[f"edge.{variant}.kib"] = round(entry["bytes"] / 1024, 1)
        figures[f"edge.{variant}.max_diff"] = max(entry.get("max_diff", {}).values(), default=0.0)
        for key in ("p50_ms", "load_ms"):
            if entry.get(key) is not None:
                figures[f"edge.{variant}.{key}"] = entry[key]
        if "eval" in entry:
            figures[f"edge.{variant}.{entry['eval']['metric']}"] = entry["eval"]["value"]
    return figures


def edge_records(edge_model) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """EdgeExport's edge.json, and the published files and edge.json as local paths to log (on an object store,
    none: MLflow logs local files; the files are in the pushed version)."""
    if edge_model is None:
        return None, []
    # lazy: it imports ML Metadata
    from tfxflow.components.edge import edge

    result = edge.read_result(edge_model.uri)
    if result is None or not os.path.isdir(edge_model.uri):
        return result, []
    # edge.json also where nothing was published: it says why.
    logged = edge.published_files(result) or [edge.RESULT_FILE]
    return result, [os.path.join(edge_model.uri, name) for name in logged]
