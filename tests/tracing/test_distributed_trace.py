"""One trace from the caller to the command, read back from a real OTLP/HTTP receiver.

A private stack (redis-server and a ``toolhub worker``), a ``toolhub serve`` gateway and a
``toolhub mcp`` server, each a real process exporting with the real OTLP/HTTP exporter,
configured by nothing but the standard ``OTEL_*`` variables. A call made with a W3C
``traceparent`` (the gateway's header, MCP's ``_meta``) comes back as one trace: the caller's
``execute_tool`` span with the GenAI attributes under the given parent, the worker's span
continuing it through the Celery message's headers, and the command's ``TRACEPARENT`` naming
the worker's span. Through the gateway the command is a traced program (``traced_child.py``,
the OpenTelemetry SDK in the project's interpreter) whose own span, exported to the same
receiver, is the worker span's child: the operator's policy lets the session's sandbox read
that interpreter and reach the network (``network_any``), as an operator whose commands
export their own telemetry would. The gateway traces its phases too
(``TOOLHUB_TRACE_PHASES=1``: validation and enqueue spans); the worker and the MCP server do
not (the default: one span per side). A malformed ``traceparent`` only starts a new trace."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span

from tests.fixtures_stack import FLEET_POLICY, REPO, TOOLHUB, Stack
from tests.http_process import serving
from tests.mcp.task_client import discover
from tests.tracing.in_process import exporter, spans_of
from tests.tracing.otlp_receiver import Receiver, Span
from toolhub import Session
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(180)

COMMAND = {"command": "echo tp=$TRACEPARENT", "description": "trace"}
CHILD = "child.work"
#: What the traced program inside the command needs: the interpreter and its packages.
CHILD_SCRIPT = Path(__file__).with_name("traced_child.py")
INTERPRETER = [str(Path(sys.prefix)), str(Path(sys.base_prefix)), str(CHILD_SCRIPT.parent)]
SANDBOX = {"network": True, "read": INTERPRETER}


def otel_env(receiver: Receiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet's test policy, and commands that may read the interpreter and use the
    network (JSON is YAML)."""
    import yaml

    fleet = yaml.safe_load(FLEET_POLICY.read_text())
    path = tmp_path_factory.mktemp("policy") / "policy.json"
    path.write_text(json.dumps({**fleet, "sandbox": {"network_any": True, "read": INTERPRETER}}))
    return path


@pytest.fixture(scope="module")
def stack(receiver: Receiver, policy: Path) -> Iterator[Stack]:
    started = Stack(workers=1, env={**otel_env(receiver), "TOOLHUB_POLICY": str(policy)}).start()
    yield started
    started.stop()


def in_process_spans(trace_id: str) -> list[ReadableSpan]:
    """This process's own finished spans of the trace, when it has the tests' provider."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        return []
    return spans_of(int(trace_id, 16))


def remote_parent(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
    )


def new_parent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def one_trace(
    receiver: Receiver, trace_id: str, caller: str, more: tuple[str, ...] = ()
) -> dict[str, Span]:
    """The trace's spans by name, once the caller's, the worker's and ``more`` have arrived."""

    def complete() -> bool:
        names = {s.name for s in receiver.trace(trace_id)}
        worker = any(n.startswith("toolhub.worker ") for n in names)
        return worker and {"execute_tool bash", *more} <= names

    receiver.wait_for(complete, what=f"trace {trace_id}")
    spans = {s.name: s for s in receiver.trace(trace_id)}
    assert spans["execute_tool bash"].service == caller
    return spans


def reaches(receiver: Receiver, span: Span, parent_id: str) -> bool:
    """Whether ``span``'s ancestors lead to the caller's span ``parent_id``: directly, through
    a server library's request span (FastAPI and the MCP SDK trace too), or through the MCP
    client's own span in this process when this process has a tracer provider."""
    by_id = {s.span_id: s for s in receiver.trace(span.trace_id)}
    here = {f"{s.context.span_id:016x}": s for s in in_process_spans(span.trace_id)}
    current = span.parent_id
    while current != parent_id:
        if current in by_id:
            current = by_id[current].parent_id
        elif current in here and here[current].parent is not None:
            current = f"{here[current].parent.span_id:016x}"
        else:
            return False
    return True


def check_trace(
    receiver: Receiver, spans: dict[str, Span], parent_id: str, text: str, phases: bool
) -> Span:
    """The caller's span and attributes, the worker's under it; the worker's span, which the
    command's ``TRACEPARENT`` names."""
    call = spans["execute_tool bash"]
    assert reaches(receiver, call, parent_id), call
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "bash"
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["gen_ai.tool.call.id"]
    assert call.attributes["toolhub.tool.id"].endswith("bash")
    assert "error.type" not in call.attributes
    (worker,) = [s for s in spans.values() if s.name.startswith("toolhub.worker ")]
    assert worker.service == "toolhub-worker"
    if phases:  # the gateway's phase spans: the worker continues the enqueue's
        assert spans["toolhub.validate"].parent_id == call.span_id
        enqueue = spans["toolhub.enqueue"]
        assert enqueue.parent_id == call.span_id
        assert worker.parent_id == enqueue.span_id  # continued from the Celery headers
    else:
        assert not {"toolhub.validate", "toolhub.enqueue"} & set(spans)
        assert worker.parent_id == call.span_id
    assert worker.attributes["toolhub.call.attempt"] == 1
    assert worker.attributes["toolhub.claim.action"] == "run"
    assert worker.attributes["toolhub.call.queue_wait"] >= 0
    assert worker.attributes["gen_ai.tool.call.id"] == call.attributes["gen_ai.tool.call.id"]
    assert not {"gen_ai.tool.name", "toolhub.session.id"} & set(worker.attributes)  # the call's
    assert {name for name, _ in worker.events} <= {"toolhub.progress"}  # the output's
    assert spans["toolhub.sandbox_start"].parent_id == worker.span_id
    assert not {"toolhub.run", "toolhub.claim", "toolhub.deliver"} & set(spans)
    # The command's own environment names the worker's span: a traced program joins the trace.
    traceparent = text.split("tp=", 1)[1].split()[0]
    assert traceparent == f"00-{call.trace_id}-{worker.span_id}-01"
    return worker


def test_a_gateway_call_is_one_trace_to_the_commands_own_span(
    receiver: Receiver, stack: Stack, policy: Path, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        **otel_env(receiver),
        "TOOLHUB_HOME": str(tmp_path / "home"),
        "TOOLHUB_POLICY": str(policy),
        "TOOLHUB_TRACE_PHASES": "1",
        "PYTHONPATH": str(REPO),
    }
    argv = [
        TOOLHUB,
        "serve",
        "--port",
        str(port),
        "--workspace",
        str(tmp_path),
        "--redis",
        stack.url,
    ]
    url = f"http://127.0.0.1:{port}"
    config = {
        "tools": [{"id": "Main:bash", "params": {"enabled_background": False, "sandbox": SANDBOX}}]
    }
    child = {
        "command": f"{sys.executable} {CHILD_SCRIPT} {receiver.endpoint}; echo tp=$TRACEPARENT",
        "description": "a traced program",
    }
    with serving(argv, f"{url}/healthz", env=env), httpx.Client(base_url=url, timeout=60) as http:
        made = http.post("/v1/sessions", json={"config": config})
        assert made.status_code == 201, made.text
        sid = made.json()["session_id"]
        trace_id, parent_id, traceparent = new_parent()
        answer = http.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "bash", "arguments": child},
            headers={"traceparent": traceparent, "tracestate": "vendor=1"},
        )
        assert answer.status_code == 200, answer.text
        text = answer.json()["prompt_text"]
        assert "child=" in text, text
        spans = one_trace(receiver, trace_id, "toolhub-gateway", more=(CHILD,))
        worker = check_trace(receiver, spans, parent_id, text, phases=True)
        # The command's own span: exported by the program itself, a child of the worker's.
        own = spans[CHILD]
        assert own.service == "traced-child"
        assert own.parent_id == worker.span_id
        assert text.split("child=", 1)[1].split()[0] == f"{trace_id}-{own.span_id}"

        # Hostile: a malformed traceparent is ignored; the call runs in a trace of its own.
        bad = http.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "bash", "arguments": COMMAND},
            headers={"traceparent": "00-zz-" + "x" * 300},
        )
        assert bad.status_code == 200 and bad.json()["error"] is None, bad.text
        own = bad.json()["prompt_text"].split("tp=", 1)[1].split()[0]
        assert own.startswith("00-") and own.split("-")[1] != trace_id
    receiver.wait_for(
        lambda: (
            {"gen_ai.execute_tool.duration", "toolhub.call.queue_wait.duration"} <= receiver.metrics
        ),
        what="metrics",
    )


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_an_mcp_call_with_meta_traceparent_is_one_trace(
    receiver: Receiver, stack: Stack, tmp_path: Path, era: str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")},
        **otel_env(receiver),
        "TOOLHUB_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
    }
    params = StdioServerParameters(
        command=TOOLHUB,
        args=["mcp", "--workspace", str(tmp_path), "--redis", stack.url],
        cwd=REPO,
        env=env,
    )
    trace_id, parent_id, traceparent = new_parent()

    async def call() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            if era == "handshake":
                await session.initialize()
            else:
                await discover(session)
            # An MCP client library that traces (this process may have a provider: the
            # in-process tests') puts its own current context in ``_meta``: the caller's span is
            # made current too, so either way the call is of the caller's trace.
            with use_span(NonRecordingSpan(remote_parent(trace_id, parent_id))):
                result = await session.call_tool(
                    "bash",
                    COMMAND,
                    meta={"traceparent": traceparent},  # type: ignore[typeddict-unknown-key]
                )
            return "".join(getattr(block, "text", "") for block in result.content)

    text = asyncio.run(call())
    check_trace(receiver, one_trace(receiver, trace_id, "toolhub-mcp"), parent_id, text, False)


def test_a_background_command_joins_the_trace_through_the_holder(
    receiver: Receiver, stack: Stack, tmp_path: Path
) -> None:
    """A background command is a task message of its own, sent by the worker running the
    ``bash`` call, and started by the host's holder, not by a worker: the task's worker span
    continues the call's trace from that message's headers, and hands its context to the
    holder with the command, so the command's ``TRACEPARENT`` names it."""
    exporter()  # this process traces: the call's execute_tool span, under the turn's
    written = tmp_path / "tp.txt"
    with (
        Session.connect(stack.url, None, tmp_path) as session,
        trace.get_tracer("app").start_as_current_span("turn") as turn,
    ):
        result = session.call_sync(
            "bash",
            {
                "command": f"echo $TRACEPARENT > {written}.part && mv {written}.part {written}",
                "description": "background",
                "is_background": True,
            },
        )
        assert result.error is None, result.prompt_text
    trace_id = f"{turn.get_span_context().trace_id:032x}"

    def workers() -> dict[str, Span]:
        return {  # named by the tool id; the attributes have only the call's id (its parent's)
            s.name.removeprefix("toolhub.worker "): s
            for s in receiver.trace(trace_id)
            if s.name.startswith("toolhub.worker ")
        }

    receiver.wait_for(
        lambda: len(workers()) == 2 and written.exists(), timeout=90, what="the task's span"
    )
    spans = workers()
    task = spans.pop("toolhub:background")
    (call,) = spans.values()
    assert task.parent_id == call.span_id  # the task message carried the call's worker span
    flags = f"{turn.get_span_context().trace_flags:02x}"  # sampled (and a random trace id)
    assert written.read_text().strip() == f"00-{trace_id}-{task.span_id}-{flags}"
