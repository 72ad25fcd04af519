"""Opening a SQLite file: what it must be before reasonlog touches it, and how a reader opens it.

Reading never creates or alters a database: a missing path is an error, a file that is not a
reasonlog database is refused untouched, and a readable file is opened read-only (immutable when
even the read-only open needs files it cannot create, e.g. a read-only folder or file).
Writing creates a new file, but never adopts a SQLite file that belongs to another program.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from .terms import ReadOnlyDatabase, StoreError

MIGRATIONS_TABLE = "_reasonlog_migrations"


def check_path(path: Path, *, create: bool) -> None:
    """Refuse, with one line naming the path, what cannot be a reasonlog database."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a database file")
    if not path.exists():
        if create:
            _check_creatable(path)
            return
        raise StoreError(f"{path}: no such database (reading commands never create one)")
    if create and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise ReadOnlyDatabase(path)  # a writer needs its folder too: the WAL and its index go beside the file
    # Never open() the file here: closing any descriptor of a database drops every POSIX lock this process
    # holds on it, so another process could take a live WAL for abandoned and checkpoint it away under a
    # connection already open in this one (see "How To Corrupt An SQLite Database File", section 2.2).
    # SQLite itself tells a file that is not a database (`not_a_database`).
    if not os.access(path, os.R_OK):
        raise StoreError(f"{path}: cannot be read (permission denied)")
    if path.stat().st_size == 0:
        if create:
            return  # an empty file is a database not yet written (SQLite itself starts one so)
        raise StoreError(f"{path}: an empty file, not a reasonlog database")


def _check_creatable(path: Path) -> None:
    folder = next((p for p in path.parents if p.exists()), None)
    if folder is not None and folder.is_dir() and not os.access(folder, os.W_OK):
        raise StoreError(f"{path}: cannot be created: {folder} is read-only")


def not_a_database(path: Path, exc: sqlite3.DatabaseError) -> StoreError | None:
    """The one-line error for a file SQLite says is no database, else None."""
    if "not a database" in str(exc) or "file is encrypted" in str(exc):
        return StoreError(f"{path}: not a SQLite file, not a reasonlog database")
    return None


def cannot_open(path: Path, exc: sqlite3.OperationalError) -> str:
    """Why a database file cannot be opened for writing, in one line that names its cause."""
    if not os.access(path.parent, os.W_OK):
        return (f"{path}: cannot be opened for writing ({exc}): its folder {path.parent} is read-only, and SQLite"
                " keeps its journal beside the database")
    if not os.access(path, os.W_OK):
        return f"{path}: cannot be opened for writing ({exc}): the file is read-only"
    return f"{path}: cannot be opened for writing ({exc})"


def connect(path: Path, *, read_only: bool, timeout_s: float) -> sqlite3.Connection:
    """A connection in autocommit mode; read-only ones never write a byte to the database file."""
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _open(str(path), timeout_s, uri=False)
    uri = f"file:{quote(str(path.resolve()))}"
    try:
        conn = _open(uri + "?mode=ro", timeout_s, uri=True)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:  # a WAL file it may not create: read the file as it stands
        return _open(uri + "?immutable=1", timeout_s, uri=True)
    except sqlite3.DatabaseError as exc:
        raise not_a_database(path, exc) or exc from None


def _open(target: str, timeout_s: float, uri: bool) -> sqlite3.Connection:
    return sqlite3.connect(target, timeout=timeout_s, isolation_level=None, check_same_thread=False, uri=uri)


def check_reasonlog(conn: sqlite3.Connection, path: Path, latest: int, *, read_only: bool) -> int:
    """The schema version, after refusing a foreign database (and, to a reader, an old or newer one)."""
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.OperationalError as exc:  # the file is fine; what SQLite needs beside it is not
        raise StoreError(cannot_open(path, exc)) from None
    except sqlite3.DatabaseError as exc:
        raise not_a_database(path, exc) or StoreError(f"{path}: not a reasonlog database ({exc})") from None
    if MIGRATIONS_TABLE not in names:
        if names or read_only:
            raise StoreError(f"{path}: not a reasonlog database (it has no {MIGRATIONS_TABLE} table)")
        return 0
    version = conn.execute(f"SELECT COALESCE(MAX(number), 0) FROM {MIGRATIONS_TABLE}").fetchone()[0]
    if version > latest:
        raise StoreError(f"{path}: schema {version} is newer than this reasonlog knows ({latest}); upgrade reasonlog")
    if read_only and version < latest:
        raise StoreError(f"{path}: schema {version} is older than this reasonlog reads ({latest}); "
                         "run `reasonlog db upgrade` first (reading commands never migrate)")
    return version
