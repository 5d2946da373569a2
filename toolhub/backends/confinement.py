"""How a command is started under its session's sandbox: the wrapped argv and the environment.

One place for both, so a shell command (``ProcessRunner.start``) and a long-lived helper that
is not one (a language server, ``ProcessRunner.confine``) get exactly the same confinement:
bubblewrap's mounts or Landlock's rules from the same ``SandboxPolicy``, and the allowlisted
environment (``toolhub.sandbox.environment``) with ``HOME`` and ``TMPDIR`` inside the sandbox.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolhub.sandbox import Mechanism, SandboxPolicy, bwrap_argv, landlock_argv, scrubbed_env
from toolhub.sandbox.bwrap import SANDBOX_HOME, SANDBOX_TMP
from toolhub.sandbox.installs import install_roots
from toolhub.sandbox.proxy import PROXY_PORT, egress_proxy, proxy_env

#: Where the egress proxy's unix socket appears inside a bwrap sandbox.
BRIDGE_SOCKET = "/run/toolhub-egress.sock"


def unconfined_env(
    policy: SandboxPolicy | None,
    base: dict[str, str],
    *,
    root: Path,
    scrub: bool,
    overrides: Mapping[str, str],
) -> dict[str, str]:
    """The environment of an unconfined command: ``base`` (the worker's, with the runner's
    fixed values), or the allowlist when the policy or the runner asks for a scrubbed one."""
    if not ((policy is not None and policy.scrub_env) or scrub):
        return base
    tmp = policy.tmp_dir if policy is not None else None
    if tmp is not None:
        Path(tmp).mkdir(parents=True, exist_ok=True)
    return scrubbed_env(
        os.environ,
        home=os.environ.get("HOME", str(root)),
        tmpdir=str(tmp) if tmp is not None else SANDBOX_TMP,
        extra_names=policy.env if policy is not None else (),
        overrides=overrides,
    )


def confined_command(
    policy: SandboxPolicy,
    argv: Sequence[str],
    cwd: Path,
    *,
    root: Path,
    overrides: Mapping[str, str],
    bwrap: str | None,
    workspace_fd: int | str | None = None,
    workspace_identity: tuple[int, int] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``argv`` wrapped to run under ``policy`` (a confined one), and its environment: the
    pinned workspace bound by ``workspace_fd`` (bwrap) or granted only while it is the
    directory of ``workspace_identity`` (Landlock), where the caller has them. With an
    allowlist (``policy.egress``) the command reaches the network only through the egress
    proxy of this process: over a loopback port Landlock lets it connect to, or (bwrap) over
    the proxy's unix socket bound into the sandbox, where ``bridge.py`` serves it on
    ``127.0.0.1:PROXY_PORT``."""
    proxy = egress_proxy(policy.allowed_hosts) if policy.egress else None
    if policy.mechanism is Mechanism.LANDLOCK:
        # No private mount namespace: the private tmp is where TMPDIR and HOME point.
        tmp = Path(policy.tmp_dir) if policy.tmp_dir is not None else root
        (tmp / "home").mkdir(parents=True, exist_ok=True)
        env = scrubbed_env(
            os.environ,
            home=str(tmp / "home"),
            tmpdir=str(tmp),
            extra_names=policy.env,
            overrides=overrides,
        )
        port = proxy.tcp_port if proxy is not None else None
        if port is not None:
            env.update(proxy_env(f"http://127.0.0.1:{port}"))
        return landlock_argv(
            policy, argv, env=env, cwd=cwd, connect_port=port, workspace_identity=workspace_identity
        )
    env = scrubbed_env(os.environ, home=SANDBOX_HOME, extra_names=policy.env, overrides=overrides)
    if proxy is not None:
        env.update(proxy_env(f"http://127.0.0.1:{PROXY_PORT}"))
        bridge = Path(__file__).resolve().parent.parent / "sandbox" / "bridge.py"
        policy = policy.with_readable([*install_roots(sys.executable), bridge.parent])
        argv = [
            sys.executable,
            "-I",
            "-S",
            str(bridge),
            BRIDGE_SOCKET,
            str(PROXY_PORT),
            "--",
            *argv,
        ]
        return bwrap_argv(
            policy,
            argv,
            env=env,
            cwd=cwd,
            bwrap=bwrap,
            binds=((proxy.unix_path, BRIDGE_SOCKET),),
            workspace_fd=workspace_fd,
        ), env
    return bwrap_argv(policy, argv, env=env, cwd=cwd, bwrap=bwrap, workspace_fd=workspace_fd), env
