"""Can this machine enforce a sandbox? Asked once per binary, by running bwrap for real.

bubblewrap needs either root or unprivileged user namespaces, and restricted containers (many
Kubernetes pods, Docker's default seccomp profile on older kernels) have neither: the binary is
there but every sandbox fails. Looking at sysctls guesses; running ``bwrap ... true`` with the
namespaces toolhub uses knows. The answer is cached for the life of the process (it does not
change under a running worker), so the cost — a few milliseconds — is paid once.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass

from .bwrap import BwrapNotFound, bwrap_argv, find_bwrap
from .policy import SandboxMode, SandboxPolicy

PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class SandboxSupport:
    """The probe's answer: ``reason`` says why not (bwrap's own message when it ran)."""

    available: bool
    binary: str | None
    reason: str = ""


def probe(binary: str | None = None) -> SandboxSupport:
    """Whether ``binary`` (default: ``find_bwrap()``) can run a confined command here."""
    try:
        path = binary or find_bwrap()
    except BwrapNotFound as exc:
        return SandboxSupport(False, None, str(exc))
    return _probe(path)


@functools.cache
def _probe(binary: str) -> SandboxSupport:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="toolhub-probe-") as tmp:
        policy = SandboxPolicy(Path(tmp), SandboxMode.WORKSPACE_WRITE, hidden=())
        argv = bwrap_argv(policy, ["true"], env={"PATH": "/usr/bin:/bin"}, bwrap=binary)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return SandboxSupport(False, binary, f"{binary} cannot run: {exc}")
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        return SandboxSupport(False, binary, f"{binary} cannot create a sandbox here: {message}")
    return SandboxSupport(True, binary)
