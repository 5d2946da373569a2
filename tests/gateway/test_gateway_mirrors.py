"""Mirrors of calls started elsewhere: one follow of the store per call however many streams
read it, the session check on every open, and a mirror whose source fails is cut (its streams
end without a result) and opened afresh by the next follower. The store side runs for real in
``test_gateway_distributed.py``; here ``RemoteCalls`` is a scripted stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolhub.core import CallResult, Progress
from toolhub.gateway.calllog import Item
from toolhub.gateway.mirrors import Mirrors


class ScriptedRemote:
    """Serves one call of session ``s``: the items put on ``feed``; an exception put there
    is raised to the mirror, as a lost Redis would be."""

    def __init__(self) -> None:
        self.follows = 0
        self.feed: asyncio.Queue[Item | Exception] = asyncio.Queue()

    async def follow(self, call_id: str, session_id: str) -> AsyncIterator[Item] | None:
        if session_id != "s":
            return None
        self.follows += 1
        return self._events()

    async def _events(self) -> AsyncIterator[Item]:
        while True:
            item = await self.feed.get()
            if isinstance(item, Exception):
                raise item
            yield item

    async def record(self, call_id: str, session_id: str) -> dict[str, Any] | None:
        return None

    async def cancel(self, call_id: str, session_id: str) -> bool | None:
        return None


def test_one_follow_per_call_and_every_open_checks_the_session() -> None:
    async def body() -> None:
        remote = ScriptedRemote()
        mirrors = Mirrors(remote)
        first = await mirrors.open("c", "s")
        second = await mirrors.open("c", "s")
        assert first is not None and first is second and remote.follows == 1
        assert await mirrors.open("c", "other") is None
        await remote.feed.put(Progress.custom("n", 1))
        await remote.feed.put(CallResult(name="t", prompt_text="done"))
        await asyncio.sleep(0.01)
        assert [e.seq for e in first.events] == [1, 2] and first.done
        assert await mirrors.open("c", "s") is first, "a finished mirror is kept for replay"
        assert remote.follows == 1
        await mirrors.shutdown()

    asyncio.run(body())


def test_a_mirror_whose_source_fails_is_cut_and_opened_afresh() -> None:
    async def body() -> None:
        remote = ScriptedRemote()
        mirrors = Mirrors(remote)
        log = await mirrors.open("c", "s")
        assert log is not None
        heard: list[int | None] = []
        log.listen(lambda e: heard.append(e.seq if e else None))
        await remote.feed.put(Progress.custom("n", 1))
        await remote.feed.put(ConnectionError("Redis went away"))
        await asyncio.sleep(0.01)
        assert heard == [1, None], "the stream heard the event, then that its source was cut"
        assert not log.done
        fresh = await mirrors.open("c", "s")
        assert fresh is not None and fresh is not log and remote.follows == 2
        await mirrors.shutdown()

    asyncio.run(body())
