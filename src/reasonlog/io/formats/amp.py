"""Amp threads: `~/.local/share/amp/threads/T-<id>.json` (`$AMP_DATA_DIR/threads`; `$XDG_DATA_HOME/amp/threads`).

A thread is one JSON document that Amp rewrites as it goes: `{id, created (ms), title, messages, usageLedger, env}`.
`messages` are `{role, messageId, content: [blocks]}` with Messages-style blocks (`text`, `thinking`, `tool_use`;
Amp's `tool_result` has `toolUseID` and `run: {status, result}`); an assistant message may carry `usage`
(`model`, `inputTokens`, `outputTokens`, `cacheCreationInputTokens`, `cacheReadInputTokens`, `timestamp`).
`usageLedger.events` is the record of billed requests: `{timestamp, model, tokens: {input, output}, credits,
toMessageId}`.

- **Session**: the thread's id; agent `amp`; labels `source=amp`, `title`, `cwd` (the first workspace tree).
- **Calls**: each ledger event is one billed request, with the message it produced (`toMessageId`) as its response
  and that message's cache tokens; an assistant message with usage and no event is a call too. Request: the
  conversation before the message. Tokens are Anthropic's split (input without cache reads and writes).
- **Cost**: Amp's `credits` are its own billing unit, not dollars, so calls are priced by reasonlog at the model's
  list prices.
- **Tool results**: `tool_result` blocks (`run.status` error or cancelled: failed).

Not incremental: a thread is rewritten whole, so a changed thread is imported again whole.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import object_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, head, instant, json_kind

NAME = "amp"
FAILED = ("error", "cancelled", "rejected-by-user")


def _read(feed: Feed) -> Iterator[Event | Checkpoint]:
    thread = feed.document(lambda v: isinstance(v.get("id"), str) and isinstance(
        v.get("messages"), list), "expected a thread object with a string `id` and a `messages` list", "a thread Amp")
    if thread is not None:
        yield from _Thread(feed, thread).events()
        yield feed.checkpoint(None, None)


def _mine(path: Path) -> bool:
    start = head(path) if path.name.startswith("T-") and path.suffix == ".json" else b""
    return b'"messages"' in start or b'"created"' in start


importer = FormatImporter(
    NAME, "Amp threads (~/.local/share/amp/threads/T-*.json)", _read, incremental=False,
    home=Home(".local/share/amp", ("threads",), env=("AMP_DATA_DIR", "XDG_DATA_HOME/amp")), files=("T-*.json",),
    recognises=_mine)


class _Thread:
    def __init__(self, feed: Feed, thread: dict):
        self.feed, self.thread = feed, thread
        self.sid: str = thread["id"]
        self.created = _ms(thread.get("created")) or instant(feed.path.stat().st_mtime, numbers=True) or ""
        self.at = self.created
        self.exchange: str | None = None
        self.window: list = []
        self.events_by_message = self._ledger()

    def _ledger(self) -> dict[Any, list[dict]]:
        """The ledger's events by the message they produced (None: an event that names none)."""
        ledger = self.thread.get("usageLedger")
        events = ledger.get("events") if isinstance(ledger, dict) else None
        out: dict[Any, list[dict]] = {}
        for k, event in enumerate(events if isinstance(events, list) else []):
            if not isinstance(event, dict):
                self.feed.skip(None, "a ledger event that is not an object", record=f"usageLedger.events[{k}]")
            elif not isinstance(event.get("toMessageId"), (str, int, type(None))):
                self.feed.skip(None, f"expected `toMessageId` as a text, got {json_kind(event['toMessageId'])}",
                               record=f"usageLedger.events[{k}]")
            else:
                out.setdefault(event.get("toMessageId"), []).append({**event, "$index": k})
        return out

    def events(self) -> Iterator[Event]:
        yield self._start()
        for k, message in enumerate(self.thread["messages"]):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant") or not isinstance(
                    message.get("content"), list):
                self.feed.skip(None, "a message needs a `role` (user or assistant) and a `content` list",
                               record=f"messages[{k}]")
                continue
            if not isinstance(message.get("messageId"), (str, int, type(None))):
                self.feed.skip(None, f"expected `messageId` as a text, got {json_kind(message['messageId'])}",
                               record=f"messages[{k}]")
                continue
            if f"messages[{k}]" in self.feed.passed:
                continue  # the importer failed on it before: passed over (io/import_file.py)
            blocks = [b for b in message["content"] if isinstance(b, dict) and isinstance(b.get("type"), str)]
            with self.feed.record(f"messages[{k}]"):
                yield from self._user(message, blocks, k) if message["role"] == "user" else \
                    self._assistant(message, blocks, k)
        for event in self.events_by_message.pop(None, []):  # billed, but for no message in the thread
            yield from self._call(None, [], event, None, f"usageLedger.events[{event['$index']}]")
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at)
        yield ev.SessionEnded(session_id=self.sid, ended_at=self.at)

    def _start(self) -> ev.SessionStarted:
        labels = {"source": NAME}
        if isinstance(self.thread.get("title"), str):
            labels["title"] = self.thread["title"]
        env = self.thread.get("env")
        initial = env.get("initial") if isinstance(env, dict) else None
        trees = initial.get("trees") if isinstance(initial, dict) else None
        uri = trees[0].get("uri") if isinstance(trees, list) and trees and isinstance(trees[0], dict) else None
        if isinstance(uri, str):
            labels["cwd"] = uri.removeprefix("file://")
        return ev.SessionStarted(session_id=self.sid, started_at=self.created, agent=NAME, labels=labels,
                                 external_id=self.sid)

    def _user(self, message: dict, blocks: list[dict], k: int) -> Iterator[Event]:
        at = _ms((message.get("meta") or {}).get("sentAt") if isinstance(message.get("meta"), dict) else None)
        self.at = max(self.at, at or self.at)
        results = [b for b in blocks if b["type"] == "tool_result"]
        texts = [b["text"] for b in blocks if b["type"] == "text" and isinstance(b.get("text"), str)]
        yield from self._results(results, k)
        if texts:
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at)
            self.exchange = stable_id(self.at, NAME, self.sid, "exchange", message.get("messageId", k))
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid, started_at=self.at,
                                     input="\n".join(texts))
        self.window.append({"role": "user", "content": [_block(b) for b in blocks]})

    def _assistant(self, message: dict, blocks: list[dict], k: int) -> Iterator[Event]:
        response = {"role": "assistant", "content": [_block(b) for b in blocks if b["type"] != "tool_result"]}
        events = self.events_by_message.pop(message.get("messageId"), []) if "messageId" in message else []
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
        if events:
            for event in events:
                yield from self._call(response, blocks, event, usage, f"messages[{k}]")
        elif usage is not None:
            yield from self._call(response, blocks, None, usage, f"messages[{k}]")
        self.window.append(response)

    def _call(self, response: dict | None, blocks: list, event: dict | None, usage: dict | None,
              record: str) -> Iterator[Event]:
        source = event or usage or {}
        at = _iso(source.get("timestamp")) or _iso((usage or {}).get("timestamp")) or self.at
        self.at = max(self.at, at)
        call_id = stable_id(at, NAME, self.sid, record, (event or {}).get("$index"))
        if self.feed.exists("call", call_id):
            return
        model = text_of(source.get("model")) or text_of((usage or {}).get("model"))
        yield ev.CallRecorded(call_id=call_id, session_id=self.sid, exchange_id=self.exchange, started_at=at,
                              request={"model": model, "messages": list(self.window)}, response=response, model=model,
                              usage=self._usage(event, usage, record), stable_history=True)

    def _usage(self, event: dict | None, usage: dict | None, record: str) -> Usage | None:
        tokens, u = object_of((event or {}).get("tokens")), usage or {}
        given = {"input": tokens.get("input", u.get("inputTokens")),
                 "output": tokens.get("output", u.get("outputTokens")),
                 "cacheReadInputTokens": u.get("cacheReadInputTokens"),
                 "cacheCreationInputTokens": u.get("cacheCreationInputTokens")}
        values: dict[str, Any] = {k: v or 0 for k, v in given.items()}
        bad = next((k for k, v in values.items() if type(v) is not int or v < 0), None)
        if bad is not None:
            self.feed.skip(None, f"{bad}: expected a non-negative integer, got {values[bad]!r}; the call is kept"
                                 " without usage", record=record)
            return None
        try:
            return Usage(input_tokens=values["input"], output_tokens=values["output"],
                         cache_read_tokens=values["cacheReadInputTokens"],
                         cache_write_tokens=values["cacheCreationInputTokens"])
        except RecordError as exc:
            self.feed.skip(None, f"usage: {exc}", record=record)
            return None

    def _results(self, results: list[dict], k: int) -> Iterator[Event]:
        for n, block in enumerate(results):
            run = object_of(block.get("run"))
            result_id = stable_id(self.at, NAME, self.sid, "result", k, n)
            if not self.feed.exists("tool_result", result_id):
                yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid, at=self.at,
                                            tool_use_id=text_of(block.get("toolUseID") or block.get("tool_use_id")),
                                            content=run.get("result", block.get("content")),
                                            is_error=run.get("status") in FAILED)


def _block(b: dict) -> dict:
    """An Amp block in the Messages shape (its tool results name the call `toolUseID` and hold `run.result`)."""
    if b["type"] != "tool_result":
        return b
    run = object_of(b.get("run"))
    result = run.get("result", b.get("content"))
    return {"type": "tool_result", "tool_use_id": b.get("toolUseID") or b.get("tool_use_id"),
            "content": result if isinstance(result, str) else orjson.dumps(result).decode(),
            "is_error": run.get("status") in FAILED}


def _ms(value: Any) -> str | None:
    return instant(value / 1000, numbers=True) if isinstance(value, (int, float)) and not isinstance(
        value, bool) and value > 0 else None


def _iso(value: Any) -> str | None:
    return instant(value) if isinstance(value, str) else _ms(value)
