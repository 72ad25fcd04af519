"""reasonlog sessions as OTLP/JSON trace requests (`reasonlog export --format otlp`), in the current GenAI form.

One line per session: an ExportTraceServiceRequest whose spans are the session's calls, with the
conversation id, the model and provider, the messages sent and received as `gen_ai.input.messages`,
`gen_ai.system_instructions` and `gen_ai.output.messages` (typed parts), the tool definitions, and usage
where input tokens include the cached ones, as the conventions count them. Each line can be posted as it
is to an OpenTelemetry collector's `/v1/traces`, or to reasonlog's. A score on a call (docs/review.md) is a
`gen_ai.evaluation.result` event of its span. Trace and span ids are hashes of the
session and call ids, so exporting twice gives the same ids and a backend that keys by them keeps one copy.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import orjson

from .. import __version__
from ..store import StoreReader


def session_requests(store: StoreReader, session_ids: list[str]) -> Iterator[bytes]:
    """One OTLP/JSON line per session."""
    for sid in session_ids:
        session = store.get_session(sid)
        calls = store.call_details([c["id"] for c in session["calls"]])
        trace_id = _hash(sid, 16)
        spans = [_span(session, call, trace_id) for call in calls]
        scores = _call_scores(session.get("annotations") or ())
        for span, call in zip(spans, calls, strict=True):
            if call["id"] in scores:
                span["events"] = [_evaluation(a, call) for a in scores[call["id"]]]
        request = {"resourceSpans": [{
            "resource": {"attributes": _attributes({"service.name": session.get("agent") or "reasonlog"})},
            "scopeSpans": [{"scope": {"name": "reasonlog", "version": __version__}, "spans": spans}]}]}
        yield orjson.dumps(request)


def _span(session: Mapping[str, Any], call: Mapping[str, Any], trace_id: str) -> dict:
    request = call["request"] or {}
    start = _ns(call["started_at"])
    end = start + int((call.get("latency_ms") or 0) * 1e6)
    read, write = call.get("cache_read_tokens") or 0, call.get("cache_write_tokens") or 0
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": session["id"],
        "gen_ai.provider.name": call.get("provider") or session.get("provider"),
        "gen_ai.request.model": request.get("model") or call.get("model"), "gen_ai.response.model": call.get("model"),
        "gen_ai.response.id": call.get("provider_message_id"),
        "gen_ai.input.messages": orjson.dumps([_message(m) for m in request.get("messages") or []]).decode(),
    }
    if request.get("system") is not None:
        attributes["gen_ai.system_instructions"] = orjson.dumps(_parts(request["system"])).decode()
    if request.get("tools"):
        attributes["gen_ai.tool.definitions"] = orjson.dumps(request["tools"]).decode()
    if call.get("response") is not None:
        out = _message(call["response"]) | ({"finish_reason": call["stop_reason"]} if call.get("stop_reason") else {})
        attributes["gen_ai.output.messages"] = orjson.dumps([out]).decode()
    if call.get("stop_reason"):
        attributes["gen_ai.response.finish_reasons"] = [call["stop_reason"]]
    if call.get("input_tokens") is not None or call.get("output_tokens") is not None:
        attributes |= {"gen_ai.usage.input_tokens": (call.get("input_tokens") or 0) + read + write,
                       "gen_ai.usage.output_tokens": call.get("output_tokens") or 0,
                       "gen_ai.usage.cache_read.input_tokens": read, "gen_ai.usage.cache_creation.input_tokens": write}
        if call.get("reasoning_tokens"):
            attributes["gen_ai.usage.reasoning.output_tokens"] = call["reasoning_tokens"]
    if call.get("ttft_ms") is not None:
        attributes["gen_ai.server.time_to_first_token"] = call["ttft_ms"] / 1000
    if call.get("status") == "error":
        attributes["error.type"] = str((call.get("error") or {}).get("type") or "error")
    name = f"chat {call.get('model') or ''}".strip()
    return {"traceId": trace_id, "spanId": _hash(call["id"], 8), "name": name, "kind": 3,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": _attributes({k: v for k, v in attributes.items() if v is not None}),
            "status": {"code": 2} if call.get("status") == "error" else {}}


def _call_scores(annotations: Any) -> dict[str, list[dict]]:
    """A call's scores by call id: the conventions place an evaluation on the span of the operation it judges,
    so scores on a session or an exchange (no span of theirs), notes and labels have no place and stay out."""
    found: dict[str, list[dict]] = {}
    for a in annotations:
        if a["kind"] == "score" and a.get("call_id"):
            found.setdefault(a["call_id"], []).append(a)
    return found


def _evaluation(a: dict, call: Mapping[str, Any]) -> dict:
    """A score as a `gen_ai.evaluation.result` event: a number as `score.value`, a category as `score.label`."""
    value = a["value"]
    attributes = {"gen_ai.evaluation.name": a["name"], "gen_ai.response.id": call.get("provider_message_id"),
                  "reasonlog.annotation.source": a["source"], "reasonlog.annotation.by": a.get("by")}
    attributes["gen_ai.evaluation.score.value" if isinstance(value, int | float) else
               "gen_ai.evaluation.score.label"] = value
    return {"timeUnixNano": str(_ns(a["created_at"])), "name": "gen_ai.evaluation.result",
            "attributes": _attributes({k: v for k, v in attributes.items() if v is not None})}


def _message(m: Any) -> dict:
    if not isinstance(m, dict):
        return {"role": "user", "parts": _parts(m)}
    return {"role": str(m.get("role") or "user"), "parts": _parts(m.get("content"))}


def _parts(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, list):
        return [{"type": "text", "content": orjson.dumps(content).decode()}] if content is not None else []
    return [_part(b) for b in content]


def _part(b: Any) -> dict:
    if not isinstance(b, dict):
        return {"type": "text", "content": str(b)}
    kind = b.get("type")
    if kind == "text":
        return {"type": "text", "content": b.get("text", "")}
    if kind == "tool_use":
        return {"type": "tool_call", "id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")}
    if kind == "tool_result":
        return {"type": "tool_call_response", "id": b.get("tool_use_id"), "response": b.get("content")}
    if kind == "thinking":
        return {"type": "reasoning", "content": b.get("thinking", "")}
    return dict(b)


def _attributes(values: dict[str, Any]) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in values.items()]


def _value(v: Any) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _hash(text: str, size: int) -> str:
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def _ns(instant: str) -> int:
    return int(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp() * 1_000_000) * 1000
