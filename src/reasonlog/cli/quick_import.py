"""`reasonlog import FOLDER...` when nothing changed since the last import, answered before click, the store and the
importers are imported (see cli/entry.py).

A re-sync is what a user (or a cron line, or a shell hook) runs over and over, and the answer is nearly always
"nothing new". Click, the store, the model and the importers cost about 0.25 s of CPU to import, several times the
work itself and more than agentsview's whole `sync` (issue 34). When the command is the plain form, `[--db X] import
[--json] FOLDER...`, every FOLDER exists, `--db` names a SQLite file of the current schema and every file under each
folder has an `import_files` row with its size and change time, read to its end by a built-in format that reads
files as themselves (io/__init__.py `FILE_FORMATS`), the import would read nothing: the folders are listed, each
candidate file `stat`ed and its row compared (io/unchanged.py, the check the import's own planning runs), in one read
of the rows from the file opened read-only, and the report is printed as `reasonlog import` prints it. Anything else
(a file that changed or is new, a tree format, a plug-in's format, another schema, PostgreSQL, an option, a file
PATH) goes to click, which imports as usual. What is not done here, because nothing is read: the import's lock (a
running import's rows say what it finished), and the transient progress bar (it would be erased at once).

Every answer is byte for byte what click's command prints (tests/test_quick_import.py).
"""
import os
import sys

from ..io import FILE_FORMATS
from ..io.unchanged import unchanged
from .quick_stats import SCHEMA, read_only, sqlite_file, store_module

ADDED = ("sessions", "calls", "messages", "tool_results", "outcomes")  # io/importing.py ADDED


def parse(argv: list[str]) -> tuple[str | None, list[str], bool] | None:
    """(--db, the folders, --json) when `argv` is `[--db X] import [--json] PATH...`; None for anything else."""
    db, i = None, 0
    while i < len(argv) and argv[i].startswith("--db"):
        name, eq, value = argv[i].partition("=")
        if name != "--db" or (not eq and i + 1 >= len(argv)):
            return None
        db, i = (value, i + 1) if eq else (argv[i + 1], i + 2)
    if argv[i:i + 1] != ["import"]:
        return None
    paths = [a for a in argv[i + 1:] if a != "--json"]
    if not paths or any(a.startswith("-") for a in paths):
        return None
    return db, paths, "--json" in argv[i + 1:]


def run(argv: list[str]) -> bool:
    """Print the report of an import that would read nothing; False (nothing printed) when click must import."""
    asked = parse(argv)
    if asked is None:
        return False
    db, paths, as_json = asked
    folders = [os.path.expanduser(p) for p in paths]
    path = sqlite_file(db) if all(os.path.isdir(f) for f in folders) else None
    rows = read_rows(path) if path is not None else None
    if rows is None:
        return False
    files = 0
    for folder in folders:
        found = unchanged(folder, rows, lambda fmt, _: fmt if fmt in FILE_FORMATS else None)
        if found is None:
            return False
        files += len(found)
    report = {"files": files, "unchanged": files, "appended": 0, "rewritten": 0, "added": dict.fromkeys(ADDED, 0),
              "rejected": 0, "copies": [], "notes": [], "empty": [], "skipped": [], "failed": []}
    sys.stdout.write(dumps(report) + "\n" if as_json else summary_line(report) + "\n")
    return True


def read_rows(path: str) -> dict[str, dict] | None:
    """The `import_files` rows of the SQLite file at `path` by path (the columns the check compares), read in one
    transaction; None when it is not a database of the current schema, or cannot be read."""
    conn = read_only(path)
    if conn is None:
        return None
    try:
        return store_module("imported_sizes").read_sizes(conn, SCHEMA)
    except Exception:  # noqa: BLE001 - the store meets the same and says what it is
        return None
    finally:
        conn.close()


def summary_line(report: dict) -> str:
    """The line `reasonlog import` ends with, from a report's `to_dict()`."""
    added = report["added"]
    how = [f"{n} {what}" for n, what in ((report["unchanged"], "unchanged"), (report["appended"], "grown"),
                                          (report["rewritten"], "rewritten")) if n]
    return (f"Imported {report['files']} file(s){' (' + ', '.join(how) + ')' if how else ''}: "
            f"{added.get('sessions', 0)} sessions, {added.get('calls', 0)} calls, "
            f"{added.get('messages', 0)} messages, {added.get('tool_results', 0)} tool results, "
            f"{added.get('outcomes', 0)} outcomes added.")


def dumps(value, depth: int = 0) -> str:
    """orjson's `OPT_INDENT_2 | OPT_SORT_KEYS` text of a report with nothing in its lists (cli/group.py `emit_json`):
    objects, whole numbers and empty lists."""
    if isinstance(value, dict) and value:
        inner = "  " * (depth + 1)
        items = ",\n".join(f'{inner}"{key}": {dumps(value[key], depth + 1)}' for key in sorted(value))
        return "{\n" + items + "\n" + "  " * depth + "}"
    if isinstance(value, (dict, list)):
        if value:
            raise ValueError("a list with items: orjson writes it")
        return "{}" if isinstance(value, dict) else "[]"
    return str(int(value))
