"""Qwen Code chats: `~/.qwen/projects/<cwd with / as ->/chats/<sessionId>.jsonl` (`$QWEN_RUNTIME_DIR` or
`$QWEN_HOME` instead of `~/.qwen`).

Every line is a record `{uuid, parentUuid, sessionId, timestamp, type, cwd, version, ...}` chained by
`parentUuid`. `user`, `assistant` and `tool_result` records carry a Gemini `Content` (`message`: a role and
parts); `system` records carry the CLI's bookkeeping by `subtype`. A resumed session (`--continue`) appends to
the same file.

- **Session**: Qwen's `sessionId`, labels `source=qwen`, `cwd`, `version`; agent `qwen-code`.
- **Calls**: each `assistant` record is one call; its request is the conversation before it (Gemini `contents`,
  as Qwen rebuilds it: the messages of `user`, `assistant` and `tool_result` records, restarted from a
  `chat_compression` record's `compressedHistory`); its usage is `usageMetadata` (`promptTokenCount` includes
  `cachedContentTokenCount`; `thoughtsTokenCount` is reasoning, inside `candidatesTokenCount` when the total says
  so). The `ui_telemetry` record `qwen-code.api_response` written just before it gives its latency and response
  id. An `api_response` not followed by an `assistant` record is a call the CLI made on the side (a sub-agent such
  as its memory extractor, titles, next-speaker checks): billed, so it is a call too, with the telemetry's tokens
  and `response_text` and no request.
  One a sub-agent made (`subagent_name`) is a call of the child session `<session>@<sub-agent instance>`.
- **Tool results**: `tool_result` records (`toolCallResult.status` error or cancelled: failed).
- **Rewinds**: a record whose parent is not the record before it goes back in the conversation to its parent.
- Other `system` subtypes (`slash_command`, `chat_compression`, `rewind`, `custom_title`, ...) are outcomes
  `qwen:<subtype>`; `attribution_snapshot` and the other telemetry events are passed over.

Qwen records no cost; calls are priced by reasonlog from the model's name. Incremental: a trailing `api_response` is
held while `watch` follows a file changed in the last 30 seconds; a one-off import counts it as a side call, and if
its reply then appears the file is imported again whole (`ReimportFile`).
"""
from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, TypeGuard

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import number_of, object_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, ReimportFile, Resumed, ends, instant

NAME = "qwen"
CONVERSATION = ("user", "assistant", "tool_result")
PASSED_OVER = ("attribution_snapshot",)


def _opens(value: dict) -> bool:
    """Qwen's records, told from Claude Code's (the same envelope) by a Gemini `parts` list or a `systemPayload`."""
    return _is_record(value) and (isinstance((value.get("message") or {}).get("parts"), list) or (
        "systemPayload" in value))


importer = FormatImporter(
    NAME, "Qwen Code chats (~/.qwen/projects/<project>/chats/<session>.jsonl)", lambda feed: _Chat(feed).read(),
    home=Home(".qwen", ("projects",), env=("QWEN_RUNTIME_DIR", "QWEN_HOME")), opens=_opens, sniffed=4)


def _is_record(value: object) -> TypeGuard[dict]:
    return (isinstance(value, dict) and isinstance(value.get("sessionId"), str) and isinstance(value.get("uuid"), str)
            and "parentUuid" in value and isinstance(value["parentUuid"], (str, type(None)))
            and isinstance(value.get("type"), str))


class _Chat(Resumed):
    """One chat file. State between imports: the session, the open exchange, the conversation (Gemini contents,
    with its length after each record, for rewinds), the last record's uuid and a telemetry record held back."""

    def __init__(self, feed: Feed):
        super().__init__(feed)
        s = self.saved
        self.contents: list = s.get("contents", [])
        self.lengths: dict[str, int] = s.get("lengths", {})   # record uuid -> len(contents) after it
        self.previous: str | None = s.get("previous")          # the uuid of the last record read
        self.held: list | None = s.get("held")                 # [api_response record, line]: its reply may follow
        self.side: str | None = s.get("side")                  # a trailing api_response imported as a side call
        self.children: list[str] = s.get("children", [])       # the sub-agent sessions started

    def read(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.values(_is_record, "expected a record with string `uuid`, `sessionId` and `type`, and"
                                                 " `parentUuid` (a text or null)"):
            yield from self._record(line.value, line.number)
        last = self.feed.read_to
        if self.sid is None or (last is None and (self.held is None or self.feed.may_grow())):
            return  # nothing new, and no telemetry held back that may be imported now
        if self.held is not None and not self.feed.may_grow():
            self.side = self.held[0]["uuid"]
            yield from self._release()
        yield from ends(self.sid, self.exchange, self.last_at or "", self.children)
        yield self.feed.checkpoint_read(self._state())

    def _state(self) -> dict:
        return {
            "sid": self.sid, "exchange": self.exchange, "last_at": self.last_at, "contents": self.contents,
            "lengths": self.lengths, "previous": self.previous, "held": self.held, "side": self.side,
            "children": self.children}

    def _record(self, record: dict, number: int) -> Iterator[Event]:
        at = instant(record.get("timestamp")) or self.last_at
        if at is None:
            self.feed.skip(number, "a record without a `timestamp` before any record with one")
            return
        self.last_at = max(self.last_at or at, at)
        if self.sid is None:
            yield self._start(record, at)
        kind, parent = record["type"], record.get("parentUuid")
        if self.held is not None and not (kind == "assistant" and parent == self.held[0]["uuid"]):
            yield from self._release()
        if parent is not None and parent != self.previous and parent in self.lengths:
            del self.contents[self.lengths[parent]:]  # a rewind: back to the parent's place in the conversation
        self.previous = record["uuid"]
        if kind in CONVERSATION:
            yield from self._message(record, number, at)
        elif kind == "system":
            yield from self._system(record, number, at)
        else:
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, record["uuid"]),
                                     session_id=self.sid or "", at=at, outcome_kind=f"{NAME}:{kind}", payload=record)
        self.lengths[record["uuid"]] = len(self.contents)
        self.side = None  # only the record right after a trailing api_response can be its reply

    def _start(self, record: dict, at: str) -> ev.SessionStarted:
        self.sid = record["sessionId"]
        labels = {"source": NAME, **{k: str(record[k]) for k in ("cwd", "version") if record.get(k) is not None}}
        return ev.SessionStarted(session_id=self.sid, started_at=at, agent="qwen-code", labels=labels,
                                 external_id=self.sid)

    def _message(self, record: dict, number: int, at: str) -> Iterator[Event]:
        m = record.get("message")
        if not isinstance(m, dict) or not isinstance(m.get("parts"), list):
            self.feed.skip(number, f"a {record['type']} record needs a `message` with a `parts` list")
            return
        content = {"role": m.get("role") or "user", "parts": m["parts"]}
        if record["type"] == "user":
            yield from self._user(record, content, at)
        elif record["type"] == "assistant":
            yield from self._call(record, content, number, at)
        else:
            yield from self._tool_result(record, content, at)
        self.contents.append(content)

    def _user(self, record: dict, content: dict, at: str) -> Iterator[Event]:
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=at)
        self.exchange = stable_id(at, NAME, self.sid, "exchange", record["uuid"])
        yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid or "", started_at=at,
                                 input=_text(content["parts"]))

    def _call(self, record: dict, content: dict, number: int, at: str) -> Iterator[Event]:
        telemetry, self.held = (self.held[0] if self.held else {}).get("systemPayload", {}).get("uiEvent", {}), None
        if self.side is not None and record.get("parentUuid") == self.side:
            raise ReimportFile(f"the reply to {self.side} came after it was imported as a side call")
        call_id = stable_id(at, NAME, self.sid, record["uuid"])
        if self.feed.exists("call", call_id):
            return
        model = record.get("model") if isinstance(record.get("model"), str) else None
        usage = self._usage(number, record.get("usageMetadata"), ("promptTokenCount", "candidatesTokenCount",
                                                                   "cachedContentTokenCount", "thoughtsTokenCount",
                                                                   "totalTokenCount"))
        yield ev.CallRecorded(call_id=call_id, session_id=self.sid or "", exchange_id=self.exchange, started_at=at,
                              request={"model": model, "contents": list(self.contents)}, response=content, model=model,
                              usage=usage, latency_ms=number_of(telemetry.get("duration_ms")),
                              provider_message_id=text_of(telemetry.get("response_id")), stable_history=True)

    def _tool_result(self, record: dict, content: dict, at: str) -> Iterator[Event]:
        result = object_of(record.get("toolCallResult"))
        for k, part in enumerate(content["parts"]):
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(response, dict):
                continue
            result_id = stable_id(at, NAME, self.sid, record["uuid"], k)
            if self.feed.exists("tool_result", result_id):
                continue
            output = response.get("response")
            output = output.get("output", output.get("error", output)) if isinstance(output, dict) else output
            yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid or "", at=at,
                                        tool_use_id=text_of(response.get("id")), name=text_of(response.get("name")),
                                        content=output, is_error=result.get("status") in ("error", "cancelled"))

    def _system(self, record: dict, number: int, at: str) -> Iterator[Event]:
        subtype, payload = record.get("subtype"), record.get("systemPayload")
        event = payload.get("uiEvent") if isinstance(payload, dict) else None
        if subtype == "ui_telemetry":
            if isinstance(event, dict) and event.get("event.name") == "qwen-code.api_response":
                self.held = [record, number]
            return
        if subtype in PASSED_OVER:
            return
        if subtype == "chat_compression" and isinstance(payload, dict) and isinstance(
                payload.get("compressedHistory"), list):
            self.contents = list(payload["compressedHistory"])
            payload = {"info": payload.get("info"), "messages": len(self.contents)}
        yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, record["uuid"]), session_id=self.sid or "",
                                 at=at, outcome_kind=f"{NAME}:{subtype}", payload=payload)

    def _release(self) -> Iterator[Event]:
        """The held `api_response` had no reply after it: a call the CLI made on the side."""
        record, number = self.held  # type: ignore[misc]
        self.held = None
        event = record["systemPayload"]["uiEvent"]
        at = instant(event.get("event.timestamp")) or instant(record.get("timestamp")) or self.last_at or ""
        call_id = stable_id(at, NAME, self.sid, record["uuid"])
        if self.feed.exists("call", call_id):
            return
        session, exchange = yield from self._caller(event, at)
        model = text_of(event.get("model"))
        usage = self._usage(number, event, ("input_token_count", "output_token_count", "cached_content_token_count",
                                            "thoughts_token_count", "total_token_count"))
        text = event.get("response_text")
        yield ev.CallRecorded(call_id=call_id, session_id=session, exchange_id=exchange, started_at=at,
                              request={"model": model, "contents": []}, model=model, usage=usage,
                              response={"role": "model", "parts": [{"text": text}] if isinstance(text, str) else []},
                              latency_ms=number_of(event.get("duration_ms")),
                              provider_message_id=text_of(event.get("response_id")),
                              status="ok" if event.get("status_code") in (None, 200) else "error")

    def _caller(self, event: dict, at: str) -> Generator[Event, None, tuple[str, str | None]]:
        """The session a side call belongs to: this one, or the child session of the sub-agent that made it
        (`subagent_name`; its instance is the part of `prompt_id` after `#`), started when first seen."""
        name = event.get("subagent_name")
        if not isinstance(name, str):
            return self.sid or "", self.exchange
        instance = str(event.get("prompt_id") or "").split("#")
        child = f"{self.sid}@{instance[1] if len(instance) > 1 and instance[1] else name}"
        if child not in self.children:
            self.children.append(child)
            yield ev.SessionStarted(session_id=child, started_at=at, agent=name, parent_session_id=self.sid,
                                    labels={"source": NAME, "subagent": "true"})
        return child, None

    def _usage(self, number: int, counts: Any, keys: tuple[str, str, str, str, str]) -> Usage | None:
        """Gemini-style counts as disjoint counters: the prompt includes the cache reads; thoughts are inside the
        candidates when the total is prompt + candidates, beside them otherwise."""
        if not isinstance(counts, dict):
            return None
        prompt, out, cached, thoughts, total = (counts.get(k) or 0 for k in keys)
        for key, value in zip(keys, (prompt, out, cached, thoughts, total), strict=True):
            if type(value) is not int or value < 0:
                self.feed.skip(number, f"{key}: expected a non-negative integer, got {value!r}; the call is kept"
                                       " without usage")
                return None
        if total != prompt + out:
            out += thoughts
        try:
            return Usage(input_tokens=max(prompt - cached, 0), cache_read_tokens=min(cached, prompt),
                         output_tokens=out, reasoning_tokens=min(thoughts, out))
        except RecordError as exc:
            self.feed.skip(number, f"usage: {exc}")
            return None


def _text(parts: list) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                     and not p.get("thought"))
