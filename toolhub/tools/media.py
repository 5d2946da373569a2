"""Media generation tools: ``image_gen``, ``video_gen`` and ``image_to_video``.

Generated files land in the workspace (``generated/<call_id>.<ext>``, written atomically) so the
other tools can use them. Everything the call can check is checked before the provider is
asked (paths, input image, duration): a bad call costs nothing and writes nothing. Video jobs
stream one progress item per poll, stop polling the moment the call is cancelled, and are
deleted upstream (best effort) when cancelled or out of time.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolhub.backends.http import cancellable
from toolhub.backends.providers.images import ImageProvider, OpenAIImages, sniff_image
from toolhub.backends.providers.videos import (
    InputImage,
    OpenAIVideos,
    VideoJob,
    VideoProvider,
    sniff_video,
)
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import (
    ContentBlock,
    ErrorKind,
    Params,
    Progress,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
)
from toolhub.errors import ErrorCode

CANCEL_GRACE_S = 5.0

# -- shared ----------------------------------------------------------------------------------------


def output_path(workspace: Workspace, directory: str, call_id: str, extension: str) -> Path:
    """A fresh file for this call's result inside the workspace (never overwrites)."""
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", call_id).strip("_") or "media"
    folder = workspace.resolve(directory, what="output directory")
    candidate, n = folder / f"{stem}{extension}", 1
    while workspace.kind(candidate) is not None:
        candidate, n = folder / f"{stem}-{n}{extension}", n + 1
    return workspace.resolve(candidate, what="output file")


class ImageBlock(BaseModel):
    """The image as a content block (``ContentBlock`` fields), for clients that show images."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str
    path: str

    def content_block(self) -> ContentBlock:
        return ContentBlock("image", data=self.data, mime_type=self.mime_type, path=self.path)


# -- image_gen -------------------------------------------------------------------------------------


class ImageGenParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(180.0, gt=0)
    max_body_bytes: int = Field(64 * 1024 * 1024, gt=0)
    default_size: str = "1024x1024"
    output_dir: str = "generated"


class ImageGenArgs(BaseModel):
    prompt: str = Field(min_length=1, description="What the image should show.")
    size: str | None = Field(
        None,
        pattern=r"^(auto|[1-9][0-9]{1,4}x[1-9][0-9]{1,4})$",
        description="WIDTHxHEIGHT such as 1024x1024, or `auto`.",
    )


class ImageGenOutput(BaseModel):
    path: str
    mime_type: str
    bytes: int
    size: str
    revised_prompt: str | None = None
    image: ImageBlock

    def model_text(self) -> str:
        text = f"Generated image saved to {self.path} ({self.mime_type}, {self.size}, "
        text += f"{self.bytes} bytes)."
        if self.revised_prompt:
            text += f"\nRevised prompt: {self.revised_prompt}"
        return text

    def content_blocks(self) -> list[ContentBlock]:
        return [self.image.content_block()]


class ImageGen(Tool[ImageGenArgs, ImageGenOutput]):
    id = "image_gen"
    kind = ToolKind.IMAGE_GEN
    params_model = ImageGenParams
    description_template = (
        "Generate an image from a text prompt. The image is saved in the workspace (its path is "
        "returned) and shown to you."
    )

    async def run(self, ctx: ToolContext, args: ImageGenArgs) -> ImageGenOutput:
        params = ctx.container.get_or_default(Params[ImageGenParams])
        workspace = ctx.container.require(Workspace)
        workspace.resolve(params.output_dir, what="output directory")
        provider = ctx.container.get(ImageProvider)
        if provider is None:
            provider = OpenAIImages.from_env(
                timeout_s=params.timeout_s, max_body_bytes=params.max_body_bytes
            )
            if provider is None:
                raise _not_configured("image generation", "TOOLHUB_IMAGES_BASE_URL")
            ctx.container.insert(provider, ImageProvider)
        size = args.size or params.default_size
        image = await cancellable(ctx.cancel, provider.generate(args.prompt, size=size))
        target = output_path(workspace, params.output_dir, ctx.call_id, image.extension)
        workspace.write(target, image.data)
        shown = workspace.display(target)
        return ImageGenOutput(
            path=shown,
            mime_type=image.mime_type,
            bytes=len(image.data),
            size=size,
            revised_prompt=image.revised_prompt,
            image=ImageBlock(
                data=base64.b64encode(image.data).decode("ascii"),
                mime_type=image.mime_type,
                path=shown,
            ),
        )


def _not_configured(what: str, variable: str) -> ToolError:
    return ToolError.custom(ErrorCode.NOT_CONFIGURED, f"{what} is not configured: set {variable}")


# -- video_gen / image_to_video --------------------------------------------------------------------


class VideoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    poll_interval_s: float = Field(5.0, gt=0)
    max_wait_s: float = Field(900.0, gt=0, description="Give up (and delete the job) after this.")
    request_timeout_s: float = Field(60.0, gt=0)
    max_video_bytes: int = Field(512 * 1024 * 1024, gt=0)
    max_image_bytes: int = Field(20 * 1024 * 1024, gt=0)
    default_duration_s: int = Field(4, ge=1)
    max_duration_s: int = Field(20, ge=1)
    output_dir: str = "generated"


class VideoArgs(BaseModel):
    prompt: str = Field(min_length=1, description="What the video should show.")
    image: str | None = Field(None, description="Workspace path of a starting image.")
    duration_s: int | None = Field(None, ge=1, description="Length of the video in seconds.")


class VideoOutput(BaseModel):
    path: str
    mime_type: str
    bytes: int
    job_id: str
    duration_s: int

    def model_text(self) -> str:
        return (
            f"Generated a {self.duration_s} s video saved to {self.path} "
            f"({self.mime_type}, {self.bytes} bytes; job {self.job_id})."
        )


class _VideoTool(Tool[VideoArgs, VideoOutput]):
    """The job loop shared by ``video_gen`` and ``image_to_video``."""

    params_model = VideoParams
    workload = "background"
    needs_image: ClassVar[bool] = False

    async def execute(
        self, ctx: ToolContext, args: VideoArgs
    ) -> AsyncIterator[Progress | VideoOutput]:
        params = ctx.container.get_or_default(Params[VideoParams])
        workspace = ctx.container.require(Workspace)
        workspace.resolve(params.output_dir, what="output directory")
        seconds = args.duration_s or params.default_duration_s
        if seconds > params.max_duration_s:
            raise ToolError.invalid_arguments(
                f"`{ctx.param_name('duration_s')}` is at most {params.max_duration_s} seconds"
            )
        if self.needs_image and not args.image:
            raise ToolError.invalid_arguments(f"`{ctx.param_name('image')}` is required")
        image = load_image(workspace, args.image, params.max_image_bytes) if args.image else None
        provider = video_provider(ctx, params)
        job = await cancellable(
            ctx.cancel, provider.submit(args.prompt, seconds=seconds, image=image)
        )
        started = time.monotonic()
        yield _progress(job, 0.0)
        try:
            while not job.done:
                left = params.max_wait_s - (time.monotonic() - started)
                if left <= 0:
                    raise ToolError.timeout(
                        f"video job {job.id} did not finish within {params.max_wait_s:g} s "
                        f"(last status: {job.status})",
                        job_id=job.id,
                    )
                if await ctx.cancel.wait(min(params.poll_interval_s, left)):
                    raise ToolError.cancelled()
                job = await cancellable(ctx.cancel, provider.status(job.id))
                yield _progress(job, time.monotonic() - started)
            if job.status != "completed":
                raise ToolError.execution(
                    f"video job {job.id} {job.status}: {job.error or 'no reason given'}",
                    code=ErrorCode.JOB_FAILED,
                    job_id=job.id,
                )
            data = await cancellable(ctx.cancel, provider.content(job.id))
        except ToolError as err:
            if err.kind in (ErrorKind.CANCELLED, ErrorKind.TIMEOUT):
                await _discard(provider, job.id)
            raise
        kind = sniff_video(data)
        if kind is None:
            raise ToolError.execution(
                f"video job {job.id} returned content that is not MP4 or WebM",
                code=ErrorCode.BAD_UPSTREAM_RESPONSE,
            )
        target = output_path(workspace, params.output_dir, ctx.call_id, kind[1])
        workspace.write(target, data)
        yield VideoOutput(
            path=workspace.display(target),
            mime_type=kind[0],
            bytes=len(data),
            job_id=job.id,
            duration_s=seconds,
        )


def _progress(job: VideoJob, elapsed_s: float) -> Progress:
    payload = {"job_id": job.id, "status": job.status, "progress": job.progress}
    return Progress.custom("media_job", {**payload, "elapsed_s": round(elapsed_s, 3)})


async def _discard(provider: VideoProvider, job_id: str) -> None:
    """Best effort: a job nobody will collect should not keep running (and billing) upstream."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(provider.cancel(job_id), CANCEL_GRACE_S)


def load_image(workspace: Workspace, path: str, limit: int) -> InputImage:
    file = workspace.resolve(path, what="image")
    try:
        data = workspace.read_bytes(file, limit=limit)
    except FileNotFoundError:
        raise ToolError.not_found(f"image `{path}` does not exist", path=path) from None
    except (IsADirectoryError, SpecialFileError):
        raise ToolError.invalid_arguments(f"image `{path}` is not a regular file") from None
    kind = sniff_image(data)
    if kind is None:
        raise ToolError.invalid_arguments(f"`{path}` is not a PNG, JPEG, GIF or WebP image")
    return InputImage(data, kind[0], file.name)


def video_provider(ctx: ToolContext, params: VideoParams) -> VideoProvider:
    provider = ctx.container.get(VideoProvider)
    if provider is None:
        provider = OpenAIVideos.from_env(
            timeout_s=params.request_timeout_s, max_video_bytes=params.max_video_bytes
        )
        if provider is None:
            raise _not_configured("video generation", "TOOLHUB_VIDEO_BASE_URL")
        ctx.container.insert(provider, VideoProvider)
    return provider


class VideoGen(_VideoTool):
    id = "video_gen"
    kind = ToolKind.VIDEO_GEN
    description_template = (
        "Generate a short video from a text prompt (optionally starting from a workspace image). "
        "Takes minutes; progress is streamed. The video is saved in the workspace."
    )


class ImageToVideo(_VideoTool):
    id = "image_to_video"
    kind = ToolKind.IMAGE_TO_VIDEO
    needs_image = True
    description_template = (
        "Animate an image from the workspace into a short video, guided by a text prompt. Takes "
        "minutes; progress is streamed. The video is saved in the workspace."
    )


TOOLS: list[type[Tool[Any, Any]]] = [ImageGen, VideoGen, ImageToVideo]
