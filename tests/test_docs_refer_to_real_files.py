"""The docs point only at what is in the repository (issue 16): every relative link resolves,
every code path they name in backticks (``toolhub/…``, ``workers/…``, ``tests/…``,
``bench/…``, ``docs/…``) exists, and none cites the design documents that are not shipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        *(REPO / "docs").glob("*.md"),
        REPO / "compose" / "README.md",
        REPO / "helm" / "toolhub" / "README.md",
    ]
)
NOT_SHIPPED = ("CONTRACT.md", "ARCHITECTURE.md", "peers-and-pitfalls", "seed-tool-system")
#: Named on purpose although not in the repository: what the user creates.
USER_FILES = {"compose/.env", "compose/keys/keys.json"}
_TOP = "toolhub|workers|tests|bench|docs|compose|helm"
PATH = re.compile(rf"`((?:{_TOP})/[\w./-]+?)(?:::[\w\[\]-]+)?`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_a_doc_names_only_real_files(doc: Path) -> None:
    text = doc.read_text()
    missing = []
    for target in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (doc.parent / target).exists():
            missing.append(target)
    # The changelog names old paths on purpose ("… was toolhub/store/redis.py").
    for path in PATH.findall(text) if doc.name != "CHANGELOG.md" else []:
        candidate = REPO / path.rstrip(".")
        if "<" in path or "*" in path or path in USER_FILES:
            continue
        if not candidate.exists() and not candidate.with_suffix(".py").exists():
            missing.append(path)
    assert not missing, f"{doc.name} names what is not in the repository: {missing}"
    cited = [name for name in NOT_SHIPPED if name in text]
    assert not cited, f"{doc.name} cites documents that are not shipped: {cited}"
