"""Reading rows back as the JSON-shaped dicts every reader uses. Dialect-neutral (`?` placeholders)."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson

from .. import accounting
from ..conversation import decode_map, reply_slots
from ..wire.codec import canonical
from . import annotation, kept, usage_sql
from .content import Dictionaries, decode_context, fill_skeleton, unpack_raw
from .rows import CALL_INSERT_COLUMNS, ContentReader, join_request
from .terms import NotFound, SessionFilter

SESSION_COLUMNS = ("id", "run", "agent", "model", "provider", "labels_json", "parent_session_id", "parent_call_id",
                   "external_id", "host", "pid", "started_at", "ended_at", "status", "summary", "error_json",
                   "xml_tool_tags_json")
# A call's columns as readers get them: the writer's list (one list of the table's columns), less the raw payload.
CALL_COLUMNS = tuple(c for c in CALL_INSERT_COLUMNS if c not in ("raw", "raw_format"))


def loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def row_dict(columns: tuple[str, ...], row) -> dict:
    """A row as a dict, with `*_json` columns parsed and renamed without the suffix; a call's `counted_in` only
    when set (store/twins.py)."""
    out = {}
    for name, value in zip(columns, row, strict=True):
        if name == "counted_in" and value is None:
            continue
        if name.endswith("_json"):
            out[name[:-5]] = loads(value)
        else:
            out[name] = value
    return out


def filter_sql(flt: SessionFilter, alias: str = "s") -> tuple[str, list]:
    """WHERE clause (without the keyword) and parameters for a session filter.

    Model and dates match the session's own or any of its calls' (through `calls_started` and
    one pass over the calls' models), so a session that used two models or crossed midnight is
    found under each.
    """
    where, args = [], []
    for column in ("run", "agent", "status"):
        value = getattr(flt, column)
        if value is not None:
            where.append(f"{alias}.{column} = ?")
            args.append(value)
    if flt.model is not None:
        # EXISTS, not IN: the other filters (a run, a date label) leave few sessions, each probed through
        # calls' (session_id, idx) index, where IN would scan every call for the model.
        where.append(f"({alias}.model = ? OR EXISTS (SELECT 1 FROM calls c WHERE c.session_id = {alias}.id"
                     " AND c.model = ?))")
        args += [flt.model, flt.model]
    if flt.since or flt.until:
        span, span_args = span_sql(flt)
        where.append(f"(({span.replace('@', f'{alias}.started_at')}) OR {alias}.id IN"
                     f" (SELECT session_id FROM calls WHERE {span.replace('@', 'started_at')}))")
        args += span_args + span_args
    for key, value in flt.labels.items():
        where.append(f"{alias}.id IN (SELECT session_id FROM session_labels WHERE key = ? AND value = ?)")
        args += [key, value]
    if flt.parent is not None:
        where.append(f"{alias}.parent_session_id = ?")
        args.append(flt.parent)
    if flt.after is not None:
        where.append(f"({alias}.started_at, {alias}.id) < (?, ?)")
        args += list(flt.after)
    reviewed, reviewed_args = annotation.filter_sql(flt.scores, flt.has_note, alias)
    where += reviewed
    args += reviewed_args
    return (" AND ".join(where) or "1=1"), args


def span_sql(flt: SessionFilter) -> tuple[str, list]:
    """The filter's since/until as a condition on the instant column written `@`."""
    parts, args = [], []
    if flt.since:
        parts.append("@ >= ?")
        args.append(flt.since)
    if flt.until:
        parts.append("@ < ?")
        args.append(_exclusive_end(flt.until))
    return " AND ".join(parts), args


def _exclusive_end(until: str) -> str:
    # A bare date means the whole day: everything before the next one. ISO text sorts as time.
    if len(until) == 10:
        from datetime import date, timedelta

        return (date.fromisoformat(until) + timedelta(days=1)).isoformat()
    return until


def list_sessions(cur, flt: SessionFilter, ids: list[str] | None = None) -> list[dict]:
    """The filtered sessions, newest first; at most `flt.limit` (None: all). `count_sessions` says how many match.
    `ids`: only these sessions."""
    where, args = filter_sql(flt)
    if ids is not None:
        where += f" AND s.id IN ({', '.join('?' * len(ids))})"
        args = [*args, *ids]
    limit = f" LIMIT {int(flt.limit)}" if flt.limit is not None else ""
    rows = cur.execute(f"SELECT {', '.join('s.' + c for c in SESSION_COLUMNS)} FROM sessions s WHERE {where}"
                       f" ORDER BY s.started_at DESC, s.id DESC{limit}", args).fetchall()
    sessions = [row_dict(SESSION_COLUMNS, r) for r in rows]
    if sessions:
        _attach_list_totals(cur, sessions)
    return sessions


def _attach_list_totals(cur, sessions: list[dict]) -> None:
    """`_attach_totals` for a list: regular sessions read their kept sums (store/kept.py), the rest the ledger."""
    sums = kept.session_totals(cur, [s["id"] for s in sessions])
    regular = kept.regular_sessions(cur, [s["id"] for s in sessions if s["id"] not in sums])
    empty = {**accounting.totals(()), "last_call_at": None}
    for s in sessions:
        if s["id"] in sums or s["id"] in regular:
            t = sums.get(s["id"], empty)
            s.update(call_count=t["calls"], error_count=t["errors"], **{k: t[k] for k in accounting.TOKENS},
                     cost_usd=t["cost_usd"], calls_without_cost=t["calls_without_cost"],
                     last_call_at=t["last_call_at"])
    rest = [s for s in sessions if s["id"] not in sums and s["id"] not in regular]
    if rest:
        _attach_totals(cur, rest)


def count_sessions(cur, flt: SessionFilter) -> int:
    where, args = filter_sql(flt)
    return cur.execute(f"SELECT COUNT(*) FROM sessions s WHERE {where}", args).fetchone()[0]


def _attach_totals(cur, sessions: list[dict]) -> list[dict]:
    """Calls, errors, tokens and cost per session, by the one rule of `reasonlog.accounting`.

    Returns the sessions' ledger entries, for readers that group them further.
    """
    marks = ",".join("?" * len(sessions))
    entries = _ledger(cur, f"s.id IN ({marks})", [s["id"] for s in sessions])
    by_session: dict[str, list[dict]] = {}
    for e in entries:
        by_session.setdefault(e["session_id"], []).append(e)
    for s in sessions:
        mine = by_session.get(s["id"], [])
        t = accounting.totals(mine)
        s.update(call_count=t["calls"], error_count=t["errors"], **{k: t[k] for k in accounting.TOKENS},
                 cost_usd=t["cost_usd"], calls_without_cost=t["calls_without_cost"],
                 last_call_at=max((e["started_at"] for e in mine if e["kind"] == "call"), default=None))
    return entries


def _plain_totals(cur, session: dict) -> dict[str, dict] | None:
    """The session's totals (set on it) and its exchanges' (returned by exchange id), when no figure reported by an
    SDK replaces its calls' and no parent's covers them: then the accounting rule is plain sums of its calls,
    kept as they were written (store/kept.py) and summed by the database. None otherwise (the caller goes
    through the ledger). A page of a huge session uses this."""
    sid = session["id"]
    if session.get("parent_call_id") or cur.execute(
            "SELECT 1 FROM exchanges WHERE session_id = ? AND stats_json IS NOT NULL LIMIT 1", (sid,)).fetchone():
        return None
    t = kept.session_totals(cur, [sid]).get(sid) or {**accounting.totals(()), "last_call_at": None}
    session.update(call_count=t["calls"], error_count=t["errors"], **{k: t[k] for k in accounting.TOKENS},
                   cost_usd=t["cost_usd"], calls_without_cost=t["calls_without_cost"], last_call_at=t["last_call_at"])
    return kept.exchange_totals(cur, sid)


LEDGER_CALL_COLUMNS = ("id", "session_id", "exchange_id", "started_at", "model", "status", "latency_ms",
                       *accounting.TOKENS, "cost_usd", "cost_source")


# Where a session came from: the `source` label importers set (claude-code, codex, …), else "recorded".
SOURCE = usage_sql.SOURCE


def _ledger(cur, where: str, args: list) -> list[dict]:
    """Accounting entries of the sessions (alias `s`) that `where` selects."""
    columns = LEDGER_CALL_COLUMNS + ("run", "agent", "source")
    calls = [dict(zip(columns, r, strict=True)) for r in cur.execute(
        f"SELECT {', '.join('c.' + c for c in LEDGER_CALL_COLUMNS)}, s.run, s.agent, {SOURCE} FROM calls c"
        f" JOIN sessions s ON s.id = c.session_id WHERE ({where}) AND c.counted_in IS NULL"
        " ORDER BY c.started_at, c.id", args)]
    exchanges = [{"id": i, "session_id": sid, "started_at": at, "stats": loads(stats), "model": model, "run": run,
                  "agent": agent, "source": source} for i, sid, at, stats, model, run, agent, source in cur.execute(
        f"SELECT e.id, e.session_id, e.started_at, e.stats_json, s.model, s.run, s.agent, {SOURCE} FROM exchanges e"
        f" JOIN sessions s ON s.id = e.session_id WHERE {where} AND e.stats_json IS NOT NULL", args)]
    return accounting.ledger(calls, exchanges, _cover(cur, where, args))


def _cover(cur, where: str, args: list) -> dict[str, str]:
    """Sessions spawned inside an exchange whose reported figures include them (any depth).

    Only a session spawned from a call can be covered: when none of the sessions `where` selects was, there is
    nothing to look up (and a join of every spawned session with the calls is not run on each read)."""
    if cur.execute(f"SELECT 1 FROM sessions s WHERE ({where}) AND s.parent_call_id IS NOT NULL LIMIT 1",
                   args).fetchone() is None:
        return {}
    parents = cur.execute("SELECT s.id, c.session_id, c.exchange_id FROM sessions s"
                          " JOIN calls c ON c.id = s.parent_call_id").fetchall()
    if not parents:
        return {}
    reporting = {eid for eid, stats in cur.execute(
        "SELECT e.id, e.stats_json FROM exchanges e WHERE e.stats_json IS NOT NULL AND e.id IN"
        " (SELECT c.exchange_id FROM sessions s JOIN calls c ON c.id = s.parent_call_id)")
        if accounting.reported_cost(loads(stats)) is not None}
    return accounting.covering(parents, reporting)


def session_row(cur, session_id: str) -> dict:
    """One session as a list row (its totals, no timeline); NotFound when there is none."""
    found = list_sessions(cur, SessionFilter(limit=1), [session_id])
    if not found:
        raise NotFound(f"no session {session_id!r}")
    return found[0]


def get_session(cur, session_id: str, dicts: Dictionaries, page: tuple[int, int] | None = None) -> dict:
    """A whole session; with `page` (first, end), only the timeline entries whose idx is in [first, end) are
    read and returned (`message_count` counts them all), so a page of a huge session costs a page."""
    row = cur.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    session = row_dict(SESSION_COLUMNS, row)
    by_exchange = _plain_totals(cur, session) if page is not None else None
    entries = _attach_totals(cur, [session]) if by_exchange is None else []
    # A page needs every call's context (each is stored against the one before) but the whole row of only
    # the calls it shows: the others are read with the few columns the window facts need.
    first, end = page if page is not None else (0, 1 << 62)
    rows = cur.execute("SELECT m.idx, m.role, m.content_id, m.call_id, m.at, c.kind = 'system' FROM messages m"
                       " JOIN contents c ON c.id = m.content_id WHERE m.session_id = ? AND m.idx >= ? AND m.idx < ?"
                       " ORDER BY m.idx", (session_id, first, end)).fetchall()
    shown = [r[:5] for r in rows]
    if page is None:
        calls = [row_dict(CALL_COLUMNS, r) for r in cur.execute(
            f"SELECT {', '.join(CALL_COLUMNS)} FROM calls WHERE session_id = ? ORDER BY idx", (session_id,))]
    else:  # what a call's facts say depends on the calls before it only: none after the page is read
        upto = _last_shown_call(cur, {r[3] for r in shown if r[3] is not None})
        calls = [_lean(r) for r in cur.execute(f"SELECT {', '.join(LEAN_CALL_COLUMNS)} FROM calls WHERE session_id = ?"
                                               " AND idx <= ? ORDER BY idx", (session_id, upto))]
    per_call = _per_call(cur, session_id, None if page is None else _entries_end(cur, session_id, end, calls))
    if page is not None and (not calls or per_call.get(calls[-1]["id"], (0, -1))[1] < end) and (calls or first == 0):
        calls += _entryless_after(cur, session_id, calls[-1]["idx"] if calls else -1)
    reader = ContentReader(cur, dicts)
    reader.load(m[2] for m in shown)
    # A request's own system prompt is not a message of the conversation: it gets its own key, with the
    # timeline index where it took effect (a system *message* sent in the messages list stays a message).
    system_at = {r[0] for r in rows if r[5]}
    timeline = [{"idx": i, "role": role, "call_id": call, "at": at, "content": reader.get(cid)}
                for i, role, cid, call, at in shown]
    session["message_count"] = _message_count(cur, session_id) if page is not None \
        else sum(1 for r in rows if not r[5])
    session["messages"] = [m for m in timeline if m["idx"] not in system_at]
    session["system_prompts"] = [{k: m[k] for k in ("idx", "call_id", "at", "content")}
                                 for m in timeline if m["idx"] in system_at]
    _derive_window_facts(calls, per_call)
    anchored = None if page is None else _anchored(calls, per_call, {c for _, _, _, c, _ in shown}, first, end)
    _window_changes(calls, anchored)
    if anchored is not None:
        calls = _whole_rows(cur, [c for c in calls if c["id"] in anchored])
    for c in calls:  # the writer appends a call's reply after its inputs: the reply is its last message
        c["response_idx"] = per_call.get(c["id"], (0, None))[1] if c["response_id"] is not None else None
    for c in calls:
        for key in ("shape", "context", "tools", "system_id", "response_id"):
            del c[key]  # store-internal references; get_call() resolves them
    session["calls"] = calls
    session["exchanges"] = [row_dict(("id", "idx", "input_json", "result_json", "status", "stats_json", "started_at",
                                      "ended_at"), r) for r in cur.execute(
        "SELECT id, idx, input_json, result_json, status, stats_json, started_at, ended_at FROM exchanges"
        " WHERE session_id = ? ORDER BY idx", (session_id,))]
    for e in session["exchanges"]:  # what the exchange counts by the accounting rule
        e["totals"] = by_exchange.get(e["id"], accounting.totals(())) if by_exchange is not None else \
            accounting.totals(x for x in entries if x["exchange_id"] == e["id"])
    session["tool_results"] = [row_dict(("id", "tool_use_id", "name", "input_json", "content_json", "is_error",
                                         "duration_ms", "at", "message_idx"), r) for r in cur.execute(
        "SELECT id, tool_use_id, name, input_json, content_json, is_error, duration_ms, at, message_idx"
        " FROM tool_results WHERE session_id = ? ORDER BY message_idx, at, id", (session_id,))]
    for t in session["tool_results"]:
        t["is_error"] = bool(t["is_error"])
    session["outcomes"] = [row_dict(("id", "kind", "payload_json", "call_id", "at", "message_idx"), r)
                           for r in cur.execute("SELECT id, kind, payload_json, call_id, at, message_idx FROM outcomes"
                                                " WHERE session_id = ? ORDER BY message_idx, at, id", (session_id,))]
    session["annotations"] = [annotation.shown(r) for r in annotation.rows_of(cur, session_id)]
    return session


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
        " WHERE session_id = ? AND idx < ? GROUP BY call_id", (session_id, 1 << 62 if below is None else below))}


def _entries_end(cur, session_id: str, end: int, calls: list[dict]) -> int:
    """Where the timeline entries of `calls` (a session's first calls) end: the writer gives each call's entries
    after the previous call's, so they end at the first entry from `end` on that belongs to a later call. A page
    of a huge session then counts its calls' entries without reading the rest of the timeline."""
    mine = {c["id"] for c in calls}
    for idx, call in cur.execute("SELECT idx, call_id FROM messages WHERE session_id = ? AND idx >= ? ORDER BY idx",
                                 (session_id, end)):
        if call is not None and call not in mine:
            return idx
    return 1 << 62


def in_timeline(cur, session_ids: list[str], content_ids: list[int]) -> set[int]:
    """Which of these contents are entries of these sessions' timelines (a narrow read: no message is decoded)."""
    found: set[int] = set()
    sessions = ", ".join("?" * len(session_ids))
    for start in range(0, len(content_ids), 500):
        chunk = content_ids[start:start + 500]
        found.update(r[0] for r in cur.execute(
            f"SELECT DISTINCT content_id FROM messages WHERE session_id IN ({sessions})"
            f" AND content_id IN ({', '.join('?' * len(chunk))})", [*session_ids, *chunk]))
    return found


def count_messages(cur, session_ids: list[str]) -> dict[str, int]:
    """Timeline entries of these sessions whose role is not system (neither a system prompt nor a system
    message), by session: what the reasoning view calls a session's messages."""
    out = dict.fromkeys(session_ids, 0)
    for start in range(0, len(session_ids), 500):
        chunk = session_ids[start:start + 500]
        out.update(cur.execute("SELECT session_id, SUM(CASE WHEN role = 'system' THEN 0 ELSE 1 END) FROM messages"
                               f" WHERE session_id IN ({', '.join('?' * len(chunk))}) GROUP BY session_id", chunk))
    return {sid: int(n or 0) for sid, n in out.items()}


def _message_count(cur, session_id: str) -> int:
    """Timeline entries that are not system prompts (a system prompt's entry has role system and a system content)."""
    total, prompts = cur.execute(
        "SELECT COUNT(*), SUM(CASE WHEN m.role = 'system' AND EXISTS (SELECT 1 FROM contents c WHERE"
        " c.id = m.content_id AND c.kind = 'system') THEN 1 ELSE 0 END) FROM messages m WHERE m.session_id = ?",
        (session_id,)).fetchone()
    return total - (prompts or 0)


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
            c["window"] = {k: v for k, v in stored.items() if k not in ("map", "reply")} if stored is not None \
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


def get_call_row(cur, call_id: str) -> dict:
    row = cur.execute(f"SELECT {', '.join(CALL_COLUMNS)}, raw, raw_format FROM calls WHERE id = ?",
                      (call_id,)).fetchone()
    if row is None:
        raise NotFound(f"no call {call_id!r}")
    call = row_dict(CALL_COLUMNS, row[:-2])
    call["_raw"], call["raw_format"] = row[-2], row[-1]
    return call


def context_ids(cur, call: dict) -> list[int]:
    """The content ids of a call's context, decoded along the session's chain of calls."""
    ids: list[int] | None = None
    for (context_json,) in cur.execute("SELECT context_json FROM calls WHERE session_id = ? AND idx <= ? ORDER BY idx",
                                       (call["session_id"], call["idx"])):
        ids = decode_context(orjson.loads(context_json), ids)
    return ids or []


def window_slots(cur, call: dict) -> list | None:
    """The timeline entry each position of a call's context stands for (`[entry, item]` for one item of a
    reply made of items; held positions first for a chained request); None for a call written before
    migration 12."""
    slots: list | None = []
    reply: list = []
    for (window_json,) in cur.execute("SELECT window_json FROM calls WHERE session_id = ? AND idx <= ? ORDER BY idx",
                                      (call["session_id"], call["idx"])):
        window = loads(window_json)
        if window is None or slots is None:
            slots = None
            continue
        slots = decode_map(window["map"], slots + reply)
        reply = reply_slots(*window["reply"]) if window.get("reply") else []
    return None if slots is None else [list(s) if isinstance(s, tuple) else s for s in slots]


def get_call(cur, call_id: str, dicts: Dictionaries) -> dict:
    """A call with its full request rebuilt, its response and its raw payload."""
    call = get_call_row(cur, call_id)
    ids = context_ids(cur, call)
    call["window_slots"] = window_slots(cur, call) if call["window"] is not None else None
    reader = ContentReader(cur, dicts)
    reader.load([*ids, call["system_id"], call["response_id"], *(call["tools"] or ())])
    messages = [reader.get(i) for i in ids]
    system = reader.get(call["system_id"]) if call["system_id"] is not None else None
    tools = None if call["tools"] is None else [reader.get(i) for i in call["tools"]]
    has_system = call["system_id"] is not None
    call["request"] = join_request(call["params"], call["shape"], system, has_system, messages, tools)
    call["context_ids"] = ids
    call["response"] = reader.get(call["response_id"]) if call["response_id"] is not None else None
    raw = call.pop("_raw")
    call["raw"] = None if raw is None else read_raw(raw, call["raw_format"], call["response"])
    return call


def read_raw(blob: bytes, fmt: str, response: Any) -> Any:
    """A call's raw payload: parsed JSON with the response put back, or text."""
    data = unpack_raw(blob, fmt, None if response is None else canonical(response))
    if fmt in ("skeleton", "json"):
        return fill_skeleton(orjson.loads(data), response)
    return data.decode("utf-8", "replace")


def iter_call_rows(cur, flt: SessionFilter, only: str | None = None, only_args: list | None = None) -> Iterator[dict]:
    """Accounting entries of the filtered sessions (`reasonlog.accounting.ledger`), for statistics.

    Entries of kind `call` are calls, with their session's run and agent; entries of kind
    `reported` carry an exchange's SDK-reported figures. Dates filter on the entry's instant.
    `only`: a further condition on the sessions (alias `s`), with its parameters `only_args`.
    """
    where, args = filter_sql(replace(flt, since=None, until=None, limit=None))
    if only is not None:
        where, args = f"({where}) AND {only}", [*args, *(only_args or ())]
    until = _exclusive_end(flt.until) if flt.until else None
    for entry in _ledger(cur, where, args):
        if (not flt.since or entry["started_at"] >= flt.since) and (until is None or entry["started_at"] < until):
            yield entry


OUTCOME_COLUMNS = ("id", "session_id", "kind", "payload_json", "call_id", "at", "message_idx")


def list_outcomes(cur, flt: SessionFilter, kind: str | None, session_id: str | list[str] | None) -> list[dict]:
    """Outcomes of the filtered sessions (of one kind, of one session or of these sessions, if given), newest
    first; at most `flt.limit`."""
    where, args = filter_sql(flt)
    if kind is not None:
        where += " AND o.kind = ?"
        args.append(kind)
    if isinstance(session_id, list):  # by session first: the sessions are few where the kind may be everywhere
        where += f" AND o.session_id IN ({', '.join('?' * len(session_id))})" if session_id else " AND 1=0"
        args += session_id
    elif session_id is not None:
        where += " AND o.session_id = ?"
        args.append(session_id)
    limit = f" LIMIT {int(flt.limit)}" if flt.limit is not None else ""
    rows = cur.execute(f"SELECT {', '.join('o.' + c for c in OUTCOME_COLUMNS)} FROM outcomes o"
                       f" JOIN sessions s ON s.id = o.session_id WHERE {where} ORDER BY o.at DESC, o.id DESC{limit}",
                       args).fetchall()
    return [row_dict(OUTCOME_COLUMNS, r) for r in rows]
