"""Codex CLI rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` and `archived_sessions/`.

Each line is `{timestamp, type, payload}`:

- `session_meta` opens the session (its `id` is reasonlog's id too; a resumed session writes it again
  into the same file); its `instructions` are the system prompt of every call.
- `turn_context` names the model of the calls that follow.
- `response_item` is an item of the conversation, in the Responses API's shape. User, developer and
  tool-output items are what the next call is sent; the model's items (`message` from the assistant,
  `reasoning`, `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call`) are the
  response of the call being made.
- `event_msg` of type `token_count` closes that call with its usage: `info.last_token_usage` is the
  call's own (`input_tokens` includes `cached_input_tokens`; `output_tokens` includes
  `reasoning_output_tokens`). `info.total_token_usage` is a running total and is never added up; it
  identifies the call, so a sub-agent's file that replays its parent's `token_count` lines counts
  them once. `info` may be null (no figures yet). `user_message` opens an exchange; `task_complete` and
  `turn_aborted` close it.
- `compacted` replaces the conversation with its summary (an outcome `compaction` marks the place).
- Other line types are kept as outcomes `codex:<type>`.

Files of other versions and tools: a rollout without a `session_meta` line is the session named in
its file name (`rollout-<time>-<uuid>.jsonl`), from its first instant; the first Rust versions
(spring 2025) wrote a bare `{id, timestamp, instructions}` first line, then bare response items
and `{"record_type": "state"}` lines, with no instants or token counts (see `_legacy`).
A line of the wrong shape is skipped and reported with file:line; the rest of the file is imported.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..importer import Checkpoint, Feed, FormatImporter, Home, Line, ends, first_values, instant, walk
from .codex_shapes import legacy_line, model_of, usage_of

NAME = "codex"
OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


class CodexImporter(FormatImporter):
    def candidates(self, folder: Path) -> list[Path]:
        """The rollouts under a folder: in `sessions/` and `archived_sessions/` when it is a $CODEX_HOME."""
        homes = [folder / "sessions", folder / "archived_sessions"]
        roots = [h for h in homes if h.is_dir()] or [folder]
        return [p for root in roots for p in walk(root, "rollout-*.jsonl")]


def _mine(path: Path) -> bool:
    values = first_values(path, 3)
    if values and path.name.startswith("rollout-") and legacy_line(values[0], None) is not None:
        return True  # the first versions' bare session line
    return any(isinstance(v, dict) and isinstance(v.get("type"), str) and v["type"] in LINE_TYPES and "payload" in v
               and "timestamp" in v
               for v in values)


importer = CodexImporter(
    NAME, "Codex CLI rollouts ($CODEX_HOME or ~/.codex: sessions/, archived_sessions/)",
    lambda feed: _Reader(feed).run(), home=Home(".codex", ("sessions", "archived_sessions"), env=("CODEX_HOME",)),
    recognises=_mine)


class _BadLine(Exception):
    """A line whose shape is not Codex's, said in words: it is skipped and reported."""


class _Reader:
    """One rollout file; the state between imports is small (ids, the model, the call being made)."""

    def __init__(self, feed: Feed):
        self.feed = feed
        s = feed.state or {}
        self.sid: str | None = s.get("sid")
        self.model: str | None = s.get("model")
        self.instructions: Any = s.get("instructions")
        self.exchange: str | None = s.get("exchange")
        self.tools: dict[str, list] = s.get("tools", {})      # call_id -> [tool name, input], for its result
        self.pending: list = s.get("pending", [])             # input items since the last call
        self.outputs: list = s.get("outputs", [])             # the model's items of the call being made
        self.results: list = s.get("results", [])             # tool outputs that came before its figures
        self.first_at: str | None = s.get("first_at")         # when that call's first item came
        # None: what the last stored call left (read when needed); a compaction since then starts from []
        self.history: list | None = [] if not self.sid or s.get("compacted") else None
        self.last_at: str | None = s.get("last_at")
        self.compacted: bool = s.get("compacted", False)  # no call since the last compaction
        self.totals: str | None = s.get("totals")  # the last running total: a token_count repeating it is no call
        self.legacy: bool = s.get("legacy", False)  # the first versions' bare lines: no instants, no token counts
        self.touched = False

    def run(self) -> Iterator[Event | Checkpoint]:
        last: Line | None = None
        for line in self.feed.lines():
            last = line
            if self.feed.readable(line):
                yield from self._guarded(line)
            yield self._checkpoint(line)
        if self.legacy and self.outputs:
            yield from self._close(None, None)  # no token count ever closes a call in the first versions' files
        if self.sid is not None and self.touched and last is not None:
            yield from ends(self.sid, self.exchange, self.last_at or "")
            yield self._checkpoint(last)  # never past `last`: a cut last line is read again, whole, next time

    def _checkpoint(self, line: Line) -> Checkpoint:
        state = {"sid": self.sid, "model": self.model, "instructions": self.instructions, "exchange": self.exchange,
                 "tools": self.tools, "pending": self.pending, "outputs": self.outputs, "results": self.results,
                 "first_at": self.first_at, "last_at": self.last_at, "compacted": self.compacted,
                 "totals": self.totals, "legacy": self.legacy}
        return self.feed.checkpoint(line, state)

    def _guarded(self, line: Line) -> list[Event]:
        """The line's events, or none and a report naming the line when its shape is not one this reader knows
        (a field of another type than Codex writes): one bad line never loses the rest of the file."""
        try:
            return list(self._line(line))
        except _BadLine as exc:
            self.feed.skip(line, str(exc))
            return []
        except (TypeError, AttributeError, ValueError, KeyError, RecordError) as exc:
            self.feed.skip(line, f"not a rollout line of a shape reasonlog knows ({type(exc).__name__}: {exc})")
            return []

    def _line(self, line: Line) -> Iterator[Event]:
        v = line.value
        if isinstance(v, dict) and "payload" not in v and (self.sid is None or self.legacy):
            found = legacy_line(v, self.last_at)
            if found is not None:
                v, self.legacy = found, True
            elif self.legacy and "record_type" in v:
                return  # the first versions' state lines: bookkeeping
        if not isinstance(v, dict) or not isinstance(v.get("type"), str):
            self.feed.skip(line, "expected an object with `type`, `timestamp` and `payload`")
            return
        at = instant(v.get("timestamp"))
        payload = v.get("payload")
        if at is None or not isinstance(payload, dict):
            self.feed.skip(line, "`timestamp` must be an ISO-8601 instant and `payload` an object")
            return
        kind = v["type"]
        if kind == "session_meta":
            yield from self._session(payload, at, line)
            return
        if self.sid is None:
            yield from self._unnamed(at)
        self.last_at, self.touched = at, True
        if kind == "turn_context":
            self.model = model_of(payload) or self.model
        elif kind == "response_item":
            yield from self._item(payload, at)
        elif kind == "event_msg":
            yield from self._event(payload, at, line)
        elif kind == "compacted":
            yield from self._compacted(payload, at, line)
        else:
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, line.number), session_id=self.sid or "",
                                     at=at, outcome_kind=f"{NAME}:{kind}", payload=payload)

    def _session(self, payload: dict, at: str, line: Line) -> Iterator[Event]:
        sid = payload.get("id")
        if not isinstance(sid, str) or not sid:
            self.feed.skip(line, "session_meta: expected its `id` as a non-empty string")
            return
        self.instructions = _instructions(payload) or self.instructions
        self.last_at = at
        if sid == self.sid or self.feed.exists("session", sid):
            self.sid = sid  # resumed: the same session goes on
            return
        if self.sid is not None:  # a session_meta after lines that began another session: this file's sessions
            yield from self._end_session()
        self.sid, self.history, self.touched = sid, [], True
        labels = {"source": NAME, **{k: payload[k] for k in ("cwd", "cli_version", "originator")
                                     if isinstance(payload.get(k), str)}}
        origin = payload.get("source")
        if origin is not None:  # cli, vscode, exec, or {"subagent": ...}
            labels["codex_source"] = origin if isinstance(origin, str) else orjson.dumps(origin).decode()
        yield ev.SessionStarted(session_id=sid, started_at=instant(payload.get("timestamp")) or at, agent="codex",
                                provider="openai", labels=labels, external_id=sid, parent_session_id=_parent(payload))

    def _unnamed(self, at: str) -> Iterator[Event]:
        """A rollout without a session_meta line: the session its file is named after, from its first instant."""
        found = _UUID.findall(self.feed.path.stem)
        sid = found[-1].lower() if found else self.feed.path.stem
        self.sid, self.history, self.touched, self.last_at = sid, [], True, at
        if not self.feed.exists("session", sid):
            yield ev.SessionStarted(session_id=sid, started_at=at, agent="codex", provider="openai",
                                    labels={"source": NAME}, external_id=sid)
        else:
            self.history = None  # another file began it: go on from what is stored

    def _end_session(self) -> Iterator[Event]:
        yield from self._close(None, None)
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=self.last_at or "")
            self.exchange = None
        yield ev.SessionEnded(session_id=self.sid or "", ended_at=self.last_at or "")
        self.pending, self.results, self.tools = [], [], {}

    # ------------------------------------------------------------------------------ items and calls

    def _item(self, item: dict, at: str) -> Iterator[Event]:
        kind = item.get("type")
        if not isinstance(kind, str):
            raise _BadLine(f"response_item: expected `type` as a string, got {type(kind).__name__}")
        if kind in OUTPUT_ITEMS or (kind == "message" and item.get("role") == "assistant"):
            if self.results:  # the model answered tool results: the call before them ended without figures
                yield from self._close(None, None)
            if kind in ("function_call", "custom_tool_call", "local_shell_call") and item.get("call_id"):
                self.tools[str(item["call_id"])] = [str(item.get("name") or kind), _input(item)]
            self.first_at = self.first_at or at
            self.outputs.append(item)
            return
        if kind in RESULT_ITEMS:
            call_id = str(item.get("call_id"))
            output = item.get("output")
            name, given = self.tools.pop(call_id, [None, None])
            yield ev.ToolResultRecorded(tool_result_id=stable_id(at, NAME, self.sid, "result", call_id),
                                        session_id=self.sid or "", at=at, tool_use_id=call_id, name=name, input=given,
                                        content=output, is_error=_failed(output))
            if self.outputs:  # a tool ran before the call's figures came: its result waits for them
                self.results.append(item)
                return
        else:
            yield from self._close(None, None)  # new input: a call whose figures never came has ended
        self.pending.append(item)

    def _close(self, usage: Usage | None, key: Any) -> Iterator[Event]:
        """End the call being made: its response is the model's items since the last input."""
        if not self.outputs:
            self.pending += self.results
            self.results = []
            if usage is not None:  # billed, though no item of its response was written (cut off, failed)
                yield from self._unanswered(usage, key)
            return
        outputs, at = self.outputs, self.first_at or self.last_at or ""
        self.outputs, self.first_at = [], None
        history = self._history()
        request: dict[str, Any] = {"model": self.model, "input": history + self.pending}
        if self.instructions:
            request["instructions"] = self.instructions
        call_id = stable_id(None, NAME, key) if key is not None else stable_id(at, NAME, self.sid, len(history))
        if not self.feed.exists("call", call_id):
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid or "", exchange_id=self.exchange, started_at=at,
                                  request=request, response={"role": "assistant", "content": outputs},
                                  model=self.model, provider="openai", usage=usage, stable_history=True)
        self.history = request["input"] + outputs
        self.pending, self.results, self.compacted = self.results, [], False

    def _unanswered(self, usage: Usage, key: Any) -> Iterator[Event]:
        """A call that has figures and no response item: what it was sent, its usage, no response."""
        at = self.last_at or ""
        request: dict[str, Any] = {"model": self.model, "input": self._history() + self.pending}
        if self.instructions:
            request["instructions"] = self.instructions
        call_id = stable_id(None, NAME, key) if key is not None else stable_id(at, NAME, self.sid, "unanswered")
        if not self.feed.exists("call", call_id):
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid or "", exchange_id=self.exchange, started_at=at,
                                  request=request, response=None, model=self.model, provider="openai", usage=usage)

    def _history(self) -> list:
        if self.history is None:
            self.history = _as_items(self.feed.history(self.sid or ""))
        return self.history

    # ------------------------------------------------------------------------------ events

    def _event(self, payload: dict, at: str, line: Line) -> Iterator[Event]:
        kind = payload.get("type")
        if kind == "token_count":
            info = payload.get("info")
            if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
                return  # no figures yet
            try:
                usage = usage_of(info["last_token_usage"])
            except (RecordError, TypeError) as exc:
                self.feed.skip(line, f"token_count: {exc}")
                usage = None
            # Newer versions name the model that answered beside its figures: the call is that model's.
            self.model = model_of(info) or model_of(payload) or self.model
            # The running total identifies the call: a sub-agent's file that replays its parent's lines (written
            # again, at other instants) names the same call, which is then counted once. The same total again in
            # this file is a repeat (Codex sends it again with new rate limits), not a call.
            total = info.get("total_token_usage")
            totals = orjson.dumps(total, option=orjson.OPT_SORT_KEYS).decode() if isinstance(total, dict) else None
            if totals is not None and totals == self.totals:
                return
            self.totals = totals or self.totals
            yield from self._close(usage, totals)
        elif kind == "user_message":
            yield from self._close(None, None)
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=at)
            self.exchange = stable_id(at, NAME, self.sid, "exchange", line.number)
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid or "", started_at=at,
                                     input=payload.get("message"))
        elif kind in ("task_complete", "turn_aborted") and self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid or "", ended_at=at,
                                   result=payload.get("last_agent_message"),
                                   status="completed" if kind == "task_complete" else "interrupted")
            self.exchange = None

    def _compacted(self, payload: dict, at: str, line: Line) -> Iterator[Event]:
        yield from self._close(None, None)
        replacement = payload.get("replacement_history")
        summary = payload.get("message")
        self.history, self.compacted = (list(replacement) if isinstance(replacement, list) else []), True
        self.pending = [] if isinstance(replacement, list) else [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _text(summary)}]}]
        yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.sid, "compaction", line.number),
                                 session_id=self.sid or "", at=at, outcome_kind="compaction",
                                 payload={"summary": summary})


def _parent(meta: dict) -> str | None:
    """The session a sub-agent's or a fork's session came from, when its session_meta says so."""
    origin = meta.get("source")
    spawn = origin.get("subagent") if isinstance(origin, dict) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else meta.get("forked_from_id")
    return parent if isinstance(parent, str) and parent else None


def _input(item: dict) -> Any:
    """What a tool was given: a function call's arguments (JSON text, parsed), a custom tool's input, a shell's
    action."""
    if item.get("type") == "local_shell_call":
        return item.get("action")
    if item.get("type") == "custom_tool_call":
        return item.get("input")
    arguments = item.get("arguments")
    try:
        return orjson.loads(arguments) if isinstance(arguments, str) else arguments
    except orjson.JSONDecodeError:
        return arguments


def _instructions(meta: dict) -> Any:
    """The system prompt a session_meta names: `instructions`, or newer versions' `base_instructions.text`."""
    base = meta.get("base_instructions")
    return meta.get("instructions") or (base.get("text") if isinstance(base, dict) else base) or None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else orjson.dumps(value).decode()


def _as_items(messages: list) -> list:
    """A stored request's input and response, back as Responses items (a response is its items)."""
    out: list = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), list) \
                and "type" not in m:
            out.extend(m["content"])
        else:
            out.append(m)
    return out


def _failed(output: Any) -> bool:
    """A shell tool's output says its exit code (JSON metadata, or an `Exit code: N` first line); an output
    object may say `success`; anything else is taken as a success."""
    if isinstance(output, dict):
        return output.get("success") is False
    if isinstance(output, str) and output.startswith("Exit code: "):
        return output.split("\n", 1)[0].removeprefix("Exit code: ").strip() not in ("0", "")
    if isinstance(output, str) and output.startswith("{"):
        try:
            meta = orjson.loads(output).get("metadata") or {}
        except (orjson.JSONDecodeError, AttributeError):
            return False
        return isinstance(meta, dict) and isinstance(meta.get("exit_code"), int) and meta["exit_code"] != 0
    return False
