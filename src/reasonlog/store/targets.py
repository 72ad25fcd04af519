"""Where a store is: the default database path, a target as a SQLite path or a PostgreSQL URL, and how a target is
named without its password.
"""
from __future__ import annotations

import os
from pathlib import Path

from .terms import StoreError


def default_db_path() -> Path:
    """$REASONLOG_DB, else `reasonlog.db` in the per-user data folder."""
    env = os.environ.get("REASONLOG_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "reasonlog.db"


def sqlite_path(target: str | os.PathLike | None) -> Path:
    """The database file a target names: a path, `sqlite:///path`, or None for the default.

    Other URLs are refused rather than taken for file names: `postgresql://` is not a file, `https://` is a
    server, and anything else is not a database reasonlog knows."""
    if target is None:
        return default_db_path()
    text = os.fspath(target)
    if text.startswith("sqlite:///"):
        return Path(text[len("sqlite:///"):]).expanduser()
    scheme = text.split("://", 1)[0] if "://" in text else None
    if scheme in ("http", "https"):
        raise StoreError(f"{text}: a reasonlog serve URL is for recorders (Recorder(url)); read it through its"
                         " HTTP API, or open the server's database file")
    if scheme in ("postgresql", "postgres"):
        raise StoreError(f"{scheme}:// is a PostgreSQL database, not a file")
    if scheme is not None:
        raise StoreError(f"{text}: {scheme}:// is not a database reasonlog knows; use a file path, sqlite:///path"
                         " or postgresql://…")
    return Path(text).expanduser()


def database_target(target: str | os.PathLike | None) -> str | Path:
    """What a recorder or command writes to: a `postgresql://` URL as given, else the SQLite file's absolute
    path (the default when None, which $REASONLOG_DB may set to either)."""
    if target is None and is_postgres(os.environ.get("REASONLOG_DB")):
        return os.environ["REASONLOG_DB"]
    if is_postgres(target):
        return str(target)
    return Path(os.path.abspath(sqlite_path(target)))


def safe_target(target: str | os.PathLike) -> str:
    """A database target as messages may show it: a URL loses its password."""
    if is_postgres(target):
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(str(target))
        if parts.password is not None:
            netloc = f"{parts.username}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
    return os.fspath(target)


def is_postgres(target: str | os.PathLike | None) -> bool:
    """Whether `target` names a PostgreSQL database (`postgresql://…` or `postgres://…`)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))
