"""Image generation: the ``ImageProvider`` protocol and an OpenAI-compatible client.

Wire format (OpenAI's images API, also served by many compatible gateways)::

    POST {base}/images/generations
         {"model": ..., "prompt": ..., "size": "1024x1024", "response_format": "b64_json", "n": 1}
    200  {"created": ..., "data": [{"b64_json": "<base64 image>", "revised_prompt"?: ...}]}
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from toolhub.backends.http import JsonApi

URL_ENV = "TOOLHUB_IMAGES_BASE_URL"
KEY_ENV = "TOOLHUB_IMAGES_API_KEY"
MODEL_ENV = "TOOLHUB_IMAGES_MODEL"
DEFAULT_MODEL = "gpt-image-1"

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"GIF87a", "image/gif", ".gif"),
    (b"GIF89a", "image/gif", ".gif"),
)


def sniff_image(data: bytes) -> tuple[str, str] | None:
    """(mime type, file extension) from the magic bytes, or None when not an image we know."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", ".webp"
    for signature, mime, ext in _SIGNATURES:
        if data.startswith(signature):
            return mime, ext
    return None


@dataclass(frozen=True, slots=True)
class GeneratedImage:
    data: bytes
    mime_type: str
    extension: str
    revised_prompt: str | None = None


class ImageProvider(Protocol):
    """Prompt → one image. Raises ``ToolError`` for upstream failures."""

    async def generate(self, prompt: str, *, size: str) -> GeneratedImage: ...


class OpenAIImages:
    """The OpenAI-compatible images API (see the module docstring for the wire format)."""

    def __init__(self, api: JsonApi, model: str = DEFAULT_MODEL) -> None:
        self.api = api
        self.model = model

    @classmethod
    def from_env(
        cls, *, timeout_s: float, max_body_bytes: int, env: Mapping[str, str] | None = None
    ) -> OpenAIImages | None:
        """Configured by ``TOOLHUB_IMAGES_BASE_URL``, ``_API_KEY`` and ``_MODEL``; None when no
        base URL is set."""
        env = os.environ if env is None else env
        base = env.get(URL_ENV, "").strip()
        if not base:
            return None
        api = JsonApi("the images API", base, env.get(KEY_ENV) or None, timeout_s, max_body_bytes)
        return cls(api, env.get(MODEL_ENV) or DEFAULT_MODEL)

    async def generate(self, prompt: str, *, size: str) -> GeneratedImage:
        body = {
            "model": self.model,
            "prompt": prompt,
            "size": size,
            "response_format": "b64_json",
            "n": 1,
        }
        async with self.api.client() as client:
            data = await self.api.request_json(client, "POST", "images/generations", json=body)
        items = data.get("data")
        first = items[0] if isinstance(items, list) and items else None
        encoded = first.get("b64_json") if isinstance(first, dict) else None
        if not isinstance(encoded, str):
            raise self.api.malformed("no `data[0].b64_json` in the answer")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise self.api.malformed("`b64_json` is not valid base64") from None
        kind = sniff_image(raw)
        if kind is None:
            raise self.api.malformed("`b64_json` does not decode to a PNG, JPEG, GIF or WebP")
        revised = first.get("revised_prompt") if isinstance(first, dict) else None
        return GeneratedImage(raw, kind[0], kind[1], revised if isinstance(revised, str) else None)
