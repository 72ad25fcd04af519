"""`POST /v1/ingest`: the batches recorders send (`Recorder("https://…")`), written idempotently.

The body is the spill-file form of a batch, one JSON object a line: a header
`{"$reasonlog": "batch", "id": "<the client's batch id>", "counters": {...}}`, then one event a line as
`capture/spillfiles.py` writes them (`model.Event.to_dict()`, with bytes and big integers tagged). A batch
whose id was written already adds nothing, and so does a call, tool result or outcome the database
already holds (a spill file replayed after part of it went, in other bodies). The size limit is
advertised at `GET /v1/ingest`, and the client sizes its batches to it; a body past it is a 413, answered
as soon as the limit is passed (the rest is never read).

The answer says what was written and what the store rejected (an event whose data it cannot keep, such as
a call of a session it has not got), each with its line and why: `{"events": 2, "rejected": [{"line": 4,
"reason": "..."}]}`, a 200 while anything was written, a 422 when every event was rejected.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ..model import EVENT_TYPES, Event, load_event
from ..store import Store
from ..wire import IngestAnswerJSON, IngestLimitsJSON
from ..wire.rules import RecordError
from . import guards

MAX_BYTES = 8 << 20


def router(get_store: Callable[[], Store], writer: Any, max_bytes: int = MAX_BYTES) -> APIRouter:
    api = APIRouter(prefix="/v1", dependencies=[writer], tags=["ingestion"])

    @api.get("/ingest", summary="What a batch may be: its largest body in bytes")
    def limits() -> IngestLimitsJSON:
        return {"max_bytes": max_bytes, "format": "application/x-ndjson: a batch header, then one event a line"}

    @api.options("/ingest", include_in_schema=False)
    def ingest_options() -> Response:
        return Response(status_code=204, headers={"Allow": "GET, POST, OPTIONS"})

    @api.post("/ingest", summary="Write a batch of events; sent again, it adds nothing",
              response_model=IngestAnswerJSON,
              responses={200: {"description": "Written; `rejected` lists the events the store could not take"},
                         413: {"description": "The body is larger than max_bytes"},
                         422: {"description": "A line that is not an event (names the line and field), or a"
                                              " batch whose every event the store rejected (lists them)"}})
    async def ingest(request: Request, store: Store = Depends(get_store)) -> Any:
        batch_id, counters, lines = _parse(await guards.read_body(request, max_bytes))
        lines = await run_in_threadpool(_unwritten, store, lines)
        events = [event for _, event in lines]
        rejections: list[tuple[int, str]] = []
        written = await run_in_threadpool(
            lambda: store.write_batch(events, counters, batch_id=batch_id, rejections=rejections))
        rejected = [{"line": lines[index][0], "reason": reason} for index, reason in rejections]
        answer = {"batch_id": batch_id, "events": len(events) - len(rejected), "duplicate": not written,
                  "rejected": rejected}
        if rejected and len(rejected) == len(events):
            return JSONResponse(status_code=422, content={"detail": "the store rejected every event", **answer})
        return answer

    return api


ID_OF = {"call": ("call", "call_id"), "tool_result": ("tool_result", "tool_result_id"),
         "outcome": ("outcome", "outcome_id")}


def _unwritten(store: Store, lines: list[tuple[int, Event]]) -> list[tuple[int, Event]]:
    """The numbered events, less the calls, tool results and outcomes whose ids the database holds already."""
    held: dict[str, set[str]] = {}
    for kind, (store_kind, attr) in ID_OF.items():
        ids = [getattr(ev, attr) for _, ev in lines if ev.kind == kind and isinstance(getattr(ev, attr), str)]
        held[kind] = store.existing_ids(store_kind, ids) if ids else set()
    return [(n, ev) for n, ev in lines if ev.kind not in ID_OF or getattr(ev, ID_OF[ev.kind][1]) not in held[ev.kind]]


def _parse(body: bytes) -> tuple[str, dict, list[tuple[int, Event]]]:
    """The batch's id, its counters, and its events with their line numbers; a 422 naming the first bad line."""
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
            events.append((number, load_event(line)))
        except TypeError:
            raise HTTPException(422, f"line {number}: {_fields_wrong(line)}") from None
        except (orjson.JSONDecodeError, RecordError, ValueError, KeyError) as exc:
            raise HTTPException(422, f"line {number}: not an event ({exc})") from None
    return header["id"], counters, events


def _fields_wrong(line: bytes) -> str:
    """What is wrong with the fields of an event line that the event's type would not take."""
    data = orjson.loads(line)
    kind = data.get("event") if isinstance(data, dict) else None
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return f"not an event: expected an object whose event is one of {sorted(EVENT_TYPES)}"
    known = {f.name: f for f in fields(cls)}
    required = [name for name, f in known.items() if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    unknown = sorted(set(data) - set(known) - {"event"})
    said = [f"lacks {', '.join(missing)}" if missing else "", f"has unknown {', '.join(unknown)}" if unknown else ""]
    return (f"a {kind} event {' and '.join(x for x in said if x)}; it takes {', '.join(required)}"
            f" (required) and {', '.join(n for n in known if n not in required)}")
