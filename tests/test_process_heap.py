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
