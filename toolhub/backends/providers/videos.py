"""Video generation as a submit-then-poll job: the ``VideoProvider`` protocol and a client for
the OpenAI-style videos API.

Wire format (mirrors OpenAI's ``/v1/videos``; see docs/tools-network-media.md)::

    POST   {base}/videos              multipart: model, prompt, seconds[, input_reference=<image>]
                                      → {"id", "status", "progress"?}
    GET    {base}/videos/{id}         → {"id", "status": queued|in_progress|completed|failed,
                                         "progress"?: 0-100, "error"?: {"message"}}
    GET    {base}/videos/{id}/content → the video bytes (MP4)
    DELETE {base}/videos/{id}         → cancel / delete the job
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from toolhub.backends.http import JsonApi

URL_ENV = "TOOLHUB_VIDEO_BASE_URL"
KEY_ENV = "TOOLHUB_VIDEO_API_KEY"
MODEL_ENV = "TOOLHUB_VIDEO_MODEL"
DEFAULT_MODEL = "sora-2"

RUNNING = frozenset({"queued", "in_progress"})
FINISHED = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class VideoJob:
    id: str
    status: str
    progress: float | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True, slots=True)
class InputImage:
    data: bytes
    mime_type: str
    filename: str


def sniff_video(data: bytes) -> tuple[str, str] | None:
    """(mime type, extension) of an MP4/QuickTime or WebM body, else None."""
    if data[4:8] == b"ftyp":
        return ("video/quicktime", ".mov") if data[8:10] == b"qt" else ("video/mp4", ".mp4")
    if data.startswith(b"\x1aE\xdf\xa3"):
        return "video/webm", ".webm"
    return None


class VideoProvider(Protocol):
    """A job API for videos. Each method raises ``ToolError`` for upstream failures."""

    async def submit(self, prompt: str, *, seconds: int, image: InputImage | None) -> VideoJob: ...

    async def status(self, job_id: str) -> VideoJob: ...

    async def content(self, job_id: str) -> bytes: ...

    async def cancel(self, job_id: str) -> None: ...


class OpenAIVideos:
    """The videos job API described in the module docstring. ``api`` bounds each request;
    ``content_api`` (same endpoint, larger body cap) downloads the finished video."""

    def __init__(self, api: JsonApi, content_api: JsonApi, model: str = DEFAULT_MODEL) -> None:
        self.api = api
        self.content_api = content_api
        self.model = model

    @classmethod
    def from_env(
        cls,
        *,
        timeout_s: float,
        max_video_bytes: int,
        env: Mapping[str, str] | None = None,
    ) -> OpenAIVideos | None:
        """Configured by ``TOOLHUB_VIDEO_BASE_URL``, ``_API_KEY`` and ``_MODEL``; None when no
        base URL is set."""
        env = os.environ if env is None else env
        base = env.get(URL_ENV, "").strip()
        if not base:
            return None
        key = env.get(KEY_ENV) or None
        api = JsonApi("the video API", base, key, timeout_s, 1024 * 1024)
        content = JsonApi("the video API", base, key, timeout_s, max_video_bytes)
        return cls(api, content, env.get(MODEL_ENV) or DEFAULT_MODEL)

    async def submit(self, prompt: str, *, seconds: int, image: InputImage | None) -> VideoJob:
        # (None, value) parts force multipart/form-data even when no file is attached.
        form: dict[str, Any] = {
            "model": (None, self.model),
            "prompt": (None, prompt),
            "seconds": (None, str(seconds)),
        }
        if image is not None:
            form["input_reference"] = (image.filename, image.data, image.mime_type)
        async with self.api.client() as client:
            data = await self.api.request_json(client, "POST", "videos", files=form)
        return self._job(data)

    async def status(self, job_id: str) -> VideoJob:
        async with self.api.client() as client:
            data = await self.api.request_json(client, "GET", f"videos/{quote(job_id, safe='')}")
        return self._job(data)

    async def content(self, job_id: str) -> bytes:
        path = f"videos/{quote(job_id, safe='')}/content"
        async with self.content_api.client() as client:
            return await self.content_api.request(client, "GET", path)

    async def cancel(self, job_id: str) -> None:
        async with self.api.client() as client:
            await self.api.request(client, "DELETE", f"videos/{quote(job_id, safe='')}")

    def _job(self, data: Mapping[str, Any]) -> VideoJob:
        job_id, status = data.get("id"), data.get("status")
        if not isinstance(job_id, str) or not job_id:
            raise self.api.malformed("the job has no `id`")
        if status not in RUNNING | FINISHED:
            raise self.api.malformed(f"unknown job status {status!r}")
        progress = data.get("progress")
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return VideoJob(
            id=job_id,
            status=str(status),
            progress=float(progress) if isinstance(progress, int | float) else None,
            error=message if isinstance(message, str) else None,
        )
