"""Turning events into rows: the context encoding, the session timeline, cost and raw payloads.

Dialect-neutral: it speaks DB-API with `?` placeholders; contents go through `ContentWriter`,
whose backend supplies the statements that differ between dialects.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..accounting import TOKENS
from ..model import (
    CallRecorded,
    Event,
    ExchangeEnded,
    ExchangeStarted,
    FileImported,
    OutcomeRecorded,
    ReasoningRecorded,
    SessionEnded,
    SessionStarted,
    SessionTitled,
    ToolResultRecorded,
    check_event,
    format_instant,
)
from ..pricing import load_price_table
from ..wire import jsonable, refuse_non_finite
from ..wire.rules import RecordError
from . import imported, twins
from .content import (
    decode_context,
    encode_context,
    pack_raw,
    plain_json,
    raw_skeleton,
)
from .contents import ContentWriter
from .dbapi import insert_returning_rowids
from .kept import Tally
from .resent import Resent
from .rows import CALL_INSERT_COLUMNS, INSERT_CALL, ContentReader, Split, insert_calls, split_request
from .timeline import Thread, Timeline


# Keys under which a request carries its context, by protocol (see providers/). The first that holds a list wins.
@dataclass
class SessionState:
    """What the writer must remember of a session to encode its next call."""

    next_call: int = 0
    next_message: int = 0
    next_exchange: int = 0
    context: list[int] | None = None
    response: int | None = None
    system: int | None = None
    sent: list | None = None  # the last call's message objects, kept only for `stable_history` calls
    # The JSON of the last live call's messages as the caller's objects gave it (keys in their order), without its
    # closing `]`, and their signed content ids (`ContentWriter.signed_id`): see `Resent.message_ids`.
    history: bytes | None = None
    history_ids: list[int] | None = None
    # By kind ("system", "tool"): the JSON of the last call's system prompt (as a list of it; a string prompt as
    # itself) or tools, keys as given, and their signed content ids: see `Resent.same_ids`.
    held: dict[str, tuple[bytes | str, list[int]]] = field(default_factory=dict)
    thread: Thread | None = None  # what the next call is aligned with; read from the store when first needed
    origin: twins.Origin | None = None  # where the session came from, its external id; read when first needed


@dataclass
class Applier:
    """Applies events to an open transaction. One per store; not thread-safe."""

    contents: ContentWriter
    price_table: Any = None
    sessions: dict[str, SessionState] = field(default_factory=dict)
    rows: dict[str, list[tuple]] = field(default_factory=dict)  # statement -> rows waiting for one executemany
    # Sessions that completed in this batch: their held (on_failure) reasoning records are to be dropped, by
    # the store, which knows its search index (see search.drop_held_reasoning).
    completed: list[str] = field(default_factory=list)
    timeline: Timeline = field(init=False)
    tally: Tally = field(default_factory=Tally)  # the batch's calls, summed for usage_rollup
    # Rowids of the searchable records (tool results, outcomes, reasoning records) this batch inserted, by table:
    # the batch indexes exactly these (see `take_records`), never rows other transactions wrote meanwhile.
    records: dict[str, list[int]] = field(default_factory=dict)
    # (table, INSERT) -> rows of searchable records `queue_record` holds for the next `flush_rows`.
    pending_records: dict[tuple[str, str], list[tuple]] = field(default_factory=dict)
    # The billed calls with the provider message ids of the batch's calls (twins.billed_calls), read by `prepare`;
    # None: each call looks its own up (after a rollback, or outside a batch that was prepared).
    billed: dict | None = None
    # The agent session ids (`external_id`) more than one session holds, read by a bulk `prepare`; None: unknown.
    shared: set[str] | None = None
    # The (masked) ids of the sessions the batch starts that the store did not hold before it, read by a bulk
    # `prepare`: their state is known when their start is applied (nothing written yet), not read back.
    new: set[str] = field(default_factory=set)
    resent: Resent = field(init=False)  # what the sessions' last calls sent, as JSON, with its ids
    # JSON that `dumps` found holding no null and nothing to mask, as its text: a session sends the same parameters
    # (and often the same other columns) call after call, each then one lookup rather than a scan. A pure function
    # of the JSON for this store's redactor, so nothing rolled back can make an entry wrong.
    plain: dict[bytes, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timeline = Timeline(self.contents.redactor, self.contents.fresh)
        self.resent = Resent(self.contents, self.sessions)

    @property
    def redactor(self):
        return self.contents.redactor

    def dumps(self, value: Any) -> str | None:
        """A JSON text column, with secrets masked in its strings (never across its structure)."""
        if value is None:
            return None
        data = orjson.dumps(value, default=jsonable, option=orjson.OPT_NON_STR_KEYS)
        text = self.plain.get(data)
        return self._masked_json(data, value) if text is None else text

    def _masked_json(self, data: bytes, value: Any) -> str:
        """`dumps` of JSON not in `plain`: masked, and noted there when it is plain."""
        stored, plain = self._checked(data, value, "a value")
        text = stored.decode()
        if plain and len(data) <= PLAIN_BYTES:
            if len(self.plain) >= PLAIN_ENTRIES:
                self.plain.clear()
            self.plain[data] = text
        return text

    def _checked(self, data: bytes, value: Any, name: str) -> tuple[bytes, bool]:
        """The JSON `data` of `value` as it is stored, masked string by string (so it stays the same JSON), and whether
        it was plain: no secret and no `null`. NaN would be stored as null: a `null` walks `value` and refuses one
        (whether it is NaN is the value's, not the JSON's, so JSON with a null is never plain). One scan asks both."""
        held, null = self.redactor.scan(data)
        if null:
            refuse_non_finite(value, name)
        if held:
            return self.redactor.held_json(data, _dumps), False
        return data, not null

    def mask_text(self, text: str | None) -> str | None:
        return None if text is None else self.redactor.text(text)

    def ident(self, value: Any) -> Any:
        """An identifier or name column, secrets masked. A caller can paste a key into any of them.

        Masking is a pure function of the text (a secret becomes its kind and a keyed digest, see redact.py),
        so an id masks the same wherever it appears (a session's id and a call's `session_id`, a tool_use block
        and its result) and references still meet, while two ids holding different secrets stay two ids. The
        spill file masks the same text the same way, so a replayed batch stores the same ids.
        """
        return self.redactor.text(value) if type(value) is str else value

    def again(self, value: Any) -> Any:
        """`ident` of a value this event has already counted: a secret is counted once per field of an event,
        as the spill file counts it, not once per row or lookup that repeats it."""
        masked = self.redactor.masked
        value = self.ident(value)
        self.redactor.masked = masked
        return value

    def checkpoint(self):
        """A mark to return to with `rollback_to` when one event is rolled back to a savepoint."""
        return self.contents.checkpoint()

    def rollback_to(self, mark, session_id: str | None) -> None:
        """Forget what the rolled-back event taught: its contents and its session's state."""
        self.contents.rollback_to(mark)
        if session_id is not None:
            self.sessions.pop(session_id, None)
            self.completed[:] = [s for s in self.completed if s != self.again(session_id)]
        self.rows.clear()
        self.pending_records.clear()
        self.tally.clear()
        self.timeline.reset()
        self.billed = self.shared = None
        self.new.clear()

    def reset(self) -> None:
        """Forget cached ids and session states (after a rolled-back batch they may be wrong)."""
        self.sessions.clear()
        self.rows.clear()
        self.pending_records.clear()
        self.tally.clear()
        self.completed.clear()
        self.records.clear()
        self.contents.reset()
        self.timeline.reset()
        self.billed = self.shared = None
        self.new.clear()
        self.resent.held = 0

    def prepare(self, cur, events: list[Event], bulk: bool = False) -> None:
        """Read once what the batch's calls need of the database (the calls that may be the same as them).

        Which of its sessions share their agent's session id with another is read once too
        (`twins.shared_external_ids`): only their calls are looked for by position, which first writes what the
        batch queued. `bulk`: also store the batch's new contents in a few statements (`ContentWriter.prefetch`),
        instead of a round trip per content. The sessions the batch starts that the store does not hold are found
        in one query: their state is known (nothing written yet), not read back one query at a time."""
        calls = [e for e in events if isinstance(e, CallRecorded)]
        ids = [self.again(e.provider_message_id) for e in calls if isinstance(e.provider_message_id, str)]
        self.billed = twins.billed_calls(cur, ids)
        started = [(self.again(e.session_id), self.again(e.external_id)) for e in events
                   if isinstance(e, SessionStarted) and isinstance(e.session_id, str)
                   and isinstance(e.external_id, str)]
        self.shared = twins.shared_external_ids(cur, sorted({self.again(e.session_id) for e in calls
                                                              if isinstance(e.session_id, str)}), started)
        if bulk:
            for event in calls:
                check_event(event)  # as `apply` would first: a wrongly typed field is this event's data error
            self.contents.prefetch(cur, (item for event in calls for item in _contents_of(event)))
        self.new = _absent(cur, sorted({self.again(e.session_id) for e in events if isinstance(e, SessionStarted)
                                        and isinstance(e.session_id, str)}))

    def apply(self, cur, event: Event) -> None:
        check_event(event)  # a wrongly typed field is a data error of this event, not a store failure
        handler = getattr(self, "_apply_" + event.kind)
        handler(cur, event)

    def finish(self, cur) -> None:
        """Work deferred to the end of a batch; call before commit."""
        self.flush_rows(cur)
        self.contents.finish(cur)
        self.billed = self.shared = None  # read again for the next batch: other processes write between batches
        self.new.clear()

    def flush_rows(self, cur) -> None:
        """Insert the rows queued by `queue` and `queue_record`: one executemany per statement, not one per event."""
        for sql, rows in self.rows.items():
            if sql == INSERT_CALL:
                insert_calls(cur, rows)  # several rows a statement: see there
            elif rows:
                cur.executemany(sql, rows)
        self.rows.clear()
        self.tally.flush(cur)
        pending, self.pending_records = self.pending_records, {}
        for (table, sql), rows in pending.items():
            self.records.setdefault(table, []).extend(insert_returning_rowids(cur, sql, rows))

    def queue_record(self, table: str, sql: str, args: tuple) -> None:
        """`insert_record` at the next `flush_rows`, with the batch's other rows of `sql` (one round trip on
        PostgreSQL, where a row's own took most of an ingesting server's time)."""
        self.pending_records.setdefault((table, sql), []).append(args)

    def insert_record(self, cur, table: str, sql: str, args: tuple | list) -> None:
        """Run `sql`, an INSERT of one row into the searchable record table `table`, and note the row's rowid."""
        (rowid,), = cur.execute(sql + " RETURNING rowid", args).fetchall()  # all: SQLite finishes the statement
        self.records.setdefault(table, []).append(rowid)

    def take_records(self) -> dict[str, list[int]]:
        """The rowids `insert_record` noted since the last call, by table; forgotten here.

        A row of an event rolled back to its savepoint is gone (and on SQLite its rowid may be taken again by a
        later event of the batch): the index reads these rowids back, and what it finds is what the batch keeps."""
        taken, self.records = self.records, {}
        self.pending_records.clear()
        return taken

    def queue(self, sql: str, rows: list[tuple]) -> None:
        self.rows.setdefault(sql, []).extend(rows)

    def content_id(self, cur, value: Any, kind: str) -> int:
        return self.contents.id_of(cur, value, kind)

    # -------------------------------------------------------------- sessions

    def state(self, cur, session_id: str) -> SessionState:
        st = self.sessions.get(session_id)
        if st is None:
            st = self.sessions[session_id] = self._load_state(cur, self.again(session_id))
        return st

    def revalidate(self, cur, session_ids: list[str]) -> None:
        """Forget the state of each session another process has written to since this writer last did (its
        next call, message or exchange number is no longer the database's), so that it is read again.

        Without this a stale state still cannot store wrong rows (its numbers collide with the other
        process's, the batch fails as a data error and is written again from a fresh state), but every
        such batch would be written twice."""
        known = {self.again(s): s for s in session_ids if s in self.sessions}
        if not known:
            return
        found: dict[str, tuple] = {}
        ids = sorted(known)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            found.update((sid, tuple(numbers)) for sid, *numbers in cur.execute(
                "SELECT s.id, (SELECT COALESCE(MAX(idx) + 1, 0) FROM calls WHERE session_id = s.id),"
                " (SELECT COALESCE(MAX(idx) + 1, 0) FROM messages WHERE session_id = s.id),"
                " (SELECT COALESCE(MAX(idx) + 1, 0) FROM exchanges WHERE session_id = s.id)"
                f" FROM sessions s WHERE s.id IN ({', '.join('?' * len(chunk))})", chunk).fetchall())
        for sid, session_id in known.items():
            st = self.sessions[session_id]
            if found.get(sid, (0, 0, 0)) != (st.next_call, st.next_message, st.next_exchange):
                del self.sessions[session_id]

    def _load_state(self, cur, session_id: str) -> SessionState:
        self.flush_rows(cur)  # what this batch queued must be visible to the queries below
        if cur.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            # Its start was rejected or lost: an orphan would be invisible to every reader.
            raise RecordError(f"session_id: no session {session_id!r} in the store")
        st = SessionState()
        rows = cur.execute("SELECT idx, context_json, response_id, system_id FROM calls WHERE session_id = ? "
                           "ORDER BY idx", (session_id,)).fetchall()
        for idx, context_json, response_id, system_id in rows:
            st.context = decode_context(orjson.loads(context_json), st.context)
            st.response, st.system, st.next_call = response_id, system_id, idx + 1
        st.next_message = cur.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM messages WHERE session_id = ?",
                                      (session_id,)).fetchone()[0]
        st.next_exchange = cur.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM exchanges WHERE session_id = ?",
                                       (session_id,)).fetchone()[0]
        return st

    def _apply_session_started(self, cur, ev: SessionStarted) -> None:
        cur.execute(
            "INSERT INTO sessions (id, run, agent, model, provider, labels_json, parent_session_id, parent_call_id,"
            " external_id, host, pid, started_at, xml_tool_tags_json, live_token) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (id) DO UPDATE SET status = 'open', ended_at = NULL, live_token = excluded.live_token,"
            " xml_tool_tags_json = COALESCE(excluded.xml_tool_tags_json, sessions.xml_tool_tags_json)",
            (*map(self.ident, (ev.session_id, ev.run, ev.agent, ev.model, ev.provider)), self.dumps(ev.labels or {}),
             *map(self.ident, (ev.parent_session_id, ev.parent_call_id, ev.external_id, ev.host)), ev.pid,
             ev.started_at, self.dumps(ev.xml_tool_tags), self.ident(ev.live_token)))
        labels = [(self.again(str(k)), self.again(str(v)), self.again(ev.session_id))
                  for k, v in (ev.labels or {}).items()]
        cur.executemany("INSERT INTO session_labels (key, value, session_id) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                        labels)
        sid = self.again(ev.session_id)
        if sid in self.new:  # new to the store: what `_load_state`, `Timeline.load` and `origin_of` would read
            self.new.discard(sid)  # (a second start of it in the batch finds it stored)
            source = next((value for key, value, _ in labels if key == "source"), None)
            self.sessions[ev.session_id] = SessionState(thread=Thread(), origin=twins.Origin(
                source or twins.LIVE, self.again(ev.external_id)))

    def _apply_session_ended(self, cur, ev: SessionEnded) -> None:
        cur.execute("UPDATE sessions SET ended_at = ?, status = ?, summary = COALESCE(?, summary), error_json = ?"
                    " WHERE id = ?", (ev.ended_at, ev.status, self.mask_text(ev.summary), self.dumps(ev.error),
                                   self.ident(ev.session_id)))
        self.sessions.pop(ev.session_id, None)
        if ev.status == "failed":  # what on_failure records were held for: they are kept
            cur.execute("UPDATE reasoning_records SET state = 'kept' WHERE session_id = ? AND state = 'held'",
                        (self.again(ev.session_id),))
        elif ev.status == "completed":
            self.completed.append(self.again(ev.session_id))

    def _apply_session_titled(self, cur, ev: SessionTitled) -> None:
        session_id = self.ident(ev.session_id)
        row = cur.execute("SELECT labels_json FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise RecordError(f"session_id: no session {ev.session_id!r} in the store")
        title = self.mask_text(ev.title)
        cur.execute("UPDATE sessions SET labels_json = ? WHERE id = ?",
                    (self.dumps({**(orjson.loads(row[0]) if row[0] else {}), "title": title}), session_id))
        cur.execute("DELETE FROM session_labels WHERE session_id = ? AND key = 'title'", (session_id,))
        cur.execute("INSERT INTO session_labels (key, value, session_id) VALUES ('title', ?, ?)", (title, session_id))

    def _apply_exchange_started(self, cur, ev: ExchangeStarted) -> None:
        st = self.state(cur, ev.session_id)
        self.queue(_INSERT_EXCHANGE, [(self.ident(ev.exchange_id), self.ident(ev.session_id), st.next_exchange,
                                       self.dumps(ev.input), ev.started_at)])
        st.next_exchange += 1

    def _apply_exchange_ended(self, cur, ev: ExchangeEnded) -> None:
        self.rows.setdefault(_INSERT_EXCHANGE, [])  # flushed first: an exchange is inserted before it is ended
        self.queue(_END_EXCHANGE, [(ev.ended_at, self.dumps(ev.result), self.ident(ev.status), self.dumps(ev.stats),
                                    self.ident(ev.exchange_id))])

    # -------------------------------------------------------------- calls

    def _apply_call(self, cur, ev: CallRecorded) -> None:
        ev.started_at = format_instant(ev.started_at)  # a bad instant rejects this event alone
        st = self.state(cur, ev.session_id)
        if st.next_call == 0 and ev.model:  # a session opened without a model shows its first call's
            cur.execute("UPDATE sessions SET model = ? WHERE id = ? AND model IS NULL",
                        (self.again(ev.model), self.again(ev.session_id)))  # counted with the call
        split = split_request(ev.request)
        if ev.stable_history:  # an importer's: the same objects are the same messages
            known = _resent(st, split.messages)
            ids = (st.context or [])[:known] + [self.contents.id_of(cur, m, "message")
                                                for m in split.messages[known:]]
            st.history = st.history_ids = None
        else:
            known, ids = self.resent.message_ids(cur, st, split.messages)
        system_id = self.resent.same_ids(cur, st, [split.system], "system")[0] if split.has_system else None
        tool_ids = None if split.tools is None else self.resent.same_ids(cur, st, split.tools, "tool")
        response_id = None if ev.response is None else self.content_id(cur, ev.response, "message")

        timeline: list[tuple[str | None, int]] = []
        if system_id is not None and system_id != st.system and split.system:
            timeline.append(("system", system_id))
        window = self._align(cur, ev, st, split, ids, known, response_id, timeline)
        session_id, call_id = self.ident(ev.session_id), self.ident(ev.call_id)
        self.queue(_INSERT_MESSAGE, [(session_id, st.next_message + i, role, cid, call_id, ev.started_at)
                                     for i, (role, cid) in enumerate(timeline)])
        st.next_message += len(timeline)

        context = ([[0, known]] if known >= 2 else ids[:known]) + ids[known:] if known and ev.stable_history else \
            encode_context(ids, st.context)
        tokens = _TOKENS_OF(ev.usage) if ev.usage else _NO_TOKENS
        row = self._call_row(ev, st, split, ids, system_id, tool_ids, response_id, context, window, call_id,
                             session_id, tokens)
        if st.origin is None:
            st.origin = twins.origin_of(cur, row["session_id"])
        if row["provider_message_id"] is not None or st.origin.external_id is not None:  # by another path too?
            twins.count_once(cur, row, st.origin, self.billed, lambda: self.flush_rows(cur), self.shared)
        self.queue(INSERT_CALL, [_CALL_VALUES(row)])
        if row["counted_in"] is None:  # (its tokens then as the event gave them: only a copy's are zeroed)
            self.tally.add(row["session_id"], ev.started_at, row["model"], ev.status, ev.latency_ms, tokens,
                           row["cost_usd"])
        st.next_call += 1
        st.context, st.response = ids, response_id
        st.sent = split.messages if ev.stable_history else None
        if system_id is not None:
            st.system = system_id

    def _align(self, cur, ev: CallRecorded, st: SessionState, split: Split, ids: list[int], known: int,
               response_id: int | None, timeline: list[tuple[str | None, int]]) -> str:
        """Add the call's new messages and its reply to `timeline`; the call's window as JSON."""
        if st.thread is None:
            st.thread = self.timeline.load(cur, self.again(ev.session_id), ContentReader(cur, self.contents.dicts))
        th = st.thread
        self.timeline.reader = lambda: ContentReader(cur, self.contents.dicts)  # for a key no longer in memory
        chain = split.params.get("previous_response_id")
        chained = isinstance(chain, str) and chain == th.reply_ref
        entries, w, _, stored = self.timeline.extend(th, ids, split.messages, known, chained,
                                                     st.next_message + len(timeline))
        timeline += entries
        reply = st.next_message + len(timeline)
        if response_id is not None:
            timeline.append(("assistant", response_id))
        items = self.timeline.set_reply(th, ev.response, response_id, reply, ev.provider_message_id)
        window = w.stored(stored, [reply, items] if response_id is not None else None)
        if chained:
            window["chain"] = self.again(chain)
        return orjson.dumps(window).decode()

    def _call_row(self, ev: CallRecorded, st: SessionState, split: Split, ids, system_id, tool_ids,
                  response_id, context: list, window: str, call_id: str, session_id: str,
                  tokens: tuple) -> dict[str, Any]:
        """The call's row by column name (`CALL_INSERT_COLUMNS` orders it for the INSERT). `call_id`, `session_id`:
        the event's, masked (`ident`) and counted already; `tokens`: its usage's TOKENS."""
        cost_usd, cost_source = self._cost(ev)
        raw, raw_format = self._raw(ev)
        text = self.redactor.text  # `ident` of each, inlined: a call's row names eight
        exchange_id, provider, model, stop_reason, message_id, request_id = [
            text(v) if type(v) is str else v
            for v in (ev.exchange_id, ev.provider, ev.model, ev.stop_reason, ev.provider_message_id, ev.request_id)]
        row = {"id": call_id, "session_id": session_id, "idx": st.next_call,
               "exchange_id": exchange_id, "provider": provider, "model": model,
               "started_at": ev.started_at, "latency_ms": ev.latency_ms, "ttft_ms": ev.ttft_ms, "status": ev.status,
               "stop_reason": stop_reason, "error_json": self.dumps(ev.error),
               "cost_usd": cost_usd, "cost_source": cost_source,
               "provider_message_id": message_id, "request_id": request_id,
               "params_json": self.dumps(split.params), "shape_json": _ours(split.shape), "system_id": system_id,
               "tools_json": _ours(tool_ids), "context_json": _ours(context), "context_len": len(ids),
               "response_id": response_id, "raw": raw, "raw_format": raw_format,
               "context_facts_json": self.dumps(ev.context_facts), "window_json": window,
               "replay_of": self.again(ev.replay_of) if ev.replay_of is not None else None, "counted_in": None}
        row.update(zip(TOKENS, tokens, strict=True))
        return row

    def _cost(self, ev: CallRecorded) -> tuple[float | None, str | None]:
        if ev.cost_usd is not None:
            return ev.cost_usd, "reported"
        if ev.usage is None:
            return None, None
        return (self.price_table or load_price_table()).priced(ev.model or "", ev.usage)  # loads on its first use

    def _raw(self, ev: CallRecorded) -> tuple[bytes | None, str | None]:
        """The raw payload, without the response message it repeats (see `raw_skeleton`)."""
        if ev.raw is None:
            return None, None
        if isinstance(ev.raw, (bytes, str)):  # bytes as they came: masked as text
            data = ev.raw.encode() if isinstance(ev.raw, str) else bytes(ev.raw)
            return pack_raw(self.redactor.bytes(data)), "bytes"
        skeleton = raw_skeleton(plain_json(ev.raw), plain_json(ev.response))
        data = orjson.dumps(skeleton, default=jsonable, option=orjson.OPT_NON_STR_KEYS)
        return pack_raw(self._checked(data, skeleton, "raw")[0]), "skeleton"

    # -------------------------------------------------------------- tools and outcomes

    def _apply_tool_result(self, cur, ev: ToolResultRecorded) -> None:
        st = self.state(cur, ev.session_id)
        self.queue_record("tool_results",
                          "INSERT INTO tool_results (id, session_id, tool_use_id, name, input_json, content_json,"
                          " is_error, duration_ms, at, message_idx) VALUES (?,?,?,?,?,?,?,?,?,?)",
                          (*map(self.ident, (ev.tool_result_id, ev.session_id, ev.tool_use_id, ev.name)),
                           self.dumps(ev.input), self.dumps(ev.content),
                           int(bool(ev.is_error)), ev.duration_ms, ev.at, st.next_message))

    def _apply_outcome(self, cur, ev: OutcomeRecorded) -> None:
        st = self.state(cur, ev.session_id)
        self.queue_record("outcomes", "INSERT INTO outcomes (id, session_id, kind, payload_json, call_id, at,"
                          " message_idx) VALUES (?,?,?,?,?,?,?)",
                          (*map(self.ident, (ev.outcome_id, ev.session_id, ev.outcome_kind)), self.dumps(ev.payload),
                           self.ident(ev.call_id), ev.at, st.next_message))


    def _apply_reasoning(self, cur, ev: ReasoningRecorded) -> None:
        self.state(cur, ev.session_id)  # the session must exist
        details = self.mask_text(ev.details)
        self.insert_record(
            cur, "reasoning_records",
            "INSERT INTO reasoning_records (id, session_id, agent, group_name, phase, state, compact_json, details,"
            " artifact_path, details_tokens, compact_tokens, tokenizer, redacted, confidence, references_json, at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*map(self.ident, (ev.record_id, ev.session_id, ev.agent, ev.group, ev.phase)), ev.state,
             self.dumps(ev.compact), details, self.ident(ev.artifact_path), ev.details_tokens, ev.compact_tokens,
             self.ident(ev.tokenizer),
             int(ev.redacted or details != ev.details), self.ident(ev.confidence), self.dumps(ev.references), ev.at))

    def _apply_file_imported(self, cur, ev: FileImported) -> None:
        """The file's `import_files` row, its importer state and session ids masked as its events were."""
        imported.save_file(cur, {**ev.row(), "state": self.redactor.value(ev.state),
                                 "sessions": [self.again(s) for s in ev.sessions]})


def _absent(cur, session_ids: list[str]) -> set[str]:
    """Which of these session ids the store does not hold."""
    held: set[str] = set()
    for start in range(0, len(session_ids), 500):
        chunk = session_ids[start:start + 500]
        held.update(r[0] for r in cur.execute(f"SELECT id FROM sessions WHERE id IN ({', '.join('?' * len(chunk))})",
                                              chunk).fetchall())
    return set(session_ids) - held


def _contents_of(ev: CallRecorded):
    """(value, kind) of each content of a call, in the order `_apply_call` asks `id_of` for them."""
    split = split_request(ev.request)
    yield from ((m, "message") for m in split.messages)
    if split.has_system:
        yield split.system, "system"
    yield from ((t, "tool") for t in split.tools or ())
    if ev.response is not None:
        yield ev.response, "message"


def _resent(st: SessionState, messages: list) -> int:
    """How many of `messages` are, object for object, the messages the session's last call sent."""
    sent = st.sent
    if sent is None or st.context is None or len(sent) != len(st.context) or len(messages) < len(sent):
        return 0
    return len(sent) if all(map(operator.is_, sent, messages)) else 0


def _ours(value: Any) -> str | None:
    """JSON of what reasonlog itself made (ids, key names): nothing recorded, so nothing to mask."""
    return None if value is None else orjson.dumps(value).decode()


def _dumps(value: Any) -> bytes:
    """JSON of a decoded (plain) value, as `Applier.dumps` writes it."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


PLAIN_BYTES = 1024  # `Applier.plain` keeps JSON this long at most,
PLAIN_ENTRIES = 1024  # and this many (about 2 MB at most, with their text); past that it starts again
_INSERT_EXCHANGE = "INSERT INTO exchanges (id, session_id, idx, input_json, started_at) VALUES (?,?,?,?,?)"
_END_EXCHANGE = "UPDATE exchanges SET ended_at = ?, result_json = ?, status = ?, stats_json = ? WHERE id = ?"
_INSERT_MESSAGE = "INSERT INTO messages (session_id, idx, role, content_id, call_id, at) VALUES (?,?,?,?,?,?)"
_CALL_VALUES = operator.itemgetter(*CALL_INSERT_COLUMNS)  # a call's row (a dict) as the INSERT's values
_TOKENS_OF = operator.attrgetter(*TOKENS)  # a Usage's counters, in TOKENS' order
_NO_TOKENS = (None,) * len(TOKENS)
