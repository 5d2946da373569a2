"""Real third-party clients that cannot share the project's environment (they pin other
versions of the ``mcp`` SDK or fastmcp), each in its own virtualenv under ``.venv/clients``,
made once and reused, as a user of that client would have it.

A registry or network failure fails the test that asked (never a skip): the client is what the
test is about.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / ".venv" / "clients"


def client_python(name: str, requirements: list[str], *, timeout_s: float = 600) -> Path:
    """The python of the virtualenv ``name`` with exactly ``requirements`` installed (made
    on first use; a changed requirement list makes it again)."""
    home = CLIENTS / name
    python = home / "bin" / "python"
    wanted = "\n".join(requirements)
    stamp = home / ".requirements"
    CLIENTS.mkdir(parents=True, exist_ok=True)
    with (CLIENTS / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text() == wanted:
            return python
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(home)], check=True, timeout=120
        )
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *requirements],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            raise RuntimeError(f"could not install {requirements}: {done.stderr[-2000:]}")
        stamp.write_text(wanted)
    return python
