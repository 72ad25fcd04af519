"""Which session a request that came through the proxy belongs to.

First what the client says (`proxy_side.stated_key`): an `x-reasonlog-session` header, Claude Code's session id
(`metadata.user_id`, or its `x-claude-code-session-id` header), OpenCode's `x-session-id` header, Codex's thread
id (`client_metadata.thread_id`, `prompt_cache_key`), an OpenAI Responses `previous_response_id` that names a
reply recorded here, the `user` field. Otherwise continuity: a request whose messages start with the messages of a
recent request goes on that request's session, messages compared as a reader compares them (`cache_control`
ignored, which the AI SDK moves to the last message on every call). Anything else starts a session.

A call the client makes beside its loop (a title, a router's choice: `proxy_side.side_role`, or, under a stated
id whose loop offers tools, a call with no tools that does not continue the loop) goes to a side session of the
run: a child of the loop's session, labelled with its `role`, so the loop's timeline stays the loop's.

Runs on the proxy's recording thread, never on the thread that forwards bytes.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..conversation import key_of, reader_form
from ..providers import openai_responses
from .proxy_side import SESSION_HEADER, claude_code_session, offers_tools, side_role, stated_key
from .recorder import Recorder, SessionRecorder

__all__ = ["SESSION_HEADER", "Sessions", "claude_code_session", "stated_key"]
RECENT = 256  # sessions whose last request is remembered for continuity


class Sessions:
    """Hands out the session of each request, starting one where none fits.

    `agent`, `run` and `labels` go on every session started; `parent` / `parent_call` link them to another
    session's call (a fork of a recording). `started` holds the loops' sessions, `sides` the side sessions.
    """

    def __init__(self, recorder: Recorder, *, agent: str | None = None, run: str | None = None,
                 labels: dict | None = None, parent: str | None = None, parent_call: str | None = None):
        self.recorder, self.agent, self.run, self.labels = recorder, agent, run, labels
        self.parent, self.parent_call = parent, parent_call
        self.by_key: dict[tuple[str, str], SessionRecorder] = {}
        self.by_response: dict[str, SessionRecorder] = {}
        self.recent: OrderedDict[str, tuple[SessionRecorder, list[bytes]]] = OrderedDict()
        self.started: list[SessionRecorder] = []
        self.sides: dict[tuple[str, str], SessionRecorder] = {}  # (loop's session id, role): its side session
        self.looping: set[str] = set()  # sessions whose calls offered tools: an agent's loop
        self.latest: dict[str | None, SessionRecorder] = {}  # each client's (user-agent's) latest loop session
        self.waiting: dict[str | None, SessionRecorder] = {}  # a loop's session started by its side call first

    def session_for(self, request: dict, messages: list, headers: dict[str, str],
                    provider: str, model: str | None) -> SessionRecorder:
        """The session this request belongs to (`messages`: what it sent as its conversation)."""
        prints = _fingerprints(messages)
        key = stated_key(request, headers)
        client = headers.get("user-agent")
        role = self._side_role(request, key, prints)
        if role is not None:
            return self._side(role, key, client, provider, model)
        session = self.by_key.get(key) if key else (self._chained(request) or self._continued(prints)
                                                   or self.waiting.pop(client, None))
        if session is None:
            session = self._start(key, provider, model, client)
        if offers_tools(request):
            self.looping.add(session.id)
        self.latest[client] = session
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
        for session in [*self.started, *self.sides.values()]:
            if not session.ended:
                session.end("completed")

    def _side_role(self, request: dict, key: tuple[str, str] | None, prints: list[bytes]) -> str | None:
        """The role of a call beside the loop: known by its instructions, or, under a stated id whose loop offers
        tools, a call offering none that does not continue the loop."""
        role = side_role(request)
        if role is not None or offers_tools(request) or key is None:
            return role
        loop = self.by_key.get(key)
        if loop is None or loop.id not in self.looping:
            return None
        earlier = self.recent.get(loop.id, (loop, []))[1]
        return None if earlier and prints[:len(earlier)] == earlier else "side"

    def _side(self, role: str, key: tuple[str, str] | None, client: str | None, provider: str,
              model: str | None) -> SessionRecorder:
        """The side session `role` of the run's loop; a loop not seen yet is started (with no call) to hold it."""
        loop = self.by_key.get(key) if key else self.latest.get(client) or self.waiting.get(client)
        if loop is None:
            loop = self._start(key, provider, None, client)
            if key is None:
                self.waiting[client] = loop
        side = self.sides.get((loop.id, role))
        if side is None:
            side = self.sides[(loop.id, role)] = self.recorder.session(
                agent=self._agent(client), run=self.run, model=model, provider=provider,
                labels={**self._labels(client), "role": role, "title": f"{role} calls beside the loop"},
                parent=loop.id, on_close="completed")
        return side

    def _chained(self, request: dict) -> SessionRecorder | None:
        previous = request.get(openai_responses.CHAIN)
        return self.by_response.get(previous) if isinstance(previous, str) else None

    def _continued(self, prints: list[bytes]) -> SessionRecorder | None:
        """The session of the most recent request whose messages this request's messages begin with."""
        if not prints:
            return None
        for session, earlier in reversed(self.recent.values()):
            if earlier and len(earlier) <= len(prints) and prints[:len(earlier)] == earlier:
                return session
        return None

    def _start(self, key: tuple[str, str] | None, provider: str, model: str | None,
               user_agent: str | None) -> SessionRecorder:
        """A new session of a loop."""
        session = self.recorder.session(agent=self._agent(user_agent), run=self.run, model=model, provider=provider,
                                        labels=self._labels(user_agent) or None, external_id=key[1] if key else None,
                                        parent=self.parent, parent_call=self.parent_call, on_close="completed")
        if key:
            self.by_key[key] = session
        self.started.append(session)
        return session

    def _agent(self, user_agent: str | None) -> str | None:
        """The agent's name given to `run`, else the client's (`claude-cli/2.1.0 …`)."""
        return self.agent or (user_agent.split("/", 1)[0].strip() or None if user_agent else None)

    def _labels(self, user_agent: str | None) -> dict:
        return {**(self.labels or {}), **({"client": user_agent[:200]} if user_agent else {})}


def _fingerprints(messages: list) -> list[bytes]:
    return [key_of(reader_form(m)) for m in messages]
