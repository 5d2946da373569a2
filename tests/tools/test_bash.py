"""bash: foreground results, live streaming, timeouts and cancellation, truncation in both
versions, background hand-off, schema and description by params, plan mode, a full disk."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from tests.small_disk import free_bytes, small_disk
from tests.tools.harness import Harness
from toolhub.backends.process import shared_cgroups
from toolhub.core import CancelToken, ErasedTool, ErrorKind, Outcome, Progress
from toolhub.core.templates import TemplateRenderer
from toolhub.core.tool import ListContext
from toolhub.errors import ErrorCode
from toolhub.tools.plan import EnterPlanMode
from toolhub.tools.shell import Bash, BashParams


def bash(h: Harness, command: str, **kw: object) -> object:
    args: dict[str, object] = {"command": command, "description": "test"}
    args.update({k: v for k, v in kw.items() if k in ("timeout", "is_background")})
    extra = {k: v for k, v in kw.items() if k not in ("timeout", "is_background")}
    return h.call(Bash, args, **extra)


def deltas(progress: list[Progress]) -> str:
    assert all(p.subkind == "output_delta" for p in progress)
    return "".join(p.payload["delta"] for p in progress)


def test_foreground_exit_code_and_text(harness: Harness) -> None:
    res = bash(harness, "echo hello; exit 2")
    assert res.output.exit_code == 2
    assert res.text == "exit: 2\nhello\n"
    assert deltas(res.progress) == "hello\n"


def test_runs_in_the_workspace(harness: Harness, ws: Path) -> None:
    res = bash(harness, "pwd")
    assert Path(res.output.output.strip()) == ws


def test_first_delta_arrives_while_the_command_runs(harness: Harness) -> None:
    async def go() -> tuple[float, float, float]:
        ctx = harness.context(Bash)
        erased = ErasedTool(Bash())
        args = erased.parse_args(
            {
                "command": "python3 -c 'import time; print(time.time(), flush=True); "
                "time.sleep(1)'",
                "description": "latency",
            },
            client_name="bash",
        )
        first: float | None = None
        printed = 0.0
        async for item in erased.stream(ctx, args):
            if isinstance(item, Progress) and first is None:
                first = time.time()
                printed = float(item.payload["delta"].split()[0])
            if isinstance(item, Outcome):
                return printed, first or 0.0, time.time()
        raise AssertionError("no outcome")

    printed, first, end = asyncio.run(go())
    assert first - printed < 0.15, first - printed
    assert end - first > 0.8


def test_streamed_deltas_are_lossless(harness: Harness) -> None:
    res = bash(harness, 'for i in $(seq 1 3000); do echo "line $i é"; done')
    assert deltas(res.progress) == "".join(f"line {i} é\n" for i in range(1, 3001))
    totals = [p.payload["total_bytes"] for p in res.progress]
    assert totals == sorted(totals)


def test_timeout_is_clamped_to_max(harness: Harness) -> None:
    harness.set_params(BashParams(max_timeout_ms=400))
    started = time.monotonic()
    res = bash(harness, "echo start; sleep 30", timeout=600_000)
    assert time.monotonic() - started < 20  # the clamp, not the command's 30 s
    assert res.output.killed == "timeout"
    assert res.text.startswith("exit: killed (timeout)\nstart")


def test_cancel_kills_at_once(harness: Harness) -> None:
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    started = time.monotonic()
    res = bash(harness, "echo partial; sleep 30", cancel=token)
    assert time.monotonic() - started < 2
    assert res.error is not None and res.error.kind is ErrorKind.CANCELLED
    assert "exit: killed (cancelled)\npartial" in res.error.detail


def test_abandoned_stream_kills_the_command(harness: Harness, tmp_path: Path) -> None:
    marker = tmp_path / "survived"

    async def go() -> None:
        erased = ErasedTool(Bash())
        args = erased.parse_args(
            {"command": f"echo go; sleep 2; touch {marker}", "description": "x"},
            client_name="bash",
        )
        stream = erased.stream(harness.context(Bash), args)
        async for _ in stream:
            break
        await stream.aclose()

    asyncio.run(go())
    time.sleep(2.5)
    assert not marker.exists()


def test_long_output_keeps_head_and_tail_with_log_path(harness: Harness) -> None:
    harness.set_params(BashParams(output_limit_bytes=2000))
    res = bash(harness, "seq 1 100000")
    out = res.output
    assert out.total_bytes == len("".join(f"{n}\n" for n in range(1, 100001)))
    assert out.output.startswith("1\n2\n3\n") and out.output.endswith("99999\n100000\n")
    assert "[truncated: showing the first and last" in res.text
    assert out.log_path and out.log_path in res.text
    assert Path(out.log_path).read_text().count("\n") == 100000


def test_legacy_output_keeps_head_only_without_note(harness: Harness) -> None:
    harness.set_params(BashParams(output_limit_bytes=2000))
    res = bash(harness, "seq 1 100000", version="legacy-1")
    assert res.output.output.startswith("1\n2\n")
    assert "100000" not in res.output.output
    assert "truncated" not in res.text
    assert len(res.output.output) <= 2000


def test_streaming_stops_at_the_stream_cap(harness: Harness) -> None:
    harness.set_params(BashParams(stream_limit_bytes=10_000, output_limit_bytes=1000))
    res = bash(harness, "head -c 300000 /dev/zero | tr '\\0' 'a'")
    assert len(deltas(res.progress)) == 10_000
    assert res.output.total_bytes == 300_000


def test_unwaited_ampersand_is_refused_with_renamed_flag(harness: Harness) -> None:
    res = bash(harness, "python3 -m http.server &", param_names={"is_background": "bg"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "`bg`" in res.error.detail
    assert bash(harness, "true && echo ok").output.exit_code == 0


def test_background_returns_task_id_at_once(harness: Harness) -> None:
    started = time.monotonic()
    res = bash(harness, "sleep 0.5; echo bg-done", is_background=True)
    assert time.monotonic() - started < 0.5
    assert res.output.mode == "background" and res.output.task_id
    assert res.output.task_id in res.text and "task_output" in res.text
    other = bash(harness, "sleep 5", is_background=True)
    assert res.output.task_id in other.text and "still running" in other.text


def test_background_disabled_refuses_and_hides_flag(harness: Harness) -> None:
    params = BashParams(enabled_background=False)
    harness.set_params(params)
    res = bash(harness, "sleep 1", is_background=True)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    tool = Bash()
    schema = tool.adjust_schema(ErasedTool(tool).input_schema, params)
    assert "is_background" not in schema["properties"]
    assert schema["properties"]["timeout"]["maximum"] == params.max_timeout_ms
    renderer = TemplateRenderer(
        by_kind={"background_task_action": "task_output", "kill_task_action": "kill_task"},
        params={"execute": {"is_background": "bg", "timeout": "timeout"}},
    )
    ctx = ListContext(renderer, params, "bash", {})
    assert "task_output" not in tool.description(ctx)
    ctx_on = ListContext(renderer, BashParams(max_timeout_ms=1234), "bash", {})
    text = tool.description(ctx_on)
    assert "`bg`" in text and "task_output" in text and "1234 ms" in text


def test_plan_mode_refuses(harness: Harness, ws: Path) -> None:
    harness.call(EnterPlanMode, {})
    res = bash(harness, f"touch {ws}/x")
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert not (ws / "x").exists()


@pytest.mark.skipif(
    "memory" not in shared_cgroups().controllers, reason="needs a writable memory cgroup"
)
def test_a_command_past_its_memory_limit_is_a_typed_memory_limit_error(harness: Harness) -> None:
    harness.set_params(BashParams(memory_mb=64))
    res = bash(harness, "echo started; python3 -c 'b = bytearray(200 << 20)'")
    assert res.error is not None and res.error.code == ErrorCode.MEMORY_LIMIT
    assert "reached its memory limit of 64 MiB" in res.error.detail
    assert "started" in res.error.detail  # the output so far
    assert res.error.details is not None and res.error.details["memory_limit_bytes"] == 64 << 20
    after = bash(harness, "echo fine")
    assert after.output.exit_code == 0 and after.output.cpu_seconds is not None


BIG = "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END"


def test_a_full_disk_is_a_typed_error_with_the_output_and_the_next_call_runs(
    ws: Path, tmp_path: Path
) -> None:
    """The session's log directory on a 256 KiB disk: a command printing 3 MB is answered with
    ``output_log_incomplete`` (its exit code, its streamed output, its head and tail, how much
    the log holds), never ``exit: 0`` alone; once the log is deleted the next call runs right."""
    with small_disk(tmp_path / "disk", "256k") as disk:
        h = Harness(ws, disk / "session")
        res = bash(h, BIG, timeout=60_000)
        assert res.error is not None and res.error.code == ErrorCode.OUTPUT_LOG_INCOMPLETE
        details = res.error.details or {}
        assert details["exit_code"] == 0 and details["total_bytes"] == 3_000_005
        assert 0 < details["log_bytes_written"] <= 256 << 10
        assert details["reason"].startswith("ENOSPC")
        assert "ran and exited 0" in res.error.detail and "END" in res.error.detail
        assert f"{details['log_bytes_written']:,} of its 3,000,005 bytes" in res.error.detail
        assert len(deltas(res.progress)) == 3_000_005  # streaming went on
        Path(details["log_path"]).unlink()
        assert free_bytes(disk) > 200 << 10  # nothing holds the deleted log open
        after = bash(h, "echo fine")
        assert after.error is None and after.text == "exit: 0\nfine\n"


def test_a_disk_with_no_room_for_the_log_is_a_typed_start_failure(ws: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "256k", inodes=2) as disk:
        (disk / "session").mkdir()  # the last inode: the log's directory cannot be made
        h = Harness(ws, disk / "session")
        res = bash(h, "touch ran")
        assert res.error is not None and res.error.code == ErrorCode.START_FAILED
        assert "ENOSPC" in res.error.detail and "Nothing ran" in res.error.detail
        assert not (ws / "ran").exists()
