"""``toolhub keys create --tenant T [--name N] | list | revoke KEY_ID``: the operator's named
API keys (``toolhub.tenancy.keys``).

``create`` prints the key once, alone on stdout (so ``KEY=$(toolhub keys create …)`` works);
only its hash is kept. ``list`` never shows a key or a hash. A gateway picks up a new or revoked
key within about a second, without a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolhub.tenancy.keys import KEYS_FILE_ENV, KeyFile, default_keys_file

from .output import fail, print_json, stderr, stdout

keys_app = typer.Typer(help="Named API keys: create, list, revoke.", no_args_is_help=True)

FileOpt = Annotated[
    Path | None,
    typer.Option(
        "--file",
        envvar=KEYS_FILE_ENV,
        help="Key file (default: $TOOLHUB_HOME/keys.json).",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")


def _file(path: Path | None) -> KeyFile:
    return KeyFile(path.expanduser() if path else default_keys_file())


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key is for.")],
    name: Annotated[str, typer.Option("--name", help="A label: who or what uses it.")] = "",
    file: FileOpt = None,
) -> None:
    """Make a key for TENANT and print it (the only time it is shown)."""
    keys = _file(file)
    try:
        entry, key = keys.create(tenant, name)
    except ValueError as err:
        fail(str(err))
    stderr.print(
        f"key {entry.key_id} for tenant {entry.tenant} (in {keys.path}); "
        "store it now: it is not shown again",
        highlight=False,
        markup=False,
    )
    typer.echo(key)


@keys_app.command("list")
def list_keys(
    file: FileOpt = None,
    json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Every key's id, tenant, name, creation time and state (never the key)."""
    entries = sorted(_file(file).read().values(), key=lambda k: (k.tenant, k.created))
    if json:
        print_json(
            [
                {
                    "key_id": k.key_id,
                    "tenant": k.tenant,
                    "name": k.name,
                    "created": k.created,
                    "revoked": k.revoked,
                }
                for k in entries
            ]
        )
        return
    if not entries:
        stderr.print("no API keys", highlight=False)
        return
    table = Table("key id", "tenant", "name", "created", "state")
    for k in entries:
        table.add_row(k.key_id, k.tenant, k.name, k.created, "revoked" if k.revoked else "active")
    stdout.print(table)


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (see `toolhub keys list`).")],
    file: FileOpt = None,
) -> None:
    """Revoke a key: gateways refuse it (401) within about a second."""
    entry = _file(file).revoke(key_id)
    stdout.print(f"revoked key {entry.key_id} of tenant {entry.tenant}", highlight=False)
