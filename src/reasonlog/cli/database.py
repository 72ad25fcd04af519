"""`reasonlog db`: where the database is, its state, its upgrades and its care."""
from __future__ import annotations

import re
import sqlite3
import sys
from datetime import date
from pathlib import Path
from typing import NoReturn

import click
from rich.table import Table
from rich.text import Text

from .group import cli, console, emit_json, json_option
from .importing import read_marker


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
    """Schema version, sizes, counts, spilled batches and dropped records; what waits in spill files."""
    from ..store import StoreError

    try:
        status = obj.store.status()
    except StoreError as exc:  # what could not be written still waits somewhere: say where
        _fail_with_spills(obj, exc, as_json)
    status.update(_spills(obj.path))
    status["imports"] = _imports(obj.store.import_files())
    status["watch"] = read_marker(obj.path)
    if as_json:
        return emit_json(status)
    table = Table(show_header=False)
    for key in ("path", "schema_version", "latest_schema_version", "bytes_on_disk", "unique_content_bytes",
                "free_bytes", "wal_bytes"):
        table.add_row(key, Text(str(status[key])))
    for key, value in status["counts"].items():
        table.add_row(key, str(value))
    for key in ("dropped_records", "rejected_records", "isolated_batches", "set_aside_records", "spilled_batches",
                "replayed_batches", "redacted_secrets"):
        table.add_row(key, str(status[key]))
    table.add_row("pending spill files", Text(_waiting_line(status)))
    if status["set_aside_file"]:
        table.add_row("set-aside events", Text(status["set_aside_file"]))
    if status["unreadable_spill_files"]:
        table.add_row("unreadable spill files", Text(", ".join(status["unreadable_spill_files"])))
    for source in status["imports"]:
        table.add_row(f"imported {source['format']}", Text(f"{source['files']} file(s), last at "
                                                           f"{source['last_imported_at']}, {source['skipped']} "
                                                           "line(s) skipped"))
    watch = status["watch"]
    if watch:
        state = "running" if watch["running"] else "not running"
        table.add_row("watch", Text(f"{', '.join(watch['folders'])} ({state}; last pass {watch['last_pass_at']})"))
    console.print(table)


def _spills(path) -> dict:
    """The events waiting in spill files (every folder a recorder may have used) and where they are."""
    from ..capture.spillfiles import spill_dirs, spill_status

    return spill_status(spill_dirs(path))


def _waiting_line(status: dict) -> str:
    n = len(status["pending_spill_files"])
    if not n:
        return "0"
    return f"{n} ({status['pending_spill_records']} records) in {', '.join(status['spill_folders'])}"


def _fail_with_spills(obj, exc: Exception, as_json: bool) -> NoReturn:
    """The database cannot be read: say why, and how many records wait in spill files, and where."""
    spills = _spills(obj.path)
    if as_json:
        emit_json({"path": str(obj.shown), "error": str(exc), **spills})
        sys.exit(1)
    if spills["pending_spill_files"]:
        click.echo(f"error: {exc}\n{spills['pending_spill_records']} recorded events wait in "
                   f"{len(spills['pending_spill_files'])} spill file(s) in {', '.join(spills['spill_folders'])};"
                   " they are written once the database can be written (`reasonlog db upgrade`)", err=True)
        sys.exit(1)
    _fail(str(exc))


def _imports(files: list[dict]) -> list[dict]:
    """Imported files by format: how many, when last, how many lines skipped."""
    by: dict[str, dict] = {}
    for f in files:
        entry = by.setdefault(f["format"], {"format": f["format"], "files": 0, "last_imported_at": None,
                                            "skipped": 0})
        entry["files"] += 1
        entry["skipped"] += f["skipped"]
        entry["last_imported_at"] = max(entry["last_imported_at"] or "", f["imported_at"])
    return sorted(by.values(), key=lambda e: e["format"])


@db.command("upgrade")
@click.pass_obj
def db_upgrade(obj):
    """Apply pending schema migrations and write any spilled batches."""
    from ..capture.opening import open_sink
    from ..store import open_store

    store = open_store(obj.path, upgrade=False)
    applied = store.upgrade()
    store.close()
    sink = open_sink(obj.path)
    remaining = sink.replay()
    sink.close()
    console.print(f"schema: applied {applied or 'nothing'}; spill files left: {remaining}")


# ------------------------------------------------------------------ care: backup, check, prune


def _fail(message: str, code: int = 1) -> NoReturn:
    """One clear line and an exit code: 2 for bad usage, 1 for a failure."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _existing_store(obj, upgrade: bool, reads_only: bool = False):
    """The store at `--db`, which must already exist: these commands never create a database. `reads_only`:
    the command only reads (backup, check), so a database that cannot be written is opened for reading."""
    from ..store import open_store, open_store_or_read_only

    path = obj.path
    open_store = open_store_or_read_only if reads_only else open_store
    if isinstance(path, str):  # a PostgreSQL URL: the server says whether it exists, its tables whether it is ours
        probe = open_store(path, upgrade=False)
        if probe.schema_version() == 0:
            probe.close()
            _fail(f"no reasonlog database at {obj.shown}")
        if not upgrade:
            return probe
        probe.close()
        return open_store(path, upgrade=True)
    if path.is_dir():
        _fail(f"{path} is a directory, not a reasonlog database", 2)
    if not path.exists():
        _fail(f"no database at {path}")
    try:
        return open_store(path, upgrade=upgrade)
    except sqlite3.DatabaseError as exc:
        _fail(f"{path} cannot be opened as a reasonlog database: {exc}")


@db.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@click.pass_obj
def db_backup(obj, dest: Path, force: bool):
    """Copy the database to DEST while recorders keep writing (one consistent point in time)."""
    store = _existing_store(obj, upgrade=False, reads_only=True)
    try:
        size = store.backup(dest, force=force)
    finally:
        store.close()
    click.echo(f"backed up {obj.path} to {dest} ({size} bytes)")


@db.command("recount")
@click.pass_obj
def db_recount(obj):
    """Rebuild the usage totals kept as calls are written (what `stats` and the usage page add up) from the calls."""
    store = _existing_store(obj, upgrade=True)
    try:
        store.recount_usage()
    finally:
        store.close()
    click.echo(f"usage recounted from the calls in {obj.path}")


@db.command("check")
@json_option
@click.pass_obj
def db_check(obj, as_json: bool):
    """Check the file and reasonlog's own invariants; exit 1 and one line per problem when any is wrong."""
    store = _existing_store(obj, upgrade=False, reads_only=True)
    try:
        if store.schema_version() != store.status()["latest_schema_version"]:
            _fail(f"{obj.path} has schema {store.schema_version()}; run `reasonlog db upgrade` first")
        report = store.check()
    finally:
        store.close()
    if as_json:
        emit_json(report)
    else:
        for problem in report["problems"]:
            click.echo(problem)
        counts = ", ".join(f"{n} {table}" for table, n in report["counts"].items())
        click.echo(f"{'ok' if report['ok'] else str(len(report['problems'])) + ' problem(s)'}: {counts}")
    sys.exit(0 if report["ok"] else 1)


@cli.command("prune")
@click.option("--older-than", metavar="AGE", help="Sessions last active more than AGE ago: 30d, 12h.")
@click.option("--before", metavar="YYYY-MM-DD", help="Sessions last active before this date (UTC).")
@click.option("--run", help="Only sessions of this run.")
@click.option("--agent", help="Only sessions of this agent.")
@click.option("--model", help="Only sessions of this model.")
@click.option("--include-open", is_flag=True, help="Also sessions still open (perhaps still recording).")
@click.option("--dry-run", is_flag=True, help="Print what would go; remove nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def prune(obj, older_than, before, run, agent, model, include_open, dry_run, yes):
    """Remove old sessions with all their rows, the contents only they used, and give the space back."""
    from ..store.maintenance import PruneCriteria

    criteria = PruneCriteria(_cutoff(older_than, before), run, agent, model, include_open)
    if criteria == PruneCriteria(include_open=include_open):
        _fail("say which sessions: --older-than, --before, --run, --agent or --model", 2)
    store = _existing_store(obj, upgrade=True)
    try:
        plan = store.plan_prune(criteria)
        if dry_run or not plan["sessions"]:
            if dry_run:
                _print_sessions(store, plan["session_ids"])
            return click.echo(f"{'would remove' if plan['sessions'] else 'nothing to prune:'} {_described(plan)}")
        if not yes and sys.stdin.isatty() and not click.confirm(f"Remove {_described(plan)}?"):
            _fail("nothing pruned")
        done = store.prune(criteria)
    finally:
        store.close()
    click.echo(f"removed {_described(done)}; {_space(done)}")


def _space(done: dict) -> str:
    """What became of the space: a SQLite file shrinks; PostgreSQL keeps its pages for new rows."""
    sizes = f"{done['file_bytes_before']} -> {done['file_bytes_after']} bytes"
    if done["reclaimed_by"] == "autovacuum":
        return f"database {sizes} (PostgreSQL reuses the freed space for new rows)"
    return f"file {sizes} ({'VACUUM rewrote the file' if done['reclaimed_by'] == 'vacuum' else 'freed pages returned'})"


def _print_sessions(store, ids: list[str]) -> None:
    """The sessions a prune would remove, oldest first, as `sessions` lists them (the first PRUNE_LISTED)."""
    from .read import print_sessions

    rows = sorted((store.session_row(i) for i in ids[:PRUNE_LISTED]), key=lambda s: s["started_at"])
    print_sessions(store, rows)
    if len(ids) > PRUNE_LISTED:
        click.echo(f"and {len(ids) - PRUNE_LISTED} more")


PRUNE_LISTED = 200


def _described(plan: dict) -> str:
    return (f"{plan['sessions']} sessions, {plan['calls']} calls, {plan['messages']} messages,"
            f" {plan['contents']} contents ({plan['bytes']} bytes)")


def _cutoff(older_than: str | None, before: str | None) -> str | None:
    """The instant (ISO, UTC) sessions must have been last active before, from --older-than or --before."""
    if older_than and before:
        _fail("give --older-than or --before, not both", 2)
    if before:
        try:
            return date.fromisoformat(before).isoformat()
        except ValueError:
            _fail(f"--before: expected a date like 2025-01-31, got {before!r}", 2)
    if older_than:
        match = re.fullmatch(r"(\d+)([dh])", older_than.strip())
        if not match:
            _fail(f"--older-than: expected a number of days or hours like 30d or 12h, got {older_than!r}", 2)
        from ..store import maintenance

        n = int(match[1])
        return maintenance.older_than(days=n if match[2] == "d" else 0, hours=n if match[2] == "h" else 0).before
    return None
