"""Per-interaction conversation JSON: one file per model call (`logs/conversation_<session>_<time>.json`), as an
iterative consulting agent writes them:

    {timestamp, session_id, user_input, llm_response,
     metrics: {llm_time_ms, tokens_input, tokens_output, cache_tokens_saved, iteration, interaction_type,
               tools_executed, tools_successful, tools_failed},
     request_metadata: {system_prompt, conversation_history_sent_to_llm, sliding_window_info: {enabled,
               max_context_tokens, total_turns_in_session, total_tokens_in_session, turns_in_context,
               turns_removed}, model_id, max_tokens, temperature, stop_reason}}

- Files with one `session_id` are one session, their calls in time order. Each file is a call: its
  request is what the file says was sent (system prompt, the history, the user input when the history
  does not end with it, max_tokens, temperature), its response `llm_response`, its latency
  `llm_time_ms`, its stop reason, and the sliding-window facts as the call's context facts. The history
  is stored once however many files resend it, so storage grows with the session, not its square.
- Tokens: `tokens_input` is all the input, of which `cache_tokens_saved` was read from the cache;
  `tokens_output` is the output.
- The agent calls tools by writing XML-like tags in its text (`<read_file>…</read_file>`): the tags found
  are given to the session, so its tool calls show as such.
- An interaction of `iteration` 1 opens an exchange with its `user_input`; later iterations (tool
  follow-ups) go on in the exchange of that input.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, format_instant, stable_id
from ...wire.rules import RecordError
from ..importer import Checkpoint, Feed, FormatImporter, head

NAME = "interactions"
_TAG = re.compile(r"<([A-Za-z_][\w-]*)(?:\s[^>]*)?>.*?</\1\s*>", re.DOTALL)
_REQUIRED = ("timestamp", "session_id", "llm_response", "request_metadata")


def _read(feed: Feed) -> Iterator[Event | Checkpoint]:
    record = _load(feed)
    if record is not None:
        yield from _call_events(feed, record)
    yield feed.checkpoint(None, None)


def _mine(path: Path) -> bool:
    start = head(path, 1 << 16)
    return start.lstrip().startswith(b"{") and b'"request_metadata"' in start and b'"llm_response"' in start


# Names carry the session and the time (conversation_<session>_<YYYYmmdd_HHMMSS>.json): sorted, the calls of a
# session come in order.
importer = FormatImporter(
    NAME, "per-interaction conversation JSON (one file per model call, with the history sent)", _read,
    incremental=False, files=("*.json",), recognises=_mine)


def _load(feed: Feed) -> dict | None:
    try:
        record = orjson.loads(feed.read_bytes())
    except orjson.JSONDecodeError as exc:
        feed.skip(None, f"not JSON ({str(exc).split(':', 1)[0]})")
        return None
    if not isinstance(record, dict):
        feed.skip(None, "expected a JSON object")
        return None
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        feed.skip(None, f"missing field(s) {', '.join(missing)}")
        return None
    return record


def _call_events(feed: Feed, record: dict) -> Iterator[Event]:
    try:
        at = format_instant(record["timestamp"]) or ""
    except RecordError as exc:
        feed.skip(None, f"timestamp: {exc}")
        return
    meta = record["request_metadata"] if isinstance(record["request_metadata"], dict) else {}
    metrics: dict = record["metrics"] if isinstance(record.get("metrics"), dict) else {}
    logged, response = str(record["session_id"]), record["llm_response"]
    sid = stable_id(None, NAME, logged)
    model = meta.get("model_id") if isinstance(meta.get("model_id"), str) else None
    known: dict[str, Any] | None = dict(feed.store.get_session(sid)) if feed.exists("session", sid) else None
    tags = sorted(set((known or {}).get("xml_tool_tags") or ()) | set(_tags(response)))
    if known is None or set(tags) != set(known.get("xml_tool_tags") or ()):
        yield ev.SessionStarted(session_id=sid, started_at=(known or {}).get("started_at") or at, agent=NAME,
                                model=model, labels={"source": NAME}, external_id=logged, xml_tool_tags=tags or None)
    exchange = yield from _exchange(feed, sid, known, record, metrics, at)
    try:
        usage = _usage(metrics)
    except RecordError as exc:
        feed.skip(None, f"metrics: {exc}")
        usage = None
    latency = metrics.get("llm_time_ms")
    yield ev.CallRecorded(call_id=stable_id(at, NAME, logged, at), session_id=sid, exchange_id=exchange, started_at=at,
                          request=_request(record, meta, model), response={"role": "assistant", "content": response},
                          model=model, stop_reason=meta.get("stop_reason") if isinstance(meta.get("stop_reason"), str)
                          else None, usage=usage,
                          latency_ms=latency if isinstance(latency, (int, float)) and latency >= 0 else None,
                          context_facts=meta.get("sliding_window_info")
                          if isinstance(meta.get("sliding_window_info"), dict) else None)
    yield ev.ExchangeEnded(exchange_id=exchange, session_id=sid, ended_at=at)
    yield ev.SessionEnded(session_id=sid, ended_at=at)


def _exchange(feed: Feed, sid: str, known: dict | None, record: dict, metrics: dict, at: str):
    """The exchange this interaction belongs to: a new one for a first iteration, else its input's last one."""
    user_input = record.get("user_input")
    if metrics.get("iteration") not in (None, 1) and known is not None:
        same = [e for e in known.get("exchanges") or () if e.get("input") == user_input]
        if same:
            return same[-1]["id"]
    exchange = stable_id(at, NAME, sid, "exchange", at)
    yield ev.ExchangeStarted(exchange_id=exchange, session_id=sid, started_at=at, input=user_input)
    return exchange


def _request(record: dict, meta: dict, model: str | None) -> dict:
    history = meta.get("conversation_history_sent_to_llm")
    messages = list(history) if isinstance(history, list) else []
    user_input = record.get("user_input")
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if user_input and not (last.get("role") == "user" and last.get("content") == user_input):
        messages.append({"role": "user", "content": user_input})
    request: dict[str, Any] = {"model": model, "messages": messages}
    if meta.get("system_prompt") is not None:
        request["system"] = meta["system_prompt"]
    for key in ("max_tokens", "temperature"):
        if meta.get(key) is not None:
            request[key] = meta[key]
    return request


def _usage(metrics: dict) -> Usage | None:
    total_in, out, cached = metrics.get("tokens_input"), metrics.get("tokens_output"), metrics.get("cache_tokens_saved")
    if total_in is None and out is None:
        return None
    for name, value in (("tokens_input", total_in), ("tokens_output", out), ("cache_tokens_saved", cached)):
        if value is not None and (type(value) is not int or value < 0):
            raise RecordError(f"{name}: expected a non-negative integer, got {value!r}")
    cached = min(cached or 0, total_in or 0)
    return Usage(input_tokens=(total_in or 0) - cached, cache_read_tokens=cached, output_tokens=out or 0)


def _tags(text: Any) -> list[str]:
    return sorted({m.group(1) for m in _TAG.finditer(text)}) if isinstance(text, str) else []
