"""The `reasonlog` command: one entry point over the same functions the Python API uses."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from ..store import Store, StoreError, database_target, failure_of, open_store


def own_process() -> bool:
    """Was this process started for this command (`cli/entry.py`'s `main`, read here without importing it: the
    entry imports the commands)? Only then may a command leave process-wide settings as it ends."""
    return bool(getattr(sys.modules.get(f"{__package__}.entry"), "OWN_PROCESS", False))


class LazyConsole:
    """rich's `Console(highlight=False)`, made when first used: a command that prints JSON never imports rich (a tenth
    of the CPU of `reasonlog search --json`, docs/performance.md). Everything is passed to the real console.

    rich fixes a console's width from COLUMNS (and height from LINES) when it is made, so it is made again when they
    changed: a command run in-process after another (a test, a program calling the CLI) prints to its own width."""

    _real: Any = None
    _size: tuple[str | None, str | None] = (None, None)

    def __getattr__(self, name: str) -> Any:
        size = (os.environ.get("COLUMNS"), os.environ.get("LINES"))
        if LazyConsole._real is None or LazyConsole._size != size:
            from rich.console import Console

            LazyConsole._real, LazyConsole._size = Console(highlight=False), size
        return getattr(LazyConsole._real, name)


if TYPE_CHECKING:
    from rich.console import Console

console: Console = LazyConsole()  # type: ignore[assignment]  # a Console in all but when it is made
HOW_TO_START = ("Start with `reasonlog demo` (a recorded sample run) or `reasonlog import ~/.claude/projects`"
                " (your agents' transcripts), or record from Python with reasonlog.Recorder().")


class Context:
    """What every command needs: where the database is, opened on first use."""

    def __init__(self, db: str | None):
        self.db = db
        self._store: Store | None = None

    @property
    def path(self) -> Path | str:
        """The SQLite file, or the `postgresql://` URL, that `--db` names."""
        return database_target(os.path.expanduser(self.db) if self.db and "://" not in self.db else self.db)

    @property
    def shown(self) -> str:
        """The database as messages name it: a PostgreSQL URL without its password."""
        from ..store import safe_target

        return safe_target(self.path)

    @property
    def store(self):
        """The database, read-only: reading commands never create, migrate or write it."""
        if self._store is None:
            path = self.path
            if isinstance(path, Path) and not path.exists():
                raise StoreError(f"{path}: no database yet. {HOW_TO_START}")
            self._store = open_store(path, read_only=True)
        return self._store

    @property
    def writable(self):
        """The database for commands that write (import): created and migrated when needed."""
        if self._store is None or self._store.read_only:
            self.close()
            self._store = open_store(self.path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def emit_json(value) -> None:
    """Print JSON for `--json`: indented, UTF-8, stable key order."""
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                         | orjson.OPT_NON_STR_KEYS) + b"\n")


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _take_db(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(Context).db = value


DB_HELP = "Database file or postgresql:// URL (default: $REASONLOG_DB, else a per-user data file)."


def db_option() -> click.Option:
    """`--db` as a command's own option, so it goes before or after the command's name alike."""
    return click.Option(["--db"], metavar="PATH", expose_value=False, callback=_take_db, help=DB_HELP)


class Group(click.Group):
    """Turns store errors (missing ids, bad files) into one clear line and exit code 1; gives each command
    (and its subgroups' commands) the `--db` option."""

    group_class = type  # subgroups (db, keys, reason) are Groups too

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not any(p.name == "db" for p in cmd.params):
            cmd.params.append(db_option())
        super().add_command(cmd, name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except StoreError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except Exception as exc:
            failure = failure_of(exc)  # a driver's error past the store: a damaged file, a server gone
            if failure is None:
                raise
            db = ctx.obj.shown if isinstance(ctx.obj, Context) else "the database"
            click.echo(f"error: {db}: {failure}", err=True)
            sys.exit(1)


@click.group(cls=Group)
@click.option("--db", envvar="REASONLOG_DB", metavar="PATH", help=DB_HELP)
@click.version_option(package_name="reasonlog")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """reasonlog: a flight recorder for LLM agents."""
    ctx.obj = Context(db)
    ctx.call_on_close(ctx.obj.close)

