"""No traceback from the CLI (issue 16): every documented misuse, missing extra and unreachable
server answers with one ``error:`` line on stderr and a non-zero exit code.

The misuses run in this process (``tests/cli/in_process.py``); one of them, the missing extras
(which need a fresh interpreter) and the gateway run as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.in_process import run_cli
from tests.cli.test_cli_servers import wait_http
from toolhub.ports import free_port

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
DOWN = "redis://:secret-pw@127.0.0.1:9/0"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home"), "COLUMNS": "200"}


MISUSES = [
    (["call", "read_file", '{"path": "x"}', "--redis", DOWN], "cannot reach Redis"),
    (["mcp", "--redis", DOWN], "cannot reach Redis"),
    (["tasks", "list", "--redis", DOWN], "cannot reach Redis"),
    (["tasks", "show", "task-x", "--redis", DOWN], "cannot reach Redis"),
    (["tools", "--config", "missing.yaml"], "missing.yaml"),
    (["validate", "broken.yaml"], "broken.yaml"),
    (["call", "no_such_tool"], "no_such_tool"),
    (["call", "read_file", "{not json"], "not valid JSON"),
    (["serve", "--port", "70000"], "--port"),
    (["up", "--port", "0"], "--port"),
    (["mcp", "--transport", "http", "--port", "0"], "--port"),
    (["call", "read_file", '{"path": "x"}', "--workspace", "afile.txt"], "not a directory"),
    (["tools", "--workspace", "missing"], "workspace missing does not exist"),
    (["mcp", "--workspace", "afile.txt"], "not a directory"),
]


@pytest.mark.parametrize(("args", "says"), MISUSES, ids=[" ".join(a[:2]) for a, _ in MISUSES])
def test_misuse_is_one_line_and_a_nonzero_exit(
    env: dict[str, str], tmp_path: Path, args: list[str], says: str
) -> None:
    (tmp_path / "broken.yaml").write_text("tools: [unclosed\n")
    (tmp_path / "afile.txt").write_text("a file, not a workspace\n")
    done = run_cli(args, env, tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert says in done.stderr + done.stdout, done.stderr
    assert "secret-pw" not in done.stderr, "the Redis password is never printed"


def test_a_misuse_as_a_real_process(env: dict[str, str], tmp_path: Path) -> None:
    """The exit status the OS reports, and nothing but the one line on stderr."""
    done = subprocess.run(
        [TOOLHUB, "tasks", "list", "--redis", DOWN],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: cannot reach Redis") and done.stderr.count("\n") == 1
    assert "secret-pw" not in done.stderr


@pytest.mark.parametrize(
    ("command", "module", "extra"),
    [("serve", "fastapi", "gateway"), ("demo", "fastapi", "gateway"), ("mcp", "mcp", "mcp")],
)
def test_a_missing_extra_names_the_extra(
    env: dict[str, str], tmp_path: Path, command: str, module: str, extra: str
) -> None:
    """The package is made unimportable the way a missing one is (``None`` in sys.modules)."""
    script = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = ['toolhub', {command!r}]; "
        "from toolhub.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    assert f"pip install 'toolhub[{extra}]'" in done.stderr, done.stderr


def test_a_gateway_whose_redis_is_down_answers_a_typed_503(
    env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--redis", DOWN, "--workspace", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        created = httpx.post(f"http://127.0.0.1:{port}/v1/sessions", json={}, timeout=30)
        assert created.status_code == 503, created.text
        assert created.json()["code"] == "redis_unavailable"
        assert "secret-pw" not in created.text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err
    # It said so when it started, without the password.
    assert "warning: Redis at redis://:***@127.0.0.1:9/0 does not answer" in err, err
    assert "secret-pw" not in err


def test_a_port_in_use_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    """Before "gateway on …" and uvicorn's startup log, not after them."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args in (["serve", "--port", port], ["mcp", "--transport", "http", "--port", port]):
            done = run_cli([*args, "--workspace", str(tmp_path)], env, tmp_path)
            assert done.returncode == 1, done.stderr
            said = f"cannot listen on 127.0.0.1:{port}: Address already in use"
            assert done.stderr == f"error: {said} (choose another --port)\n"


def test_a_redis_url_without_its_password_says_so(env: dict[str, str], tmp_path: Path) -> None:
    """Not redis-py's words about the protocol's HELLO (a real Redis with a password)."""
    from toolhub.cli.worker import unusable_redis
    from toolhub.stack.redis_server import RedisServer

    with RedisServer(password="the-pw") as server:
        bare = server.url.replace(":the-pw@", "")
        wrong = server.url.replace("the-pw", "not-it")
        for args in (["tasks", "list"], ["call", "read_file", '{"path": "x"}']):
            done = run_cli([*args, "--redis", bare], env, tmp_path)
            assert done.returncode == 1 and "HELLO" not in done.stderr, done.stderr
            assert "Redis requires a password: give it in the URL" in done.stderr, done.stderr
        reason = unusable_redis(bare)  # what `toolhub worker` and `toolhub serve` say
        assert reason is not None and reason.startswith("Redis requires a password"), reason
        refused = run_cli(["tasks", "list", "--redis", wrong], env, tmp_path)
        assert "Redis refused the password" in refused.stderr and "not-it" not in refused.stderr
