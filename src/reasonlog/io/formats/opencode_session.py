"""One OpenCode session as reasonlog's events (the records are loaded by `opencode`, from either layout).

- **Session.** OpenCode's session id is reasonlog's; agent and label `source` `opencode` (`kilo` for Kilo's
  database), labels `cwd`, `version`, `title`; a
  subagent's session (the `task` tool) has OpenCode's `parentID` as its parent.
- **Calls.** Each step of an assistant message is one model call: the parts up to its `step-finish`, whose
  `tokens` and `cost` are the call's. (OpenCode 1.x writes one assistant message per step; older versions wrote
  several steps into one message.) A message without a `step-finish` (aborted, failed) is one call with the
  message's own tokens; its `error` makes the call an error. The request is the conversation before the call in
  the Anthropic Messages shape (OpenCode keeps no system prompt or tool schemas in its records).
- **Tokens and cost.** OpenCode stores disjoint counters: `input` without cache reads and writes, `output`
  without `reasoning`. reasonlog's output includes reasoning, so it is `output + reasoning`. The cost is OpenCode's
  own (reported); a cost of 0 with tokens is OpenCode not knowing the price, so reasonlog prices it instead.
- **Exchanges.** Each user message opens one. A user message holding a `compaction` part asks for a summary: the
  window after that summary starts again at the compaction request (as OpenCode sends it); an outcome
  `compaction` marks it.
- **Tool results.** Each `tool` part that ended (`completed` or `error`) is a tool result, and a `tool_result`
  block in the next request.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import object_of, text_of
from ..importer import Feed, epoch_ms

NAME = "opencode"
ENDED = ("completed", "error")  # (a tuple: a status of another type is simply not in it)


@dataclass
class OpenCodeMessage:
    id: str
    data: dict                      # the message's record without its id (role, time, tokens, cost, ...)
    parts: list[dict]               # its parts in order, each with its `type`


@dataclass
class OpenCodeSession:
    info: dict                      # id, parentID, directory, title, version, time{created, updated}
    messages: list[OpenCodeMessage]
    where: str = ""
    window: list = field(default_factory=list)
    agent: str = NAME               # opencode, or kilo (Kilo CLI's database)


def session_events(feed: Feed, session: OpenCodeSession, state: dict) -> Iterator[Event]:
    """The events of `session` not imported yet; `state[session id]` says how far the last import went."""
    sid = session.info.get("id")
    if not isinstance(sid, str):
        feed.skip(None, "a session without a string `id`", record=session.where)
        return
    seen = state.get(sid)
    if seen is None and feed.exists("session", sid):
        feed.skip(None, "imported already from OpenCode's other layout (opencode.db or storage/)",
                  record=f"session {sid}")
        state[sid] = {"updated": _updated(session), "last": None, "copy": True}
        return
    if (seen or {}).get("copy"):
        return
    yield from _Session(feed, session, seen).events()
    state[sid] = {"updated": _updated(session), "last": session_last(session, feed.live)}


def session_last(session: OpenCodeSession, live: bool) -> str | None:
    """The last message imported: under watch, the first unfinished assistant message waits for the next pass."""
    last = None
    for m in session.messages:
        if live and not _ended(m):
            break
        last = m.id
    return last


def _updated(session: OpenCodeSession) -> Any:
    return object_of(session.info.get("time")).get("updated")


def _ended(m: OpenCodeMessage) -> bool:
    time = m.data.get("time") or {}
    return m.data.get("role") != "assistant" or bool(time.get("completed")) or m.data.get("error") is not None


class _Session:
    def __init__(self, feed: Feed, session: OpenCodeSession, seen: dict | None):
        self.feed, self.s = feed, session
        self.sid: str = session.info["id"]
        self.started = seen is not None
        self.done: str | None = (seen or {}).get("last")   # messages up to this id were imported
        self.emit = True                                    # whether the message being read is new
        self.window: list = []
        self.exchange: str | None = None
        self.mark: int | None = None                       # where a compaction request starts in the window
        self.last_at = epoch_ms(object_of(session.info.get("time")).get("created")) or ""

    def events(self) -> Iterator[Event]:
        if not self.started:
            yield self._started()
        for m in self.s.messages:
            record = f"message {m.id}"  # a message the importer failed on is passed over (io/import_file.py)
            if record in self.feed.passed:
                continue
            with self.feed.record(record):
                if self.feed.live and not _ended(m):
                    break  # still being written: the next pass imports it and what follows
                self.emit = self.done is None or m.id > self.done  # OpenCode's ids grow with time
                yield from self._message(m)
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.last_at)
        title = self.s.info.get("title")
        yield ev.SessionEnded(session_id=self.sid, ended_at=epoch_ms(_updated(self.s)) or self.last_at,
                              summary=title if isinstance(title, str) else None)

    def _started(self) -> ev.SessionStarted:
        info = self.s.info
        labels = {"source": self.s.agent, **{k: info[f] for k, f in (("cwd", "directory"), ("version", "version"),
                                                              ("title", "title")) if isinstance(info.get(f), str)}}
        parent = info.get("parentID") if isinstance(info.get("parentID"), str) else None
        return ev.SessionStarted(session_id=self.sid, started_at=self.last_at, agent=self.s.agent, labels=labels,
                                 external_id=self.sid, parent_session_id=parent)

    def _message(self, m: OpenCodeMessage) -> Iterator[Event]:
        at = epoch_ms(object_of(m.data.get("time")).get("created")) or self.last_at
        self.last_at = max(self.last_at, at)
        role = m.data.get("role")
        if role == "user":
            yield from self._user(m, at)
        elif role == "assistant":
            yield from self._assistant(m, at)
        else:
            self.feed.skip(None, f"a message with role {role!r} (expected user or assistant)",
                           record=f"message {m.id}")

    # ------------------------------------------------------------------------------ user messages

    def _user(self, m: OpenCodeMessage, at: str) -> Iterator[Event]:
        blocks = [b for p in m.parts for b in _user_blocks(p)]
        if any(p.get("type") == "compaction" for p in m.parts):
            self.mark = len(self.window)
            if self.emit:
                yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, m.id, "compaction"),
                                         session_id=self.sid, at=at, outcome_kind="compaction",
                                         payload={"messages_before": len(self.window)})
            blocks = blocks or [{"type": "text", "text": "(OpenCode's request for a summary of the session)"}]
        if self.emit:
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=at)
            text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
            yield ev.ExchangeStarted(exchange_id=self._exchange_id(m, at), session_id=self.sid, started_at=at,
                                     input=text)
        self.exchange = self._exchange_id(m, at)
        if blocks:
            self.window.append({"role": "user", "content": blocks})

    def _exchange_id(self, m: OpenCodeMessage, at: str) -> str:
        return stable_id(at, NAME, self.sid, "exchange", m.id)

    # ------------------------------------------------------------------------------ assistant messages

    def _assistant(self, m: OpenCodeMessage, at: str) -> Iterator[Event]:
        steps = _steps(m.parts)
        for n, (parts, finish) in enumerate(steps):
            yield from self._call(m, n, parts, finish, at, last=n == len(steps) - 1)
        completed = epoch_ms(object_of(m.data.get("time")).get("completed"))
        if completed:
            self.last_at = max(self.last_at, completed)
        if m.data.get("summary") is True and self.mark is not None:
            self.window, self.mark = self.window[self.mark:], None  # the summary replaces what it summarised

    def _call(self, m: OpenCodeMessage, n: int, parts: list[dict], finish: dict | None, at: str,
              last: bool) -> Iterator[Event]:
        started = epoch_ms(object_of(parts[0].get("time")).get("start")) if parts else None
        call_at = started or at
        content = [b for p in parts if (b := _assistant_block(p)) is not None]
        response = {"role": "assistant", "content": content}
        record = finish if finish is not None else m.data
        error = m.data.get("error") if last else None
        if self.emit:
            usage, cost = self._usage(m, record)
            model = m.data.get("modelID") if isinstance(m.data.get("modelID"), str) else None
            call_id = stable_id(call_at, NAME, self.sid, m.id, n)
            if not self.feed.exists("call", call_id):
                yield ev.CallRecorded(
                    call_id=call_id, session_id=self.sid, exchange_id=self.exchange, started_at=call_at,
                    request={"model": model, "messages": list(self.window)}, response=response, model=model,
                    provider=m.data.get("providerID") if isinstance(m.data.get("providerID"), str) else None,
                    stop_reason=object_of(finish).get("reason") or m.data.get("finish"), usage=usage, cost_usd=cost,
                    provider_message_id=m.id, status="error" if error else "ok",
                    error=error if isinstance(error, dict) else None, stable_history=True)
        self.window.append(response)
        results = [p for p in parts if p.get("type") == "tool" and object_of(p.get("state")).get("status") in ENDED]
        if results:
            self.window.append({"role": "user", "content": [_result_block(p) for p in results]})
            if self.emit:
                yield from (self._tool_result(p, call_at) for p in results)

    def _usage(self, m: OpenCodeMessage, record: dict) -> tuple[Usage | None, float | None]:
        tokens = record.get("tokens")
        if not isinstance(tokens, dict):
            return None, None
        try:
            usage = _to_usage(tokens)
        except RecordError as exc:
            self.feed.skip(None, f"tokens: {exc}; the call is kept without them", record=f"message {m.id}")
            return None, None
        cost = record.get("cost")
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
            return usage, None
        priced = cost > 0 or usage.input_tokens + usage.output_tokens + usage.cache_read_tokens == 0
        return usage, float(cost) if priced else None

    def _tool_result(self, part: dict, at: str) -> ev.ToolResultRecorded:
        state = object_of(part.get("state"))
        time = object_of(state.get("time"))
        start, end = time.get("start"), time.get("end")
        took = end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) else None
        return ev.ToolResultRecorded(
            tool_result_id=stable_id(at, NAME, self.sid, part.get("id") or part.get("callID")), session_id=self.sid,
            at=epoch_ms(end) or at, tool_use_id=text_of(part.get("callID")), name=text_of(part.get("tool")),
            input=state.get("input"), content=_output(state), is_error=state.get("status") == "error",
            duration_ms=float(took) if took is not None and took >= 0 else None)


# ------------------------------------------------------------------------------------------ parts


def _steps(parts: list[dict]) -> list[tuple[list[dict], dict | None]]:
    """The parts of each step, with the `step-finish` that closes it (None for a step cut short). What follows
    the last `step-finish` is a step cut short only if the model wrote some of it: OpenCode's bookkeeping after
    it (a `patch` of the files the step changed, a snapshot) is not a call."""
    steps: list[tuple[list[dict], dict | None]] = []
    current: list[dict] = []
    for p in parts:
        if p.get("type") == "step-finish":
            steps.append((current, p))
            current = []
        elif p.get("type") != "step-start":
            current.append(p)
    if not steps or any(_assistant_block(p) is not None for p in current):
        steps.append((current, None))
    return steps


def _user_blocks(part: dict) -> list[dict]:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str) and not part.get("ignored"):
        return [{"type": "text", "text": part["text"]}]
    if kind == "file":
        name = part.get("filename") or part.get("url") or "a file"
        return [{"type": "text", "text": f"[attached: {name} ({part.get('mime') or 'unknown type'})]"}]
    return []


def _assistant_block(part: dict) -> dict | None:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "reasoning" and isinstance(part.get("text"), str):
        return {"type": "thinking", "thinking": part["text"]}
    if kind == "tool":
        state = object_of(part.get("state"))
        return {"type": "tool_use", "id": text_of(part.get("callID")), "name": text_of(part.get("tool")),
                "input": state.get("input") if isinstance(state.get("input"), dict) else {}}
    return None  # step markers, patches, snapshots, agents: OpenCode's bookkeeping, not sent to the model


def _result_block(part: dict) -> dict:
    state = object_of(part.get("state"))
    return {"type": "tool_result", "tool_use_id": text_of(part.get("callID")), "content": _output(state),
            "is_error": state.get("status") == "error"}


def _output(state: dict) -> Any:
    value = state.get("output") if state.get("status") == "completed" else state.get("error")
    return value if isinstance(value, str) else "" if value is None else value


def _to_usage(tokens: dict) -> Usage:
    cache: dict = tokens["cache"] if isinstance(tokens.get("cache"), dict) else {}
    got = {"input": tokens.get("input"), "output": tokens.get("output"), "reasoning": tokens.get("reasoning"),
           "cache.read": cache.get("read"), "cache.write": cache.get("write")}
    for key, value in got.items():
        if value is not None and (type(value) is not int or value < 0):
            raise RecordError(f"tokens.{key}: expected a non-negative integer, got {value!r}")
    n = {k: v or 0 for k, v in got.items()}
    return Usage(input_tokens=n["input"], output_tokens=n["output"] + n["reasoning"],
                 reasoning_tokens=n["reasoning"], cache_read_tokens=n["cache.read"],
                 cache_write_tokens=n["cache.write"])
