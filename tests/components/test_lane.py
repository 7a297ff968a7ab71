"""components/lane.py: each lane difference is read from the installed library, and matches the lane."""

import importlib.util
import os
import subprocess
import sys

from tfxflow.components import lane


def test_the_lane_is_the_installed_tfxs():
    version = lane.tfx_version()
    assert version.startswith("1.21." if lane.name() == lane.CURRENT else "1.16."), version


def test_tfx_imports_its_tuner_optionally_in_the_current_lane_only():
    """TFX 1.21's tfx/components/__init__.py guards each component's import; 1.16's imports the Tuner (and with it
    keras_tuner, Keras 3 and Matplotlib) unguarded, so only the current lane may keep keras_tuner out."""
    package = os.path.dirname(importlib.util.find_spec("tfx").origin)
    with open(os.path.join(package, "components", "__init__.py"), encoding="utf-8") as f:
        source = f.read()
    assert lane.tfx_tuner_import_is_optional() == (lane.name() == lane.CURRENT)
    assert ("Tuner = None" in source) == lane.tfx_tuner_import_is_optional()
    # What the answer promises: without keras_tuner, the components this pipeline uses still import.
    script = (
        "import sys; sys.modules['keras_tuner'] = None\n"
        "from tfx.components import StatisticsGen, Trainer, Tuner\n"
        "print(Tuner is None, StatisticsGen.__name__, Trainer.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if lane.tfx_tuner_import_is_optional():
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split()[-3:] == ["True", "StatisticsGen", "Trainer"]
    else:
        assert done.returncode != 0 and "keras_tuner" in done.stderr
