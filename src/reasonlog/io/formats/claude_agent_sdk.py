"""Claude Agent SDK message dumps: the SDK's messages (system/init, assistant, user tool results, result,
stream events) saved as one JSON array or as JSONL, as its Python or TypeScript users often keep them.

They are recorded exactly as `reasonlog.claude_agent.ClaudeAgentLogger` records a live stream: the
logger is driven with the dump's messages and what it records is imported. So sessions per SDK session id,
sub-agents (`parent_tool_use_id`) as child sessions, the content blocks of one message id merged into one
call, and tokens and cost taken from the `result` messages' `modelUsage`, differenced per exchange.

A dump carries no times: its records are placed at the file's modification time, a microsecond apart
in the order of the stream. The user's prompts are not in the SDK's stream, so exchanges have no input.
A trimmed dump without its `system/init` message gets one (its session id, else one derived from the
dump, and the first reply's model), since the session opens there.
Ids are derived from the dump's bytes, so the same dump imported from two places is one session.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from ...capture.sinks import BaseSink, Outcome
from ...model import Event, SessionStarted, format_instant, stable_id
from ..importer import Checkpoint, Feed, FormatImporter, first_values, head, json_kind

NAME = "claude-agent-sdk"
SDK_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event"})
_ID_FIELDS = ("session_id", "exchange_id", "call_id", "tool_result_id", "outcome_id", "parent_session_id",
              "parent_call_id")
_AT_FIELDS = ("started_at", "ended_at", "at")


def _read(feed: Feed) -> Iterator[Event | Checkpoint]:
    messages = _messages(feed)
    if messages:
        digest = hashlib.blake2b(feed.read_bytes(), digest_size=16).hexdigest()
        yield from _rekeyed(feed, _record(feed, _with_init(messages, digest)), digest)
    yield feed.checkpoint(None, None)


def _looks_like_sdk(value: Any) -> bool:
    """An SDK message; Claude Code transcript lines (sessionId) and Codex lines (payload) are not."""
    return (isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in SDK_TYPES
            and ("parent_tool_use_id" in value or "session_id" in value or value.get("type") == "result")
            and not {"sessionId", "payload"} & value.keys())


def _mine(path: Path) -> bool:
    if path.suffix == ".json":
        start = head(path, 1 << 16)
        return start.lstrip().startswith(b"[") and b'"parent_tool_use_id"' in start
    return any(_looks_like_sdk(v) for v in first_values(path, 3))


importer = FormatImporter(
    NAME, "Claude Agent SDK message dumps (a JSON array or JSONL of the SDK's messages)", _read, incremental=False,
    files=("*.json", "*.jsonl"), recognises=_mine)


def _messages(feed: Feed) -> list[tuple[int, dict]]:
    if feed.path.suffix == ".json":
        try:
            data = orjson.loads(feed.read_bytes())
        except orjson.JSONDecodeError as exc:
            feed.skip(None, f"not JSON ({str(exc).split(':', 1)[0]})")
            return []
        if not isinstance(data, list):
            feed.skip(None, "expected a JSON array of SDK messages")
            return []
        items = list(enumerate(data, 1))
    else:
        items = [(line.number, line.value) for line in feed.lines() if feed.readable(line)]
    out = []
    for where, message in items:
        wrong = _shape_error(message)
        if wrong is None:
            out.append((where, message))
        else:
            _skip(feed, where, wrong)
    return out


def _skip(feed: Feed, where: int, reason: str) -> None:
    """Report message `where`: by its line in JSONL, by its place in the array of a JSON file."""
    if feed.path.suffix == ".json":
        feed.skip(None, f"message {where}: {reason}")
    else:
        feed.skip(where, reason)


def _shape_error(message: Any) -> str | None:
    """What is wrong with the shape of an SDK message, in words, or None when the logger can take it."""
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return "expected an SDK message (an object with a `type`)"
    kind = message["type"]
    inner = message.get("message")
    if kind in ("assistant", "user"):
        if not isinstance(inner, dict):
            return f"{kind}: expected `message` as an object, got {_name(inner)}"
        if not isinstance(inner.get("content"), (list, str, type(None))):
            return f"{kind}: expected `message.content` as a list of blocks or a text, got {_name(inner['content'])}"
        if not isinstance(inner.get("usage"), (dict, type(None))):
            return f"{kind}: expected `message.usage` as an object, got {_name(inner['usage'])}"
        wrong = _count_error(inner.get("usage") or {}, "message.usage")
        if wrong is not None:
            return f"{kind}: {wrong}"
    for field in ("usage", "modelUsage", "model_usage", "event"):
        if not isinstance(message.get(field), (dict, type(None))):
            return f"{kind}: expected `{field}` as an object, got {_name(message[field])}"
    models = message.get("modelUsage") or message.get("model_usage") or {}
    bad = next((m for m, figures in models.items() if not isinstance(figures, dict)), None)
    if bad is not None:
        return f"{kind}: expected `modelUsage.{bad}` as an object of figures, got {_name(models[bad])}"
    cost = message.get("total_cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
        return f"{kind}: expected `total_cost_usd` as a number, got {_name(cost)}"
    return None


_COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _count_error(usage: dict, where: str) -> str | None:
    for key in _COUNTS:
        value = usage.get(key)
        if value is not None and (type(value) is not int or value < 0):
            return f"expected `{where}.{key}` as a non-negative integer, got {value!r}"
    split = usage.get("cache_creation")
    if split is not None and not isinstance(split, dict):
        return f"expected `{where}.cache_creation` as an object, got {_name(split)}"
    for key, value in (split or {}).items():
        if value is not None and (type(value) is not int or value < 0):
            return f"expected `{where}.cache_creation.{key}` as a non-negative integer, got {value!r}"
    return None


_name = json_kind


def _with_init(messages: list[tuple[int, dict]], digest: str) -> list[tuple[int, dict]]:
    """The stream with its system/init first: a trimmed dump may lack it, and the logger opens the session there."""
    if any(m.get("type") == "system" and m.get("subtype") == "init" for _, m in messages):
        return messages
    model = next((m["message"].get("model") for _, m in messages
                  if m.get("type") == "assistant" and isinstance(m.get("message"), dict)), None)
    session = next((m["session_id"] for _, m in messages if isinstance(m.get("session_id"), str)),
                   f"dump-{digest[:12]}")
    return [(0, {"type": "system", "subtype": "init", "session_id": session, "model": model}), *messages]


def _record(feed: Feed, messages: list[tuple[int, dict]]) -> list[Event]:
    """What ClaudeAgentLogger records of these messages, collected from a recorder's sink. The recorder is strict,
    so a message the logger cannot record is reported here with its place, and the others are recorded."""
    from ...capture.recorder import Recorder
    from ...claude_agent import ClaudeAgentLogger
    from ...wire.rules import RecordError

    sink = _Collect()
    recorder = Recorder(writer="sync", sink=sink, redact=False, strict=True)  # no database: collected
    logger = ClaudeAgentLogger(recorder)
    for where, message in messages:
        try:
            logger.log(message)
        except RecordError as exc:
            _skip(feed, where, f"{message.get('type')}: not recorded ({_cause(exc)})")
    try:
        logger.close()
    except (RecordError, TypeError, ValueError, KeyError, AttributeError) as exc:
        # What was still open at the end of the dump could not be written (the logger's own errors end here).
        feed.skip(None, f"the end of the dump: not recorded ({_cause(exc)})")
    recorder.close()
    return sink.events


def _cause(exc: Exception) -> str:
    """The logger's reason without its wrapping (`claude agent message: KeyError('id')`)."""
    text = str(exc).removeprefix("claude agent message: ")
    return text


class _Collect(BaseSink):
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        self.events.extend(events)
        return "written"

    def add_counters(self, counters: dict[str, int]) -> None:
        pass

    def close(self) -> None:
        pass


def _rekeyed(feed: Feed, events: list[Event], digest: str) -> Iterator[Event]:
    """The events with ids derived from the dump and instants from the file, in the stream's order."""
    base = datetime.fromtimestamp(feed.path.stat().st_mtime, UTC)
    ids: dict[str, str] = {}
    if events and isinstance(events[0], SessionStarted) and feed.exists("session", stable_id(None, NAME, digest, 0)):
        return  # this very dump was imported already (from another path): its first id is its session's
    for k, event in enumerate(events):
        at = format_instant(base + timedelta(microseconds=k))
        for f in fields(event):
            value = getattr(event, f.name)
            if f.name in _ID_FIELDS and isinstance(value, str):
                setattr(event, f.name, ids.setdefault(value, stable_id(None, NAME, digest, len(ids))))
            elif f.name in _AT_FIELDS:
                setattr(event, f.name, at)
        yield event
