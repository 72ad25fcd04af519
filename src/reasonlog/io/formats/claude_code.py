"""Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl` and their subagent files.

How a transcript becomes reasonlog's records:

- **Sessions.** One per Claude Code session id (the transcript's name), with that id as reasonlog's
  id too, so `reasonlog show ae4a77f8` finds what Claude Code calls `ae4a77f8-…`. A subagent is a
  child session `<agentId>@<session id>`, linked to its parent and to the call that issued the
  Task tool. Its lines come from `subagents/agent-<id>.jsonl`, from `isSidechain` lines of the
  parent, or only from the parent's `progress` lines (`agent_progress`): all three are real calls.
- **Calls.** Claude Code writes one line per content block of a response, and the usage on those
  lines grows while the response streams. The lines of one `message.id` + `requestId` (the
  message id alone when there is no request id) become one call: its blocks in order, and the
  usage of the line with the most tokens. The same key seen in another file (a subagent's calls
  appear in its own file and in the parent's progress lines) is one call, counted once.
- **The window.** A call's request is the conversation before it, rebuilt in the Messages API
  shape, so contexts are stored once. A `compact_boundary` starts the window again: the compact
  summary is the first message after it (and an outcome `compaction` marks the place).
- **Exchanges.** Each prompt the user typed opens one; `turn_duration` closes it with its
  duration. Tool results, meta lines and compact summaries are not prompts.
- **Kept, not dropped.** `summary` lines (titles that point at a leaf message, maybe of another
  session), `system` lines other than compact boundaries and turn durations (`stop_hook_summary`,
  `local_command`, ...), and records of a type this importer does not know (`attachment`, `mode`,
  `permission-mode`, `last-prompt`, `agent-name`, the titles) are kept as outcomes
  (`claude-code:<type>`). Hook and bash progress, file-history snapshots and queue operations are
  bookkeeping of the CLI and are passed over.
- **Titles.** The session's title label is its last `custom-title` (a rename), else its last
  `ai-title`, read in the one pass over the file: a session starts with the title read so far, and a title
  read after its session started (later in the file, a later pass of `watch`, another file) retitles it
  (`SessionTitled`); the titles read stay in the file's state. Records without an instant (titles, modes,
  summaries) never start a session: they wait for the session's first instant, and one of no session in
  the file is reported, not kept.
- **Nesting.** A sub-agent hangs from the session and call that spawned it, at any depth: a Task
  tool result naming the sub-agent's `agentId` starts its session there (its own file, read
  after its parent's, goes on with it), and an inline sub-agent line without `agentId` belongs to
  the sub-agent of the line it answers (`parentUuid`).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ... import model as ev
from ...model import Event, SessionTitled, Usage, stable_id
from ...wire.rules import RecordError
from ..importer import BaseImporter, Checkpoint, Feed, Line, ReimportFile, first_values, instant, walk
from .claude_code_files import TITLE_FIELDS, best_title, nesting, titles_in

NAME = "claude-code"
TRANSCRIPT_TYPES = frozenset({"user", "assistant", "system", "summary", "progress", "file-history-snapshot",
                              "queue-operation", "result"})
# Claude Code's own envelope keys; the Agent SDK's messages say session_id and parent_tool_use_id instead.
_ENVELOPE = frozenset({"sessionId", "leafUuid", "messageId", "parentUuid"})
PASSED_OVER = frozenset({"file-history-snapshot", "queue-operation"})
SETTLE_S = 30.0  # under watch, a response whose file changed this recently may still be streaming
# The bytes of a line's start that hold its envelope's first keys (`parentUuid`, `isSidechain`, `userType`, `cwd`,
# `sessionId`, `version`, `gitBranch`, then `type`: about 250 bytes in the transcripts measured)
ENVELOPE_BYTES = 1024


def default_folders() -> list[Path]:
    """Where Claude Code keeps transcripts: each of `$CLAUDE_CONFIG_DIR` (comma-separated), else ~/.claude."""
    roots = [Path(p).expanduser() for p in os.environ.get("CLAUDE_CONFIG_DIR", "").split(",") if p.strip()]
    return [root / "projects" for root in (roots or [Path.home() / ".claude"])]


class ClaudeCodeImporter(BaseImporter):
    name = NAME
    description = "Claude Code transcripts (~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects)"
    incremental = True

    def default_folders(self) -> list[Path]:
        return default_folders()

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any(_looks_like_transcript(p) for p in _first_files(path))
        return path.suffix == ".jsonl" and _looks_like_transcript(path)

    def sources(self, path: Path) -> Iterator[Path]:
        files = [p for p in walk(path, "*.jsonl") if path.is_file() or _looks_like_transcript(p)]
        # Parents before their subagent files, and a sub-agent's file before those of the sub-agents it spawned,
        # so a child session finds the call that spawned it.
        depth = nesting(p for p in files if "subagents" in p.parts)
        yield from sorted(files, key=lambda p: ("subagents" in p.parts, depth.get(p, 0), str(p)))

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        yield from _Reader(feed).run()


importer = ClaudeCodeImporter()


def _first_files(folder: Path, n: int = 5) -> list[Path]:
    found = []
    for p in folder.rglob("*.jsonl"):
        found.append(p)
        if len(found) >= n:
            break
    return found


def _looks_like_transcript(path: Path) -> bool:
    return any(isinstance(v, dict) and isinstance(v.get("type"), str) and v["type"] in TRANSCRIPT_TYPES
               and not _ENVELOPE.isdisjoint(v) and "parent_tool_use_id" not in v
               for v in first_values(path, 8))


# ------------------------------------------------------------------------------------------ threads


class _Thread:
    """One conversation being rebuilt: the main session or a subagent's."""

    def __init__(self, sid: str, saved: dict | None = None):
        saved = saved or {}
        self.sid = sid
        self.started: bool = saved.get("started", False)
        self.pending: list = saved.get("pending", [])       # messages since the last call's response
        self.exchange: str | None = saved.get("exchange")
        self.last_at: str | None = saved.get("last_at")
        self.last_key: str | None = saved.get("last_key")   # the last call's key: a continuation must not split it
        self.compacted: bool = saved.get("compacted", False)  # no call since a compaction: the window is new
        # None: what the last stored call left, loaded from the store when a file grew
        # (a list of its own, never a request's: each call's request copies it, and it grows in place)
        self.history: list | None = [] if not saved or self.compacted else None
        self.group: dict | None = saved.get("group")        # the response whose lines are being read
        self.results: list = saved.get("results", [])       # tool results waiting for that response to end
        self.touched = False

    def flush_results(self) -> None:
        if not self.results:
            return
        last = self.pending[-1] if self.pending else None
        if last is not None and last["role"] == "user" and _results_only(last["content"]):
            last["content"] = last["content"] + self.results  # not yet sent: still one message
        else:
            self.pending.append({"role": "user", "content": self.results})
        self.results = []

    def save(self) -> dict:
        """What the next import needs to go on from here, a response still open included."""
        return {"started": self.started, "pending": self.pending, "exchange": self.exchange,
                "last_at": self.last_at, "last_key": self.last_key, "compacted": self.compacted,
                "group": self.group, "results": self.results}


class _Reader:
    def __init__(self, feed: Feed):
        self.feed = feed
        saved = feed.state or {}
        self.threads = {sid: _Thread(sid, t) for sid, t in saved.get("threads", {}).items()}
        self.spawns: dict[str, dict] = saved.get("spawns", {})  # Task tool_use id -> {call, agent, session, at}
        self.main: str | None = saved.get("main")
        self.lineage: dict[str, str] = saved.get("lineage", {})  # an inline sub-agent's line uuid -> its agent id
        self.waiting: list = saved.get("waiting", [])  # [session or None, kind, payload, line]: records with no
        #                                                instant, until their session's first one
        # session id -> [its last custom title, its last AI title], as read so far (a state of an earlier version
        # has none: the file's titles before where it stopped are read once)
        self.titles: dict[str, list] = saved["titles"] if "titles" in saved else (
            titles_in(feed.path, feed.start) if feed.start else {})
        self.titled: dict[str, str] = {}  # the title each session was given in this pass
        self.sub_file = "subagents" in feed.path.parts  # a sub-agent's own file: its lines are the sub-agent's
        self.run_name = feed.path.parents[2].name if self.sub_file else feed.path.parent.name
        self.done: Line | None = None  # the last line whose effects are all in the state

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> Iterator[Event | Checkpoint]:
        feed = self.feed
        for line in feed.lines(ignore=_bookkeeping):
            if line.error is None or feed.readable(line):
                events = self._guarded(line)
                if events:
                    yield from events  # a checkpoint in here covers the lines before this one
            self.done = line
        if self.feed.live and self._settling():
            yield self._checkpoint()  # a response may still be streaming: it waits in the state for the next pass
            return
        for thread in self.threads.values():
            yield from self._close_group(thread)
        yield from self._unclaimed()
        yield from self._end_threads()
        yield self._checkpoint()

    def _guarded(self, line: Line) -> list[Event | Checkpoint]:
        """The line's events, or none and a report naming the line when a field has a type Claude Code never
        writes: one bad line never loses the rest of the file."""
        try:
            v = line.value
            if type(v) is dict and v.get("type") in ("user", "assistant"):  # (most lines: one generator less)
                return list(self._message(line, v, self._thread_of(v, line), v))
            return list(self._line(line))
        except (TypeError, AttributeError, ValueError, KeyError, RecordError) as exc:
            self.feed.skip(line, f"not a transcript line of a shape reasonlog knows ({type(exc).__name__}: {exc})")
            return []

    def _settling(self) -> bool:
        import time

        return any(t.group for t in self.threads.values()) and time.time() - self.feed.path.stat().st_mtime < SETTLE_S

    def _checkpoint(self) -> Checkpoint:
        """Built only when the loop will write it (`Feed.batch_due`) and at the end of what was read: a few a file."""
        state = {"threads": {sid: t.save() for sid, t in self.threads.items()}, "spawns": self.spawns,
                 "main": self.main, "lineage": self.lineage, "waiting": self.waiting, "titles": self.titles}
        return self.feed.checkpoint_at_start(state) if self.done is None else self.feed.checkpoint(self.done, state)

    def _line(self, line: Line) -> Iterator[Event | Checkpoint]:
        v = line.value
        if not isinstance(v, dict):
            self.feed.skip(line, f"not a JSON object (a {type(v).__name__})")
            return
        kind = v.get("type")
        if not isinstance(kind, str):
            self.feed.skip(line, "no `type`: not a transcript record")
            return
        if kind in ("user", "assistant"):
            yield from self._message(line, v, self._thread_of(v, line), v)
        elif kind == "progress":
            yield from self._progress(line, v)
        elif kind == "system":
            yield from self._system(line, v)
        elif kind == "summary":
            yield from self._keep(line, v, "summary", {"summary": v.get("summary"), "leaf_uuid": v.get("leafUuid")})
        elif kind not in PASSED_OVER:
            yield from self._keep(line, v, f"{NAME}:{kind}", v)
            if kind in TITLE_FIELDS:
                yield from self._title(v, kind)

    # ----------------------------------------------------------------------------- sessions

    def _thread_of(self, v: dict, line: Line, agent: str | None = None) -> _Thread:
        session = v.get("sessionId")
        session = (session if isinstance(session, str) else None) or self.main or self.feed.path.stem
        sidechain = v.get("isSidechain")
        agent = agent or (v.get("agentId") if self.sub_file or sidechain else None)
        agent = agent if isinstance(agent, str) and agent else None
        if sidechain:
            # An inline sub-agent writes its agentId on some lines only: a line without it is the sub-agent's whose
            # line it answers.
            parent_uuid = v.get("parentUuid")
            agent = agent or (self.lineage.get(parent_uuid) if isinstance(parent_uuid, str) else None) or "sidechain"
            uuid = v.get("uuid")
            if isinstance(uuid, str):
                self.lineage[uuid] = agent
        sid = f"{agent}@{session}" if agent else session
        if agent is None and self.main is None:
            self.main = session
        thread = self.threads.get(sid)
        if thread is None:
            thread = self.threads[sid] = _Thread(sid)
            thread.started = self.feed.exists("session", sid)
            if thread.started:
                thread.history = None  # another file began it: go on from what is stored
        return thread

    def _start(self, thread: _Thread, v: dict, at: str, agent_type: str | None = None,
               spawn: dict | None = None) -> Iterator[Event]:
        if thread.started:
            return
        parent = thread.sid.split("@", 1)[1] if "@" in thread.sid else None
        parent = (spawn or {}).get("session") or parent  # a nested sub-agent's parent is the agent that spawned it
        labels = {"source": NAME, **{k: v[f] for k, f in (("cwd", "cwd"), ("git_branch", "gitBranch"),
                                                          ("version", "version")) if isinstance(v.get(f), str)}}
        title = best_title(self.titles.get(thread.sid))
        if title:
            labels["title"] = self.titled[thread.sid] = title
        started = ev.SessionStarted(session_id=thread.sid, started_at=at, agent=_text_or_none(agent_type) or (
                                     "subagent" if parent else "claude-code"),
                                    run=self.run_name, provider="anthropic", labels=labels, parent_session_id=parent,
                                    parent_call_id=(spawn or {}).get("call"), external_id=thread.sid.split("@")[0])
        thread.started = True  # only once its start is made: a line that fails before leaves no orphan behind
        yield started
        yield from self._claim(thread, at)

    def _end_threads(self) -> Iterator[Event]:
        for thread in self.threads.values():
            if not thread.touched or not thread.started:
                continue
            if thread.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=thread.exchange, session_id=thread.sid,
                                       ended_at=thread.last_at or _epoch(self.feed))
            yield ev.SessionEnded(session_id=thread.sid, ended_at=thread.last_at or _epoch(self.feed))

    # ----------------------------------------------------------------------------- messages

    def _message(self, line: Line, v: dict, thread: _Thread, envelope: dict,
                 spawn: dict | None = None, agent_type: str | None = None) -> Iterator[Event | Checkpoint]:
        message = v.get("message")
        if not isinstance(message, dict):
            self.feed.skip(line, "`message` is not an object")
            return
        at = instant(v.get("timestamp")) or thread.last_at or _epoch(self.feed)
        if spawn is None and not thread.started and "@" in thread.sid:
            spawn = self._spawn_of(message.get("content"))
            agent_type = agent_type or (spawn or {}).get("agent")
        if not thread.started:
            yield from self._start(thread, envelope, at, agent_type, spawn)
        thread.touched, thread.last_at = True, at
        if v.get("type") == "assistant" or message.get("role") == "assistant":
            yield from self._assistant(line, v, message, thread, at)
            return
        content = message.get("content")
        if content is None:
            self.feed.skip(line, "a user message without `content`")
            return
        if _results_only(content):
            yield from self._spawned(v, content, thread, at)
            # Tools run while the response still streams: its later blocks may follow their results. The
            # results wait for the response to end, then go out as one user message, as the API takes them.
            thread.results.extend(content)
            if thread.group is None:
                thread.flush_results()
            return
        yield from self._close_group(thread)
        if _is_prompt(v, content):
            yield from self._new_exchange(thread, at, _prompt_text(content), line)
        thread.pending.append({"role": "user", "content": content})

    def _assistant(self, line: Line, v: dict, message: dict, thread: _Thread, at: str) -> Iterator[Event | Checkpoint]:
        msg_id = message.get("id")
        msg_id = msg_id if isinstance(msg_id, str) else None
        request_id = v.get("requestId")
        request_id = request_id if isinstance(request_id, str) else None
        key = f"{msg_id}:{request_id}" if request_id else (msg_id or f"line:{v.get('uuid') or line.number}")
        group = thread.group
        if group is not None and group["key"] != key:
            yield from self._close_group(thread)
            group = None
        if group is None:
            if key == thread.last_key and thread.history is None:
                # The lines of a response already imported go on in what was appended: import it all again.
                raise ReimportFile(f"line {line.number}: the response {key} grew after it was imported")
            group = thread.group = {"key": key, "at": at, "blocks": [], "usage": None, "total": -1,
                                    "model": None, "stop": None, "msg_id": msg_id, "request_id": request_id,
                                    "error": bool(v.get("isApiErrorMessage")), "line": line.number}
        content = message.get("content")
        blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}]
                                                             if isinstance(content, str) else [])
        kept = [b for b in blocks if isinstance(b, dict) and isinstance(b.get("type"), str)]
        if len(kept) < len(blocks):
            self.feed.skip(line, "message.content: left out blocks that are not objects with a `type` text")
        group["blocks"].extend(kept)
        usage = message.get("usage")
        if isinstance(usage, dict):
            total = _total(usage)
            if total >= group["total"]:
                group["usage"], group["total"] = usage, total
        model = message.get("model")
        if isinstance(model, str):
            group["model"] = model
        stop = message.get("stop_reason")
        if isinstance(stop, str) and stop:
            group["stop"] = stop
        for block in kept:  # (the blocks that are objects with a `type`)
            if block["type"] == "tool_use" and block.get("name") in ("Task", "Agent"):
                inp = block.get("input")
                inp = inp if isinstance(inp, dict) else {}
                # The call's id is known before its response ends (parallel tool uses may follow the Task).
                self.spawns[str(block.get("id"))] = {"call": stable_id(None, NAME, key),
                                                     "agent": _text_or_none(inp.get("subagent_type")),
                                                     "session": thread.sid,
                                                     "at": group["at"], "prompt": inp.get("prompt")}

    def _close_group(self, thread: _Thread) -> Iterator[Event | Checkpoint]:
        group, thread.group = thread.group, None
        if group is None:
            thread.flush_results()
            return
        response = {"role": "assistant", "content": group["blocks"]}
        call_id = stable_id(None, NAME, group["key"])
        history = self._history(thread)
        request = {"model": group["model"], "messages": history + thread.pending}
        fresh = not self.feed.exists("call", call_id)
        if fresh:
            try:
                usage = Usage.from_anthropic(group["usage"]) if group["usage"] else None
            except (RecordError, TypeError) as exc:  # a count that is not a number: the call, without usage
                self.feed.skip(group["line"], f"usage: {exc}")
                usage = None
            yield ev.CallRecorded(call_id=call_id, session_id=thread.sid, exchange_id=thread.exchange,
                                  started_at=group["at"], request=request, response=response, model=group["model"],
                                  provider="anthropic", stop_reason=group["stop"], usage=usage,
                                  provider_message_id=group["msg_id"], request_id=group["request_id"],
                                  status="error" if group["error"] else "ok", stable_history=True)
        # The thread's own list grows (requests get copies): a copy of the whole window per call, and its freeing,
        # touched every message again.
        history += thread.pending
        history.append(response)
        thread.pending, thread.last_key, thread.compacted = [], group["key"], False
        thread.flush_results()
        if self.feed.batch_due:  # (the state of a checkpoint after every call was 286 MB of JSON for 211 MB read)
            yield self._checkpoint()

    def _history(self, thread: _Thread) -> list:
        if thread.history is None:
            thread.history = self.feed.history(thread.sid) if thread.started else []
        return thread.history

    def _new_exchange(self, thread: _Thread, at: str, text: Any, line: Line) -> Iterator[Event]:
        if thread.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=thread.exchange, session_id=thread.sid, ended_at=at)
        thread.exchange = stable_id(at, NAME, thread.sid, "exchange", line.number)
        yield ev.ExchangeStarted(exchange_id=thread.exchange, session_id=thread.sid, started_at=at, input=text)

    # ----------------------------------------------------------------------------- other records

    def _progress(self, line: Line, v: dict) -> Iterator[Event | Checkpoint]:
        data = v.get("data")
        if not isinstance(data, dict) or data.get("type") != "agent_progress":
            return  # hook and bash progress: the CLI's bookkeeping
        inner = data.get("message")
        agent = data.get("agentId")
        if not isinstance(inner, dict) or not isinstance(agent, str):
            self.feed.skip(line, "agent_progress without a message or agentId")
            return
        spawn = self.spawns.get(str(v.get("parentToolUseID")))
        thread = self._thread_of(v, line, agent=agent)
        yield from self._message(line, inner, thread, v, spawn, (spawn or {}).get("agent"))

    def _system(self, line: Line, v: dict) -> Iterator[Event | Checkpoint]:
        subtype = v.get("subtype")
        thread = self._thread_of(v, line)
        at = instant(v.get("timestamp")) or thread.last_at or _epoch(self.feed)
        if subtype == "compact_boundary":
            yield from self._close_group(thread)
            yield from self._start(thread, v, at)
            meta = v.get("compactMetadata")
            meta = meta if isinstance(meta, dict) else {}
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, thread.sid, "compaction", line.number),
                                     session_id=thread.sid, at=at, outcome_kind="compaction",
                                     payload={"trigger": meta.get("trigger"), "pre_tokens": meta.get("preTokens")})
            thread.history, thread.pending, thread.touched, thread.last_at = [], [], True, at
            thread.compacted = True
        elif subtype == "turn_duration":
            if thread.exchange is None:
                return  # the end of a turn that opened no exchange (a command, a tool's follow-up)
            yield from self._close_group(thread)
            ms = v.get("durationMs")
            yield ev.ExchangeEnded(exchange_id=thread.exchange, session_id=thread.sid, ended_at=at,
                                   stats={"duration_ms": ms} if isinstance(ms, (int, float)) and ms >= 0 else None)
            thread.exchange = None
        else:  # stop_hook_summary, local_command, api_error, informational, ...
            yield from self._keep(line, v, f"{NAME}:system", v)

    def _keep(self, line: Line, v: dict, kind: str, payload: Any) -> Iterator[Event | Checkpoint]:
        """A record kept as an outcome. One with an instant may open its session; one without waits for it."""
        session = v.get("sessionId") if isinstance(v.get("sessionId"), str) and v["sessionId"] else None
        at = instant(v.get("timestamp"))
        if at is not None and (session or self.main):
            thread = self._thread_of(v, line)
            yield from self._start(thread, v, at)
            thread.touched, thread.last_at = True, at
            yield self._outcome(thread.sid, kind, payload, line.number, at)
            return
        known = self.threads.get(session or self.main or "")
        if known is not None and known.started and known.last_at:
            yield self._outcome(known.sid, kind, payload, line.number, at or known.last_at)
        else:
            self.waiting.append([session, kind, payload, line.number])

    def _outcome(self, sid: str, kind: str, payload: Any, number: int, at: str) -> ev.OutcomeRecorded:
        return ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, sid, kind, number), session_id=sid, at=at,
                                  outcome_kind=kind, payload=payload)

    def _title(self, v: dict, kind: str) -> Iterator[Event]:
        """A title record: the session's titles as read so far, and its label retitled if it has started."""
        sid, text = v.get("sessionId"), v.get(TITLE_FIELDS[kind])
        if not isinstance(sid, str) or not isinstance(text, str) or not text.strip():
            return
        self.titles.setdefault(sid, [None, None])[int(kind == "ai-title")] = text
        thread = self.threads.get(sid)
        if thread is not None and thread.started:
            yield from self._retitle(sid, f"{NAME}:{kind}")

    def _retitle(self, sid: str, kind: str) -> Iterator[Event]:
        """A title read after its session was stored (earlier in the file, by an earlier pass, or from another
        file): the session's title label follows the file's titles as read so far."""
        title = best_title(self.titles.get(sid)) if kind.removeprefix(f"{NAME}:") in TITLE_FIELDS else None
        if title and self.titled.get(sid) != title:
            self.titled[sid] = title
            yield SessionTitled(session_id=sid, title=title)

    def _claim(self, thread: _Thread, at: str) -> Iterator[Event]:
        """The waiting records of a session that has just started, at its first instant."""
        main = "@" not in thread.sid
        mine = [w for w in self.waiting if w[0] == thread.sid or (w[0] is None and main)]
        self.waiting = [w for w in self.waiting if w not in mine]
        for _, kind, payload, number in mine:
            yield self._outcome(thread.sid, kind, payload, number, at)

    def _unclaimed(self) -> Iterator[Event]:
        """At the end of what was read: a waiting record of a session stored by another file goes there; one of no
        session is reported (never a session of its own, named after the file) and goes on waiting, in case the
        file grows with its session's lines."""
        waiting, self.waiting = self.waiting, []
        for item in waiting:
            session, kind, payload, number = item
            if session is not None and self.feed.exists("session", session):
                yield self._outcome(session, kind, payload, number, _epoch(self.feed))
                yield from self._retitle(session, kind)
                continue
            self.waiting.append(item)
            if self.feed.live:
                continue  # the session's first line may still come
            about = (f"a summary with no session in this file (it names the message {payload.get('leaf_uuid')} of "
                     "another session)" if kind == "summary" else
                     f"a {kind.removeprefix(NAME + ':')} record of no session in this file")
            self.feed.skip(number, f"{about}: not kept unless the file's session follows")

    def _spawn_of(self, prompt: Any) -> dict | None:
        """The Task call an inline sub-agent answers: the one whose prompt its first message is."""
        return next((spawn for spawn in self.spawns.values() if prompt and spawn.get("prompt") == prompt), None)

    def _spawned(self, v: dict, content: list, thread: _Thread, at: str) -> Iterator[Event]:
        """A Task tool result that names its sub-agent (`toolUseResult.agentId`): that sub-agent's session starts
        here, under the call that spawned it, if no line of it came before."""
        result = v.get("toolUseResult")
        agent = result.get("agentId") if isinstance(result, dict) else None
        spawn = self.spawns.get(str(content[0].get("tool_use_id")))
        if not isinstance(agent, str) or not agent or spawn is None:
            return
        session = thread.sid.split("@", 1)[-1]
        child = self.threads.get(f"{agent}@{session}") or _Thread(f"{agent}@{session}")
        if child.sid not in self.threads:
            self.threads[child.sid] = child
            child.started = self.feed.exists("session", child.sid)
        if not child.started:
            yield from self._start(child, v, spawn.get("at") or at, spawn.get("agent"), spawn)
            child.touched, child.last_at = True, at


# ------------------------------------------------------------------------------------------ helpers


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _bookkeeping(raw: bytes) -> bool:
    """Hook and bash progress lines (most lines of a transcript), known without parsing them: their type is among
    the envelope's first keys, so only the line's first `ENVELOPE_BYTES` are searched for it (a long tool result was
    searched to its end). A line not in Claude Code's compact form is parsed and passed over later."""
    return raw.find(b'"type":"progress"', 0, ENVELOPE_BYTES) >= 0 and b'"type":"agent_progress"' not in raw


def _total(usage: dict) -> int:
    """The tokens of a response's usage (its lines' usage grows while it streams: the largest is kept)."""
    get, total = usage.get, 0
    for n in (get("input_tokens"), get("output_tokens"), get("cache_creation_input_tokens"),
              get("cache_read_input_tokens")):
        if isinstance(n, int):
            total += n
    return total


def _epoch(feed: Feed) -> str:
    """An instant for records with none: when the file was last written."""
    return instant(feed.path.stat().st_mtime, numbers=True) or "1970-01-01T00:00:00.000000Z"


def _is_prompt(v: dict, content: Any) -> bool:
    """A message the user typed: not a tool result, not a meta line, not a compact summary."""
    if v.get("isMeta") or v.get("isCompactSummary") or v.get("toolUseResult") is not None:
        return False
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                 for b in content)


def _results_only(content: Any) -> bool:
    if not isinstance(content, list) or not content:
        return False
    for b in content:  # (a loop, not a generator: a user line of tool results is every other line read)
        if not (isinstance(b, dict) and b.get("type") == "tool_result"):
            return False
    return True


def _prompt_text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [str(b["text"]) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else content
    return content
