"""`POST /v1/ingest`: the batches recorders send (`Recorder("https://…")`), written idempotently.

The body is the spill-file form of a batch, one JSON object a line: a header
`{"$reasonlog": "batch", "id": "<the client's batch id>", "counters": {...}}`, then one event a line as
`capture/spillfiles.py` writes them (`model.Event.to_dict()`, with bytes and big integers tagged). A batch
whose id was written already adds nothing, and so does a call, tool result or outcome the database
already holds (a spill file replayed after part of it went, in other bodies). The size limit is
advertised at `GET /v1/ingest`, and the client sizes its batches to it; a body past it is a 413.
"""
from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from ..capture.spillfiles import load_event
from ..parts import RecordError
from ..store import Store

MAX_BYTES = 8 << 20


def router(get_store: Any, writer: Any, max_bytes: int = MAX_BYTES) -> APIRouter:
    api = APIRouter(prefix="/v1", dependencies=[writer], tags=["ingestion"])

    @api.get("/ingest", summary="What a batch may be: its largest body in bytes")
    def limits() -> dict:
        return {"max_bytes": max_bytes, "format": "application/x-ndjson: a batch header, then one event a line"}

    @api.post("/ingest", summary="Write a batch of events; sent again, it adds nothing",
              responses={413: {"description": "The body is larger than max_bytes"},
                         422: {"description": "A line that is not an event; names the line"}})
    async def ingest(request: Request, store: Store = Depends(get_store)) -> dict:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise HTTPException(413, f"body: {declared} bytes, more than max_bytes {max_bytes}")
        body = await request.body()
        if len(body) > max_bytes:
            raise HTTPException(413, f"body: {len(body)} bytes, more than max_bytes {max_bytes}")
        batch_id, counters, events = _parse(body)
        events = await run_in_threadpool(_unwritten, store, events)
        written = await run_in_threadpool(lambda: store.write_batch(events, counters, batch_id=batch_id))
        return {"batch_id": batch_id, "events": len(events), "duplicate": not written}

    return api


ID_OF = {"call": ("call", "call_id"), "tool_result": ("tool_result", "tool_result_id"),
         "outcome": ("outcome", "outcome_id")}


def _unwritten(store: Store, events: list) -> list:
    """The events, less the calls, tool results and outcomes whose ids the database holds already."""
    held: dict[str, set[str]] = {}
    for kind, (store_kind, attr) in ID_OF.items():
        ids = [getattr(ev, attr) for ev in events if ev.kind == kind and isinstance(getattr(ev, attr), str)]
        held[kind] = store.existing_ids(store_kind, ids) if ids else set()
    return [ev for ev in events if ev.kind not in ID_OF or getattr(ev, ID_OF[ev.kind][1]) not in held[ev.kind]]


def _parse(body: bytes) -> tuple[str, dict, list]:
    lines = [line for line in body.split(b"\n") if line.strip()]
    if not lines:
        raise HTTPException(422, "line 1: expected the batch header, got an empty body")
    try:
        header = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("$reasonlog") != "batch" or not isinstance(header.get("id"), str):
        raise HTTPException(422, 'line 1: expected {"$reasonlog": "batch", "id": "...", "counters": {...}}')
    counters = header.get("counters") or {}
    if not isinstance(counters, dict) or not all(type(v) is int and v >= 0 for v in counters.values()):
        raise HTTPException(422, "line 1: counters must map names to non-negative integers")
    events = []
    for number, line in enumerate(lines[1:], 2):
        try:
            events.append(load_event(line))
        except (orjson.JSONDecodeError, RecordError, TypeError, ValueError, KeyError) as exc:
            raise HTTPException(422, f"line {number}: not an event ({exc})") from None
    return header["id"], counters, events
