"""OpenTelemetry spans of model calls into reasonlog's events (`POST /v1/traces`), and back (`export --format otlp`).

Three families of span are model calls; every other span is left out (and counted):

- the OpenTelemetry GenAI conventions, current form: `gen_ai.input.messages`, `gen_ai.output.messages` and
  `gen_ai.system_instructions` (JSON arrays of messages made of typed parts), `gen_ai.tool.definitions`,
  `gen_ai.usage.*`, where input tokens include the cached ones; and the older form, where the messages are
  span events (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message`, `gen_ai.choice`);
- OpenInference (`openinference.span.kind` LLM): flattened `llm.input_messages.N.message.*`,
  `llm.output_messages.N.message.*`, `llm.token_count.*` (prompt tokens include the cached ones);
- Claude Code's `claude_code.llm_request`: usage only, in Anthropic's sense (bare `input_tokens` exclude the
  cache), with `ttft_ms` and `stop_reason`.

A span becomes a call of the session its `gen_ai.conversation.id`, `session.id` or trace names, with an id
made from its trace and span ids: the same span sent twice is one call. Messages are stored as the
recorder stores them (Anthropic-style blocks: text, tool_use, tool_result, thinking), so a context resent
call after call is stored once.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson

from ..model import CallRecorded, Event, SessionStarted, Usage, format_instant, stable_id
from .otlp_spans import Span

SOURCE = "otlp"


def is_model_call(span: Span) -> bool:
    a = span.attributes
    return (span.name == "claude_code.llm_request" or a.get("openinference.span.kind") == "LLM"
            or any(k in a for k in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.request.model",
                                    "gen_ai.response.model", "gen_ai.usage.input_tokens"))
            or any(name.startswith("gen_ai.") for name, _, _ in span.events))


def session_key(span: Span) -> str:
    key = span.get("gen_ai.conversation.id", "session.id", "session_id")
    return str(key) if key else f"trace:{span.trace_id}"


def to_events(spans: list[Span], known: Any) -> tuple[list[Event], int]:
    """The events of the model-call spans (sessions first, calls by start time), and how many spans were left out.

    `known(kind, ids)` says which session and call ids the store holds already: those are not made again."""
    calls = [s for s in spans if is_model_call(s)]
    by_session: dict[str, list[Span]] = defaultdict(list)
    for span in sorted(calls, key=lambda s: (s.start_ns, s.span_id)):
        by_session[session_key(span)].append(span)
    # Spans of one conversation arrive in many requests: its id depends on its key alone, not on when.
    session_ids = {key: stable_id(None, SOURCE, key) for key in by_session}
    held_sessions = known("session", list(session_ids.values()))
    call_ids = {(s.trace_id, s.span_id): stable_id(_instant(s.start_ns), SOURCE, s.trace_id, s.span_id) for s in calls}
    held_calls = known("call", list(call_ids.values()))
    events: list[Event] = []
    for key, group in by_session.items():
        sid = session_ids[key]
        if sid not in held_sessions:
            first = group[0]
            events.append(SessionStarted(
                session_id=sid, started_at=_instant(first.start_ns), agent=first.get("service.name"),
                model=_model(first), provider=_provider(first), external_id=key,
                labels={"source": SOURCE, **({"trace_id": first.trace_id} if not key.startswith("trace:") else {})}))
        for span in group:
            cid = call_ids[(span.trace_id, span.span_id)]
            if cid not in held_calls:
                events.append(_call(span, sid, cid))
    return events, len(spans) - len(calls)


def _instant(ns: int) -> str:
    return format_instant(ns / 1e9) or ""


def _model(span: Span) -> str | None:
    return span.get("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "model")


def _provider(span: Span) -> str | None:
    if span.name == "claude_code.llm_request":
        return "anthropic"
    return span.get("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")


def _call(span: Span, session_id: str, call_id: str) -> CallRecorded:
    if span.attributes.get("openinference.span.kind") == "LLM":
        system, messages, output, tools = _openinference_messages(span.attributes)
    else:
        system, messages, output, tools = _genai_messages(span)
    request: dict[str, Any] = {"model": _model(span), "messages": messages}
    if system is not None:
        request["system"] = system
    if tools:
        request["tools"] = tools
    latency = (span.end_ns - span.start_ns) / 1e6 if span.end_ns >= span.start_ns > 0 else None
    ttft = span.get("ttft_ms", "gen_ai.server.time_to_first_token")
    if isinstance(ttft, float) and "gen_ai.server.time_to_first_token" in span.attributes:
        ttft *= 1000  # the convention gives seconds
    return CallRecorded(
        call_id=call_id, session_id=session_id, exchange_id=None, started_at=_instant(span.start_ns),
        request=request, response=output, model=_model(span), provider=_provider(span),
        stop_reason=_stop_reason(span), usage=_usage(span), latency_ms=latency,
        ttft_ms=float(ttft) if isinstance(ttft, (int, float)) else None,
        provider_message_id=span.get("gen_ai.response.id"), request_id=span.get("request_id"),
        status="error" if span.get("error.type") else "ok",
        error={"type": span.get("error.type")} if span.get("error.type") else None)


def _stop_reason(span: Span) -> str | None:
    reasons = span.get("gen_ai.response.finish_reasons", "stop_reason", "llm.finish_reason")
    if isinstance(reasons, list):
        return str(reasons[0]) if reasons else None
    return str(reasons) if reasons is not None else None


def _usage(span: Span) -> Usage | None:
    def number(*names: str) -> int:
        value = span.get(*names)
        return int(value) if isinstance(value, (int, float)) and value >= 0 else 0

    output = number("gen_ai.usage.output_tokens", "llm.token_count.completion", "output_tokens")
    reasoning = min(number("gen_ai.usage.reasoning.output_tokens",
                           "llm.token_count.completion_details.reasoning"), output)
    if span.name == "claude_code.llm_request":  # Anthropic's sense: bare input excludes the cache
        return Usage(input_tokens=number("input_tokens"), output_tokens=output,
                     cache_read_tokens=number("cache_read_tokens"),
                     cache_write_tokens=number("cache_creation_tokens"))
    total_in = number("gen_ai.usage.input_tokens", "llm.token_count.prompt")
    read = number("gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read")
    write = number("gen_ai.usage.cache_creation.input_tokens", "llm.token_count.prompt_details.cache_write")
    if not (total_in or output or read or write):
        return None
    return Usage(input_tokens=max(total_in - read - write, 0), output_tokens=output, cache_read_tokens=read,
                 cache_write_tokens=write, reasoning_tokens=reasoning)


# ------------------------------------------------------------------ GenAI messages


def _json(value: Any) -> Any:
    """A value an attribute or part holds as JSON text (an object or array), parsed; any other value as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _genai_messages(span: Span) -> tuple[Any, list, dict | None, list | None]:
    a = span.attributes
    system = _system(_json(a.get("gen_ai.system_instructions")))
    messages = [_message(m) for m in _json(a.get("gen_ai.input.messages")) or [] if isinstance(m, dict)]
    outputs = [_message(m) for m in _json(a.get("gen_ai.output.messages")) or [] if isinstance(m, dict)]
    tools = _json(a.get("gen_ai.tool.definitions"))
    if not messages and not outputs:  # the older form: one span event a message
        system, messages, outputs = _event_messages(span, system)
    return system, messages, outputs[0] if outputs else None, tools if isinstance(tools, list) else None


def _system(parts: Any) -> Any:
    if parts is None:
        return None
    if isinstance(parts, str):
        return parts
    blocks = [_block(p) for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    if all(b.get("type") == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def _message(m: dict) -> dict:
    role, parts = str(m.get("role") or "user"), m.get("parts")
    content: Any = [_block(p) for p in parts if isinstance(p, dict)] if isinstance(parts, list) else m.get("content")
    if role != "assistant" and isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
        content = content[0]["text"]  # a plain message, as agents send it (an assistant's is always blocks)
    return {"role": role, "content": content}


def _block(p: dict) -> dict:
    kind = p.get("type")
    if kind == "text":
        return {"type": "text", "text": str(p.get("content", ""))}
    if kind == "tool_call":
        return {"type": "tool_use", "id": p.get("id"), "name": p.get("name"), "input": _json(p.get("arguments"))}
    if kind == "tool_call_response":
        return {"type": "tool_result", "tool_use_id": p.get("id"), "content": p.get("response")}
    if kind == "reasoning":
        return {"type": "thinking", "thinking": str(p.get("content", ""))}
    return dict(p)


def _event_messages(span: Span, system: Any) -> tuple[Any, list, list]:
    messages, outputs = [], []
    for name, _, attrs in span.events:
        body = _json(attrs.get("gen_ai.event.content") or attrs.get("content") or attrs.get("message"))
        if name == "gen_ai.system.message":
            system = body.get("content") if isinstance(body, dict) else body
        elif name in ("gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"):
            role = name.split(".")[1]
            content = body.get("content") if isinstance(body, dict) else body
            message = {"role": role, "content": content}
            if role == "tool":
                message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": attrs.get("id") or
                                                        (body.get("id") if isinstance(body, dict) else None),
                                                        "content": content}]}
            messages.append(message)
        elif name == "gen_ai.choice":
            message = body.get("message", body) if isinstance(body, dict) else {"content": body}
            outputs.append({"role": "assistant", "content": message.get("content") if isinstance(message, dict)
                            else message})
    return system, messages, outputs


# ------------------------------------------------------------------ OpenInference


def _openinference_messages(a: dict) -> tuple[Any, list, dict | None, list | None]:
    inputs = _indexed(a, "llm.input_messages.")
    outputs = _indexed(a, "llm.output_messages.")
    messages = [_oi_message(m) for m in inputs]
    system_texts = [m["content"] for m in messages if m["role"] == "system" and isinstance(m["content"], str)]
    messages = [m for m in messages if m["role"] != "system"]
    tools = [_json(t.get("tool.json_schema")) for t in _indexed(a, "llm.tools.")] or None
    output = _oi_message(outputs[0]) if outputs else None
    return ("\n".join(system_texts) if system_texts else None), messages, output, tools


def _indexed(a: dict, prefix: str) -> list[dict]:
    """`prefix.N.rest` attributes as a list of {rest: value}, in N's order."""
    found: dict[int, dict] = defaultdict(dict)
    for key, value in a.items():
        if key.startswith(prefix):
            number, _, rest = key[len(prefix):].partition(".")
            if number.isdigit():
                found[int(number)][rest] = value
    return [found[n] for n in sorted(found)]


def _oi_message(m: dict) -> dict:
    role = str(m.get("message.role") or "user")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": str(c.get("message_content.text", ""))}
              for c in _indexed(m, "message.contents.") if c.get("message_content.type", "text") == "text"]
    text = m.get("message.content")
    if isinstance(text, str) and text:
        blocks.insert(0, {"type": "text", "text": text})
    blocks += [{"type": "tool_use", "id": t.get("tool_call.id"), "name": t.get("tool_call.function.name"),
                "input": _json(t.get("tool_call.function.arguments"))} for t in _indexed(m, "message.tool_calls.")]
    if role == "tool":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": m.get("message.tool_call_id"),
                                             "content": text}]}
    if role in ("system", "user") and len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": role, "content": blocks[0]["text"]}
    return {"role": role, "content": blocks}
