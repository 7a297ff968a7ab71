"""pipeline/beam_speedups.py against the pinned Beam: what it changes is still where it was, and a real Beam
pipeline gives the same results without setting dill's logger level at every pickle."""

import inspect
import json
import subprocess
import sys
import textwrap

import pytest


def test_the_pinned_beam_still_sets_dills_level_after_every_pickle():
    from apache_beam.internal import dill_pickler

    pickler = inspect.getsource(dill_pickler)
    assert pickler.count("dill.dill._trace(False)") == 2  # after every dumps and every loads


# Runs in a fresh interpreter: apply() changes the process it runs in.
SCRIPT = textwrap.dedent(
    """
    import glob, json, logging, os, tempfile
    import apache_beam as beam
    from apache_beam.internal import pickler
    import dill._dill as dill_module
    from tfxflow.pipeline import beam_speedups

    levels = [0]
    original_set_level = dill_module.log.setLevel
    def counted_set_level(level):
        levels[0] += 1
        original_set_level(level)
    dill_module.log.setLevel = counted_set_level

    def run():
        out = tempfile.mkdtemp()
        with beam.Pipeline() as p:
            side = p | "side" >> beam.Create([10, 20])
            (p | beam.Create([1, 2, 3])
               | beam.Map(lambda x, s: x + sum(s), s=beam.pvalue.AsList(side))
               | beam.io.WriteToText(os.path.join(out, "part")))
        return sorted(int(line) for name in glob.glob(os.path.join(out, "part*")) for line in open(name))

    def pickles():
        for i in range(50):
            pickler.loads(pickler.dumps({"i": i}))

    before = run(); pickles()
    counts = {"levels_before": levels[0]}
    beam_speedups.apply(); beam_speedups.apply()
    levels[0] = 0
    after = run(); pickles()
    counts.update(levels_after=levels[0], before=before, after=after,
                  level=dill_module.log.level)
    dill_module._trace(True)
    counts["traced_level"] = dill_module.log.level
    print(json.dumps(counts))
    """
)


@pytest.mark.integration
def test_a_pipeline_gives_the_same_results_without_setting_the_level_per_pickle():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["before"] == counts["after"] == [31, 32, 33]
    # Beam as pinned: dill's level is set at every pickle and unpickle.
    assert counts["levels_before"] >= 100
    # Applied: the level is never set again (it is WARN already), and tracing still switches it.
    assert counts["levels_after"] == 0
    assert counts["level"] == 30 and counts["traced_level"] == 20  # logging.WARN, logging.INFO
