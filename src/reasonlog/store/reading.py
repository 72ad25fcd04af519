"""Reading rows back as the wire's shapes (`wire/api.py`, built in store/answers.py) and the dicts the store's own
work reads. Dialect-neutral (`?` placeholders)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import orjson

from .. import accounting
from ..conversation import decode_map, reply_slots
from ..wire.api import MessageJSON, OutcomeJSON, SessionDetailJSON, SessionJSON, SessionTotalsJSON
from ..wire.codec import canonical
from ..wire.shapes import SessionFields
from . import annotation, answers, kept, usage_sql
from .answers import OUTCOME_COLUMNS, SESSION_COLUMNS, CallDetail, loads, row_dict
from .content import Dictionaries, decode_context, fill_skeleton, unpack_raw
from .rows import ContentReader, join_request
from .session_calls import ALL, CALL_COLUMNS, session_calls
from .terms import NotFound, SessionFilter

__all__ = ["CALL_COLUMNS", "OUTCOME_COLUMNS", "SESSION_COLUMNS", "ContentReader", "loads", "row_dict"]


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


def list_sessions(cur, flt: SessionFilter, ids: list[str] | None = None) -> list[SessionJSON]:
    """The filtered sessions, newest first; at most `flt.limit` (None: all). `count_sessions` says how many match.
    `ids`: only these sessions."""
    where, args = filter_sql(flt)
    if ids is not None:
        where += f" AND s.id IN ({', '.join('?' * len(ids))})"
        args = [*args, *ids]
    limit = f" LIMIT {int(flt.limit)}" if flt.limit is not None else ""
    rows = cur.execute(f"SELECT {', '.join('s.' + c for c in SESSION_COLUMNS)} FROM sessions s WHERE {where}"
                       f" ORDER BY s.started_at DESC, s.id DESC{limit}", args).fetchall()
    sessions = [answers.session_fields(r) for r in rows]
    totals = _list_totals(cur, sessions) if sessions else {}
    return [SessionJSON(**s, **totals[s["id"]]) for s in sessions]


def _list_totals(cur, sessions: list[SessionFields]) -> dict[str, SessionTotalsJSON]:
    """Each session's totals: regular sessions read their kept sums (store/kept.py), the rest the ledger."""
    sums = kept.session_totals(cur, [s["id"] for s in sessions])
    regular = kept.regular_sessions(cur, [s["id"] for s in sessions if s["id"] not in sums])
    empty = {**accounting.totals(()), "last_call_at": None}
    out = {sid: answers.session_totals(t, t["last_call_at"]) for sid, t in sums.items()}
    out |= {sid: answers.session_totals(empty, None) for sid in regular}
    rest = [s["id"] for s in sessions if s["id"] not in out]
    return out | (_ledger_totals(cur, rest)[0] if rest else {})


def count_sessions(cur, flt: SessionFilter) -> int:
    where, args = filter_sql(flt)
    return cur.execute(f"SELECT COUNT(*) FROM sessions s WHERE {where}", args).fetchone()[0]


def _ledger_totals(cur, session_ids: list[str]) -> tuple[dict[str, SessionTotalsJSON], list[dict]]:
    """Calls, errors, tokens and cost per session, by the one rule of `reasonlog.accounting`; and the sessions'
    ledger entries, for readers that group them further."""
    entries = _ledger(cur, f"s.id IN ({','.join('?' * len(session_ids))})", session_ids)
    by_session: dict[str, list[dict]] = {sid: [] for sid in session_ids}
    for e in entries:
        by_session.setdefault(e["session_id"], []).append(e)
    return {sid: answers.session_totals(accounting.totals(mine), max(
        (e["started_at"] for e in mine if e["kind"] == "call"), default=None)) for sid, mine in by_session.items()}, \
        entries


def _plain_totals(cur, session: SessionFields) -> tuple[SessionTotalsJSON, dict[str, dict]] | None:
    """The session's totals and its exchanges' (by exchange id), when no figure reported by an SDK replaces its
    calls' and no parent's covers them: then the accounting rule is plain sums of its calls, kept as they were
    written (store/kept.py) and summed by the database. None otherwise (the caller goes through the ledger).
    A page of a huge session uses this."""
    sid = session["id"]
    if session["parent_call_id"] or cur.execute(
            "SELECT 1 FROM exchanges WHERE session_id = ? AND stats_json IS NOT NULL LIMIT 1", (sid,)).fetchone():
        return None
    t = kept.session_totals(cur, [sid]).get(sid) or {**accounting.totals(()), "last_call_at": None}
    return answers.session_totals(t, t["last_call_at"]), kept.exchange_totals(cur, sid)


def _totals_of(cur, session: SessionFields, paged: bool) -> tuple[SessionTotalsJSON, Callable[[str], dict]]:
    """A session's totals, and what each of its exchanges counts by the accounting rule (by exchange id)."""
    plain = _plain_totals(cur, session) if paged else None
    if plain is not None:
        by_exchange = plain[1]
        return plain[0], lambda eid: by_exchange.get(eid, accounting.totals(()))
    totals, entries = _ledger_totals(cur, [session["id"]])
    return totals[session["id"]], lambda eid: accounting.totals(x for x in entries if x["exchange_id"] == eid)


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



def session_row(cur, session_id: str) -> SessionJSON:
    """One session as a list row (its totals, no timeline); NotFound when there is none."""
    found = list_sessions(cur, SessionFilter(limit=1), [session_id])
    if not found:
        raise NotFound(f"no session {session_id!r}")
    return found[0]


def get_session(cur, session_id: str, dicts: Dictionaries, page: tuple[int, int] | None = None) -> SessionDetailJSON:
    """A whole session; with `page` (first, end), only the timeline entries whose idx is in [first, end) are
    read and returned (`message_count` counts them all), so a page of a huge session costs a page."""
    row = cur.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    fields = answers.session_fields(row)
    totals, exchange_totals = _totals_of(cur, fields, page is not None)
    first, end = page if page is not None else (0, ALL)
    rows = cur.execute("SELECT m.idx, m.role, m.content_id, m.call_id, m.at, c.kind = 'system' FROM messages m"
                       " JOIN contents c ON c.id = m.content_id WHERE m.session_id = ? AND m.idx >= ? AND m.idx < ?"
                       " ORDER BY m.idx", (session_id, first, end)).fetchall()
    messages, prompts = _timeline(cur, dicts, rows)
    return SessionDetailJSON(
        **fields, **totals, message_count=_message_count(cur, session_id) if page is not None else len(messages),
        messages=messages, system_prompts=prompts, calls=session_calls(cur, session_id, rows, page),
        exchanges=_exchanges(cur, session_id, exchange_totals), tool_results=_tool_results(cur, session_id),
        outcomes=[row_dict(ANCHORED_OUTCOME, r) for r in cur.execute(f"SELECT {', '.join(ANCHORED_OUTCOME)} FROM"
                                                                     " outcomes WHERE session_id = ?"
                                                                     " ORDER BY message_idx, at, id", (session_id,))],
        annotations=[answers.annotation(r) for r in annotation.rows_of(cur, session_id)])


def _timeline(cur, dicts: Dictionaries, rows: list) -> tuple[list[MessageJSON], list[dict[str, Any]]]:
    """The timeline rows' messages, and the system prompts among them: a request's own system prompt is not a
    message of the conversation; it gets its own key, with the timeline index where it took effect (a system
    *message* sent in the messages list stays a message)."""
    reader = ContentReader(cur, dicts)
    reader.load(r[2] for r in rows)
    messages, prompts = [], []
    for idx, role, cid, call, at, is_prompt in rows:
        if is_prompt:
            prompts.append({"idx": idx, "call_id": call, "at": at, "content": reader.get(cid)})
        else:
            messages.append(answers.message(idx, role, call, at, reader.get(cid)))
    return messages, prompts


EXCHANGE_COLUMNS = ("id", "idx", "input_json", "result_json", "status", "stats_json", "started_at", "ended_at")
ANCHORED_OUTCOME = tuple(c for c in OUTCOME_COLUMNS if c != "session_id")  # an outcome as its session lists it
TOOL_RESULT_COLUMNS = ("id", "tool_use_id", "name", "input_json", "content_json", "is_error", "duration_ms", "at",
                       "message_idx")


def _exchanges(cur, session_id: str, totals: Callable[[str], dict]) -> list[dict[str, Any]]:
    """The session's exchanges, each with what it counts by the accounting rule."""
    return [{**e, "totals": totals(e["id"])} for e in (row_dict(EXCHANGE_COLUMNS, r) for r in cur.execute(
        f"SELECT {', '.join(EXCHANGE_COLUMNS)} FROM exchanges WHERE session_id = ? ORDER BY idx", (session_id,)))]


def _tool_results(cur, session_id: str) -> list[dict[str, Any]]:
    return [{**t, "is_error": bool(t["is_error"])} for t in (row_dict(TOOL_RESULT_COLUMNS, r) for r in cur.execute(
        f"SELECT {', '.join(TOOL_RESULT_COLUMNS)} FROM tool_results WHERE session_id = ? ORDER BY message_idx, at, id",
        (session_id,)))]


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


def get_call_row(cur, call_id: str) -> dict:
    row = cur.execute(f"SELECT {', '.join(CALL_COLUMNS)}, raw, raw_format FROM calls WHERE id = ?",
                      (call_id,)).fetchone()
    if row is None:
        raise NotFound(f"no call {call_id!r}")
    call = row_dict(CALL_COLUMNS, row[:-2])
    call["_raw"], call["raw_format"] = row[-2], row[-1]
    return call


def _decoded_chains(cur, session_id: str, wanted: set[int]) -> dict[int, tuple[list[int], list | None]]:
    """The content ids and timeline slots of the session's calls at the `wanted` positions, decoded along the
    session's chain of calls once: each call's context is stored as runs into the previous call's (its window as
    runs into the previous call's slots and reply), so a call is read from the session's first call on, and many
    calls of one session cost one pass, not one pass each. Slots are None for a call written before migration 12
    (or decoded along one)."""
    found: dict[int, tuple[list[int], list | None]] = {}
    ids: list[int] | None = None
    slots: list | None = []
    reply: list = []
    for idx, context_json, window_json in cur.execute(
            "SELECT idx, context_json, window_json FROM calls WHERE session_id = ? AND idx <= ? ORDER BY idx",
            (session_id, max(wanted))):
        ids = decode_context(orjson.loads(context_json), ids)
        window = loads(window_json)
        if window is None or slots is None:
            slots = None
        else:
            slots = decode_map(window["map"], slots + reply)
            reply = reply_slots(*window["reply"]) if window.get("reply") else []
        if idx in wanted:
            found[idx] = (ids, None if slots is None else [list(x) if isinstance(x, tuple) else x for x in slots])
    return found


def call_details(cur, call_ids: list[str], dicts: Dictionaries) -> list[CallDetail]:
    """Calls with their full requests rebuilt, their responses and raw payloads, in the order asked; the calls of
    one session decoded in one pass (`_decoded_chains`)."""
    calls = [get_call_row(cur, call_id) for call_id in call_ids]
    chains: dict[str, dict[int, tuple[list[int], list | None]]] = {}
    for session_id in dict.fromkeys(c["session_id"] for c in calls):
        wanted = {c["idx"] for c in calls if c["session_id"] == session_id}
        chains[session_id] = _decoded_chains(cur, session_id, wanted)
    return [_detail(cur, call, *chains[call["session_id"]][call["idx"]], dicts) for call in calls]


def get_call(cur, call_id: str, dicts: Dictionaries) -> CallDetail:
    """A call with its full request rebuilt, its response and its raw payload."""
    return call_details(cur, [call_id], dicts)[0]


def _detail(cur, call: dict, ids: list[int], slots: list | None, dicts: Dictionaries) -> CallDetail:
    """One call's answer; its contents read by a reader of its own, so that no two calls' requests share an
    object a caller might change."""
    reader = ContentReader(cur, dicts)
    reader.load([*ids, call["system_id"], call["response_id"], *(call["tools"] or ())])
    system = reader.get(call["system_id"]) if call["system_id"] is not None else None
    tools = None if call["tools"] is None else [reader.get(i) for i in call["tools"]]
    request = join_request(call["params"], call["shape"], system, call["system_id"] is not None,
                           [reader.get(i) for i in ids], tools)
    response = reader.get(call["response_id"]) if call["response_id"] is not None else None
    raw = None if call["_raw"] is None else read_raw(call["_raw"], call["raw_format"], response)
    return answers.call_detail(call, ids, request, response, raw, slots if call["window"] is not None else None)


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


def list_outcomes(cur, flt: SessionFilter, kind: str | None, session_id: str | list[str] | None) -> list[OutcomeJSON]:
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
    return [answers.outcome(r) for r in rows]
