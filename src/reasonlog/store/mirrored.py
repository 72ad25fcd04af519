"""What `reasonlog mirror push` reads from the record: a fingerprint of every session, and the rows of some.

The mirror (reasonlog.mirror) holds what the record's readers answer, already counted by the accounting rule:
each session's list row with its totals, its ledger entries (reasonlog.accounting), the calls another call is
counted in (they still match the session filters), its labels, and its timeline's text. A session whose
fingerprint differs from the mirror's is pushed again whole. Dialect-neutral (`?` placeholders).
"""
from __future__ import annotations

import hashlib
from typing import Any

from .. import accounting
from ..parts import searchable_text
from . import reading, search
from .content import Dictionaries
from .terms import SessionFilter
from .usage_sql import IRREGULAR

# Everything about a session that a mirrored answer depends on, as one text per session: its own columns and
# labels, and counts and sums of its calls, exchanges and timeline. Anything that changes an answer changes one of
# them (a new call, an ended session, a reported cost, a call counted in another, a label). `@` is where a condition
# on the session's id goes (none: every session).
_FINGERPRINT = (
    "SELECT s.id, s.run, s.agent, s.model, s.provider, s.status, s.started_at, s.ended_at, s.summary, s.labels_json,"
    " s.parent_session_id, s.parent_call_id, s.error_json,"
    " c.n, c.last, c.tokens, c.cost, c.counted, c.errors, e.n, e.stats, e.ended, m.n, m.last, l.n, l.text,"
    " t.n, o.n, r.n, r.size"
    " FROM sessions s"
    " LEFT JOIN (SELECT session_id, COUNT(*) n, MAX(idx) last, SUM(" + " + ".join(
        f"COALESCE({t}, 0)" for t in accounting.TOKENS) + ") tokens, SUM(cost_usd) cost, COUNT(counted_in) counted,"
    " SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END) errors FROM calls @session_id GROUP BY session_id) c"
    " ON c.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n, SUM(LENGTH(stats_json)) stats, MAX(ended_at) ended FROM exchanges"
    " @session_id GROUP BY session_id) e ON e.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n, MAX(idx) last FROM messages @session_id GROUP BY session_id) m"
    " ON m.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n, MAX(key || '=' || value) text FROM session_labels"
    " @session_id GROUP BY session_id) l ON l.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n FROM tool_results @session_id GROUP BY session_id) t"
    " ON t.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n FROM outcomes @session_id GROUP BY session_id) o ON o.session_id = s.id"
    " LEFT JOIN (SELECT session_id, COUNT(*) n, SUM(LENGTH(compact_json) + COALESCE(LENGTH(details), 0)) size"
    " FROM reasoning_records WHERE state = 'kept' @@session_id GROUP BY session_id) r ON r.session_id = s.id @s.id")
# The sessions a push since an instant looks at (`fingerprints(cur, since)`): those still open, and those started
# or with a call started since it (each found by its index).
_RECENT = ("SELECT id FROM sessions WHERE status = 'open' UNION SELECT id FROM sessions WHERE started_at >= ?"
           " UNION SELECT session_id FROM calls WHERE started_at >= ?")
# what a search finds beside the messages: a session's record counts only grow as it is written
_SEARCHED = ("SELECT (SELECT COUNT(*) FROM tool_results), (SELECT COUNT(*) FROM outcomes),"
             " (SELECT COUNT(*) FROM reasoning_records WHERE state = 'kept')")


def fingerprints(cur, since: str | None = None) -> dict[str, tuple[str, str | None]]:
    """Each session's fingerprint and its parent session, by id: of every session, or with `since` (an instant) of
    the sessions open, started or with a call started since then, and every session spawned under one of them."""
    if since is None:
        return _fingerprints(cur, _FINGERPRINT.replace("@@session_id", "").replace("@session_id", "")
                             .replace("@s.id", ""), [])
    ids = sorted({r[0] for r in cur.execute(_RECENT, [since, since])})
    ids += _descendants(cur, set(ids))
    out: dict[str, tuple[str, str | None]] = {}
    uses = _FINGERPRINT.count("@session_id") + _FINGERPRINT.count("@s.id")  # a query's uses of each id
    for start in range(0, len(ids), 400):  # 400 x 8 parameters a query: under any dialect's limit
        chunk = ids[start:start + 400]
        marks = ", ".join("?" * len(chunk))
        sql = (_FINGERPRINT.replace("@@session_id", f"AND session_id IN ({marks})")
               .replace("@session_id", f"WHERE session_id IN ({marks})").replace("@s.id", f"WHERE s.id IN ({marks})"))
        out.update(_fingerprints(cur, sql, chunk * uses))
    return out


def _fingerprints(cur, sql: str, args: list) -> dict[str, tuple[str, str | None]]:
    out = {}
    for row in cur.execute(sql, args):
        text = "\x1f".join("" if v is None else repr(v) for v in row)
        out[row[0]] = (hashlib.blake2b(text.encode(), digest_size=16).hexdigest(), row[10])
    return out


def _descendants(cur, ids: set[str]) -> list[str]:
    """The sessions spawned under one of `ids`, at any depth, not among them (a parent's reported cost changes its
    sub-agents' accounting)."""
    children: dict[str, list[str]] = {}
    for sid, parent in cur.execute("SELECT id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL"):
        children.setdefault(parent, []).append(sid)
    out, todo = [], list(ids)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in ids:
                ids.add(child)
                out.append(child)
                todo.append(child)
    return out


def sessions_in(mark_text: str) -> int:
    """How many sessions the record held when `mark` made this mark."""
    return int(mark_text.split("|")[1])


def mark(cur) -> tuple[str | None, str]:
    """The newest instant the record holds (a session's start or a call's), and a mark that changes whenever a
    session, call or searched record (tool result, outcome, kept reasoning record) is added or removed (the instant
    with the counts): a mirror whose last finished push began at the same mark holds every one the record holds."""
    newest, sessions, calls = cur.execute(
        "SELECT MAX(at), SUM(s), SUM(c) FROM (SELECT MAX(started_at) at, COUNT(*) s, 0 c FROM sessions"
        " UNION ALL SELECT MAX(started_at), 0, COUNT(*) FROM calls) x").fetchone()
    searched = "|".join(str(int(n or 0)) for n in cur.execute(_SEARCHED).fetchone())
    return newest, f"{newest or ''}|{int(sessions or 0)}|{int(calls or 0)}|{searched}"


def session_rows(cur, dicts: Dictionaries, session_ids: list[str]) -> dict[str, Any]:
    """What the mirror holds of these sessions: `sessions` (list rows with totals), `labels` (session id ->
    [(key, value)]), `entries` (accounting entries), `twins` (calls counted in another call: id, session_id,
    started_at, model, latency_ms, status), `messages` (session_id, idx, role, at, call_id, text), `models`
    (session id -> its calls' models), `irregular` (the sessions store/usage.py reads through the ledger),
    `replies` (call id -> its reply's text) and `texts` (the searched text of tool results, outcomes and kept
    reasoning records: kind, session_id, rowid, text)."""
    if not session_ids:
        return {"sessions": [], "labels": {}, "entries": [], "twins": [], "messages": [], "models": {},
                "irregular": [], "replies": {}, "texts": []}
    marks = ", ".join("?" * len(session_ids))
    sessions = reading.list_sessions(cur, SessionFilter(limit=None), session_ids)
    labels: dict[str, list[tuple[str, str]]] = {}
    for key, value, sid in cur.execute(
            f"SELECT key, value, session_id FROM session_labels WHERE session_id IN ({marks})", session_ids):
        labels.setdefault(sid, []).append((key, value))
    entries = list(reading.iter_call_rows(cur, SessionFilter(limit=None), only=f"s.id IN ({marks})",
                                          only_args=session_ids))
    twins = cur.execute("SELECT id, session_id, started_at, model, latency_ms, status FROM calls"
                        f" WHERE session_id IN ({marks}) AND counted_in IS NOT NULL", session_ids).fetchall()
    rows = cur.execute(f"SELECT session_id, idx, role, content_id, call_id, at FROM messages"
                       f" WHERE session_id IN ({marks}) ORDER BY session_id, idx", session_ids).fetchall()
    contents = reading.ContentReader(cur.connection.cursor(), dicts)
    contents.load(r[3] for r in rows)
    messages = [(sid, idx, role, at, call_id, searchable_text(contents.get(cid)))
                for sid, idx, role, cid, call_id, at in rows]
    replies = cur.execute(f"SELECT id, response_id FROM calls WHERE session_id IN ({marks})"
                          " AND response_id IS NOT NULL", session_ids).fetchall()
    contents.load(r[1] for r in replies)
    models: dict[str, list[str]] = {}
    for sid, model in cur.execute(f"SELECT DISTINCT session_id, model FROM calls WHERE session_id IN ({marks})"
                                  " AND model IS NOT NULL", session_ids):
        models.setdefault(sid, []).append(model)
    irregular = [r[0] for r in cur.execute(f"SELECT s.id FROM sessions s WHERE s.id IN ({marks}) AND {IRREGULAR}",
                                           session_ids)]
    return {"sessions": sessions, "labels": labels, "entries": entries, "twins": [tuple(t) for t in twins],
            "messages": messages, "models": models, "irregular": irregular,
            "replies": {cid: searchable_text(contents.get(rid)) for cid, rid in replies},
            "texts": search.record_texts(cur, session_ids)}
