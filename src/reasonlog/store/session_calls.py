"""A session's calls as `get_session` lists them: the whole list, or the calls a page of the timeline anchors, each
with the window facts and changes worked out from the calls before it (docs/architecture.md). Dialect-neutral.

A page needs every call's context (each is stored against the one before) but the whole row of only the calls it
shows: the others are read with the few columns the window facts need (`LEAN_CALL_COLUMNS`).
"""
from __future__ import annotations

import itertools

import orjson

from ..wire.api import SessionCallJSON
from .answers import loads, row_dict, session_call, shown_window
from .content import decode_context
from .rows import CALL_INSERT_COLUMNS

# A call's columns as readers get them: the writer's list (one list of the table's columns), less the raw payload.
CALL_COLUMNS = tuple(c for c in CALL_INSERT_COLUMNS if c not in ("raw", "raw_format"))
ALL = 1 << 62  # an idx past every timeline's end


def session_calls(cur, session_id: str, shown: list[tuple], page: tuple[int, int] | None) -> list[SessionCallJSON]:
    """The calls of a session (`page` None) or those a page anchors; `shown`: the page's timeline rows
    (idx, role, content id, call id, at)."""
    first, end = page if page is not None else (0, ALL)
    calls = _full(cur, session_id) if page is None else _lean_upto(cur, session_id, {r[3] for r in shown})
    per_call = _per_call(cur, session_id, None if page is None else _entries_end(cur, session_id, end, calls))
    if page is not None:
        calls += _entryless_on_page(cur, session_id, calls, per_call, first, end)
    _derive_window_facts(calls, per_call)
    anchored = None if page is None else _anchored(calls, per_call, {r[3] for r in shown}, first, end)
    _window_changes(calls, anchored)
    if anchored is not None:
        calls = _whole_rows(cur, [c for c in calls if c["id"] in anchored])
    # the writer appends a call's reply after its inputs: the reply is its last message
    return [session_call(c, per_call.get(c["id"], (0, None))[1] if c["response_id"] is not None else None)
            for c in calls]


def _entryless_on_page(cur, session_id: str, calls: list[dict], per_call: dict[str, tuple[int, int]], first: int,
                       end: int) -> list[dict]:
    """The calls without entries that a page shows after the calls read: when the last of these ends before the
    page does (or there is none, on the first page)."""
    if calls and per_call.get(calls[-1]["id"], (0, -1))[1] >= end or not calls and first != 0:
        return []
    return _entryless_after(cur, session_id, calls[-1]["idx"] if calls else -1)


def _full(cur, session_id: str) -> list[dict]:
    return [row_dict(CALL_COLUMNS, r) for r in cur.execute(
        f"SELECT {', '.join(CALL_COLUMNS)} FROM calls WHERE session_id = ? ORDER BY idx", (session_id,))]


def _lean_upto(cur, session_id: str, shown: set[str | None]) -> list[dict]:
    """The lean rows of the calls up to the last one the page shows: what a call's facts say depends on the calls
    before it only, so none after the page is read."""
    upto = _last_shown_call(cur, {c for c in shown if c is not None})
    return [_lean(r) for r in cur.execute(f"SELECT {', '.join(LEAN_CALL_COLUMNS)} FROM calls WHERE session_id = ?"
                                          " AND idx <= ? ORDER BY idx", (session_id, upto))]


def _entryless_after(cur, session_id: str, after: int) -> list[dict]:
    """The calls right after call number `after` that wrote no timeline entry (a retry of the same window that
    failed, with no reply): a page shows them where the calls before them end."""
    rows = [_lean(r) for r in cur.execute(f"SELECT {', '.join(LEAN_CALL_COLUMNS)} FROM calls WHERE session_id = ?"
                                          " AND idx > ? ORDER BY idx LIMIT 100", (session_id, after))]
    if not rows:
        return []
    ids = [c["id"] for c in rows]
    written = {call for (call,) in cur.execute(f"SELECT DISTINCT call_id FROM messages WHERE session_id = ? AND"
                                               f" call_id IN ({', '.join('?' * len(ids))})", (session_id, *ids))}
    return list(itertools.takewhile(lambda c: c["id"] not in written, rows))


def _anchored(calls: list[dict], per_call: dict[str, tuple[int, int]], shown: set[str | None], first: int,
              end: int) -> set[str]:
    """The calls a page shows: those with an entry on it, and those with none whose place (after the last entry
    of the calls before them) is on it."""
    out, last = {c for c in shown if c is not None}, -1
    for c in calls:
        if c["id"] in per_call:
            last = per_call[c["id"]][1]
        elif first <= max(last, 0) < end:
            out.add(c["id"])
    return out


def _per_call(cur, session_id: str, below: int | None = None) -> dict[str, tuple[int, int]]:
    """For each call of the session (with an entry before `below`, if given): its timeline entries whose role is
    not system, and the idx of its last entry (its reply, when it has one). Counted by the database."""
    return {call: (turns, last) for call, turns, last in cur.execute(
        "SELECT call_id, SUM(CASE WHEN role = 'system' THEN 0 ELSE 1 END), MAX(idx) FROM messages"
        " WHERE session_id = ? AND idx < ? GROUP BY call_id", (session_id, ALL if below is None else below))}


def _entries_end(cur, session_id: str, end: int, calls: list[dict]) -> int:
    """Where the timeline entries of `calls` (a session's first calls) end: the writer gives each call's entries
    after the previous call's, so they end at the first entry from `end` on that belongs to a later call. A page
    of a huge session then counts its calls' entries without reading the rest of the timeline."""
    mine = {c["id"] for c in calls}
    for idx, call in cur.execute("SELECT idx, call_id FROM messages WHERE session_id = ? AND idx >= ? ORDER BY idx",
                                 (session_id, end)):
        if call is not None and call not in mine:
            return idx
    return ALL


def _derive_window_facts(calls: list[dict], per_call: dict[str, tuple[int, int]]) -> None:
    """Fill sliding-window facts the agent did not state, from the stored contexts.

    turns_in_context: messages the call sent; turns_removed: messages of the conversation so
    far (its timeline, without system prompts and this call's reply) that the call left out;
    tokens_in_session: input tokens of all calls so far, cached ones included.
    """
    seen, tokens = 0, 0
    for c in calls:
        produced = per_call[c["id"]][0] if c["id"] in per_call else 0
        seen += produced - (1 if c["response_id"] is not None and produced else 0)
        tokens += (c["input_tokens"] or 0) + (c["cache_read_tokens"] or 0) + (c["cache_write_tokens"] or 0)
        derived = {"turns_in_context": c["context_len"], "turns_removed": max(0, seen - c["context_len"]),
                   "tokens_in_session": tokens, "derived": True}
        c["context_facts"] = {**derived, **c["context_facts"], "derived": False} if c["context_facts"] else derived
        if c["response_id"] is not None and produced:
            seen += 1


LEAN_CALL_COLUMNS = ("id", "idx", "input_tokens", "cache_read_tokens", "cache_write_tokens", "system_id",
                     "tools_json", "context_json", "context_len", "response_id", "context_facts_json", "window_json")


def _last_shown_call(cur, call_ids: set[str]) -> int:
    """The highest idx among these calls (-1 for none)."""
    ids = list(call_ids)
    top = -1
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        found = cur.execute(f"SELECT MAX(idx) FROM calls WHERE id IN ({', '.join('?' * len(chunk))})", chunk).fetchone()
        top = max(top, found[0] if found and found[0] is not None else -1)
    return top


def _lean(r) -> dict:
    """A lean call row as a dict (row_dict's work, written out: a page may read tens of thousands)."""
    return {"id": r[0], "idx": r[1], "input_tokens": r[2], "cache_read_tokens": r[3], "cache_write_tokens": r[4],
            "system_id": r[5], "tools": loads(r[6]), "context": orjson.loads(r[7]), "context_len": r[8],
            "response_id": r[9], "context_facts": loads(r[10]), "window": loads(r[11])}


def _whole_rows(cur, calls: list[dict]) -> list[dict]:
    """These calls' whole rows, keeping the facts and window changes worked out on their lean rows."""
    full: dict[str, dict] = {}
    for start in range(0, len(calls), 500):
        chunk = [c["id"] for c in calls[start:start + 500]]
        for r in cur.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM calls WHERE id IN"
                             f" ({', '.join('?' * len(chunk))})", chunk):
            row = row_dict(CALL_COLUMNS, r)
            full[row["id"]] = row
    return [{**full[c["id"]], "context_facts": c["context_facts"], "window": c["window"]} for c in calls]


def _window_changes(calls: list[dict], only: set[str] | None = None) -> None:
    """Each call's `window`: how its context follows from the previous call's context and reply, as the
    writer aligned them (`store/timeline.py`): messages added, trimmed, edited, compaction, reply not sent
    back, messages the server held; and whether the system prompt or the tools changed.

    `only`: just these calls (a page). Calls written before migration 12 have no stored window: theirs is
    derived from their content ids, which needs every context decoded in turn.
    """
    legacy = any(c["window"] is None for c in calls)
    ids: list[int] | None = None
    previous: dict | None = None
    for c in calls:
        stored, earlier = c["window"], ids or []
        if legacy:
            ids = decode_context(c["context"], ids)
        if only is not None and c["id"] not in only:
            c["window"] = None
        else:
            c["window"] = shown_window(stored) if stored is not None \
                else _legacy_window(earlier, ids or [], previous)
            c["window"].update(system_changed=previous is not None and c["system_id"] != previous["system_id"],
                               tools_changed=previous is not None and c["tools"] != previous["tools"])
        previous = c


def _legacy_window(earlier: list[int], ids: list[int], previous: dict | None) -> dict:
    """The window of a call written before migration 12, from content ids (a repeated message counts once)."""
    before = earlier + ([previous["response_id"]] if previous and previous["response_id"] is not None else [])
    old, new = set(before), set(ids)
    last_kept = max((i for i, x in enumerate(ids) if x in old), default=-1)
    inserted = sum(1 for x in ids[:last_kept] if x not in old)
    trimmed = sum(1 for x in before if x not in new)
    return {"added": sum(1 for x in ids if x not in old), "trimmed": trimmed, "edited": 0,
            "compacted": 0 < inserted < trimmed, "unsent": 0, "held": 0}
