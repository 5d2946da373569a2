"""Starting a shared sandbox (``sandbox_host.py``): the launcher's command line, and the one
long-lived thread that forks every sandbox, so each keeps its parent-death signal."""

from __future__ import annotations

import functools
import os
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import toolhub.sandbox
from toolhub.sandbox.installs import install_roots

LAUNCHER = Path(toolhub.sandbox.__file__).resolve().parent / "launcher.py"
FD_PLACEHOLDER = "{fd}"
#: Stands for the descriptor of the pinned workspace in a shared sandbox's bwrap argv (its
#: ``--bind-fd``): the argv is the sandbox's key, the descriptor differs at every start.
WORKSPACE_FD_PLACEHOLDER = "{workspace-fd}"


def launcher_interpreter() -> str:
    """The base Python (not a virtualenv's): the launcher needs the standard library only,
    and the sandbox then needs only that installation readable (``install_roots``)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


@functools.cache
def launcher_roots() -> tuple[Path, ...]:
    """What the sandbox must have readable for the launcher to start (cached: it reads
    files, and every hosted command's policy adds it)."""
    return install_roots(launcher_interpreter())


@functools.cache
def launcher_argv() -> tuple[str, ...]:
    """The launcher's command line inside the sandbox, its source given with ``-c`` (nothing
    of toolhub's installation is bound in); ``SandboxHost`` puts its socket's number in place
    of the placeholder."""
    return (launcher_interpreter(), "-I", "-S", "-c", LAUNCHER.read_text(), FD_PLACEHOLDER)


def host_pid(pidfd: int) -> int:
    """The pid, in this process's namespace, of the process a pidfd refers to (-1: it has
    ended; 0: it is not visible from here)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as info:
            for line in info:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


# -- spawning -----------------------------------------------------------------------------------

#: A process's parent-death signal fires when the *thread* that forked it ends. Sandboxes
#: outlive the call that started them, so one long-lived thread forks them all.
_SpawnRequest = tuple[list[str], dict[str, str], tuple[int, ...], Future[subprocess.Popen[bytes]]]
_spawn_requests: queue.SimpleQueue[_SpawnRequest] = queue.SimpleQueue()
_spawner_lock = threading.Lock()
_spawner: threading.Thread | None = None


def spawn(argv: list[str], env: dict[str, str], *fds: int) -> subprocess.Popen[bytes]:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_forever, name="sandbox-spawner", daemon=True)
            _spawner.start()
    done: Future[subprocess.Popen[bytes]] = Future()
    _spawn_requests.put((argv, env, fds, done))
    return done.result()


def _spawn_forever() -> None:
    while True:
        argv, env, fds, done = _spawn_requests.get()
        try:
            done.set_result(
                subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=fds,
                    start_new_session=True,
                )
            )
        except BaseException as exc:
            done.set_exception(exc)
