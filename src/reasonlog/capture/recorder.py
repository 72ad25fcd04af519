"""The Recorder: what an agent calls to record sessions, exchanges, calls, tool results and outcomes.

Cheap on the agent's thread: each method checks its arguments, builds one event holding
references to what it was given, and queues it. Serialising, hashing and SQL happen on the
writer thread, so objects handed to the recorder must not be mutated afterwards (the message
lists themselves are copied; copy a message dict before editing it in place).
"""
from __future__ import annotations

import atexit
import contextvars
import logging
import os
import socket
import time
import weakref
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import (
    STATUSES,
    CallRecorded,
    Event,
    ExchangeEnded,
    ExchangeStarted,
    OutcomeRecorded,
    SessionEnded,
    SessionStarted,
    ToolResultRecorded,
    Usage,
    format_instant,
    new_id,
    utc_now,
)
from ..wire.rules import RecordError, is_amount
from .arguments import build_request, error_of, response_message, snapshot, unwrap_response, usage_of
from .opening import open_sink, redactor_of
from .storable import check_storable
from .writer import BackgroundWriter, SyncWriter

if TYPE_CHECKING:
    from ..store import StoreOptions
    from .sinks import Sink

log = logging.getLogger("reasonlog")
_current: contextvars.ContextVar["SessionRecorder | None"] = contextvars.ContextVar("reasonlog_session", default=None)
_HOST = socket.gethostname()


def current_session() -> "SessionRecorder | None":
    """The session opened by the innermost `with recorder.session(...)` in this context, if any."""
    return _current.get()


def _instant(value: Any, field: str) -> str:
    try:
        text = format_instant(value)
    except (ValueError, RecordError, OverflowError, OSError):
        raise RecordError(f"{field}: expected a datetime, epoch seconds or ISO-8601 text, got {value!r:.80}") from None
    if text is None:
        raise RecordError(f"{field}: expected a datetime, epoch seconds or ISO-8601 text, got None")
    return text


class Recorder:
    """Records agent sessions into a reasonlog database.

    `db`: a path or `sqlite:///` URL, or the `https://` (`http://`) URL of `reasonlog serve`; default `$REASONLOG_URL`,
    else `$REASONLOG_DB`, else a per-user data file. `api_key`: the server's key (default `$REASONLOG_API_KEY`).
    `writer`: "background" (default; batches on a thread) or "sync" (durable when each call returns).
    `strict`: raise bad input at the call site instead of counting and logging it as rejected.
    `redact`: mask API keys, tokens and private keys before anything is written (default True);
    False turns it off, a list or dict of regexes adds the user's own patterns.
    `store_options`: passed to `open_store` (`busy_timeout_ms`: how long a write waits for another
    connection's lock, SQLite's busy timeout or PostgreSQL's lock_timeout; tests use it to provoke faults).
    """

    def __init__(self, db: str | os.PathLike | None = None, *, writer: str = "background", strict: bool = False,
                 max_queue: int = 100_000, batch_size: int = 2_000, flush_interval: float = 0.2,
                 on_full: str = "block", price_table: Any = None, redact: bool | list | dict = True,
                 store_options: StoreOptions | None = None, sink: Sink | None = None,
                 api_key: str | None = None):
        from ..store import StoreError, database_target

        target = os.fspath(db) if db is not None else os.environ.get("REASONLOG_URL")
        self.url = target if isinstance(target, str) and target.startswith(("http://", "https://")) else None
        try:
            # A server records into its own database; this recorder keeps no file of its own for it.
            # Nor does a recorder given only a sink: it opens no database, and holds no lock beside one.
            self.db_path = "" if self.url or (sink is not None and db is None) else str(database_target(db))
        except StoreError as exc:  # a URL it cannot write: said at once, never taken for a file name
            raise ValueError(str(exc)) from None
        self.strict = strict
        self._redact = redactor_of(redact)
        if sink is None:
            sink = open_sink(self.url or self.db_path, redact=redact, api_key=api_key, price_table=price_table,
                             store_options=store_options)
        if writer == "background":
            self._writer: BackgroundWriter | SyncWriter = BackgroundWriter(
                sink, max_queue=max_queue, batch_size=batch_size, interval=flush_interval, on_full=on_full,
                redactor=self._redact)
        elif writer == "sync":
            self._writer = SyncWriter(sink, redactor=self._redact)
        else:
            raise ValueError(f"writer: expected 'background' or 'sync', got {writer!r}")
        self._sessions: dict[str, SessionRecorder] = {}
        self._closed = False
        ref = weakref.ref(self)
        atexit.register(lambda: (r := ref()) and r.close(timeout=5.0))  # what is not written in time spills

        # A forked child must not end the parent's open sessions when it closes or exits.
        def forget_sessions() -> None:
            if (r := ref()) is not None:
                r._sessions.clear()

        os.register_at_fork(after_in_child=forget_sessions)

    # ------------------------------------------------------------------ sessions

    def session(self, *, agent: str | None = None, run: str | None = None, model: str | None = None,
                provider: str | None = None, labels: dict | None = None, id: str | None = None,
                external_id: str | None = None, parent: "SessionRecorder | str | None" = None,
                parent_call: str | None = None, started_at: Any = None,
                xml_tools: list[str] | None = None, on_close: str = "interrupted") -> "SessionRecorder":
        """Start a session; use it as a context manager, or call `end()` yourself.

        `parent`/`parent_call` link a sub-agent's session to the session and call that spawned it.
        `xml_tools` names tags the model writes in its text to call tools (`<semantic_search>`).
        `on_close`: the status the session ends with if the recorder closes while it is open
        ("interrupted"; automatic sessions of instrumented clients use "completed").
        """
        sid = id if isinstance(id, str) and id else new_id()
        try:
            event = _session_event(sid, agent, run, model, provider, labels, id, external_id, parent, parent_call,
                                   started_at, xml_tools, on_close)
        except RecordError as exc:
            self.reject(exc)
            event = None
        session = SessionRecorder(self, sid, model if event else None, provider if event else None)
        session.agent = agent if isinstance(agent, str) else None
        if event is None:  # its records are rejected too: stored alone, they would be orphans no reader shows
            session.refuse(f"session {sid} was rejected")
            return session
        session.on_close = on_close
        self._emit(event)
        self._sessions[sid] = session
        return session

    # ------------------------------------------------------------------ plumbing

    def _emit(self, event: Event) -> None:
        if self.strict:  # what the writer thread would reject is raised here, where it was given
            check_storable(event)
        if self._closed:
            self._writer.count("dropped")
            return
        if type(event) is SessionStarted:  # liveness: the session is open while this process holds the lock
            event.live_token = _live_token(self.db_path) if self.db_path else None
        self._writer.submit(event)

    def reject(self, exc: Exception) -> None:
        """Count and log bad input (or raise it, in strict mode); adapters call this for what they cannot record."""
        if self.strict:
            raise exc
        self._writer.count("rejected")
        message = str(exc)
        log.warning("reasonlog rejected a record: %s", self._redact.text(message) if self._redact else message)

    def count_dropped(self, n: int, why: str) -> None:
        """Count `n` records that were lost before they reached this recorder (a proxy that had to exit before
        recording what it forwarded), so that `db status` says so, and log why."""
        if n:
            self._writer.count("dropped", n)
            log.warning("reasonlog dropped %d records: %s", n, why)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything recorded so far is in the database (or spilled); by default as long as it takes."""
        return self._writer.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """End sessions left open (as interrupted), flush and stop the writer. Safe to call twice.

        With a `timeout`, what is not written by then is spilled (and replayed by the next writer).
        """
        if self._closed:
            return True
        for session in list(self._sessions.values()):
            session.end(status=session.on_close)
        self._closed = True
        return self._writer.close(timeout)

    def stats(self) -> dict:
        """Counts of submitted, written, dropped, rejected (at the call site or by the store), spilled and set-aside
        records; the queue's bound and batch size, and `oldest_unwritten_s`: what a SIGKILL now would lose."""
        return self._writer.stats()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SessionRecorder:
    """One agent's conversation. Everything recorded through it lands in this session, in order."""

    def __init__(self, recorder: Recorder, session_id: str, model: str | None, provider: str | None):
        self.recorder = recorder
        self.id = session_id
        self.model, self.provider = model, provider
        self.agent: str | None = None
        self.exchange_id: str | None = None
        self.ended = False
        self.on_close = "interrupted"
        self._token: contextvars.Token | None = None
        self._refused: str | None = None

    def refuse(self, reason: str) -> None:
        """Reject every later record of this session (its start was rejected), naming `reason`."""
        self._refused = reason

    def _reject_refused(self, what: str) -> None:
        self.recorder.reject(RecordError(f"{self._refused}; its {what} is rejected too"))

    def __enter__(self) -> "SessionRecorder":
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        if self.exchange_id is not None:
            self._end_exchange(None, "failed" if exc else "completed", None)
        if not self.ended:
            self.end(status="failed" if exc else "completed", error=exc)

    # ------------------------------------------------------------------ calls

    def call(self, *, messages: list | None = None, system: Any = None, tools: list | None = None,
             params: dict | None = None, request: dict | None = None, response: Any = None,
             model: str | None = None, provider: str | None = None, stop_reason: str | None = None,
             usage: Usage | dict | None = None, cost_usd: float | None = None, latency_ms: float | None = None,
             ttft_ms: float | None = None, started_at: Any = None, provider_message_id: str | None = None,
             request_id: str | None = None, raw: Any = None, error: Any = None, partial: bool = False,
             context_facts: dict | None = None, id: str | None = None) -> str | None:
        """Record one model call: the context it sent and what came back. Returns the call id.

        A measurement that is not a finite, non-negative number (`latency_ms`, `ttft_ms`,
        `cost_usd`) is dropped and counted as a rejection; the call is kept.
        """
        if self._refused:
            self._reject_refused("call")
            return None
        try:
            event = self._call_event(
                messages=messages, system=system, tools=tools, params=params, request=request, response=response,
                model=model, provider=provider, stop_reason=stop_reason, usage=usage, cost_usd=cost_usd,
                latency_ms=latency_ms, ttft_ms=ttft_ms, started_at=started_at,
                provider_message_id=provider_message_id, request_id=request_id, raw=raw, error=error,
                partial=partial, context_facts=context_facts, call_id=id)
        except (RecordError, TypeError) as exc:
            self.recorder.reject(exc if isinstance(exc, RecordError) else RecordError(str(exc)))
            return None
        self.recorder._emit(event)
        return event.call_id

    def _call_event(self, *, messages, system, tools, params, request, response, model, provider, stop_reason,
                    usage, cost_usd, latency_ms, ttft_ms, started_at, provider_message_id, request_id, raw, error,
                    partial, context_facts, call_id) -> CallRecorded:
        t = _TEXT  # one chained test for the common case: it runs on the agent's thread for every call
        if not (type(model) in t and type(provider) in t and type(stop_reason) in t and type(call_id) in t
                and type(provider_message_id) in t and type(request_id) in t and type(partial) is bool
                and (context_facts is None or type(context_facts) is dict)):
            _check_call_fields(model, provider, stop_reason, provider_message_id, request_id, call_id, partial,
                               context_facts)
        if call_id is not None and not call_id.isascii():  # the caller keeps this id: it must be storable
            _check_storable(id=call_id)
        if request is None:
            model = model or self.model
            request = build_request(model, messages, system, tools, params)
        elif type(request) is not dict:
            raise RecordError(f"request: expected a dict, got {type(request).__name__}")
        else:
            request = snapshot(request)
            sent = request.get("model")  # what the body asked for is the call's model, unless told otherwise
            model = model or (sent if type(sent) is str else None) or self.model
        if latency_ms is not None or ttft_ms is not None or cost_usd is not None:
            latency_ms, ttft_ms, cost_usd = (self._amount("latency_ms", latency_ms),
                                             self._amount("ttft_ms", ttft_ms), self._amount("cost_usd", cost_usd))
        if type(response) is dict and ("usage" in response or "choices" in response or "candidates" in response):
            unwrapped = unwrap_response(response)
            if unwrapped is not None:  # a whole provider response: its parts go where they belong
                raw = response if raw is None else raw
                response, found_usage, found_stop, found_id = unwrapped
                usage = found_usage if usage is None else usage
                stop_reason, provider_message_id = stop_reason or found_stop, provider_message_id or found_id
        if usage is not None and type(usage) is not Usage:
            usage = usage_of(usage)
        started_at = self._started_at(started_at, latency_ms)
        status = "error" if error is not None else "partial" if partial else "ok"
        return CallRecorded(call_id or new_id(), self.id, self.exchange_id, started_at, request,
                            response_message(response), model, provider or self.provider, stop_reason, usage,
                            cost_usd, latency_ms, ttft_ms, provider_message_id, request_id, raw, error_of(error),
                            status, context_facts)

    def _amount(self, name: str, value: Any) -> Any:
        """`value` if it is a measurement the store can hold; else drop it and count the rejection."""
        if is_amount(value):
            return value
        self.recorder.reject(RecordError(f"{name}: expected a non-negative number, got {value!r}; dropped"))
        return None

    def _started_at(self, value: Any, latency_ms: Any) -> Any:
        if value is None:
            return time.time() - (latency_ms / 1000 if latency_ms else 0)  # formatted on the writer thread
        if self.recorder.strict:
            return _instant(value, "started_at")
        if type(value) not in _INSTANT_TYPES:  # the writer parses it; a value out of range rejects the call there
            raise RecordError(f"started_at: expected a datetime, epoch seconds or ISO-8601 text, "
                              f"got {type(value).__name__}")
        return value

    # ------------------------------------------------------------------ the rest

    def tool_result(self, tool_use_id: str | None, content: Any, *, name: str | None = None, input: Any = None,
                    is_error: bool | None = False, duration_ms: float | None = None, at: Any = None) -> None:
        """Record what a tool returned for the tool call `tool_use_id`."""
        if self._refused:
            return self._reject_refused("tool result")
        try:
            duration_ms = self._amount("duration_ms", duration_ms)  # first, so a dropped duration is always counted
            _check_texts(tool_use_id=tool_use_id, name=name)
            if is_error is not None and type(is_error) is not bool:
                raise RecordError(f"is_error: expected a bool, got {type(is_error).__name__}")
            event = ToolResultRecorded(new_id(), self.id, _instant(at, "at") if at else utc_now(), tool_use_id,
                                       content, name, input, bool(is_error), duration_ms)
        except RecordError as exc:
            return self.recorder.reject(exc)
        self.recorder._emit(event)

    def tool(self, name: str, input: Any = None, *, tool_use_id: str | None = None) -> "ToolRun":
        """Time a tool execution: `with s.tool("get_price", args, tool_use_id=tu["id"]) as t: t.result = ...`.

        An exception inside the block is recorded as a failed result and then re-raised. A bad
        `name` or `tool_use_id` is rejected here, before the block runs; the block runs anyway.
        """
        run = ToolRun(self, name, input, tool_use_id)
        try:
            if not isinstance(name, str) or not name:
                raise RecordError(f"name: expected a non-empty str, got {type(name).__name__}")
            _check_texts(tool_use_id=tool_use_id)
        except RecordError as exc:
            run.discard()
            self.recorder.reject(exc)
        return run

    def outcome(self, kind: str, payload: Any = None, *, call_id: str | None = None, at: Any = None) -> None:
        """Record a domain event the agent caused: a trade, a game move, a file written."""
        if self._refused:
            return self._reject_refused("outcome")
        try:
            if not isinstance(kind, str) or not kind:
                raise RecordError(f"outcome kind: expected a non-empty str, got {kind!r}")
            _check_texts(call_id=call_id)
            event = OutcomeRecorded(new_id(), self.id, _instant(at, "at") if at else utc_now(), kind, payload, call_id)
        except RecordError as exc:
            return self.recorder.reject(exc)
        self.recorder._emit(event)

    def reason(self, phase: str, compact: dict, *, details: str | None = None, group: str | None = None,
               confidence: str | None = None, references: list | None = None, agent: str | None = None,
               policy: Any = None) -> str:
        """Save a tiered reasoning record of this session (see docs/reasoning-records.md); returns its receipt.

        The compact form is checked now (a ReasonError names the field and the limit); the long form goes to
        its artifact file at once and to the database with the session's other events. `policy`: a
        `reasoning.policy.Policy`, else the one reasonlog.toml and the environment give."""
        from ..reasoning import policy as policies
        from ..reasoning.records import prepare

        prepared = prepare(policy or policies.load(), self.id, phase, compact, agent=agent or self.agent,
                           group=group, details=details, confidence=confidence, references=references)
        if prepared.event is not None:
            self.recorder._emit(prepared.event)
        return prepared.receipt

    def exchange(self, input: Any = None, *, at: Any = None) -> "ExchangeRecorder":
        """Start an exchange (one user input until its final result); calls made meanwhile belong to it.

        `at`: when it started (a datetime, epoch seconds or ISO-8601 text), for history recorded later."""
        when = self._when(at)
        if self.exchange_id is not None:
            self._end_exchange(None, "completed", None, when)
        self.exchange_id = new_id()
        if self._refused:
            self._reject_refused("exchange")
        else:
            self.recorder._emit(ExchangeStarted(self.exchange_id, self.id, when, input))
        return ExchangeRecorder(self, self.exchange_id)

    def _when(self, at: Any) -> str:
        """`at` as UTC text, or now; a bad instant is rejected (raised when strict) and now is used."""
        if at is None:
            return utc_now()
        try:
            return _instant(at, "at")
        except RecordError as exc:
            self.recorder.reject(exc)
            return utc_now()

    def _end_exchange(self, result: Any, status: str, stats: dict | None, at: str | None = None) -> None:
        if self.exchange_id is None:
            return
        if not self._refused:  # the exchange's start was counted as rejected already
            self.recorder._emit(ExchangeEnded(self.exchange_id, self.id, at or utc_now(), result, status, stats))
        self.exchange_id = None

    def end(self, status: str = "completed", summary: str | None = None, error: Any = None, *,
            at: Any = None) -> None:
        """End the session. Status: completed, failed or interrupted; `at`: when, if not now."""
        if self.ended:
            return
        try:
            _check_status("status", status)
            _check_texts(summary=summary)
        except RecordError as exc:
            return self.recorder.reject(exc)
        when = self._when(at)
        self._end_exchange(None, status, None, when)
        self.ended = True
        self.recorder._sessions.pop(self.id, None)
        if not self._refused:  # a rejected session has nothing to end; its rejection was counted once
            self.recorder._emit(SessionEnded(self.id, when, status, summary, error_of(error)))


class ToolRun:
    """One tool execution being timed; set `result` inside the `with` block."""

    def __init__(self, session: SessionRecorder, name: str, input: Any, tool_use_id: str | None):
        self.session, self.name, self.input, self.tool_use_id = session, name, input, tool_use_id
        self.result: Any = None
        self.is_error = False
        self._record = True

    def discard(self) -> None:
        """Time the block but record nothing (its name was rejected, and counted, already)."""
        self._record = False

    def __enter__(self) -> "ToolRun":
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        duration = (time.perf_counter() - self._start) * 1000
        if exc is not None:
            self.result, self.is_error = f"{exc_type.__name__}: {exc}", True
        if self._record:
            self.session.tool_result(self.tool_use_id, self.result, name=self.name, input=self.input,
                                     is_error=self.is_error, duration_ms=round(duration, 3))


class ExchangeRecorder:
    """An open exchange; `end(result)` or leaving the `with` block closes it."""

    def __init__(self, session: SessionRecorder, exchange_id: str):
        self.session, self.id = session, exchange_id
        self.result: Any = None

    def call(self, **kwargs) -> str | None:
        return self.session.call(**kwargs)

    def end(self, result: Any = None, *, status: str = "completed", stats: dict | None = None,
            at: Any = None) -> None:
        """End the exchange; `stats` may carry the `cost_usd` an agent SDK reported for it; `at`: when, if not now."""
        if self.session.exchange_id != self.id:
            return
        try:
            _check_status("status", status)
            if stats is not None and not isinstance(stats, dict):
                raise RecordError(f"stats: expected a dict or None, got {type(stats).__name__}")
            if stats and not is_amount(stats.get("cost_usd")):
                raise RecordError(f"stats.cost_usd: expected a non-negative number, got {stats['cost_usd']!r}")
        except RecordError as exc:
            return self.session.recorder.reject(exc)
        when = self.session._when(at)
        self.session._end_exchange(result if result is not None else self.result, status, stats, when)

    def __enter__(self) -> "ExchangeRecorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.end(status="failed" if exc else "completed")


def _live_token(db_path: str) -> str | None:
    """A lock file beside a SQLite database; a PostgreSQL database has no "beside": the store that writes there
    holds an advisory lock named after the process's token (store/liveness.py)."""
    from pathlib import Path

    from ..store.liveness import hold, process_token

    return process_token() if "://" in db_path else hold(Path(db_path))


# ---------------------------------------------------------------------- checking arguments

_TEXT = frozenset({str, type(None)})
_INSTANT_TYPES = frozenset({str, int, float, datetime})


def _check_texts(**values: Any) -> None:
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            raise RecordError(f"{name}: expected a str or None, got {type(value).__name__}")


def _check_storable(**values: Any) -> None:
    """Text SQLite can hold: a lone surrogate (from a bad decode) fails only when the row is written."""
    _check_texts(**values)
    for name, value in values.items():
        if value is not None and not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                raise RecordError(f"{name}: expected text without lone surrogates, got {value!r}") from None


def _check_status(name: str, status: Any) -> None:
    if not isinstance(status, str) or status not in STATUSES:
        raise RecordError(f"{name}: expected completed, failed or interrupted, got {status!r}")


def _check_call_fields(model, provider, stop_reason, provider_message_id, request_id, call_id, partial,
                       context_facts) -> None:
    """The slow path of `_call_event`'s test: name the field that failed it."""
    _check_texts(model=model, provider=provider, stop_reason=stop_reason, provider_message_id=provider_message_id,
                 request_id=request_id, id=call_id)
    if type(partial) is not bool:
        raise RecordError(f"partial: expected a bool, got {type(partial).__name__}")
    if context_facts is not None and not isinstance(context_facts, dict):
        raise RecordError(f"context_facts: expected a dict or None, got {type(context_facts).__name__}")


def _session_event(sid, agent, run, model, provider, labels, id, external_id, parent, parent_call, started_at,
                   xml_tools, on_close) -> SessionStarted:
    """The session's start, every argument checked (sessions are rare, so text is checked to the character)."""
    parent_id = parent.id if isinstance(parent, SessionRecorder) else parent
    _check_storable(agent=agent, run=run, model=model, provider=provider, id=id, external_id=external_id,
                    parent=parent_id, parent_call=parent_call)
    _check_status("on_close", on_close)
    if labels is not None and not isinstance(labels, dict):
        raise RecordError(f"labels: expected a dict, got {type(labels).__name__}")
    _check_storable(**{f"labels[{k!r}]": v for k, v in (labels or {}).items() if isinstance(v, str)})
    if xml_tools is not None and (not isinstance(xml_tools, (list, tuple))
                                  or not all(isinstance(t, str) and t for t in xml_tools)):
        raise RecordError(f"xml_tools: expected a list of tag names, got {xml_tools!r}")
    return SessionStarted(sid, _instant(started_at, "started_at") if started_at else utc_now(), agent, run,
                          model, provider, dict(labels or {}), parent_id, parent_call, external_id,
                          _HOST, os.getpid(), list(xml_tools) if xml_tools else None)
