"""`POST /v1/traces` and `POST /v1/logs`: OpenTelemetry spans of model calls, stored as sessions, calls and
messages (see io/otlp.py), and the GenAI events that some instrumentations send as log records instead.

OTLP/HTTP, protobuf (`application/x-protobuf`) or JSON (`application/json`), plain or compressed (gzip or
deflate, `Content-Encoding`), as any OpenTelemetry SDK's exporter sends them. The answer is an Export…
ServiceResponse in the request's encoding; what is not a model call (or a GenAI event) is left out and
counted in its partial success. A span sent twice is stored once.

Log records carrying message content (`gen_ai.user.message`, `gen_ai.choice`, ... with the trace and span
ids of their call) are held in this process until their span arrives, then read as that span's events. The
SDK's log processor exports every second and its span processor every five, so the records come first;
records whose span never comes are let go after `KEEP_S`, and at most `MAX_HELD` are held.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from starlette.concurrency import run_in_threadpool

from ..io import otlp
from ..io.otlp_logs import LogEvent, read_logs
from ..io.otlp_spans import OtlpError, Span, read_request
from ..store import Store
from ..wire.api import otlp_answer_schema
from ..wire.rules import RecordError
from . import guards

KEEP_S = 600.0
MAX_HELD = 100_000
RESPONSES: dict[int | str, dict[str, Any]] = {400: {"description": "Not an OTLP request; names the field"},
             413: {"description": "The body (once inflated) is larger than max_bytes"},
             415: {"description": "Neither application/x-protobuf nor application/json, or an encoding other"
                                  " than gzip and deflate"}}


def router(get_store: Callable[[], Store], writer: Any, max_bytes: int) -> APIRouter:
    api = APIRouter(prefix="/v1", dependencies=[writer], tags=["opentelemetry"])
    held = HeldEvents()

    @api.post("/traces", summary="Store OpenTelemetry GenAI, OpenInference and Claude Code model-call spans",
              responses={200: {"description": "An ExportTraceServiceResponse, protobuf or JSON as the request was",
                               "content": {"application/x-protobuf": {},
                                           "application/json": {"schema": otlp_answer_schema("rejectedSpans")}}},
                         **RESPONSES})
    async def traces(request: Request, store: Store = Depends(get_store)) -> Response:
        content_type = _content_type(request)
        try:
            spans = held.join(read_request(await guards.read_body(request, max_bytes), content_type))
            events, left_out = await run_in_threadpool(otlp.to_events, spans, store.existing_ids)
        except (OtlpError, RecordError) as exc:
            raise HTTPException(400, str(exc)) from None
        if events:
            await run_in_threadpool(store.write_batch, events)
        return _answer(content_type, "trace", left_out, "span(s) are not model calls")

    @api.post("/logs", summary="Take the GenAI events (messages) instrumentations send as OpenTelemetry log records",
              responses={200: {"description": "An ExportLogsServiceResponse, protobuf or JSON as the request was",
                               "content": {"application/x-protobuf": {},
                                           "application/json": {"schema": otlp_answer_schema("rejectedLogRecords")}}},
                         **RESPONSES})
    async def logs(request: Request) -> Response:
        content_type = _content_type(request)
        try:
            events, left_out = read_logs(await guards.read_body(request, max_bytes), content_type)
        except OtlpError as exc:
            raise HTTPException(400, str(exc)) from None
        held.add(events)
        return _answer(content_type, "logs", left_out, "log record(s) are not GenAI events of a span")

    return api


class HeldEvents:
    """GenAI events that came as log records, held by the span they belong to until that span comes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_span: OrderedDict[tuple[str, str], tuple[float, list[LogEvent]]] = OrderedDict()
        self._count = 0

    def add(self, events: list[LogEvent]) -> None:
        now = time.monotonic()
        with self._lock:
            for event in events:
                key = (event.trace_id, event.span_id)
                _, held = self._by_span.pop(key, (now, []))
                held.append(event)
                self._by_span[key] = (now, held)
                self._count += 1
            while self._by_span and (self._count > MAX_HELD or next(iter(self._by_span.values()))[0] < now - KEEP_S):
                self._count -= len(self._by_span.popitem(last=False)[1][1])

    def join(self, spans: list[Span]) -> list[Span]:
        """The spans, each with the events held for it added to its own (in time order)."""
        with self._lock:
            for span in spans:
                _, held = self._by_span.pop((span.trace_id, span.span_id), (0.0, []))
                self._count -= len(held)
                if held:
                    span.events = sorted([*span.events, *((e.name, e.time_ns, e.attributes) for e in held)],
                                         key=lambda e: e[1])
        return spans


def _content_type(request: Request) -> str:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and "protobuf" not in content_type and "json" not in content_type:
        raise HTTPException(415, f"Content-Type {content_type!r}: send application/x-protobuf or application/json")
    return content_type


def _answer(content_type: str, signal: str, left_out: int, what: str) -> Response:
    message = f"{left_out} {what} and were left out" if left_out else ""
    rejected = "rejectedSpans" if signal == "trace" else "rejectedLogRecords"
    if "json" in content_type:
        body = {"partialSuccess": {rejected: str(left_out), "errorMessage": message}} if left_out else {}
        return Response(orjson.dumps(body), media_type="application/json")
    if signal == "trace":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse as Answer
    else:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse as Answer
    answer = Answer()
    if left_out:
        setattr(answer.partial_success, "rejected_spans" if signal == "trace" else "rejected_log_records", left_out)
        answer.partial_success.error_message = message
    return Response(answer.SerializeToString(), media_type="application/x-protobuf")
