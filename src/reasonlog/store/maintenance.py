"""Looking after a SQLite database: an online backup, a check of reasonlog's own invariants, and prune.

Prune deletes whole sessions, then the contents no other row refers to (and their full-text
rows), and gives the space back: `incremental_vacuum` on files made with auto_vacuum (every file
since schema 6's release), a full `VACUUM` on older ones, which also converts them.

Every prune bumps `PRAGMA user_version`, the database's *content generation*: a writer in
another process that sees it change forgets the content ids it cached, because a pruned
content's id may be given to a new content.
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from ..wire.codec import content_hash
from . import kept, search, search_pending, text_blocks, twins, units
from .content import decode_context
from .reading import ContentReader
from .terms import StoreError

TABLES = ("sessions", "exchanges", "calls", "messages", "tool_results", "outcomes", "contents")


# ------------------------------------------------------------------ backup


def backup(conn: sqlite3.Connection, dest: Path, force: bool = False) -> int:
    """Copy the database to `dest` through SQLite's backup API, as one consistent snapshot; returns its bytes.

    The copy is written beside `dest` and renamed into place, so a failed backup leaves no half file.
    """
    if dest.is_dir():
        raise StoreError(f"{dest} is a directory; give a file name for the backup")
    if dest.exists() and not force:
        raise StoreError(f"{dest} already exists; use --force to replace it")
    if not dest.parent.is_dir():
        raise StoreError(f"{dest.parent} is not a directory")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        _copy(conn, tmp)
        os.replace(tmp, dest)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot write the backup {dest}: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest.stat().st_size


def _copy(conn: sqlite3.Connection, tmp: Path) -> None:
    target = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.backup(target)  # all pages in one step: one read transaction, so one point in time
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file; reasonlog turns WAL on when it opens it
    finally:
        target.close()
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())


# ------------------------------------------------------------------ check


@dataclass
class Check:
    problems: list[str] = field(default_factory=list)
    known: set[int] = field(default_factory=set)  # content ids that exist


def check(cur, dicts) -> dict:
    """SQLite's integrity check plus reasonlog's invariants; one line per problem, naming what is wrong."""
    found = Check()
    found.problems += [f"integrity: {row[0]}" for row in cur.execute("PRAGMA integrity_check") if row[0] != "ok"]
    _check_contents(cur, dicts, found)
    _check_calls(cur, found)
    _check_messages(cur, found)
    found.problems += kept.differences(cur)
    found.problems += text_blocks.problems(cur)
    counts = {t: cur.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    kinds = dict(cur.execute("SELECT kind, COUNT(*) FROM contents GROUP BY kind ORDER BY kind").fetchall())
    return {"ok": not found.problems, "problems": found.problems, "counts": counts, "contents_by_kind": kinds}


def _check_contents(cur, dicts, found: Check) -> None:
    """Every content decompresses and hashes to its `hash`."""
    reader = ContentReader(cur.connection.cursor(), dicts)
    for cid, kind, digest, codec, dict_id, data in cur.execute(
            "SELECT id, kind, hash, codec, dict_id, data FROM contents ORDER BY id"):
        found.known.add(cid)
        try:
            value = reader.bytes_of(codec, dict_id, data)
        except Exception as exc:  # noqa: BLE001  (any decoder error is the problem being reported)
            found.problems.append(f"content {cid} ({kind}): cannot be decompressed: {type(exc).__name__}: {exc}")
            continue
        if content_hash(value) != bytes(digest):
            found.problems.append(f"content {cid} ({kind}): its value does not hash to its hash {bytes(digest).hex()}")


def _check_calls(cur, found: Check) -> None:
    """Every call's context chain decodes and names existing contents, as do its system, tools and response."""
    session, previous, expected_idx = None, None, 0
    for call_id, sid, idx, context_json, system_id, response_id, tools_json in cur.execute(
            "SELECT id, session_id, idx, context_json, system_id, response_id, tools_json FROM calls"
            " ORDER BY session_id, idx").fetchall():
        if sid != session:
            session, previous, expected_idx = sid, None, 0
        where = f"call {call_id} (session {sid})"
        if idx != expected_idx:
            found.problems.append(f"{where}: is number {idx} of its session, but number {expected_idx} is missing")
        expected_idx = idx + 1
        try:
            previous = decode_context(orjson.loads(context_json), previous)
        except (ValueError, IndexError, TypeError) as exc:
            found.problems.append(f"{where}: context cannot be decoded: {exc}")
            previous = None
            continue
        refs = [*previous, system_id, response_id, *(orjson.loads(tools_json) if tools_json else ())]
        missing = sorted({r for r in refs if r is not None and r not in found.known})
        if missing:
            found.problems.append(f"{where}: refers to missing content {', '.join(map(str, missing))}")
    for (call_id,) in cur.execute("SELECT id FROM calls WHERE session_id NOT IN (SELECT id FROM sessions)"):
        found.problems.append(f"call {call_id}: its session is missing")


def _check_messages(cur, found: Check) -> None:
    for sid, idx, cid in cur.execute("SELECT session_id, idx, content_id FROM messages ORDER BY session_id, idx"):
        if cid not in found.known:
            found.problems.append(f"message {idx} of session {sid}: content {cid} is missing")


# ------------------------------------------------------------------ prune


@dataclass(frozen=True)
class PruneCriteria:
    """Which sessions go. `before`: an ISO date or instant their last activity is earlier than."""

    before: str | None = None
    run: str | None = None
    agent: str | None = None
    model: str | None = None
    include_open: bool = False


def older_than(*, days: float = 0, hours: float = 0, now: datetime | None = None) -> PruneCriteria:
    """The sessions last active more than this long before `now` (default: the present), as the store's instants
    are written (ISO, UTC, milliseconds)."""
    cut = (now or datetime.now(UTC)) - timedelta(days=days, hours=hours)
    return PruneCriteria(before=cut.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


# A session's last activity: its end, else its last call, else its start. ISO text sorts as time.
_LAST_ACTIVITY = ("COALESCE(s.ended_at, (SELECT MAX(c.started_at) FROM calls c WHERE c.session_id = s.id),"
                  " s.started_at)")


def plan_prune(cur, criteria: PruneCriteria) -> dict:
    """What a prune would remove (sessions, calls, messages, contents, bytes); leaves temp tables for `prune`."""
    _choose_sessions(cur, criteria)
    _choose_contents(cur)
    one = lambda sql: cur.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "sessions": one("SELECT COUNT(*) FROM temp.prune_sessions"),
        "session_ids": [r[0] for r in cur.execute("SELECT id FROM temp.prune_sessions ORDER BY id")],
        "calls": one("SELECT COUNT(*) FROM calls WHERE session_id IN (SELECT id FROM temp.prune_sessions)"),
        "messages": one("SELECT COUNT(*) FROM messages WHERE session_id IN (SELECT id FROM temp.prune_sessions)"),
        "contents": one("SELECT COUNT(*) FROM temp.prune_contents"),
        # Stored (compressed) bytes of the contents and raw payloads that go.
        "bytes": one("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM contents WHERE id IN"
                     " (SELECT id FROM temp.prune_contents)")
        + one("SELECT COALESCE(SUM(LENGTH(raw)), 0) FROM calls WHERE session_id IN"
              " (SELECT id FROM temp.prune_sessions)"),
    }


def criteria_sql(criteria: PruneCriteria) -> tuple[str, list]:
    """The sessions `s` the criteria take: an SQL condition and its parameters (both dialects)."""
    where, args = ["1=1"], []
    if criteria.before is not None:  # a session is last active no earlier than it started: the index narrows
        where += ["s.started_at < ?", f"{_LAST_ACTIVITY} < ?"]
        args += [criteria.before, criteria.before]
    for column in ("run", "agent", "model"):
        if getattr(criteria, column) is not None:
            where.append(f"s.{column} = ?")
            args.append(getattr(criteria, column))
    if not criteria.include_open:
        where.append("s.status != 'open'")
    return " AND ".join(where), args


def _choose_sessions(cur, criteria: PruneCriteria) -> None:
    where, args = criteria_sql(criteria)
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS prune_sessions (id TEXT PRIMARY KEY)")
    cur.execute("DELETE FROM temp.prune_sessions")
    cur.execute(f"INSERT INTO temp.prune_sessions SELECT s.id FROM sessions s WHERE {where}", args)


def choose_sessions_by_id(cur, session_ids: list[str]) -> int:
    """Choose these sessions (and the contents only they use) for `prune`; returns how many exist."""
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS prune_sessions (id TEXT PRIMARY KEY)")
    cur.execute("DELETE FROM temp.prune_sessions")
    cur.executemany("INSERT INTO temp.prune_sessions SELECT id FROM sessions WHERE id = ?",
                    [(sid,) for sid in session_ids])
    _choose_contents(cur)
    return cur.execute("SELECT COUNT(*) FROM temp.prune_sessions").fetchone()[0]


def _referenced_by(sessions: str) -> str:
    """SELECT of every content id the calls and messages of `sessions` (an SQL condition on session_id) name.

    Literal ids in contexts suffice: a run only repeats ids an earlier call of the same session named.
    """
    return (f"SELECT content_id FROM messages WHERE {sessions}"
            f" UNION SELECT system_id FROM calls WHERE {sessions} AND system_id IS NOT NULL"
            f" UNION SELECT response_id FROM calls WHERE {sessions} AND response_id IS NOT NULL"
            f" UNION SELECT j.value FROM calls, json_each(calls.context_json) j WHERE {sessions}"
            " AND j.type = 'integer'"
            f" UNION SELECT j.value FROM calls, json_each(calls.tools_json) j WHERE {sessions}"
            " AND calls.tools_json IS NOT NULL")


def _choose_contents(cur) -> None:
    chosen = "session_id IN (SELECT id FROM temp.prune_sessions)"
    kept = "session_id NOT IN (SELECT id FROM temp.prune_sessions)"
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS prune_contents (id INTEGER PRIMARY KEY)")
    cur.execute("DELETE FROM temp.prune_contents")
    cur.execute(f"INSERT INTO temp.prune_contents {_referenced_by(chosen)}")
    cur.execute(f"DELETE FROM temp.prune_contents WHERE id IN ({_referenced_by(kept)})")


def prune(cur, dicts) -> None:
    """Delete what `plan_prune` chose, inside the caller's write transaction."""
    _unindex(cur)
    chosen = "session_id IN (SELECT id FROM temp.prune_sessions)"
    units.forget_sessions(cur, chosen)
    twins.bill_copies_of(cur, chosen)  # a call recorded by another path too is billed by the record that stays
    for table in ("session_labels", "exchanges", "calls", "messages", "tool_results", "outcomes", "summaries",
                  "reasoning_records", "usage_rollup", "annotations"):
        cur.execute(f"DELETE FROM {table} WHERE {chosen}")
    cur.execute("DELETE FROM sessions WHERE id IN (SELECT id FROM temp.prune_sessions)")
    cur.execute("DELETE FROM contents WHERE id IN (SELECT id FROM temp.prune_contents)")
    _compact_indexes(cur)
    generation = cur.execute("PRAGMA user_version").fetchone()[0]
    cur.execute(f"PRAGMA user_version = {int(generation) + 1}")


def _unindex(cur) -> None:
    """Take what goes out of the searched text (store/text_blocks.py rewrites the blocks that held it)."""
    chosen = "session_id IN (SELECT id FROM temp.prune_sessions)"
    search.unindex_tool_results(cur, [r for (r,) in cur.execute(f"SELECT rowid FROM tool_results WHERE {chosen}")])
    search.unindex_outcomes(cur, [r for (r,) in cur.execute(f"SELECT rowid FROM outcomes WHERE {chosen}")])
    search.unindex_reasoning_records(cur, [r for (r,) in cur.execute(
        f"SELECT rowid FROM reasoning_records WHERE {chosen}")])
    search.unindex_contents(cur, [cid for (cid,) in cur.execute(  # tool schemas are never searched
        "SELECT id FROM contents WHERE id IN (SELECT id FROM temp.prune_contents) AND kind != 'tool'")])


def _compact_indexes(cur) -> None:
    """Pack the blocks of searched text that deletes left small (store/text_blocks.py)."""
    text_blocks.compact(cur, search_pending.CHARS)


def reclaim(conn: sqlite3.Connection) -> str:
    """Give freed pages back to the file system; returns how ("incremental_vacuum" or "vacuum")."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        # executescript steps the pragma to its end; execute() frees one page per call.
        conn.executescript("PRAGMA incremental_vacuum;")
        how = "incremental_vacuum"
    else:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # VACUUM converts the file, so the next prune is cheap
        conn.execute("VACUUM")
        how = "vacuum"
    settle(conn)
    return how


def settle(conn: sqlite3.Connection) -> int:
    """Fold the WAL into the file (which shrinks only then); returns the file's bytes."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]


# ------------------------------------------------------------------ space


def space(conn: sqlite3.Connection, path: Path) -> dict:
    """Free pages inside the file (bytes a prune or vacuum could return) and the WAL's size."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    wal = Path(f"{path}-wal")
    return {"free_bytes": free * page_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0}
