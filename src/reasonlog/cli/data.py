"""Commands that move data or look after the database: demo, export, import, db."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys

import click
from rich.text import Text

from ..io import jsonl
from ..store import SessionFilter, StoreError
from .group import cli, console


@cli.command()
@click.option("--sessions", "n_exchanges", type=int, default=3, show_default=True,
              help="Exchanges per agent in the scripted run.")
@click.pass_obj
def demo(obj, n_exchanges):
    """Record a scripted two-agent trading run (offline, no API key) and say how to look at it."""
    from ..demo import run_demo

    obj.writable.schema_version()  # a database that cannot be written is said now (the recorder would spill)
    obj.close()
    result = run_demo(obj.path, exchanges=n_exchanges)
    console.print(Text(f"Recorded run {result['run']}: {result['sessions']} sessions, {result['calls']} calls "
                       f"({result['failed_calls']} failed), {result['outcomes']} outcomes.", style="bold"))
    console.print(Text(f"Database: {obj.path}"))
    db = f" --db {obj.path}" if obj.db else ""
    prog = _invocation()
    console.print("Look at it with:")
    for command in (f"{prog}{db} sessions --run {result['run']}", f"{prog}{db} show {result['first_session']}",
                    f"{prog}{db} stats --by agent"):
        console.print(Text("  " + command, style="cyan"), soft_wrap=True)  # one line: it is copied


def _invocation() -> str:
    """How the user can run this command again: `reasonlog` when it is on PATH, else its path."""
    argv0 = sys.argv[0]
    if argv0.endswith("__main__.py"):
        return "python -m reasonlog"
    found = shutil.which("reasonlog")
    if found and os.path.realpath(found) == os.path.realpath(argv0):
        return "reasonlog"
    path = os.path.relpath(argv0) if os.path.realpath(argv0).startswith(os.getcwd()) else argv0
    return path if os.sep in path else "reasonlog"


@cli.command("export")
@click.argument("sessions", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "exchange-jsonl", "otlp", "html"]), default="jsonl",
              show_default=True, help="otlp: one OTLP/JSON trace request a session, in the GenAI conventions;"
                                      " html: one session as a self-contained page.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write (default: stdout).")
@click.pass_obj
def export_(obj, sessions, fmt, output):
    """Export sessions (default: all) as reasonlog JSONL or OTLP/JSON lines, or one session as exchange JSONL."""
    if fmt in ("exchange-jsonl", "html") and len(sessions) != 1:
        raise click.UsageError(f"--format {fmt} exports exactly one SESSION")
    store = obj.store
    ids = [store.resolve_id("session", s) for s in sessions] or None
    if not output:
        return _write_export(store, fmt, ids, sys.stdout.buffer)
    # Written beside the target and renamed into place: a failed export never leaves a file that looks whole.
    partial = f"{output}.partial"
    try:
        with open(partial, "wb") as out:
            _write_export(store, fmt, ids, out)
        os.replace(partial, output)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise StoreError(f"{output}: cannot write it ({exc.strerror or exc})") from None


def _write_export(store, fmt: str, ids: list[str] | None, out) -> None:
    if fmt == "exchange-jsonl":
        from ..io.exchange_jsonl import export_exchange_jsonl

        for line in export_exchange_jsonl(store, ids[0] if ids else ""):
            out.write(line.encode() if isinstance(line, str) else line)
    elif fmt == "html":
        try:
            from ..server.dashboard.export import session_html
        except ImportError:
            raise StoreError("--format html needs the server extra: pip install 'reasonlog[server]'") from None
        out.write(session_html(store, ids[0] if ids else "").encode())
    elif fmt == "otlp":
        from ..io.otlp_export import session_requests

        every = ids if ids is not None else [s["id"] for s in reversed(store.list_sessions(SessionFilter(limit=None)))]
        for request in session_requests(store, every):
            out.write(request + b"\n")
    else:
        jsonl.write_export(store, out, ids)
