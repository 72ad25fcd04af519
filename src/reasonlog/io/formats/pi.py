"""Pi coding agent sessions: `~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl`.

A session file is a header line (`type: session`, `id`, `cwd`, `version`, maybe `parentSession`: the file it was
forked or cloned from), then entries that form a tree through `id` / `parentId`: messages (user, assistant,
toolResult, bashExecution, custom, branchSummary, compactionSummary), model and thinking-level changes,
compactions, labels. Pi appends every entry; going back in `/tree` and writing again starts a branch.

- **The active branch is the session.** The path from the root to the last entry written is the conversation Pi
  shows and sends. Every other leaf is a fork: a child session `<session>@<leaf entry>` labelled `fork=true` and
  `forked_at` (the entry it leaves the active branch after), whose conversation is its own path.
- **Calls are named by the assistant entry** (its id and time), not by the file: a call that appears in several
  branches, or in a file `/fork` copied, is one call, counted once.
- **Calls.** Each assistant message is one call: its request is the conversation before it on its path, in the
  Anthropic Messages shape; its usage is Pi's (`input` without cache reads, `cacheRead`, `cacheWrite`, `output`)
  and its cost Pi's `usage.cost.total` (a 0 with tokens: Pi knew no price, so reasonlog prices it).
- **Tool results** (`toolResult` messages) are tool results and `tool_result` blocks in the next request. A
  compaction keeps its summary and the entries from `firstKeptEntryId`, as Pi rebuilds its context.

Incremental: what is appended to the active branch is read from where the last import stopped. An entry appended
under another parent (a new branch) makes the file import again whole (`ReimportFile`): the branches change.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import list_of, text_of
from ..importer import Checkpoint, Feed, FormatImporter, Home, ReimportFile, epoch_ms, instant, json_kind

NAME = "pi"


importer = FormatImporter(
    NAME, "Pi coding agent sessions (~/.pi/agent/sessions/--<cwd>--/*.jsonl)", lambda feed: _File(feed).read(),
    home=Home(".pi/agent", ("sessions",), env=("PI_CODING_AGENT_DIR",)),
    opens=lambda first: first.get("type") == "session" and isinstance(first.get("id"), str) and "cwd" in first)


def _session_of(path: Any) -> str | None:
    """A session's id from its file name (`<timestamp>_<uuid>.jsonl`), for a fork's `parentSession`."""
    if not isinstance(path, str) or not path.endswith(".jsonl"):
        return None
    return Path(path).stem.split("_", 1)[-1]


class _File:
    def __init__(self, feed: Feed):
        self.feed = feed
        s = feed.state or {}
        self.header: dict | None = s.get("header")
        self.leaf: str | None = s.get("leaf")          # the last entry of the active branch imported
        self.exchange: str | None = s.get("exchange")  # the active branch's open exchange
        self.after: list = s.get("after", [])          # its messages since its last call
        self.entries: list[tuple[dict, int]] = []     # (entry, line) read now

    def read(self) -> Iterator[Event | Checkpoint]:
        for line in self.feed.values(lambda v: isinstance(v, dict) and isinstance(v.get("type"), str),
                                     "expected a JSON object with a string `type`"):
            value = line.value
            if self.header is None:
                if value["type"] == "session" and isinstance(value.get("id"), str):
                    self.header = value
                else:
                    self.feed.skip(line, "a line before the session header (`type: session` with an `id`)")
            elif not isinstance(value.get("id"), str):
                self.feed.skip(line, "an entry without a string `id`")
            elif not isinstance(value.get("parentId"), (str, type(None))):
                self.feed.skip(line, f"expected `parentId` as a text or null, got {json_kind(value['parentId'])}")
            else:
                self.entries.append((value, line.number))
        last = self.feed.read_to
        if self.header is None or last is None:
            return
        yield from self._resume() if self.feed.start else self._whole()
        yield self.feed.checkpoint(last, {"header": self.header, "leaf": self.leaf, "exchange": self.exchange,
                                          "after": self.after})

    def _whole(self) -> Iterator[Event]:
        assert self.header is not None
        sid = self.header["id"]
        parents = {e["id"]: e.get("parentId") for e, _ in self.entries}
        has_child = {p for p in parents.values() if p}
        leaves = [e["id"] for e, _ in self.entries if e["id"] not in has_child]
        active = self.entries[-1][0]["id"] if self.entries else None
        main = _path(parents, active)
        branch = _Branch(self.feed, self.header, sid, self._by_id())
        yield from branch.events(main, fork=None)
        self.leaf, self.exchange, self.after = active, branch.exchange, branch.after
        on_main = set(main)
        for leaf in leaves:
            if leaf != active:
                path = _path(parents, leaf)
                shared = next((i for i in range(len(path) - 1, -1, -1) if path[i] in on_main), -1)
                fork = {"parent": sid, "at": path[shared] if shared >= 0 else None, "from": shared + 1}
                yield from _Branch(self.feed, self.header, f"{sid}@{leaf}", self._by_id()).events(path, fork=fork)

    def _resume(self) -> Iterator[Event]:
        """Entries appended to the active branch; anything else changes the branches: import all again."""
        assert self.header is not None
        if not self.entries:
            return
        for entry, _ in self.entries:
            if entry.get("parentId") != self.leaf:
                raise ReimportFile(f"entry {entry['id']} starts a new branch")
            self.leaf = entry["id"]
        branch = _Branch(self.feed, self.header, self.header["id"], self._by_id())
        branch.window, branch.exchange = self.feed.history(self.header["id"]) + self.after, self.exchange
        branch.after = self.after
        yield from branch.events([e["id"] for e, _ in self.entries], fork=None, started=True)
        self.exchange, self.after = branch.exchange, branch.after

    def _by_id(self) -> dict[str, tuple[dict, int]]:
        return {e["id"]: (e, n) for e, n in self.entries}


def _path(parents: dict[str, Any], leaf: str | None) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    while leaf is not None and leaf in parents and leaf not in seen:
        out.append(leaf)
        seen.add(leaf)
        leaf = parents[leaf]
    return out[::-1]


class _Branch:
    """One conversation along a path of entries: the session (the active branch) or one of its forks."""

    def __init__(self, feed: Feed, header: dict, sid: str, entries: dict[str, tuple[dict, int]]):
        self.feed, self.header, self.sid, self.entries = feed, header, sid, entries
        self.window: list = []
        self.kept: list[tuple[str, dict]] = []  # (entry id, message) of the window, for compactions
        self.exchange: str | None = None
        self.after: list = []                   # messages since the last call (the state of an active branch)
        self.last_at = instant(header.get("timestamp")) or ""

    def events(self, path: list[str], fork: dict | None, started: bool = False) -> Iterator[Event]:
        """The events of `path`; a fork's entries shared with the active branch only build its window."""
        if not started:
            yield self._started(fork)
        for n, eid in enumerate(path):
            entry, number = self.entries[eid]
            at = instant(entry.get("timestamp")) or self.last_at
            self.last_at = max(self.last_at, at)
            events = list(self._entry(entry, number, at))
            if fork is None or n >= fork["from"]:
                yield from events
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=self.last_at)
        yield ev.SessionEnded(session_id=self.sid, ended_at=self.last_at)

    def _started(self, fork: dict | None) -> ev.SessionStarted:
        h = self.header
        labels = {"source": NAME, **{k: str(h[f]) for k, f in (("cwd", "cwd"), ("version", "version"))
                                     if h.get(f) is not None}}
        parent = _session_of(h.get("parentSession"))
        if fork is not None:
            labels.update({"fork": "true", "forked_at": str(fork["at"])})
            parent = fork["parent"]
        elif parent is not None:
            labels["forked_from"] = parent
        return ev.SessionStarted(session_id=self.sid, started_at=self.last_at, agent=NAME, labels=labels,
                                 external_id=h["id"], parent_session_id=parent)

    def _entry(self, entry: dict, number: int, at: str) -> Iterator[Event]:
        kind = entry["type"]
        if kind == "message":
            yield from self._message(entry, number, at)
        elif kind == "compaction":
            yield from self._compaction(entry, at)
        # model and thinking-level changes, labels, custom entries: Pi's settings, not sent to the model

    def _message(self, entry: dict, number: int, at: str) -> Iterator[Event]:
        m = entry.get("message")
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            self.feed.skip(number, "a message entry needs a `message` object with a string `role`")
            return
        role = m["role"]
        if role == "assistant":
            yield from self._call(entry, m, number, at)
        elif role == "toolResult":
            result = self._tool_result(entry, m, at)
            if not self.feed.exists("tool_result", result.tool_result_id):  # a file /fork copied holds it too
                yield result
        elif role == "user":
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=self.sid, ended_at=at)
            self.exchange = stable_id(at, NAME, self.sid, "exchange", entry["id"])
            content = _blocks(m.get("content"))
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=self.sid, started_at=at,
                                     input="\n".join(b["text"] for b in content if b.get("type") == "text"))
            self._add(entry["id"], {"role": "user", "content": content})
        elif role in ("bashExecution", "custom", "branchSummary", "compactionSummary"):
            text = _context_text(m)
            if text:
                self._add(entry["id"], {"role": "user", "content": [{"type": "text", "text": text}]})
        else:
            self.feed.skip(number, f"a message with role {role!r}, which this importer does not know")

    def _add(self, eid: str, message: dict) -> None:
        last = self.window[-1] if self.window else None
        results = [b for b in message["content"] if b.get("type") == "tool_result"]
        if last is not None and results and last["role"] == "user" and all(
                b.get("type") == "tool_result" for b in last["content"]):
            last["content"] = last["content"] + results  # parallel tool results are one user message
            return
        self.window.append(message)
        self.kept.append((eid, message))
        self.after = [] if message["role"] == "assistant" else [*self.after, message]

    def _call(self, entry: dict, m: dict, number: int, at: str) -> Iterator[Event]:
        call_at = epoch_ms(m.get("timestamp")) or at
        call_id = stable_id(call_at, NAME, entry["id"], m.get("timestamp"))
        response = {"role": "assistant", "content": [b for b in map(_assistant_block, list_of(m.get("content")))
                                                     if b is not None]}
        if not self.feed.exists("call", call_id):
            usage, cost = _usage(self.feed, number, m.get("usage"))
            model = m.get("model") if isinstance(m.get("model"), str) else None
            error = m.get("stopReason") in ("error", "aborted")
            yield ev.CallRecorded(call_id=call_id, session_id=self.sid, exchange_id=self.exchange,
                                  started_at=call_at, request={"model": model, "messages": list(self.window)},
                                  response=response,
                                  model=model,
                                  provider=m.get("provider") if isinstance(m.get("provider"), str) else None,
                                  stop_reason=text_of(m.get("stopReason")), usage=usage, cost_usd=cost,
                                  provider_message_id=text_of(m.get("responseId")), status="error" if error else "ok",
                                  error={"message": m.get("errorMessage")} if error and m.get("errorMessage") else None,
                                  stable_history=True)
        self._add(entry["id"], response)

    def _tool_result(self, entry: dict, m: dict, at: str) -> ev.ToolResultRecorded:
        text = "\n".join(b["text"] for b in _blocks(m.get("content")) if b.get("type") == "text")
        block = {"type": "tool_result", "tool_use_id": text_of(m.get("toolCallId")), "content": text,
                 "is_error": m.get("isError") is True}
        self._add(entry["id"], {"role": "user", "content": [block]})
        return ev.ToolResultRecorded(tool_result_id=stable_id(at, NAME, entry["id"], "result"), session_id=self.sid,
                                     at=at, tool_use_id=text_of(m.get("toolCallId")), name=text_of(m.get("toolName")),
                                     content=text, is_error=m.get("isError") is True)

    def _compaction(self, entry: dict, at: str) -> Iterator[Event]:
        first = entry.get("firstKeptEntryId")
        ids = [eid for eid, _ in self.kept]
        keep = self.kept[ids.index(first):] if first in ids else []
        summary = {"role": "user", "content": [{"type": "text", "text": f"(summary) {entry.get('summary') or ''}"}]}
        self.kept = [(entry["id"], summary), *keep]
        self.window = [m for _, m in self.kept]
        yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, entry["id"], "compaction"), session_id=self.sid, at=at,
                                 outcome_kind="compaction", payload={"tokens_before": entry.get("tokensBefore"),
                                                                  "kept": len(keep)})


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for b in list_of(content):
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            out.append({"type": "text", "text": b["text"]})
        elif isinstance(b, dict) and b.get("type") == "image":
            out.append({"type": "image", "source": {"type": "base64", "media_type": b.get("mimeType"),
                                                    "data": b.get("data")}})
    return out


def _assistant_block(b: Any) -> dict | None:
    if not isinstance(b, dict):
        return None
    if b.get("type") == "text" and isinstance(b.get("text"), str):
        return {"type": "text", "text": b["text"]}
    if b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
        return {"type": "thinking", "thinking": b["thinking"]}
    if b.get("type") == "toolCall":
        args = b.get("arguments")
        return {"type": "tool_use", "id": text_of(b.get("id")), "name": text_of(b.get("name")),
                "input": args if isinstance(args, dict) else {}}
    return None


def _context_text(m: dict) -> str:
    """What Pi puts in the context for its own message kinds (a `!!` command is left out of it)."""
    role = m["role"]
    if role == "bashExecution":
        return "" if m.get("excludeFromContext") else f"Ran `{m.get('command')}`\n{m.get('output') or ''}"
    if role in ("branchSummary", "compactionSummary"):
        return f"(summary) {m.get('summary') or ''}"
    return "\n".join(b["text"] for b in _blocks(m.get("content")) if b.get("type") == "text")


def _usage(feed: Feed, number: int, usage: Any) -> tuple[Usage | None, float | None]:
    if not isinstance(usage, dict):
        return None, None
    keys = ("input", "output", "cacheRead", "cacheWrite")
    for key in keys:
        value = usage.get(key)
        if value is not None and (type(value) is not int or value < 0):
            feed.skip(number, f"usage.{key}: expected a non-negative integer, got {value!r}; the call is kept"
                              " without usage")
            return None, None
    n = {k: usage.get(k) or 0 for k in keys}
    try:
        out = Usage(input_tokens=n["input"], output_tokens=n["output"], cache_read_tokens=n["cacheRead"],
                    cache_write_tokens=n["cacheWrite"])
    except RecordError as exc:
        feed.skip(number, f"usage: {exc}")
        return None, None
    total = (usage.get("cost") or {}).get("total") if isinstance(usage.get("cost"), dict) else None
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total < 0:
        return out, None
    return out, float(total) if total > 0 or sum(n.values()) == 0 else None
