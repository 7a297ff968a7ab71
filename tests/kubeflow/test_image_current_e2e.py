"""The current lane's step image: `kubeflow/Dockerfile` with `--build-arg LANE=current`, built here on a stand-in
for a glibc 2.38+ base without Python (Debian 13 for `nvidia/cuda:...-ubuntu24.04`, tests/image.py), and the taxi
pipeline compiled *in that image* (its TFX 1.21 writes the spec, as a user of the lane compiles) and run step by
step in containers of it through the KFP harness, on KFP 2.17's store (SeaweedFS's service name).

The session that runs these is the compat lane's (`make test-image`, `make test-all`): the image needs buildah and
root, not the current lane on the host.
"""

import os

import pytest

from tests import helpers, image
from tests.kubeflow import test_compiled_pipeline_e2e as e2e
from tests.kubeflow.test_image_e2e import image_build_log
from tfxflow.components.tracking.mlflow_runs import RUN_KEY_TAG
from tfxflow.pipeline.kfp import compiler as kf
from tfxflow.pipeline.kfp import entrypoint

pytestmark = [pytest.mark.e2e, pytest.mark.image]

KFP = "2.17"
STORE = ("seaweedfs.kubeflow", "127.0.0.4")  # the name KFP 2.17's launcher uses, and this test's server address
STORE_PORT = 9000
SITE = "/opt/tfxflow/venv/lib/python3.13/site-packages"


@pytest.fixture(scope="session")
def current_image(tmp_path_factory):
    missing = image.missing_tools()
    assert not missing, f"building the step image needs {missing}: `make system-deps` as root installs them"
    return image.project_image_in_background(image_build_log(tmp_path_factory, image.CURRENT), image.CURRENT).result()


def test_the_current_image_has_the_lanes_stack_in_a_venv_of_the_bases_python(current_image, tmp_path):
    image.assert_starts_steps_as_a_pod_needs(current_image)
    probe = (
        "import importlib.metadata as m, os, pwd, shutil, sys, tempfile, tensorflow_text; "
        "import tfxflow.pipeline.kfp.entrypoint as e; tempfile.NamedTemporaryFile(dir=os.getcwd()); "
        "print(os.getuid(), pwd.getpwuid(1000).pw_name, os.getcwd(), sys.executable, '%d.%d' % sys.version_info[:2], "
        "m.version('tfx'), m.version('tensorflow'), m.version('tensorflow-text'), e.__file__, shutil.which('g++'))"
    )
    fields = image.output_of(current_image, ["python", "-c", probe], str(tmp_path)).split()[-10:]
    uid, user, cwd, python, version, tfx, tf, text, module, compiler = fields
    # The base's uid 1000 (`ubuntu`, as in Ubuntu 24.04's images) made way for the step user.
    assert (uid, user, cwd) == ("1000", "tfxflow", "/home/tfxflow")
    # Debian 13's Python 3.13 from apt, the lock in a venv; the compiler the two sdists needed is gone again.
    assert (python, version) == ("/opt/tfxflow/venv/bin/python", "3.13")
    assert (tfx, tf, text) == (_locked("tfx"), _locked("tensorflow"), _locked("tensorflow-text"))
    assert module.startswith(f"{SITE}/tfxflow/"), module
    assert compiler == "None"


def test_a_spec_the_compat_lane_compiled_is_refused_by_the_current_image_before_any_work(current_image, tmp_path):
    out = tmp_path / "out.txt"
    argv = [
        *kf.ENTRYPOINT,
        entrypoint.LANE_FLAG,
        "compat:1.16.0",
        entrypoint.EXECUTOR_FLAG,
        "tfxflow.components.schema_import.EmbeddedSchema_Executor",
    ]
    with open(out, "w+b") as f:
        code = image.ImageCommand(current_image).run(argv, {}, stdout=f)
        f.seek(0)
        text = f.read().decode()
    assert code == entrypoint.EXIT_WRONG_IMAGE, text[-3000:]
    assert "the spec was compiled by the compat lane (TFX 1.16.0) and this image is of the current lane" in text
    assert "--build-arg LANE=compat" in text and "Traceback" not in text


def _compile_in(tag: str):
    """compile_spec for e2e.jobs: `tfxflow kubeflow compile` in a container of `tag`, with the config's values."""

    def compile_spec(config: kf.KubeflowConfig, path: str) -> str:
        folder = os.path.dirname(path)
        os.chmod(folder, 0o777)  # the step user (uid 1000) writes the spec there
        training = config.training
        argv = [
            "tfxflow",
            "kubeflow",
            "compile",
            "--image",
            tag,
            "--pipeline-root",
            config.pipeline_root,
            "--data-root",
            config.data_root,
            "--serving-dir",
            config.serving_dir,
            "--serving-pvc",
            config.serving_pvc,
            "--serving-mount",
            config.serving_mount,
            "--data-pvc",
            config.data_pvc,
            "--data-mount",
            config.data_mount,
            "--kfp-version",
            config.kfp_version,
            "--gpus",
            str(config.gpus),
            "--mlflow-uri",
            config.mlflow_uri,
            "--experiment",
            config.experiment,
            "--beam-mode",
            config.beam_mode,
            "--train-steps",
            str(training.train_steps),
            "--batch-size",
            str(training.batch_size),
            "--eval-every-steps",
            str(training.eval_every_steps),
            "--output",
            path,
        ]
        printed = image.output_of(tag, argv, folder, mounts=[(folder, folder)])
        assert (
            f"lane:       current (TFX {_locked('tfx')}): its steps run in an image built with --build-arg " in printed
        )
        return path

    return compile_spec


def _locked(package: str) -> str:
    """`package`'s version in the current lane's lock."""
    with open(os.path.join(image.REPO, "requirements-current.lock"), encoding="utf-8") as f:
        return next(line.split("==")[1].strip() for line in f if line.startswith(f"{package}=="))


@pytest.fixture(scope="module")
def current_run(current_image, tmp_path_factory):
    """The first run (nothing served yet) of the spec compiled in the current image, every step in it."""
    name, address = STORE
    store = helpers.S3Server(str(tmp_path_factory.mktemp("store-current")), host=address, port=STORE_PORT)
    store.start()
    details = None
    try:
        command = image.ImageCommand(current_image, hosts={name: address})
        jobs, details = e2e.jobs(
            tmp_path_factory.mktemp("kfp-current"),
            store,
            image=command,
            kfp_version=KFP,
            days=("day1",),
            compile_spec=_compile_in(current_image),
        )
        results = jobs["runs"]()
        with helpers.environment(store.env):
            e2e.object_store.clear_client_cache()
            yield {**results, **details, "mlflow": e2e.MlflowClient(details["mlflow_server"].uri)}
    finally:
        e2e.object_store.clear_client_cache()
        if details is not None:
            details["mlflow_server"].stop()
        store.stop()


def test_the_pipeline_compiled_and_run_in_the_current_image_trains_checks_pushes_and_records(current_run):
    spec, _ = kf.load_spec(str(current_run["base"] / "taxi.yaml"))
    for executor in spec["deploymentSpec"]["executors"].values():
        args = executor["container"]["args"]
        assert args[:2] == [entrypoint.LANE_FLAG, f"current:{_locked('tfx')}"]
    run = current_run["runs"][0]
    assert run.state == "SUCCEEDED", e2e._why(run)
    assert {t.state for t in run.tasks.values()} == {"SUCCEEDED"}
    # The serving check loaded the pushed candidate in the image's TensorFlow and asked it for predictions.
    assert "ServingCheck: the model serves:" in run.log("ServingCheck"), run.log("ServingCheck")[-2000:]
    (version,) = current_run["versions"][0]
    model_dir = os.path.join(current_run["config"].serving_dir, "taxi", version)
    assert os.path.exists(os.path.join(model_dir, "saved_model.pb"))
    experiment = current_run["mlflow"].get_experiment_by_name("kfp-e2e")
    (tracked,) = current_run["mlflow"].search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{run.run_id}'"
    )
    assert tracked.info.status == "FINISHED" and tracked.data.tags["tfxflow.pushed_version"] == version
    assert 0.5 < tracked.data.metrics["eval.binary_accuracy"] <= 1.0
    # The run's MLflow parameters name the stack that compiled and ran it.
    params = tracked.data.params
    assert (params["versions.tfx"], params["versions.tensorflow"]) == (_locked("tfx"), _locked("tensorflow"))
