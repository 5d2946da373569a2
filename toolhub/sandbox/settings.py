"""The sandbox as a config says it: ``sandbox: {mode: workspace_write, network: false, env: []}``.

It lives in the ``bash`` tool's params because that is where a tool-set config already says how
commands run (timeouts, limits), it is covered by the config hash (a worker runs exactly the
sandbox its dispatcher validated), and it needs no new top-level config key. It applies to the
session's process runner, so to every command-running tool of the session that shares it:
``bash`` and its background commands, ``monitor``, ``lsp`` servers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .policy import DEFAULT_READ_ONLY, Mechanism, SandboxMode, SandboxPolicy, default_hidden


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: SandboxMode = Field(
        SandboxMode.WORKSPACE_WRITE,
        description="`read_only`, `workspace_write` or `full` (no sandbox: an explicit opt-out).",
    )
    network: bool | list[str] = Field(
        False,
        description="`false`: no network; `true`: any; a list of hosts (`pypi.org`, "
        "`*.pythonhosted.org`): only those, through an egress proxy (docs/sandbox.md).",
    )
    env: list[str] = Field(
        default_factory=list,
        description="Worker environment variables passed to commands beyond the allowlist "
        "(`NAME`, or `PREFIX_*`).",
    )
    read_only: list[str] = Field(
        default_factory=lambda: list(DEFAULT_READ_ONLY),
        description="Paths kept read-only in `workspace_write` (relative: under the workspace).",
    )
    read: list[str] = Field(
        default_factory=list,
        description="More paths commands may read, beyond the system directories and the "
        "installation prefixes of `PATH` (docs/sandbox.md).",
    )
    hide: list[str] = Field(
        default_factory=list, description="More paths commands must not see (they appear empty)."
    )
    scrub_env: bool | None = Field(
        None,
        description="Give commands only the allowlisted environment (default: yes when confined; "
        "in `full` mode only when set).",
    )
    mechanism: Mechanism = Field(
        Mechanism.AUTO,
        description="What confines commands: `bwrap`, `landlock` (no privilege needed, weaker: "
        "docs/sandbox.md), or `auto` (bwrap where it runs, else Landlock).",
    )
    require: bool | None = Field(
        None,
        description="Refuse to run commands when the sandbox cannot be enforced (default: the "
        "process's choice: workers refuse, embedded sessions warn once).",
    )

    @property
    def confined(self) -> bool:
        return self.mode is not SandboxMode.FULL

    def policy(
        self, workspace: Path, *, tmp_dir: Path | None, hidden: Iterable[Path] = ()
    ) -> SandboxPolicy:
        """The policy for one session: its workspace and private tmp, hiding ``hidden`` (state
        dirs, other sessions' workspaces) besides the defaults and what the config adds."""
        scrub = self.scrub_env if self.scrub_env is not None else self.confined
        return SandboxPolicy(
            workspace=Path(workspace),
            mode=self.mode,
            tmp_dir=tmp_dir,
            read_only=tuple(Path(p) for p in self.read_only),
            hidden=(*default_hidden(), *hidden, *(Path(p).expanduser() for p in self.hide)),
            network=self.network is True,
            allowed_hosts=tuple(self.network) if isinstance(self.network, list) else (),
            env=tuple(self.env),
            scrub_env=scrub,
            mechanism=self.mechanism,
            readable=tuple(Path(p).expanduser() for p in self.read),
        )
