"""The proxy's recording side: each finished exchange becomes a call, on a thread of its own.

The thread that forwards bytes only appends an `Exchange` to a queue that never blocks; parsing the request,
rebuilding a streamed response (`providers.<protocol>.Stream`), choosing the session and handing the call to
the recorder (whose writer may wait on a busy database, or spill) all happen here. The response is kept as the
bytes the upstream sent (`raw`), which is what `proxy --replay` serves again.
"""
from __future__ import annotations

import collections
import os
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import providers
from ..providers import GEMINI, OPENAI_RESPONSES
from ..providers.sse import is_sse, parse_events
from .arguments import answer_fields
from .internal import log_internal_error
from .proxy_routes import Route, recordable_headers
from .proxy_sessions import Sessions


def keep_limit() -> int:
    """The bytes of one answer the recording keeps (`REASONLOG_PROXY_KEEP_MB`, default 32 MiB): the client always
    gets every byte, but a proxy that held a multi-GB answer to record it would grow by its size."""
    try:
        mb = float(os.environ.get("REASONLOG_PROXY_KEEP_MB", "32"))
    except ValueError:
        mb = 32.0
    return max(int(mb * (1 << 20)), 1 << 12)


@dataclass(slots=True)
class Exchange:
    """One model call as the proxy saw it: the request's bytes and headers, and the response's chunks with the
    instant (`perf_counter`) each arrived.

    Of an answer larger than `keep` bytes, the head (`chunks`, half the budget) and the tail (the last chunks
    within the other half) are kept: a stream's first events and its last (the usage and stop reason) are read,
    and the call says how much of the middle the recording lacks."""

    route: Route
    body: bytes
    headers: dict[str, str]
    started_at: float  # epoch seconds
    t0: float  # perf_counter when the request arrived
    status: int | None = None
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    ended: float = 0.0
    complete: bool = False
    failure: str | None = None  # the upstream could not be reached, or the exchange broke off
    replayed: bool = False
    keep: int = field(default_factory=keep_limit)
    received: int = 0  # bytes of the answer the client got
    head: int = 0  # bytes in `chunks`
    tail: collections.deque = field(default_factory=collections.deque)
    tail_bytes: int = 0

    def add(self, at: float, chunk: bytes) -> None:
        """Note a chunk of the answer, keeping within `keep` bytes."""
        self.received += len(chunk)
        room = self.keep // 2 - self.head
        if not self.tail and room > 0:
            part = chunk if len(chunk) <= room else chunk[:room]
            self.chunks.append((at, part))
            self.head += len(part)
            chunk = chunk[len(part):]
            if not chunk:
                return
        self.tail.append(chunk)
        self.tail_bytes += len(chunk)
        while len(self.tail) > 1 and self.tail_bytes > self.keep - self.head:
            self.tail_bytes -= len(self.tail.popleft())

    @property
    def kept(self) -> int:
        return self.head + self.tail_bytes

    @property
    def response_bytes(self) -> bytes:
        """The answer as received; of one kept in part, the head and the tail's whole events (SSE) or the head."""
        head = b"".join(chunk for _, chunk in self.chunks)
        if self.kept == self.received:
            return head + b"".join(self.tail)
        tail = b"".join(self.tail)
        cut = tail.find(b"\n\n")
        return head + (b"\n\n" + tail[cut + 2:] if is_sse(head) and cut >= 0 else b"")


class Recording:
    """Records exchanges on its own thread; `submit` never waits. `close` drains what is queued, then ends the
    sessions it started."""

    def __init__(self, sessions: Sessions):
        self.sessions = sessions
        self.count = 0  # calls recorded (a count, not a list: a proxy may run for months)
        self.last_call: str | None = None
        self._queue: queue.SimpleQueue[Exchange | None] = queue.SimpleQueue()
        self._busy = 0  # 1 while an exchange is being recorded
        self._thread = threading.Thread(target=self._run, name="reasonlog-proxy-recording", daemon=True)
        self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        self._queue.put(exchange)

    def close(self, timeout: float | None = 30.0) -> None:
        """Record what is queued, waiting at most `timeout`; what is still not recorded then is counted dropped
        (the process is about to exit: a daemon thread's work would vanish uncounted)."""
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            left = self._queue.qsize() - 1 + self._busy  # the closing None is not an exchange
            self.sessions.recorder.count_dropped(left, f"the proxy's recording did not finish within {timeout} s")
        self.sessions.end()

    def _run(self) -> None:
        while (exchange := self._queue.get()) is not None:
            self._busy = 1
            try:
                call_id = record_exchange(self.sessions, exchange)
                if call_id is not None:
                    self.count, self.last_call = self.count + 1, call_id
            except Exception:
                log_internal_error(self.sessions.recorder, "recording a proxied call")
            finally:
                self._busy = 0


def record_exchange(sessions: Sessions, ex: Exchange) -> str | None:
    """Record one exchange as a call in its session; returns the call id."""
    request = orjson.loads(ex.body) if ex.body else {}
    if not isinstance(request, dict):
        request = {"body": request}
    protocol = ex.route.protocol
    body = ex.response_bytes
    fields = response_fields(ex, body)
    model = fields.pop("model", None) or ex.route.model or request.get("model")
    session = sessions.session_for(request, providers.messages_of(request), recordable_headers(ex.headers),
                                   protocol.name, model if isinstance(model, str) else None)
    if ex.kept < ex.received:
        fields["error"] = {"type": "answer_kept_in_part", "received_bytes": ex.received, "kept_bytes": ex.kept,
                           "message": f"the client got all {ex.received:,} bytes of the answer; the recording keeps"
                                      f" its first {ex.head:,} and last {ex.tail_bytes:,} (REASONLOG_PROXY_KEEP_MB)"}
    call_id = session.call(request=request, raw=body or None, model=model if isinstance(model, str) else None,
                           provider=protocol.name, latency_ms=max(ex.ended - ex.t0, 0.0) * 1000,
                           started_at=ex.started_at, partial=not ex.complete, **fields)
    if protocol is OPENAI_RESPONSES:
        sessions.answered(session, fields.get("provider_message_id"))
    return call_id


def response_fields(ex: Exchange, body: bytes) -> dict[str, Any]:
    """The call's response, usage, stop reason, ids, time to first token, or its error, from the bytes."""
    if ex.failure is not None and ex.status is None:
        return {"error": {"type": "upstream_unreachable", "message": ex.failure}}
    if ex.status is not None and ex.status >= 400:
        return {"error": http_error(ex.status, body)}
    streamed = is_sse(body) or (ex.route.path_streams and body.lstrip().startswith(b"["))
    try:
        whole, first_at = rebuilt(ex, body) if streamed else (_json(body), None)
        answer = answer_fields(whole)
    except Exception as exc:  # an answer holding what its protocol cannot (a count in words): kept raw, and said
        return {"error": {"type": "unreadable_answer", "message": f"the {ex.route.protocol.name} answer could not be"
                          f" read: {type(exc).__name__}: {exc}"}}
    fields: dict[str, Any] = {"ttft_ms": None if first_at is None else max(first_at - ex.t0, 0.0) * 1000}
    if answer:
        fields.update(answer, model=whole.get("model") or whole.get("modelVersion"))
    return fields


def rebuilt(ex: Exchange, body: bytes) -> tuple[Any, float | None]:
    """A streamed response folded into the body the same call returns unstreamed, and when its first token came."""
    stream = ex.route.protocol.Stream()
    first_offset = None
    for offset, event in _stream_events(ex.route, body):
        if isinstance(event, dict) and stream.add(event) and first_offset is None:
            first_offset = offset
    return stream.body(), None if first_offset is None else arrival(ex.chunks, first_offset)


def _stream_events(route: Route, body: bytes) -> list[tuple[int, Any]]:
    if route.protocol is GEMINI and body.lstrip().startswith(b"["):  # streamGenerateContent without alt=sse
        parsed = _json(body)
        return [(len(body), item) for item in parsed] if isinstance(parsed, list) else []
    return [(event.end, event.data) for event in parse_events(body)]


def arrival(chunks: list[tuple[float, bytes]], offset: int) -> float | None:
    """When the chunk holding byte `offset - 1` of the body arrived."""
    seen = 0
    for at, chunk in chunks:
        seen += len(chunk)
        if seen >= offset:
            return at
    return chunks[-1][0] if chunks else None


def http_error(status: int, body: bytes) -> dict:
    """A failed call's error: the status and the upstream's body (parsed when it is JSON)."""
    parsed = _json(body)
    found = parsed.get("error") if isinstance(parsed, dict) else None
    message = found.get("message") if isinstance(found, dict) else None
    return {"type": "http_error", "status_code": status,
            "message": message if isinstance(message, str) else f"HTTP {status}",
            "body": parsed if parsed is not None else body.decode("utf-8", "replace")}


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
