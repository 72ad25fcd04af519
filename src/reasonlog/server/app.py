"""The ASGI app: health, readiness and the reasoning endpoint, over the same query functions the CLI uses.

The app holds no SQL: it asks `reasonlog.query` and the `Store` protocol. The store is opened on the first
request that needs it, so a server starts (and says it is not ready) while its database is unreachable.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse

from .. import __version__, query
from ..store import ReadOnlyDatabase, Store, StoreError, keys
from ..summaries import Summarizer
from ..wire import HealthJSON, ModelDaysJSON, ReadyJSON
from . import annotation_api, api, dashboard, ending, guards, heap, ingest, mcp_route, otlp, records
from .embedding import BackgroundEmbedding
from .retention import BackgroundRetention
from .stores import Stores
from .summarizing import BackgroundSummaries

# `date` as the simulator's clients write it: four, two and two digits (strptime alone would take 2025-10-2).
ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
ERROR = {"content": {"application/json": {"example": {"detail": "what was wrong, naming the parameter"}}}}
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"description": "No key, or a wrong or revoked one", **ERROR},
    403: {"description": "The key's scope does not allow this", **ERROR},
    503: {"description": "The database cannot be used now; see Retry-After", **ERROR}}


def create_app(open_store: Callable[[], Store], deployment_mode: str = "local",
               summarizer: Callable[[], Summarizer] | None = None, summarize_every_s: float = 60.0,
               max_body_bytes: int | None = None, open_reader: Callable[[], Store] | None = None,
               exit_within_s: float | None = None, login_token: str | None = None,
               embedder: Callable[[], Any] | None = None, embed_every_s: float = 30.0,
               keep_days: float | None = None, keep_every_s: float = 3600.0, settle_heap: bool = False) -> FastAPI:
    """The app over the store `open_store` opens (once, on first use). `deployment_mode` is echoed by /reasoning.

    `open_reader`: open a second, read-only store for every route that only reads, so that reads never wait
    behind a write (`reasonlog serve` gives one; without it the one store does both).
    `summarizer`: make one to summarise new sessions in the background every `summarize_every_s` seconds while
    the app runs (see server/summarizing.py); `app.state.summaries` is that background job, else None.
    `max_body_bytes`: the largest request body (default `server.ingest.MAX_BYTES`), advertised to recorders.
    `exit_within_s`: once the server shuts down (after uvicorn's grace for requests under way), end the process
    this many seconds later even if a request is still at work in a thread (`reasonlog serve` sets it; what
    was answered is committed already, and what was not is rolled back by the database).
    `login_token`: a one-time token that signs its first bringer in to the dashboard (`reasonlog ui`).
    `embedder`: make one to embed new text for search by meaning in the background every `embed_every_s` seconds
    (server/embedding.py); `app.state.embedding` is that background job, else None.
    `keep_days`: prune the sessions last active more than this many days ago, every `keep_every_s` seconds, through a
    store `open_store` opens for it (server/retention.py); `app.state.retention` is that job, else None.
    `settle_heap`: keep the process's long-lived objects out of the collector's full passes (server/heap.py;
    `reasonlog serve` sets it: a process that makes apps and drops them must not)."""
    stores = Stores(open_store, open_reader)
    background = None if summarizer is None else BackgroundSummaries(stores.writer.get, summarizer,
                                                                      summarize_every_s)
    embedding = None if embedder is None else BackgroundEmbedding(stores.writer.get, embedder, embed_every_s)
    retention = None if keep_days is None else BackgroundRetention(open_store, keep_days, keep_every_s)
    limit = ingest.MAX_BYTES if max_body_bytes is None else max_body_bytes

    mcp_running = None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for job in (background, embedding, retention):
            if job is not None:
                job.start()
        if settle_heap:
            heap.settle()
        try:
            async with mcp_running() if mcp_running is not None else contextlib.nullcontext():
                yield
        finally:
            app.state.live.close()  # open live pages end their streams, so the server need not wait for them
            if exit_within_s is not None:
                ending.exit_within(exit_within_s)
            for job in (background, embedding, retention):
                if job is not None:
                    job.stop()
            stores.close()
            if settle_heap:
                heap.release()

    app = FastAPI(title="reasonlog", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None, dependencies=[Depends(guards.refuse_nul)],
                  description="What LLM agents saw, thought and did: sessions, calls, reasoning and outcomes. "
                              "Once an API key exists, send one: `Authorization: Bearer <key>`.")
    app.state.summaries, app.state.stores, app.state.embedding = background, stores, embedding
    app.state.retention = retention

    @app.exception_handler(ReadOnlyDatabase)
    def read_only(request: Request, exc: ReadOnlyDatabase) -> JSONResponse:
        # A server on a read-only database serves every page; what would write says why it cannot.
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    reader = Depends(_requires(stores, "read"))
    writer = Depends(_requires(stores, "write"))
    _add_health(app, stores, _requires(stores, "read"))
    _add_reasoning(app, stores, reader, deployment_mode)
    app.include_router(api.router, dependencies=[reader])
    writing = ingest.IngestWriter()  # one writer for every batch the server takes, spilling as a recorder does
    app.include_router(ingest.router(stores.writer.get, writer, limit, writing))
    app.include_router(otlp.router(stores.writer.get, writer, limit, writing))
    app.include_router(records.router(stores.writer.get, stores.reader.get, reader, writer))
    app.include_router(annotation_api.router(stores.writer.get, stores.reader.get, reader, writer))
    # The body limit is the innermost middleware: its 413, raised while a route reads, must not cross the
    # dashboard's header middleware (which runs the route in a task group, where it would turn into a 400 or 500).
    app.add_middleware(guards.BodyLimit, max_bytes=limit)
    mcp_running = mcp_route.mount(app, stores.reader.get, _requires(stores, "read"))
    app.state.live = dashboard.mount(app, stores.reader.get,
                                     lambda store, secret: store.api_key_scope(secret) if secret else None, login_token,
                                     get_writer=stores.writer.get)
    _add_docs(app, Depends(_requires(stores, "read", cookie=dashboard.COOKIE)))
    app.add_middleware(guards.StoreFailures, stores=stores, html_page=dashboard.error_page)
    if settle_heap:
        app.add_middleware(heap.Settling)
    return app


def _add_health(app: FastAPI, stores: Stores, check_key: Callable[[Request], None]) -> None:
    @app.get("/healthz", summary="The process is up (no key needed)", tags=["health"])
    def healthz() -> HealthJSON:
        return {"status": "ok"}

    @app.get("/readyz", summary="The database is reachable and its schema current", tags=["health"],
             response_model=ReadyJSON, responses=UNAUTHORIZED)
    def readyz(request: Request) -> Any:
        try:
            stores.writer.get()
            check_key(request)  # here, not as a dependency: a database that is away is "not ready", not an error
            return {"status": "ready", "schema_version": stores.reader.get().schema_version()}
        except Exception as exc:
            if not stores.failed(exc) and not isinstance(exc, (StoreError, OSError)):
                raise
            return JSONResponse(status_code=503, content={"status": "not ready", "detail": guards.first_line(exc)},
                                headers={"Retry-After": str(guards.RETRY_AFTER_S)})


def _add_reasoning(app: FastAPI, stores: Stores, reader: Any, deployment_mode: str) -> None:
    @app.get("/reasoning", summary="Model-days with their positions and, asked, their conversation", tags=["reasoning"],
             dependencies=[reader], response_model=ModelDaysJSON,
             responses={400: {"description": "A malformed date", **ERROR},
                        404: {"description": "No session matches the filters", **ERROR}, **UNAUTHORIZED})
    def reasoning(job_id: str | None = Query(None, description="The run (a simulation job)"),
                  date: str | None = Query(None, description="The session's date label, YYYY-MM-DD"),
                  model: str | None = Query(None, description="The model (signature) of the session"),
                  include_full_conversation: bool = Query(False, description="Add each session's conversation")
                  ) -> Any:
        if date is not None and not ISO_DAY.fullmatch(date):
            detail = f"Invalid date format: {date}. Expected YYYY-MM-DD"
            return JSONResponse(status_code=400, content={"detail": detail})
        try:
            sessions = query.reasoning_sessions(stores.reader.get(), job_id, date, model, include_full_conversation)
        except ValueError as exc:
            return JSONResponse(status_code=400, content={"detail": str(exc)})
        except query.NotFound as exc:
            return JSONResponse(status_code=404, content={"detail": str(exc)})
        except StoreError as exc:
            raise guards.unavailable(str(exc)) from None
        return {"sessions": sessions, "count": len(sessions), "deployment_mode": deployment_mode}


def _add_docs(app: FastAPI, reader: Any) -> None:
    """The schema and its two readers, behind a key once keys exist (the dashboard's sign-in cookie serves)."""
    @app.get("/openapi.json", include_in_schema=False, dependencies=[reader])
    def schema() -> Any:
        return app.openapi()

    @app.get("/docs", include_in_schema=False, dependencies=[reader])
    def swagger() -> Any:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="reasonlog API")

    @app.get("/redoc", include_in_schema=False, dependencies=[reader])
    def redoc() -> Any:
        return get_redoc_html(openapi_url="/openapi.json", title="reasonlog API")


def serve_app(target: str | os.PathLike, mirror: str | None = None, **options: Any) -> FastAPI:
    """The app `reasonlog serve` runs over the database `target`: a writer store and a read-only reader; with
    `mirror` (a ClickHouse TARGET), the reader takes the reads that grow from it while it is caught up."""
    from ..store import open_store, open_store_or_read_only

    def reader() -> Store:
        store = open_store(target, read_only=True)
        return store if mirror is None else mirrored_reader(store, mirror)

    return create_app(lambda: open_store_or_read_only(target), open_reader=reader, **options)


def mirrored_reader(store: Store, target: str) -> Store:
    """The record's reader with usage, statistics and session lists answered by the mirror at `target` when it is
    caught up (reasonlog.mirror.reader); the only seam between the routes and the mirror. No cast: `Mirrored`'s own
    reads have `StoreReader`'s signatures (mypy holds them to the protocol) and the rest are the record's."""
    from ..mirror import engine, push, reader

    return reader.Mirrored(store, reader.MirrorReader(engine.connect(target), push.source_of(store)))


def app_from_environment() -> FastAPI:
    """The app of one `reasonlog serve --workers N` process: its database is in $REASONLOG_SERVE_DB."""
    return serve_app(os.environ["REASONLOG_SERVE_DB"], mirror=os.environ.get("REASONLOG_SERVE_MIRROR") or None,
                     deployment_mode=os.environ.get("REASONLOG_DEPLOYMENT_MODE", "local"),
                     max_body_bytes=int(os.environ.get("REASONLOG_SERVE_MAX_BODY", ingest.MAX_BYTES)),
                     exit_within_s=ending.EXIT_WITHIN_S, settle_heap=True, **_keep_from_environment())


def _keep_from_environment() -> dict[str, float]:
    """--keep-days and --keep-every, as `reasonlog serve --workers N` hands them to each worker."""
    keep = os.environ.get("REASONLOG_SERVE_KEEP")
    if not keep:
        return {}
    days, every = keep.split()
    return {"keep_days": float(days), "keep_every_s": float(every)}


def _requires(stores: Stores, needed: str, cookie: str | None = None):
    """A dependency: once any key exists, the request must carry a working one whose scope allows `needed`
    (as `Authorization: Bearer <key>`, or in the dashboard's cookie named `cookie` where one is given)."""
    def check(request: Request) -> None:
        try:
            store = stores.reader.get()
            if not store.has_api_keys():
                return  # no key yet: the server only listens on loopback (see cli/serve.py)
            token = dashboard.bearer_key(request) or (request.cookies.get(cookie, "") if cookie else "")
            scope = store.api_key_scope(token) if token else None
        except StoreError as exc:
            raise guards.unavailable(str(exc)) from None
        if scope is None:
            said = "a wrong or revoked API key" if token else "no API key"
            raise HTTPException(401, f"{said}: send Authorization: Bearer <key> (reasonlog keys create)",
                                headers={"WWW-Authenticate": "Bearer"})
        if not keys.allows(scope, needed):
            raise HTTPException(403, f"this key's scope is {scope}; this needs {needed}")
    return check
