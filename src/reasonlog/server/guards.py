"""What every route shares at its edges: a database that cannot be used is a 503 with Retry-After (never a
500), a parameter holding a NUL byte is a 400 naming it, and a body is read only up to its limit.

Bodies are read as they arrive and counted: past the limit the answer is a 413 at once, so a client
sending 400 MB to a route that takes 8 MB costs the server 8 MB, not 400. A compressed body (OTLP
exporters send gzip) is inflated with the same limit on what it inflates to.
"""
from __future__ import annotations

import logging
import zlib
from typing import Any

import orjson
from fastapi import HTTPException, Request

from .stores import Stores, first_line

log = logging.getLogger("reasonlog")
RETRY_AFTER_S = 2  # PostgreSQL restarts in about that long; a locked SQLite file waits its busy timeout


def unavailable(detail: str) -> HTTPException:
    """The 503 a route answers when the database cannot be used now."""
    return HTTPException(503, f"the database cannot be used now: {detail}",
                         headers={"Retry-After": str(RETRY_AFTER_S)})


class StoreFailures:
    """ASGI middleware: an error by which the database says it cannot be used becomes a 503 with Retry-After.

    Every route gets this, including the ones that read the store without catching anything; an error
    that is not the database's still propagates (and is a 500, which is then a bug to fix)."""

    def __init__(self, app: Any, stores: Stores, html_page: Any = None):
        self.app, self.stores, self.html_page = app, stores, html_page

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            if started or not self.stores.failed(exc):
                raise
            await self._answer(scope, send, first_line(exc))

    async def _answer(self, scope: dict, send: Any, reason: str) -> None:
        # Only the reason's first line: a driver's later lines may quote the statement and its values.
        detail = f"the database cannot be used now: {reason}"
        log.warning("reasonlog answered 503: %s", detail)
        accept = dict(scope.get("headers") or {}).get(b"accept", b"")
        if self.html_page is not None and b"text/html" in accept:
            body, media = self.html_page(detail).encode(), b"text/html; charset=utf-8"
        else:
            body, media = orjson.dumps({"detail": detail}), b"application/json"
        headers = [(b"content-type", media), (b"content-length", str(len(body)).encode()),
                   (b"retry-after", str(RETRY_AFTER_S).encode())]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def refuse_nul(request: Request) -> None:
    """A dependency of every route: no recorded text holds a NUL byte, and PostgreSQL cannot even compare one."""
    for name, value in [*request.path_params.items(), *request.query_params.multi_items()]:
        if isinstance(value, str) and "\x00" in value:
            raise HTTPException(400, f"{name}: contains a NUL byte (%00), which no recorded text can hold")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request's body, decoded from its Content-Encoding; a 413 as soon as it passes `max_bytes`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise HTTPException(413, f"body: {declared} bytes, more than max_bytes {max_bytes}")
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    inflater = _inflater(encoding)
    chunks, size = [], 0
    async for chunk in request.stream():
        piece = chunk if inflater is None else _inflate(inflater, chunk, max_bytes - size)
        size += len(piece)
        if size > max_bytes:
            raise HTTPException(413, f"body: more than max_bytes {max_bytes}" +
                                ("" if inflater is None else f" once inflated from {encoding}"))
        chunks.append(piece)
    if inflater is not None and not inflater.eof:
        raise HTTPException(400, f"body: not complete {encoding} data")
    return b"".join(chunks)


def _inflater(encoding: str) -> Any:
    if encoding in ("identity", ""):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Deflate()
    raise HTTPException(415, f"Content-Encoding {encoding!r}: send the body as gzip, deflate or uncompressed")


def _inflate(inflater: Any, chunk: bytes, room: int) -> bytes:
    """At most `room` + 1 bytes of what `chunk` inflates to: enough to tell that the limit is passed."""
    try:
        out = inflater.decompress(inflater.unconsumed_tail + chunk, max(room, 0) + 1)
    except zlib.error as exc:
        raise HTTPException(400, f"body: not valid compressed data ({exc})") from None
    return out


class _Deflate:
    """HTTP's `deflate` is zlib-wrapped by the standard and raw by some senders: take either."""

    def __init__(self):
        self._inner: Any = None
        self.unconsumed_tail = b""

    @property
    def eof(self) -> bool:
        return self._inner is not None and self._inner.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._inner is None:
            if not data:
                return b""
            # A zlib stream opens with two bytes naming method 8 (deflate) whose value is a multiple of 31.
            wrapped = len(data) > 1 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._inner = zlib.decompressobj(wbits=zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        out = self._inner.decompress(data, max_length)
        self.unconsumed_tail = self._inner.unconsumed_tail
        return out


class BodyLimit:
    """ASGI middleware: no request body is read past `max_bytes`; the route reading it answers 413 at once."""

    def __init__(self, app: Any, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or {}).get(b"content-length", b"")
        received = 0

        async def counting() -> dict:
            nonlocal received
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise HTTPException(413, f"body: {int(declared)} bytes, more than max_bytes {self.max_bytes}")
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, f"body: more than max_bytes {self.max_bytes}")
            return message

        await self.app(scope, counting, send)
