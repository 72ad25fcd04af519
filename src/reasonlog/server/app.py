"""The ASGI app: health, readiness and the reasoning endpoint, over the same query functions the CLI uses.

The app holds no SQL: it asks `reasonlog.query` and the `Store` protocol. The store is opened on the first
request that needs it, so a server starts (and says it is not ready) while its database is unreachable.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from .. import __version__, query
from ..store import ReadOnlyDatabase, Store, StoreError, keys
from ..summaries import Summarizer
from . import api, dashboard, ingest, otlp, records
from .summarizing import BackgroundSummaries

# `date` as the simulator's clients write it: four, two and two digits (strptime alone would take 2025-10-2).
ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
ERROR = {"content": {"application/json": {"example": {"detail": "what was wrong, naming the parameter"}}}}


def create_app(open_store: Callable[[], Store], deployment_mode: str = "local",
               summarizer: Callable[[], Summarizer] | None = None, summarize_every_s: float = 60.0,
               max_body_bytes: int | None = None) -> FastAPI:
    """The app over the store `open_store` opens (once, on first use). `deployment_mode` is echoed by /reasoning.

    `summarizer`: make one to summarise new sessions in the background every `summarize_every_s` seconds while
    the app runs (see server/summarizing.py); `app.state.summaries` is that background job, else None.
    `max_body_bytes`: the largest ingestion body (default `server.ingest.MAX_BYTES`), advertised to recorders."""
    state = _Lazy(open_store)
    background = None if summarizer is None else BackgroundSummaries(state.get, summarizer, summarize_every_s)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if background is not None:
            background.start()
        try:
            yield
        finally:
            if background is not None:
                background.stop()

    app = FastAPI(title="reasonlog", version=__version__, lifespan=lifespan,
                  description="What LLM agents saw, thought and did: sessions, calls, reasoning and outcomes. "
                              "Once an API key exists, send one: `Authorization: Bearer <key>`.")
    app.state.summaries = background

    @app.exception_handler(ReadOnlyDatabase)
    def read_only(request: Request, exc: ReadOnlyDatabase) -> JSONResponse:
        # A server on a read-only database serves every page; what would write says why it cannot.
        return JSONResponse(status_code=503, content={"detail": str(exc)})
    reader = Depends(_requires(state, "read"))
    unauthorized: dict[int | str, dict[str, Any]] = {401: {"description": "No key, or a wrong or revoked one", **ERROR},
                    403: {"description": "The key's scope does not allow this", **ERROR},
                    503: {"description": "The database cannot be used", **ERROR}}

    @app.get("/healthz", summary="The process is up", tags=["health"])
    def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", summary="The database is reachable and its schema current", tags=["health"],
             responses={503: {"description": "The database cannot be used", **ERROR}})
    def readyz() -> Any:
        try:
            store = state.get()
            return {"status": "ready", "schema_version": store.schema_version()}
        except (StoreError, OSError) as exc:
            return JSONResponse(status_code=503, content={"status": "not ready", "detail": str(exc)})

    @app.get("/reasoning", summary="Model-days with their positions and, asked, their conversation", tags=["reasoning"],
             dependencies=[reader], responses={400: {"description": "A malformed date", **ERROR},
                                               404: {"description": "No session matches the filters", **ERROR},
                                               **unauthorized})
    def reasoning(job_id: str | None = Query(None, description="The run (a simulation job)"),
                  date: str | None = Query(None, description="The session's date label, YYYY-MM-DD"),
                  model: str | None = Query(None, description="The model (signature) of the session"),
                  include_full_conversation: bool = Query(False, description="Add each session's conversation")
                  ) -> Any:
        if date is not None and not ISO_DAY.fullmatch(date):
            detail = f"Invalid date format: {date}. Expected YYYY-MM-DD"
            return JSONResponse(status_code=400, content={"detail": detail})
        try:
            sessions = query.reasoning_sessions(state.get(), job_id, date, model, include_full_conversation)
        except ValueError as exc:
            return JSONResponse(status_code=400, content={"detail": str(exc)})
        except query.NotFound as exc:
            return JSONResponse(status_code=404, content={"detail": str(exc)})
        except StoreError as exc:
            return JSONResponse(status_code=503, content={"detail": str(exc)})
        return {"sessions": sessions, "count": len(sessions), "deployment_mode": deployment_mode}

    app.include_router(api.router(state.get, reader))
    limit = ingest.MAX_BYTES if max_body_bytes is None else max_body_bytes
    app.include_router(ingest.router(state.get, Depends(_requires(state, "write")), limit))
    app.include_router(otlp.router(state.get, Depends(_requires(state, "write")), limit))
    app.include_router(records.router(state.get, reader, Depends(_requires(state, "write"))))
    dashboard.mount(app, state.get, lambda store, secret: store.api_key_scope(secret) if secret else None)
    return app


def app_from_environment() -> FastAPI:
    """The app of one `reasonlog serve --workers N` process: its database is in $REASONLOG_SERVE_DB."""
    from ..store import open_store_or_read_only

    target = os.environ["REASONLOG_SERVE_DB"]
    return create_app(lambda: open_store_or_read_only(target), os.environ.get("REASONLOG_DEPLOYMENT_MODE", "local"),
                      max_body_bytes=int(os.environ.get("REASONLOG_SERVE_MAX_BODY", ingest.MAX_BYTES)))


def _requires(state: _Lazy, needed: str):
    """A dependency: once any key exists, the request must carry a working one whose scope allows `needed`."""
    def check(request: Request) -> None:
        try:
            store = state.get()
            if not store.has_api_keys():
                return  # no key yet: the server only listens on loopback (see cli/serve.py)
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            scope = store.api_key_scope(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        except StoreError as exc:
            raise HTTPException(503, str(exc)) from None
        if scope is None:
            said = "a wrong or revoked API key" if token.strip() else "no API key"
            raise HTTPException(401, f"{said}: send Authorization: Bearer <key> (reasonlog keys create)",
                                headers={"WWW-Authenticate": "Bearer"})
        if not keys.allows(scope, needed):
            raise HTTPException(403, f"this key's scope is {scope}; this needs {needed}")
    return check


class _Lazy:
    """The store, opened on first use and kept; opening again after a failure."""

    def __init__(self, opener: Callable[[], Store]):
        self._opener, self._lock = opener, threading.Lock()
        self._store: Store | None = None

    def get(self) -> Store:
        with self._lock:
            store = self._store
            if store is None:
                store = self._store = self._opener()
            return store
