"""A worker-like layout outside /tmp (the sandbox's /tmp is private anyway, which would hide
a sibling for the wrong reason): a workspace, another session's workspace registered as
hidden, a readable directory outside both, and a symlink from the workspace to it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult
from toolhub.sandbox import SandboxMode, SandboxPolicy, probe

SECRETS = {
    "TOOLHUB_REDIS_URL": "redis://:hunter2@redis.internal:6379/0",
    "TOOLHUB_API_TOKEN": "tok-5e3c1d2b9a",
    "AWS_SECRET_ACCESS_KEY": "aws-8f7e6d5c4b3a",
}

requires_bwrap: pytest.MarkDecorator = pytest.mark.skipif(
    not probe().available, reason=f"bwrap cannot sandbox here: {probe().reason}"
)


@dataclass
class Layout:
    base: Path
    ws: Path
    other: Path
    outside: Path
    tmp: Path
    logs: Path

    def policy(self, mode: SandboxMode, **kw: object) -> SandboxPolicy:
        return SandboxPolicy(
            self.ws,
            mode,
            tmp_dir=self.tmp,
            hidden=(self.other,),
            **kw,  # type: ignore[arg-type]
        )

    def runner(self, policy: SandboxPolicy | None, **kw: object) -> ProcessRunner:
        return ProcessRunner(self.ws, self.logs, sandbox=policy, **kw)  # type: ignore[arg-type]


@pytest.fixture
def layout() -> Iterator[Layout]:
    base = Path(tempfile.mkdtemp(prefix="toolhub-sbx-", dir="/var/tmp"))
    try:
        ws, other, outside = base / "ws", base / "other-session", base / "outside"
        for d in (ws / ".git" / "hooks", other, outside):
            d.mkdir(parents=True)
        (other / "notes.txt").write_text("c0nfidential-notes\n")
        (outside / "readme.txt").write_text("outside-readable\n")
        (ws / "link").symlink_to(outside)
        yield Layout(base, ws, other, outside, base / "session" / "tmp", base / "logs")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def text(result: CommandResult) -> str:
    return result.output.head_and_tail(1 << 20)[0]
