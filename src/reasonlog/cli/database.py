"""`reasonlog db`: where the database is, its state, its upgrades and its care."""
from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from .main import cli, console, emit_json, json_option


@cli.group()
def db():
    """Where the database is, its state, and its schema upgrades."""


@db.command("path")
@click.pass_obj
def db_path(obj):
    """Print the database file's path."""
    click.echo(str(obj.path))


@db.command("status")
@json_option
@click.pass_obj
def db_status(obj, as_json):
    """Schema version, sizes, counts, spilled batches and dropped records."""
    status = obj.store.status()
    if as_json:
        return emit_json(status)
    table = Table(show_header=False)
    for key in ("path", "schema_version", "latest_schema_version", "bytes_on_disk", "unique_content_bytes"):
        table.add_row(key, Text(str(status[key])))
    for key, value in status["counts"].items():
        table.add_row(key, str(value))
    for key in ("dropped_records", "rejected_records", "set_aside_records", "spilled_batches", "replayed_batches",
                "redacted_secrets"):
        table.add_row(key, str(status[key]))
    table.add_row("pending spill files", str(len(status["pending_spill_files"])))
    if status["set_aside_file"]:
        table.add_row("set-aside events", Text(status["set_aside_file"]))
    if status["unreadable_spill_files"]:
        table.add_row("unreadable spill files", Text(", ".join(status["unreadable_spill_files"])))
    console.print(table)


@db.command("upgrade")
@click.pass_obj
def db_upgrade(obj):
    """Apply pending schema migrations and write any spilled batches."""
    from ..capture.redact import Redactor
    from ..capture.sinks import SpillingSink, StoreSink
    from ..store import open_store
    from ..store.sqlite import spill_dir

    store = open_store(obj.path, upgrade=False)
    applied = store.upgrade()
    store.close()
    sink = SpillingSink(StoreSink(lambda: open_store(obj.path)), spill_dir(obj.path), Redactor())
    remaining = sink.replay()
    sink.close()
    console.print(f"schema: applied {applied or 'nothing'}; spill files left: {remaining}")
