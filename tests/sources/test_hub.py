"""Hub tools: a remote toolhub gateway's tools merged at the lowest priority, with calls
forwarded over SSE (progress streamed through, cancellation and answers relayed)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from tests.gateway.conftest import MakeGateway, make_gateway
from tests.gateway.support import make_builder
from toolhub import CallResult, Progress, Session
from toolhub.sources import hub

__all__ = ["make_gateway"]  # the gateway suite's fixture

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def patient_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub here is a gateway in this process: on a busy machine it can take longer than a
    session's connect budget to open its session, and the tools would then be left out."""
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 90.0)


def local_session(tmp_path: Path, hub_url: str, **extra: object) -> Session:
    config = {
        "tools": [{"id": "Main:echo"}],
        "hubs": {"shared": {"url": hub_url, "token": "${HUB_TEST_TOKEN}"}},
        **extra,
    }
    workspace = tmp_path / "local"
    workspace.mkdir(exist_ok=True)
    return Session.embedded(
        config, workspace, state_dir=tmp_path / "local-state", builder=make_builder()
    )


def test_hub_tools_merge_below_the_baseline(
    make_gateway: MakeGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUB_TEST_TOKEN", "hub-token")
    url = make_gateway(api_token="hub-token")
    with local_session(tmp_path, url) as session:
        entries = session.toolset.entries
        assert set(entries) == {"echo", "count", "nap", "ask"}
        assert not entries["echo"].external, "the baseline keeps its name"
        assert entries["count"].handle.spec.source == {"hub": "shared"}

        items = list(session.stream_sync("count", {"n": 3}))
        assert [i.text for i in items if isinstance(i, Progress)] == ["step 0", "step 1", "step 2"]
        result = items[-1]
        assert isinstance(result, CallResult) and result.output is not None
        assert result.output.value == {"total": 3} and result.tool_id == "External:count"

        invalid = session.call_sync("count", {"n": "many"})
        assert invalid.is_error and invalid.error is not None
        assert invalid.error.kind == "invalid_arguments"


def test_hub_cancel_and_answers_are_relayed(make_gateway: MakeGateway, tmp_path: Path) -> None:
    url = make_gateway()
    marker = tmp_path / "hub-nap.marker"
    with local_session(tmp_path, url) as session:

        async def cancel_nap() -> CallResult:
            result: CallResult | None = None
            arguments = {"seconds": 30, "marker": str(marker)}
            async for item in session.stream("nap", arguments, call_id="hub-nap"):
                if isinstance(item, Progress) and result is None:
                    await session.cancel("hub-nap")
                if isinstance(item, CallResult):
                    result = item
            assert result is not None
            return result

        cancelled = asyncio.run(cancel_nap())
        assert cancelled.error is not None and cancelled.error.kind == "cancelled"
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.read_text() == "cancelled", "the remote call was cancelled too"

        answered: list[bool] = []

        def answer_when_asked(item: Progress) -> None:
            assert item.payload["call_id"] == "hub-ask", "the question carries the local id"
            answered.append(session.answer("hub-ask", ["blue"]))

        questions = {"questions": [{"question": "Favourite colour?"}]}
        result = None
        for item in session.stream_sync("ask", questions, call_id="hub-ask"):
            if isinstance(item, Progress) and item.subkind == "input_required":
                threading.Thread(target=answer_when_asked, args=(item,)).start()
            elif isinstance(item, CallResult):
                result = item
        assert answered == [True]
        assert result is not None and result.prompt_text == "answers: ['blue']"


def test_unreachable_hub_is_a_warning(tmp_path: Path) -> None:
    with local_session(tmp_path, "http://127.0.0.1:9") as session:
        assert set(session.toolset.entries) == {"echo"}
        assert any("hub 'shared'" in w for w in session.warnings)
