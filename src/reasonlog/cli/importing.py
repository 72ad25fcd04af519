"""`reasonlog import` and `reasonlog watch`: take in what agents already write, and keep taking it in."""
from __future__ import annotations

import io
import os
import signal
import sys
import time
from pathlib import Path

import click
import orjson

from ..io.importing import ImportError_, Report, follow, importers, plan, run_import
from ..store import StoreError
from .group import cli, emit_json
from .quick_import import summary_line

WATCH_FILE = ".watch.json"  # beside the database: what `reasonlog watch` follows, for `db status`


@cli.command("import")
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True, path_type=str))
@click.option("--format", "fmt", metavar="NAME", help="Read every PATH as this format (see --list-formats).")
@click.option("--list-formats", is_flag=True, help="Name the formats reasonlog can import, and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def import_(obj, paths, fmt, list_formats, as_json):
    """Import files or folders that agents wrote (Claude Code, Codex CLI, Gemini CLI, OpenCode, Cline, Pi, ...).

    The format of each path is detected unless --format names it. Without PATH: every agent's default folder
    that exists, each said with what it added. Importing again adds only what is new: files that did not change
    are skipped, files that grew are read from where the last import stopped."""
    if list_formats:
        return _list_formats(as_json)
    if not paths:
        return _import_defaults(obj, fmt, as_json)
    if len(paths) == 1 and (paths[0] == "-" or fmt == "reasonlog-jsonl" or (fmt is None and _is_export(paths[0]))):
        return _import_export(obj, paths[0])
    blank = [p for p in paths if _is_blank(Path(p).expanduser())]
    if blank:
        raise StoreError(f"{blank[0]}: an empty file, nothing to import")
    try:
        files = plan([Path(p).expanduser() for p in paths], fmt, imported=lambda: _imported(obj))
    except ImportError_ as exc:
        raise StoreError(str(exc)) from None
    if not files:
        raise StoreError(f"{', '.join(paths)}: no importer recognises it (no file in it is of a format reasonlog"
                         " reads); if it is one, name it with --format NAME (reasonlog import --list-formats)")
    report = _run_with_progress(obj.writable, files, show=not as_json)
    if as_json:
        emit_json(report.to_dict())
    else:
        _print_report(report)
        _say_backlog(obj.writable, report)
    if report.read_nothing():
        _say_read_nothing(report, fmt)
    if report.failed or report.read_nothing():
        sys.exit(1)


def _imported(obj) -> list[dict]:
    """The files the database says were imported (none when there is no database yet: planning creates none)."""
    path = obj.path
    return obj.writable.import_files() if not isinstance(path, Path) or path.exists() else []


def _say_read_nothing(report: Report, fmt: str | None) -> None:
    """A first import that found no session anywhere: say why (the lines skipped say what was there) and fail."""
    read = f"read as {fmt}" if fmt else "each read as the format detected"
    why = "; see the lines skipped above" if report.skipped else ""
    click.echo(f"error: no session found in {', '.join(report.empty[:3])}{' ...' if len(report.empty) > 3 else ''}"
               f" ({read}){why}", err=True)


def _import_defaults(obj, fmt: str | None, as_json: bool) -> None:
    """Each agent's default folders that exist, imported as that agent's format, with a line per agent."""
    found = default_sources(fmt)
    if not found:
        looked = [str(p) for imp in _chosen(fmt) for p in _defaults(imp)]
        raise StoreError("no agent's default folder exists here (looked in " + ", ".join(looked) + "); name a PATH")
    reports = {}
    for name, folders in found.items():
        reports[name] = report = _run_with_progress(obj.writable, plan(folders, name), show=not as_json)
        if not as_json:
            click.echo(f"{name}: {', '.join(map(str, folders))}")
            _print_report(report)
    if as_json:
        emit_json({name: {"folders": [str(f) for f in found[name]], **r.to_dict()} for name, r in reports.items()})
    elif reports:
        _say_backlog(obj.writable, *reports.values())
    if any(r.failed for r in reports.values()):
        sys.exit(1)


def default_sources(fmt: str | None = None) -> dict[str, list[Path]]:
    """The default folders that exist, by format (one format with `fmt`)."""
    out: dict[str, list[Path]] = {}
    for imp in _chosen(fmt):
        folders = [p for p in _defaults(imp) if p.exists()]
        if folders:
            out[imp.name] = folders
    return out


def _chosen(fmt: str | None) -> list:
    found = importers()
    if fmt is not None and fmt not in found:
        raise StoreError(f"--format {fmt}: not a format reasonlog knows (see --list-formats)")
    return [found[fmt]] if fmt is not None else list(found.values())


def _is_export(path: str) -> bool:
    """Whether the file starts as reasonlog's export does, with its header line (even one that fails to parse,
    so that its parser says what is wrong with it)."""
    head = _head(Path(path))
    first = next((line.strip() for line in head.splitlines() if line.strip()), b"")
    return first.startswith(b"{") and b'"type"' in first and b'"reasonlog"' in first


def _is_blank(path: Path) -> bool:
    return path.is_file() and path.stat().st_size < (1 << 16) and not _head(path).strip()


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16)
    except OSError:  # a folder, or a file that cannot be read: the importers say so
        return b""


def _import_export(obj, file: str) -> None:
    """A reasonlog export (or stdin): checked whole before the database is opened, then imported at once."""
    from ..io import jsonl

    stream = io.BytesIO(sys.stdin.buffer.read()) if file == "-" else None
    for warning in jsonl.check_file(file, stream):
        click.echo(f"warning: {file}: {warning}", err=True)
    if stream is not None:
        stream.seek(0)
    n = jsonl.import_file(obj.writable, file, stream)
    present = f"; {n['sessions_skipped']} session(s) already present" if n["sessions_skipped"] else ""
    click.echo(f"{n['records']} records added ({n['sessions']} session(s)) from {file}{present}")


def _list_formats(as_json: bool) -> None:
    found = importers()
    rows = [{"name": name, "description": imp.description, "incremental": bool(imp.incremental),
             "default_folders": [str(p) for p in _defaults(imp)]} for name, imp in sorted(found.items())]
    if as_json:
        return emit_json(rows)
    for row in rows:
        click.echo(f"{row['name']:<18} {row['description']}")


def _defaults(imp) -> list[Path]:
    return list(imp.default_folders())


def _run_with_progress(store, files, show: bool) -> Report:
    total = sum(p.stat().st_size for p, _ in files if p.exists())
    if not show or not sys.stderr.isatty() or total < 8 << 20:
        return run_import(store, files)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn  # (a bar alone)

    columns = (TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True, console=_stderr_console()) as bar:
        task = bar.add_task("import", total=total)
        return run_import(store, files, progress=lambda path, size: bar.advance(task, size))


def _say_backlog(store, *reports: Report) -> bool:
    """After an import that added sessions: what awaits embedding for search by meaning, and how to embed it (when
    the semantic extra is installed). The import itself never embeds: it would wait on a model for minutes."""
    if not any(r.added.get("messages") or r.added.get("tool_results") for r in reports):
        return False
    from ..semantic.backlog import backlog_note

    note = backlog_note(store)
    if note is not None:
        click.echo(note, err=True)
    return note is not None


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _print_report(report: Report) -> None:
    click.echo(summary_line(report.to_dict()))
    for copy, original in report.copies:
        click.echo(f"{copy}: already imported from {original} (a copy: nothing added)")
    for note in report.notes:
        click.echo(f"note: {note}")
    if report.rejected:
        click.echo(f"{report.rejected} record(s) rejected by the store (see the log)", err=True)
    if report.skipped:
        click.echo(f"Skipped {len(report.skipped)} line(s) or file(s):", err=True)
        for where, why in report.skipped[:50]:
            click.echo(f"  {where}: {why}", err=True)
        if len(report.skipped) > 50:
            click.echo(f"  ... and {len(report.skipped) - 50} more (--json lists all)", err=True)
    for path, why in report.failed:
        click.echo(f"error: {path}: {why}", err=True)


# ------------------------------------------------------------------------------------------ watch


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--format", "fmt", metavar="NAME", help="Read every PATH as this format.")
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between two passes.")
@click.option("--once", is_flag=True, help="One pass, then exit (for cron or a test).")
@click.option("--install", is_flag=True, help="Write a systemd user unit (Linux) or launchd agent (macOS) that "
              "runs this watch at login, and say where.")
@click.pass_obj
def watch(obj, paths, fmt, interval, once, install):
    """Follow folders and import what agents append to them, within seconds.

    Without PATH: every agent's default folder that exists (see `import --list-formats`). Files deleted or
    rotated are fine: a rewritten file is imported again, a deleted one is left as it was imported."""
    folders = [Path(p).expanduser() for p in paths] or _default_watch_folders(fmt)
    if install:
        return _install(obj, paths, fmt, interval)
    if not folders:
        raise StoreError("nothing to watch: none of the default folders exists; name a PATH")
    for folder in folders:
        if not folder.exists():
            raise StoreError(f"{folder}: no such file or folder")
    store = obj.writable
    marker = _marker(obj.path)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    named = ", ".join(map(str, folders))
    click.echo(f"importing {named} once" if once else f"watching {named} (every {interval:g} s; Ctrl-C stops)",
               err=True)

    said: list[bool] = []

    def on_report(report: Report) -> None:
        _write_marker(marker, folders)
        if any(report.added.values()) or report.failed:
            _print_report(report)
            if not said:  # once a watch: it adds text every few seconds
                said.append(_say_backlog(store, report))
        if once:
            stopping.append(True)

    try:
        follow(store, folders, fmt, interval, lambda: bool(stopping), on_report)
    except KeyboardInterrupt:
        pass
    except ImportError_ as exc:
        raise StoreError(str(exc)) from None


def _default_watch_folders(fmt: str | None) -> list[Path]:
    found = default_sources(fmt)
    for name, folders in found.items():
        click.echo(f"{name}: {', '.join(map(str, folders))}", err=True)
    return [p for folders in found.values() for p in folders]


def _write_marker(marker: Path, folders: list[Path]) -> None:
    data = {"pid": os.getpid(), "folders": [str(f) for f in folders],
            "last_pass_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_bytes(orjson.dumps(data))
        os.replace(tmp, marker)
    except OSError:
        pass  # only `db status` reads it


def _marker(target: Path | str) -> Path:
    """Where `watch` notes what it follows: beside a SQLite file; for a PostgreSQL URL, in its spill folder."""
    if isinstance(target, str):
        from ..capture.spillfiles import spill_dirs

        return spill_dirs(target)[-1] / WATCH_FILE.lstrip(".")
    return Path(f"{target}{WATCH_FILE}")


def read_marker(db_path: Path | str) -> dict | None:
    """What `reasonlog watch` last said it follows, and whether that process still runs."""
    marker = _marker(db_path)
    try:
        data = orjson.loads(marker.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    try:
        os.kill(int(data.get("pid", 0)), 0)
        data["running"] = True
    except (OSError, ValueError):
        data["running"] = False
    return data


def _install(obj, paths, fmt, interval) -> None:
    exe = Path(sys.argv[0]).resolve()
    args = [str(exe), "--db", str(obj.path), "watch", *[str(Path(p).expanduser().resolve()) for p in paths],
            *(["--format", fmt] if fmt else []), "--interval", f"{interval:g}"]
    if sys.platform == "darwin":
        target = Path.home() / "Library" / "LaunchAgents" / "dev.reasonlog.watch.plist"
        program = "".join(f"<string>{_xml(a)}</string>" for a in args)
        text = (f'<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict>'
                f"<key>Label</key><string>dev.reasonlog.watch</string>"
                f"<key>ProgramArguments</key><array>{program}</array>"
                f"<key>RunAtLoad</key><true/><key>KeepAlive</key><true/></dict></plist>\n")
        enable = f"launchctl load -w {target}"
    else:
        target = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "systemd" / "user" \
            / "reasonlog-watch.service"
        text = ("[Unit]\nDescription=reasonlog watch: import agent transcripts as they are written\n\n"
                f"[Service]\nExecStart={' '.join(_quote(a) for a in args)}\nRestart=on-failure\n\n"
                "[Install]\nWantedBy=default.target\n")
        enable = "systemctl --user daemon-reload && systemctl --user enable --now reasonlog-watch.service"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    except OSError as exc:
        raise StoreError(f"{target}: cannot write it ({exc.strerror or exc})") from None
    click.echo(f"wrote {target}")
    click.echo(f"start it now and at every login with: {enable}")


def _quote(arg: str) -> str:
    return f'"{arg}"' if any(c in arg for c in ' "\\') else arg


def _xml(arg: str) -> str:
    return arg.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
