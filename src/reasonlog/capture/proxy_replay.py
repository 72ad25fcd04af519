"""`reasonlog proxy --replay SESSION`: the agent's requests answered from a recording, in order, with no network.

Each model call the agent sends is compared with the recorded call at the same position (canonical JSON, after
the same masking of secrets the recording had). When they are the same, the recorded answer goes back: the bytes
the upstream sent (calls the proxy recorded keep them whole, streams included), with its status. When they differ,
the agent gets a 409 in its provider's error shape naming the call and showing the diff of the two requests, so
a user sees what their change altered. `--until N` serves calls #0..#N-1 so and forwards from #N on (the fork,
recorded by the proxy as a session linked to the original's call #N), optionally asking another model.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from ..providers import gemini
from ..providers.sse import is_sse
from ..redact import Redactor
from ..store.content import canonical
from .proxy import Forward
from .proxy_routes import Route, error_body

DIFF_LINES = 60


class Answer(NamedTuple):
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class RecordedCall:
    """One call of the recording: its request in canonical form and the answer to give back."""

    index: int
    call_id: str
    request: dict
    canonical: bytes
    answer: Answer


@dataclass(frozen=True)
class Script:
    session_id: str
    calls: list[RecordedCall]


def load_script(store: Any, session_id: str) -> Script:
    """The calls of a recorded session, in order, with the answers to give back."""
    ids = [c["id"] for c in store.get_session(session_id)["calls"]]
    calls = []
    for index, call_id in enumerate(ids):
        call = store.get_call(call_id)
        calls.append(RecordedCall(index, call_id, call["request"], canonical(call["request"]), answer_of(call)))
    return Script(session_id, calls)


def answer_of(call: dict) -> Answer:
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
    """Answers model calls from `script` in order; from call #`until` on (when given) forwards them, asking for
    `model` when given. Requests that are not model calls get a 404 while replaying (no network), and are
    forwarded once forwarding began."""

    def __init__(self, script: Script, until: int | None = None, model: str | None = None):
        self.script, self.until, self.model = script, until, model
        self.position = 0
        self.redactor = Redactor()

    def answer(self, route: Route | None, path: str, body: bytes) -> Answer | Forward | None:
        if route is None:
            return None if self.until is not None else _not_recorded(path)
        n = self.position
        if self.until is not None and n >= self.until:
            self.position += 1
            return self._forwarded(route, path, body)
        if n >= len(self.script.calls):
            return self._refused(route, f"request #{n}: the recording {self.script.session_id} has only"
                                        f" {len(self.script.calls)} calls")
        recorded = self.script.calls[n]
        sent = self._canonical(body)
        if sent != recorded.canonical:
            return self._refused(route, self._mismatch(recorded, sent))
        self.position += 1
        return recorded.answer

    def _canonical(self, body: bytes) -> bytes:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        return canonical(self.redactor.value(request))

    def _mismatch(self, recorded: RecordedCall, sent: bytes) -> str:
        where = f"{self.script.session_id}#{recorded.index}"
        return (f"reasonlog replay: request #{recorded.index} differs from the recorded call {where}"
                f" ({recorded.call_id}):\n{request_diff(recorded.canonical, sent)}")

    def _refused(self, route: Route, message: str) -> Answer:
        body = orjson.dumps(error_body(route.provider, 409, "replay_mismatch", message))
        # x-should-retry: the Anthropic and OpenAI SDKs retry a 409 unless told not to
        return Answer(409, [("Content-Type", "application/json"), ("x-should-retry", "false")], body)

    def _forwarded(self, route: Route, path: str, body: bytes) -> Forward | None:
        if not self.model:
            return None
        if route.protocol is gemini and route.model:
            return Forward(path.replace(f"/models/{route.model}:", f"/models/{self.model}:", 1), body)
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(request, dict) or "model" not in request:
            return None
        return Forward(path, orjson.dumps({**request, "model": self.model}))


def request_diff(recorded: bytes, sent: bytes) -> str:
    """A unified diff of two requests' indented JSON (recorded first), cut at `DIFF_LINES` lines."""
    def lines(data: bytes) -> list[str]:
        try:
            return orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() \
                .splitlines()
        except orjson.JSONDecodeError:
            return data.decode("utf-8", "replace").splitlines()

    diff = list(difflib.unified_diff(lines(recorded), lines(sent), "recorded", "sent", lineterm="", n=2))
    shown = [line if len(line) <= 300 else line[:300] + "…" for line in diff[:DIFF_LINES]]
    if len(diff) > DIFF_LINES:
        shown.append(f"… {len(diff) - DIFF_LINES} more lines")
    return "\n".join(shown)


def _not_recorded(path: str) -> Answer:
    message = f"reasonlog replay: {path} is not a model call of the recording (no network while replaying)"
    return Answer(404, [("Content-Type", "application/json")],
                  orjson.dumps({"error": {"type": "not_recorded", "message": message}}))
