"""The web dashboard: server-rendered pages over the same query functions as the API (see docs/dashboard.md).

Pages are Jinja2 templates with autoescaping; recorded Markdown is sanitised (render.py); the only script is
the dashboard's own static file, and every page is served with a Content-Security-Policy that forbids inline
scripts. When API keys exist, the dashboard asks for one and keeps it in a session cookie; the person who ran
`reasonlog ui` signs in once with the token in the address it opened (owner.py)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from ...store import KeyStore, Store, StoreError, keys
from .. import live
from ..errors import status_of
from . import compare, owner, pages
from .render import HERE, page

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
       " form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
COOKIE = "reasonlog_key"
REVIEWER = "dashboard"  # the `by` of a review given in the dashboard (a key names no person)
# A key's scope, or None: `key_scope(store, secret)`.
KeyScope = Callable[[KeyStore, str], str | None]


def mount(app: Any, get_store: Callable[[], Store], key_scope: KeyScope, login_token: str | None = None,
          get_writer: Any = None) -> live.Hub:
    """Add the dashboard's pages at `/`, its live events at `/live` and its files at `/static` to `app`; the
    hub of the live events (the app closes it when it stops).

    `key_scope(store, secret)` gives a key's scope or None; with no key made yet every page is open.
    `login_token`: the one-time token `reasonlog ui` puts in the address it opens (see owner.py).
    `get_writer`: the store the review queue's annotations are written to (default: `get_store`'s)."""
    hub = live.Hub(get_store)
    app.state.dashboard = Dashboard(get_store, key_scope, owner.OwnerLogin(login_token), hub, get_writer or get_store)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(router)

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        if response.headers.get("content-type", "").startswith("text/html"):
            response.headers["Content-Security-Policy"] = CSP
            response.headers["X-Content-Type-Options"] = "nosniff"
            response.headers["Referrer-Policy"] = "no-referrer"
        return response

    return hub


def bearer_key(request: Request) -> str:
    """The key of an `Authorization: Bearer <key>` header, or ""."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def error_page(message: str) -> str:
    """The dashboard's error page saying `message` (the app answers it when the database cannot be used)."""
    return page("error.html", message=message, title="The database cannot be used now")


def review_items(note: str, verdict: str, score: str) -> dict[str, Any]:
    """The review form's fields as `annotate` takes them: the note, `verdict=pass|fail`, and `NAME=VALUE`."""
    scores: dict[str, Any] = {}
    if verdict:
        if verdict not in ("pass", "fail"):
            raise ValueError(f"verdict: expected pass or fail, got {verdict!r}")
        scores["verdict"] = verdict
    if score.strip():
        name, sep, value = score.strip().partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"score: expected NAME=VALUE (task_done=0.5), got {score!r}")
        scores[name.strip()] = value.strip()
    return {"note": note.strip() or None, "scores": scores}


@dataclass(frozen=True)
class Dashboard:
    """What the pages need besides the request (`app.state.dashboard`, set by `mount`): the stores, how a key is
    checked, the owner's sign-in and the live events' hub."""

    get_store: Callable[[], Any]
    key_scope: Callable[[Any, str], str | None]
    owner_login: owner.OwnerLogin
    hub: live.Hub
    get_writer: Callable[[], Any]

    def signed_in(self, store: Any, request: Request) -> bool:
        """No key made yet; or the owner's sign-in; or a working key, in the cookie the sign-in form sets or as
        `Authorization: Bearer <key>` (a script fetching `/usage.csv`), as the API takes it."""
        return (not store.has_api_keys() or self.owner_login.knows(request.cookies.get(owner.COOKIE))
                or self.key_scope(store, request.cookies.get(COOKIE, "")) is not None
                or self.key_scope(store, bearer_key(request)) is not None)

    def can_write(self, store: Any, request: Request) -> bool:
        if not store.has_api_keys() or self.owner_login.knows(request.cookies.get(owner.COOKIE)):
            return True
        scope = self.key_scope(store, request.cookies.get(COOKIE, "")) or self.key_scope(store, bearer_key(request))
        return scope is not None and keys.allows(scope, "write")

    def html(self, request: Request, template: str, build, *args: Any) -> Response:
        """The page `template` renders with what `build(store, *args)` gathers (cached until the record changes);
        the sign-in page for a visitor without a key, the error page for a store error."""
        store = self.get_store()
        if not self.signed_in(store, request):
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        key = self.hub.page_key(store, f"{request.url.path}?{request.url.query}")
        cached = self.hub.pages.get(key)
        if cached is not None:
            return HTMLResponse(cached)
        try:
            context = build(store, *args)
        except (StoreError, ValueError) as exc:
            return HTMLResponse(page("error.html", message=str(exc)), status_code=status_of(exc))
        body = page(template, request=request, **context)
        self.hub.pages.put(key, body)
        return HTMLResponse(body)


async def dashboard_of(request: Request) -> Dashboard:
    """The app's `Dashboard` (`Depends(dashboard_of)`); async, so it takes no thread of the pool."""
    return request.app.state.dashboard


# The pages, each a function of the request and the app's `Dashboard`; `mount` includes them.
router = APIRouter(include_in_schema=False)


@router.get("/")
async def sessions_page(request: Request, run: str | None = None, agent: str | None = None,
                        model: str | None = None, status: str | None = None, source: str | None = None,
                        since: str | None = None, until: str | None = None, q: str | None = None,
                        mode: str | None = None, sort: str = "started", after: str | None = None,
                        score: str | None = None, has_note: str | None = None,
                        d: Dashboard = Depends(dashboard_of)) -> Response:
    f = pages.Filters(run or None, agent or None, model or None, status or None, source or None,
                      since or None, until or None, q or None, mode or None, score or None, has_note or None)
    cursor = (after.split("|", 1)[0], after.split("|", 1)[1]) if after and "|" in after else None
    return await run_in_threadpool(d.html, request, "sessions.html",
                                   lambda s: {**pages.sessions(s, f, sort, cursor), "f": f, "sort": sort})


@router.get("/sessions/{session_id}")
async def session_page(request: Request, session_id: str, view: str = "full", offset: int = Query(0, ge=0),
                       limit: int = Query(pages.PAGE, ge=1, le=2000), d: Dashboard = Depends(dashboard_of)) -> Response:
    def build(s):
        found = s.resolve_id("session", session_id)
        return {**pages.session(s, found, view, offset, limit), "links": compare.links_of(s, found)}
    return await run_in_threadpool(d.html, request, "session.html", build)


@router.get("/review")
async def review_page(request: Request, at: int = Query(0, ge=0), d: Dashboard = Depends(dashboard_of)) -> Response:
    return await run_in_threadpool(d.html, request, "review.html", lambda s: pages.review(s, at))


@router.post("/review")
async def review_one(request: Request, session: str = Form(...), at: int = Form(0), note: str = Form(""),
                     verdict: str = Form(""), score: str = Form(""), d: Dashboard = Depends(dashboard_of)) -> Response:
    """A person's review of one session from the queue: a note, a verdict (pass / fail) and a NAME=VALUE score
    (any of them), written with source `human`; then the queue again, the next session chosen."""
    def write() -> Response:
        store = d.get_store()
        if not d.can_write(store, request):
            return HTMLResponse(page("error.html", message="reviewing needs a key with the write scope"),
                                status_code=403)
        try:
            d.get_writer().annotate(session, **review_items(note, verdict, score), by=REVIEWER, source="human")
        except (StoreError, ValueError) as exc:
            return HTMLResponse(page("error.html", message=str(exc)), status_code=status_of(exc))
        return RedirectResponse(f"/review?at={at}", status_code=303)
    return await run_in_threadpool(write)


@router.get("/compare")
async def compare_page(request: Request, a: str, b: str, start: int = Query(0, ge=0),
                       d: Dashboard = Depends(dashboard_of)) -> Response:
    def build(s):
        return compare.compare_sessions(s, s.resolve_id("session", a), s.resolve_id("session", b), start)
    return await run_in_threadpool(d.html, request, "compare.html", build)


@router.get("/sessions/{session_id}/timeline")
async def timeline_page(request: Request, session_id: str, offset: int = Query(0, ge=0),
                        d: Dashboard = Depends(dashboard_of)) -> Response:
    def build(s):
        return pages.session_timeline(s, s.resolve_id("session", session_id), offset)
    return await run_in_threadpool(d.html, request, "timeline.html", build)


@router.get("/calls/{call_id}")
async def call_page(request: Request, call_id: str, against: str | None = None,
                    d: Dashboard = Depends(dashboard_of)) -> Response:
    def build(s):
        return pages.call(s, s.resolve_id("call", call_id), s.resolve_id("call", against) if against else None)
    return await run_in_threadpool(d.html, request, "call.html", build)


@router.get("/usage")
async def usage_page(request: Request, since: str | None = None, until: str | None = None,
                     split: str = "model", d: Dashboard = Depends(dashboard_of)) -> Response:
    return await run_in_threadpool(d.html, request, "usage.html",
                                   lambda s: pages.usage(s, since or None, until or None, split))


@router.get("/usage.csv")
async def usage_csv(request: Request, by: str = "day", since: str | None = None,
                    until: str | None = None, d: Dashboard = Depends(dashboard_of)) -> Response:
    store = d.get_store()
    if not d.signed_in(store, request):
        return PlainTextResponse("a key is needed: /login", status_code=401)
    try:
        body = await run_in_threadpool(pages.usage_csv, store, by, since or None, until or None)
    except ValueError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    return PlainTextResponse(body, media_type="text/csv",
                             headers={"Content-Disposition": f'attachment; filename="usage-by-{by}.csv"'})


@router.get("/login")
async def login_form(next: str = "/", token: str | None = None, d: Dashboard = Depends(dashboard_of)) -> Response:
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    if token is None:
        return HTMLResponse(page("login.html", next=target, failed=False))
    session = d.owner_login.redeem(token)
    if session is None:  # spent, or never this server's: a key still opens the dashboard
        return HTMLResponse(page("login.html", next=target, failed=False, spent=True), status_code=401)
    response = RedirectResponse(target, status_code=303)  # the address bar and history lose the token
    response.set_cookie(owner.COOKIE, session, httponly=True, samesite="strict")  # a session cookie
    return response


@router.post("/login")
async def login(key: str = Form(...), next: str = Form("/"), d: Dashboard = Depends(dashboard_of)) -> Response:
    store = d.get_store()
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    if d.key_scope(store, key.strip()) is None:
        return HTMLResponse(page("login.html", next=target, failed=True), status_code=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, key.strip(), httponly=True, samesite="strict")  # a session cookie
    return response


@router.get("/live")
async def live_events(request: Request, d: Dashboard = Depends(dashboard_of)) -> Response:
    """What changed, as server-sent events (server/live.py); the same key as the pages, cookie or Bearer."""
    store = d.get_store()
    if not await run_in_threadpool(d.signed_in, store, request):
        return PlainTextResponse("a key is needed: /login", status_code=401)
    return StreamingResponse(live.events(d.hub, request.is_disconnected), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
