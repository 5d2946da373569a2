"""``toolhub demo``: a scripted agent episode against the local stack (``--embedded``: against an
in-process embedded gateway), talking to the gateway over HTTP + SSE the way an agent would.

It lists the tools, reads and edits a file, streams a command, starts a background command and
collects it, cancels a runaway command, answers an ``ask_user`` question, calls a tool of an
external MCP server (``mcp-server-time``), then stops everything it started.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table

from .output import fail, stdout
from .terminal_safe import clean

NOTES = "# Release notes\n\nstatus: draft\nowner: toolhub demo\n"
#: The demo is the operator too: its policy lets tenants enable the time server by name, and
#: the session's config (the tenant's) names it without a command (docs/security.md).
POLICY = {
    "mcp_servers": {
        "time": {"command": ["python", "-m", "mcp_server_time", "--local-timezone", "UTC"]}
    }
}
MCP_CONFIG: dict[str, Any] = {"mcp_servers": {"time": {}}}
STEPS = 7
HAVE_TIME_SERVER = find_spec("mcp_server_time") is not None


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    embedded: Annotated[
        bool, typer.Option("--embedded", help="No stack: an in-process embedded gateway.")
    ] = False,
    workers: Annotated[int, typer.Option(help="Workers of the local stack.")] = 2,
) -> None:
    """Run a scripted agent episode end to end, then stop everything."""
    from toolhub.gateway.client import GatewayError
    from toolhub.stack.local import StackError
    from toolhub.stack.redis_server import RedisServerNotFound

    workspace = Path(tempfile.mkdtemp(prefix="toolhub-demo-"))
    (workspace / "notes.md").write_text(NOTES)
    policy = Path(tempfile.mkdtemp(prefix="toolhub-demo-policy-")) / "policy.json"
    policy.write_text(json.dumps(POLICY))
    # The gateway and the stack's workers read the operator policy from here.
    os.environ["TOOLHUB_POLICY"] = str(policy)
    try:
        with _gateway(embedded, workers, workspace) as (url, flower):
            Episode(url).run()
            _finish(flower)
    except (StackError, RedisServerNotFound, GatewayError, DemoFailed) as err:
        fail(str(err))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(policy.parent, ignore_errors=True)


class DemoFailed(RuntimeError):
    pass


class _gateway:
    """The gateway URL (and Flower's, with credentials) for the episode; stops it all on exit."""

    def __init__(self, embedded: bool, workers: int, workspace: Path) -> None:
        self.embedded = embedded
        self.workers = workers
        self.workspace = workspace
        self._stop: Callable[[], None] = lambda: None

    def __enter__(self) -> tuple[str, tuple[str, str, str] | None]:
        from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
        from toolhub.ports import free_port
        from toolhub.stack.local import LocalStack

        if self.embedded:
            stdout.print(Rule("toolhub demo: embedded gateway (no Redis, no workers)"))
            server = ThreadedServer(create_app(GatewaySettings(workspace=self.workspace))).start()
            self._stop = server.stop
            return server.url, None
        stdout.print(Rule("toolhub demo: local stack (Redis, workers, gateway, Flower)"))
        stack = LocalStack(
            workers=self.workers,
            port=free_port(),
            flower_port=free_port(),
            workspace=self.workspace,
            report=lambda message: stdout.print(f"[yellow]{message}[/]"),
        )
        started = time.monotonic()
        with stdout.status("starting Redis, workers, gateway and Flower…"):
            info = stack.start()
        self._stop = stack.stop
        stdout.print(f"stack up in {time.monotonic() - started:.1f}s; logs in {info.logs}")
        if not (info.flower_url and info.flower_user and info.flower_password):
            return info.gateway_url, None
        stdout.print(
            f"gateway {info.gateway_url} · Flower {info.flower_url} "
            f"(user {info.flower_user}, password {info.flower_password})",
            highlight=False,
        )
        return info.gateway_url, (info.flower_url, info.flower_user, info.flower_password)

    def __exit__(self, *exc: object) -> None:
        with stdout.status("stopping…"):
            self._stop()
        stdout.print("[green]stopped everything the demo started[/]")


class Episode:
    def __init__(self, url: str) -> None:
        from toolhub.gateway.client import GatewayClient

        self.client = GatewayClient(url)
        self.step = 0
        self.sid = ""

    def run(self) -> None:
        with self.client:
            self.list_tools()
            self.read_and_edit()
            self.stream_command()
            self.background_command()
            self.cancel_runaway()
            self.ask_user()
            self.mcp_tool()

    def header(self, title: str) -> None:
        self.step += 1
        stdout.print(Rule(f"[bold][{self.step}/{STEPS}] {title}[/]", align="left"))

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        stdout.print(f"[cyan]→ {name}[/] {arguments}", highlight=False, markup=True)
        result = self.client.call(self.sid, name, arguments)
        if result["is_error"]:
            raise DemoFailed(f"{name} failed: {result['prompt_text']}")
        return result

    def show(self, text: str) -> None:
        stdout.print(Panel(clean(text).rstrip() or "(empty)", expand=False), highlight=False)

    def list_tools(self) -> None:
        self.header("create a session and list its tools")
        created = self.client.create_session(config=MCP_CONFIG if HAVE_TIME_SERVER else None)
        self.sid = created["session_id"]
        tools = self.client.tools(self.sid, "anthropic")
        table = Table(title=f"session {self.sid}: {len(tools)} tools", show_lines=False)
        # A tool's name is whole whatever the width; its description gives way.
        widest = max(len("tool"), *(len(tool["name"]) for tool in tools))
        rest = max(12, stdout.width - widest - 7)  # 7: the table's borders and padding
        table.add_column("tool", no_wrap=True, width=widest)
        table.add_column("description", overflow="ellipsis", no_wrap=True, max_width=rest)
        for tool in tools:
            table.add_row(tool["name"], tool["description"].splitlines()[0])
        stdout.print(table)

    def read_and_edit(self) -> None:
        self.header("read a file, edit it, read it again")
        self.show(self.call("read_file", {"path": "notes.md"})["prompt_text"])
        edit = {"path": "notes.md", "old_string": "status: draft", "new_string": "status: shipped"}
        self.show(self.call("edit_file", edit)["prompt_text"])
        self.show(
            self.call("read_file", {"path": "notes.md", "offset": 3, "limit": 1})["prompt_text"]
        )

    def stream_command(self) -> None:
        self.header("run a command, streaming its output")
        command = 'for i in 1 2 3 4 5; do echo "build step $i"; sleep 0.2; done'
        args = {"command": command, "description": "Simulate a build"}
        stdout.print(f"[cyan]→ bash[/] {command}", highlight=False)
        events = 0
        for event in self.client.stream(self.sid, "bash", args):
            if event.event == "progress":
                events += 1
                delta = (event.data.get("payload") or {}).get("delta")
                if delta:
                    shown = clean(delta)
                    stdout.print(shown, end="", style="dim", markup=False, highlight=False)
            else:
                stdout.print(f"[green]result after {events} progress event(s):[/]")
                self.show(event.data["prompt_text"])

    def background_command(self) -> None:
        self.header("start a background command, then collect it")
        started = self.call(
            "bash",
            {
                "command": "sleep 1; echo 'background job finished'",
                "description": "Slow background job",
                "is_background": True,
            },
        )
        task_id = started["output"]["value"]["task_id"]
        stdout.print(f"started task [bold]{task_id}[/]; doing other work meanwhile…")
        collected = self.call("task_output", {"task_ids": [task_id], "timeout_ms": 30000})
        self.show(collected["prompt_text"])

    def cancel_runaway(self) -> None:
        self.header("cancel a runaway command")
        call_id = f"runaway-{int(time.time())}"
        args = {"command": "sleep 600", "description": "A command that never ends"}
        stdout.print("[cyan]→ bash[/] sleep 600   (cancelled after 1 s)", highlight=False)
        timer = threading.Timer(1.0, self.client.cancel, (self.sid, call_id))
        timer.start()
        started = time.monotonic()
        try:
            result = [e for e in self.client.stream(self.sid, "bash", args, call_id)][-1].data
        finally:
            timer.cancel()
        took = time.monotonic() - started
        killed = ((result.get("output") or {}).get("value") or {}).get("killed")
        cancelled = result["is_error"] and result["error"]["kind"] == "cancelled"
        if not cancelled and killed != "cancelled":
            raise DemoFailed(f"the runaway command was not cancelled: {result['prompt_text']}")
        stdout.print(f"[green]cancelled[/] after {took:.1f}s: ", end="")
        stdout.print(clean(result["prompt_text"]), highlight=False, markup=False)

    def ask_user(self) -> None:
        self.header("answer an ask_user question")
        question = {"question": "Ship the release?", "options": ["yes", "not yet"]}
        call_id = f"ask-{int(time.time())}"
        for event in self.client.stream(self.sid, "ask_user", {"questions": [question]}, call_id):
            if event.event == "progress" and event.data.get("subkind") == "input_required":
                for q in event.data["payload"]["questions"]:
                    stdout.print(f"[magenta]? {q['question']}[/] {q.get('options') or ''}")
                stdout.print("[magenta]  (the scripted user answers: yes)[/]")
                self.client.answer(self.sid, call_id, ["yes"])
            elif event.event == "result":
                self.show(event.data["prompt_text"])

    def mcp_tool(self) -> None:
        self.header("call a tool of an external MCP server (mcp-server-time)")
        if not HAVE_TIME_SERVER:
            stdout.print("[yellow]skipped: pip install mcp-server-time (the dev extra has it)[/]")
            return
        result = self.call("time__get_current_time", {"timezone": "UTC"})
        self.show(result["prompt_text"])


def _finish(flower: tuple[str, str, str] | None) -> None:
    stdout.print(Rule("done"))
    if flower is not None:
        stdout.print(
            "Flower showed every call of this episode while the stack ran (its address is at "
            "the top); it stops with the stack. `toolhub up` keeps a stack, Flower included, "
            "running."
        )
    stdout.print(f"[green]demo finished[/] (python {sys.version.split()[0]})")
