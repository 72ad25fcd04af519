"""Record every Chat Completions and Responses call of one `openai.OpenAI` / `openai.AsyncOpenAI` client.

`instrument_openai(client)` patches that client's `request` method, through which the SDK sends
every call: `chat.completions.create` / `.parse` / `.stream(...)` (also under `beta`),
`responses.create` / `.parse` / `.stream(...)`, `with_raw_response`, and copies made with
`with_options(...)`. It works the same against servers that speak the OpenAI protocol
(DeepSeek, Groq, xAI, Mistral, vLLM, Ollama): usage goes through `Usage.from_openai`, which
keeps output and reasoning tokens from being counted twice, and the raw usage stays in the raw
payload. The request id is `_request_id`, which the SDK documents as public, or the
`x-request-id` header.
"""
from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from ..model import Usage
from ..providers import openai_chat, openai_responses
from ._patching import Adapter, Api, Handle, Router, Tap, hook_client, install
from .recorder import Recorder, SessionRecorder

PROVIDER = "openai"


def instrument_openai(client: Any, recorder: Recorder | None = None, *,
                      session: SessionRecorder | None = None) -> Handle:
    """Record this client's (and its copies') chat.completions and responses calls; `undo()` restores it.

    Calls land in `session` if given, else in the session of the enclosing `with rec.session()`,
    else in a session started for this client on its first call (agent "openai-client", labelled
    with the server's host, so DeepSeek or a local vLLM stay apart from api.openai.com).
    """
    import openai  # imported here: reasonlog installs and imports without the SDK

    host = urlsplit(str(client.base_url)).hostname or ""
    router = Router(recorder, session, "openai-client", PROVIDER, labels={"host": host})
    is_async = isinstance(client, openai.AsyncOpenAI)
    adapter = Adapter(PROVIDER, {"/chat/completions": CHAT, "/responses": RESPONSES},
                      (openai.Stream, openai.AsyncStream), "x-request-id")
    return install(client, router, lambda handle: hook_client(handle, client, adapter, is_async))


# ---------------------------------------------------------------------- the two APIs


def _chat_fields(raw: dict) -> dict:
    choice = (raw.get("choices") or [{}])[0]  # with n > 1 the others stay in the raw payload
    return {"response": choice.get("message"), "stop_reason": choice.get("finish_reason"),
            "usage": _usage(raw.get("usage")), "model": raw.get("model"), "provider_message_id": raw.get("id"),
            "raw": raw}


def _chat_object_fields(result: Any) -> dict:
    """Like `_chat_fields`, from the SDK's objects; the writer thread dumps them to JSON."""
    choice = result.choices[0] if result.choices else None
    return {"response": None if choice is None else choice.message,
            "stop_reason": None if choice is None else choice.finish_reason,
            "usage": None if result.usage is None else Usage.from_openai(result.usage), "model": result.model,
            "provider_message_id": result.id, "raw": result}


def _responses_fields(raw: dict) -> dict:
    output = raw.get("output") or []
    return {"response": {"role": "assistant", "content": output}, "stop_reason": openai_responses.stop_reason(raw),
            "usage": _usage(raw.get("usage")), "model": raw.get("model"), "provider_message_id": raw.get("id"),
            "raw": raw}


def _usage(usage: dict | None) -> Usage | None:
    return None if not usage else Usage.from_openai(usage)


def _responses_object_fields(result: Any) -> dict:
    return _responses_fields(result.model_dump(mode="json", exclude_unset=True, warnings=False))


# ---------------------------------------------------------------------- streams


class ChatTap(Tap):
    """Folds chat.completion.chunk deltas into the message a non-streamed call would have returned
    (`providers.openai_chat.Stream`, which the proxy uses too)."""

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stream = openai_chat.Stream()

    def add(self, chunk: Any) -> None:
        if self.stream.add(chunk):
            self.first_at = self.first_at or time.perf_counter()

    def fields(self) -> dict:
        return _chat_fields(self.stream.body())


class ResponsesTap(Tap):
    """Folds Responses stream events into the response (`providers.openai_responses.Stream`); the terminal event
    carries it whole."""

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stream = openai_responses.Stream()

    def add(self, event: Any) -> None:
        if self.stream.add(event):
            self.first_at = self.first_at or time.perf_counter()
        self.ended = self.stream.ended

    def fields(self) -> dict:
        return _responses_fields(self.stream.body())


CHAT = Api("messages", _chat_object_fields, _chat_fields, ChatTap)
RESPONSES = Api("input", _responses_object_fields, _responses_fields, ResponsesTap)
