"""Gemini CLI chats: `~/.gemini/tmp/<project hash>/chats/session-*.jsonl`, and the older `session-*.json`.

A JSONL chat starts with a metadata line (`sessionId`, `projectHash`, `startTime`, ...), then one
record per message: `{id, timestamp, type, content, thoughts, tokens, model, toolCalls}`. A record
appended again with the same `id` replaces the earlier one where it stood (Gemini CLI rewrites a
reply as it completes); `{"$set": {...}}` updates the metadata; `{"$rewindTo": id}` takes the
conversation back to that message (later messages leave the window; the calls they made were made,
and stay). The older `.json` is one document: the metadata with a `messages` list of the same records.

- The session's id is Gemini's `sessionId`; labels `source=gemini` and `project_hash`.
- Each `user` record opens an exchange and joins the conversation. Each `gemini` record is one call:
  its request is the conversation before it (in Gemini's `contents` shape), its response the reply's
  thoughts, text and function calls, its usage from `tokens`: `input` includes `cached`; `thoughts`
  are reasoning, counted in output; `tool` (tool-use prompt tokens) is input. Each tool call is also a
  tool result (`status: error` is a failed one), and its result goes back in the next request.
- `info`, `error` and `warning` records are the CLI's notices: kept as outcomes `gemini:<type>`.

Because a later record can replace one already imported, a chat file that changed is read again whole
(`incremental` is False): the import loop removes what it gave and imports it again.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...model import (
    CallRecorded,
    Event,
    ExchangeEnded,
    ExchangeStarted,
    OutcomeRecorded,
    SessionEnded,
    SessionStarted,
    ToolResultRecorded,
    Usage,
    stable_id,
)
from ...parts import RecordError
from ..importing import Checkpoint, Feed, first_values, instant, walk

NAME = "gemini"
NOTICES = frozenset({"info", "error", "warning"})


class GeminiImporter:
    name = NAME
    description = "Gemini CLI chats (~/.gemini/tmp/<project>/chats/session-*.jsonl and .json)"
    incremental = False

    def default_folders(self) -> list[Path]:
        return [Path(os.environ.get("GEMINI_DIR") or Path.home() / ".gemini").expanduser() / "tmp"]

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any(_mine(p) for p in _candidates(path)[:5])
        return _mine(path)

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            yield path
            return
        yield from (p for p in _candidates(path) if _mine(p))

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        chat = _load(feed)
        if chat is not None:
            yield from _Chat(feed, *chat).events()
        yield feed.checkpoint(None, None)


importer = GeminiImporter()


def _candidates(folder: Path) -> list[Path]:
    return sorted(p for pattern in ("session-*.jsonl", "session-*.json") for p in walk(folder, pattern))


def _mine(path: Path) -> bool:
    if path.suffix == ".json" and path.name.startswith("session-"):
        try:
            with open(path, "rb") as f:
                head = f.read(4096)
        except OSError:
            return False
        return b'"sessionId"' in head and b'"messages"' in head
    first = first_values(path, 1)
    return bool(first) and isinstance(first[0], dict) and "sessionId" in first[0] and "type" not in first[0]


def _load(feed: Feed) -> tuple[dict, list[tuple[int | None, Any]]] | None:
    """The metadata and the records (with their line numbers, None for a .json document)."""
    if feed.path.suffix == ".json":
        try:
            doc = orjson.loads(feed.read_bytes())
        except orjson.JSONDecodeError as exc:
            feed.skip(None, f"not JSON ({str(exc).split(':', 1)[0]})")
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            feed.skip(None, "expected an object with `sessionId` and a `messages` list")
            return None
        return doc, [(None, m) for m in doc["messages"]]
    meta: dict | None = None
    records: list[tuple[int | None, Any]] = []
    for line in feed.lines():
        if line.error is not None:
            feed.skip(line, line.error)
        elif meta is None and isinstance(line.value, dict) and "sessionId" in line.value:
            meta = line.value
        else:
            records.append((line.number, line.value))
    if meta is None:
        feed.skip(None, "no metadata line with a `sessionId`")
        return None
    return meta, records


class _Chat:
    def __init__(self, feed: Feed, meta: dict, records: list[tuple[int | None, Any]]):
        self.feed, self.meta = feed, dict(meta)
        self.sid = str(meta.get("sessionId"))
        self.order: list[str] = []        # message ids in the order they first came
        self.final: dict[str, dict] = {}  # message id -> its last version
        self.window_of: dict[str, list[str]] = {}  # gemini id -> the ids in the window when it came
        self.where: dict[str, int | None] = {}
        self._replay(records)

    def _replay(self, records: list[tuple[int | None, Any]]) -> None:
        window: list[str] = []
        for number, record in records:
            if not isinstance(record, dict):
                self.feed.skip(number, f"not a JSON object (a {type(record).__name__})")
            elif "$set" in record:
                self.meta.update(record["$set"] if isinstance(record["$set"], dict) else {})
            elif "$rewindTo" in record:
                target = record["$rewindTo"]
                if target in window:
                    del window[window.index(target) + 1:]
                else:
                    self.feed.skip(number, f"$rewindTo names no message of the conversation ({target!r})")
            elif not isinstance(record.get("id"), (str, int)) or not isinstance(record.get("type"), str):
                self.feed.skip(number, "a message record needs an `id` and a `type`")
            else:
                self._message(str(record["id"]), record, number, window)

    def _message(self, mid: str, record: dict, number: int | None, window: list[str]) -> None:
        if mid not in self.final:
            self.order.append(mid)
            self.where[mid] = number
            if record["type"] == "gemini":
                self.window_of[mid] = list(window)
            if record["type"] not in NOTICES:
                window.append(mid)
        self.final[mid] = record  # a record appended again replaces the earlier one where it stood

    # ------------------------------------------------------------------------------ events

    def events(self) -> Iterator[Event]:
        started = _at(self.meta.get("startTime")) or self._first_at()
        if started is None:
            self.feed.skip(None, "no instant in the chat (startTime or a message timestamp)")
            return
        yield SessionStarted(session_id=self.sid, started_at=started, agent="gemini-cli", provider="google",
                             labels={"source": NAME, **({"project_hash": str(self.meta["projectHash"])}
                                                         if self.meta.get("projectHash") else {})},
                             external_id=self.sid)
        exchange, last = None, started
        for mid in self.order:
            record = self.final[mid]
            at = _at(record.get("timestamp")) or last
            last = max(last, at)
            if record["type"] == "user":
                if exchange is not None:
                    yield ExchangeEnded(exchange_id=exchange, session_id=self.sid, ended_at=at)
                exchange = stable_id(at, NAME, self.sid, "exchange", mid)
                yield ExchangeStarted(exchange_id=exchange, session_id=self.sid, started_at=at,
                                      input=_text(record.get("content")))
            elif record["type"] == "gemini":
                yield from self._call(mid, record, at, exchange)
            else:
                yield OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, mid), session_id=self.sid, at=at,
                                      outcome_kind=f"{NAME}:{record['type']}", payload=record.get("content"))
        if exchange is not None:
            yield ExchangeEnded(exchange_id=exchange, session_id=self.sid, ended_at=last)
        summary = self.meta.get("summary")
        yield SessionEnded(session_id=self.sid, ended_at=_at(self.meta.get("lastUpdated")) or last,
                           summary=summary if isinstance(summary, str) else None)

    def _call(self, mid: str, record: dict, at: str, exchange: str | None) -> Iterator[Event]:
        contents: list = []
        for earlier in self.window_of[mid]:
            contents += _contents(self.final[earlier])
        try:
            usage = _usage(record.get("tokens"))
        except (RecordError, TypeError) as exc:
            self.feed.skip(self.where[mid], f"tokens: {exc}")
            usage = None
        model = record.get("model") if isinstance(record.get("model"), str) else None
        call_id = stable_id(at, NAME, self.sid, mid)
        yield CallRecorded(call_id=call_id, session_id=self.sid, exchange_id=exchange, started_at=at,
                           request={"model": model, "contents": contents}, response=_contents(record)[0],
                           model=model, provider="google", usage=usage)
        for k, tool in enumerate(_list(record.get("toolCalls"))):
            if isinstance(tool, dict):
                yield ToolResultRecorded(
                    tool_result_id=stable_id(at, NAME, self.sid, mid, "tool", k), session_id=self.sid,
                    at=_at(tool.get("timestamp")) or at, tool_use_id=_str(tool.get("id")),
                    name=_str(tool.get("name")), input=tool.get("args"),
                    content=tool.get("resultDisplay") if tool.get("result") is None else tool.get("result"),
                    is_error=tool.get("status") in ("error", "cancelled"))

    def _first_at(self) -> str | None:
        return next((a for a in (_at(r.get("timestamp")) for r in self.final.values()) if a), None)



def _contents(record: dict) -> list[dict]:
    """A record as Gemini `contents` entries: a user message; or the model's reply, then its tool results."""
    content = record.get("content")
    parts = content if isinstance(content, list) else ([{"text": content}] if isinstance(content, str) else [])
    if record["type"] != "gemini":
        return [{"role": "user", "parts": parts}]
    thoughts = [{"text": _thought(t), "thought": True} for t in _list(record.get("thoughts"))]
    tools = [t for t in _list(record.get("toolCalls")) if isinstance(t, dict)]
    calls = [{"functionCall": {"id": t.get("id"), "name": t.get("name"), "args": t.get("args")}} for t in tools]
    out = [{"role": "model", "parts": thoughts + [p for p in parts if p != {"text": ""}] + calls}]
    results = [p for t in tools for p in _result_parts(t)]
    if results:
        out.append({"role": "user", "parts": results})
    return out


def _result_parts(tool: dict) -> list:
    result = tool.get("result")
    if isinstance(result, list) and all(isinstance(p, dict) for p in result):
        return result
    return [{"functionResponse": {"id": tool.get("id"), "name": tool.get("name"),
                                  "response": {"output": tool.get("resultDisplay") if result is None else result}}}]


def _usage(tokens: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    for key in ("input", "output", "cached", "thoughts", "tool"):
        value = tokens.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise RecordError(f"tokens.{key}: expected a non-negative integer, got {value!r}")
    get = lambda k: tokens.get(k) or 0  # noqa: E731
    cached = min(get("cached"), get("input"))
    return Usage(input_tokens=get("input") - cached + get("tool"), cache_read_tokens=cached,
                 output_tokens=get("output") + get("thoughts"), reasoning_tokens=get("thoughts"))


def _thought(t: Any) -> str:
    if isinstance(t, dict):
        return ": ".join(str(t[k]) for k in ("subject", "description") if t.get(k))
    return str(t)


def _text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(texts) if texts else content
    return content


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


def _at(value: Any) -> str | None:
    return instant(value, numbers=True)
