"""`reasonlog keys`: the API keys `reasonlog serve` accepts (create, list, revoke)."""
from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from ..store import StoreError
from ..store.keys import SCOPES
from .main import cli, console, emit_json, json_option


@cli.group()
def keys():
    """API keys for reasonlog serve: bearer tokens with a scope (read < write < admin)."""


@keys.command("create")
@click.option("--scope", type=click.Choice(SCOPES), required=True, help="What the key may do.")
@click.option("--name", help="A name to tell keys apart.")
@click.pass_obj
def keys_create(obj, scope, name):
    """Make a key and print it once: only its hash is kept."""
    key = obj.writable.create_api_key(scope, name)
    click.echo(key["secret"])
    click.echo(f"key {key['id']} ({scope}) created; this is the only time it is shown", err=True)


@keys.command("list")
@json_option
@click.pass_obj
def keys_list(obj, as_json):
    """The keys, without their secrets."""
    rows = obj.store.list_api_keys()
    if as_json:
        return emit_json(rows)
    table = Table("id", "prefix", "scope", "name", "created", "revoked")
    for r in rows:
        table.add_row(r["id"], r["prefix"] + "…", r["scope"], Text(r["name"] or ""), r["created_at"],
                      r["revoked_at"] or "")
    console.print(table)


@keys.command("revoke")
@click.argument("key")
@click.pass_obj
def keys_revoke(obj, key):
    """Revoke a key by its id or its prefix; it stops working at once."""
    if obj.writable.revoke_api_key(key) == 0:
        raise StoreError(f"{key}: no working key has this id or prefix (see reasonlog keys list)")
    click.echo(f"revoked {key}")
