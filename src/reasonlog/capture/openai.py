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
from ..providers import openai_responses
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
    """Folds chat.completion.chunk deltas into the message a non-streamed call would have returned."""

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head: dict = {}
        self.text: list[str] | None = None
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict] = {}
        self.finish_reason: str | None = None
        self.usage: dict | None = None

    def add(self, chunk: Any) -> None:
        if not self.head:
            self.head = {k: getattr(chunk, k, None) for k in ("id", "created", "model", "system_fingerprint")}
        if chunk.usage is not None:
            self.usage = chunk.usage.model_dump(mode="json", exclude_unset=True, warnings=False)
        for choice in chunk.choices:
            if choice.index == 0:
                self._delta(choice.delta)
                self.finish_reason = choice.finish_reason or self.finish_reason

    def _delta(self, delta: Any) -> None:
        if delta is None:
            return
        if delta.content is not None:  # None means "no content" (a tool call), "" means empty text
            if self.text is None:
                self.text = []
            self.text.append(delta.content)
        # DeepSeek and xAI say `reasoning_content`; vLLM and Ollama say `reasoning`.
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str):
            self.reasoning.append(reasoning)
        if getattr(delta, "refusal", None):
            self.refusal.append(delta.refusal)
        for call in delta.tool_calls or ():
            self._tool_call(call)
        if self.first_at is None and (delta.content or reasoning or delta.tool_calls):
            self.first_at = time.perf_counter()

    def _tool_call(self, call: Any) -> None:
        slot = self.calls.setdefault(call.index, {"id": None, "type": "function",
                                                  "function": {"name": "", "arguments": ""}})
        if call.id:
            slot["id"] = call.id
        if call.function is not None:
            slot["function"]["name"] += call.function.name or ""
            slot["function"]["arguments"] += call.function.arguments or ""

    def message(self) -> dict:
        msg: dict = {"role": "assistant", "content": None if self.text is None else "".join(self.text)}
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            msg["refusal"] = "".join(self.refusal)
        if self.calls:
            msg["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return msg

    def fields(self) -> dict:
        raw = {**{k: v for k, v in self.head.items() if v is not None}, "object": "chat.completion",
               "choices": [{"index": 0, "message": self.message(), "finish_reason": self.finish_reason}]}
        if self.usage is not None:
            raw["usage"] = self.usage
        return _chat_fields(raw)


class ResponsesTap(Tap):
    """Folds Responses stream events into the response; the terminal event carries it whole."""

    provider = PROVIDER
    _TERMINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.response: dict = {}
        self.items: dict[int, dict] = {}

    def add(self, event: Any) -> None:
        kind = event.type
        if kind.endswith(".delta"):
            self.first_at = self.first_at or time.perf_counter()
            self._delta(kind, event)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self.items[event.output_index] = event.item.model_dump(mode="json", exclude_unset=True, warnings=False)
        elif kind == "response.content_part.added":
            self._slot(event, "content", event.content_index, event.part.model_dump(mode="json", warnings=False))
        elif kind == "response.reasoning_summary_part.added":
            self._slot(event, "summary", event.summary_index, event.part.model_dump(mode="json", warnings=False))
        elif kind in self._TERMINAL or kind in ("response.created", "response.in_progress"):
            self.response = event.response.model_dump(mode="json", exclude_unset=True, warnings=False)
            self.ended = kind in self._TERMINAL

    def _slot(self, event: Any, key: str, index: int, value: dict) -> dict:
        parts = self.items.setdefault(event.output_index, {}).setdefault(key, [])
        while len(parts) <= index:
            parts.append(dict(value))
        return parts[index]

    def _delta(self, kind: str, event: Any) -> None:
        if kind == "response.output_text.delta":
            part = self._slot(event, "content", event.content_index, {"type": "output_text", "text": ""})
            part["text"] = part.get("text", "") + event.delta
        elif kind == "response.reasoning_summary_text.delta":
            part = self._slot(event, "summary", event.summary_index, {"type": "summary_text", "text": ""})
            part["text"] = part.get("text", "") + event.delta
        elif kind == "response.function_call_arguments.delta":
            item = self.items.setdefault(event.output_index, {"type": "function_call"})
            item["arguments"] = item.get("arguments", "") + event.delta

    def fields(self) -> dict:
        raw = dict(self.response)
        if not self.ended:  # cut short: what arrived, item by item
            raw["output"] = [self.items[i] for i in sorted(self.items)]
        return _responses_fields(raw)


CHAT = Api("messages", _chat_object_fields, _chat_fields, ChatTap)
RESPONSES = Api("input", _responses_object_fields, _responses_fields, ResponsesTap)
