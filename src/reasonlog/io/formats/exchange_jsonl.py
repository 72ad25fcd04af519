"""Exchange-based session JSONL: `session_start`, one `exchange` line per exchange, `session_end`.

The format Claude Agent SDK session loggers write, and `reasonlog export --format exchange-jsonl`
(see `io/exchange_jsonl.py` for its fields). Importing an export and exporting it again gives the
same lines.

- `session_start` opens the session (reasonlog's id is derived from the logged `session_id`, which is
  kept as the external id); `cwd`, `tools_available` and `permission_mode` become labels.
- Each `exchange` is an exchange whose input is `user_input`. Its `messages` become calls: a run of
  assistant items (`text`, `tool_use`) logged at one instant is one call's response, and the request
  of each call is the conversation before it. Tool items become tool results and join the
  conversation as the next user message.
- The exchange's `stats` (turns, durations, tokens, cost) are the figures the logger reported. They are
  kept on the exchange, and every reader counts them for it (see `reasonlog.accounting`), so the
  calls themselves carry no usage.
- A logger that was resumed appends more exchanges, and more `session_end` lines, to the same file: each
  `session_end` moves the session's end; exchanges after it belong to the same session.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import model as ev
from ...model import Event, format_instant, stable_id
from ...wire.rules import RecordError
from ..importer import Checkpoint, Feed, FormatImporter, Line

NAME = "exchange-jsonl"
_STATS = (("tokens_in", "input_tokens"), ("tokens_out", "output_tokens"), ("cache_creation", "cache_write_tokens"),
          ("cache_read", "cache_read_tokens"))


importer = FormatImporter(
    NAME, "exchange-based session JSONL (session_start / exchange / session_end lines)",
    lambda feed: _Reader(feed).run(), opens=lambda first: first.get("type") == "session_start")


class _Reader:
    def __init__(self, feed: Feed):
        self.feed = feed
        state = feed.state or {}
        self.sid: str | None = state.get("sid")
        self.model: str | None = state.get("model")
        self.history: list | None = None if self.sid else []

    def run(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.lines():
            if self.feed.readable(line):
                try:
                    yield from self._line(line)
                except (RecordError, TypeError, ValueError, AttributeError) as exc:
                    self.feed.skip(line, f"{exc}")
            yield self.feed.checkpoint(line, {"sid": self.sid, "model": self.model})

    def _line(self, line: Line) -> Iterator[Event]:
        v = line.value
        kind = v.get("type") if isinstance(v, dict) else None
        if kind == "session_start":
            yield from self._start(v)
        elif kind not in ("exchange", "session_end"):
            self.feed.skip(line, f"unknown line type {kind!r} (expected session_start, exchange or session_end)")
        elif self.sid is None:
            self.feed.skip(line, f"a {kind} line before any session_start")
        elif kind == "exchange":
            yield from self._exchange(v, line)
        else:
            yield ev.SessionEnded(session_id=self.sid, ended_at=_instant(v.get("ts"), "ts"))

    def _start(self, v: dict) -> Iterator[Event]:
        logged = v.get("session_id")
        if not isinstance(logged, str) or not logged:
            raise ValueError("session_start: `session_id` must be a non-empty string")
        at = _instant(v.get("ts"), "ts")
        sid = stable_id(at, NAME, logged)
        self.model = v.get("model") if isinstance(v.get("model"), str) else None
        if sid == self.sid or self.feed.exists("session", sid):
            self.sid = sid  # a resumed logger wrote its start again: same session
            return
        self.sid, self.history = sid, []
        tools = v.get("tools_available")
        labels = {k: str(val) for k, val in (("cwd", v.get("cwd")), ("permission_mode", v.get("permission_mode")))
                  if val is not None}
        if isinstance(tools, list) and tools:
            labels["tools"] = ",".join(map(str, tools))
        yield ev.SessionStarted(session_id=sid, started_at=at, model=self.model, labels=labels, external_id=logged)

    def _exchange(self, v: dict, line: Line) -> Iterator[Event]:
        sid = self.sid
        assert sid is not None
        start = _instant(v.get("ts_start"), "ts_start")
        number = v.get("exchange", line.number)
        exchange = stable_id(start, NAME, sid, "exchange", number)
        user_input = v.get("user_input")
        yield ev.ExchangeStarted(exchange_id=exchange, session_id=sid, started_at=start, input=user_input)
        history = self._history()
        history.append({"role": "user", "content": user_input if user_input is not None else ""})
        items = v.get("messages") or []
        if not isinstance(items, list):
            raise ValueError("exchange: `messages` must be a list")
        for k, (at, blocks, results) in enumerate(_turns(items, start)):
            if blocks:
                response = {"role": "assistant", "content": blocks}
                yield ev.CallRecorded(call_id=stable_id(at, NAME, sid, number, k), session_id=sid, exchange_id=exchange,
                                      started_at=at, request={"model": self.model, "messages": list(history)},
                                      response=response, model=self.model, stable_history=True)
                history.append(response)
            for r in results:
                yield ev.ToolResultRecorded(tool_result_id=stable_id(r["at"], NAME, sid, number, k, r["id"]),
                                            session_id=sid, at=r["at"], tool_use_id=r["id"], content=r["output"],
                                            is_error=r["is_error"])
            if results:
                history.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": r["id"], "content": r["output"], "is_error": r["is_error"]}
                    for r in results]})
        end = v.get("ts_end")
        yield ev.ExchangeEnded(exchange_id=exchange, session_id=sid, ended_at=_instant(end, "ts_end") if end else start,
                               stats=_stats(v.get("stats")))

    def _history(self) -> list:
        if self.history is None:
            assert self.sid is not None
            self.history = self.feed.history(self.sid)
        return self.history


def _turns(items: list, start: str) -> Iterator[tuple[str, list, list]]:
    """(instant, assistant blocks, tool results) per call: assistant items logged at one instant are one
    response; the tool results after them answer it."""
    at, blocks, results = start, [], []  # type: ignore[var-annotated]
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("exchange: every message must be an object")
        ts = _instant(item.get("ts"), "messages[].ts") if item.get("ts") else at
        if item.get("source") == "tool":
            results.append({"id": item.get("tool_use_id"), "output": item.get("output"),
                            "is_error": bool(item.get("is_error")), "at": ts})
            continue
        if results or (blocks and ts != at):
            yield at, blocks, results
            blocks, results = [], []
        at = ts
        if item.get("type") == "tool_use":
            blocks.append({"type": "tool_use", "id": item.get("tool_use_id"), "name": item.get("name"),
                           "input": item.get("input") if item.get("input") is not None else {}})
        else:
            blocks.append({"type": "text", "text": item.get("text") or ""})
    if blocks or results:
        yield at, blocks, results


def _stats(stats: Any) -> dict | None:
    """The logger's figures, under the names every reader counts (tokens_in -> input_tokens, ...)."""
    if not isinstance(stats, dict):
        return None
    out = {k: stats[k] for k in ("num_turns", "duration_ms", "duration_api_ms") if stats.get(k) is not None}
    out |= {column: stats[name] for name, column in _STATS if isinstance(stats.get(name), int)}
    cost = stats.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
        out["cost_usd"] = cost
    return out


def _instant(value: Any, field: str) -> str:
    try:
        at = format_instant(value)
    except RecordError as exc:
        raise ValueError(f"{field}: {exc}") from None
    if at is None:
        raise ValueError(f"{field}: expected an ISO-8601 instant")
    return at
