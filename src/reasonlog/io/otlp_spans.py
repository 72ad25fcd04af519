"""OTLP trace requests, protobuf or JSON, read into plain spans: the first half of `POST /v1/traces`.

`read_request(body, content_type)` gives `Span`s whatever the encoding: ids as lowercase hex, times in
nanoseconds, attribute values as Python values (arrays as lists, key-value lists as dicts), the resource's
attributes folded under the span's own. A body that is neither gives an `OtlpError` naming what was wrong.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson


class OtlpError(ValueError):
    """The body is not an OTLP trace request; the message names the field."""


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)

    def get(self, *names: str) -> Any:
        """The first of these attributes the span (or its resource) has."""
        for name in names:
            if name in self.attributes:
                return self.attributes[name]
        for name in names:
            if name in self.resource:
                return self.resource[name]
        return None


def read_request(body: bytes, content_type: str) -> list[Span]:
    """The spans of an ExportTraceServiceRequest in OTLP/protobuf or OTLP/JSON."""
    if "json" in content_type:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OtlpError(f"body: not JSON ({exc})") from None
        return _from_json(data)
    if "protobuf" in content_type or not content_type:
        return _from_protobuf(body)
    raise OtlpError(f"Content-Type {content_type!r}: expected application/x-protobuf or application/json")


# ------------------------------------------------------------------ protobuf


def parsed(body: bytes, request: Any) -> Any:
    """`request` (an empty OTLP protobuf request of the kind expected) filled from `body`, or an OtlpError naming it."""
    from google.protobuf.message import DecodeError

    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpError(f"body: not an OTLP/protobuf {type(request).__name__} ({exc})") from None
    return request


def _from_protobuf(body: bytes) -> list[Span]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = parsed(body, ExportTraceServiceRequest())
    spans = []
    for rs in request.resource_spans:
        resource = {kv.key: _pb_value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append(Span(
                    trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_span_id=s.parent_span_id.hex() or None,
                    name=s.name, start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attributes={kv.key: _pb_value(kv.value) for kv in s.attributes},
                    events=[(e.name, e.time_unix_nano, {kv.key: _pb_value(kv.value) for kv in e.attributes})
                            for e in s.events],
                    resource=resource))
    return spans


def _pb_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return getattr(v, which)


# ------------------------------------------------------------------ JSON


def _from_json(data: Any) -> list[Span]:
    resource_spans = _field(data, "resourceSpans", list, "body")
    spans = []
    for i, rs in enumerate(resource_spans):
        where = f"resourceSpans[{i}]"
        resource = _attributes(_field(_field(rs, "resource", dict, where, {}), "attributes", list, where, []), where)
        for j, ss in enumerate(_field(rs, "scopeSpans", list, where, [])):
            for k, s in enumerate(_field(ss, "spans", list, f"{where}.scopeSpans[{j}]", [])):
                at = f"{where}.scopeSpans[{j}].spans[{k}]"
                spans.append(Span(
                    trace_id=_hex(s, "traceId", at) or "", span_id=_hex(s, "spanId", at) or "",
                    parent_span_id=_hex(s, "parentSpanId", at, required=False), name=str(s.get("name", "")),
                    start_ns=_int(s.get("startTimeUnixNano", 0), f"{at}.startTimeUnixNano"),
                    end_ns=_int(s.get("endTimeUnixNano", 0), f"{at}.endTimeUnixNano"),
                    attributes=_attributes(s.get("attributes") or [], at),
                    events=[(str(e.get("name", "")), _int(e.get("timeUnixNano", 0), f"{at}.events[{n}].timeUnixNano"),
                             _attributes(e.get("attributes") or [], f"{at}.events[{n}]"))
                            for n, e in enumerate(s.get("events") or [])],
                    resource=resource))
    return spans


def _field(obj: Any, name: str, kind: type, where: str, default: Any = ...) -> Any:
    if not isinstance(obj, dict):
        raise OtlpError(f"{where}: expected an object")
    value = obj.get(name, default)
    if value is ...:
        raise OtlpError(f"{where}.{name}: missing")
    if not isinstance(value, kind):
        raise OtlpError(f"{where}.{name}: expected {'an array' if kind is list else 'an object'}")
    return value


def _hex(span: dict, name: str, where: str, required: bool = True) -> str | None:
    value = span.get(name)
    if not value:
        if required:
            raise OtlpError(f"{where}.{name}: missing")
        return None
    try:
        bytes.fromhex(value)
    except (TypeError, ValueError):
        raise OtlpError(f"{where}.{name}: expected hex, got {value!r}") from None
    return value.lower()


def _int(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise OtlpError(f"{where}: expected an integer, got {value!r}") from None


def _attributes(items: list, where: str) -> dict[str, Any]:
    out = {}
    for n, kv in enumerate(items):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise OtlpError(f"{where}.attributes[{n}]: expected {{\"key\": ..., \"value\": ...}}")
        out[kv["key"]] = _json_value(kv.get("value") or {})
    return out


def _json_value(v: dict) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_json_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: _json_value(kv.get("value") or {}) for kv in (v["kvlistValue"] or {}).get("values", [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None
