"""`POST /v1/traces`: OpenTelemetry spans of model calls, stored as sessions, calls and messages (see io/otlp.py).

OTLP/HTTP, protobuf (`application/x-protobuf`) or JSON (`application/json`), as any OpenTelemetry SDK's
exporter sends them. The answer is an ExportTraceServiceResponse in the request's encoding; spans that are
not model calls are left out and counted in its partial success. A span sent twice is stored once.
"""
from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from starlette.concurrency import run_in_threadpool

from ..io import otlp
from ..io.otlp_spans import OtlpError, read_request
from ..parts import RecordError
from ..store import Store


def router(get_store: Any, writer: Any, max_bytes: int) -> APIRouter:
    api = APIRouter(prefix="/v1", dependencies=[writer], tags=["opentelemetry"])

    @api.post("/traces", summary="Store OpenTelemetry GenAI, OpenInference and Claude Code model-call spans",
              responses={200: {"description": "An ExportTraceServiceResponse, protobuf or JSON as the request was",
                               "content": {"application/x-protobuf": {}, "application/json": {}}},
                         400: {"description": "Not an OTLP trace request; names the field"},
                         413: {"description": "The body is larger than max_bytes"},
                         415: {"description": "Neither application/x-protobuf nor application/json"}})
    async def traces(request: Request, store: Store = Depends(get_store)) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type and "protobuf" not in content_type and "json" not in content_type:
            raise HTTPException(415, f"Content-Type {content_type!r}: send application/x-protobuf or application/json")
        if request.headers.get("content-encoding", "identity") not in ("identity", ""):
            raise HTTPException(415, "Content-Encoding: send the body uncompressed")
        body = await request.body()
        if len(body) > max_bytes:
            raise HTTPException(413, f"body: {len(body)} bytes, more than max_bytes {max_bytes}")
        try:
            spans = read_request(body, content_type)
            events, left_out = await run_in_threadpool(otlp.to_events, spans, store.existing_ids)
        except (OtlpError, RecordError) as exc:
            raise HTTPException(400, str(exc)) from None
        if events:
            await run_in_threadpool(store.write_batch, events)
        return _answer(content_type, left_out)

    return api


def _answer(content_type: str, left_out: int) -> Response:
    message = f"{left_out} span(s) are not model calls and were left out" if left_out else ""
    if "json" in content_type:
        body = {"partialSuccess": {"rejectedSpans": str(left_out), "errorMessage": message}} if left_out else {}
        return Response(orjson.dumps(body), media_type="application/json")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    answer = ExportTraceServiceResponse()
    if left_out:
        answer.partial_success.rejected_spans = left_out
        answer.partial_success.error_message = message
    return Response(answer.SerializeToString(), media_type="application/x-protobuf")
