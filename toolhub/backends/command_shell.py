"""The shell around each command: the scripts that run it as a job of a waiting shell, the
parent-death guard and trap that kill it with the process that started it, and the probes of
what this host's kernel and tools offer (``env --default-signal``, pidfds, a setuid program).

Threat: a SIGKILLed worker must leave no command of a lost attempt running beside its re-run;
the guard (``setpriv --pdeathsig``) and the trap (kill the group and every process of the
command's cgroup) make the command die with its starter, and the signal resets make sure a
trap cannot be silently dropped by an inherited ignore.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: The command runs as a job of its shell, which waits for it; ``wait`` is interruptible, so the
#: shell's trap on the parent-death signal runs at once (a foreground child would defer it).
#: INT and QUIT are reset because bash ignores them in jobs when job control is off. The shell
#: outlives a TERM (a handler, not an ignore, so the command keeps the default) until its
#: command has ended, and exits with the command's status: what the command does with TERM
#: decides the outcome, as it would without the wrapping shell.
RUN_COMMAND = (
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
RUN_SANDBOXED = (
    "trap : TERM; __toolhub_cmd=$1; shift; "
    '( trap - INT QUIT; trap \'\' TERM; exec "$@" "$__toolhub_cmd" ) & '
    "wait $!; s=$?; while kill -0 $! 2>/dev/null; do wait $!; s=$?; done; exit $s"
)
RUN_SANDBOXED_PLAIN = RUN_SANDBOXED.replace("trap '' TERM; ", "")
PARENT_DEATH_SIGNAL = "HUP"


def parent_death_guard() -> list[str]:
    """``setpriv --pdeathsig HUP`` (util-linux): the kernel sends the command's shell SIGHUP
    the moment the process that started it dies (a SIGKILLed worker included), and the shell's
    trap kills the whole command. Set by exec, not by a ``preexec_fn`` (which can deadlock in
    a threaded worker). Without setpriv the sweep's cgroup reaping is the only backstop.

    A process started under ``nohup`` (or by anything else that ignores SIGHUP) passes the
    ignore on through every exec, and a shell cannot trap a signal ignored when it started: the
    trap would be silently dropped and the command would outlive its worker. Then
    ``env --default-signal=HUP`` gives the shell SIGHUP back at its default, for the trap to
    take it (the worker itself still ignores it)."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return []
    ignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    restore = signal_reset(PARENT_DEATH_SIGNAL) if ignored else ()
    return [setpriv, "--pdeathsig", PARENT_DEATH_SIGNAL, *restore]


@functools.cache
def pidfds_work() -> bool:
    """Whether this kernel (and its seccomp filter) gives pidfds: the shared sandbox needs
    them to find a command's host pid and to see it end."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


@functools.cache
def is_setuid(program: str) -> bool:
    try:
        return bool(os.stat(program).st_mode & stat.S_ISUID)
    except OSError:
        return False


def death_trap(procs: Sequence[Path]) -> str:
    """Shell that, on the parent-death signal, SIGKILLs the command's process group and every
    process in its cgroup (``procs``: its ``cgroup.procs`` files; those that left the group),
    the shell itself last."""
    members = ""
    if procs:
        files = " ".join(f"$(< {shlex.quote(str(path))})" for path in procs)
        members = f"for p in {files}; do [ $p = $$ ] || kill -KILL $p; done 2>/dev/null; "
    return f"trap '{members}kill -KILL 0' {PARENT_DEATH_SIGNAL}"


@functools.cache
def signal_reset(name: str = "TERM") -> tuple[str, ...]:
    """``env --default-signal=<name>`` where coreutils' env has it (9.x), else nothing."""
    env = shutil.which("env")
    if env is None:
        return ()
    argv = (env, f"--default-signal={name}")
    try:
        ok = subprocess.run([*argv, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return argv if ok else ()
