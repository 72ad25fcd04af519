"""A sink that sends batches to `reasonlog serve` (`POST /v1/ingest`), for recorders on other machines.

It follows the sink contract of `capture/sinks.py`. Each batch goes as the server's ingestion body (the
spill-file form: a header line, then one event a line), split to the size the server advertises at
`GET /v1/ingest`. A batch's id is the hash of its body, so a batch sent again (a retry after a lost
answer, or a spilled batch replayed later) adds nothing. A failure that may pass (no connection, a 5xx,
a 429) is retried with back-off; what still fails raises, and the `SpillingSink` around this one keeps
the batch in a spill file in the user's data folder until the server takes it.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import threading
import time
import urllib.parse
import weakref
from pathlib import Path

import orjson

from ..model import Event, dump_event, new_id
from ..redact import Redactor
from ..wire import masked_line
from .sinks import BaseSink, Outcome, SpillingSink

DEFAULT_MAX_BYTES = 1 << 20  # until the server says its own
BACKOFF_S = (0.25, 0.5, 1.0)


class HttpError(OSError):
    """The server refused or could not be reached; `retry` says whether trying again at once may help, and
    `events_at_fault` whether the server refused what was sent (422) rather than failing or being away."""

    def __init__(self, message: str, retry: bool, events_at_fault: bool = False):
        super().__init__(message)
        self.retry = retry
        self.events_at_fault = events_at_fault


class HttpSink(BaseSink):
    """A sink that sends batches to `reasonlog serve` (`POST /v1/ingest`)."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 10.0,
                 redactor: Redactor | None = None):
        self.url = url.rstrip("/")
        self.target = self.url
        self.redactor = redactor  # secrets are masked before they leave the process (the server masks again)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._max_bytes: int | None = None
        # One kept-alive connection: a recorder's batches reach the same server worker one after another (whose
        # memory of the recorder's sessions and contents is then current) without a TCP handshake each.
        self._connection: http.client.HTTPConnection | None = None
        self._connection_lock = threading.Lock()
        self._path = ""
        _SINKS.add(self)

    # ------------------------------------------------------------ the sink contract

    def is_sink_failure(self, exc: BaseException) -> bool:
        """Whether `exc` says the server failed, is away or cannot take the batch yet (the spill file waits),
        not that an event is at fault (then the replay looks for it and sets it aside)."""
        return not (isinstance(exc, HttpError) and exc.events_at_fault)

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        """Send the events in bodies the server takes. An event larger than any body it takes is held back
        while the others go; then this raises, so that the batch waits in a spill file (sending it again
        adds nothing the server has) until a server takes bodies that large."""
        lines, counters = self._lines(events, counters)
        room = self._limit() - 512
        oversized = [line for line in lines if len(line) + 1 > room]
        fitting = [line for line in lines if len(line) + 1 <= room]
        for chunk in self._chunks(fitting, room):
            if chunk:
                self._send(chunk, None)
        if counters:  # a body of their own: a body of events already sent is a duplicate, and adds nothing
            self._send([], counters, batch_id=new_id())
        if oversized:
            largest, limit = max(map(len, oversized)), self._limit()
            self._max_bytes = None  # ask again next time: the server may have been told to take more
            raise HttpError(f"{self.url}: {len(oversized)} event(s) larger than the server takes (the largest"
                            f" {largest} bytes; max_bytes {limit}): they wait in a spill file until"
                            " it takes larger bodies (reasonlog serve --max-body-mb)", retry=False)
        return "written"  # each body's id is the hash of its events: one sent twice adds nothing

    def _lines(self, events: list[Event], counters: dict[str, int] | None) -> tuple[list[bytes], dict | None]:
        """The events' lines with their secrets masked, and the counters with how many were masked (counted
        here: the server finds nothing left to mask)."""
        lines = [dump_event(e) for e in events]
        if self.redactor is None:
            return lines, counters
        before = self.redactor.masked
        lines = [masked_line(line, self.redactor) for line in lines]
        n = self.redactor.masked - before
        return lines, ({**(counters or {}), "redacted": (counters or {}).get("redacted", 0) + n} if n else counters)

    def add_counters(self, counters: dict[str, int]) -> None:
        if counters:
            self._send([], counters, batch_id=new_id())

    # ------------------------------------------------------------ sending

    @staticmethod
    def _chunks(lines: list[bytes], room: int) -> list[list[bytes]]:
        """The lines in bodies of at most `room` bytes (the server's limit less a header line's room)."""
        chunks: list[list[bytes]] = [[]]
        size = 0
        for line in lines:
            if chunks[-1] and size + len(line) + 1 > room:
                chunks.append([])
                size = 0
            chunks[-1].append(line)
            size += len(line) + 1
        return chunks

    def _send(self, lines: list[bytes], counters: dict[str, int] | None, batch_id: str | None = None) -> None:
        events = b"\n".join(lines)
        # The events alone name the batch, so the same events sent again in the same body (a retry, a spill
        # file replayed after part of it went) add nothing, whatever counters travel with them.
        ident = batch_id or hashlib.blake2b(events, digest_size=16).hexdigest()
        body = orjson.dumps({"$reasonlog": "batch", "id": ident, "counters": counters or {}}) + b"\n" + events
        for pause in (*BACKOFF_S, None):
            try:
                self._request("POST", "/v1/ingest", body)
                return
            except HttpError as exc:
                if not exc.retry or pause is None:
                    raise
            time.sleep(pause)

    def _limit(self) -> int:
        if self._max_bytes is None:
            try:
                answer = orjson.loads(self._request("GET", "/v1/ingest", None))
                self._max_bytes = int(answer["max_bytes"])
            except (HttpError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                return DEFAULT_MAX_BYTES  # asked again with the next batch
        return self._max_bytes

    def _request(self, method: str, path: str, body: bytes | None) -> bytes:
        headers = {"Content-Type": "application/x-ndjson"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            with self._connection_lock:
                status, reason, data = self._exchange(method, path, body, headers)
        except (OSError, http.client.HTTPException) as exc:
            raise HttpError(f"{self.url}{path}: cannot reach the server ({exc})", retry=True) from None
        if status >= 400:
            raise HttpError(f"{self.url}{path}: {status} {_detail(data, reason)}", retry=status >= 500 or status == 429,
                            events_at_fault=status == 422)
        return data

    def _exchange(self, method: str, path: str, body: bytes | None,
                  headers: dict[str, str]) -> tuple[int, str, bytes]:
        """Send on the kept connection; once more on a new one when the server had closed the kept one meanwhile
        (an idle timeout): a batch sent twice is written once (its id)."""
        for attempt in (1, 2):
            kept = self._connection is not None
            conn = self._connection or self._connect()
            try:
                conn.request(method, self._path + path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException):
                self.close_connection()
                if attempt == 2 or not kept:
                    raise
                continue
            if response.will_close:
                self.close_connection()
            return response.status, response.reason, data
        raise AssertionError("unreachable")

    def _connect(self) -> http.client.HTTPConnection:
        parts = urllib.parse.urlsplit(self.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._path = parts.path
        self._connection = kind(parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout_s)
        return self._connection

    def close_connection(self) -> None:
        """Let the kept connection go (the next request opens another)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        self.close_connection()


_SINKS: weakref.WeakSet[HttpSink] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    """A forked child must not talk on its parent's kept connection (their requests would interleave): it opens its
    own (the parent's socket is left alone)."""
    for sink in list(_SINKS):
        sink._connection = None
        sink._connection_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_connections_in_child)


def _detail(body: bytes, reason: str) -> str:
    try:
        return str(orjson.loads(body).get("detail"))
    except Exception:  # any body at all: the status and its phrase say enough
        return reason


def remote_sink(url: str, api_key: str | None, redactor: Redactor | None) -> SpillingSink:
    """`reasonlog serve` at `url`, with spill files in the user's data folder while it cannot be reached."""
    import platformdirs

    name = hashlib.blake2b(url.encode(), digest_size=8).hexdigest()
    folder = Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "spill" / f"remote-{name}"
    return SpillingSink(HttpSink(url, api_key, redactor=redactor), [folder], redactor)
