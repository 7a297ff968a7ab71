"""Fixtures shared by every test package."""

import os
import time

import pytest

from tfxflow.components.training import hardware

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
    # The tests that read LongRuns' results last, in the order the pool runs their groups: until then the session's
    # other tests run, and then each group's tests run once its runs are done, while the pool runs the next groups
    # (in file order, the first group's tests would wait for the last group's runs, and every test of the groups
    # between would run after the pool ends, on one core). The step image's (when selected) just before them: its
    # two runs take the cores the pool and this thread leave.
    waiting = {module: 2 + place for place, module in enumerate(LongRuns.GROUPS.values())}

    def phase(item) -> int:
        return waiting.get(_module_name(item), 1 if item.get_closest_marker("image") else 0)

    items[:] = sorted(items, key=phase)  # stable: otherwise in order


def _runs_read(items) -> dict:
    """{group: the run names its selected tests read}, for each group whose selected tests all say which
    (`@pytest.mark.long_runs(...)`); a group with a test that does not say runs whole."""
    named, whole = {}, set()
    modules = {module: group for group, module in LongRuns.GROUPS.items()}
    for item in items:
        group = modules.get(_module_name(item))
        if group is None:
            continue
        marker = item.get_closest_marker("long_runs")
        if marker is None:
            whole.add(group)
        else:
            named.setdefault(group, set()).update(marker.args)
    return {group: names for group, names in named.items() if group not in whole}


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
    group's results; once the main thread waits (the session's other tests are done), a second thread takes the
    next runs in order, so the runs use both cores the waiting main thread leaves.

    Groups, in the order they run: "tuning" (tests/pipeline/test_tuning_e2e.py's untuned and tuned runs on the
    session's MLflow server; the tuned run's two trial workers make it the longest to leave for last), "drift"
    (tests/pipeline/test_drift_e2e.py's runs on one home), "faults" (tests/pipeline/test_faults_e2e.py's kills, full
    disk and races of one home folder, on the session's MLflow server), "kfp"
    (tests/kubeflow/test_compiled_pipeline_e2e.py's runs of the compiled taxi pipeline through the KFP harness),
    "kfp-tasks" (tests/kubeflow/test_compiled_tasks_e2e.py's compiled pipelines), "tasks"
    (tests/pipeline/test_tasks_e2e.py's runs through the CLI), "text" (tests/pipeline/test_text_e2e.py's), "outage"
    (tests/pipeline/test_tracking_outage_e2e.py's MLflow server stopped during runs), "portable"
    (tests/pipeline/test_beam_runners.py's run through Beam's job service), "patches-off"
    (tests/pipeline/patches/test_patches_off_e2e.py's taxi run without library patches, compared with the drift
    group's first run), "workers" (tests/pipeline/test_workers_e2e.py's runs of the Trainer on several
    worker processes) and "kfp-workers" (tests/kubeflow/test_compiled_workers_e2e.py's compiled pipeline whose
    Trainer creates a TFJob);
    a group starts with the session when the session selected its tests,
    else when they first ask for it. The tests of these modules run last (pytest_collection_modifyitems), so
    the session's other tests keep one core busy while the runs take the other. Each run's start and time are
    printed at the end of the session."""

    GROUPS = {
        "tuning": "test_tuning_e2e",
        "drift": "test_drift_e2e",
        "faults": "test_faults_e2e",
        "kfp": "test_compiled_pipeline_e2e",
        "kfp-tasks": "test_compiled_tasks_e2e",
        "tasks": "test_tasks_e2e",
        "text": "test_text_e2e",
        "outage": "test_tracking_outage_e2e",
        "portable": "test_beam_runners",
        "patches-off": "test_patches_off_e2e",
        "workers": "test_workers_e2e",
        "kfp-workers": "test_compiled_workers_e2e",
    }
    WORKERS = 2  # the first from the start, the second once the main thread waits

    def __init__(self, tmp_path_factory, s3_server, request):
        import collections
        import threading

        self._tmp, self._s3, self._request = tmp_path_factory, s3_server, request
        self._queue = collections.deque()  # (group, name, job, future), in the order they run
        self._lock = threading.Lock()
        self._workers = []  # every thread started, for close() to join
        self._active = 0  # threads still taking runs: counted under the lock, so none is lost as it ends
        self._closed = False
        self._futures = {}
        self._details = {}
        self._times = []  # (group, name, started, seconds, worker), seconds from the pool's start
        self._origin = time.monotonic()

    def _work(self, worker):
        while True:
            with self._lock:
                if self._closed or not self._queue:
                    self._active -= 1
                    return
                group, name, job, future = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            started = time.monotonic()
            try:
                result = job()
            except BaseException as e:  # noqa: BLE001  (handed to the test that reads it)
                future.set_exception(e)
            else:
                future.set_result(result)
            finally:
                self._times.append((group, name, started - self._origin, time.monotonic() - started, worker))

    def _add_worker(self):
        import threading

        with self._lock:
            if self._active >= self.WORKERS or not self._queue:
                return
            self._active += 1
            number = len(self._workers) + 1
            worker = threading.Thread(target=self._work, args=(number,), name=f"long-run-{number}")
            self._workers.append(worker)
        worker.start()

    def start(self, *groups, only=None):
        """Queues the runs of `groups`: all of each, or of a group in `only` ({group: run names}) those named."""
        import concurrent.futures

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
            elif group == "drift":
                from tests.pipeline import test_drift_e2e

                jobs, details = test_drift_e2e.jobs(self._tmp.mktemp("drift")), {}
            elif group == "workers":
                from tests.pipeline import test_workers_e2e

                jobs, details = test_workers_e2e.jobs(self._tmp.mktemp("workers")), {}
            elif group == "kfp-workers":
                from tests.kubeflow import test_compiled_workers_e2e

                jobs, details = test_compiled_workers_e2e.jobs(self._tmp.mktemp("kfp-workers"), self._s3)
            elif group == "patches-off":
                from tests.pipeline.patches import test_patches_off_e2e

                jobs, details = test_patches_off_e2e.jobs(self._tmp.mktemp("patches-off")), {}
            elif group == "tuning":
                from tests.pipeline import test_tuning_e2e

                server = self._request.getfixturevalue("mlflow_server")
                jobs, details = test_tuning_e2e.jobs(self._tmp.mktemp("tuning"), server), {}
            else:
                from tests.kubeflow import test_compiled_tasks_e2e

                # Only the pipelines the session's tests read are compiled (the fine-tuning one uploads a checkpoint).
                names = (only or {}).get(group)
                jobs, details = test_compiled_tasks_e2e.jobs(self._tmp.mktemp("kfp-tasks"), self._s3, names)
            if only and group in only:
                jobs = {name: job for name, job in jobs.items() if name in only[group]}
            futures = {name: concurrent.futures.Future() for name in jobs}
            with self._lock:
                self._queue.extend((group, name, job, futures[name]) for name, job in jobs.items())
            self._futures[group] = futures
            self._details[group] = details
        if not self._active:  # none yet, or they ran out of runs before these came
            self._add_worker()

    def results(self, group):
        self.start(group)
        futures = self._futures[group]
        if not all(f.done() for f in futures.values()):
            self._add_worker()  # this thread waits: its core is free
        return {name: future.result() for name, future in futures.items()}

    def details(self, group):
        self.start(group)
        return self._details[group]

    def timings(self):
        """One line per run that ran: its group and name, when it started (seconds from the first) and how long
        it took, and which thread ran it."""
        return [
            f"{group}/{name}: started at {started:.0f} s, took {seconds:.0f} s (thread {worker})"
            for group, name, started, seconds, worker in sorted(self._times, key=lambda t: t[2])
        ]

    def close(self):
        with self._lock:
            self._closed = True
            for _, _, _, future in self._queue:
                future.cancel()
            self._queue.clear()
        for worker in self._workers:
            worker.join()


@pytest.fixture(scope="session")
def long_runs(tmp_path_factory, s3_server, request):
    """The session's LongRuns."""
    runs = LongRuns(tmp_path_factory, s3_server, request)
    request.config.stash[LONG_RUNS] = runs
    yield runs
    runs.close()


LONG_RUNS = pytest.StashKey[LongRuns]()


def pytest_terminal_summary(terminalreporter, config):
    """When each long run started and how long it took: where a session's time went."""
    runs = config.stash.get(LONG_RUNS, None)
    if runs is not None and runs.timings():
        terminalreporter.section("long runs")
        for line in runs.timings():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def _long_runs_from_the_start(request):
    """Starts the LongRuns groups whose tests this session runs, and the step image's build when its tests run,
    before the first test."""
    selected = {_module_name(item) for item in request.session.items}
    groups = [group for group, module in LongRuns.GROUPS.items() if module in selected]
    if groups:
        request.getfixturevalue("long_runs").start(*groups, only=_runs_read(request.session.items))
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
