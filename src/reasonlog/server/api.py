"""The versioned read API under `/v1`: runs, sessions (the CLI's filters, full-text search, cursor pages), one
session (its messages paged), a call's exact request, the difference between two calls, statistics.

Bodies are the store's JSON forms (see docs/architecture.md, "The JSON forms"). Lists answer empty arrays,
never 404; a missing session or call is a 404; a bad parameter is a 400 or 422 naming it.
"""
from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Depends, HTTPException, Query

from .. import query
from ..model import format_instant
from ..semantic import EmbeddingFailed, SemanticUnavailable
from ..semantic import search as semantic
from ..store import SearchStore, SessionFilter, StoreError, StoreReader
from ..store.annotation import ScoreTest
from ..wire import (
    CallDetailJSON,
    DiffJSON,
    OutcomesJSON,
    RequestBody,
    RunsJSON,
    SearchJSON,
    SessionPageJSON,
    SessionsPageJSON,
    SimilarSessionsJSON,
    StatKey,
    StatsJSON,
)
from ..wire.rules import RecordError
from .errors import status_of
from .stores import reader_of

T = TypeVar("T")
MAX_PAGE = 500
ERROR = {"content": {"application/json": {"example": {"detail": "what was wrong, naming the parameter"}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "A parameter the server cannot read (a date, a cursor, a search); names it", **ERROR},
    404: {"description": "No session or call has that id", **ERROR}}
# The /v1 routes; the app includes them behind the read scope (`app.include_router(api.router, dependencies=…)`).
router = APIRouter(prefix="/v1", tags=["v1"], responses=ERRORS)


@router.get("/runs", summary="Runs with their calls, tokens and cost")
def runs(store: StoreReader = Depends(reader_of)) -> RunsJSON:
    return RunsJSON(runs=query.stats(store, "run", SessionFilter(limit=None)))


@router.get("/sessions", summary="Sessions, newest first, filtered, searched and paged by cursor")
def sessions(run: str | None = None, agent: str | None = None, model: str | None = None,
             status: str | None = None, label: list[str] = Query([], description="KEY=VALUE, repeatable"),
             since: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
             until: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
             q: str | None = Query(None, description="Only sessions whose text contains this"),
             score: list[str] = Query([], description="NAME<0.5, NAME=pass (<, <=, >, >=, =, !=): a score on"
                                                      " the session or in it passes; repeatable"),
             has_note: bool = Query(False, description="Only sessions with a note on them or in them"),
             limit: int = Query(50, ge=1, le=MAX_PAGE), cursor: str | None = None,
             store: StoreReader = Depends(reader_of)) -> SessionsPageJSON:
    flt = SessionFilter(run=run, agent=agent, model=model, status=status, labels=_labels(label),
                        since=_when("since", since), until=_when("until", until), limit=limit + 1,
                        after=_cursor(cursor), text=q or None, scores=_scores(score), has_note=has_note)
    try:
        page = store.list_sessions(flt)
    except (ValueError, StoreError) as exc:  # a search it cannot read
        if not q:
            raise
        raise HTTPException(400, f"q: {exc}") from None
    more = len(page) > limit
    page = page[:limit]
    return SessionsPageJSON(sessions=page, next_cursor=_next(page[-1]) if more and page else None)


@router.get("/search", summary="Messages, tool results and outcomes that match q: as written (mode text), by"
                             " keywords, by meaning (semantic), or both ranks fused (hybrid)")
def search(q: str = Query(..., min_length=1, description="What to look for"),
           mode: str | None = Query(None, description="text, keywords, semantic or hybrid (default: hybrid once"
                                                      " something is embedded, else text)"),
           limit: int = Query(50, ge=1, le=MAX_PAGE), run: str | None = None, agent: str | None = None,
           model: str | None = None, status: str | None = None,
           since: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
           until: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
           store: SearchStore = Depends(reader_of)) -> SearchJSON:
    flt = SessionFilter(run=run, agent=agent, model=model, status=status, since=_when("since", since),
                        until=_when("until", until), limit=None)
    try:
        chosen = semantic.mode_of(mode or semantic.default_mode(store))
        hits = semantic.search(store, q, chosen, flt, limit)
    except (ValueError, StoreError) as exc:
        about = "mode" if isinstance(exc, SemanticUnavailable) else "embeddings" if isinstance(
            exc, EmbeddingFailed) else "q"
        raise HTTPException(status_of(exc), f"{about}: {exc}") from None
    return SearchJSON(mode=chosen, hits=hits)


@router.get("/sessions/{session_id}/similar", summary="Sessions like this one: nearest by the mean of their"
                                                   " embedded units (empty before anything is embedded)")
def similar(session_id: str, limit: int = Query(10, ge=1, le=100),
            store: SearchStore = Depends(reader_of)) -> SimilarSessionsJSON:
    found = _found(lambda: store.resolve_id("session", session_id), "session", session_id)
    model, rows = semantic.similar_sessions(store, found, limit)
    return SimilarSessionsJSON(model=model, sessions=rows)


@router.get("/sessions/{session_id}", summary="One session: its calls, exchanges, outcomes, a page of messages,"
                                           " and the summaries of the session, its exchanges and messages")
def session(session_id: str, offset: int = Query(0, ge=0, description="Timeline position to start at"),
            limit: int = Query(200, ge=1, le=5000), store: StoreReader = Depends(reader_of)) -> SessionPageJSON:
    # A page of the timeline (positions [offset, offset + limit)) with only the calls, tool results and
    # outcomes anchored in it: a 50,000-message session costs a page, not its 25,000 calls.
    end = offset + limit
    found = _found(lambda: store.get_session(store.resolve_id("session", session_id), page=(offset, end)),
                   "session", session_id)
    found = query.with_summaries(store, found)
    full = len(found["messages"]) + len(found["system_prompts"]) == limit  # positions are contiguous
    return {**found, "tool_results": [r for r in found["tool_results"] if offset <= r["message_idx"] < end],
            "outcomes": [r for r in found["outcomes"] if offset <= r["message_idx"] < end],
            # a call whose inputs and reply fall on two pages belongs to its reply's
            "calls": [c for c in found["calls"] if c["response_idx"] is None or offset <= c["response_idx"] < end],
            "next_offset": end if full else None}


@router.get("/calls/{call_id}", summary="One call: its request as sent, response, tokens, cost and timing")
def call(call_id: str, store: StoreReader = Depends(reader_of)) -> CallDetailJSON:
    return _found(lambda: store.get_call(store.resolve_id("call", call_id)), "call", call_id)


@router.get("/calls/{call_id}/request", summary="The exact request a call sent (replay)")
def request(call_id: str, store: StoreReader = Depends(reader_of)) -> RequestBody:
    return _found(lambda: store.replay_call(store.resolve_id("call", call_id)), "call", call_id)


@router.get("/diff", summary="What changed in the context window from call a to call b")
def diff(a: str, b: str, store: StoreReader = Depends(reader_of)) -> DiffJSON:
    first = _found(lambda: store.resolve_id("call", a), "call", a)
    second = _found(lambda: store.resolve_id("call", b), "call", b)
    return query.diff_calls(store, first, second)


@router.get("/outcomes", summary="What agents did (trades, moves, files), newest first")
def outcomes(kind: str | None = None, run: str | None = None, agent: str | None = None,
             model: str | None = None, session: str | None = None,
             since: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
             until: str | None = Query(None, description="YYYY-MM-DD or an ISO-8601 instant"),
             limit: int = Query(100, ge=1, le=MAX_PAGE), store: StoreReader = Depends(reader_of)) -> OutcomesJSON:
    flt = SessionFilter(run=run, agent=agent, model=model, since=_when("since", since),
                        until=_when("until", until), limit=limit)
    sid = None if session is None else _found(lambda: store.resolve_id("session", session), "session", session)
    return OutcomesJSON(outcomes=store.list_outcomes(flt, kind, sid))


@router.get("/stats", summary="Calls, errors, tokens by kind and cost, by day, model, agent, run or source")
def stats(by: StatKey = "day", run: str | None = None,
          agent: str | None = None, model: str | None = None, since: str | None = None,
          until: str | None = None, store: StoreReader = Depends(reader_of)) -> StatsJSON:
    flt = SessionFilter(run=run, agent=agent, model=model, since=_when("since", since),
                        until=_when("until", until), limit=None)
    return StatsJSON(by=by, rows=query.stats(store, by, flt))


def _found(fetch: Callable[[], T], what: str, ident: str) -> T:
    try:
        return fetch()
    except StoreError as exc:
        raise HTTPException(status_of(exc), f"{what} {ident}: {exc}") from None


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise HTTPException(400, f"label: expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _scores(tests: list[str]) -> tuple[ScoreTest, ...]:
    try:
        return tuple(ScoreTest.parse(t) for t in tests)
    except StoreError as exc:
        raise HTTPException(400, str(exc)) from None


def _when(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        if len(value) == 10:
            return date.fromisoformat(value).isoformat()
        if len(value) > 10 and value[10] == "T":
            return format_instant(value)
    except (ValueError, RecordError):
        pass
    raise HTTPException(400, f"{name}: {value!r} is not a valid date; expected YYYY-MM-DD or an ISO-8601 instant")


def _next(session: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([session["started_at"], session["id"]])).decode().rstrip("=")


def _cursor(cursor: str | None) -> tuple[str, str] | None:
    if cursor is None:
        return None
    try:
        started_at, sid = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(started_at, str) and isinstance(sid, str):
            return started_at, sid
    except (ValueError, TypeError, orjson.JSONDecodeError):
        pass
    raise HTTPException(400, "cursor: not a cursor this API gave (use next_cursor as it came)")
