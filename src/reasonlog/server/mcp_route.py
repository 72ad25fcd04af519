"""`/mcp`: the archive's MCP tools (reasonlog/mcp) over streamable HTTP, behind the same API keys as the rest.

Present when the `mcp` extra is installed. A request needs a key of `read` scope once any key exists (the
`Authorization: Bearer` header, as for the API); stateless, JSON answers: each POST stands alone, so several
server processes can answer one client. Citations' URLs are the dashboard's paths on this same server.
"""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from ..store import SearchStore


def mount(app: FastAPI, get_store: Callable[[], SearchStore], check_key: Callable[[Request], None]) -> Any:
    """Mount `/mcp` on `app` when the extra is there; returns the lifespan to run while the app does (or None)."""
    from ..mcp import available

    if not available():
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    from ..mcp.server import build
    from ..mcp.tools import Archive

    server = build(Archive(get_store, ""))  # citations' URLs: this server's dashboard paths

    def fresh() -> Any:
        # The keys guard a server that listens beyond loopback; the SDK's Host check would refuse any name but
        # localhost's, which `reasonlog serve --host` users choose on purpose.
        return server.streamable_http_app(streamable_http_path="/", stateless_http=True, json_response=True,
                                          transport_security=TransportSecuritySettings(
                                              enable_dns_rebinding_protection=False))

    guarded = _Guarded(fresh(), check_key)
    app.mount("/mcp", guarded)

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        # A session manager runs once: each start of the app (a test client starts one app many times) gets its own.
        guarded.inner = fresh()
        async with guarded.inner.router.lifespan_context(guarded.inner):
            yield
    return running


class _Guarded:
    """The MCP app behind the API key check (scope `read`)."""

    def __init__(self, inner: Any, check_key: Callable[[Request], None]):
        self.inner, self.check_key = inner, check_key

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            try:
                self.check_key(Request(scope))
            except HTTPException as exc:
                response = JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
                await response(scope, receive, send)
                return
        await self.inner(scope, receive, send)
