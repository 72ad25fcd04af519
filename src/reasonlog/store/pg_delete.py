"""Deleting sessions on PostgreSQL, with the contents only they used (maintenance.py does it for SQLite).

Runs inside the caller's write transaction. A content is kept while any other session's message, system
prompt, response, context or tool list names it. Contents are deleted, so the content generation (a
counter) is bumped: writers in other processes then forget the content ids they cached.
"""
from __future__ import annotations

from . import twins, units

CHOSEN = "session_id = ANY(?::text[])"


def _referenced(sessions: str) -> str:
    """Every content id the calls and messages of `sessions` (an SQL condition on session_id) name."""
    return (f"SELECT content_id FROM messages WHERE {sessions}"
            f" UNION SELECT system_id FROM calls WHERE {sessions} AND system_id IS NOT NULL"
            f" UNION SELECT response_id FROM calls WHERE {sessions} AND response_id IS NOT NULL"
            " UNION SELECT (j #>> '{}')::bigint FROM calls, jsonb_array_elements(calls.context_json::jsonb) j"
            f" WHERE {sessions} AND jsonb_typeof(j) = 'number'"
            " UNION SELECT (j #>> '{}')::bigint FROM calls, jsonb_array_elements(calls.tools_json::jsonb) j"
            f" WHERE {sessions} AND calls.tools_json IS NOT NULL AND jsonb_typeof(j) = 'number'")


def delete_sessions(cur, session_ids: list[str], forget_file: str | None) -> int:
    """Delete these sessions and what only they used; returns how many existed."""
    ids = [r[0] for r in cur.execute("SELECT id FROM sessions WHERE id = ANY(?::text[])", (session_ids,))]
    if ids:
        gone = [r[0] for r in cur.execute(
            f"SELECT id FROM ({_referenced(CHOSEN)}) c(id) EXCEPT"
            f" SELECT id FROM ({_referenced('NOT ' + CHOSEN)}) k(id)", (ids,) * 5 + (ids,) * 5)]
        for table in ("tool_results", "outcomes", "reasoning_records"):
            cur.execute(f"DELETE FROM {table}_search WHERE rowid IN (SELECT rowid FROM {table} WHERE {CHOSEN})",
                        (ids,))
        units.forget_sessions(cur, CHOSEN, (ids,))
        twins.bill_copies_of(cur, CHOSEN, (ids,))  # a call recorded by another path too is billed by what stays
        for table in ("session_labels", "exchanges", "calls", "messages", "tool_results", "outcomes", "summaries",
                      "reasoning_records", "usage_rollup", "annotations"):
            cur.execute(f"DELETE FROM {table} WHERE {CHOSEN}", (ids,))
        cur.execute("DELETE FROM sessions WHERE id = ANY(?::text[])", (ids,))
        cur.execute("DELETE FROM contents_search WHERE rowid = ANY(?::bigint[])", (gone,))
        cur.execute("DELETE FROM contents WHERE id = ANY(?::bigint[])", (gone,))
        cur.execute("INSERT INTO counters (name, value) VALUES ('content_generation', 1)"
                    " ON CONFLICT (name) DO UPDATE SET value = counters.value + 1")
    if forget_file is not None:
        cur.execute("DELETE FROM import_files WHERE path = ?", (forget_file,))
    return len(ids)
