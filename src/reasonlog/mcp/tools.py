"""What an agent can ask the archive (`reasonlog mcp`): plain functions over a `StoreReader`, each answer a dict
small enough for a context window, each fact with a citation.

A citation is `SESSION#N` (the call's number in its session, as `reasonlog show` prints it) with the call's
fingerprint after `@`: a short hash of what the call holds (its reply, its context, its tokens, its status). An
agent that follows a citation later (`get_call`, `get_session`, a `call://` resource) is told when the record no
longer has that fingerprint: it was re-imported or changed since it was cited. With a dashboard's address known
(`--dashboard URL`, or the server's own when served at `/mcp`), each citation has its page's URL too.

Answers are paged: a list stops before `BUDGET` characters of JSON (about 4,000 tokens) and says where the next
page starts (`next_start`, to pass back as `start`). Bad arguments raise `ToolInputError` naming the argument and
what was expected.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import date
from typing import Any

import orjson

from .. import query
from ..store import NotFound, SearchStore, SessionFilter, StoreReader
from ..titles import title_of

BUDGET = 16_000  # characters of JSON an answer holds at most: about 4,000 tokens
TEXT = 600  # characters of one text shown in a list before it is cut
MODES = ("auto", "text", "keywords", "semantic", "hybrid")
USAGE_BY = ("day", "model", "agent", "run", "source")


class ToolInputError(ValueError):
    """An argument the tool cannot use: its name and what was expected."""


class Archive:
    """The store a server reads (or a function that gives it: a server's reader, opened on first use), and the
    dashboard's address when one is known (for citations' URLs; "" for the paths of the server that answers)."""

    def __init__(self, store: SearchStore | Callable[[], SearchStore], dashboard: str | None = None):
        self._store, self.dashboard = store, dashboard

    @property
    def store(self) -> SearchStore:
        return self._store() if callable(self._store) else self._store

    def cite(self, session_id: str, call: Mapping[str, Any] | None) -> dict:
        """A citation of a call (or of a session, when `call` is None)."""
        if call is None:
            out: dict[str, Any] = {"cite": session_id}
            if self.dashboard is not None:
                out["url"] = f"{self.dashboard}/sessions/{session_id}"
            return out
        out = {"cite": f"{session_id}#{call['idx']}@{fingerprint(call)}"}
        if self.dashboard is not None:
            out["url"] = f"{self.dashboard}/calls/{call['id']}"
        return out


def fingerprint(call: Mapping[str, Any]) -> str:
    """Eight hex digits that change when the call's stored record does (re-imported, or changed)."""
    held = [call.get(k) for k in ("id", "response_id", "context", "status", "stop_reason", "input_tokens",
                                  "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")]
    return hashlib.blake2b(orjson.dumps(held), digest_size=4).hexdigest()


# ------------------------------------------------------------------------------ the tools

def search_history(archive: Archive, query_text: str, mode: str = "auto", agent: str | None = None,
                   project: str | None = None, model: str | None = None, since: str | None = None,
                   until: str | None = None, outcome: str | None = None, start: int = 0) -> dict:
    """Past messages, tool calls, tool results and outcomes that match `query_text`, best first, each cited."""
    from ..semantic.search import default_mode, search

    if not query_text.strip():
        raise ToolInputError("query: expected some text to search for, got an empty string")
    if mode not in MODES:
        raise ToolInputError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    flt = _filter(agent=agent, model=model, since=since, until=until, project=project, outcome=outcome)
    # auto: by meaning and words where texts are embedded, else by words (an agent's query is rarely a substring)
    chosen = ("hybrid" if default_mode(archive.store) == "hybrid" else "keywords") if mode == "auto" else mode
    hits = search(archive.store, query_text, chosen, flt, limit=_start(start) + 40)
    calls: dict[str, dict] = {}
    rows = []
    for hit in hits[start:]:
        call = _call(archive.store, hit.get("call_id"), calls)
        rows.append({"kind": hit["kind"], "role": hit.get("role"), "tool": hit.get("name"), "at": hit.get("at"),
                     "text": _cut(hit.get("snippet") or ""), **archive.cite(hit["session_id"], call)})
    return _paged({"query": query_text, "mode": chosen}, "hits", rows, start)


def get_session(archive: Archive, session: str, start: int = 0) -> dict:
    """What happened in a session: its title, agent, outcome, tokens and cost, then its prompts, replies, tool
    calls with their results and outcomes in order, paged."""
    store = archive.store
    session_id = _resolve(store, "session", session)
    whole = store.get_session(session_id)
    row = {k: whole.get(k) for k in ("id", "agent", "model", "run", "status", "started_at", "ended_at", "labels",
                                     "external_id")}
    row["title"] = _title(store, whole)
    row["totals"] = {k: whole.get(k) for k in ("call_count", "error_count", "input_tokens", "output_tokens",
                                               "cache_read_tokens", "cache_write_tokens", "cost_usd")}
    calls = {c["id"]: c for c in whole["calls"]}
    steps = [step for item in query.timeline(whole) if (step := _step(archive, session_id, item, calls))]
    head = {"session": row, **archive.cite(session_id, None), **_changed(store, session)}
    return _paged(head, "steps", steps[_start(start):], start)


def get_call(archive: Archive, call: str) -> dict:
    """One call's exact request and reply, as stored (secrets masked), cut to the budget; `call` is a call id,
    `SESSION#N` or a citation (`SESSION#N@fingerprint`), and the answer says when the cited record changed."""
    store = archive.store
    record = store.get_call(_call_id(store, call))
    out = {"model": record.get("model"), "status": record.get("status"), "stop_reason": record.get("stop_reason"),
           "tokens": {k: record.get(k) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                 "cache_write_tokens", "reasoning_tokens")},
           "cost_usd": record.get("cost_usd"), "latency_ms": record.get("latency_ms"), "error": record.get("error"),
           **archive.cite(record["session_id"], record), **_changed(store, call, record)}
    room = max(BUDGET - len(orjson.dumps(out)) - 200, 1000)
    request, reply = orjson.dumps(record.get("request")), orjson.dumps(record.get("response"))
    half = room // 2
    out["reply"] = record.get("response") if len(reply) <= half else _cut(reply.decode(), half)
    left = room - min(len(reply), half)
    out["request"] = record.get("request") if len(request) <= left else _cut(request.decode(), left)
    if len(request) > left or len(reply) > half:
        out["cut"] = f"cut to the answer's budget; the whole call: `reasonlog replay {out['cite'].split('@')[0]}`"
    return out


def tool_history(archive: Archive, subject: str, agent: str | None = None, project: str | None = None,
                 start: int = 0) -> dict:
    """What agents did before about a file, a command or an error text: the tool calls and results that name it."""
    if not subject.strip():
        raise ToolInputError("subject: expected a file path, a command or an error text, got an empty string")
    flt = _filter(agent=agent, project=project)
    calls: dict[str, dict] = {}
    rows = []
    for hit in archive.store.search(subject, flt, _start(start) + 40)[start:]:
        if hit["kind"] not in ("tool_result", "message") or (hit["kind"] == "message" and not hit.get("name")
                                                            and "{" not in (hit.get("snippet") or "")):
            continue
        call = _call(archive.store, hit.get("call_id"), calls)
        rows.append({"kind": "tool call" if hit["kind"] == "message" else "tool result", "tool": hit.get("name"),
                     "at": hit.get("at"), "text": _cut(hit.get("snippet") or ""),
                     **archive.cite(hit["session_id"], call)})
    return _paged({"subject": subject}, "uses", rows, start)


def usage(archive: Archive, by: str = "day", agent: str | None = None, model: str | None = None,
          run: str | None = None, since: str | None = None, until: str | None = None) -> dict:
    """Calls, tokens (cache tokens apart) and cost by day, model, agent, run or source, as `reasonlog stats`."""
    if by not in USAGE_BY:
        raise ToolInputError(f"by: expected one of {', '.join(USAGE_BY)}, got {by!r}")
    flt = _filter(agent=agent, model=model, run=run, since=since, until=until)
    rows = query.stats(archive.store, by, replace(flt, limit=None), latency=False)
    return _paged({"by": by}, "rows", rows, 0)


def reasoning(archive: Archive, session: str | None = None, group: str | None = None, start: int = 0,
              missing: list[str] | None = None) -> dict:
    """The reasoning records an orchestration saved (phase, compact record, artifact), by session or group; with
    `missing`, which agents of which sessions saved none for those phases (as `reasonlog reason missing`)."""
    from ..reasoning import PHASES

    store = archive.store
    session_id = _resolve(store, "session", session) if session else None
    records = store.list_reasoning_records(session_id=session_id, group=group)
    if missing is not None:
        unknown = [p for p in missing if p not in PHASES]
        if unknown or not missing:
            raise ToolInputError(f"missing: expected phases among {', '.join(PHASES)}, got {missing!r}")
        seen: dict[tuple[str, str], set[str]] = {}
        for r in records:
            seen.setdefault((r["session_id"], r.get("agent") or "-"), set()).add(r["phase"])
        rows = [{"agent": agent, "missing": [p for p in missing if p not in got], **archive.cite(sid, None)}
                for (sid, agent), got in sorted(seen.items()) if any(p not in got for p in missing)]
        head = {"session": session_id, "group": group, "phases": missing, "sessions_with_records": len(seen)}
        return _paged(head, "records", rows[_start(start):], start)
    rows = [{**{k: r.get(k) for k in ("phase", "group", "compact", "at", "artifact")},
             **archive.cite(r["session_id"], None)} for r in records]
    return _paged({"session": session_id, "group": group}, "records", rows[_start(start):], start)


# ------------------------------------------------------------------------------ helpers

def _filter(*, agent=None, model=None, run=None, since=None, until=None, project=None, outcome=None) -> SessionFilter:
    for name, value in (("since", since), ("until", until)):
        if value is not None:
            try:
                date.fromisoformat(value[:10])
            except ValueError:
                raise ToolInputError(f"{name}: expected a date as YYYY-MM-DD, got {value!r}") from None
    if outcome is not None and outcome not in ("completed", "failed", "interrupted", "error", "running"):
        raise ToolInputError(f"outcome: expected completed, failed, interrupted, error or running, got {outcome!r}")
    labels = {"cwd": project} if project else {}
    return SessionFilter(agent=agent, model=model, run=run, since=since, until=until, status=outcome,
                         labels=labels, limit=None)


def _resolve(store: StoreReader, kind: str, given: str) -> str:
    try:
        return store.resolve_id(kind, given.split("#")[0])
    except NotFound:
        raise ToolInputError(f"{kind}: no {kind} has the id or prefix {given!r}") from None
    except ValueError as exc:
        raise ToolInputError(f"{kind}: {exc}") from None


def _call_id(store: StoreReader, given: str) -> str:
    """A call id from a call id or prefix, `SESSION#N` or `SESSION#N@fingerprint`."""
    reference = given.split("@")[0]
    if "#" not in reference:
        return _resolve(store, "call", reference)
    session, _, number = reference.rpartition("#")
    if not number.isdigit():
        raise ToolInputError(f"call: expected SESSION#N with N a number, got {given!r}")
    calls = store.get_session(_resolve(store, "session", session))["calls"]
    if int(number) >= len(calls):
        raise ToolInputError(f"call: session {session} has {len(calls)} calls, so no #{number}")
    return calls[int(number)]["id"]


def _changed(store: StoreReader, given: str, record: Mapping[str, Any] | None = None) -> dict:
    """`{"changed_since_cited": ...}` when `given` is a citation whose fingerprint the record no longer has."""
    if "@" not in given or "#" not in given:
        return {}
    cited = given.rsplit("@", 1)[1]
    record = record or store.get_call(_call_id(store, given))
    now = fingerprint(record)
    if now == cited:
        return {}
    return {"changed_since_cited": f"this call's record changed since it was cited (fingerprint {cited}, now {now}):"
                                   " it was re-imported or rewritten; read it again before relying on it"}


def _call(store: StoreReader, call_id: str | None, cache: dict[str, Any]) -> dict | None:
    if not call_id:
        return None
    if call_id not in cache:
        try:
            cache[call_id] = store.get_call(call_id)
        except NotFound:
            return None
    return cache[call_id]


def _title(store: StoreReader, session: Mapping[str, Any]) -> str:
    return title_of(session, store.first_prompts([session["id"]]).get(session["id"]))


def _step(archive: Archive, session_id: str, item: dict, calls: Mapping[str, Mapping[str, Any]]) -> dict | None:
    kind = item["kind"]
    if kind == "message":
        texts, tools = [], []
        for part in item.get("parts") or ():
            if part["kind"] in ("text", "thinking"):
                texts.append(part.get("text") or "")
            elif part["kind"] == "tool_use":
                result = part.get("result") or {}
                tools.append({"tool": part.get("name"), "input": _cut(orjson.dumps(part.get("input")).decode()),
                              "result": _cut(str(result.get("content", ""))), "is_error": result.get("is_error")})
            elif part["kind"] == "tool_result":
                tools.append({"result": _cut(str(part.get("content", "")))})
        step: dict[str, Any] = {"role": item.get("role"), "text": _cut("\n".join(t for t in texts if t))}
        if tools:
            step["tools"] = tools
        call = calls.get(item.get("call_id") or "")
        return {**step, **(archive.cite(session_id, call) if call and item.get("role") == "assistant" else {})}
    if kind == "outcome":
        return {"outcome": item.get("outcome_kind"), "payload": item.get("payload"), "at": item.get("at")}
    if kind == "failed_call":
        return {"failed_call": item.get("error"), "at": item.get("at")}
    return None


def _cut(text: str, limit: int = TEXT) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _start(start: int) -> int:
    if not isinstance(start, int) or start < 0:
        raise ToolInputError(f"start: expected a number from 0 (the next_start of an earlier answer), got {start!r}")
    return start


def _paged(head: dict, key: str, rows: Sequence[Mapping[str, Any]], start: int) -> dict:
    """`head` with as many of `rows` (the list from item `start` on) as fit the budget, and where to go on."""
    used = len(orjson.dumps(head, default=str)) + 100
    shown: list[Mapping[str, Any]] = []
    for row in rows:
        size = len(orjson.dumps(row, default=str)) + 1
        if shown and used + size > BUDGET:
            break
        shown.append(row)
        used += size
    out = {**head, key: shown}
    if len(shown) < len(rows):
        out["next_start"] = start + len(shown)
    return out
