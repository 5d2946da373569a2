"""Stand-ins for the OpenAI-compatible images API and the videos job API (their wire formats,
as documented in docs/tools-network-media.md)."""

from __future__ import annotations

import base64
import json
import threading
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from tests.tools.servers.base import LocalServer, Reply, Request

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
MP4 = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64
JSON = {"Content-Type": "application/json"}


def json_reply(data: Any, status: int = 200) -> Reply:
    return Reply(status, json.dumps(data).encode(), JSON)


class ImagesServer(LocalServer):
    """``POST /v1/images/generations`` → ``{"data": [{"b64_json": ...}]}``; ``reply`` overrides."""

    def __init__(self, image: bytes = PNG) -> None:
        super().__init__()
        self.image = image
        self.reply: Reply | None = None
        self.route("POST", "/v1/images/generations", self._generate)

    def _generate(self, request: Request) -> Reply:
        if self.reply is not None:
            return self.reply
        body = json.loads(request.body)
        if body.get("response_format") != "b64_json" or not body.get("prompt"):
            return json_reply({"error": {"message": "bad request"}}, 400)
        encoded = base64.b64encode(self.image).decode()
        return json_reply({"created": 1, "data": [{"b64_json": encoded, "revised_prompt": "r"}]})


def multipart_fields(request: Request) -> dict[str, tuple[str | None, bytes]]:
    """name → (filename, bytes) of a multipart/form-data body."""
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


class VideosServer(LocalServer):
    """A job API: each status poll advances a job by ``step`` percent until 100 (completed), or
    until ``fail_at`` (failed). ``deleted`` records DELETEs."""

    def __init__(self, step: int = 50, fail_at: int | None = None) -> None:
        super().__init__()
        self.step = step
        self.fail_at = fail_at
        self.jobs: dict[str, int] = {}
        self.submitted: list[dict[str, tuple[str | None, bytes]]] = []
        self.deleted: list[str] = []
        self.status_reply: Reply | None = None
        self.content = MP4
        self._lock = threading.Lock()
        self.route("POST", "/v1/videos", self._submit)

    def _submit(self, request: Request) -> Reply:
        fields = multipart_fields(request)
        if "prompt" not in fields or "seconds" not in fields:
            return json_reply({"error": {"message": "prompt and seconds are required"}}, 400)
        with self._lock:
            job_id = f"video_{len(self.jobs) + 1}"
            self.jobs[job_id] = 0
            self.submitted.append(fields)
        self.route("GET", f"/v1/videos/{job_id}", lambda r: self._status(job_id))
        self.route("GET", f"/v1/videos/{job_id}/content", lambda r: Reply(200, self.content))
        self.route("DELETE", f"/v1/videos/{job_id}", lambda r: self._delete(job_id))
        return json_reply({"id": job_id, "object": "video", "status": "queued", "progress": 0})

    def _status(self, job_id: str) -> Reply:
        if self.status_reply is not None:
            return self.status_reply
        with self._lock:
            self.jobs[job_id] = min(100, self.jobs[job_id] + self.step)
            progress = self.jobs[job_id]
        if self.fail_at is not None and progress >= self.fail_at:
            error = {"code": "moderation", "message": "prompt rejected"}
            return json_reply(
                {"id": job_id, "status": "failed", "progress": progress, "error": error}
            )
        status = "completed" if progress >= 100 else "in_progress"
        return json_reply({"id": job_id, "status": status, "progress": progress})

    def _delete(self, job_id: str) -> Reply:
        self.deleted.append(job_id)
        return json_reply({"id": job_id, "deleted": True})
