"""The dispatcher process of the chaos run's toolhub side (``bench/chaos_toolhub.py``).

It runs as ``python -m bench.chaos_dispatcher <workdir> <index>`` and holds the ``Session``
that submits the plan's calls: it writes each call id to ``submitted.log`` before submitting
it and each answer to ``answers-<index>.jsonl``. When the harness SIGKILLs it, the next one
(index + 1) collects the answers of the calls the dead one had submitted, by id
(``Session.record`` / ``Session.follow``), re-submits none of them, and submits the rest of the
plan on schedule.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.chaos_procs import call_command  # noqa: E402
from toolhub import CallResult, Progress, Session  # noqa: E402

CONFIG = {
    "tools": [
        {"id": "Main:bash", "params": {"enabled_background": True}},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def bash_args(command: str) -> dict[str, Any]:
    return {"command": command, "description": "chaos call"}


def error_of(result: CallResult) -> dict[str, Any] | None:
    if not result.is_error or result.error is None:
        return None
    err = result.error
    return {"kind": err.kind.value, "code": err.code, "detail": err.detail[:300], "details": None}


def answer_line(cid: str, result: CallResult, via: str, retry_seen: bool) -> dict[str, Any]:
    error = error_of(result)
    if error is not None and result.error is not None and result.error.details:
        error["details"] = {
            k: v for k, v in result.error.details.items() if isinstance(v, str | int | bool)
        }
    exit_code = None
    if not result.is_error and result.output is not None:
        value = result.output.value
        exit_code = value.get("exit_code") if isinstance(value, dict) else None
    return {
        "cid": cid,
        "t": time.time(),
        "via": via,
        "error": error,
        "exit_code": exit_code,
        "retry_seen": retry_seen,
    }


def read_answers(workdir: Path) -> dict[str, dict[str, Any]]:
    """The first answer per call id over every dispatcher's file (a torn last line of a
    killed dispatcher is skipped)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(workdir.glob("answers-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if item.get("cid") and (item["cid"] not in out or item["t"] < out[item["cid"]]["t"]):
                out[item["cid"]] = item
    return out


# -- the dispatcher process ----------------------------------------------------------------------


async def stream_answer(items: Any) -> tuple[CallResult | None, bool]:
    result, retry = None, False
    async for item in items:
        if isinstance(item, Progress) and item.subkind == "retry":
            retry = True
        elif isinstance(item, CallResult):
            result = item
    return result, retry


async def dispatch(workdir: Path, index: int) -> int:
    plan = json.loads((workdir / "plan.json").read_text())
    sidefx, tag, deadline = Path(plan["sidefx"]), plan["run_tag"], plan["deadline"]
    session = Session.connect(plan["url"], CONFIG, plan["workspace"], session_id=plan["session_id"])
    submitted_path = workdir / "submitted.log"
    earlier = submitted_path.read_text().split() if submitted_path.exists() else []
    answered = read_answers(workdir)
    log = submitted_path.open("a")
    out = os.open(workdir / f"answers-{index}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    events = (workdir / f"dispatcher-{index}.events").open("a")

    def emit(line: dict[str, Any]) -> None:
        os.write(out, (json.dumps(line) + "\n").encode())

    def note(text: str) -> None:
        events.write(f"{time.time():.3f} {text}\n")
        events.flush()

    async def submit(call: dict[str, Any], via: str) -> None:
        command = call_command(tag, call["cid"], sidefx, call["first_s"], call["rerun_s"])
        items = session.stream("bash", bash_args(command), call_id=call["cid"])
        try:
            result, retry = await asyncio.wait_for(stream_answer(items), deadline - time.time())
        except TimeoutError:
            note(f"hung {call['cid']}")
            return
        if result is not None:
            emit(answer_line(call["cid"], result, via, retry))

    async def adopt(call: dict[str, Any]) -> None:
        """A call the dead dispatcher submitted: its answer, by id; never a second submit."""
        cid = call["cid"]
        record, looks = None, 0
        while time.time() < deadline and looks < 3:
            try:
                record = await session.record(cid)
            except Exception as exc:  # RedisUnavailable during the outage
                note(f"record {cid}: {exc!r}")
                await asyncio.sleep(0.5)
                continue
            if record is not None:
                break
            looks += 1
            await asyncio.sleep(0.5)
        if record is None:
            # Logged, but its record never reached Redis: the dead dispatcher died between the
            # log line and the dispatch. Nothing of it exists, so it is submitted now.
            note(f"undispatched {cid}")
            await submit(call, "successor-submit")
            return
        while time.time() < deadline:
            try:
                result, retry = await asyncio.wait_for(
                    stream_answer(session.follow(cid)), deadline - time.time()
                )
            except TimeoutError:
                break
            error = result.error if result is not None else None
            if error is not None and error.code == "redis_unavailable":  # the follow's error
                await asyncio.sleep(0.5)
                continue
            if result is not None:
                emit(answer_line(cid, result, "follow", retry))
            return
        note(f"hung {cid} (adopted)")

    tasks = []
    by_id = {c["cid"]: c for c in plan["calls"]}
    for cid in earlier:
        if cid in by_id and cid not in answered:
            tasks.append(asyncio.ensure_future(adopt(by_id[cid])))
    note(f"dispatcher {index}: adopting {len(tasks)} of {len(earlier)} submitted")
    done = set(earlier)
    for call in plan["calls"]:
        if call["cid"] in done:
            continue
        delay = plan["start"] + call["at"] - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        log.write(call["cid"] + "\n")
        log.flush()
        tasks.append(asyncio.ensure_future(submit(call, "call")))
    await asyncio.gather(*tasks)
    note(f"dispatcher {index}: done")
    session.close()
    return 0


def start_dispatcher(workdir: Path, index: int) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    with (workdir / f"dispatcher-{index}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bench.chaos_dispatcher", str(workdir), str(index)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


if __name__ == "__main__":
    raise SystemExit(asyncio.run(dispatch(Path(sys.argv[1]), int(sys.argv[2]))))
