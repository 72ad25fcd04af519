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

import json
import time
from typing import Any

from ..model import Usage
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
    """Folds Messages stream events into the message the non-streamed call would have returned.

    Follows the SDK's own accumulation: a `message_delta`'s usage counts are running totals
    that overwrite, and a count it leaves out keeps its `message_start` value.
    """

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.message: dict | None = None
        self.json_parts: dict[int, list[str]] = {}

    def add(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            self._delta(event.index, event.delta)
        elif kind == "content_block_start" and self.message is not None:
            self.message["content"].append(_dump(event.content_block))
            self.first_at = self.first_at or time.perf_counter()
        elif kind == "message_start":
            self.message = event.message.model_dump(mode="json", exclude_unset=True, warnings=False)
            self.message["content"] = []
        elif kind == "message_delta" and self.message is not None:
            self._message_delta(event)
        elif kind == "content_block_stop":
            self._parse_input(event.index)
        elif kind == "message_stop":
            self.ended = True

    def _delta(self, index: int, delta: Any) -> None:
        if self.message is None or index >= len(self.message["content"]):
            return
        block, kind = self.message["content"][index], delta.type
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.partial_json)
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(_dump(delta.citation))

    def _parse_input(self, index: int) -> None:
        text = "".join(self.json_parts.pop(index, ()))
        if text and self.message is not None and index < len(self.message["content"]):
            self.message["content"][index]["input"] = _parse_json(text)

    def _message_delta(self, event: Any) -> None:
        delta, message = _dump(event.delta), self.message
        if message is None:
            return
        message.update({k: v for k, v in delta.items() if v is not None or k.startswith("stop_")})
        usage = message.setdefault("usage", {})
        for key, value in event.usage.model_dump(mode="json", exclude_unset=True, warnings=False).items():
            if value is not None:
                usage[key] = value

    def fields(self) -> dict:
        for index in list(self.json_parts):
            self._parse_input(index)
        msg = self.message
        if msg is None:
            return {}
        return {"response": {"role": "assistant", "content": msg["content"]}, "model": msg.get("model"),
                "stop_reason": msg.get("stop_reason"), "usage": Usage.from_anthropic(msg.get("usage") or {}),
                "provider_message_id": msg.get("id"), "raw": msg}


def _dump(block: Any) -> dict:
    return block.model_dump(mode="json", exclude_unset=True, warnings=False)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # cut off mid-way: keep what arrived, parsed as far as it goes, as the SDK does
        from jiter import from_json  # a dependency of the anthropic SDK itself

        try:
            return from_json(text.encode(), partial_mode=True)
        except ValueError:
            return {}


MESSAGES = Api("messages", _message_fields, _json_fields, MessageTap)
