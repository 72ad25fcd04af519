"""Which session a request that came through the proxy belongs to.

First what the client says: an `x-reasonlog-session` header, Claude Code's session id inside Anthropic's
`metadata.user_id` (the older `user_…_session_<uuid>` text or, since Claude Code 2.1.78, a JSON string with a
`session_id`), an OpenAI Responses `previous_response_id` that names a reply recorded here, the `user` field.
Otherwise continuity: a request whose messages start with the messages of a recent request goes on that
request's session. Anything else starts a session.

Runs on the proxy's recording thread, never on the thread that forwards bytes.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

import orjson

from ..providers import openai_responses
from .recorder import Recorder, SessionRecorder

SESSION_HEADER = "x-reasonlog-session"
_CLAUDE_CODE_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})$")
RECENT = 256  # sessions whose last request is remembered for continuity


class Sessions:
    """Hands out the session of each request, starting one where none fits.

    `agent`, `run` and `labels` go on every session started; `parent` / `parent_call` link them to another
    session's call (a fork of a recording).
    """

    def __init__(self, recorder: Recorder, *, agent: str | None = None, run: str | None = None,
                 labels: dict | None = None, parent: str | None = None, parent_call: str | None = None):
        self.recorder, self.agent, self.run, self.labels = recorder, agent, run, labels
        self.parent, self.parent_call = parent, parent_call
        self.by_key: dict[tuple[str, str], SessionRecorder] = {}
        self.by_response: dict[str, SessionRecorder] = {}
        self.recent: OrderedDict[str, tuple[SessionRecorder, list[int]]] = OrderedDict()
        self.started: list[SessionRecorder] = []

    def session_for(self, request: dict, messages: list, headers: dict[str, str],
                    provider: str, model: str | None) -> SessionRecorder:
        """The session this request belongs to (`messages`: what it sent as its conversation)."""
        prints = _fingerprints(messages)
        key = stated_key(request, headers)
        session = self.by_key.get(key) if key else self._chained(request) or self._continued(prints)
        if session is None:
            session = self._start(key, provider, model, headers.get("user-agent"))
        self.recent[session.id] = (session, prints)
        self.recent.move_to_end(session.id)
        while len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        return session

    def answered(self, session: SessionRecorder, response_id: Any) -> None:
        """Remember which session a Responses reply belongs to, for requests that chain onto it."""
        if isinstance(response_id, str):
            self.by_response[response_id] = session

    def end(self) -> None:
        for session in self.started:
            if not session.ended:
                session.end("completed")

    def _chained(self, request: dict) -> SessionRecorder | None:
        previous = request.get(openai_responses.CHAIN)
        return self.by_response.get(previous) if isinstance(previous, str) else None

    def _continued(self, prints: list[int]) -> SessionRecorder | None:
        """The session of the most recent request whose messages this request's messages begin with."""
        if not prints:
            return None
        for session, earlier in reversed(self.recent.values()):
            if earlier and len(earlier) <= len(prints) and prints[:len(earlier)] == earlier:
                return session
        return None

    def _start(self, key: tuple[str, str] | None, provider: str, model: str | None,
               user_agent: str | None) -> SessionRecorder:
        """A new session; without an agent name of its own, named after the client (`claude-cli/2.1.0 …`)."""
        agent = self.agent or (user_agent.split("/", 1)[0].strip() or None if user_agent else None)
        labels = {**(self.labels or {}), **({"client": user_agent[:200]} if user_agent else {})}
        session = self.recorder.session(agent=agent, run=self.run, model=model, provider=provider,
                                        labels=labels or None, external_id=key[1] if key else None,
                                        parent=self.parent, parent_call=self.parent_call, on_close="completed")
        if key:
            self.by_key[key] = session
        self.started.append(session)
        return session


def stated_key(request: dict, headers: dict[str, str]) -> tuple[str, str] | None:
    """What the client says the session is, as (kind, id); None when it says nothing."""
    header = headers.get(SESSION_HEADER)
    if header:
        return ("header", header)
    metadata = request.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user_id, str) and user_id:
        claude_code = claude_code_session(user_id)
        return ("claude-code", claude_code) if claude_code else ("user", user_id)
    user = request.get("user")
    return ("user", user) if isinstance(user, str) and user else None


def claude_code_session(user_id: str) -> str | None:
    """Claude Code's session id from `metadata.user_id`, in either of the forms its versions send."""
    if user_id.startswith("{"):
        try:
            stated = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return None
        found = stated.get("session_id") if isinstance(stated, dict) else None
        return found if isinstance(found, str) and found else None
    match = _CLAUDE_CODE_SESSION.search(user_id)
    return match.group(1) if match else None


def _fingerprints(messages: list) -> list[int]:
    return [hash(orjson.dumps(m, option=orjson.OPT_SORT_KEYS)) for m in messages]
