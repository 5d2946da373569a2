"""The searchable catalogue of external tools behind ``search_tool`` and ``use_tool``.

A large external surface (many MCP servers) is not sent to the model as definitions; the model
finds tools with ``search_tool`` and calls them through ``use_tool``. The tool set keeps this
index current as external tools are registered and unregistered.

Ranking is a small BM25 over the tool's name (weighted highest), its parameter names and its
description, with an exact-name and name-prefix bonus: good enough for a few thousand tools and
free of dependencies.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

NAME_WEIGHT = 3
PARAM_WEIGHT = 2
_TOKEN = re.compile(r"[a-z0-9]+")
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True, slots=True)
class ToolEntry:
    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EnabledToolNames:
    """The client names of the enabled built-in tools (so ``use_tool`` can tell the model to
    call a native tool directly instead of through it)."""

    names: frozenset[str]


@runtime_checkable
class ToolIndex(Protocol):
    def search(self, query: str, limit: int) -> list[ToolEntry]:
        """The best ``limit`` matches, best first; empty for an empty query or no match."""
        ...

    def get(self, name: str) -> ToolEntry | None: ...

    def __len__(self) -> int: ...


class InMemoryToolIndex:
    """``ToolIndex`` held in memory; ``add``/``remove`` are thread-safe."""

    def __init__(self) -> None:
        self._entries: dict[str, ToolEntry] = {}
        self._terms: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def add(self, entry: ToolEntry) -> None:
        terms: Counter[str] = Counter()
        for token in _tokens(entry.name):
            terms[token] += NAME_WEIGHT
        for prop in entry.input_schema.get("properties", {}):
            for token in _tokens(prop):
                terms[token] += PARAM_WEIGHT
        terms.update(_tokens(entry.description))
        with self._lock:
            self._entries[entry.name] = entry
            self._terms[entry.name] = terms

    def remove(self, name: str) -> bool:
        with self._lock:
            self._terms.pop(name, None)
            return self._entries.pop(name, None) is not None

    def get(self, name: str) -> ToolEntry | None:
        with self._lock:
            return self._entries.get(name)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def search(self, query: str, limit: int) -> list[ToolEntry]:
        words = set(_tokens(query))
        if not words or limit <= 0:
            return []
        with self._lock:
            docs = dict(self._terms)
            entries = dict(self._entries)
        if not docs:
            return []
        avg_len = sum(sum(t.values()) for t in docs.values()) / len(docs)
        scores: dict[str, float] = {}
        for word in words:
            holders = [name for name, terms in docs.items() if word in terms]
            if not holders:
                continue
            idf = math.log(1 + (len(docs) - len(holders) + 0.5) / (len(holders) + 0.5))
            for name in holders:
                tf = docs[name][word]
                norm = tf + _K1 * (1 - _B + _B * sum(docs[name].values()) / avg_len)
                scores[name] = scores.get(name, 0.0) + idf * tf * (_K1 + 1) / norm
        phrase = query.strip().lower()
        for name in scores:
            lowered = name.lower()
            if lowered == phrase or lowered.split("__")[-1] == phrase:
                scores[name] += 10.0
            elif phrase and phrase in lowered:
                scores[name] += 2.0
        ranked = sorted(scores, key=lambda n: (-scores[n], n))
        return [entries[name] for name in ranked[:limit]]


def _tokens(text: str) -> list[str]:
    """Lower-case words; ``snake_case``, ``camelCase`` and ``server__tool`` split apart."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)
    return _TOKEN.findall(spaced.lower())
