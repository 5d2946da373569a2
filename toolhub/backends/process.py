"""The process runner: one shell command in the workspace, streamed, bounded and killable.

Each command runs in its own session (so in its own process group) with stdin closed and
stdout and stderr merged into one pipe. One reader thread per command waits on the pipe and on
the process (a pidfd where the kernel has them, so nothing polls), streams every chunk to the
caller's callback the moment it arrives, keeps a bounded head and tail in memory and writes the
full output to a log file.

A command never outlives the process that started it: its shell gets a parent-death signal
(``setpriv --pdeathsig``) and then kills the command's group and cgroup, so a SIGKILLed worker
leaves no command of a lost attempt running beside its re-run.

Stopping never waits on the command: ``kill`` sends SIGTERM to the whole group (and its cgroup)
at once and SIGKILL after a grace period, from any thread. A command that exits while processes
it started still hold its output pipe does not hang the call: after a short drain those
leftovers are killed too (a command that should outlive its call belongs in the background).

A runner given a ``SandboxPolicy`` (``toolhub.sandbox``) runs each command inside bubblewrap,
with the allowlisted environment only. The guard, the cgroup join, the limits and the death
trap stay outside and around it, unchanged: the shell joins the cgroup and then starts bwrap as
its job, so everything in the sandbox is in the command's process group and cgroup, and every
way of stopping a command stops a sandboxed one too.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolhub.sandbox import (
    Mechanism,
    SandboxPolicy,
    bwrap_argv,
    find_bwrap,
    landlock_argv,
    scrubbed_env,
)
from toolhub.sandbox.bwrap import SANDBOX_HOME, SANDBOX_TMP

from .capture import DEFAULT_LOG_LIMIT, CapturedOutput, OutputCapture
from .limits import PidsCgroups, ResourceLimits

KillReason = Literal["timeout", "cancelled", "killed"]

KILL_GRACE_S = 1.0
DRAIN_GRACE_S = 0.25
_READ_SIZE = 256 * 1024
_PIPE_SIZE = 1 << 20
_TICK_S = 0.05

OutputCallback = Callable[[bytes], None]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended. ``exit_code`` follows the shell: 128 + N when killed by signal N."""

    exit_code: int | None
    output: CapturedOutput
    duration_s: float
    killed: KillReason | None = None
    signal: str | None = None


@dataclass(slots=True)
class _KillState:
    reason: KillReason | None = None
    escalation: threading.Timer | None = None


class RunningCommand:
    """A started command. Every method is safe from any thread and returns promptly."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        capture: OutputCapture,
        *,
        cgroup: Path | None,
        cgroups: PidsCgroups,
        deadline: float | None,
        on_output: OutputCallback | None,
        kill_grace_s: float,
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        self._capture = capture
        self._cgroup = cgroup
        self._cgroups = cgroups
        self._deadline = deadline
        self._on_output = on_output
        self._kill_grace_s = kill_grace_s
        self._kill = _KillState()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: CommandResult | None = None
        self._callbacks: list[Callable[[CommandResult], None]] = []
        self._thread = threading.Thread(target=self._pump, name=f"cmd-{self.pid}", daemon=True)
        self._thread.start()

    @property
    def log_path(self) -> Path | None:
        return self._capture.log_path

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def result(self) -> CommandResult | None:
        return self._result

    def output(self) -> CapturedOutput:
        """What the command has printed so far."""
        return self._capture.snapshot()

    def wait(self, timeout: float | None = None) -> CommandResult | None:
        """The result, or None if the command is still running after ``timeout`` seconds."""
        self._done.wait(timeout)
        return self._result

    def add_done_callback(self, callback: Callable[[CommandResult], None]) -> None:
        """Run ``callback(result)`` once the command has ended (now, if it already has)."""
        with self._lock:
            if self._result is None:
                self._callbacks.append(callback)
                return
            result = self._result
        callback(result)

    def kill(self, reason: KillReason = "killed") -> bool:
        """SIGTERM the command's group now and SIGKILL it after the grace period. The first
        reason given is the one reported. False when the command had already ended."""
        with self._lock:
            if self._result is not None:
                return False
            first = self._kill.reason is None
            if first:
                self._kill.reason = reason
        if first:
            self._signal(signal.SIGTERM)
            timer = threading.Timer(self._kill_grace_s, self._signal, (signal.SIGKILL,))
            timer.daemon = True
            self._kill.escalation = timer
            timer.start()
        return True

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        if self._cgroup is not None:
            self._cgroups.signal_all(self._cgroup, sig)

    # -- the reader thread ---------------------------------------------------------------------

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        pipe = self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(pipe, select.POLLIN | select.POLLHUP | select.POLLERR)
        pidfd = _pidfd(self.pid)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        pipe_open, exited = True, False
        exited_at = 0.0
        swept: set[signal.Signals] = set()
        try:
            while pipe_open or not exited:
                now = time.monotonic()
                if self._deadline is not None and now >= self._deadline:
                    self.kill("timeout")
                if exited and pipe_open:
                    # Leftovers of a finished command hold the pipe: end them, then stop
                    # listening even if something that escaped the group still holds it.
                    waited = now - exited_at
                    for sig, after in ((signal.SIGTERM, 0.0), (signal.SIGKILL, self._kill_grace_s)):
                        if waited > DRAIN_GRACE_S + after and sig not in swept:
                            swept.add(sig)
                            self._signal(sig)
                    if waited > DRAIN_GRACE_S + self._kill_grace_s + 0.5:
                        break
                for fd, _ in poller.poll(self._poll_ms(now, exited, pidfd is None)):
                    if fd == pipe:
                        data = _read(pipe)
                        if data:
                            self._capture.write(data)
                            if self._on_output is not None:
                                self._on_output(data)
                        else:
                            pipe_open = False
                            poller.unregister(pipe)
                    elif fd == pidfd:
                        poller.unregister(pidfd)
                if not exited and self.proc.poll() is not None:
                    exited, exited_at = True, time.monotonic()
        finally:
            if pidfd is not None:
                os.close(pidfd)
            self._finish()

    def _poll_ms(self, now: float, exited: bool, polling: bool) -> int:
        waits = [10_000.0]
        if self._deadline is not None:
            waits.append(self._deadline - now)
        if exited or polling:
            waits.append(_TICK_S)
        return max(1, int(min(waits) * 1000))

    def _finish(self) -> None:
        code = self.proc.wait()
        if self._kill.escalation is not None:
            self._kill.escalation.cancel()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroups.remove_later(self._cgroup)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._capture.close()
        sig_name = None
        if code < 0:
            sig_name = signal.Signals(-code).name
            code = 128 - code
        elif code > 128:
            with contextlib.suppress(ValueError):
                sig_name = signal.Signals(code - 128).name
        reason = self._kill.reason
        result = CommandResult(
            exit_code=code,
            output=self._capture.snapshot(),
            duration_s=time.monotonic() - self._started_mono,
            killed=reason,
            signal=sig_name,
        )
        with self._lock:
            self._result = result
            callbacks, self._callbacks = self._callbacks, []
        self._done.set()
        for callback in callbacks:
            callback(result)


class ProcessRunner:
    """Runs shell commands under a workspace with resource limits and per-call logs.

    ``sandbox`` confines every command it starts (``None``: unconfined, as before; it may be
    set after construction, before the first command). ``scrub_env`` gives unconfined commands
    the allowlisted environment too; sandboxed ones always get it. ``env`` is set on top, in
    both cases: what the caller names explicitly.
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
        cgroups: PidsCgroups | None = None,
        sandbox: SandboxPolicy | None = None,
        scrub_env: bool = False,
    ) -> None:
        self.root = Path(root)
        self.sandbox = sandbox
        self.scrub_env = scrub_env
        self._overrides = dict(env or {})
        self._bwrap: str | None = None
        self.log_dir = Path(log_dir)
        self.limits = limits or ResourceLimits()
        self.kill_grace_s = kill_grace_s
        self.log_limit_bytes = log_limit_bytes
        self.cgroups = cgroups if cgroups is not None else PidsCgroups.detect()
        self._shell = shutil.which("bash") or "/bin/sh"
        self._guard = _parent_death_guard()
        self._env = {
            **os.environ,
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
    ) -> RunningCommand:
        """Start ``command`` now; output streams to ``on_output`` from the reader thread."""
        limits = limits or self.limits
        cgroup = (
            self.cgroups.create(limits.max_processes) if limits.max_processes is not None else None
        )
        prelude = [PidsCgroups.join_prelude(cgroup)] if cgroup is not None else []
        if ulimits := limits.ulimit_prelude():
            prelude.append(ulimits)
        argv, env, run = self._command_line(command, cwd or self.root)
        script = "; ".join([*prelude, _death_trap(cgroup), run])
        capture = OutputCapture(
            keep_bytes, self.log_dir / f"{_safe_name(log_name)}.log", self.log_limit_bytes
        )
        try:
            proc = subprocess.Popen(
                [*self._guard, self._shell, "-c", script, "bash", command, *argv],
                cwd=cwd or self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            capture.close()
            if cgroup is not None:
                self.cgroups.remove(cgroup)
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
        )

    def _command_line(self, command: str, cwd: Path) -> tuple[list[str], dict[str, str], str]:
        """What follows ``bash -c <script> bash <command>`` (the bwrap argv, when sandboxed),
        the environment and the script's last part, which runs the command."""
        policy = self.sandbox
        if policy is None or not policy.confined:
            if (policy is not None and policy.scrub_env) or self.scrub_env:
                tmp = policy.tmp_dir if policy is not None else None
                if tmp is not None:
                    Path(tmp).mkdir(parents=True, exist_ok=True)
                env = scrubbed_env(
                    os.environ,
                    home=os.environ.get("HOME", str(self.root)),
                    tmpdir=str(tmp) if tmp is not None else SANDBOX_TMP,
                    extra_names=policy.env if policy is not None else (),
                    overrides=self._overrides,
                )
                return [], env, _RUN_COMMAND
            return [], self._env, _RUN_COMMAND
        reset = _signal_reset()
        if policy.mechanism is Mechanism.LANDLOCK:
            # No private mount namespace: the private tmp is where TMPDIR and HOME point.
            tmp = Path(policy.tmp_dir) if policy.tmp_dir is not None else self.root
            (tmp / "home").mkdir(parents=True, exist_ok=True)
            env = scrubbed_env(
                os.environ,
                home=str(tmp / "home"),
                tmpdir=str(tmp),
                extra_names=policy.env,
                overrides=self._overrides,
            )
            inner = landlock_argv(policy, [*reset, self._shell, "-c"], env=env, cwd=cwd)
            return inner, env, _RUN_SANDBOXED if reset else _RUN_SANDBOXED_PLAIN
        env = scrubbed_env(
            os.environ, home=SANDBOX_HOME, extra_names=policy.env, overrides=self._overrides
        )
        if self._bwrap is None:
            self._bwrap = find_bwrap()
        inner = bwrap_argv(policy, [*reset, self._shell, "-c"], env=env, cwd=cwd, bwrap=self._bwrap)
        return inner, env, _RUN_SANDBOXED if reset else _RUN_SANDBOXED_PLAIN

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


#: The command runs as a job of its shell, which waits for it; ``wait`` is interruptible, so the
#: shell's trap on the parent-death signal runs at once (a foreground child would defer it).
#: INT and QUIT are reset because bash ignores them in jobs when job control is off. The shell
#: outlives a TERM (a handler, not an ignore, so the command keeps the default) until its
#: command has ended, and exits with the command's status: what the command does with TERM
#: decides the outcome, as it would without the wrapping shell.
_RUN_COMMAND = (
    "trap : TERM; __toolhub_cmd=$1; set --; "
    '( trap - INT QUIT TERM; eval "unset __toolhub_cmd; $__toolhub_cmd" ) & '
    "wait $!; s=$?; while kill -0 $! 2>/dev/null; do wait $!; s=$?; done; exit $s"
)
#: The sandboxed variant: the arguments after the command are the bwrap argv, and the command
#: is its last argument. bwrap's monitor dies of a TERM at once, which would SIGKILL the
#: sandbox (``--die-with-parent``) before the command handled the TERM it got from the group
#: signal; so bwrap starts with TERM ignored and ``env --default-signal=TERM`` restores it for
#: the command inside. Without that ``env``, the plain variant: TERM then ends the command at
#: once, a harder stop but still a stop.
_RUN_SANDBOXED = (
    "trap : TERM; __toolhub_cmd=$1; shift; "
    '( trap - INT QUIT; trap \'\' TERM; exec "$@" "$__toolhub_cmd" ) & '
    "wait $!; s=$?; while kill -0 $! 2>/dev/null; do wait $!; s=$?; done; exit $s"
)
_RUN_SANDBOXED_PLAIN = _RUN_SANDBOXED.replace("trap '' TERM; ", "")
PARENT_DEATH_SIGNAL = "HUP"


def _parent_death_guard() -> list[str]:
    """``setpriv --pdeathsig HUP`` (util-linux): the kernel sends the command's shell SIGHUP
    the moment the process that started it dies (a SIGKILLed worker included), and the shell's
    trap kills the whole command. Set by exec, not by a ``preexec_fn`` (which can deadlock in
    a threaded worker). Without setpriv the sweep's cgroup reaping is the only backstop."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", PARENT_DEATH_SIGNAL] if setpriv else []


def _death_trap(cgroup: Path | None) -> str:
    """Shell that, on the parent-death signal, SIGKILLs the command's process group and every
    process in its cgroup (those that left the group), the shell itself last."""
    members = ""
    if cgroup is not None:
        procs = shlex.quote(str(cgroup / "cgroup.procs"))
        members = f"for p in $(< {procs}); do [ $p = $$ ] || kill -KILL $p; done 2>/dev/null; "
    return f"trap '{members}kill -KILL 0' {PARENT_DEATH_SIGNAL}"


@functools.cache
def _signal_reset() -> tuple[str, ...]:
    """``env --default-signal=TERM`` where coreutils' env has it (9.x), else nothing."""
    env = shutil.which("env")
    if env is None:
        return ()
    argv = (env, "--default-signal=TERM")
    try:
        ok = subprocess.run([*argv, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return argv if ok else ()


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _read(fd: int) -> bytes:
    """Read what the pipe holds (poll said it is readable, so this never blocks)."""
    try:
        return os.read(fd, _READ_SIZE)
    except OSError:
        return b""


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return cleaned.strip(".") or "command"
