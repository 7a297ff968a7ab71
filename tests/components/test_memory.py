"""Freed memory given back to the system (components/memory.py)."""

import psutil

from tfxflow.components import memory


def test_blocks_freed_around_kept_ones_go_back_to_the_system():
    """glibc keeps freed blocks in its heap for reuse: buffers of 1 KB (malloc's, not Python's small-object pools)
    freed around a few kept ones stay resident until `malloc_trim`."""
    kept, freed = [], []
    for i in range(300_000):
        (kept if i % 50 == 0 else freed).append(bytes(1000))
    del freed
    before = psutil.Process().memory_info().rss
    assert memory.give_back_free_memory() is True
    assert before - psutil.Process().memory_info().rss > 150 * 2**20  # of the 280 MB freed
    assert len(kept) == 6_000
