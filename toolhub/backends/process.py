"""The process runner: one shell command in the workspace, streamed, bounded and killable.

Each command runs in its own session (so in its own process group) with stdin closed and
stdout and stderr merged into one pipe. One reader thread per command waits on the pipe and on
the process (a pidfd where the kernel has them, so nothing polls), streams every chunk to the
caller's callback the moment it arrives, keeps a bounded head and tail in memory and writes the
full output to a log file.

A command never outlives the process that started it: its shell gets a parent-death signal
(``setpriv --pdeathsig``) and then kills the command's group and cgroup, so a SIGKILLed worker
leaves no command of a lost attempt running beside its re-run (the wrapping shell, the guard and
the trap: ``command_shell.py``).

Stopping never waits on the command: ``kill`` sends SIGTERM to the whole group (and its cgroup)
at once and SIGKILL after a grace period, from any thread. A command that exits while processes
it started still hold its output pipe does not hang the call: after a short drain those
leftovers are killed too (a command that should outlive its call belongs in the background).

A runner given a ``SandboxPolicy`` (``toolhub.sandbox``) runs each command inside bubblewrap,
with the allowlisted environment only. The guard, the cgroup join, the limits and the death
trap stay outside and around it, unchanged: the shell joins the cgroup and then starts bwrap as
its job, so everything in the sandbox is in the command's process group and cgroup, and every
way of stopping a command stops a sandboxed one too. Where it can, a sandboxed command starts in
its session's shared sandbox instead of one of its own (``shared_start.py``).

Each command runs in a cgroup of its own inside its session's (``cgroups.py``: memory, pids and
CPU weight, clamped to the operator's ceilings in ``quota``) with a high ``oom_score_adj``
(``oom.py``), so the kernel's OOM killer takes the command, not a toolhub process. What it
used is charged to the call's usage meter (``running.py``).

Every start first reopens the workspace through its ``WorkspacePin`` (``workspace_pin.py``):
a workspace swapped for a symlink or another directory since the runner was made is refused
with ``workspace_moved`` and nothing runs; bwrap binds the descriptor that was checked, and
Landlock's wrapper grants the workspace only if it is still that directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolhub.core import ToolError
from toolhub.core.usage import current_meter
from toolhub.errors import ErrorCode
from toolhub.sandbox import Mechanism, SandboxPolicy, find_bwrap
from toolhub.sandbox.environment import TOOLHUB_SECRETS
from toolhub.tracing import command_env
from toolhub.tracing.worker import command_start

from .capture import DEFAULT_LOG_LIMIT, OutputCapture, io_reason
from .cgroups import CommandCgroup, CommandCgroups, SessionQuota
from .command_process import ChildProcess
from .command_shell import (
    RUN_COMMAND,
    RUN_SANDBOXED,
    RUN_SANDBOXED_PLAIN,
    death_trap,
    parent_death_guard,
    signal_reset,
)
from .confinement import confined_command, unconfined_env
from .limits import ResourceLimits
from .oom import oom_prelude
from .running import CommandResult, OutputCallback, RunningCommand
from .shared_start import start_hosted
from .start_gate import START_GATE
from .workspace_pin import WorkspacePin

logger = logging.getLogger("toolhub.sandbox")

KILL_GRACE_S = 1.0
_PIPE_SIZE = 1 << 20


class ProcessRunner:
    """Runs shell commands under a workspace with resource limits and per-call logs.

    ``sandbox`` confines every command it starts (``None``: unconfined, as before; it may be
    set after construction, before the first command). ``scrub_env`` gives unconfined commands
    the allowlisted environment too; sandboxed ones always get it. ``env`` is set on top, in
    both cases: what the caller names explicitly. ``workspace_pin``: the session's workspace
    as its ``Workspace`` pinned it (default: ``root``, resolved now, pinned at first use).
    """

    def __init__(
        self,
        root: Path,
        log_dir: Path,
        *,
        limits: ResourceLimits | None = None,
        env: Mapping[str, str] | None = None,
        kill_grace_s: float = KILL_GRACE_S,
        log_limit_bytes: int = DEFAULT_LOG_LIMIT,
        cgroups: CommandCgroups | None = None,
        sandbox: SandboxPolicy | None = None,
        scrub_env: bool = False,
        shared_sandbox: bool | None = None,
        workspace_pin: WorkspacePin | None = None,
    ) -> None:
        self.root = Path(root)
        #: Set when this session's commands must not run here at all (a named tenant's session
        #: under Landlock, ``toolhub.assembly.landlock_refusal``): every start raises it.
        self.refusal: ToolError | None = None
        self.pin = workspace_pin or WorkspacePin(os.path.realpath(self.root))
        self._pins: dict[str, WorkspacePin] = {str(self.root): self.pin, self.pin.path: self.pin}
        with contextlib.suppress(OSError, ToolError):
            self.pin.check()  # pinned now, where it exists: a swap from here on is refused
        self.sandbox = sandbox
        self.scrub_env = scrub_env
        self.shared_sandbox = (
            shared_sandbox
            if shared_sandbox is not None
            else os.environ.get("TOOLHUB_SANDBOX_SHARED", "1").strip().lower()
            not in {"0", "false", "no", "off"}
        )
        self._overrides = dict(env or {})
        self._bwrap: str | None = None
        self.log_dir = Path(log_dir)
        self.limits = limits or ResourceLimits()
        self.kill_grace_s = kill_grace_s
        self.log_limit_bytes = log_limit_bytes
        self.cgroups = cgroups if cgroups is not None else shared_cgroups()
        #: The session's kernel bounds (its tenant's quotas); None: no session ceiling.
        self.quota: SessionQuota | None = None
        self.shell = shutil.which("bash") or "/bin/sh"
        self.guard = parent_death_guard()
        self._env = {
            **{k: v for k, v in os.environ.items() if k not in TOOLHUB_SECRETS},
            "PYTHONUNBUFFERED": "1",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "TERM": "dumb",
            **(env or {}),
        }

    def start(
        self,
        command: str,
        *,
        log_name: str,
        cwd: Path | None = None,
        timeout_s: float | None = None,
        keep_bytes: int = 32_000,
        on_output: OutputCallback | None = None,
        limits: ResourceLimits | None = None,
        trace_env: Mapping[str, str] | None = None,
    ) -> RunningCommand:
        """Start ``command`` now; output streams to ``on_output`` from the reader thread.
        At most ``START_CONCURRENCY`` starts of this process run at once (``start_gate``).
        ``trace_env``: the call's ``TRACEPARENT``/``TRACESTATE`` when its span lives in another
        process (the holder starts a worker's background command); default: this process's
        current span's."""
        limits = self._clamped(limits or self.limits)
        self._refuse()
        meter = current_meter()
        # The call's TRACEPARENT: a traced program joins its trace.
        traced = dict(trace_env) if trace_env is not None else command_env()
        cgroup: CommandCgroup | None = None
        capture: OutputCapture | None = None
        try:
            with command_start(), START_GATE.held(), self._workspace_pin().opened() as ws_fd:
                cgroup = self.cgroups.create(
                    memory_bytes=limits.memory_bytes,
                    pids=limits.max_processes,
                    session=self.quota,
                )
                capture = OutputCapture(
                    keep_bytes, self.log_dir / f"{_safe_name(log_name)}.log", self.log_limit_bytes
                )
                proc = start_hosted(
                    self, command, cwd or self.root, limits, cgroup, ws_fd, traced
                ) or self._child(command, cwd or self.root, limits, cgroup, ws_fd, traced)
        except BaseException as exc:
            # Outside the gate: removing a cgroup waits for what is left in it to die.
            if capture is not None:
                capture.close()
            if cgroup is not None:
                self.cgroups.remove(cgroup)
            if isinstance(exc, OSError):
                raise start_failed(exc) from exc
            raise
        assert proc.stdout is not None
        with contextlib.suppress(OSError):
            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        deadline = time.monotonic() + timeout_s if timeout_s else None
        return RunningCommand(
            proc,
            capture,
            cgroup=cgroup,
            cgroups=self.cgroups,
            deadline=deadline,
            on_output=on_output,
            kill_grace_s=self.kill_grace_s,
            meter=meter,
        )

    def _clamped(self, limits: ResourceLimits) -> ResourceLimits:
        """``limits`` no higher than the operator's per-command ceilings (a limit left unset
        runs at the ceiling): a config that slipped past admission still gets no more."""
        quota = self.quota
        if quota is None:
            return limits
        memory = _lowest(limits.memory_bytes, quota.memory_per_command)
        pids = _lowest(limits.max_processes, quota.pids_per_command)
        if (memory, pids) == (limits.memory_bytes, limits.max_processes):
            return limits
        return dataclasses.replace(limits, memory_bytes=memory, max_processes=pids)

    def nproc_rlimit(self, cgroup: CommandCgroup | None) -> bool:
        """Whether ``RLIMIT_NPROC`` stands in for a pids cgroup the command lacks."""
        return cgroup is None or "pids" not in self.cgroups.controllers

    def _refuse(self) -> None:
        if self.refusal is not None:
            details = self.refusal.details or {}
            logger.warning("%s (tenant %s)", self.refusal.detail, details.get("tenant", "?"))
            raise self.refusal

    def _workspace_pin(self) -> WorkspacePin:
        """The pin of the directory commands run in: the sandbox's workspace, else the root.
        A path is resolved once, when first seen (the runner's root: at construction)."""
        policy = self.sandbox
        key = str(policy.workspace) if policy is not None and policy.confined else str(self.root)
        pin = self._pins.get(key)
        if pin is None:
            pin = self._pins.setdefault(key, WorkspacePin(os.path.realpath(key)))
        return pin

    def _child(
        self,
        command: str,
        cwd: Path,
        limits: ResourceLimits,
        cgroup: CommandCgroup | None,
        ws_fd: int,
        extra_env: dict[str, str],
    ) -> ChildProcess:
        """The command as a child of this process, in a sandbox of its own when confined:
        ``setpriv`` (the parent-death signal), the shell that joins the cgroup, raises its
        ``oom_score_adj``, sets the limits and traps that signal, then the command (in bwrap)
        as its job. bwrap inherits ``ws_fd``, the checked workspace it binds."""
        prelude = [self.cgroups.join_prelude(cgroup)] if cgroup is not None else []
        prelude.append(oom_prelude())
        if ulimits := limits.ulimit_prelude(nproc=self.nproc_rlimit(cgroup)):
            prelude.append(ulimits)
        argv, env, run = self._command_line(command, cwd, ws_fd, extra_env)
        procs = [] if cgroup is None else self.cgroups.procs_files(cgroup)
        script = "; ".join([*prelude, death_trap(procs), run])
        return ChildProcess(
            subprocess.Popen(
                [*self.guard, self.shell, "-c", script, "bash", command, *argv],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(ws_fd,) if argv else (),
            )
        )

    def _command_line(
        self, command: str, cwd: Path, ws_fd: int, extra_env: dict[str, str]
    ) -> tuple[list[str], dict[str, str], str]:
        """What follows ``bash -c <script> bash <command>`` (the bwrap argv, when sandboxed),
        the environment (``extra_env`` on top: the call's ``TRACEPARENT``) and the script's
        last part, which runs the command."""
        policy = self.sandbox
        if policy is None or not policy.confined:
            return [], {**self._unconfined_env(), **extra_env}, RUN_COMMAND
        reset = signal_reset()
        inner, env = self.confined(
            policy, [*reset, self.shell, "-c"], cwd, extra_env, workspace_fd=ws_fd
        )
        return inner, env, RUN_SANDBOXED if reset else RUN_SANDBOXED_PLAIN

    def confine(
        self,
        argv: Sequence[str],
        cwd: Path,
        *,
        readable: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` as this runner would start it, and its environment: under the session's
        sandbox (with ``readable`` paths added, e.g. a language server's installation, and
        ``writable`` directories, e.g. where git makes a worktree) and scrubbed environment,
        with ``env`` set on top. For helpers that are not shell commands but run what a
        project or config supplies (language servers; git, which runs hooks and filters; stdio
        MCP servers) and must be no less confined than one. The workspace is checked against
        its pin here (``workspace_moved``); the caller starts the argv later, so it is bound by
        path."""
        policy = self.sandbox
        self._refuse()
        self._workspace_pin().check()
        if policy is None or not policy.confined:
            return list(argv), {**self._unconfined_env(), **(env or {})}
        policy = policy.with_readable(readable).with_writable(writable)
        return self.confined(policy, argv, cwd, env)

    def _unconfined_env(self) -> dict[str, str]:
        return unconfined_env(
            self.sandbox, self._env, root=self.root, scrub=self.scrub_env, overrides=self._overrides
        )

    def confined(
        self,
        policy: SandboxPolicy,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
        *,
        workspace_fd: int | str | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """``workspace_fd``: bwrap binds it (a descriptor checked by the pin, or the shared
        sandbox's placeholder for one); Landlock's wrapper checks the pin's identity."""
        if self._bwrap is None and policy.mechanism is not Mechanism.LANDLOCK:
            self._bwrap = find_bwrap()
        overrides = {**self._overrides, **env} if env else self._overrides
        return confined_command(
            policy,
            argv,
            cwd,
            root=self.root,
            overrides=overrides,
            bwrap=self._bwrap,
            workspace_fd=workspace_fd,
            workspace_identity=self._workspace_pin().identity,
        )

    def run(
        self,
        command: str,
        *,
        log_name: str,
        timeout_s: float | None = None,
        keep_bytes: int = 32_000,
        limits: ResourceLimits | None = None,
    ) -> CommandResult:
        """Start and wait until the command has ended (for scripts and tests)."""
        running = self.start(
            command, log_name=log_name, timeout_s=timeout_s, keep_bytes=keep_bytes, limits=limits
        )
        result = running.wait()
        assert result is not None
        return result


@functools.cache
def shared_cgroups() -> CommandCgroups:
    """This process's cgroup places, detected once (every runner of the process shares them)."""
    return CommandCgroups.detect()


def start_failed(exc: OSError) -> ToolError:
    """The typed error of a command that could not be started because this host could not
    do its part (its log or private tmp under ``$TOOLHUB_HOME`` not writable, a full disk, a
    failing cgroup or ``exec``): nothing ran."""
    where = f" ({exc.filename})" if exc.filename else ""
    return ToolError.custom(
        ErrorCode.START_FAILED,
        f"The command was not started: this host could not prepare it{where}: "
        f"{io_reason(exc)}. Nothing ran. Try again later.",
        reason=io_reason(exc),
        path=None if exc.filename is None else str(exc.filename),
        may_have_run=False,
    )


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return cleaned.strip(".") or "command"


def _lowest(value: int | None, ceiling: int | None) -> int | None:
    if ceiling is None:
        return value
    return ceiling if value is None else min(value, ceiling)
