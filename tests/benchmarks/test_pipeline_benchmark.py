"""The pipeline benchmark's line per task: the task's own blessing metric, read from what the run recorded."""

from benchmarks.pipeline_benchmark import TASKS, Measured, task_lines


def _measured(name, wall, metrics):
    return Measured(name, wall, 1200.0, 0, {}, metrics, {}, "")


def test_each_task_is_reported_with_its_blessing_metric():
    results = {
        "ours-cold": _measured("ours-cold", 45.0, {"binary_accuracy": 0.8964, "auc": 0.93}),
        "task-multiclass": _measured("task-multiclass", 47.5, {"accuracy": 0.9686, "macro_f1": 0.32}),
        "task-regression": _measured("task-regression", 44.1, {"r2": 0.8745, "rmse": 3.57}),
    }
    lines = task_lines(results)
    assert [line.split()[0] for line in lines[1:]] == ["binary", "multiclass", "regression"]
    assert lines[1].endswith("binary_accuracy 0.8964") and "45.0 s" in lines[1]
    assert lines[2].endswith("accuracy 0.9686") and "payment_type" in lines[2]
    assert lines[3].endswith("r2 0.8745") and "fare" in lines[3]
    assert [task for task, _ in TASKS] == ["multiclass", "regression"]
    assert len(task_lines({"ours-cold": results["ours-cold"]})) == 2  # tasks skipped: the binary line alone
