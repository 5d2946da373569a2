"""``toolhub policy show [--tenant T] [--json]`` and ``toolhub policy check CONFIG [--tenant T]``:
the operator policy (``TOOLHUB_POLICY``, or ``--policy``) as a tenant meets it, and whether a
config would be admitted — so an operator sees what a tenant may ask for, and why a config is
refused, before any tenant does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from toolhub.core import ConfigError

from .output import print_json, stdout
from .violations import show_violations

policy_app = typer.Typer(help="The operator policy: show it, check a config.", no_args_is_help=True)

TenantOpt = Annotated[str, typer.Option("--tenant", help="The tenant to answer for.")]
PolicyOpt = Annotated[
    Path | None, typer.Option("--policy", help="Policy file (default: $TOOLHUB_POLICY).")
]
RootOpt = Annotated[
    Path | None,
    typer.Option("--tenant-root", help="The tenant's root (default: the current directory)."),
]


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")


@policy_app.command("show")
def show(
    tenant: TenantOpt = "default",
    policy: PolicyOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The effective policy for a tenant: what it may enable and the caps on each limit."""
    from toolhub.tenancy import effective

    shown = effective(load(policy), tenant)
    if as_json:
        print_json(shown)
        return
    for key, value in shown.items():
        if key == "tools":
            continue
        stdout.print(f"[bold]{key}[/]: {json.dumps(value)}", highlight=False, soft_wrap=True)
    table = Table(title="tools the tenant may enable, and the largest value of each limit")
    table.add_column("tool")
    table.add_column("limits", overflow="fold")
    for fq_id, entry in shown["tools"].items():
        limits = ", ".join(f"{k} <= {_cap(v)}" for k, v in entry["limits"].items())
        table.add_row(fq_id, limits)
    stdout.print(table)


@policy_app.command("check")
def check(
    config: Annotated[Path, typer.Argument(help="A tool-set config (YAML or JSON).")],
    tenant: TenantOpt = "default",
    tenant_root: RootOpt = None,
    policy: PolicyOpt = None,
) -> None:
    """Whether the policy admits CONFIG for the tenant: every violation, exit 1 when any."""
    from toolhub.tenancy import admit

    root = (tenant_root or Path.cwd()).resolve()
    try:
        admit(config, load(policy), tenant=tenant, tenant_root=root)
    except ConfigError as err:
        show_violations(err)
    stdout.print(f"admitted: {config} for tenant {tenant}", highlight=False)


def load(path: Path | None) -> Any:
    """The operator policy, or exit 1 saying what is wrong with its file."""
    from toolhub.tenancy import OperatorPolicy

    try:
        return OperatorPolicy.load(path)
    except ConfigError as err:
        show_violations(err, title="operator policy file")


def require_valid_config(config: Path | None) -> None:
    """A server's default config checked before it starts: an invalid one would only show as a
    422 to every session later. Exit 1 listing every violation."""
    if config is None:
        return
    from toolhub.session import default_builder

    report = default_builder().validate(config)
    if not report.ok:
        show_violations(ConfigError(report.violations), title=f"{config}: configuration violations")


def _cap(value: Any) -> str:
    return "unlimited" if value is None else str(value)
