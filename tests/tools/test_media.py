"""image_gen, video_gen and image_to_video against local servers speaking the real wire formats."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import seconds_until
from tests.tools.servers.base import Reply
from tests.tools.servers.drive import call, snapshot
from tests.tools.servers.media import MP4, PNG, ImagesServer, VideosServer, json_reply
from toolhub.backends.http import JsonApi
from toolhub.backends.providers.images import ImageProvider, OpenAIImages
from toolhub.backends.providers.videos import OpenAIVideos, VideoProvider
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, Outcome, Params, ToolContext
from toolhub.tools.media import (
    ImageGen,
    ImageGenOutput,
    ImageGenParams,
    ImageToVideo,
    VideoGen,
    VideoOutput,
    VideoParams,
)


def error_of(outcome: Outcome) -> tuple[ErrorKind, str | None]:
    assert outcome.error is not None, outcome.output
    return outcome.error.kind, outcome.error.code


# -- image_gen ----------------------------------------------------------------------------------


@pytest.fixture
def images() -> Iterator[ImagesServer]:
    with ImagesServer() as srv:
        yield srv


def image_ctx(tmp_path: Path, srv: ImagesServer, call_id: str = "c1", **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(tmp_path))
    settings = ImageGenParams(**params)
    container.insert(settings, Params[ImageGenParams])
    api = JsonApi(
        "the images API", srv.url("/v1"), "img-key", settings.timeout_s, settings.max_body_bytes
    )
    container.insert(OpenAIImages(api, "test-model"), ImageProvider)
    return ToolContext(call_id=call_id, container=container)


def test_image_is_generated_saved_and_returned(tmp_path: Path, images: ImagesServer) -> None:
    ctx = image_ctx(tmp_path, images)
    _, out = call(ImageGen(), ctx, {"prompt": "a red fox", "size": "512x512"})
    assert out.error is None and out.output is not None
    result = out.output.parse(ImageGenOutput)
    assert result.path == "generated/c1.png" and result.mime_type == "image/png"
    assert (tmp_path / "generated/c1.png").read_bytes() == PNG
    block = result.image.content_block()
    assert block.type == "image" and base64.b64decode(block.data or "") == PNG
    body = json.loads(images.requests[0].body)
    assert body == {
        "model": "test-model",
        "prompt": "a red fox",
        "size": "512x512",
        "response_format": "b64_json",
        "n": 1,
    }
    assert images.requests[0].headers["authorization"] == "Bearer img-key"
    assert out.text.startswith("Generated image saved to generated/c1.png (image/png, 512x512")
    _, again = call(ImageGen(), ctx, {"prompt": "another"})
    assert (
        again.output is not None and again.output.parse(ImageGenOutput).path == "generated/c1-1.png"
    )
    assert json.loads(images.requests[1].body)["size"] == "1024x1024"


@pytest.mark.parametrize(
    ("reply", "kind", "code"),
    [
        (
            json_reply({"error": {"message": "safety"}}, 400),
            ErrorKind.EXECUTION,
            "upstream_rejected",
        ),
        (json_reply({"error": {"message": "bad key"}}, 401), ErrorKind.UNAUTHORIZED, None),
        (json_reply({"error": {"message": "slow down"}}, 429), ErrorKind.RATE_LIMITED, None),
        (json_reply({"error": {"message": "down"}}, 500), ErrorKind.EXECUTION, "upstream_error"),
        (Reply(200, b"not json"), ErrorKind.EXECUTION, "bad_upstream_response"),
        (json_reply({"data": []}), ErrorKind.EXECUTION, "bad_upstream_response"),
        (json_reply({"data": [{"b64_json": "***"}]}), ErrorKind.EXECUTION, "bad_upstream_response"),
        (
            json_reply({"data": [{"b64_json": base64.b64encode(b"text").decode()}]}),
            ErrorKind.EXECUTION,
            "bad_upstream_response",
        ),
        (Reply(200, b"{}", delay_s=5), ErrorKind.TIMEOUT, None),
        (Reply(200, b" " * 5000), ErrorKind.EXECUTION, "response_too_large"),
    ],
)
def test_image_failures_write_nothing(
    tmp_path: Path, images: ImagesServer, reply: Reply, kind: ErrorKind, code: str | None
) -> None:
    (tmp_path / "keep.txt").write_text("keep")
    before = snapshot(tmp_path)
    images.reply = reply
    ctx = image_ctx(tmp_path, images, timeout_s=0.3, max_body_bytes=4000)
    assert error_of(call(ImageGen(), ctx, {"prompt": "x"})[1]) == (kind, code)
    assert snapshot(tmp_path) == before and not (tmp_path / "generated").exists()


def test_image_bad_input_is_refused_before_any_request(
    tmp_path: Path, images: ImagesServer
) -> None:
    before = snapshot(tmp_path)
    ctx = image_ctx(tmp_path, images)
    for args in ({"prompt": ""}, {"prompt": "x", "size": "huge"}, {"size": "1x1"}):
        assert error_of(call(ImageGen(), ctx, args)[1])[0] is ErrorKind.INVALID_ARGUMENTS
    escaping = image_ctx(tmp_path, images, output_dir="../outside")
    assert (
        error_of(call(ImageGen(), escaping, {"prompt": "x"})[1])[0] is ErrorKind.PERMISSION_DENIED
    )
    assert images.requests == [] and snapshot(tmp_path) == before


def test_image_provider_from_environment(
    tmp_path: Path, images: ImagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = Container()
    container.insert(Workspace(tmp_path))
    ctx = ToolContext(call_id="env", container=container)
    monkeypatch.delenv("TOOLHUB_IMAGES_BASE_URL", raising=False)
    assert error_of(call(ImageGen(), ctx, {"prompt": "x"})[1]) == (
        ErrorKind.CUSTOM,
        "not_configured",
    )
    monkeypatch.setenv("TOOLHUB_IMAGES_BASE_URL", images.url("/v1"))
    monkeypatch.setenv("TOOLHUB_IMAGES_API_KEY", "env-key")
    monkeypatch.setenv("TOOLHUB_IMAGES_MODEL", "env-model")
    assert call(ImageGen(), ctx, {"prompt": "x"})[1].error is None
    assert json.loads(images.requests[0].body)["model"] == "env-model"
    assert images.requests[0].headers["authorization"] == "Bearer env-key"


# -- video_gen / image_to_video -----------------------------------------------------------------


@pytest.fixture
def videos() -> Iterator[VideosServer]:
    with VideosServer() as srv:
        yield srv


def video_ctx(tmp_path: Path, srv: VideosServer, call_id: str = "v1", **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(tmp_path))
    settings = VideoParams(**{"poll_interval_s": 0.01, **params})
    container.insert(settings, Params[VideoParams])
    base = srv.url("/v1")
    api = JsonApi("the video API", base, "vid-key", settings.request_timeout_s, 10_000)
    container.insert(OpenAIVideos(api, api, "video-model"), VideoProvider)
    return ToolContext(call_id=call_id, container=container)


def test_video_is_polled_streamed_and_saved(tmp_path: Path, videos: VideosServer) -> None:
    progress, out = call(
        VideoGen(), video_ctx(tmp_path, videos), {"prompt": "waves", "duration_s": 8}
    )
    assert out.error is None and out.output is not None
    result = out.output.parse(VideoOutput)
    assert result.path == "generated/v1.mp4" and result.mime_type == "video/mp4"
    assert (tmp_path / "generated/v1.mp4").read_bytes() == MP4
    statuses = [(p.subkind, p.payload["status"], p.payload["progress"]) for p in progress]
    assert statuses == [
        ("media_job", "queued", 0.0),
        ("media_job", "in_progress", 50.0),
        ("media_job", "completed", 100.0),
    ]
    (fields,) = videos.submitted
    assert fields["model"] == (None, b"video-model") and fields["prompt"] == (None, b"waves")
    assert fields["seconds"] == (None, b"8") and "input_reference" not in fields
    assert videos.requests[0].headers["authorization"] == "Bearer vid-key"


def test_image_to_video_sends_the_image(tmp_path: Path, videos: VideosServer) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics/start.png").write_bytes(PNG)
    _, out = call(
        ImageToVideo(), video_ctx(tmp_path, videos), {"prompt": "pan", "image": "pics/start.png"}
    )
    assert out.error is None
    (fields,) = videos.submitted
    assert fields["input_reference"] == ("start.png", PNG)


def test_image_to_video_bad_input(tmp_path: Path, videos: VideosServer) -> None:
    (tmp_path / "notes.txt").write_text("not an image")
    before = snapshot(tmp_path)
    ctx = video_ctx(tmp_path, videos)
    cases: list[tuple[dict[str, Any], ErrorKind]] = [
        ({"prompt": "p"}, ErrorKind.INVALID_ARGUMENTS),
        ({"prompt": "p", "image": "missing.png"}, ErrorKind.NOT_FOUND),
        ({"prompt": "p", "image": "../../etc/passwd"}, ErrorKind.PERMISSION_DENIED),
        ({"prompt": "p", "image": "notes.txt"}, ErrorKind.INVALID_ARGUMENTS),
        ({"prompt": "p", "image": "notes.txt", "duration_s": 0}, ErrorKind.INVALID_ARGUMENTS),
        ({"prompt": "p", "image": "notes.txt", "duration_s": 999}, ErrorKind.INVALID_ARGUMENTS),
    ]
    for args, kind in cases:
        assert error_of(call(ImageToVideo(), ctx, args)[1])[0] is kind, args
    assert videos.requests == [] and snapshot(tmp_path) == before


def test_failed_job_is_an_error(tmp_path: Path) -> None:
    with VideosServer(step=40, fail_at=80) as srv:
        out = call(VideoGen(), video_ctx(tmp_path, srv), {"prompt": "x"})[1]
    assert error_of(out) == (ErrorKind.EXECUTION, "job_failed")
    assert "prompt rejected" in out.error.detail  # type: ignore[union-attr]
    assert not (tmp_path / "generated").exists()


def test_cancel_stops_polling_and_deletes_the_job(tmp_path: Path) -> None:
    with VideosServer(step=1) as srv:
        ctx = video_ctx(tmp_path, srv, poll_interval_s=0.05)
        cancelled_at: list[float] = []

        def cancel_once_polled() -> None:  # the job exists and is being polled (100 polls to go)
            seconds_until(lambda: srv.jobs.get("video_1", 0) > 0, 30)
            cancelled_at.append(time.monotonic())
            ctx.cancel.cancel()

        threading.Thread(target=cancel_once_polled, daemon=True).start()
        out = call(VideoGen(), ctx, {"prompt": "x"})[1]
        assert cancelled_at and time.monotonic() - cancelled_at[0] < 5
        assert error_of(out) == (ErrorKind.CANCELLED, None)
        assert srv.deleted == ["video_1"]
        polls = len(srv.requests)
        time.sleep(0.15)
        assert len(srv.requests) == polls


def test_max_wait_gives_up_and_deletes(tmp_path: Path) -> None:
    with VideosServer(step=1) as srv:
        out = call(VideoGen(), video_ctx(tmp_path, srv, max_wait_s=0.2), {"prompt": "x"})[1]
        assert error_of(out) == (ErrorKind.TIMEOUT, None) and srv.deleted == ["video_1"]


@pytest.mark.parametrize(
    ("reply", "kind", "code"),
    [
        (json_reply({"error": {"message": "boom"}}, 500), ErrorKind.EXECUTION, "upstream_error"),
        (
            json_reply({"id": "video_1", "status": "weird"}),
            ErrorKind.EXECUTION,
            "bad_upstream_response",
        ),
        (Reply(200, b"{{{"), ErrorKind.EXECUTION, "bad_upstream_response"),
        (Reply(200, b"{}", delay_s=5), ErrorKind.TIMEOUT, None),
    ],
)
def test_polling_failures(
    tmp_path: Path, videos: VideosServer, reply: Reply, kind: ErrorKind, code: str | None
) -> None:
    videos.status_reply = reply
    out = call(VideoGen(), video_ctx(tmp_path, videos, request_timeout_s=0.3), {"prompt": "x"})[1]
    assert error_of(out) == (kind, code)
    assert not (tmp_path / "generated").exists()


def test_content_checks(tmp_path: Path, videos: VideosServer) -> None:
    videos.content = b"<html>not a video</html>"
    out = call(VideoGen(), video_ctx(tmp_path, videos), {"prompt": "x"})[1]
    assert error_of(out) == (ErrorKind.EXECUTION, "bad_upstream_response")
    videos.content = MP4 + b"\x00" * 20_000
    out = call(VideoGen(), video_ctx(tmp_path, videos, call_id="v2"), {"prompt": "x"})[1]
    assert error_of(out) == (ErrorKind.EXECUTION, "response_too_large")
    assert not (tmp_path / "generated").exists()
