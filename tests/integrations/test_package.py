"""``toolhub.integrations`` imports with no framework installed; each adapter, without its
framework, says what to install; the LangChain adapter works without LangGraph. Each check runs
in a fresh interpreter where the frameworks cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ["agents", "pydantic_ai", "langchain_core", "langgraph"]


def run_without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    blocker = f"import sys\nsys.modules.update(dict.fromkeys({modules!r}))\n"
    return subprocess.run(
        [sys.executable, "-c", blocker + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_package_needs_no_framework_and_each_adapter_names_its_install() -> None:
    done = run_without(
        FRAMEWORKS,
        """
        import importlib
        import toolhub, toolhub.integrations
        assert not [m for m in sys.modules if m.startswith("toolhub.integrations.")], sys.modules
        for name in ("openai_agents", "pydantic_ai", "langchain"):
            try:
                importlib.import_module(f"toolhub.integrations.{name}")
            except ImportError as exc:
                assert "pip install 'toolhub[integrations]'" in str(exc), exc
            else:
                raise AssertionError(f"{name} imported without its framework")
        """,
    )
    assert done.returncode == 0, done.stderr


def test_langchain_tools_stream_custom_events_without_langgraph(tmp_path: Path) -> None:
    done = run_without(
        ["langgraph"],
        f"""
        import asyncio
        from tests.integrations.support import EMBEDDED_CONFIG, make_builder
        from toolhub import Session
        from toolhub.integrations.langchain import langchain_tools

        session = Session.embedded(
            EMBEDDED_CONFIG, {str(tmp_path)!r}, state_dir={str(tmp_path / "state")!r},
            builder=make_builder(),
        )
        tool = next(t for t in langchain_tools(session) if t.name == "stream_ticks")
        call = {{"name": "stream_ticks", "args": {{"count": 2}}, "id": "c1", "type": "tool_call"}}

        async def events():
            return [e async for e in tool.astream_events(call, version="v2")]

        custom = [e for e in asyncio.run(events()) if e["event"] == "on_custom_event"]
        assert [e["data"]["progress"]["payload"]["i"] for e in custom] == [0, 1], custom
        assert "langgraph" not in {{m.partition(".")[0] for m in sys.modules if sys.modules[m]}}
        session.close()
        """,
    )
    assert done.returncode == 0, done.stderr
