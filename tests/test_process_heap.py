"""``freeze_startup_heap``: what is alive is frozen out of later collections, startup garbage is
collected first (not frozen), and cycles made afterwards are still collected. Run in a child
process: freezing the test process's own heap would outlive the test."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import gc, weakref
from toolhub.process_heap import freeze_startup_heap

class Node:
    pass

kept = Node()
garbage = Node()
garbage.self = garbage  # a cycle: only the collector frees it
gone = weakref.ref(garbage)
del garbage

frozen = freeze_startup_heap()
assert frozen == gc.get_freeze_count() > 0, frozen
assert gone() is None, "startup garbage was frozen instead of collected"
assert not any(obj is kept for obj in gc.get_objects()), "a startup object is still scanned"

later = Node()
later.self = later
later_ref = weakref.ref(later)
del later
gc.collect()
assert later_ref() is None, "a cycle made after the freeze was not collected"
print("ok", frozen)
"""


def test_freeze_startup_heap_in_a_fresh_process() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


SPACING = """
import gc, sys, weakref
from toolhub.process_heap import FULL_COLLECTION_SPACING, space_full_collections

class Node:
    pass

if sys.argv[1] == "spaced":
    space_full_collections()
    assert gc.get_threshold()[2] == FULL_COLLECTION_SPACING
gc.collect()
full_before = gc.get_stats()[2]["collections"]
# What a gateway does as streams attach: many objects that live on and reach the old
# generation, then churn that only the young collections see.
kept = [Node() for _ in range(50_000)]
short = []
for i in range(300_000):
    node = Node()
    node.self = node  # a cycle: only a collection frees it
    if i == 0:
        short.append(weakref.ref(node))
    del node
assert short[0]() is None, "a short-lived cycle waited for a full collection"
print(gc.get_stats()[2]["collections"] - full_before)
"""


def test_full_collections_are_spaced_and_young_cycles_still_freed() -> None:
    """With CPython's default a full collection comes as soon as the survivors are a quarter of
    the old generation; spaced, none comes in the same run, and short-lived cycles are freed
    by the young collections all the same."""

    def full_collections(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", SPACING, mode], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    assert full_collections("default") >= 1
    assert full_collections("spaced") == 0
