"""A SearxNG stand-in speaking its JSON API: ``GET /search?q=...&format=json``."""

from __future__ import annotations

import json
from typing import Any

from tests.tools.servers.base import LocalServer, Reply, Request


def result(title: str, url: str, content: str) -> dict[str, Any]:
    return {"title": title, "url": url, "content": content, "engine": "fake", "score": 1.0}


class SearxngServer(LocalServer):
    """Answers ``/search`` with ``results`` (when ``format=json``), or with ``reply`` verbatim
    when a test sets one (errors, malformed bodies, delays)."""

    def __init__(self, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.results = results or []
        self.reply: Reply | None = None
        self.route("GET", "/search", self._search)

    def _search(self, request: Request) -> Reply:
        if self.reply is not None:
            return self.reply
        if request.query.get("format") != ["json"]:
            return Reply(403, b"<html>format not allowed</html>", {"Content-Type": "text/html"})
        query = request.query.get("q", [""])[0]
        body = {
            "query": query,
            "number_of_results": len(self.results),
            "results": self.results,
            "answers": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
        return Reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
