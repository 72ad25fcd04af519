"""`POST /v1/annotations` (write scope) and `GET /v1/annotations` (read scope): notes, labels and scores on a
session, an exchange or a call, as `reasonlog annotate` adds them (docs/review.md)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Body, Depends, HTTPException, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from ..store import Store, StoreError
from ..wire import AnnotationsJSON
from .errors import status_of


class AnnotationIn(BaseModel):
    target: str = Field(min_length=1, description="A session (id, prefix or external id), SESSION#N (its call N),"
                                                  " a call id or an exchange id")
    note: str | None = None
    labels: dict[str, str] | None = None
    scores: dict[str, float | str] | None = Field(None, description="name: a number, or a category (text)")
    by: str | None = Field(None, description="Who or what gave it: a person, a check, a judge model")
    source: Literal["human", "code", "llm"] = "human"


def router(get_writer: Callable[[], Store], get_reader: Callable[[], Store], reader: Any, writer: Any) -> APIRouter:
    api = APIRouter(prefix="/v1", tags=["annotations"])
    errors: dict[int | str, dict[str, Any]] = {
        400: {"description": "Nothing to add, or a value that cannot be one; names it"},
        404: {"description": "No session, exchange or call is the target"}}

    @api.post("/annotations", dependencies=[writer], status_code=201, responses=errors,
              summary="Add a note, labels and scores to a session, an exchange or a call")
    async def create(body: AnnotationIn = Body(...), store: Store = Depends(get_writer)) -> AnnotationsJSON:
        added = await run_in_threadpool(_answer, lambda: store.annotate(
            body.target, note=body.note, labels=body.labels, scores=body.scores, by=body.by, source=body.source))
        return AnnotationsJSON(annotations=added)

    @api.get("/annotations", dependencies=[reader], responses=errors,
             summary="The annotations of a target (a session: with its exchanges' and calls'), or the newest 1,000")
    def list_annotations(target: str | None = Query(None, description="As for POST; none: the newest"),
                         store: Store = Depends(get_reader)) -> AnnotationsJSON:
        return AnnotationsJSON(annotations=_answer(lambda: store.list_annotations(target)))

    return api


T = TypeVar("T")


def _answer(fetch: Callable[[], T]) -> T:
    try:
        return fetch()
    except StoreError as exc:
        raise HTTPException(status_of(exc), str(exc)) from None
