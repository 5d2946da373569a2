"""How many examples a property-based test tries: ``make test`` runs the bounded count, ``make
test-long`` (``TOOLHUB_FUZZ_LONG=1``) the long one. Both draw from the same strategies, so the
bounded run asserts the same properties on fewer inputs; the long run is the one to make before
merging a change to what the properties cover."""

from __future__ import annotations

import os

LONG = os.environ.get("TOOLHUB_FUZZ_LONG", "") == "1"


def examples(bounded: int, long: int) -> int:
    """``long`` under ``TOOLHUB_FUZZ_LONG=1``, else ``bounded``."""
    return long if LONG else bounded
