"""OTLP log requests, protobuf or JSON, read into the GenAI events they carry: the first half of `POST /v1/logs`.

Instrumentations that keep message content off spans send it as log records instead, one per message
(OpenTelemetry's own openai-v2 does by default): `event_name` (or the `event.name` attribute) is
`gen_ai.user.message`, `gen_ai.choice`, ..., the body holds the content, and the record names the trace and
span of its call. `read_logs(body, content_type)` gives those as `LogEvent`s, in the shape of span events
(`Span.events`), so that the span they belong to reads them as if they had come on it; what is not a GenAI
event is counted and left out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .otlp_spans import OtlpError, _attributes, _field, _hex, _int, _json_value, _pb_value, parsed


@dataclass(frozen=True)
class LogEvent:
    trace_id: str
    span_id: str
    name: str
    time_ns: int
    attributes: dict[str, Any]  # the record's attributes, and its body as `gen_ai.event.content`


def read_logs(body: bytes, content_type: str) -> tuple[list[LogEvent], int]:
    """The GenAI events of an ExportLogsServiceRequest, and how many records were not such events."""
    if "json" in content_type:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OtlpError(f"body: not JSON ({exc})") from None
        records = _from_json(data)
    elif "protobuf" in content_type or not content_type:
        records = _from_protobuf(body)
    else:
        raise OtlpError(f"Content-Type {content_type!r}: expected application/x-protobuf or application/json")
    events = [event for event in records if event is not None]
    return events, len(records) - len(events)


def _event(trace_id: str, span_id: str, name: Any, time_ns: int, attributes: dict, body: Any) -> LogEvent | None:
    name = name or attributes.get("event.name") or attributes.get("gen_ai.event.name")
    if not isinstance(name, str) or not name.startswith("gen_ai.") or not trace_id or not span_id:
        return None  # not a GenAI event, or one that names no call to join
    return LogEvent(trace_id, span_id, name, time_ns, {**attributes, "gen_ai.event.content": body})


def _from_protobuf(body: bytes) -> list[LogEvent | None]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = parsed(body, ExportLogsServiceRequest())
    records = []
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                records.append(_event(
                    r.trace_id.hex(), r.span_id.hex(), getattr(r, "event_name", ""),
                    r.time_unix_nano or r.observed_time_unix_nano,
                    {kv.key: _pb_value(kv.value) for kv in r.attributes},
                    _pb_value(r.body) if r.HasField("body") else None))
    return records


def _from_json(data: Any) -> list[LogEvent | None]:
    records = []
    for i, rl in enumerate(_field(data, "resourceLogs", list, "body")):
        where = f"resourceLogs[{i}]"
        for j, sl in enumerate(_field(rl, "scopeLogs", list, where, [])):
            for k, r in enumerate(_field(sl, "logRecords", list, f"{where}.scopeLogs[{j}]", [])):
                at = f"{where}.scopeLogs[{j}].logRecords[{k}]"
                if not isinstance(r, dict):
                    raise OtlpError(f"{at}: expected an object")
                records.append(_event(
                    _hex(r, "traceId", at, required=False) or "", _hex(r, "spanId", at, required=False) or "",
                    r.get("eventName"), _int(r.get("timeUnixNano") or r.get("observedTimeUnixNano") or 0, at),
                    _attributes(r.get("attributes") or [], at),
                    _json_value(r["body"]) if isinstance(r.get("body"), dict) else None))
    return records
