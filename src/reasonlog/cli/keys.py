"""`reasonlog keys`: the API keys `reasonlog serve` accepts (create, list, revoke)."""
from __future__ import annotations

import click
from rich.text import Text

from ..store import StoreError
from ..store.keys import SCOPES
from .group import cli, emit_json, json_option
from .tables import Column, print_table


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
    print_table(KEY_COLUMNS, [[Text(r["id"]), r["prefix"], r["scope"], Text(r["name"] or ""), _minute(r["created_at"]),
                               _minute(r["revoked_at"])] for r in rows])


KEY_COLUMNS = [Column("id", whole=True), Column("prefix", whole=True), Column("scope"), Column("name", keep=1),
               Column("created (UTC)", keep=2), Column("revoked", keep=3)]


def _minute(instant: str | None) -> str:
    return "" if instant is None else instant[:16].replace("T", " ")


@keys.command("revoke")
@click.argument("key")
@click.pass_obj
def keys_revoke(obj, key):
    """Revoke a key by its id or its prefix (as `keys list` shows them); it stops working at once."""
    key = key.strip().rstrip("…")  # a prefix copied from an older listing ended in an ellipsis
    if obj.writable.revoke_api_key(key) == 0:
        raise StoreError(f"{key}: no working key has this id or prefix (see reasonlog keys list)")
    click.echo(f"revoked {key}")
