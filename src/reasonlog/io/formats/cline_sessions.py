"""Cline CLI 3.x sessions: `~/.cline/data/sessions/<id>/<id>.messages.json` beside the manifest `<id>.json`.

Cline 3 no longer writes task folders. A session's messages file is `{version, sessionId, agent, origin: {source,
mode, version}, system_prompt, messages: [{id, role, content, ts, modelInfo: {id, provider}, metrics: {inputTokens,
outputTokens, cacheReadTokens, cacheWriteTokens}}]}`; `content` is a list of Anthropic-shaped blocks (text,
thinking, tool_use, tool_result). The manifest says when it started, where (`cwd`) and with which model.

- **Session**: `cline-<session id>`; agent and label `source` `cline`; labels `version`, `cwd`.
- **Calls**: each assistant message, with the system prompt and the conversation before it as its request and its
  `metrics` as its usage. For OpenAI-compatible providers `inputTokens` is the whole prompt, cache reads and writes
  among them (checked on a session Cline 3.0.65 wrote against a stream whose prompt was 339 tokens, 320 cached):
  they are taken out once, as for Cline's task folders.
- **Exchanges**: each user message with text (the prompt, a follow-up). **Tool results**: `tool_result` blocks.

The file is rewritten whole as the session goes on: a changed file is imported again (ids are stable).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import object_of
from ..importer import Feed, epoch_ms, instant

SUFFIX = ".messages.json"
NAME = "cline"


def is_session_file(path: Path) -> bool:
    """A Cline 3 session's messages file (by its name, and a start that holds `sessionId` and `messages`)."""
    if not path.name.endswith(SUFFIX) or not path.is_file():
        return False
    with open(path, "rb") as f:
        head = f.read(4096)
    return b'"sessionId"' in head and b'"messages"' in head


def session_files(folder: Path) -> list[Path]:
    """The messages files under a Cline data folder, its `sessions/` folder, or one session's folder."""
    found = [*folder.glob(f"*{SUFFIX}"), *folder.glob(f"*/*{SUFFIX}"), *folder.glob(f"sessions/*/*{SUFFIX}")]
    return sorted(p for p in set(found) if is_session_file(p))


def session_events(feed: Feed, whole_prompt: frozenset[str]) -> Iterator[Event]:
    """The events of one Cline 3 session file."""
    doc = feed.document(lambda v: isinstance(v.get("sessionId"), str) and isinstance(
        v.get("messages"), list),
        "expected a Cline 3 session: an object with a string `sessionId` and a `messages` list", "a session Cline")
    if doc is not None:
        yield from _Session(feed, doc, _manifest(feed.path), whole_prompt).events()


def _manifest(path: Path) -> dict:
    try:
        value = orjson.loads(path.with_name(path.name.removesuffix(SUFFIX) + ".json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


class _Session:
    def __init__(self, feed: Feed, doc: dict, manifest: dict, whole_prompt: frozenset[str]):
        self.feed, self.doc, self.manifest, self.whole_prompt = feed, doc, manifest, whole_prompt
        self.sid = f"{NAME}-{doc['sessionId']}"
        self.system = doc.get("system_prompt") if isinstance(doc.get("system_prompt"), str) else None
        messages = [(k, m) for k, m in enumerate(doc["messages"]) if isinstance(m, dict)]
        self.messages = [(k, m) for k, m in messages if m.get("role") in ("user", "assistant")
                         and isinstance(m.get("content"), list)]
        for k, m in messages:
            if (k, m) not in self.messages:
                feed.skip(None, "a message needs a `role` (user or assistant) and a `content` list",
                          record=f"messages[{k}]")
        first = next((m.get("ts") for _, m in self.messages), None)
        self.at = instant(manifest.get("started_at")) or epoch_ms(first) or ""
        self.exchange: str | None = None

    def events(self) -> Iterator[Event]:
        origin = object_of(self.doc.get("origin"))
        labels = {"source": NAME, **{k: str(v) for k, v in (("version", origin.get("version")),
                                                             ("cwd", self.manifest.get("cwd"))) if v}}
        model = self.manifest.get("model") if isinstance(self.manifest.get("model"), str) else None
        yield ev.SessionStarted(session_id=self.sid, started_at=self.at, agent=NAME, labels=labels, model=model,
                                external_id=self.doc["sessionId"])
        window: list[dict] = []
        for k, m in self.messages:
            if f"messages[{k}]" in self.feed.passed:
                continue  # the importer failed on it before: passed over (io/import_file.py)
            with self.feed.record(f"messages[{k}]"):
                self.at = max(self.at, epoch_ms(m.get("ts")) or self.at)
                sent = {"role": m["role"], "content": m["content"]}
                if m["role"] == "assistant":
                    yield self._call(k, m, window)
                else:
                    yield from self._user(k, m)
                window.append(sent)
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at)
        yield ev.SessionEnded(session_id=self.sid, ended_at=self.at)

    def _user(self, k: int, m: dict) -> Iterator[Event]:
        texts = [b["text"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "text"
                 and isinstance(b.get("text"), str)]
        if texts:
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.at)
            self.exchange = stable_id(self.at, NAME, self.sid, "exchange", m.get("id") or k)
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid, started_at=self.at,
                                     input="\n".join(texts))
        for j, b in enumerate(m["content"]):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                content = b.get("content")
                yield ev.ToolResultRecorded(
                    tool_result_id=stable_id(self.at, NAME, self.sid, "tool_result", k, j), session_id=self.sid,
                    at=self.at, tool_use_id=_str(b.get("tool_use_id")), name=_str(b.get("name")),
                    content=content if isinstance(content, str) else orjson.dumps(content).decode(),
                    is_error=b.get("is_error") is True)

    def _call(self, k: int, m: dict, window: list[dict]) -> ev.CallRecorded:
        info = object_of(m.get("modelInfo"))
        model, provider = _str(info.get("id")), _str(info.get("provider"))
        request: dict[str, Any] = {"model": model, "messages": list(window)}
        if self.system:
            request["system"] = self.system
        return ev.CallRecorded(
            call_id=stable_id(self.at, NAME, self.sid, "call", m.get("id") or k), session_id=self.sid,
            exchange_id=self.exchange, started_at=self.at, request=request,
            response={"role": "assistant", "content": m["content"]}, model=model, provider=provider,
            usage=self._usage(m.get("metrics"), provider, k), provider_message_id=_str(m.get("id")))

    def _usage(self, metrics: Any, provider: str | None, k: int) -> Usage | None:
        if not isinstance(metrics, dict):
            return None
        keys = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
        n = {key: metrics.get(key) or 0 for key in keys}
        bad = next((key for key, v in n.items() if type(v) is not int or v < 0), None)
        if bad is not None:
            self.feed.skip(None, f"metrics.{bad}: expected a non-negative integer, got {n[bad]!r}; the call is kept"
                                 " without usage", record=f"messages[{k}]")
            return None
        uncached = n["inputTokens"]
        if provider is not None and (provider in self.whole_prompt or provider.startswith("openai")):
            uncached = max(0, uncached - n["cacheReadTokens"] - n["cacheWriteTokens"])
        try:
            return Usage(input_tokens=uncached, output_tokens=n["outputTokens"],
                         cache_read_tokens=n["cacheReadTokens"], cache_write_tokens=n["cacheWriteTokens"])
        except RecordError as exc:
            self.feed.skip(None, f"metrics: {exc}", record=f"messages[{k}]")
            return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
