"""`reasonlog proxy`: an HTTP proxy on 127.0.0.1 between an agent and its model provider, recording every call.

Any client in any language can be pointed at it (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`,
`GOOGLE_GEMINI_BASE_URL`). Requests go upstream unchanged; the upstream's answer comes back byte for byte,
errors and rate limits included, each chunk of a stream written to the client as it arrives. The only change
is to model calls' `accept-encoding` (`identity`), so that what is recorded can be read without a decoder for
every compression a client may offer.

Built on aiohttp (server and pooled client, both with a C HTTP parser): measured against a bare ASGI app under
uvicorn with httpx, it added a third of the latency per request (docs/proxy.md). The forwarding coroutine does
no parsing: a finished exchange goes to `Recording` (its own thread), so the client never waits on the database.
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, NamedTuple, Protocol

from .proxy_record import Exchange, Recording
from .proxy_routes import HOP_BY_HOP, Route, error_body, provider_of, route_of

MAX_BODY = 1 << 30  # aiohttp refuses bodies past 1 MiB by default; an agent's request can be tens of MiB


class Answer(Protocol):
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Forward(NamedTuple):
    """Forward this request, with this path and body (a fork may ask another model)."""

    path: str
    body: bytes


class Replayer(Protocol):
    """What `proxy --replay` plugs in (capture/proxy_replay.py): an answer from the recording, a `Forward`, or
    None to forward the request as it came."""

    def answer(self, route: Route | None, path: str, body: bytes) -> "Answer | Forward | None": ...


class Proxy:
    """The aiohttp application: forwards every request to its provider's upstream and hands model calls to
    `recording` (None: record nothing)."""

    def __init__(self, upstreams: dict[str, str], recording: Recording | None, replayer: Replayer | None = None):
        self.upstreams, self.recording, self.replayer = upstreams, recording, replayer
        self.client: Any = None

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_BODY, handler_args={"max_field_size": 1 << 16})
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open_client)
        app.on_cleanup.append(self._close_client)
        return app

    async def _open_client(self, app: Any) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
        self.client = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding",
                                                               "Content-Type"),
                                            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))

    async def _close_client(self, app: Any) -> None:
        await self.client.close()

    async def handle(self, request: Any) -> Any:
        body = await request.read()
        path = request.path_qs
        route = route_of(request.method, request.path)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        if self.replayer is not None:
            answered = self.replayer.answer(route, path, body)
            if isinstance(answered, Forward):
                path, body = answered
            elif answered is not None:
                return await self._answer(request, answered)
        if route is None:
            return await self._forward(request, path, headers, body, None)
        exchange = Exchange(route=route, body=body, headers={k.lower(): v for k, v in headers}, t0=time.perf_counter(),
                            started_at=time.time())
        headers = [(k, v) for k, v in headers if k.lower() != "accept-encoding"] + [("Accept-Encoding", "identity")]
        try:
            return await self._forward(request, path, headers, body, exchange)
        finally:
            exchange.ended = time.perf_counter()
            if self.recording is not None:
                self.recording.submit(exchange)

    async def _forward(self, request: Any, path: str, headers: list, body: bytes, ex: Exchange | None) -> Any:
        import aiohttp
        from aiohttp import web

        lowered = {k.lower(): v for k, v in headers}
        base = self.upstreams[provider_of(ex.route if ex else None, path, lowered)]
        try:
            upstream = await self.client.request(request.method, base + path, data=body or None, headers=headers,
                                                 allow_redirects=False)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            if ex is not None:
                ex.failure = f"{base}: {exc or type(exc).__name__}"
            return unreachable(provider_of(ex.route if ex else None, path, lowered), base, exc)
        async with upstream:
            if ex is not None:
                ex.status = upstream.status
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP or name.lower() == "content-length":
                    response.headers.add(name, value)
            await response.prepare(request)
            await self._relay(upstream, response, ex)
            return response

    async def _relay(self, upstream: Any, response: Any, ex: Exchange | None) -> None:
        """Write each chunk to the client as it arrives; note it (with its instant) for the recording."""
        import aiohttp

        try:
            async for chunk in upstream.content.iter_any():
                if ex is not None:
                    ex.add(time.perf_counter(), chunk)
                await response.write(chunk)
            await response.write_eof()
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            if ex is not None:
                ex.failure = f"the exchange broke off: {exc or type(exc).__name__}"
            return
        if ex is not None:
            ex.complete = True

    async def _answer(self, request: Any, answer: Answer) -> Any:
        from aiohttp import web

        response = web.Response(status=answer.status, body=answer.body)
        for name, value in answer.headers:
            response.headers[name] = value
        return response


def unreachable(provider: str, base: str, exc: BaseException) -> Any:
    """A 502 naming the upstream that could not be reached, in the provider's error shape (its SDK retries it like
    any 5xx)."""
    from aiohttp import web

    message = f"reasonlog proxy: could not reach {base}: {exc or type(exc).__name__}"
    return web.json_response(error_body(provider, 502, "upstream_unreachable", message), status=502)


class Running:
    """A proxy serving on 127.0.0.1 from a thread of its own (for `reasonlog run` and tests); `stop()` ends it."""

    def __init__(self, proxy: Proxy, host: str = "127.0.0.1", port: int = 0):
        self.proxy, self.host = proxy, host
        self.sock = bind(host, port)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="reasonlog-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def _serve(self) -> None:
        from aiohttp import web

        asyncio.set_event_loop(self._loop)
        self._runner = web.AppRunner(self.proxy.app(), access_log=None, handle_signals=False)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.SockSite(self._runner, self.sock).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (0: a free port); OSError when the port is taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


# Python hands the GIL between threads every 5 ms by default; the recording and writer threads would then hold up
# the forwarding loop by as much at the tail. A proxy process switches every 0.5 ms (measured: docs/proxy.md).
SWITCH_INTERVAL_S = 0.0005


def serve_forever(proxy: Proxy, sock: socket.socket) -> None:
    """Serve on `sock` in this thread until SIGINT / SIGTERM (`reasonlog proxy`)."""
    import sys

    from aiohttp import web

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    web.run_app(proxy.app(), sock=sock, access_log=None, print=None, shutdown_timeout=5)
