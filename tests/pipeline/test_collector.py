"""pipeline/collector.py against Python's own collector: what the thresholds change, and that the local runner
runs under them and gives the process its settings back."""

import gc

import pytest

from tfxflow.pipeline import collector


def _young_collections(allocate) -> int:
    counted = []

    def count(phase, info):
        if phase == "start" and info["generation"] == 0:
            counted.append(1)

    gc.callbacks.append(count)
    try:
        allocate()
    finally:
        gc.callbacks.remove(count)
    return len(counted)


def _cycles(n=5_000):
    kept = []
    for _ in range(n):
        a, b = [], []
        a.append(b)
        b.append(a)
        kept.append(a)
    return kept


def test_the_thresholds_hold_inside_the_block_and_are_given_back():
    before = gc.get_threshold()
    with collector.pipeline_thresholds():
        assert gc.get_threshold() == collector.THRESHOLDS
        inside = _young_collections(_cycles)
    assert gc.get_threshold() == before
    gc.collect()
    outside = _young_collections(_cycles)
    # 10,000 objects of new lists: Python's 700 scans the youngest generation over and over, 10,000 at most once.
    assert inside <= 1 and outside >= 5, (inside, outside)
    with pytest.raises(RuntimeError), collector.pipeline_thresholds((123, 4, 5)):
        raise RuntimeError("a failed run")
    assert gc.get_threshold() == before


def test_garbage_cycles_are_still_collected():
    import weakref

    class Node:
        pass

    with collector.pipeline_thresholds():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        _cycles(25_000)  # enough allocations for the youngest generation's threshold
        assert gone() is None


def test_the_local_runner_runs_the_pipeline_under_the_thresholds(monkeypatch):
    from tfxflow.pipeline.local import runner

    seen = []
    monkeypatch.setattr(runner, "_run_local", lambda config, out, fingerprint: seen.append(gc.get_threshold()))
    before = gc.get_threshold()
    runner.run_local(config=None)
    assert seen == [collector.THRESHOLDS]
    assert gc.get_threshold() == before
