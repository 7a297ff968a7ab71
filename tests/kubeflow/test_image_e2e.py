"""The project's own `kubeflow/Dockerfile`, built here on a stand-in for tensorflow/tfx:1.16.0 (tests/image.py),
and the compiled taxi pipeline's three runs (tests/kubeflow/test_compiled_pipeline_e2e.py) with every step in a
container of that image: its user (1000), working directory, environment and Python, not this machine's.

Two installs: KFP 2.17 (SeaweedFS, the current default) and 2.14 (MinIO), side by side (one core each). Each
spec is compiled for its version with no endpoint, so the steps reach the store by the service name that
version's launcher uses (`seaweedfs.kubeflow:9000`, `minio-service.kubeflow:9000`); the containers' hosts file
points that name at the install's own S3 server, listening on port 9000 of its own loopback address. Each
install makes the first of the three runs, in which every step runs in the image and reads and writes its store;
the second and third (the gate's refusal, the served baseline) run the same steps on other data, and `make test`
runs them through the same harness on the host (tests/kubeflow/test_compiled_pipeline_e2e.py).

`make test-image` runs these (`-m image`; root, buildah and debootstrap, which `make system-deps` installs); the
first build takes minutes, later ones reuse every layer whose inputs did not change.
"""

import pytest

from tests import helpers, image
from tests.kubeflow import test_compiled_pipeline_e2e as e2e

pytestmark = [pytest.mark.e2e, pytest.mark.image]

STORE_PORT = 9000  # the port of both services
# Per install: the name its launcher and steps use for the store, and the loopback address its server takes.
INSTALLS = {"2.17": ("seaweedfs.kubeflow", "127.0.0.2"), "2.14": ("minio-service.kubeflow", "127.0.0.3")}
DAYS = ("day1",)


@pytest.fixture(scope="session")
def step_image(tmp_path_factory):
    """The step image's tag; its build log is image-build.log under the session's temporary folder."""
    missing = image.missing_tools()
    assert not missing, f"building the step image needs {missing}: `make system-deps` as root installs them"
    return image.project_image_in_background(image_build_log(tmp_path_factory)).result()


def image_build_log(tmp_path_factory, lane: str = image.COMPAT) -> str:
    """The build log of `lane`'s image in the session's temporary folder: image-build.log (compat),
    image-build-current.log."""
    suffix = "" if lane == image.COMPAT else f"-{lane}"
    return str(tmp_path_factory.getbasetemp() / f"image-build{suffix}.log")


@pytest.fixture(scope="session")
def installs(step_image, tmp_path_factory):
    """Both installs' runs, started at once on a pool of two threads; {version: (future, details)}."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(INSTALLS), thread_name_prefix="install")
    started, stores = {}, []
    try:
        for version, (name, address) in INSTALLS.items():
            store = helpers.S3Server(str(tmp_path_factory.mktemp(f"store-{version}")), host=address, port=STORE_PORT)
            try:
                store.start()
            except Exception as e:  # a clear message, not a hang, when something else has the address
                raise AssertionError(f"cannot serve the object store on {address}:{STORE_PORT}: {e}") from e
            stores.append(store)
            command = image.ImageCommand(step_image, hosts={name: address})
            jobs, details = e2e.jobs(
                tmp_path_factory.mktemp(f"kfp-{version}"), store, image=command, kfp_version=version, days=DAYS
            )
            assert details["config"].endpoint == f"http://{name}:{STORE_PORT}"
            started[version] = (pool.submit(jobs["runs"]), details)
        yield started
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for _, details in started.values():
            details["mlflow_server"].stop()
        for store in stores:
            store.stop()


def test_the_image_runs_steps_as_its_user_in_a_writable_folder_with_its_own_python(step_image, tmp_path):
    image.assert_starts_steps_as_a_pod_needs(step_image)
    probe = (
        "import os, sys, tempfile, tensorflow_text, tfxflow.pipeline.kfp.entrypoint as e; "
        "tempfile.NamedTemporaryFile(dir=os.getcwd()); "
        "print(os.getuid(), os.getcwd(), sys.executable, e.__file__)"
    )
    uid, cwd, python, module = image.output_of(step_image, ["python", "-c", probe], str(tmp_path)).split()[-4:]
    assert (uid, cwd, python) == ("1000", "/home/tfxflow", "/opt/conda/bin/python")
    # The project as installed in the image, not this checkout.
    assert module.startswith("/opt/conda/lib/python3.10/site-packages/tfxflow/"), module


@pytest.fixture(scope="module", params=sorted(INSTALLS, reverse=True), ids=lambda v: f"kfp-{v}")
def kfp_runs(request, installs):
    future, details = installs[request.param]
    results = future.result()
    assert len(results["runs"]) == len(DAYS)
    with helpers.environment(details["s3"].env):
        e2e.object_store.clear_client_cache()
        try:
            yield {**results, **details, "mlflow": e2e.MlflowClient(details["mlflow_server"].uri)}
        finally:
            e2e.object_store.clear_client_cache()


# The first run's checks, the same as on the host (tests/kubeflow/test_compiled_pipeline_e2e.py).
def test_first_run_pushes_a_model_that_predicts_and_records_mlflow(kfp_runs):
    e2e.test_first_run_pushes_a_model_that_predicts_and_records_mlflow(kfp_runs)
