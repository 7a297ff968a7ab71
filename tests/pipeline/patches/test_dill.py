"""pipeline/patches/dill.py against the pinned dill and Beam: Beam's dill pickler still sets dill's level after
every pickle and unpickle, through the names the patch replaces."""

import inspect

from tfxflow.pipeline.patches import dill as dill_patch


def test_the_pinned_beam_still_sets_dills_level_after_every_pickle():
    from apache_beam.internal import dill_pickler

    pickler = inspect.getsource(dill_pickler)
    assert pickler.count("dill.dill._trace(False)") == 2  # after every dumps and every loads


def test_the_names_the_patch_replaces_are_dills():
    import dill._dill as dill_module

    assert callable(getattr(dill_module, dill_patch.TRACE))
    log = dill_module.log
    assert callable(log.setLevel) and hasattr(getattr(log, "logger", log), "level")
