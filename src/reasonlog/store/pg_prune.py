"""Removing sessions on PostgreSQL while writers keep writing: `reasonlog prune`, `serve --keep-days`, and the
sessions an importer writes again (maintenance.py does it for SQLite, in one transaction).

A prune is a series of short transactions of at most `BATCH` sessions each, so a writer never waits for more than
one batch's work, and nothing takes a table lock (only row locks on the rows it deletes, and advisory locks). Each
batch:

1. takes the advisory lock of each of its sessions, in id order, as writers of those sessions do
   (`PostgresStore._lock_sessions`), then asks again which of them still qualify: a session written to meanwhile
   is newer than the cut and stays;
2. notes the contents those sessions name, then deletes their rows, their search rows and the sessions;
3. takes the *contents lock* exclusively, asks which of the noted contents no call or message names any more,
   and deletes those with their trigram rows, and bumps the content generation.

The contents lock closes the one race dedup opens: a writer in another process that reuses a content (it found
it by hash, or remembers its id) while a prune deletes it would commit a reference to a content that is gone.
Every writing transaction holds the same lock shared, from just after its sessions' locks to its commit, and
reads the content generation under it (`PostgresStore._lock_sessions`). So step 3 waits for the writers under
way to commit and then sees their references (READ COMMITTED: each statement sees what committed before it);
a writer that starts meanwhile waits for the batch to commit (milliseconds: the statements of step 3 alone),
then reads the new generation and forgets every content id it cached, and finds by hash only contents that
exist. Locks are taken in one order (sessions, then the contents lock) by both sides, so they never deadlock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import pg_search, twins, units
from .maintenance import criteria_sql

if TYPE_CHECKING:
    from .maintenance import PruneCriteria

BATCH = 100  # sessions a transaction
CONTENTS_LOCK = "hashtextextended('reasonlog-contents:' || current_schema(), 7)"
CHOSEN = "session_id = ANY(?::text[])"
# What a call names, as schema 19's GIN index `calls_named` has it.
NAMED = "(context_json::jsonb || COALESCE(tools_json::jsonb, '[]'::jsonb))"
TABLES = ("session_labels", "exchanges", "calls", "messages", "tool_results", "outcomes", "summaries",
          "reasoning_records", "usage_rollup", "annotations")


@dataclass
class Removed:
    """What a prune removed (or would): the figures `reasonlog prune` prints."""

    sessions: int = 0
    calls: int = 0
    messages: int = 0
    contents: int = 0
    bytes: int = 0

    def add(self, other: Removed) -> None:
        for name in ("sessions", "calls", "messages", "contents", "bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict:
        return {"sessions": self.sessions, "calls": self.calls, "messages": self.messages,
                "contents": self.contents, "bytes": self.bytes}


def hold_contents_shared(cur) -> None:
    """A writer's side of the contents lock (see the module's docstring), until its transaction ends."""
    cur.execute(f"SELECT pg_advisory_xact_lock_shared({CONTENTS_LOCK})")


# ------------------------------------------------------------------ which sessions


def chosen_sessions(cur, criteria: PruneCriteria, after: str = "", limit: int | None = None) -> list[str]:
    """Ids of the sessions the criteria take, in id order, past `after`."""
    where, args = criteria_sql(criteria)
    sql = f"SELECT s.id FROM sessions s WHERE s.id > ? AND {where} ORDER BY s.id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [r[0] for r in cur.execute(sql, [after, *args])]


def plan(cur, criteria: PruneCriteria) -> dict:
    """What a prune would remove now, removing nothing (one read)."""
    ids = chosen_sessions(cur, criteria)
    used = _named_by(cur, ids)
    only = [r[0] for r in cur.execute(f"SELECT x FROM unnest(?::bigint[]) x WHERE {_unnamed('NOT ' + CHOSEN)}",
                                      [used, *[ids] * 4])]
    one = lambda sql, *args: cur.execute(sql, args).fetchone()[0]  # noqa: E731
    return {"sessions": len(ids), "session_ids": ids,
            "calls": one(f"SELECT COUNT(*) FROM calls WHERE {CHOSEN}", ids),
            "messages": one(f"SELECT COUNT(*) FROM messages WHERE {CHOSEN}", ids),
            "contents": len(only),
            "bytes": one("SELECT COALESCE(SUM(octet_length(data)), 0)::bigint FROM contents WHERE id = ANY(?)", only)
            + one(f"SELECT COALESCE(SUM(octet_length(raw)), 0)::bigint FROM calls WHERE {CHOSEN}", ids)}


# ------------------------------------------------------------------ which contents


def _named_by(cur, ids: list[str]) -> list[int]:
    """Every content id the calls and messages of these sessions name (through their session_id indexes)."""
    if not ids:
        return []
    return [r[0] for r in cur.execute(
        f"SELECT content_id FROM messages WHERE {CHOSEN}"
        f" UNION SELECT system_id FROM calls WHERE {CHOSEN} AND system_id IS NOT NULL"
        f" UNION SELECT response_id FROM calls WHERE {CHOSEN} AND response_id IS NOT NULL"
        f" UNION SELECT (j #>> '{{}}')::bigint FROM calls, jsonb_array_elements({NAMED}) j"
        f" WHERE {CHOSEN} AND jsonb_typeof(j) = 'number'", (ids,) * 4)]


def _unnamed(sessions: str = "TRUE") -> str:
    """A condition on `x` (a content id): no message or call of the sessions `sessions` (a condition on
    session_id, with one parameter for each of its four uses) names it; each question one index lookup."""
    return (f"NOT EXISTS (SELECT 1 FROM messages m WHERE m.content_id = x AND {sessions})"
            f" AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.system_id = x AND {sessions})"
            f" AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.response_id = x AND {sessions})"
            f" AND NOT EXISTS (SELECT 1 FROM calls c WHERE {NAMED} @> jsonb_build_array(x) AND {sessions})")


def _delete_unnamed(cur, used: list[int]) -> Removed:
    """Under the contents lock: delete the contents of `used` nothing names any more, with their trigram rows, and
    bump the content generation (writers forget the content ids and the sessions they remember)."""
    cur.execute(f"SELECT pg_advisory_xact_lock({CONTENTS_LOCK})")
    gone = [r[0] for r in cur.execute(f"SELECT x FROM unnest(?::bigint[]) x WHERE {_unnamed()}", (used,))]
    pg_search.forget_contents(cur, gone)
    freed = cur.execute("WITH d AS (DELETE FROM contents WHERE id = ANY(?::bigint[]) RETURNING octet_length(data) n)"
                        " SELECT COUNT(*), COALESCE(SUM(n), 0)::bigint FROM d", (gone,)).fetchone()
    cur.execute("INSERT INTO counters (name, value) VALUES ('content_generation', 1)"
                " ON CONFLICT (name) DO UPDATE SET value = counters.value + 1")
    return Removed(contents=freed[0], bytes=freed[1])


# ------------------------------------------------------------------ deleting


def delete_batch(cur, ids: list[str], criteria: PruneCriteria | None = None) -> Removed:
    """Delete these sessions (those of them the criteria still take, when given) and the contents only they
    named, in the caller's transaction; see the module's docstring for the locks."""
    ids = sorted(set(ids))
    cur.executemany("SELECT pg_advisory_xact_lock(hashtextextended(?, 7))", [(sid,) for sid in ids])
    if criteria is not None:
        where, args = criteria_sql(criteria)
        ids = [r[0] for r in cur.execute(f"SELECT s.id FROM sessions s WHERE s.id = ANY(?::text[]) AND {where}",
                                         [ids, *args])]
    else:
        ids = [r[0] for r in cur.execute("SELECT id FROM sessions WHERE id = ANY(?::text[])", (ids,))]
    if not ids:
        return Removed()
    used = _named_by(cur, ids)
    done = _delete_rows(cur, ids)
    done.add(_delete_unnamed(cur, used))
    return done


def _delete_rows(cur, ids: list[str]) -> Removed:
    for table in ("tool_results", "outcomes", "reasoning_records"):
        cur.execute(f"DELETE FROM {table}_search WHERE rowid IN (SELECT rowid FROM {table} WHERE {CHOSEN})", (ids,))
    units.forget_sessions(cur, CHOSEN, (ids,))
    twins.bill_copies_of(cur, CHOSEN, (ids,))  # a call recorded by another path too is billed by what stays
    done = Removed(sessions=len(ids))
    for table in TABLES:
        if table == "calls":
            row = cur.execute(f"WITH d AS (DELETE FROM calls WHERE {CHOSEN} RETURNING octet_length(raw) n)"
                              " SELECT COUNT(*), COALESCE(SUM(n), 0)::bigint FROM d", (ids,)).fetchone()
            done.calls, done.bytes = row[0], row[1]
            continue
        cur.execute(f"DELETE FROM {table} WHERE {CHOSEN}", (ids,))
        if table == "messages":
            done.messages = cur.rowcount
    cur.execute("DELETE FROM sessions WHERE id = ANY(?::text[])", (ids,))
    return done


def delete_sessions(cur, session_ids: list[str], forget_file: str | None) -> int:
    """Delete these sessions and what only they used (an importer writes a rewritten file again); `forget_file`
    also drops that file's import row. Returns how many existed."""
    n = delete_batch(cur, session_ids).sessions
    if forget_file is not None:
        cur.execute("DELETE FROM import_files WHERE path = ?", (forget_file,))
    return n
