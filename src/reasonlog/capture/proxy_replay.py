"""`reasonlog proxy --replay SESSION` and `reasonlog run --replay`: an agent's requests answered from a recording,
with no network.

The recording is a run, not a session: the session asked for and the sessions of its run recorded while it was
(a CLI's title, router or classifier calls beside its loop), in the order they were made. Each model call the
agent sends is matched to the first recorded call not yet served that it equals, in matching form
(`replay_match.py`: the same up to the ids, times and process ids a re-run makes fresh; `strict` compares canonical
JSON, after the same masking of secrets the recording had). The recorded answer goes back: the bytes the upstream
sent (calls the proxy recorded keep them whole, streams included), with its status. What a match tolerated is kept
per call (`served`) for the replay's report. A request that matches nothing gets a 409 in its provider's error
shape naming the recorded call it was expected to be and the diff of the two in matching form, so the ids a re-run
changes do not bury what the user's change altered. `fork=(SESSION, N)` serves the calls before #N of SESSION (and
the run's calls beside it) and forwards the rest (the fork, recorded by the proxy as a session linked to the
original's call #N), optionally asking another model.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from ..providers import GEMINI
from ..providers.sse import is_sse
from ..redact import Redactor
from ..store import SessionFilter, StoreReader
from ..wire.codec import canonical
from .proxy import Forward
from .proxy_routes import Route, error_body
from .replay_match import Tolerated, matching_form, tolerated

DIFF_LINES = 60
BESIDE_S = 10.0  # a session of the same run started this close to the asked one's span is part of the recording


class Answer(NamedTuple):
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class RecordedCall:
    """One call of the recording: its request in canonical form and the answer to give back."""

    index: int  # its number in its session (`SESSION#N`)
    call_id: str
    request: dict
    canonical: bytes
    answer: Answer
    session_id: str = ""

    @property
    def reference(self) -> str:
        return f"{self.session_id}#{self.index}"


@dataclass(frozen=True)
class Script:
    session_id: str
    calls: list[RecordedCall]  # every call of the recording, in the order they were made


@dataclass
class Served:
    """A request answered from the recording: which call, and what its match tolerated."""

    call: RecordedCall
    tolerated: list[Tolerated] = field(default_factory=list)


def load_script(store: StoreReader, session_id: str, beside: bool = True) -> Script:
    """The calls of a recorded session and (`beside`) of the sessions its run recorded while it was, in the order
    they were made, with the answers to give back."""
    sessions = [session_id] + (sessions_beside(store, session_id) if beside else [])
    calls = []
    for sid in sessions:
        for index, brief in enumerate(store.get_session(sid)["calls"]):
            call = store.get_call(brief["id"])
            calls.append((call.get("started_at") or "", RecordedCall(
                index, call["id"], call["request"], canonical(call["request"]), answer_of(call), sid)))
    calls.sort(key=lambda pair: pair[0])
    return Script(session_id, [call for _, call in calls])


def sessions_beside(store: StoreReader, session_id: str) -> list[str]:
    """The other sessions of the session's run that started within its span (give or take `BESIDE_S`)."""
    from datetime import datetime, timedelta

    session = store.get_session(session_id)
    run, first = session.get("run"), session.get("started_at")
    if not run or not first:
        return []
    last = session.get("ended_at") or max((c.get("started_at") or first for c in session["calls"]), default=first)

    def instant(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    low, high = instant(first) - timedelta(seconds=BESIDE_S), instant(last) + timedelta(seconds=BESIDE_S)
    return [s["id"] for s in store.list_sessions(SessionFilter(run=run, limit=None))
            if s["id"] != session_id and s.get("started_at") and low <= instant(s["started_at"]) <= high]


def answer_of(call: Mapping[str, Any]) -> Answer:
    """What the upstream answered: the bytes the proxy kept, or (a call recorded another way) its payload as
    JSON; its status (a failed call's own, 502 when the upstream was never reached)."""
    raw = call.get("raw")
    body = raw.encode() if isinstance(raw, str) else orjson.dumps(raw) if raw is not None else b""
    error = call.get("error") or {}
    stated = error.get("status_code")
    status = stated if isinstance(stated, int) else 502 if call.get("status") == "error" else 200
    kind = "text/event-stream" if is_sse(body) else "application/json"
    return Answer(status, [("Content-Type", kind), ("x-reasonlog-replayed", call["id"])], body)


class Replayer:
    """Answers model calls from `script`; with `fork=(SESSION, N)` (or `until=N` of the script's own session)
    forwards from that call on, asking for `model` when given. Requests that are not model calls get a 404 while
    replaying (no network), and are forwarded once forwarding began."""

    def __init__(self, script: Script, until: int | None = None, model: str | None = None, *,
                 fork: tuple[str, int] | None = None, strict: bool = False):
        self.script, self.model, self.strict = script, model, strict
        self.fork = fork if fork is not None else None if until is None else (script.session_id, until)
        self.forking = False
        self.served: list[Served] = []
        self.forwarded = 0
        self._left = list(script.calls)  # not yet served, in the order they were made
        self._forms: dict[tuple[str, str, bool], Any] = {}
        self.redactor = Redactor()

    @property
    def until(self) -> int | None:
        return None if self.fork is None else self.fork[1]

    def answer(self, route: Route | None, path: str, body: bytes) -> Answer | Forward | None:
        if route is None:
            return None if self.fork is not None else _not_recorded(path)
        if self.forking:
            return self._forwarded(route, path, body)
        sent = self._parsed(body)
        protocol = route.protocol.api
        found = self._match(sent, protocol)
        if found is not None and not self._is_fork_point(found):
            self._left.remove(found)
            self.served.append(Served(found, [] if self.strict else tolerated(found.request, sent, protocol)))
            return found.answer
        if self.fork is not None and (found is not None or not self._before_fork_left()):
            self.forking = True
            return self._forwarded(route, path, body)
        return self._refused(route, self._mismatch(sent, protocol))

    def _parsed(self, body: bytes) -> Any:
        try:
            return self.redactor.value(orjson.loads(body))
        except orjson.JSONDecodeError:
            return body.decode("utf-8", "replace")

    def _match(self, sent: Any, protocol: str) -> RecordedCall | None:
        """The first call left that `sent` matches: exactly when strict; else beyond volatile values, and failing
        that in any order (`matching_form`'s `in_any_order`)."""
        if self.strict:
            wanted = canonical(sent)
            return next((c for c in self._left if c.canonical == wanted), None)
        for loose in (False, True):
            form = matching_form(sent, protocol, in_any_order=loose)
            found = next((c for c in self._left if self._form(c, protocol, loose) == form), None)
            if found is not None:
                return found
        return None

    def _form(self, call: RecordedCall, protocol: str, loose: bool = False) -> Any:
        key = (call.call_id, protocol, loose)
        if key not in self._forms:
            self._forms[key] = matching_form(call.request, protocol, in_any_order=loose)
        return self._forms[key]

    def _is_fork_point(self, call: RecordedCall) -> bool:
        return self.fork is not None and call.session_id == self.fork[0] and call.index >= self.fork[1]

    def _before_fork_left(self) -> bool:
        return any(c.session_id == self.fork[0] and c.index < self.fork[1] for c in self._left) if self.fork else True

    def _mismatch(self, sent: Any, protocol: str) -> str:
        if not self._left:
            return (f"request #{len(self.served)}: the recording {self.script.session_id} has only"
                    f" {len(self.script.calls)} calls, all served")
        expected = next((c for c in self._left if c.session_id == self.script.session_id), self._left[0])
        recorded, now = ((expected.request, sent) if self.strict
                         else (self._form(expected, protocol), matching_form(sent, protocol)))
        how = "(compared exactly: --strict)" if self.strict else \
            "(beyond the ids, times and process ids a re-run makes fresh)"
        return (f"reasonlog replay: request #{len(self.served)} differs from the recorded call {expected.reference}"
                f" ({expected.call_id}) {how}:\n{request_diff(recorded, now)}")

    def _refused(self, route: Route, message: str) -> Answer:
        body = orjson.dumps(error_body(route.provider, 409, "replay_mismatch", message))
        # x-should-retry: the Anthropic and OpenAI SDKs retry a 409 unless told not to
        return Answer(409, [("Content-Type", "application/json"), ("x-should-retry", "false")], body)

    def _forwarded(self, route: Route, path: str, body: bytes) -> Forward | None:
        self.forwarded += 1
        if not self.model:
            return None
        if route.protocol is GEMINI and route.model:
            return Forward(path.replace(f"/models/{route.model}:", f"/models/{self.model}:", 1), body)
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(request, dict) or "model" not in request:
            return None
        return Forward(path, orjson.dumps({**request, "model": self.model}))

    def report(self) -> list[str]:
        """One line per request served, with what its match tolerated; then what was forwarded."""
        lines = []
        for n, served in enumerate(self.served):
            what = "; ".join(map(str, served.tolerated)) if served.tolerated else "identical"
            lines.append(f"  #{n} → {served.call.reference}: {what}")
        if self.forwarded:
            lines.append(f"  {self.forwarded} request(s) forwarded from the fork on")
        return lines


def request_diff(recorded: Any, sent: Any) -> str:
    """A unified diff of two requests' indented JSON (recorded first), cut at `DIFF_LINES` lines."""
    def lines(value: Any) -> list[str]:
        if isinstance(value, bytes):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                return value.decode("utf-8", "replace").splitlines()
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()

    diff = list(difflib.unified_diff(lines(recorded), lines(sent), "recorded", "sent", lineterm="", n=2))
    shown = [_around_change(line, diff, i) for i, line in enumerate(diff[:DIFF_LINES])]
    if len(diff) > DIFF_LINES:
        shown.append(f"… {len(diff) - DIFF_LINES} more lines")
    return "\n".join(shown)


def _around_change(line: str, diff: list[str], i: int, width: int = 300) -> str:
    """A long line of the diff cut to `width` characters around where it differs from its counterpart (a system
    prompt is one JSON line of thousands of characters; what changed may be anywhere in it)."""
    if len(line) <= width:
        return line
    other = next((d for d in diff[i + 1:] if d[:1] == "+"), None) if line[:1] == "-" else \
        next((d for d in reversed(diff[:i]) if d[:1] == "-"), None) if line[:1] == "+" else None
    at = 0
    if other is not None:
        at = next((k for k, (a, b) in enumerate(zip(line[1:], other[1:], strict=False)) if a != b),
                  min(len(line), len(other)) - 1)
    start = max(0, at - width // 3)
    return line[:1] + ("…" if start else "") + line[1 + start:1 + start + width] + "…"


def _not_recorded(path: str) -> Answer:
    message = f"reasonlog replay: {path} is not a model call of the recording (no network while replaying)"
    return Answer(404, [("Content-Type", "application/json")],
                  orjson.dumps({"error": {"type": "not_recorded", "message": message}}))
