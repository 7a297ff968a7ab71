"""pipeline/patches/__init__.py: `apply()` installs every patch at the pinned versions and a real Beam pipeline
gives the same results; `TFXFLOW_PATCHES=off` installs none; the version tables are the locks' pins; a Kubeflow
step applies them only where its executor is a Beam executor."""

import json
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests import helpers
from tfxflow.pipeline import patches
from tfxflow.pipeline.patches import beam as beam_patches

LOCKS = ("requirements-compat.lock", "requirements-current.lock")


def _pins(lock: str) -> dict:
    with open(os.path.join(helpers.REPO, lock), encoding="utf-8") as f:
        return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", f.read(), re.MULTILINE))


def test_each_patch_was_checked_against_the_versions_both_locks_pin_and_no_other():
    pins = [_pins(lock) for lock in LOCKS]
    for each in patches.PATCHES:
        for library, versions in each.checked.items():
            assert sorted(versions) == sorted({lock[library] for lock in pins}), (each.name, library)
    assert len({p.name for p in patches.PATCHES}) == len(patches.PATCHES) >= 8


def test_the_pinned_versions_are_installed_here_so_every_patch_applies():
    assert all(p.outside() is None for p in patches.PATCHES)


def _counted(monkeypatch):
    import dataclasses

    installs = []
    counted = tuple(dataclasses.replace(p, install=lambda name=p.name: installs.append(name)) for p in patches.PATCHES)
    monkeypatch.setattr(patches, "PATCHES", counted)
    return installs


@pytest.mark.parametrize("value", ["off", "OFF", " off "])
def test_tfxflow_patches_off_applies_none_and_says_so_in_one_line(monkeypatch, caplog, value):
    installs = _counted(monkeypatch)
    monkeypatch.setenv(patches.ENV, value)
    caplog.set_level(logging.INFO)
    assert patches.enabled() is False
    assert patches.apply() == () and installs == []
    assert [r.getMessage() for r in caplog.records] == [
        "tfxflow: TFXFLOW_PATCHES=off: no library patch applied; Beam, dill and tf.Transform run as released"
    ]


@pytest.mark.parametrize("value", [None, "", "on", "1"])
def test_without_off_every_patch_at_a_checked_version_is_applied(monkeypatch, caplog, value):
    installs = _counted(monkeypatch)
    if value is None:
        monkeypatch.delenv(patches.ENV, raising=False)
    else:
        monkeypatch.setenv(patches.ENV, value)
    caplog.set_level(logging.INFO)
    names = [p.name for p in patches.PATCHES]
    assert list(patches.apply()) == names and installs == names
    assert caplog.records == []


@pytest.mark.parametrize(
    "executor, beam",
    [
        ("tfx.components.statistics_gen.executor.Executor", True),
        ("tfx.components.transform.executor.Executor", True),
        ("tfxflow.components.ingest.csv_input.Executor", True),
        ("tfxflow.components.training.transform.Executor", True),
        ("tfxflow.components.evaluation.evaluator.Executor", True),
        ("tfx.components.example_validator.executor.Executor", False),
        ("tfx.components.trainer.executor.GenericExecutor", False),
        ("tfx.components.pusher.executor.Executor", False),
    ],
)
def test_a_kubeflow_step_runs_beam_work_where_its_executor_is_a_beam_executor(executor, beam):
    assert patches.runs_beam(executor) is beam


SCRIPT = textwrap.dedent(
    """
    import glob, json, logging, os, tempfile
    import apache_beam as beam
    from apache_beam.internal import pickler
    import dill._dill as dill_module
    from tfxflow.pipeline import patches
    from tfxflow.pipeline.patches import beam as beam_patches

    levels = [0]
    # dill 0.4 wraps its logger in an adapter; Beam 2.7x pickles with cloudpickle, not dill, by default.
    dill_logger = getattr(dill_module.log, "logger", dill_module.log)
    original_set_level = dill_module.log.setLevel
    def counted_set_level(level):
        levels[0] += 1
        original_set_level(level)
    dill_module.log.setLevel = counted_set_level

    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

    class RunningSum(beam.DoFn):  # a stateful DoFn: its state parameter is what get_dofn_specs finds
        TOTAL = ReadModifyWriteStateSpec("total", VarIntCoder())

        def process(self, element, total=beam.DoFn.StateParam(TOTAL)):
            value = (total.read() or 0) + element[1]
            total.write(value)
            yield value

    def run():
        out = tempfile.mkdtemp()
        with beam.Pipeline() as p:
            side = p | "side" >> beam.Create([10, 20])
            (p | beam.Create([1, 2, 3])
               | beam.Map(lambda x, s: x + sum(s), s=beam.pvalue.AsList(side))
               | beam.io.WriteToText(os.path.join(out, "part")))
            (p | "keyed" >> beam.Create([("a", 1), ("a", 2), ("a", 4)])
               | beam.ParDo(RunningSum())
               | "sums" >> beam.io.WriteToText(os.path.join(out, "sums")))
        def read(prefix):
            return sorted(int(line) for name in glob.glob(os.path.join(out, prefix + "*")) for line in open(name))
        return read("part") + read("sums")

    def pickles():
        for i in range(50):
            pickler.loads(pickler.dumps({"i": i}))

    before = run(); pickles()
    counts = {"levels_before": levels[0]}
    applied = patches.apply(); patches.apply()
    levels[0] = 0
    after = run(); pickles()
    from apache_beam.runners.worker import statecache
    from apache_beam.transforms import core, userstate
    counts.update(applied=applied, levels_after=levels[0], before=before, after=after,
                  level=dill_logger.level, weigher=statecache.get_deep_size.__module__,
                  signatures=core.get_signature.__module__, specs=userstate.get_dofn_specs.__module__)
    dill_module._trace(True)
    counts["traced_level"] = dill_logger.level
    from apache_beam.internal import dill_pickler
    counts["pickles_with_dill"] = pickler.desired_pickle_lib is dill_pickler
    import bz2, zlib
    kinds = []
    for module in (bz2, zlib):  # how each payload is compressed, while the pipeline runs in this process
        def counted(data, *args, _original=module.compress, _name=module.__name__, **kwargs):
            kinds.append(f"{_name} {(list(args) + list(kwargs.values()) + ['default'])[0]}")
            return _original(data, *args, **kwargs)
        module.compress = counted
    with patches.payloads_in_process(True):
        counts["in_process"] = run()
    counts["in_process_kinds"] = sorted(set(kinds))
    kinds.clear()
    with patches.payloads_in_process(False):
        counts["for_remote_workers"] = run()
    counts["for_remote_workers_kinds"] = sorted(set(kinds))
    print(json.dumps(counts))
    """
)


@pytest.mark.integration
def test_a_pipeline_gives_the_same_results_without_setting_the_level_per_pickle():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    # The side input's sums, then the stateful DoFn's running sums of one key (1, 1+2, 1+2+4).
    assert counts["before"] == counts["after"] == [31, 32, 33, 1, 3, 7]
    # The same results with the payloads stored for this process (zlib's level 0), and for remote workers (bz2).
    assert counts["in_process"] == counts["for_remote_workers"] == counts["before"]
    # (Beam's coders are pickled with zlib at level 9 either way.)
    assert [k for k in counts["in_process_kinds"] if k != "zlib 9"] == [f"zlib {beam_patches.IN_PROCESS_LEVEL}"]
    assert [k for k in counts["for_remote_workers_kinds"] if k != "zlib 9"] == ["bz2 9"]
    if counts["pickles_with_dill"]:  # Beam 2.59
        # Beam as pinned: dill's level is set at every pickle and unpickle.
        assert counts["levels_before"] >= 100
        # Applied: the level is never set again (it is WARN already), and tracing still switches it.
        assert counts["levels_after"] == 0
        assert counts["level"] == 30  # logging.WARN
    assert counts["traced_level"] == 20  # logging.INFO: tracing still switches it
    assert counts["weigher"] == beam_patches.__name__  # installed where the state cache calls it
    assert counts["signatures"] == beam_patches.__name__  # and where DoFns' methods are read
    assert counts["specs"] == beam_patches.__name__  # and where their state and timers are found
    assert counts["applied"] == [p.name for p in patches.PATCHES]  # every patch, at the pinned versions
