"""The ASGI app: health, readiness and the reasoning endpoint, over the same query functions the CLI uses.

The app holds no SQL: it asks `reasonlog.query` and the `Store` protocol. The store is opened on the first
request that needs it, so a server starts (and says it is not ready) while its database is unreachable.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from .. import __version__, query
from ..store import Store, StoreError

ERROR = {"content": {"application/json": {"example": {"detail": "what was wrong, naming the parameter"}}}}


def create_app(open_store: Callable[[], Store], deployment_mode: str = "local") -> FastAPI:
    """The app over the store `open_store` opens (once, on first use). `deployment_mode` is echoed by /reasoning."""
    app = FastAPI(title="reasonlog", version=__version__,
                  description="What LLM agents saw, thought and did: sessions, calls, reasoning and outcomes.")
    state = _Lazy(open_store)

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
             responses={400: {"description": "A malformed date", **ERROR},
                        404: {"description": "No session matches the filters", **ERROR}})
    def reasoning(job_id: str | None = Query(None, description="The run (a simulation job)"),
                  date: str | None = Query(None, description="The session's date label, YYYY-MM-DD"),
                  model: str | None = Query(None, description="The model (signature) of the session"),
                  include_full_conversation: bool = Query(False, description="Add each session's conversation")
                  ) -> Any:
        try:
            sessions = query.reasoning_sessions(state.get(), job_id, date, model, include_full_conversation)
        except ValueError as exc:
            return JSONResponse(status_code=400, content={"detail": str(exc)})
        except query.NotFound as exc:
            return JSONResponse(status_code=404, content={"detail": str(exc)})
        return {"sessions": sessions, "count": len(sessions), "deployment_mode": deployment_mode}

    return app


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
