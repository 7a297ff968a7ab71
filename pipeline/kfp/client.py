"""Submits and schedules a compiled pipeline on Kubeflow Pipelines through `kfp.Client` (REST API v2beta1).

The compiled file is uploaded once per content as a version of the pipeline named like it (version name:
`<pipeline>-<sha256[:12]>`; KFP names the first one like the pipeline), so runs and schedules in the KFP UI
say which compiled spec they ran. A schedule is found by its name in its experiment: scheduling the same name
again replaces it (KFP has no update call: the new one is created first, then the old one deleted, so a
failed call never leaves the pipeline unscheduled). Credentials come from flags or the environment and are
never printed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import List, Mapping, Optional, Tuple

from tfxflow.pipeline.config import ConfigError

HOST_ENV = "KFP_HOST"
TOKEN_ENV = "KFP_TOKEN"
NAMESPACE_ENV = "KFP_NAMESPACE"


class KfpError(RuntimeError):
    """A KFP call that failed; the message names the call and the server's answer, never a credential."""


@dataclasses.dataclass(frozen=True)
class Connection:
    host: str
    namespace: Optional[str] = None
    token: Optional[str] = dataclasses.field(default=None, repr=False)


def connection_from(
    host: Optional[str], namespace: Optional[str], token_file: Optional[str], environ: Mapping[str, str]
) -> Connection:
    """--host, else $KFP_HOST; the token from --token-file, else $KFP_TOKEN; --namespace, else $KFP_NAMESPACE."""
    host = host or environ.get(HOST_ENV, "")
    if not host:
        raise ConfigError(
            f"no KFP endpoint: pass --host or set ${HOST_ENV} (e.g. http://127.0.0.1:8888 after "
            "`kubectl port-forward -n kubeflow svc/ml-pipeline 8888:8888`)"
        )
    token = None
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as err:
            raise ConfigError(f"--token-file {token_file}: {err.strerror}") from None
    token = token or environ.get(TOKEN_ENV) or None
    return Connection(host=host, namespace=namespace or environ.get(NAMESPACE_ENV) or None, token=token)


def make_client(connection: Connection):
    """A `kfp.Client` for `connection`, without kfp's FutureWarning and link printing."""
    import warnings

    import kfp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        # The client asks the API's health endpoint when it starts.
        return _quiet(
            kfp.Client,
            f"connecting to {connection.host}",
            host=connection.host,
            existing_token=connection.token,
            namespace=connection.namespace or "kubeflow",
        )


def _quiet(call, what: str, *args, **kwargs):
    """Runs a kfp.Client call; kfp prints UI links to stdout, and its errors carry request headers."""
    import contextlib
    import io

    import urllib3
    from kfp_server_api.exceptions import ApiException

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return call(*args, **kwargs)
    except ApiException as err:
        # The exception's text includes the HTTP headers; only status and body are safe to show.
        raise KfpError(f"{what}: HTTP {err.status} {err.reason}: {(err.body or '').strip()[:500]}") from None
    except (OSError, urllib3.exceptions.HTTPError) as err:
        raise KfpError(f"{what}: cannot reach the KFP API ({type(err).__name__})") from None


def _name_filter(key: str, value: str) -> str:
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": key, "stringValue": value}]})


def spec_version_name(pipeline_name: str, spec_path: str) -> str:
    """`<pipeline>-<sha256[:12] of the compiled file>`: the same file is one version, however often sent."""
    with open(spec_path, "rb") as f:
        return f"{pipeline_name}-{hashlib.sha256(f.read()).hexdigest()[:12]}"


def experiment_id(client, name: str, namespace: Optional[str]) -> str:
    """The id of experiment `name`, created when missing."""
    experiment = _quiet(client.create_experiment, f"experiment '{name}'", name=name, namespace=namespace)
    return experiment.experiment_id


def upload(client, spec_path: str, pipeline_name: str, namespace: Optional[str] = None) -> Tuple[str, str]:
    """(pipeline id, version id) of the compiled file, uploaded unless that version exists already.

    KFP names a new pipeline's first version like the pipeline; the pipeline's description records which
    file that was, so sending the same file again finds it."""
    version_name = spec_version_name(pipeline_name, spec_path)
    first_version_note = f"first version: {version_name}"
    pipeline_id = _quiet(client.get_pipeline_id, f"pipeline '{pipeline_name}'", pipeline_name)
    if pipeline_id is None:
        pipeline = _quiet(
            client.upload_pipeline,
            f"upload of {spec_path}",
            pipeline_package_path=spec_path,
            pipeline_name=pipeline_name,
            description=f"tfxflow pipeline; {first_version_note}",
            namespace=namespace,
        )
        pipeline_id, wanted = pipeline.pipeline_id, pipeline_name
    else:
        description = _quiet(client.get_pipeline, f"pipeline '{pipeline_name}'", pipeline_id).description or ""
        wanted = pipeline_name if description.endswith(first_version_note) else version_name
    versions = (
        _quiet(
            client.list_pipeline_versions,
            f"versions of '{pipeline_name}'",
            pipeline_id=pipeline_id,
            page_size=10,
            filter=_name_filter("display_name", wanted),
        ).pipeline_versions
        or []
    )
    if versions:
        return pipeline_id, versions[0].pipeline_version_id
    version = _quiet(
        client.upload_pipeline_version,
        f"upload of {spec_path} as version {version_name}",
        pipeline_package_path=spec_path,
        pipeline_version_name=version_name,
        pipeline_id=pipeline_id,
    )
    return pipeline_id, version.pipeline_version_id


@dataclasses.dataclass(frozen=True)
class Submitted:
    run_id: str
    experiment_id: str
    pipeline_id: str
    version_id: str


def submit(
    client,
    spec_path: str,
    pipeline_name: str,
    experiment: str,
    run_name: str,
    params: Mapping[str, str],
    namespace: Optional[str] = None,
    pipeline_root: Optional[str] = None,
) -> Submitted:
    """Starts one run of the compiled pipeline, its artifacts under `pipeline_root` (KFP's driver takes the
    run's root, else the namespace's `kfp-launcher` default; never the spec's `defaultPipelineRoot`)."""
    exp_id = experiment_id(client, experiment, namespace)
    pipeline_id, version_id = upload(client, spec_path, pipeline_name, namespace)
    run = _quiet(
        client.run_pipeline,
        f"run '{run_name}'",
        experiment_id=exp_id,
        job_name=run_name,
        params=dict(params),
        pipeline_id=pipeline_id,
        version_id=version_id,
        pipeline_root=pipeline_root,
    )
    return Submitted(run.run_id, exp_id, pipeline_id, version_id)


def check_cron(cron: str) -> str:
    """KFP's cron has six fields, seconds first; a five-field (crontab) expression is refused with the fix."""
    fields = cron.split()
    if len(fields) == 5:
        raise ValueError(f"--cron '{cron}': KFP's cron has six fields, seconds first: '0 {cron}'")
    if len(fields) != 6:
        raise ValueError(
            f"--cron '{cron}': expected six fields (seconds minutes hours day-of-month month "
            "day-of-week), e.g. '0 0 3 * * *' for 03:00 every day"
        )
    return " ".join(fields)


def find_schedules(client, exp_id: str, name: str) -> List:
    """The recurring runs named `name` in the experiment."""
    found = _quiet(
        client.list_recurring_runs,
        f"recurring runs of experiment {exp_id}",
        experiment_id=exp_id,
        page_size=100,
        filter=_name_filter("display_name", name),
    )
    return [r for r in (found.recurring_runs or []) if r.display_name == name]


@dataclasses.dataclass(frozen=True)
class Scheduled:
    recurring_run_id: str
    experiment_id: str
    pipeline_id: str
    version_id: str
    replaced: Tuple[str, ...]


def schedule(
    client,
    spec_path: str,
    pipeline_name: str,
    experiment: str,
    name: str,
    cron: str,
    params: Mapping[str, str],
    max_concurrency: int = 1,
    catchup: bool = False,
    namespace: Optional[str] = None,
    pipeline_root: Optional[str] = None,
) -> Scheduled:
    """Creates the recurring run `name`, replacing one of the same name in the experiment; its runs store
    their artifacts under `pipeline_root` (see `submit`)."""
    cron = check_cron(cron)
    if max_concurrency < 1:
        raise ValueError("--max-concurrency must be >= 1")
    exp_id = experiment_id(client, experiment, namespace)
    pipeline_id, version_id = upload(client, spec_path, pipeline_name, namespace)
    previous = find_schedules(client, exp_id, name)
    created = _quiet(
        client.create_recurring_run,
        f"recurring run '{name}'",
        experiment_id=exp_id,
        job_name=name,
        cron_expression=cron,
        max_concurrency=max_concurrency,
        no_catchup=not catchup,
        params=dict(params),
        pipeline_id=pipeline_id,
        version_id=version_id,
        pipeline_root=pipeline_root,
    )
    for old in previous:
        _quiet(
            client.delete_recurring_run,
            f"deleting the replaced recurring run {old.recurring_run_id}",
            old.recurring_run_id,
        )
    return Scheduled(
        created.recurring_run_id, exp_id, pipeline_id, version_id, tuple(r.recurring_run_id for r in previous)
    )


def unschedule(client, experiment: str, name: str, namespace: Optional[str] = None) -> Tuple[str, ...]:
    """Deletes the recurring runs named `name` in the experiment; returns their ids (none: nothing to do)."""
    try:
        found = _quiet(
            client.get_experiment, f"experiment '{experiment}'", experiment_name=experiment, namespace=namespace
        )
    except ValueError:  # kfp: "No experiment is found with name ..."
        return ()
    removed = []
    for old in find_schedules(client, found.experiment_id, name):
        _quiet(client.delete_recurring_run, f"deleting recurring run {old.recurring_run_id}", old.recurring_run_id)
        removed.append(old.recurring_run_id)
    return tuple(removed)
