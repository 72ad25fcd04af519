"""Kimi CLI sessions: `~/.kimi/sessions/<md5 of the work dir>/<session id>/wire.jsonl` (`$KIMI_SHARE_DIR` for
`~/.kimi`).

`wire.jsonl` is the session's event stream: a `metadata` line, then `{timestamp (epoch seconds), message: {type,
payload}}`. `TurnBegin` (the user's input) opens a turn; each `StepBegin` is one model call, whose reply comes as
`ContentPart`s (`think`, `text`), `ToolCall`s (and `ToolCallPart` argument pieces), then `ToolResult`s, and whose
tokens come in a `StatusUpdate` (`token_usage`: `input_other` uncached, `input_cache_read`,
`input_cache_creation`, `output`; `message_id`). `SubagentEvent` wraps a sub-agent's events. Beside it,
`context.jsonl` opens with the system prompt; `<share>/kimi.json` lists the work dirs whose md5 names the folder.

- **Session**: the folder's session id; agent `kimi-cli`; labels `source=kimi`, `cwd` (from `kimi.json`).
- **Calls**: each step: request the system prompt and the conversation before it (Messages shape), response its
  thinking, text and tool calls, usage its last `StatusUpdate`. A sub-agent's steps are calls of a child session
  `<session>@<agent id>` (their tokens; the sub-agent's conversation is not rebuilt).
- **No model name**: Kimi's session files do not say which model answered, so calls have none and are not priced;
  the import says so. Tokens are exact.
- **Tool results**: `ToolResult` (`return_value.is_error`); they go back in the next request.
- `CompactionBegin`/`End`, `StepInterrupted`, `StepRetry`, notifications and unknown types are outcomes
  `kimi:<type>`; approvals, hooks and MCP loading are passed over.

Incremental: the file is read from where the last import stopped; under `watch`, in a file changed in the last 30
seconds, the last step waits for the next line. A step a one-off import took that then grew makes the file import
again whole (`ReimportFile`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ..fields import object_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, ReimportFile, ends, instant

NAME = "kimi"
NO_MODEL = ("kimi: its session files do not name the model that answered, so its calls have exact tokens but no"
            " model and no cost")
STEP_PARTS = ("ContentPart", "ToolCall", "ToolCallPart", "ToolResult", "StatusUpdate")
PASSED_OVER = frozenset({"ApprovalRequest", "ApprovalResponse", "HookTriggered", "HookResolved", "MCPLoadingBegin",
                         "MCPLoadingEnd", "TurnEnd", "PlanDisplay", "BtwBegin", "BtwEnd", "QuestionRequest",
                         "QuestionResponse", "ToolCallRequest", "HookRequest", "HookResponse"})
TOKENS = ("input_other", "input_cache_read", "input_cache_creation", "output")


def _is_line(value: Any) -> bool:
    """A line of the wire: the `metadata` line, or `{timestamp, message: {type, payload}}`."""
    return isinstance(value, dict) and (value.get("type") == "metadata" or (
        isinstance(value.get("message"), dict) and isinstance(value["message"].get("type"), str)))


importer = FormatImporter(
    NAME, "Kimi CLI sessions (~/.kimi/sessions/<work dir>/<session>/wire.jsonl)", lambda feed: _Wire(feed).read(),
    home=Home(".kimi", ("sessions",), env=("KIMI_SHARE_DIR",)), files=("wire.jsonl",),
    opens=lambda first: first.get("type") == "metadata" and "protocol_version" in first)


def _work_dir(session_folder: Path) -> str | None:
    """The work dir whose md5 names the session's parent folder, from `kimi.json` beside `sessions/`."""
    listing = session_folder.parent.parent / "kimi.json"
    try:
        dirs = orjson.loads(listing.read_bytes()).get("work_dirs", [])
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    digest = session_folder.name.rsplit("_", 1)[-1]
    return next((d["path"] for d in dirs if isinstance(d, dict) and isinstance(d.get("path"), str)
                 and hashlib.md5(d["path"].encode()).hexdigest() == digest), None)


def _system_prompt(folder: Path) -> str | None:
    try:
        with open(folder / "context.jsonl", "rb") as f:
            first = orjson.loads(f.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    return first.get("content") if isinstance(first, dict) and first.get("role") == "_system_prompt" else None


class _Wire:
    """One wire file. State between imports: the session, the open turn, the conversation, the step being read
    (a step at the end of the file, while `watch` follows it) and the sub-agent sessions started."""

    def __init__(self, feed: Feed):
        self.feed = feed
        s = feed.state or {}
        self.sid: str = s.get("sid") or feed.path.parent.name
        self.started: bool = s.get("started", False)
        self.exchange: str | None = s.get("exchange")
        self.last_at: str | None = s.get("last_at")
        self.window: list = s.get("window", [])
        self.step: dict | None = s.get("step")
        self.children: list[str] = s.get("children", [])
        self.taken: bool = s.get("taken", False)

    def read(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.values(_is_line, "expected `{timestamp, message: {type, payload}}`"):
            if line.value.get("type") != "metadata":
                yield from self._event(line.value, line.number)
        last = self.feed.read_to
        if not self.started or (last is None and (self.step is None or self.feed.may_grow())):
            return  # nothing new, and no step held back that may be imported now
        if self.step is not None and not self.feed.may_grow():
            yield from self._end_step()
            self.taken = True
        yield from ends(self.sid, self.exchange, self.last_at or "", self.children)
        yield self.feed.checkpoint_read(self._state())

    def _state(self) -> dict:
        return {"sid": self.sid, "started": self.started, "exchange": self.exchange, "last_at": self.last_at,
                "window": self.window, "step": self.step, "children": self.children, "taken": self.taken}

    def _event(self, value: dict, number: int) -> Iterator[Event]:
        at = instant(value.get("timestamp"), numbers=True) or self.last_at
        if at is None:
            self.feed.skip(number, "an event without a `timestamp` (epoch seconds) before any with one")
            return
        self.last_at = max(self.last_at or at, at)
        if not self.started:
            yield self._start(at)
        kind = value["message"]["type"]
        payload = value["message"].get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if kind in STEP_PARTS:
            if self.taken:
                raise ReimportFile("the step imported last grew")
            if self.step is None:
                self.step = {"at": at, "line": number, "blocks": [], "results": [], "usage": None, "id": None}
            self._part(kind, payload, at)
            return
        self.taken = False
        if kind in ("TurnBegin", "SteerInput", "StepBegin", "StepInterrupted", "CompactionBegin"):
            yield from self._end_step()
        if kind == "StepBegin":
            self.step = {"at": at, "line": number, "blocks": [], "results": [], "usage": None, "id": None}
        elif kind in ("TurnBegin", "SteerInput"):
            yield from self._turn(kind, payload, at)
        elif kind == "SubagentEvent":
            yield from self._subagent(payload, number, at)
        elif kind not in PASSED_OVER:
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, number), session_id=self.sid, at=at,
                                     outcome_kind=f"{NAME}:{kind}", payload=payload or None)

    def _start(self, at: str) -> ev.SessionStarted:
        self.started = True
        labels = {"source": NAME}
        cwd = _work_dir(self.feed.path.parent.parent)
        if cwd:
            labels["cwd"] = cwd
        self.window = []
        return ev.SessionStarted(session_id=self.sid, started_at=at, agent="kimi-cli", labels=labels,
                                 external_id=self.sid)

    def _turn(self, kind: str, payload: dict, at: str) -> Iterator[Event]:
        text = _text(payload.get("user_input"))
        if kind == "TurnBegin":
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=at)
            self.exchange = stable_id(at, NAME, self.sid, "exchange", len(self.window))
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid, started_at=at, input=text)
        self.window.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def _part(self, kind: str, payload: dict, at: str) -> None:
        step = self.step
        assert step is not None
        blocks = step["blocks"]
        if kind == "ContentPart":
            block = _content(payload)
            if block is None:
                return
            if blocks and blocks[-1]["type"] == block["type"] and block["type"] in ("text", "thinking"):
                key = block["type"]
                blocks[-1][key] += block[key]  # a part streamed in pieces
            else:
                blocks.append(block)
        elif kind == "ToolCall":
            fn = object_of(payload.get("function"))
            blocks.append({"type": "tool_use", "id": text_of(payload.get("id")), "name": text_of(fn.get("name")),
                           "arguments": fn.get("arguments") or ""})
        elif kind == "ToolCallPart" and blocks and blocks[-1]["type"] == "tool_use":
            blocks[-1]["arguments"] += payload.get("arguments_part") or ""
        elif kind == "ToolResult":
            step["results"].append([payload, at])
        elif kind == "StatusUpdate" and isinstance(payload.get("token_usage"), dict):
            step["usage"], step["id"] = payload["token_usage"], text_of(payload.get("message_id")) or step["id"]
            step["usage_line"] = self.feed.line

    def _end_step(self) -> Iterator[Event]:
        step, self.step = self.step, None
        if step is None:
            return
        response = {"role": "assistant", "content": [_finished(b) for b in step["blocks"]]}
        call_id = stable_id(step["at"], NAME, self.sid, step["line"])
        if not self.feed.exists("call", call_id):
            self.feed.note(NO_MODEL)
            system = _system_prompt(self.feed.path.parent)
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid, exchange_id=self.exchange,
                                  started_at=step["at"],
                                  request={"messages": list(self.window), **({"system": system} if system else {})},
                                  response=response,
                                  usage=self._usage(step["usage"], step.get("usage_line", step["line"])),
                                  provider_message_id=step["id"], stable_history=True)
        self.window.append(response)
        yield from self._results(step)

    def _results(self, step: dict) -> Iterator[Event]:
        blocks = []
        for payload, at in step["results"]:
            value = object_of(payload.get("return_value"))
            tool_id, error = text_of(payload.get("tool_call_id")), value.get("is_error") is True
            output = value.get("output")
            blocks.append({"type": "tool_result", "tool_use_id": tool_id, "content": _text(output), "is_error": error})
            result_id = stable_id(at, NAME, self.sid, "tool", tool_id, step["line"])
            if not self.feed.exists("tool_result", result_id):
                name = next((b["name"] for b in step["blocks"] if b["type"] == "tool_use" and b["id"] == tool_id), None)
                yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid, at=at, tool_use_id=tool_id,
                                            name=name, content=output, is_error=error)
        if blocks:
            self.window.append({"role": "user", "content": blocks})

    def _subagent(self, payload: dict, number: int, at: str) -> Iterator[Event]:
        """A sub-agent's step usage: a call of its child session, so what it cost is counted."""
        inner = object_of(payload.get("event"))
        usage = (inner.get("payload") or {}).get("token_usage") if isinstance(inner.get("payload"), dict) else None
        if inner.get("type") != "StatusUpdate" or not isinstance(usage, dict):
            return
        child = f"{self.sid}@{payload.get('agent_id') or payload.get('parent_tool_call_id')}"
        if child not in self.children:
            self.children.append(child)
            agent = text_of(payload.get("subagent_type")) or "kimi-cli"
            yield ev.SessionStarted(session_id=child, started_at=at, agent=agent,
                                    labels={"source": NAME, "subagent": "true"}, parent_session_id=self.sid)
        call_id = stable_id(at, NAME, child, number)
        if not self.feed.exists("call", call_id):
            yield ev.CallRecorded(call_id=call_id, session_id=child, exchange_id=None, started_at=at, request={},
                                  response=None, usage=self._usage(usage, number),
                                  provider_message_id=text_of(inner["payload"].get("message_id")))

    def _usage(self, counts: Any, number: int) -> Usage | None:
        if not isinstance(counts, dict):
            return None
        return self.feed.usage(number, "token_usage", counts, TOKENS, lambda c: Usage(
            input_tokens=c["input_other"], cache_read_tokens=c["input_cache_read"],
            cache_write_tokens=c["input_cache_creation"], output_tokens=c["output"]))


def _content(payload: dict) -> dict | None:
    if payload.get("type") == "text" and isinstance(payload.get("text"), str):
        return {"type": "text", "text": payload["text"]}
    if payload.get("type") == "think" and isinstance(payload.get("think"), str):
        return {"type": "thinking", "thinking": payload["think"]}
    return None


def _finished(block: dict) -> dict:
    """A step's block as the Messages API has it: a tool call's arguments parsed (kept as text if they do not)."""
    if block["type"] != "tool_use":
        return block
    try:
        args = orjson.loads(block["arguments"] or "{}")
    except orjson.JSONDecodeError:
        args = {"arguments": block["arguments"]}
    return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": args if isinstance(args, dict)
            else {"arguments": args}}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p.get("text", "") for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if value is None else str(value)
