"""Cursor agent transcripts: `~/.cursor/projects/<project slug>/agent-transcripts/<id>/<id>.jsonl` (and the flat
`agent-transcripts/<id>.jsonl`), written by the Cursor editor's agent and by `cursor-agent`.

A line is a message `{"role": "user" | "assistant", "message": {"content": [blocks]}}` with Messages-style blocks
(`text`, `tool_use`, sometimes `tool_result`), or `{"type": "turn_ended", "status": ...}`. A user's text wraps what
they typed in `<user_query>` and may carry `<timestamp>Sunday, Sep 20, 2026, 12:31 AM (UTC+3)</timestamp>`.

- **Session**: the transcript's id; agent `cursor`; labels `source=cursor`, `project` (the slug).
- **Exchanges**: each user message (its `<user_query>`), ended by `turn_ended`.
- **Calls**: each assistant line is taken as one model response, its request the conversation before it.
- **What Cursor does not write**: tokens, cost, model, tool results and call ids (a `tool_use` has none), and times
  (most versions). reasonlog invents none: calls have no usage, cost or model, and the import prints a note.
  Instants come from a line's `timestamp` or the user's `<timestamp>` where there is one, else the session's start:
  the file's modification time when it was first imported (kept, so the ids stay the same as the file grows).
  Assistant text is kept as written, with the bare `[REDACTED]` Cursor appends to most replies.

Incremental: what is appended is read from where the last import stopped.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

from ... import model as ev
from ...model import Event, stable_id
from ..fields import text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, instant

NAME = "cursor"
NO_USAGE = ("cursor: its agent transcripts have no token counts, costs, models or times per message; its calls are"
            " imported without them")
QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.S)
STAMP = re.compile(r"<timestamp>([^<]+)</timestamp>")
CURSOR_TIME = re.compile(r"\w+, (\w{3}) (\d{1,2}), (\d{4}), (\d{1,2}):(\d\d) ([AP]M) \(UTC([+-]\d{1,2})(?::(\d\d))?\)")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


importer = FormatImporter(
    NAME, "Cursor agent transcripts (~/.cursor/projects/<project>/agent-transcripts/; no token counts)",
    lambda feed: _Transcript(feed).read(), home=Home(".cursor", ("projects",), env=("CURSOR_CONFIG_DIR",)),
    recognises=lambda path: "agent-transcripts" in path.parts,
    opens=lambda first: first.get("role") in ("user", "assistant") and isinstance(first.get("message"), dict))


def cursor_time(text: str) -> str | None:
    """Cursor's `<timestamp>` text ("Sunday, Sep 20, 2026, 12:31 AM (UTC+3)") as UTC text, or None."""
    m = CURSOR_TIME.search(text)
    if m is None or m.group(1) not in MONTHS:
        return None
    hour = int(m.group(4)) % 12 + (12 if m.group(6) == "PM" else 0)
    sign = -1 if m.group(7).startswith("-") else 1
    zone = timezone(sign * timedelta(hours=abs(int(m.group(7))), minutes=int(m.group(8) or 0)))
    try:
        local = datetime(int(m.group(3)), MONTHS.index(m.group(1)) + 1, int(m.group(2)), hour, int(m.group(5)),
                         tzinfo=zone)
    except ValueError:
        return None
    return instant(local.isoformat())


class _Transcript:
    """One transcript. State between imports: when it started, the open exchange, the conversation, the last instant."""

    def __init__(self, feed: Feed):
        self.feed = feed
        s = feed.state or {}
        self.sid: str = feed.path.stem
        self.started_at: str | None = s.get("started_at")
        self.exchange: str | None = s.get("exchange")
        self.at: str | None = s.get("at")
        self.window: list = s.get("window", [])

    def read(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.values(lambda v: isinstance(v, dict), "expected a JSON object"):
            yield from self._line(line.value, line.number)
        last = self.feed.read_to
        if last is None or self.started_at is None:
            return
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at or self.started_at)
        yield ev.SessionEnded(session_id=self.sid, ended_at=self.at or self.started_at)
        yield self.feed.checkpoint(last, {"started_at": self.started_at, "exchange": self.exchange, "at": self.at,
                                          "window": self.window})

    def _line(self, value: dict, number: int) -> Iterator[Event]:
        if self.started_at is None:
            yield self._start(value)
        stamped = instant(value.get("timestamp"), numbers=True)  # some versions give a line its time
        if stamped is not None:
            self.at = max(self.at or stamped, stamped)
        role, message = value.get("role"), value.get("message")
        if value.get("type") == "turn_ended":
            yield from self._turn_ended(value, number)
        elif role in ("user", "assistant") and isinstance(message, dict) and isinstance(message.get("content"),
                                                                                          (list, str)):
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [
                b for b in content if isinstance(b, dict) and isinstance(b.get("type"), str)]
            yield from (self._user(blocks, number) if role == "user" else self._call(blocks, number))
        elif role is not None or "message" in value:
            self.feed.skip(number, "a message needs a `role` (user or assistant) and `message.content`")
        else:
            at = self.at or self.started_at or ""
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, number), session_id=self.sid, at=at,
                                     outcome_kind=f"{NAME}:{value.get('type') or 'unknown'}", payload=value)

    def _start(self, value: dict) -> ev.SessionStarted:
        text = str(value.get("message"))
        self.started_at = (instant(value.get("timestamp"), numbers=True) or cursor_time(text)
                           or instant(self.feed.path.stat().st_mtime, numbers=True) or "")
        parts = self.feed.path.parts
        at = parts.index("agent-transcripts") if "agent-transcripts" in parts else 0
        labels = {"source": NAME, **({"project": parts[at - 1]} if at > 0 else {})}
        return ev.SessionStarted(session_id=self.sid, started_at=self.started_at, agent=NAME, labels=labels,
                                 external_id=self.sid)

    def _user(self, blocks: list[dict], number: int) -> Iterator[Event]:
        texts = "\n".join(b["text"] for b in blocks if b["type"] == "text" and isinstance(b.get("text"), str))
        results = [b for b in blocks if b["type"] == "tool_result"]
        yield from self._results(results, number)
        if texts:
            self.at = max(self.at or "", cursor_time(texts) or self.at or self.started_at or "")
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at)
            self.exchange = stable_id(self.at, NAME, self.sid, "exchange", number)
            queries = QUERY.findall(texts)  # the prompt; the rest is context Cursor added (rules, files)
            typed = "\n".join(queries) if queries else STAMP.sub("", texts).strip()
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid, started_at=self.at, input=typed)
        self.window.append({"role": "user", "content": blocks})

    def _call(self, blocks: list[dict], number: int) -> Iterator[Event]:
        at = self.at or self.started_at or ""
        call_id = stable_id(at, NAME, self.sid, number)
        response = {"role": "assistant", "content": blocks}
        if not self.feed.exists("call", call_id):
            self.feed.note(NO_USAGE)
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid, exchange_id=self.exchange, started_at=at,
                                  request={"messages": list(self.window)}, response=response, stable_history=True)
        self.window.append(response)

    def _results(self, results: list[dict], number: int) -> Iterator[Event]:
        at = self.at or self.started_at or ""
        for k, block in enumerate(results):
            result_id = stable_id(at, NAME, self.sid, number, k)
            if not self.feed.exists("tool_result", result_id):
                yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid, at=at,
                                            tool_use_id=text_of(block.get("tool_use_id")), content=block.get("content"),
                                            is_error=block.get("is_error") is True)

    def _turn_ended(self, value: dict, number: int) -> Iterator[Event]:
        at = self.at or self.started_at or ""
        if value.get("status") not in (None, "success"):
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, number), session_id=self.sid, at=at,
                                     outcome_kind=f"{NAME}:turn_ended", payload=value)
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=at)
            self.exchange = None
