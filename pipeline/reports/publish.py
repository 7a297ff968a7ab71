"""Where a run's page and a pushed model's card go: the home folder, and the run's MLflow run.

`<home>/reports/<run id>.html` is written at the end of every run (passed, refused by the gate, or failed), with
`<run id>.json` beside it (the run's settings, code commit, MLflow run and the error that stopped it) so
`tfxflow report` can draw the same page again later. A pushed model's card goes to
`<home>/model_cards/<model>/<version>.md` and `.html`. With tracking, both are logged to the MLflow run
(`report/`, `model_card/`), and the card becomes the description of the registered model version, which
MLflow's UI renders.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from typing import Any, Dict, Optional

from tfxflow.components.tracking import mlflow_runs as tracking_lib
from tfxflow.pipeline.config import EvaluationConfig, RunConfig, SplitConfig, TrainingConfig, resolve_training
from tfxflow.pipeline.reports import html as html_lib
from tfxflow.pipeline.reports import model_card
from tfxflow.pipeline.reports import page as page_lib

REPORTS_DIR = "reports"
MODEL_CARDS_DIR = "model_cards"
REPORT_TAG = "tfxflow.report"

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Published:
    """What was written for one run."""

    report: str
    model_card: Optional[str] = None  # the Markdown card of a pushed model
    logged_to_mlflow: bool = False


def file_safe(run_id: str) -> str:
    """A run id as a file name: ML Metadata's ids are timestamps with ':'."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", run_id)


def report_path(home: str, run_id: str) -> str:
    return os.path.join(home, REPORTS_DIR, f"{file_safe(run_id)}.html")


def context_path(home: str, run_id: str) -> str:
    """What the page of a run shows that ML Metadata does not keep."""
    return os.path.join(home, REPORTS_DIR, f"{file_safe(run_id)}.json")


def run_settings(config) -> Dict[str, Any]:
    """The settings a run's page lists (where they differ from `default_settings`): training, evaluation, split
    and the run's own knobs, as nested plain values."""
    return _as_json(
        {
            "training": dataclasses.asdict(config.training),
            "evaluation": dataclasses.asdict(config.evaluation),
            "split": dataclasses.asdict(config.split),
            "run": {name: getattr(config, name) for name in _RUN_KNOBS},
        }
    )


def default_settings() -> Dict[str, Any]:
    """`run_settings` of a run with every default."""
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    return _as_json(
        {
            "training": dataclasses.asdict(resolve_training(TrainingConfig())),
            "evaluation": dataclasses.asdict(EvaluationConfig()),
            "split": dataclasses.asdict(SplitConfig()),
            "run": {name: defaults[name] for name in _RUN_KNOBS},
        }
    )


# RunConfig's knobs shown on the page besides the training, evaluation and split settings.
_RUN_KNOBS = (
    "beam_mode",
    "beam_workers",
    "enable_cache",
    "allowed_anomaly_types",
    "drift_check",
    "tracking_mode",
    "keep_versions",
)


def _as_json(settings: Dict[str, Any]) -> Dict[str, Any]:
    """Settings as they read back from their JSON file, so a run's and the defaults compare alike."""
    return json.loads(json.dumps(settings, sort_keys=True))


def write_report(
    home: str,
    metadata_path: str,
    pipeline_name: str,
    run_id: Optional[str] = None,
    *,
    settings: Optional[Dict[str, Any]] = None,
    mlflow_run_id: Optional[str] = None,
    code_commit: Optional[str] = None,
    error: Optional[str] = None,
    out: Optional[str] = None,
) -> Optional[page_lib.RunPage]:
    """Collects the page of `run_id` (default: the latest run) and writes it to `out` (default:
    `report_path`); returns the page, or None when the store holds no such run.

    `settings` (`run_settings`), `mlflow_run_id`, `code_commit` and `error` are saved beside the page; for a
    page drawn again later, what is not given is read from there."""
    context = {"settings": settings, "mlflow_run_id": mlflow_run_id, "code_commit": code_commit, "error": error}
    saved = _saved_context(home, run_id)
    context = {key: value if value is not None else saved.get(key) for key, value in context.items()}
    page = page_lib.collect(
        metadata_path,
        pipeline_name,
        run_id,
        settings=context["settings"],
        defaults=default_settings() if context["settings"] else None,
        mlflow_run_id=context["mlflow_run_id"],
        code_commit=context["code_commit"],
        error=context["error"],
    )
    if page is None:
        return None
    path = context_path(home, page.run_id)
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(context, f, indent=1, sort_keys=True)
    html_lib.write(page, out or report_path(home, page.run_id))
    return page


def _saved_context(home: str, run_id: Optional[str]) -> Dict[str, Any]:
    if run_id is None:
        return {}
    path = context_path(home, run_id)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_model_card(home: str, model_name: str, page: page_lib.RunPage) -> str:
    """The card of the model `page`'s run pushed, as `<version>.md` and `<version>.html`; returns the .md path."""
    folder = os.path.join(home, MODEL_CARDS_DIR, model_name)
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, file_safe(str(page.pushed_version)))
    for suffix, text in ((".md", model_card.render_markdown(page)), (".html", model_card.render_html(page))):
        tmp = f"{base}{suffix}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, base + suffix)
    return base + ".md"


def log_to_mlflow(
    tracking, mlflow_run_id: Optional[str], report: str, card: Optional[str], model_name: str, pushed_version
) -> bool:
    """Logs the page (and the card) to the MLflow run of `tracking` (TrackingSettings); the card also describes
    the registered model version. False: the server did not answer and they wait in the outbox."""
    ops = [
        {"op": "log_artifact", "path": report, "artifact_path": "report"},
        {"op": "set_tags", "tags": {REPORT_TAG: report}},
    ]
    if card is not None:
        with open(card, encoding="utf-8") as f:
            description = f.read()
        ops += [
            {"op": "log_artifact", "path": card, "artifact_path": "model_card"},
            {"op": "log_artifact", "path": card[: -len(".md")] + ".html", "artifact_path": "model_card"},
            {
                "op": "describe_version",
                "registered_name": model_name,
                "pushed_version": str(pushed_version),
                "description": description,
            },
        ]
    tracker = tracking_lib.Tracker.of(tracking, mlflow_run_id or "", "the run page", mode="optional")
    try:
        return tracker.send(ops)
    except LookupError:  # the run never reached MLflow
        return False


def publish(
    config,
    *,
    run_id: Optional[str] = None,
    mlflow_run_id: Optional[str] = None,
    code_commit: Optional[str] = None,
    error: Optional[str] = None,
    tracking=None,
) -> Published:
    """The page of a local run that just ended (and a pushed model's card), in the home folder and MLflow.

    Raises what writing the page raises; MLflow's refusal to take them is logged and reported as not logged."""
    paths = config.paths
    page = write_report(
        paths.home,
        paths.metadata_path,
        config.pipeline_name,
        run_id,
        settings=run_settings(config),
        mlflow_run_id=mlflow_run_id,
        code_commit=code_commit,
        error=error,
    )
    if page is None:
        raise RuntimeError(f"no run of {config.pipeline_name} in {paths.metadata_path}")
    published = Published(report_path(paths.home, page.run_id))
    if page.pushed_version:
        published.model_card = write_model_card(paths.home, config.model_name, page)
    if tracking is not None:
        try:
            published.logged_to_mlflow = log_to_mlflow(
                tracking,
                mlflow_run_id,
                published.report,
                published.model_card,
                config.model_name,
                page.pushed_version,
            )
        except Exception as err:  # noqa: BLE001 (MLflow's client raises many kinds; the page is on disk anyway)
            log.warning("could not log the run page to MLflow run %s: %s", mlflow_run_id, err)
    return published
