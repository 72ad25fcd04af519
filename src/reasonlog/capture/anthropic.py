"""Record every Messages call of one `anthropic.Anthropic` / `anthropic.AsyncAnthropic` client.

`instrument_anthropic(client)` patches that client's `request` method, through which the SDK
sends every call: `messages.create` (plain and `stream=True`), `messages.stream(...)`,
`messages.parse`, `beta.messages.*`, `with_raw_response`, and copies made with
`with_options(...)`. Each call records the request body as sent, the assistant message
(`{"role": "assistant", "content": [blocks]}`, every block dumped as the SDK sends it back),
stop reason, usage, request id (`Message._request_id`, which the SDK documents as public, or the
`request-id` header), latency, time to first token and the payload. A stream the caller leaves
early is recorded as partial; API errors as failed calls.
"""
from __future__ import annotations

import time
from typing import Any

from ..model import Usage
from ..providers import anthropic as anthropic_protocol
from ._patching import Adapter, Api, Handle, Router, Tap, hook_client, install
from .recorder import Recorder, SessionRecorder

PROVIDER = "anthropic"


def instrument_anthropic(client: Any, recorder: Recorder | None = None, *,
                         session: SessionRecorder | None = None) -> Handle:
    """Record the Messages calls of this client and its copies; returns a handle whose `undo()` restores it.

    Calls land in `session` if given, else in the session of the enclosing `with rec.session()`,
    else in a session started for this client on its first call (agent "anthropic-client").
    Without `recorder`, that automatic session goes to the default database.
    """
    import anthropic  # imported here: reasonlog installs and imports without the SDK

    router = Router(recorder, session, "anthropic-client", PROVIDER)
    is_async = isinstance(client, anthropic.AsyncAnthropic)
    adapter = Adapter(PROVIDER, {"/v1/messages": MESSAGES, "/v1/messages?beta=true": MESSAGES},
                      (anthropic.Stream, anthropic.AsyncStream), "request-id")
    return install(client, router, lambda handle: hook_client(handle, client, adapter, is_async))


def _message_fields(message: Any) -> dict:
    # The SDK's objects go to the recorder as they are: the writer thread dumps them to JSON
    # (model.jsonable), so the agent's thread pays for no model_dump.
    return {"response": {"role": "assistant", "content": list(message.content or ())}, "model": message.model,
            "stop_reason": message.stop_reason, "usage": Usage.from_anthropic(message.usage) if message.usage else None,
            "provider_message_id": message.id, "raw": message}


def _json_fields(raw: dict) -> dict:
    """The same fields from the payload as JSON (a raw response)."""
    return {"response": {"role": "assistant", "content": raw.get("content") or []}, "model": raw.get("model"),
            "stop_reason": raw.get("stop_reason"), "usage": Usage.from_anthropic(raw.get("usage") or {}),
            "provider_message_id": raw.get("id"), "raw": raw}


# ---------------------------------------------------------------------- streams


class MessageTap(Tap):
    """Folds Messages stream events into the message the non-streamed call would have returned
    (`providers.anthropic.Stream`, which the proxy uses too)."""

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stream = anthropic_protocol.Stream()

    def add(self, event: Any) -> None:
        if self.stream.add(event):
            self.first_at = self.first_at or time.perf_counter()
        self.ended = self.stream.ended

    def fields(self) -> dict:
        msg = self.stream.body()
        if msg is None:
            return {}
        return {"response": {"role": "assistant", "content": msg["content"]}, "model": msg.get("model"),
                "stop_reason": msg.get("stop_reason"), "usage": Usage.from_anthropic(msg.get("usage") or {}),
                "provider_message_id": msg.get("id"), "raw": msg}


MESSAGES = Api("messages", _message_fields, _json_fields, MessageTap)
