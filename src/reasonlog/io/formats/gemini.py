"""Gemini CLI chats: `~/.gemini/tmp/<project hash>/chats/session-*.jsonl` (sub-agents in `chats/<parent>/<id>.jsonl`),
and the older whole-document `session-*.json`.

A JSONL chat starts with a metadata line (`sessionId`, `projectHash`, `startTime`, `kind`, ...), then one
record per message: `{id, timestamp, type, content, thoughts, tokens, model, toolCalls}`. Gemini CLI appends
its last reply again, whole, each time it learns more of it (its tokens, its tool calls and their results):
a record with an `id` seen before replaces the earlier one. `{"$set": {...}}` updates the metadata (a `messages`
list there replaces the conversation: compression, masking); `{"$rewindTo": id}` removes that message and all
after it from the conversation (the calls they made were made, and stay billed). The older `.json` is one
document: the metadata with a `messages` list of the same records.

- The session's id is Gemini's `sessionId`; labels `source=gemini`, `project_hash`, `kind`.
- Each `user` record opens an exchange and joins the conversation. Each `gemini` record is one call:
  its request is the conversation before it (Gemini's `contents` shape), its response the reply's thoughts,
  text and function calls, its usage from `tokens`: `input` includes `cached`; `thoughts` are reasoning,
  counted in output; `tool` (tool-use prompt tokens) is input. Each tool call is a tool result (`status`
  error or cancelled: a failed one), and its result goes back in the next request.
- `info`, `error` and `warning` records (the CLI's notices) and unknown types are outcomes `gemini:<type>`.

Incremental: the last reply is held (in the importer's state) until a later message shows it finished; so the
re-appended versions of a reply replace it before it is imported. A reply replaced after it was imported (an
import that ran while Gemini was writing it) makes the whole file import again (`ReimportFile`).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...store import StoreError
from ...wire.rules import RecordError
from ..fields import list_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, Line, ReimportFile, Resumed, first_values, head, instant

NAME = "gemini"
CHECK_EVERY = 256   # lines between checkpoints (the state holds every message id: not dumped at each line)
FINAL = frozenset({"success", "error", "cancelled"})


def _read(feed: Feed) -> Iterator[Event | Checkpoint]:
    if feed.path.suffix == ".json":
        if feed.start:  # a document is rewritten, never appended to
            raise ReimportFile("a whole-document chat changed")
        yield from _Chat(feed).document()
    else:
        yield from _Chat(feed).lines()


def _mine(path: Path) -> bool:
    if path.suffix == ".json":
        start = head(path)
        return path.name.startswith("session-") and b'"sessionId"' in start and b'"messages"' in start
    first = first_values(path, 1)
    return bool(first) and _is_meta(first[0])


def _is_meta(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("sessionId"), str) and "type" not in value
            and "id" not in value and ("projectHash" in value or "startTime" in value))


importer = FormatImporter(
    NAME, "Gemini CLI chats (~/.gemini/tmp/<project>/chats/session-*.jsonl and .json)", _read,
    home=Home(".gemini", ("tmp",), env=("GEMINI_DIR",)), files=("*.jsonl", "session-*.json"), recognises=_mine)


class _Chat(Resumed):
    """One chat file; the state between imports: the conversation's message ids (with how many `contents`
    entries each gave), what came after the last call, the reply not yet imported, and the ids imported."""

    def __init__(self, feed: Feed):
        super().__init__(feed)
        s = self.saved
        self.meta: dict = s.get("meta", {})
        self.window: list[list] = s.get("window", [])   # [message id, contents entries it gave]
        self.base_call: str | None = s.get("base_call")  # the last call: its request and response open `contents`
        self.base: int = s.get("base", 0)                # how many of them are still in the window
        self.after: list = s.get("after", [])            # the contents entries after them
        self.pending: dict | None = s.get("pending")     # the last reply, not imported yet
        self.pending_line: int | None = s.get("pending_line")
        self.done: set[str] = set(s.get("done", []))     # message ids imported (their versions are final)
        self.contents: list | None = None                # the window's contents, read from the store when needed

    # ------------------------------------------------------------------------------ files

    def lines(self) -> Iterator[Event | Checkpoint]:
        last: Line | None = None
        for line in self.feed.lines():
            last = line
            if self.feed.readable(line):
                yield from self._record(line.value, line.number)
            if line.number % CHECK_EVERY == 0:
                yield self._checkpoint(line)
        if self.sid is None:
            return
        yield from self._finish(hold=self.feed.live and not _finished(self.pending))
        if last is not None:
            yield self._checkpoint(last)

    def document(self) -> Iterator[Event | Checkpoint]:
        try:
            doc = orjson.loads(self.feed.read_bytes())
        except orjson.JSONDecodeError as exc:
            self.feed.skip(None, f"not JSON ({str(exc).split(':', 1)[0]})")
            return
        meta = {k: v for k, v in doc.items() if k != "messages"} if isinstance(doc, dict) else None
        if not _is_meta(meta) or not isinstance(doc.get("messages"), list):
            self.feed.skip(None, "expected an object with `sessionId`, `startTime` and a `messages` list")
            return
        yield from self._record(meta, None)
        for record in doc["messages"]:
            yield from self._record(record, None)
        yield from self._finish(hold=False)
        yield self.feed.checkpoint(None, None)

    def _checkpoint(self, line: Line) -> Checkpoint:
        return self.feed.checkpoint(line, {
            "sid": self.sid, "meta": self.meta, "exchange": self.exchange, "last_at": self.last_at,
            "window": self.window, "base_call": self.base_call, "base": self.base, "after": self.after,
            "pending": self.pending, "pending_line": self.pending_line, "done": sorted(self.done)})

    def _finish(self, hold: bool) -> Iterator[Event]:
        """The end of what the file holds now: the last reply unless it is still being written, the ends."""
        if not hold:
            yield from self._flush()
        end = max(filter(None, (_at(self.meta.get("lastUpdated")), self.last_at)), default=None)
        if end is None:
            return
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=end)
        summary = self.meta.get("summary")
        yield ev.SessionEnded(session_id=self.sid or "", ended_at=end,
                              summary=summary if isinstance(summary, str) else None)

    # ------------------------------------------------------------------------------ records

    def _record(self, record: Any, number: int | None) -> Iterator[Event]:
        if not isinstance(record, dict):
            self.feed.skip(number, f"not a JSON object (a {type(record).__name__})")
        elif self.sid is None:
            yield from self._start(record, number)
        elif "$set" in record:
            yield from self._set(record["$set"], number)
        elif "$rewindTo" in record:
            yield from self._flush()
            self._rewind(record["$rewindTo"])
        elif isinstance(record.get("id"), str) and isinstance(record.get("type"), str):
            yield from self._message(record, number)
        elif _is_meta(record):
            self.meta.update(record)  # the metadata written again (a resumed chat)
        else:
            self.feed.skip(number, "a message record needs a string `id` and `type`")

    def _start(self, record: dict, number: int | None) -> Iterator[Event]:
        if not _is_meta(record):
            self.feed.skip(number, "a record before the chat's metadata line (`sessionId`, `projectHash`)")
            return
        started = _at(record.get("startTime"))
        if started is None:
            self.feed.skip(number, "the metadata line has no `startTime` instant")
            return
        self.sid, self.meta, self.last_at = record["sessionId"], dict(record), started
        labels = {"source": NAME, **{label: str(record[k]) for k, label in (("projectHash", "project_hash"),
                                                                             ("kind", "kind")) if record.get(k)}}
        parent = self.feed.path.parent.name if record.get("kind") == "subagent" else None
        yield ev.SessionStarted(session_id=self.sid, started_at=started, agent="gemini-cli", provider="google",
                                labels=labels, external_id=self.sid,
                                parent_session_id=parent if parent and parent != "chats" else None)

    def _set(self, update: Any, number: int | None) -> Iterator[Event]:
        if not isinstance(update, dict):
            self.feed.skip(number, "`$set` must be an object")
            return
        self.meta.update({k: v for k, v in update.items() if k != "messages"})
        messages = update.get("messages")
        if isinstance(messages, list):  # the conversation replaced (compressed, masked): calls made stay
            yield from self._flush()
            self.window, self.contents, self.base, self.after = [], [], 0, []
            for m in messages:
                if isinstance(m, dict) and isinstance(m.get("id"), str) and isinstance(m.get("type"), str):
                    self._join(m["id"], _contents(m))
            at = _at(self.meta.get("lastUpdated")) or self.last_at or ""
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, "history", number, len(messages)),
                                     session_id=self.sid or "", at=at, outcome_kind="compaction",
                                     payload={"messages": len(messages)})

    def _rewind(self, target: Any) -> None:
        ids = [mid for mid, _ in self.window]
        keep = ids.index(target) if target in ids else 0  # an unknown id empties it, as Gemini CLI's loader does
        cut = sum(n for _, n in self.window[:keep])
        contents = self._contents()
        self.window, self.contents = self.window[:keep], contents[:cut]
        self.base, self.after = min(self.base, cut), contents[min(self.base, cut):cut]

    def _message(self, record: dict, number: int | None) -> Iterator[Event]:
        mid = record["id"]
        if self.pending is not None and self.pending["id"] == mid:
            self.pending, self.pending_line = record, number  # a reply appended again, whole: the later wins
            return
        if mid in self.done:
            if self.feed.start:  # imported by an earlier import: what it wrote is wrong now
                raise ReimportFile(f"message {mid} was replaced after it was imported")
            self.feed.skip(number, f"message {mid} again after later messages: its first version is kept")
            return
        yield from self._flush()
        at = _at(record.get("timestamp")) or self.last_at or ""
        self.last_at = max(self.last_at or at, at)
        kind = record["type"]
        if kind == "gemini":
            self.pending, self.pending_line = record, number
            return
        self.done.add(mid)
        if kind == "user":
            yield from self._user(mid, record, at)
        else:
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, mid), session_id=self.sid or "", at=at,
                                     outcome_kind=f"{NAME}:{kind}", payload=_small(record.get("content")))

    def _user(self, mid: str, record: dict, at: str) -> Iterator[Event]:
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=at)
        self.exchange = stable_id(at, NAME, self.sid, "exchange", mid)
        yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid or "", started_at=at,
                                 input=_text(record.get("content")))
        self._join(mid, _contents(record))

    def _join(self, mid: str, entries: list) -> None:
        self._contents().extend(entries)
        self.after.extend(entries)
        self.window.append([mid, len(entries)])

    # ------------------------------------------------------------------------------ calls

    def _flush(self) -> Iterator[Event]:
        """Import the reply held back: a call with the conversation before it, and its tool results."""
        record, self.pending = self.pending, None
        if record is None:
            return
        mid, at = record["id"], _at(record.get("timestamp")) or self.last_at or ""
        self.done.add(mid)
        model = record.get("model") if isinstance(record.get("model"), str) else None
        try:
            usage = _usage(record.get("tokens"))
        except RecordError as exc:
            self.feed.skip(self.pending_line, f"tokens: {exc}")
            usage = None
        reply, *results = _contents(record)
        sent = list(self._contents())
        request = {"model": model, "contents": sent}
        call_id = stable_id(at, NAME, self.sid, mid)
        if not self.feed.exists("call", call_id):
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid or "", exchange_id=self.exchange, started_at=at,
                                  request=request, response=reply, model=model, provider="google", usage=usage,
                                  stable_history=True)
        yield from self._tool_results(mid, record, at)
        self.base_call, self.base, self.after = call_id, len(sent) + 1, list(results)
        self.contents = [*sent, reply, *results]
        self.window.append([mid, 1 + len(results)])

    def _tool_results(self, mid: str, record: dict, at: str) -> Iterator[Event]:
        for k, tool in enumerate(list_of(record.get("toolCalls"))):
            if not isinstance(tool, dict):
                continue
            result_id = stable_id(at, NAME, self.sid, mid, "tool", tool.get("id") or k)
            if self.feed.exists("tool_result", result_id):
                continue
            yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid or "",
                                        at=_at(tool.get("timestamp")) or at, tool_use_id=text_of(tool.get("id")),
                                        name=text_of(tool.get("name")), input=tool.get("args"), content=_output(tool),
                                        is_error=tool.get("status") in ("error", "cancelled"))

    def _contents(self) -> list:
        """The window's `contents`: the last call's request and response, then what came after."""
        if self.contents is None:
            opening: list = []
            if self.base and self.base_call is not None:
                try:
                    call = self.feed.store.get_call(self.base_call)
                except StoreError:
                    raise ReimportFile(f"call {self.base_call} is no longer in the store") from None
                opening = [*call["request"].get("contents", []), call["response"]][:self.base]
            self.contents = opening + self.after
        return self.contents


def _finished(record: dict | None) -> bool:
    """Whether a reply looks complete: its tokens came and every tool call it made has ended."""
    if record is None:
        return True
    tools = [t for t in list_of(record.get("toolCalls")) if isinstance(t, dict)]
    return isinstance(record.get("tokens"), dict) and all(t.get("status") in FINAL for t in tools)


def _contents(record: dict) -> list[dict]:
    """A record as Gemini `contents` entries: a user message; or the model's reply, then its tool results."""
    parts = _parts(record.get("content"))
    if record["type"] != "gemini":
        return [{"role": "user", "parts": parts}] if record["type"] == "user" else []
    thoughts = [{"text": _thought(t), "thought": True} for t in list_of(record.get("thoughts"))]
    tools = [t for t in list_of(record.get("toolCalls")) if isinstance(t, dict)]
    calls = [{"functionCall": {"id": t.get("id"), "name": t.get("name"), "args": t.get("args")}} for t in tools]
    out = [{"role": "model", "parts": thoughts + [p for p in parts if p != {"text": ""}] + calls}]
    results = [p for t in tools for p in _result_parts(t)]
    if results:
        out.append({"role": "user", "parts": results})
    return out


def _parts(content: Any) -> list:
    """Gemini's `PartListUnion` (text, a part, or a list of both) as a list of parts."""
    items = content if isinstance(content, list) else [content] if content is not None else []
    return [{"text": p} if isinstance(p, str) else p for p in items if isinstance(p, (str, dict))]


def _result_parts(tool: dict) -> list:
    result = tool.get("result")
    if isinstance(result, list) and result and all(isinstance(p, dict) for p in result):
        return result
    response = {"id": tool.get("id"), "name": tool.get("name"), "response": {"output": _output(tool)}}
    return [{"functionResponse": response}]


def _output(tool: dict) -> Any:
    """What a tool returned, as text where Gemini's `functionResponse` holds it so."""
    for part in list_of(tool.get("result")):
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict) and isinstance(response.get("output") or response.get("error"), str):
            return response.get("output") or response.get("error")
    display = tool.get("resultDisplay")
    return display if tool.get("result") is None or isinstance(display, str) else tool.get("result")


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


def _small(content: Any, limit: int = 4000) -> Any:
    """A notice's content for an outcome payload, cut to `limit` characters of text."""
    text = _text(content)
    return text[:limit] if isinstance(text, str) else content


def _thought(t: Any) -> str:
    if isinstance(t, dict):
        return ": ".join(str(t[k]) for k in ("subject", "description") if t.get(k))
    return str(t)


def _text(content: Any) -> Any:
    texts = [p["text"] for p in _parts(content) if isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else content


def _at(value: Any) -> str | None:
    return instant(value, numbers=True)
