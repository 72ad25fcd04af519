"""OpenCode sessions: `~/.local/share/opencode/opencode.db` (OpenCode 1.2 and later) and the older JSON storage
(`storage/session/<project>/<session>.json`, `storage/message/<session>/<message>.json`,
`storage/part/<message>/<part>.json`); the document `opencode export <session>` writes (`{info, messages: [{info,
parts}]}`, one session); and Kilo Code's CLI (7.x, an OpenCode fork), whose `~/.local/share/kilo/kilo.db`
has the same tables: its sessions are Kilo's (`source=kilo`).

Both hold the same records: a session, its messages (`data`: role, times, model, tokens, cost) and each message's
parts (text, reasoning, tool, step-start, step-finish, ...). This module finds and loads them into
`OpenCodeSession` values; `opencode_session` turns one into events. The database is OpenCode's, read-only: its
tables are OpenCode's format, not reasonlog's store, so the SQL that reads them lives here with the format.

- A database is one source, and each session of the older storage is one (its session file, with its messages
  and parts as the tree behind it). A source that changed is read again, but only sessions that changed since
  are looked at, and only messages after the last one imported become events (the state per session).
- A session already imported from the other layout (OpenCode 1.2 copies the JSON storage into its database
  when it first starts) is reported once and passed over.
"""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...model import Event
from ..importer import BaseImporter, Checkpoint, Feed
from .opencode_session import NAME, OpenCodeMessage, OpenCodeSession, session_events

DB_NAME = "opencode.db"
DB_AGENTS = {DB_NAME: NAME, "kilo.db": "kilo"}  # a database's name: the agent that writes it
CHECK_EVERY = 50  # sessions between checkpoints of a database


class OpenCodeImporter(BaseImporter):
    name = NAME
    description = "OpenCode sessions (~/.local/share/opencode: opencode.db, and the older storage/ JSON files)"
    incremental = True

    def default_folders(self) -> list[Path]:
        data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser()
        return [data / "opencode", data / "kilo"]

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any((path / name).is_file() for name in DB_AGENTS) or (path / "storage" / "session").is_dir() \
                or (path.name == "storage" and (path / "session").is_dir())
        return _is_db(path) or _is_session_file(path) or _is_export(path)

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            yield path
            return
        storage = path if path.name == "storage" else path / "storage"
        for name in DB_AGENTS:
            if (path / name).is_file():
                yield path / name
        yield from sorted(p for p in storage.glob("session/*/*.json") if p.is_file())

    def signature(self, path: Path) -> tuple[int, int] | None:
        """The database with its write-ahead log; a session file with its messages and parts (an export: itself)."""
        if not _is_db(path) and not _is_session_file(path):
            return None
        files = [path, path.with_name(path.name + "-wal")] if _is_db(path) else _session_tree(path)
        stats = [f.stat() for f in files if f.is_file()]
        return sum(s.st_size for s in stats), max(s.st_mtime_ns for s in stats)

    def tree_root(self, path: Path) -> Path:
        """The folder a source's tree spans (io/planning.py): a session file's whole storage, a database's folder."""
        return _storage_root(path) if _is_session_file(path) else path.parent

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        state: dict = dict(feed.state or {})
        if _is_db(feed.path):
            yield from _read_db(feed, state)
        elif not _is_session_file(feed.path):
            session = _load_export(feed)
            if session is not None:
                yield from session_events(feed, session, state)
        else:
            session = _load_json_session(feed)
            if session is not None:
                yield from session_events(feed, session, state)
        yield feed.checkpoint(None, state)


importer = OpenCodeImporter()


def _is_db(path: Path) -> bool:
    if not path.is_file() or path.suffix != ".db":
        return False
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00" and path.name in DB_AGENTS


def _is_session_file(path: Path) -> bool:
    return path.suffix == ".json" and path.parent.parent.name == "session" and path.name.startswith("ses_")


def _is_export(path: Path) -> bool:
    """A document `opencode export` wrote: a JSON object whose `info` is a session (`ses_...`) beside `messages`."""
    if path.suffix != ".json" or not path.is_file():
        return False
    with open(path, "rb") as f:
        head = f.read(4096)
    return head.lstrip().startswith(b"{") and b'"info"' in head and b'"ses_' in head and (
        b'"messages"' in head or len(head) == 4096)


def _load_export(feed: Feed) -> OpenCodeSession | None:
    """The session of an `opencode export` document; a message that is not `{info: {id, ...}, parts: [...]}` is
    named and left out."""
    try:
        doc = orjson.loads(feed.read_bytes())
    except orjson.JSONDecodeError as exc:
        feed.skip(None, f"not JSON ({str(exc).split(':', 1)[0]})")
        return None
    info = doc.get("info") if isinstance(doc, dict) else None
    if not isinstance(info, dict) or not isinstance(info.get("id"), str) or not isinstance(doc.get("messages"), list):
        feed.skip(None, "expected what `opencode export` writes: an object with a session `info` (with its `id`)"
                        " and a `messages` list")
        return None
    messages = []
    for k, item in enumerate(doc["messages"]):
        m = item.get("info") if isinstance(item, dict) else None
        parts = item.get("parts") if isinstance(item, dict) else None
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not isinstance(parts, list):
            feed.skip(None, "expected `{info: {id, ...}, parts: [...]}`", record=f"messages[{k}]")
            continue
        messages.append(OpenCodeMessage(m["id"], m, [p for p in parts if isinstance(p, dict)]))
    return OpenCodeSession(info, messages, where=feed.where)


# ------------------------------------------------------------------------------------------ the database


def _read_db(feed: Feed, state: dict) -> Iterator[Event | Checkpoint]:
    try:
        db = sqlite3.connect(f"file:{feed.path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise OSError(f"cannot open it read-only ({exc})") from None
    try:
        rows = db.execute("SELECT id, parent_id, directory, title, version, time_created, time_updated,"
                          " time_archived FROM session ORDER BY time_created, id").fetchall()
        for n, row in enumerate(rows, 1):
            info = dict(zip(("id", "parentID", "directory", "title", "version"), row[:5], strict=True))
            info["time"] = {"created": row[5], "updated": row[6], "archived": row[7]}
            if (state.get(row[0]) or {}).get("updated") == row[6]:
                continue  # not changed since the last import
            session = OpenCodeSession(info, list(_db_messages(db, feed, row[0])), where=feed.where,
                                      agent=DB_AGENTS[feed.path.name])
            yield from session_events(feed, session, state)
            if n % CHECK_EVERY == 0:
                yield feed.checkpoint(None, state)
    except sqlite3.Error as exc:
        raise OSError(f"not an OpenCode database OpenCode wrote ({exc})") from None
    finally:
        db.close()


def _db_messages(db: sqlite3.Connection, feed: Feed, sid: str) -> Iterator[OpenCodeMessage]:
    parts: dict[str, list[dict]] = {}
    for pid, mid, data in db.execute("SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY id",
                                     (sid,)):
        value = _object(data)
        if value is None:
            feed.skip(None, "a part whose `data` is not a JSON object", record=f"part {pid}")
            continue
        parts.setdefault(mid, []).append({"id": pid, **value})
    for mid, data in db.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
                                (sid,)):
        value = _object(data)
        if value is None:
            feed.skip(None, "a message whose `data` is not a JSON object", record=f"message {mid}")
            continue
        yield OpenCodeMessage(mid, value, parts.get(mid, []))


def _object(data: Any) -> dict | None:
    try:
        value = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError):
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------------------ the JSON storage


def _storage_root(session_file: Path) -> Path:
    return session_file.parents[2]  # storage/session/<project>/<session>.json


def _session_tree(session_file: Path) -> list[Path]:
    root, sid = _storage_root(session_file), session_file.stem
    messages = sorted((root / "message" / sid).glob("*.json"))
    return [session_file, *messages, *(p for m in messages for p in (root / "part" / m.stem).glob("*.json"))]


def _load_json_session(feed: Feed) -> OpenCodeSession | None:
    info = _read_json(feed, feed.path, "session")
    if info is None:
        return None
    root, sid = _storage_root(feed.path), feed.path.stem
    info["id"] = sid  # OpenCode names records by their file (it moved sessions without editing them)
    messages = []
    for file in sorted((root / "message" / sid).glob("*.json")):
        data = _read_json(feed, file, "message")
        if data is not None:
            parts = [p for f in sorted((root / "part" / file.stem).glob("*.json"))
                     if (p := _read_json(feed, f, "part")) is not None]
            messages.append(OpenCodeMessage(file.stem, data, parts))
    messages.sort(key=lambda m: (_created(m.data), m.id))
    return OpenCodeSession(info, messages, where=str(feed.path))


def _created(data: dict) -> float:
    """When a message was created (0 when its record does not say, as a number)."""
    created = data["time"].get("created") if isinstance(data.get("time"), dict) else None
    return created if isinstance(created, (int, float)) and not isinstance(created, bool) else 0


def _read_json(feed: Feed, file: Path, what: str) -> dict | None:
    try:
        value = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        feed.skip(None, f"{what} file not readable as JSON ({str(exc).split(':', 1)[0]})", record=str(file))
        return None
    if not isinstance(value, dict):
        feed.skip(None, f"{what} file is not a JSON object", record=str(file))
        return None
    return value
