"""`POST /v1/reasoning-records` and `GET /v1/reasoning-records`: tiered reasoning records for agents on other
machines, saved and read back exactly as `reasonlog reason save` does (see reasonlog/reasoning)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from ..reasoning import PHASES, ReasonError, policy
from ..reasoning.saving import find_session, save
from ..store import Store, StoreError
from ..wire import ReasoningRecordsJSON, SavedRecordJSON


class RecordIn(BaseModel):
    session: str = Field(min_length=1, description="The session's id, or a name for it (made on first use)")
    phase: str = Field(description=" | ".join(PHASES))
    compact: dict[str, Any] = Field(description="The compact record (see docs/reasoning-records.md)")
    agent: str | None = None
    group: str | None = None
    details: str | None = Field(None, description="The long form: written to the server's artifact folder")
    confidence: str | None = None
    references: list[str] | None = None


def router(get_writer: Callable[[], Store], get_reader: Callable[[], Store], reader: Any, writer: Any) -> APIRouter:
    api = APIRouter(prefix="/v1", tags=["reasoning records"])

    @api.options("/reasoning-records", include_in_schema=False)
    def options() -> Response:
        return Response(status_code=204, headers={"Allow": "GET, POST, OPTIONS"})

    @api.post("/reasoning-records", dependencies=[writer], status_code=201,
              summary="Save a reasoning record; it is read back before the answer",
              responses={400: {"description": "A record over its limits or not valid; names the field and limit"}})
    async def create(record: RecordIn = Body(...), store: Store = Depends(get_writer)) -> SavedRecordJSON:
        try:
            saved, receipt = await run_in_threadpool(
                save, store, policy.load(), record.session, record.phase, record.compact, agent=record.agent,
                group=record.group, details=record.details, confidence=record.confidence,
                references=record.references)
        except ReasonError as exc:
            raise HTTPException(400, str(exc)) from None
        return SavedRecordJSON(receipt=receipt, record=saved)

    @api.get("/reasoning-records", dependencies=[reader], summary="Reasoning records, in the order saved",
             responses={400: {"description": "A parameter that cannot name anything (a NUL byte, an ambiguous"
                                             " session prefix); names it"},
                        404: {"description": "No such session"}})
    def list_records(session: str | None = Query(None, description="A session id or name"),
                     group: str | None = None, phase: str | None = None,
                     store: Store = Depends(get_reader)) -> ReasoningRecordsJSON:
        sid = None
        if session is not None:
            try:
                sid = find_session(store, session)
            except StoreError as exc:
                raise HTTPException(400, f"session: {exc}") from None
            if sid is None:
                raise HTTPException(404, f"session: no session {session!r}")
        return ReasoningRecordsJSON(records=store.list_reasoning_records(sid, group, phase))

    return api
