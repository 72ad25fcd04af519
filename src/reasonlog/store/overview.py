"""Narrow reads for the dashboard's overviews, which never read a session's messages: each session's first prompt
(its title when the agent gave none), a session's time spans (its calls, the tool runs it recorded and the
sub-agents its calls spawned, nested), for the timeline, and a range of its calls with their replies, for the
compare page. Dialect-neutral (`?` placeholders)."""
from __future__ import annotations

from typing import Any

from .. import accounting
from ..parts import parts_of
from .content import Dictionaries
from .reading import CALL_COLUMNS, ContentReader, row_dict
from .terms import NotFound

SPAN_COLUMNS = ("id", "idx", "started_at", "latency_ms", "model", "status", "stop_reason", *accounting.TOKENS,
                "cost_usd", "cost_source", "response_id")
SPAN_SESSION_COLUMNS = ("id", "agent", "model", "parent_call_id", "started_at", "ended_at", "status")
# A call's row as a range of calls gives it: no store-internal reference (get_call resolves them) and none of the
# facts and window changes a whole session works out from the calls before it.
ANSWER_COLUMNS = tuple(c for c in CALL_COLUMNS if c not in ("shape_json", "system_id", "tools_json", "context_json",
                                                             "response_id", "context_facts_json", "window_json"))
CHILD_CALLS = 200   # calls of a sub-agent read for its parent's timeline (its own timeline pages the rest)
DEPTH = 8           # sub-agent levels read (Claude Code nests five deep)


def first_prompts(cur, dicts: Dictionaries, session_ids: list[str]) -> dict[str, object]:
    """Each session's first user message, as stored (sessions without one are left out)."""
    if not session_ids:
        return {}
    marks = ", ".join("?" * len(session_ids))
    rows = cur.execute("SELECT s.id, (SELECT m.content_id FROM messages m WHERE m.session_id = s.id"
                       " AND m.role = 'user' ORDER BY m.idx LIMIT 1) FROM sessions s"
                       f" WHERE s.id IN ({marks})", session_ids).fetchall()
    found = {sid: cid for sid, cid in rows if cid is not None}
    reader = ContentReader(cur, dicts)
    reader.load(found.values())
    return {sid: reader.get(cid) for sid, cid in found.items()}


def session_spans(cur, dicts: Dictionaries, session_id: str, page: tuple[int, int], depth: int = DEPTH) -> dict:
    """The session's calls whose idx is in `page` [first, end) as spans, each with the tools its reply called; the
    tool runs recorded in their time; and the sub-agents they spawned, each with its own spans (first CHILD_CALLS
    calls), `depth` levels down."""
    row = cur.execute(f"SELECT {', '.join(SPAN_SESSION_COLUMNS)} FROM sessions WHERE id = ?",
                      (session_id,)).fetchone()
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    out: dict[str, Any] = {"session": row_dict(SPAN_SESSION_COLUMNS, row)}
    first, end = page
    calls = [row_dict(SPAN_COLUMNS, r) for r in cur.execute(
        f"SELECT {', '.join(SPAN_COLUMNS)} FROM calls WHERE session_id = ? AND idx >= ? AND idx < ? ORDER BY idx",
        (session_id, first, end))]
    _name_tools(cur, dicts, calls)
    out["calls"] = calls
    out["total_calls"] = cur.execute("SELECT COUNT(*) FROM calls WHERE session_id = ?", (session_id,)).fetchone()[0]
    out["tool_runs"] = _tool_runs(cur, session_id, calls)
    out["children"] = _children(cur, dicts, [c["id"] for c in calls], depth) if depth > 0 else []
    return out


def _name_tools(cur, dicts: Dictionaries, calls: list[dict]) -> None:
    """Each call's `tools`: the names of the tools its reply called, in order (from the reply alone)."""
    reader = ContentReader(cur, dicts)
    reader.load(c["response_id"] for c in calls)
    for c in calls:
        reply = reader.get(c["response_id"]) if c["response_id"] is not None else None
        c["tools"] = [p.name or "tool" for p in parts_of(reply) if p.kind == "tool_use"] if reply else []
        del c["response_id"]  # a store-internal reference


def _tool_runs(cur, session_id: str, calls: list[dict]) -> list[dict]:
    """Tool results the agent recorded itself (they know their duration) from the first call of the page on."""
    if not calls:
        return []
    rows = cur.execute("SELECT tool_use_id, name, at, duration_ms, is_error FROM tool_results WHERE session_id = ?"
                       " AND at >= ? ORDER BY at", (session_id, calls[0]["started_at"])).fetchall()
    runs = [row_dict(("tool_use_id", "name", "at", "duration_ms", "is_error"), r) for r in rows]
    for r in runs:
        r["is_error"] = bool(r["is_error"])
    return runs


def _children(cur, dicts: Dictionaries, call_ids: list[str], depth: int) -> list[dict]:
    if not call_ids:
        return []
    found = []
    for start in range(0, len(call_ids), 500):
        chunk = call_ids[start:start + 500]
        found += [r[0] for r in cur.execute("SELECT id FROM sessions WHERE parent_call_id IN"
                                            f" ({', '.join('?' * len(chunk))}) ORDER BY started_at, id", chunk)]
    return [session_spans(cur, dicts, sid, (0, CHILD_CALLS), depth - 1) for sid in found]


def session_calls(cur, dicts: Dictionaries, session_id: str, page: tuple[int, int]) -> list[dict]:
    """The session's calls whose idx is in `page` [first, end), each its row with its reply (`response`, None for
    a call without one): no context decoded, no message read but the replies."""
    if cur.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise NotFound(f"no session {session_id!r}")
    rows = cur.execute(f"SELECT {', '.join(ANSWER_COLUMNS)}, response_id FROM calls WHERE session_id = ? AND idx >= ?"
                       " AND idx < ? ORDER BY idx", (session_id, *page)).fetchall()
    reader = ContentReader(cur, dicts)
    reader.load(r[-1] for r in rows if r[-1] is not None)
    return [{**row_dict(ANSWER_COLUMNS, r[:-1]), "response": None if r[-1] is None else reader.get(r[-1])}
            for r in rows]
