"""GitHub Copilot CLI sessions: `~/.copilot/session-state/<sessionId>/events.jsonl` (`$COPILOT_HOME` for
`~/.copilot`; older versions wrote `session-state/<sessionId>.jsonl`).

An event log: every line is `{type, data, id, timestamp, parentId}`. `session.start` names the session (its
`sessionId`, `copilotVersion`, `selectedModel`, `context.cwd`); `session.resume` continues it in the same file.
`user.message` is a prompt (`transformedContent` is what the model got); `system.message` the system prompt;
`session.usage_record` is one model call's accounting (tokens, duration, time to first token, `apiCallId`), written
just before the `assistant.message` with the same `apiCallId` (`content`, `reasoningText`, `toolRequests`);
`tool.execution_start` / `tool.execution_complete` are a tool's run.

- **Session**: Copilot's `sessionId`; agent `copilot-cli`; labels `source=copilot`, `cwd`, `branch`, `version`.
- **Calls**: each `session.usage_record` (a billed request), with the `assistant.message` of its `apiCallId` as its
  response; an `assistant.message` with no usage record is a call without usage. Request: the system prompt and the
  conversation before it, in the Messages shape. Usage: `inputTokens` includes `cacheReadTokens` and
  `cacheWriteTokens`, `outputTokens` includes `reasoningTokens`; they are split into disjoint counters.
- **Cost**: Copilot's `cost` counts premium requests (0 with your own key), not dollars, so it is not taken as a
  cost; calls are priced by reasonlog from the model's name. `session.shutdown` (Copilot's running totals and
  premium requests) is kept as an outcome `copilot:session.shutdown`.
- **Tool results**: `tool.execution_complete` (`success` false: failed), with the tool's name, arguments and
  duration from its `tool.execution_start`.
- Turn and bookkeeping events (`assistant.turn_start`, `assistant.turn_end`, `session.resume`, ...) set nothing;
  any other type is an outcome `copilot:<type>`.

Incremental: what is appended is read from where the last import stopped. Under `watch`, in a file changed in the
last 30 seconds, a trailing usage record waits for its reply; a one-off import counts it as a call without a
response, and if the reply comes later the file is imported again whole (`ReimportFile`).
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ... import model as ev
from ...model import Event, Usage, stable_id
from ..fields import number_of, object_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, ReimportFile, Resumed, ends, instant

NAME = "copilot"
QUIET = frozenset({"assistant.turn_start", "assistant.turn_end", "session.resume", "session.start",
                   "tool.execution_start", "user.message", "system.message", "assistant.message",
                   "session.usage_record", "tool.execution_complete"})
COUNTS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens")


importer = FormatImporter(
    NAME, "GitHub Copilot CLI sessions (~/.copilot/session-state/<session>/events.jsonl)",
    lambda feed: _Log(feed).read(), home=Home(".copilot", ("session-state",), env=("COPILOT_HOME",)),
    opens=lambda first: first.get("type") == "session.start" and isinstance(first.get("data"), dict) and (
        "copilotVersion" in first["data"]))


class _Log(Resumed):
    """One event log. State between imports: the session, the open exchange, the system prompt, the conversation
    (Messages shape), tools started and not finished, and a usage record waiting for its reply."""

    def __init__(self, feed: Feed):
        super().__init__(feed)
        s = self.saved
        self.system: str | None = s.get("system")
        self.window: list = s.get("window", [])
        self.tools: dict[str, list] = s.get("tools", {})   # toolCallId -> [name, arguments, started at]
        self.held: list | None = s.get("held")             # [usage record event, line]
        self.taken: str | None = s.get("taken")            # apiCallId of a trailing usage imported alone
        self.unbilled = 0                                   # calls read now with no usage record

    def read(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.values(lambda v: isinstance(v, dict) and isinstance(v.get("type"), str) and isinstance(
                v.get("data"), dict), "expected an event with a string `type` and a `data` object"):
            yield from self._event(line.value, line.number)
        last = self.feed.read_to
        if self.sid is None or (last is None and (self.held is None or self.feed.may_grow())):
            return  # nothing new, and no usage record held back that may be imported now
        if self.held is not None and not self.feed.may_grow():
            self.taken = text_of(self.held[0]["data"]["usage"].get("apiCallId")) or ""
            yield from self._call(None, *self.held)
        if self.unbilled:
            self.feed.note(f"Copilot CLI wrote no `session.usage_record` for {self.unbilled} call(s) of "
                           f"{self.feed.where}: their tokens and cost are unknown (not 0)")
        yield from ends(self.sid, self.exchange, self.last_at or "")
        yield self.feed.checkpoint_read(self._state())

    def _state(self) -> dict:
        return {
            "sid": self.sid, "exchange": self.exchange, "last_at": self.last_at, "system": self.system,
            "window": self.window, "tools": self.tools, "held": self.held, "taken": self.taken}

    def _event(self, event: dict, number: int) -> Iterator[Event]:
        at = instant(event.get("timestamp")) or self.last_at
        kind, data = event["type"], event["data"]
        if self.sid is None and kind == "session.start":
            at = at or instant(data.get("startTime"))  # the session's own start, if its event has no timestamp
        if self.sid is None:
            if kind != "session.start" or not isinstance(data.get("sessionId"), str) or at is None:
                self.feed.skip(number, "an event before `session.start` (with a `sessionId` and a `timestamp`)")
                return
            yield self._start(data, at)
        assert at is not None
        self.last_at = max(self.last_at or at, at)
        if self.held is not None and not (kind == "assistant.message" and _api_id(data) == _api_id(
                self.held[0]["data"]["usage"])):
            yield from self._call(None, *self.held)
        if kind == "assistant.message" and self.taken is not None and _api_id(data) == self.taken:
            raise ReimportFile(f"the reply to {self.taken} came after its usage was imported alone")
        self.taken = None
        yield from self._dispatch(event, kind, data, number, at)

    def _dispatch(self, event: dict, kind: str, data: dict, number: int, at: str) -> Iterator[Event]:
        if kind == "user.message":
            yield from self._user(event, data, at)
        elif kind == "system.message" and isinstance(data.get("content"), str):
            self.system = data["content"]
        elif kind == "session.usage_record" and isinstance(data.get("usage"), dict):
            self.held = [event, number]
        elif kind == "assistant.message":
            yield from self._call(event, *(self.held or [None, number]))
        elif kind == "tool.execution_start" and isinstance(data.get("toolCallId"), str):
            self.tools[data["toolCallId"]] = [text_of(data.get("toolName")), data.get("arguments"), at]
        elif kind == "tool.execution_complete":
            yield from self._tool_result(event, data, at)
        elif kind not in QUIET:
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, event.get("id") or number),
                                     session_id=self.sid or "", at=at, outcome_kind=f"{NAME}:{kind}", payload=data)

    def _start(self, data: dict, at: str) -> ev.SessionStarted:
        self.sid = data["sessionId"]
        context = object_of(data.get("context"))
        labels = {"source": NAME, **{k: str(context[k]) for k in ("cwd", "branch") if context.get(k)}}
        if data.get("copilotVersion"):
            labels["version"] = str(data["copilotVersion"])
        return ev.SessionStarted(session_id=self.sid, started_at=at, agent="copilot-cli", labels=labels,
                                 model=text_of(data.get("selectedModel")), external_id=self.sid)

    def _user(self, event: dict, data: dict, at: str) -> Iterator[Event]:
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=at)
        self.exchange = stable_id(at, NAME, self.sid, "exchange", event.get("id"))
        yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid or "", started_at=at,
                                 input=data.get("content"))
        sent = data.get("transformedContent") or data.get("content")
        self.window.append({"role": "user", "content": [{"type": "text", "text": str(sent or "")}]})

    def _call(self, reply: dict | None, usage_event: dict | None, number: int) -> Iterator[Event]:
        """A call: its usage record (or none), its reply (or none: a usage record with no reply after it)."""
        self.held = None
        anchor = usage_event or reply
        assert anchor is not None
        at = instant(anchor.get("timestamp")) or self.last_at or ""
        counts = usage_event["data"]["usage"] if usage_event is not None else {}
        data = reply["data"] if reply is not None else {}
        call_id = stable_id(at, NAME, self.sid, anchor.get("id") or number)
        response = {"role": "assistant", "content": _blocks(data)}
        self.unbilled += usage_event is None
        if not self.feed.exists("call", call_id):
            model = text_of(counts.get("model")) or text_of(data.get("model"))
            request = {"model": model, "messages": list(self.window)}
            if self.system:
                request["system"] = self.system
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid or "", exchange_id=self.exchange, started_at=at,
                                  request=request, response=response if reply is not None else None, model=model,
                                  usage=self._usage(counts, number) if counts else None,
                                  latency_ms=number_of(counts.get("duration")),
                                  ttft_ms=number_of(counts.get("timeToFirstTokenMs")),
                                  stop_reason=text_of(counts.get("finishReason")),
                                  provider_message_id=text_of(counts.get("apiCallId") or data.get("apiCallId")),
                                  stable_history=True)
        if reply is not None:
            self.window.append(response)

    def _usage(self, counts: dict, number: int) -> Usage | None:
        return self.feed.usage(number, "usage", counts, COUNTS, _usage)

    def _tool_result(self, event: dict, data: dict, at: str) -> Iterator[Event]:
        tool_id = text_of(data.get("toolCallId"))
        name, args, started = self.tools.pop(tool_id or "", [None, None, None])
        result = object_of(data.get("result"))
        content = result.get("content", result.get("error", data.get("error")))
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": content if isinstance(content, str)
                 else str(content), "is_error": data.get("success") is False}
        last = self.window[-1] if self.window else None
        if last is not None and last["role"] == "user" and all(b.get("type") == "tool_result" for b in last["content"]):
            last["content"] = [*last["content"], block]  # parallel tool results are one user message
        else:
            self.window.append({"role": "user", "content": [block]})
        result_id = stable_id(at, NAME, self.sid, event.get("id") or tool_id)
        if not self.feed.exists("tool_result", result_id):
            yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid or "", at=at, tool_use_id=tool_id,
                                        name=name, input=args, content=content, is_error=data.get("success") is False,
                                        duration_ms=_elapsed_ms(started, at))


def _usage(counts: dict[str, int]) -> Usage:
    """Copilot's counts: input includes cache reads and writes; output includes reasoning."""
    read, write = counts["cacheReadTokens"], counts["cacheWriteTokens"]
    return Usage(input_tokens=max(counts["inputTokens"] - read - write, 0), cache_read_tokens=read,
                 cache_write_tokens=write, output_tokens=counts["outputTokens"],
                 reasoning_tokens=min(counts["reasoningTokens"], counts["outputTokens"]))


def _blocks(data: dict) -> list[dict]:
    blocks: list[dict] = []
    if isinstance(data.get("reasoningText"), str) and data["reasoningText"]:
        blocks.append({"type": "thinking", "thinking": data["reasoningText"]})
    if isinstance(data.get("content"), str) and data["content"]:
        blocks.append({"type": "text", "text": data["content"]})
    for tool in data.get("toolRequests") or []:
        if isinstance(tool, dict):
            args = tool.get("arguments")
            blocks.append({"type": "tool_use", "id": text_of(tool.get("toolCallId")), "name": text_of(tool.get("name")),
                           "input": args if isinstance(args, dict) else {}})
    return blocks


def _api_id(data: dict) -> Any:
    return data.get("apiCallId")


def _elapsed_ms(start: str | None, end: str) -> float | None:
    if start is None:
        return None
    try:
        span = datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(span.total_seconds() * 1000, 0.0)
