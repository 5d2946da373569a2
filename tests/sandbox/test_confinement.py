"""The sandbox with the real bwrap: in each confined mode, what a command tries beyond its
workspace is refused — writes elsewhere, writes through a symlink out, another session's
files, the host's /proc environ, the network — while its legitimate work in the same command
is done. ``full`` mode confines nothing."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from toolhub.sandbox import SandboxMode

from .conftest import Layout, requires_bwrap, text

pytestmark = requires_bwrap
CONFINED = [SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY]


def test_workspace_write_writes_only_in_the_workspace_and_private_tmp(layout: Layout) -> None:
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    res = runner.run(
        "echo work > result.txt && cat result.txt; "
        f"echo x > {layout.outside}/escape.txt; "
        "echo x > link/via-symlink.txt; "
        "echo x > /etc/toolhub-escape; "
        "echo x > .git/hooks/pre-commit; "
        "echo t > /tmp/t.txt && cat /tmp/t.txt; "
        "cat link/readme.txt; "
        "echo done",
        log_name="ww",
    )
    out = text(res)
    assert res.exit_code == 0 and out.startswith("work\n") and out.endswith("done\n")
    assert out.count("Read-only file system") == 2, out  # /etc and .git/hooks
    # Outside the readable roots nothing exists: no write, no read, even through a symlink.
    assert out.count("No such file or directory") == 3, out
    assert "outside-readable" not in out
    assert (layout.ws / "result.txt").read_text() == "work\n"
    assert not (layout.outside / "escape.txt").exists()
    assert not (layout.outside / "via-symlink.txt").exists()
    assert not os.path.exists("/etc/toolhub-escape")
    assert not (layout.ws / ".git" / "hooks" / "pre-commit").exists()
    assert (layout.tmp / "t.txt").read_text() == "t\n"  # the session's private tmp


def test_git_hooks_cannot_be_replaced_by_moving_git_away(layout: Layout) -> None:
    """A read-only ``.git/hooks`` is not enough if ``.git`` itself can be renamed and a new one
    made beside it: the parents of read-only paths are pinned (a mount point cannot move)."""
    (layout.ws / ".git" / "objects").mkdir()
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    res = runner.run(
        "mv .git .git-moved; "
        "rm -r .git/hooks; "
        "mkdir -p .git2/hooks && mv -T .git2 .git; "
        "echo obj > .git/objects/ab && cat .git/objects/ab; "
        "echo done",
        log_name="git",
    )
    out = text(res)
    assert out.endswith("obj\ndone\n"), out  # the repository itself stays writable
    assert "Device or resource busy" in out, out
    assert (layout.ws / ".git" / "hooks").is_dir()
    assert not (layout.ws / ".git-moved").exists()
    assert (layout.ws / ".git2" / "hooks").is_dir(), "the replacement .git never took its place"


def test_the_private_tmp_and_home_persist_across_a_sessions_commands(layout: Layout) -> None:
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    runner.run("echo kept > /tmp/state; echo h > ~/.rc", log_name="a")
    res = runner.run("cat /tmp/state ~/.rc; echo $HOME", log_name="b")
    assert text(res) == "kept\nh\n/tmp/home\n"


def test_read_only_mode_writes_nothing_but_a_fresh_tmp(layout: Layout) -> None:
    (layout.ws / "input.txt").write_text("data\n")
    runner = layout.runner(layout.policy(SandboxMode.READ_ONLY))
    res = runner.run(
        "cat input.txt; echo x > out.txt; echo x > link/x; echo s > /tmp/s && cat /tmp/s",
        log_name="ro",
    )
    out = text(res)
    assert out.startswith("data\n") and out.endswith("s\n")
    assert out.count("Read-only file system") == 1, out  # the workspace
    assert out.count("No such file or directory") == 1, out  # through the symlink out
    assert not (layout.ws / "out.txt").exists() and not (layout.outside / "x").exists()
    assert not layout.tmp.exists() or not (layout.tmp / "s").exists()


@pytest.mark.parametrize("mode", CONFINED)
def test_another_sessions_workspace_is_not_visible(layout: Layout, mode: SandboxMode) -> None:
    runner = layout.runner(layout.policy(mode))
    res = runner.run(
        f"echo ok; echo [$(ls -A {layout.other})]; cat {layout.other}/notes.txt; "
        f"echo x > {layout.other}/planted",
        log_name="other",
    )
    out = text(res)
    assert out.startswith("ok\n")
    assert "c0nfidential-notes" not in out
    assert "No such file or directory" in out
    assert not (layout.other / "planted").exists()
    assert (layout.other / "notes.txt").exists()  # hidden, not harmed


def test_a_config_can_make_more_paths_readable_and_hidden_ones_stay_hidden(
    layout: Layout,
) -> None:
    policy = layout.policy(SandboxMode.WORKSPACE_WRITE, readable=(layout.base,))
    res = layout.runner(policy).run(
        f"cat {layout.outside}/readme.txt; echo [$(ls -A {layout.other})]; "
        f"echo x > {layout.outside}/w",
        log_name="read",
    )
    out = text(res)
    assert out.startswith("outside-readable\n[]\n"), out  # other-session: an empty dir
    assert "Read-only file system" in out and not (layout.outside / "w").exists()


@pytest.mark.parametrize("mode", CONFINED)
def test_host_proc_environ_is_unreachable(
    layout: Layout, secrets: dict[str, str], mode: SandboxMode
) -> None:
    runner = layout.runner(layout.policy(mode))
    me = os.getpid()
    res = runner.run(
        f"echo start; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' '\\n' < /proc/{me}/environ; "
        f"tr '\\0' '\\n' < /proc/$PPID/environ; ls /proc | grep -c '^[0-9]'",
        log_name="proc",
    )
    out = text(res)
    assert out.startswith("start\n")
    for value in secrets.values():
        assert value not in out
    # A fresh pid namespace: only the sandbox's own few processes are there.
    assert int(out.strip().splitlines()[-1]) < 10


@pytest.mark.parametrize("mode", CONFINED)
def test_environment_is_the_allowlist(
    layout: Layout, secrets: dict[str, str], mode: SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TOOL_HOME", "/opt/tool")
    monkeypatch.setenv("CI_JOB", "7")
    monkeypatch.setenv("CI_RUNNER", "r1")
    runner = layout.runner(layout.policy(mode, env=("MY_TOOL_HOME", "CI_*")))
    res = runner.run("env", log_name="env")
    env = dict(line.split("=", 1) for line in text(res).splitlines() if "=" in line)
    for name, value in secrets.items():
        assert name not in env and value not in text(res)
    assert env["HOME"] == "/tmp/home" and env["TMPDIR"] == "/tmp"
    assert env["PATH"] == os.environ["PATH"] and env["TERM"] == "dumb"
    assert env["PAGER"] == "cat" and env["GIT_PAGER"] == "cat" and env["PYTHONUNBUFFERED"] == "1"
    assert env["MY_TOOL_HOME"] == "/opt/tool" and env["CI_JOB"] == "7" and env["CI_RUNNER"] == "r1"
    allowed = {"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME"}
    fixed = {"HOME", "TMPDIR", "TERM", "PAGER", "GIT_PAGER", "PYTHONUNBUFFERED"}
    shell = {"PWD", "SHLVL", "_", "OLDPWD"}
    assert set(env) <= allowed | fixed | shell | {"MY_TOOL_HOME", "CI_JOB", "CI_RUNNER"}


class _Listener:
    """A TCP port on the host's loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.mark.parametrize("mode", CONFINED)
def test_network_off_cannot_reach_the_hosts_loopback(layout: Layout, mode: SandboxMode) -> None:
    listener = _Listener()
    try:
        runner = layout.runner(layout.policy(mode))
        res = runner.run(
            f"echo start; (echo hi > /dev/tcp/127.0.0.1/{listener.port}) && echo CONNECTED; "
            "echo end",
            log_name="net",
            timeout_s=20,
        )
        out = text(res)
        assert out.startswith("start\n") and out.endswith("end\n")
        assert "CONNECTED" not in out and listener.accepted == 0
    finally:
        listener.close()


def test_network_on_reaches_the_hosts_loopback(layout: Layout) -> None:
    listener = _Listener()
    try:
        runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE, network=True))
        res = runner.run(
            f"(echo hi > /dev/tcp/127.0.0.1/{listener.port}) && echo CONNECTED",
            log_name="net-on",
            timeout_s=20,
        )
        assert text(res) == "CONNECTED\n"
    finally:
        listener.close()


def test_full_mode_confines_nothing_but_still_scrubs_the_environment(
    layout: Layout, secrets: dict[str, str]
) -> None:
    runner = layout.runner(layout.policy(SandboxMode.FULL))
    res = runner.run(
        f"echo x > {layout.outside}/written; cat {layout.other}/notes.txt; env", log_name="full"
    )
    out = text(res)
    assert (layout.outside / "written").exists() and "c0nfidential-notes" in out
    for name in secrets:
        assert name not in out


def test_full_mode_without_scrub_and_no_policy_keep_the_environment_but_toolhubs_secrets(
    layout: Layout, secrets: dict[str, str]
) -> None:
    for runner in (
        layout.runner(layout.policy(SandboxMode.FULL, scrub_env=False)),
        layout.runner(None),
    ):
        out = text(runner.run("env", log_name="e"))
        assert secrets["AWS_SECRET_ACCESS_KEY"] in out
        assert secrets["TOOLHUB_API_TOKEN"] not in out
        assert secrets["TOOLHUB_REDIS_URL"] not in out


def test_scrub_flag_for_unsandboxed_commands(layout: Layout, secrets: dict[str, str]) -> None:
    runner = layout.runner(None, scrub_env=True, env={"EXTRA": "1"})
    out = text(runner.run("env; echo x > link/unconfined", log_name="e"))
    assert "EXTRA=1" in out and "PYTHONUNBUFFERED=1" in out
    for name in secrets:
        assert name not in out
    assert (layout.outside / "unconfined").exists()
