"""Fixtures shared by every test package."""

import os

import pytest

from tfxflow.components.model import hardware

# tf.keras is Keras 2 (tf-keras) in the tests' process too, as the CLI and the Kubeflow steps make it: before
# TensorFlow loads, which decides at import (tf.Transform's own switch comes too late where TF came first).
hardware.use_keras_2()

from tests import helpers  # noqa: E402  (imports TensorFlow)

# Session fixtures that start a real server on 127.0.0.1 or run Transform on data: a test using one is an
# integration test (not in `make test-fast`) without marking it again.
INTEGRATION_FIXTURES = frozenset(
    {
        "mlflow_server",
        "s3_server",
        "postgres_server",
        "team_mlflow_server",
        "secure_mlflow_server",
        "tiny_transform",
        "task_transforms",
        "text_transform",
        "task_models",
    }
)


def pytest_collection_modifyitems(config, items):
    # The step images' tests (root, buildah, minutes of build) and the lanes' comparison (root where the host
    # cannot run the current lane) run only when asked for: `make test-image`, `make test-lanes`.
    for marker in ("image", "lanes"):
        if marker not in (config.getoption("markexpr") or ""):
            marked = [item for item in items if item.get_closest_marker(marker)]
            if marked:
                config.hook.pytest_deselected(items=marked)
                items[:] = [item for item in items if not item.get_closest_marker(marker)]
    for item in items:
        if INTEGRATION_FIXTURES.intersection(item.fixturenames) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)
    # The tests that read LongRuns' results last, in their order: until then the session's other tests run. The
    # step image's (when selected) just before them: its two runs take the cores the pool and this thread leave.
    waiting = set(LongRuns.GROUPS.values())

    def phase(item) -> int:
        return 2 if _module_name(item) in waiting else 1 if item.get_closest_marker("image") else 0

    items[:] = sorted(items, key=phase)  # stable: otherwise in order


def _module_name(item) -> str:
    module = getattr(item, "module", None)
    return module.__name__.rsplit(".", 1)[-1] if module is not None else ""


@pytest.fixture(autouse=True)
def _mlflow_client_settings_unchanged():
    """MLflow's client settings ($MLFLOW_TRACKING_*) are as they were after each test: code under test may set
    credentials there (that is where they belong), and a test that lets them outlive it changes who later tests
    are to every MLflow server."""
    before = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_TRACKING_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_TRACKING_")}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the test left MLflow's client settings changed: {changed}"


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real `mlflow server` on a free port of 127.0.0.1, stopped at the end of the session."""
    server = helpers.MlflowServer(str(tmp_path_factory.mktemp("mlflow_server"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on a free port of 127.0.0.1, stopped at the end of the session."""
    server = helpers.S3Server(str(tmp_path_factory.mktemp("s3_server"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster on a free port of 127.0.0.1, removed at the end of the session."""
    server = helpers.PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def team_mlflow_server(postgres_server, s3_server, tmp_path_factory):
    """`mlflow server --app-name basic-auth` on PostgreSQL and S3 (helpers.TeamMlflowServer), with a user who
    may write (`WRITER`) and one who, by the default permission, may only read (`READER`)."""
    server = helpers.TeamMlflowServer(
        str(tmp_path_factory.mktemp("team_mlflow")), postgres_server, s3_server, "team-artifacts"
    ).start()
    for user, password in (server.WRITER, server.READER):
        server.create_user(user, password)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def secure_mlflow_server(postgres_server, s3_server, tmp_path_factory):
    """helpers.TeamMlflowServer over HTTPS only, asking for a client certificate (`server.tls`), where a bearer
    token authenticates too: WRITER_TOKEN as the writer, READER_TOKEN as the reader."""
    folder = tmp_path_factory.mktemp("secure_mlflow")
    team = helpers.TeamMlflowServer
    tokens = {team.WRITER_TOKEN: team.WRITER[0], team.READER_TOKEN: team.READER[0]}
    server = helpers.TeamMlflowServer(
        str(folder / "server"),
        postgres_server,
        s3_server,
        "secure-artifacts",
        tls=helpers.TlsFiles.create(str(folder / "tls")),
        tokens=tokens,
    ).start()
    for user, password in (server.WRITER, server.READER):
        server.create_user(user, password)
    yield server
    server.stop()


class LongRuns:
    """End-to-end runs of minutes that depend on nothing but their own folders, run one after another on a thread
    of their own from the start of the session, beside the other tests: most tests keep one core busy (a CLI
    run, a KFP step, TFX's in-memory Beam), and these runs take the other. Each test waits only for its own
    group's results.

    Groups, in the order they run: "faults" (tests/pipeline/test_faults_e2e.py's kills, full disk and races of
    one home folder, on the session's MLflow server), "kfp" (tests/kubeflow/test_compiled_pipeline_e2e.py's runs of the
    compiled taxi pipeline through the KFP harness), "kfp-tasks" (tests/kubeflow/test_compiled_tasks_e2e.py's
    compiled pipelines), "tasks" (tests/pipeline/test_tasks_e2e.py's runs through the CLI), "text"
    (tests/pipeline/test_text_e2e.py's), "outage" (tests/pipeline/test_tracking_outage_e2e.py's MLflow server
    stopped during runs) and "portable" (tests/pipeline/test_beam_runners.py's run through Beam's job service);
    a group starts with the session when the session selected its tests,
    else when they first ask for it. The tests of these modules run last (pytest_collection_modifyitems), so
    the session's other tests keep one core busy while the runs take the other."""

    GROUPS = {
        "faults": "test_faults_e2e",
        "kfp": "test_compiled_pipeline_e2e",
        "kfp-tasks": "test_compiled_tasks_e2e",
        "tasks": "test_tasks_e2e",
        "text": "test_text_e2e",
        "outage": "test_tracking_outage_e2e",
        "portable": "test_beam_runners",
    }

    def __init__(self, tmp_path_factory, s3_server, request):
        import concurrent.futures

        self._tmp, self._s3, self._request = tmp_path_factory, s3_server, request
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="long-run")
        self._futures = {}
        self._details = {}

    def start(self, *groups):
        for group in groups:
            if group in self._futures:
                continue
            if group == "faults":
                from tests.pipeline import test_faults_e2e

                # Session fixtures are set up here, on the main thread, never on the pool's.
                server = self._request.getfixturevalue("mlflow_server")
                jobs, details = test_faults_e2e.jobs(self._tmp.mktemp("faults"), server), {}
            elif group == "kfp":
                from tests.kubeflow import test_compiled_pipeline_e2e

                jobs, details = test_compiled_pipeline_e2e.jobs(self._tmp.mktemp("kfp"), self._s3)
            elif group == "tasks":
                from tests.pipeline import test_tasks_e2e

                jobs, details = test_tasks_e2e.jobs(self._tmp.mktemp("tasks")), {}
            elif group == "text":
                from tests.pipeline import test_text_e2e

                jobs, details = test_text_e2e.jobs(self._tmp.mktemp("text")), {}
            elif group == "outage":
                from tests.pipeline import test_tracking_outage_e2e

                jobs, details = test_tracking_outage_e2e.jobs(self._tmp.mktemp("outage")), {}
            elif group == "portable":
                from tests.pipeline import test_beam_runners

                jobs, details = test_beam_runners.jobs(self._tmp.mktemp("portable")), {}
            else:
                from tests.kubeflow import test_compiled_tasks_e2e

                jobs, details = test_compiled_tasks_e2e.jobs(self._tmp.mktemp("kfp-tasks"), self._s3)
            self._futures[group] = {name: self._pool.submit(job) for name, job in jobs.items()}
            self._details[group] = details

    def results(self, group):
        self.start(group)
        return {name: future.result() for name, future in self._futures[group].items()}

    def details(self, group):
        self.start(group)
        return self._details[group]

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def long_runs(tmp_path_factory, s3_server, request):
    """The session's LongRuns."""
    runs = LongRuns(tmp_path_factory, s3_server, request)
    yield runs
    runs.close()


@pytest.fixture(scope="session", autouse=True)
def _long_runs_from_the_start(request):
    """Starts the LongRuns groups whose tests this session runs, and the step image's build when its tests run,
    before the first test."""
    selected = {_module_name(item) for item in request.session.items}
    groups = [group for group, module in LongRuns.GROUPS.items() if module in selected]
    if groups:
        request.getfixturevalue("long_runs").start(*groups)
    # Each lane's step image build, when its tests are selected and it can be built (else its fixture says why).
    lanes = {"test_image_e2e": "compat", "test_image_current_e2e": "current"}
    wanted = {lanes[_module_name(item)] for item in request.session.items if _module_name(item) in lanes}
    if wanted:
        from tests import image
        from tests.kubeflow.test_image_e2e import image_build_log

        if not image.missing_tools():
            factory = request.getfixturevalue("tmp_path_factory")
            image.remove_leftovers()  # before the builds start: a full disk fails them
            for lane in sorted(wanted):  # compat first
                image.project_image_in_background(image_build_log(factory, lane), lane)
