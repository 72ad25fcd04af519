"""Cline, Roo Code and Kilo Code tasks: VS Code's `globalStorage/<extension>/tasks/<task id>/`, one folder per task
(and the Cline CLI 1.x and 2.x's `~/.cline/data/tasks/<task id>/`, the same folder). Cline CLI 3.x's sessions
(`~/.cline/data/sessions/<id>/<id>.messages.json`) are read by `cline_sessions`, as the same format.

The three extensions share Cline's task folder (Roo Code and Kilo Code are its forks):
`api_conversation_history.json` (the conversation as sent: Anthropic-shaped messages), `ui_messages.json` (what the
panel shows: `say` and `ask` records, among them `api_req_started`, whose `text` is a JSON object with `tokensIn`,
`tokensOut`, `cacheWrites`, `cacheReads`, `cost` once the request ended) and `task_metadata.json` (models used).

- **Session.** One per task folder: id `<agent>-<task id>`; labels `source` (cline, roo-code or kilo-code, from the
  extension's folder) and `task_id`.
- **Calls.** Each `api_req_started` is one request to the model, with its own tokens and cost (as the extension
  reported it; a 0 with tokens means it knew no price, and reasonlog prices it). The n-th one's reply is the n-th
  assistant message of the conversation, and its request the conversation before that. `apiProtocol: openai`
  means `tokensIn` counted the cache reads and writes too: they are taken out once. Cline writes no
  `apiProtocol`: there the record's provider says it (`WHOLE_PROMPT`, the providers whose handlers report the
  prompt's tokens whole).
- **Exchanges.** The task's first prompt (`say: task`) and each later message the user typed (`user_feedback`).
- **Tool results.** In the user message after an assistant's tools: a `tool_result` block, or Cline's text block
  `[<tool> for '<what>'] Result:` followed by the output, paired with that message's `tool_use` of the same id or
  name where there is one (native tool calls); with XML tool tags there is none, and the result has only its name.

Both JSON files are rewritten whole as the task goes on: the folder is one source (its files' sizes and times are
its signature), read again when it changed, and only requests after the last one imported become calls. Under
`reasonlog watch`, a last request without its usage yet waits for the next pass.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..importer import BaseImporter, Checkpoint, Feed, epoch_ms, instant
from . import cline_sessions as cline3

NAME = "cline"
EXTENSIONS = {"saoudrizwan.claude-dev": "cline", "rooveterinaryinc.roo-cline": "roo-code",
              "kilocode.kilo-code": "kilo-code"}
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
ANCHOR = "ui_messages.json"
FILES = (ANCHOR, "api_conversation_history.json", "task_metadata.json")
# Cline's providers (`modelInfo.providerId`) whose handlers put the prompt's tokens whole in `tokensIn`, its cache
# reads and writes among them (Cline 3.82's handlers; `openai`, its OpenAI-compatible provider, checked on a task
# folder Cline wrote). The others report the uncached input alone, as Anthropic does.
WHOLE_PROMPT = frozenset({"openai", "lmstudio", "fireworks", "qwen", "doubao", "xai", "zai", "litellm", "requesty",
                          "oca"})
# Cline's text for a tool's result: `formatResponse.toolResult` after the tool's description.
RESULT = re.compile(r"\[(\S+?)(?: for '.*?')?\] Result:[\n ]?", re.S)
FAILED = ("The tool execution failed with the following error:", "The user denied this operation.")


class ClineImporter(BaseImporter):
    name = NAME
    description = "Cline, Roo Code and Kilo Code tasks (VS Code globalStorage/<extension>/tasks/<id>/)"
    incremental = True

    def default_folders(self) -> list[Path]:
        if sys.platform == "darwin":
            config = Path.home() / "Library" / "Application Support"
        else:
            config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config").expanduser()
        cli = Path(os.environ.get("CLINE_DIR") or Path.home() / ".cline").expanduser() / "data"
        return [config / editor / "User" / "globalStorage" / ext / "tasks" for editor in EDITORS
                for ext in EXTENSIONS] + [cli / "tasks", cli / "sessions"]

    def detect(self, path: Path) -> bool:
        return next(self.sources(path), None) is not None

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            anchor = _anchor(path.parent) if path.name in FILES else path if cline3.is_session_file(path) else None
            if anchor is not None:
                yield anchor
            return
        yield from cline3.session_files(path)
        folders = [path, *(p.parent for p in path.glob(f"*/{FILES[1]}")), *(p.parent for p in path.glob(
            f"tasks/*/{FILES[1]}"))]
        for folder in sorted(set(folders)):
            anchor = _anchor(folder)
            if anchor is not None:
                yield anchor

    def signature(self, path: Path) -> tuple[int, int] | None:
        if path.name.endswith(cline3.SUFFIX):
            return None  # a Cline 3 session: one file
        stats = [f.stat() for f in (path.parent / name for name in FILES) if f.is_file()]
        return sum(s.st_size for s in stats), max(s.st_mtime_ns for s in stats)

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        state = dict(feed.state or {})
        if feed.path.name.endswith(cline3.SUFFIX):
            yield from cline3.session_events(feed, WHOLE_PROMPT)
        else:
            yield from _Task(feed, state).events()
        yield feed.checkpoint(None, state)


importer = ClineImporter()


def agent_of(task_folder: Path) -> str:
    """cline, roo-code or kilo-code, from the extension folder above `tasks/` (cline when it is not there)."""
    return EXTENSIONS.get(task_folder.parent.parent.name, NAME)


class _Task:
    def __init__(self, feed: Feed, state: dict):
        self.feed, self.state = feed, state
        self.folder = feed.path.parent
        self.agent = agent_of(self.folder)
        self.sid = f"{self.agent}-{self.folder.name}"

    def events(self) -> Iterator[Event]:
        if self.feed.path.name == FILES[1]:
            yield from self._history_only()
            return
        ui = self._array(self.feed.path)
        history = self._array(self.folder / FILES[1])
        if ui is None or history is None:
            return
        records = [(n, r) for n, r in enumerate(ui) if isinstance(r, dict) and isinstance(r.get("ts"), (int, float))]
        if not records:
            self.feed.skip(None, "no record with a `ts` in it", record=ANCHOR)
            return
        done = self.state.get("calls", 0)
        if not self.state.get("started"):
            yield ev.SessionStarted(session_id=self.sid, started_at=epoch_ms(records[0][1]["ts"]) or "",
                                    agent=self.agent, labels={"source": self.agent, "task_id": self.folder.name},
                                    external_id=self.folder.name)
            self.state["started"] = True
        replies = [i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == "assistant"]
        calls, exchange, exchanges, times = 0, None, 0, []
        for n, record in records:
            at = epoch_ms(record["ts"]) or ""
            if record.get("say") in ("task", "user_feedback"):
                exchange = stable_id(at, self.sid, "exchange", record["ts"])
                if exchanges >= self.state.get("exchanges", 0):
                    yield ev.ExchangeStarted(exchange_id=exchange, session_id=self.sid, started_at=at,
                                             input=record.get("text"))
                    self.state["exchanges"] = exchanges + 1
                exchanges += 1
            elif record.get("say") == "api_req_started":
                times.append(at)
                info = self._info(record, n)
                if self.feed.live and info is not None and _unfinished(info) and n == records[-1][0]:
                    break  # still streaming: its usage comes when it ends
                if calls >= done:
                    yield self._call(calls, record, info, history, replies, exchange, at)
                    self.state["calls"] = calls + 1
                calls += 1
        yield from self._tool_results(history, times or [epoch_ms(records[0][1]["ts"]) or ""])
        yield ev.SessionEnded(session_id=self.sid, ended_at=epoch_ms(records[-1][1]["ts"]) or "")

    def _history_only(self) -> Iterator[Event]:
        """A task folder without `ui_messages.json` (deleted, or never copied): the conversation is all there is.
        Each assistant message is a call whose request is the conversation before it; no tokens or cost."""
        history = self._array(self.feed.path)
        if history is None:
            return
        named = epoch_ms(int(self.folder.name)) if self.folder.name.isdigit() else None  # Cline's task id: epoch ms
        start = named or instant(self.feed.path.stat().st_mtime, numbers=True) or ""
        if not self.state.get("started"):
            yield ev.SessionStarted(session_id=self.sid, started_at=start, agent=self.agent,
                                    labels={"source": self.agent, "task_id": self.folder.name},
                                    external_id=self.folder.name)
            first = next((m for m in history if isinstance(m, dict) and m.get("role") == "user"), None)
            yield ev.ExchangeStarted(exchange_id=stable_id(start, self.sid, "exchange", "history"), session_id=self.sid,
                                     started_at=start, input=_text(first))
            self.state["started"] = True
        exchange = stable_id(start, self.sid, "exchange", "history")
        replies = [i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == "assistant"]
        times, done = [], self.state.get("calls", 0)
        for k, i in enumerate(replies):
            at = epoch_ms(history[i].get("ts")) or start
            times.append(at)
            if k >= done:
                yield ev.CallRecorded(call_id=stable_id(at, self.sid, "call", "history", k), session_id=self.sid,
                                      exchange_id=exchange, started_at=at,
                                      request={"model": None, "messages": [_message(m) for m in history[:i]]},
                                      response=_message(history[i]))
                self.state["calls"] = k + 1
        self.feed.note(f"{self.folder}: no {ANCHOR}, so the calls come from {FILES[1]} alone, without tokens, cost"
                       " or model")
        yield from self._tool_results(history, times or [start])
        yield ev.SessionEnded(session_id=self.sid, ended_at=times[-1] if times else start)

    def _tool_results(self, history: list, times: list[str]) -> Iterator[Event]:
        """The results in each user message that follows an assistant's: its time the message's `ts`, else that of
        the request that sent it."""
        asked: list = []
        replies = 0
        for i, message in enumerate(history):
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if message.get("role") == "assistant":
                asked = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] \
                    if isinstance(content, list) else []
                replies += 1
                continue
            if not replies or not isinstance(content, list):
                continue
            at = epoch_ms(message.get("ts")) or times[min(replies, len(times) - 1)]
            for j, block in enumerate(content):
                found = _result(block, asked)
                if found is None:
                    continue
                result_id = stable_id(at, NAME, self.sid, "tool_result", i, j)
                if self.feed.exists("tool_result", result_id):
                    continue
                use, name, output, failed = found
                yield ev.ToolResultRecorded(tool_result_id=result_id, session_id=self.sid, at=at,
                                            tool_use_id=use.get("id") if use else block.get("tool_use_id"), name=name,
                                            input=use.get("input") if use else None, content=output, is_error=failed)

    def _array(self, path: Path) -> list | None:
        try:
            value = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            self.feed.skip(None, f"not readable as JSON ({str(exc).split(':', 1)[0]})", record=path.name)
            return None
        if not isinstance(value, list):
            self.feed.skip(None, "expected a JSON array", record=path.name)
            return None
        return value

    def _info(self, record: dict, n: int) -> dict | None:
        try:
            info = orjson.loads(record.get("text") or "{}")
        except orjson.JSONDecodeError:
            info = None
        if not isinstance(info, dict):
            self.feed.skip(None, "api_req_started: its `text` is not a JSON object; the call is kept without usage",
                           record=f"{ANCHOR}[{n}]")
            return None
        return info

    def _call(self, k: int, record: dict, info: dict | None, history: list, replies: list[int],
              exchange: str | None, at: str) -> ev.CallRecorded:
        reply = history[replies[k]] if k < len(replies) else None
        sent = history[:replies[k]] if k < len(replies) else list(history)
        model_info: dict = record["modelInfo"] if isinstance(record.get("modelInfo"), dict) else {}
        model = model_info.get("modelId") if isinstance(model_info.get("modelId"), str) else None
        usage, cost = self._usage(info or {}, k, model_info.get("providerId"))
        cancelled = (info or {}).get("cancelReason")
        return ev.CallRecorded(
            call_id=stable_id(at, self.sid, "call", record["ts"]), session_id=self.sid, exchange_id=exchange,
            started_at=at, request={"model": model, "messages": [_message(m) for m in sent]},
            response=_message(reply) if isinstance(reply, dict) else None, model=model,
            provider=model_info.get("providerId") if isinstance(model_info.get("providerId"), str) else None,
            usage=usage, cost_usd=cost, status="error" if cancelled else "ok",
            error={"reason": cancelled, "message": info.get("streamingFailedMessage")} if cancelled and info else None)

    def _usage(self, info: dict, k: int, provider: Any) -> tuple[Usage | None, float | None]:
        keys = ("tokensIn", "tokensOut", "cacheReads", "cacheWrites")
        if not any(key in info for key in keys):
            return None, None
        n = {}
        for key in keys:
            value = info.get(key) or 0
            if type(value) is not int or value < 0:
                self.feed.skip(None, f"api_req_started: {key} {value!r} is not a non-negative integer; the call is"
                                     " kept without usage", record=f"request {k + 1}")
                return None, None
            n[key] = value
        uncached = n["tokensIn"]
        protocol = info.get("apiProtocol")
        if protocol == "openai" or (protocol is None and provider in WHOLE_PROMPT):  # tokensIn counted the cache
            uncached = max(0, uncached - n["cacheReads"] - n["cacheWrites"])
        try:
            usage = Usage(input_tokens=uncached, output_tokens=n["tokensOut"], cache_read_tokens=n["cacheReads"],
                          cache_write_tokens=n["cacheWrites"])
        except RecordError as exc:
            self.feed.skip(None, f"api_req_started: {exc}", record=f"request {k + 1}")
            return None, None
        cost = info.get("cost")
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
            return usage, None
        return usage, float(cost) if cost > 0 or sum(n.values()) == 0 else None


def _result(block: Any, asked: list) -> tuple[dict | None, str | None, Any, bool] | None:
    """A tool's result in a user message's block: the `tool_use` it answers (taken from `asked`), its name, its
    output and whether it failed; None for any other block."""
    if not isinstance(block, dict):
        return None
    if block.get("type") == "tool_result":
        use = next((u for u in asked if u.get("id") == block.get("tool_use_id")), None)
        output = block.get("content")
        text = output if isinstance(output, str) else ""
        if isinstance(output, list):
            text = next((b.get("text") for b in output if isinstance(b, dict) and b.get("type") == "text"), "") or ""
        match = RESULT.match(text)
        if match:  # Cline's own text for the result, inside the block
            text = text[match.end():]
            output = text if isinstance(output, str) else output
        failed = block.get("is_error") is True or text.startswith(FAILED)
    elif block.get("type") == "text" and isinstance(block.get("text"), str):
        match = RESULT.match(block["text"])
        if not match:
            return None
        use = next((u for u in asked if u.get("name") == match.group(1)), None)
        output = block["text"][match.end():]
        failed = output.startswith(FAILED)
    else:
        return None
    if use is not None:
        asked.remove(use)
    name = use.get("name") if use else (match.group(1) if match else None)
    return use, name if isinstance(name, str) else None, output, failed


def _anchor(folder: Path) -> Path | None:
    """The file a task folder is read through: `ui_messages.json` beside the conversation, else the conversation."""
    if not (folder / FILES[1]).is_file():
        return None
    return folder / ANCHOR if (folder / ANCHOR).is_file() else folder / FILES[1]


def _text(message: Any) -> str | None:
    """The text a user message holds (its text blocks joined), for an exchange's input."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    texts = [b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str)] \
        if isinstance(content, list) else []
    return "\n".join(texts) or None


def _unfinished(info: dict) -> bool:
    return "cost" not in info and "tokensIn" not in info and "cancelReason" not in info


def _message(m: Any) -> dict:
    """A conversation entry as it was sent: its role and content (Cline's own extra keys, such as `ts`, left out)."""
    if not isinstance(m, dict):
        return {"role": "user", "content": str(m)}
    return {"role": m.get("role"), "content": m.get("content")}
