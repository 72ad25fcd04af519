"""OpenAI Chat Completions (and the servers that speak it): `POST /v1/chat/completions`, the system prompt a
message, usage whose prompt tokens include cached ones."""
from __future__ import annotations

import json
from typing import Any

from ..model import Usage
from ..wire.usage import getter
from .common import Unwrapped, dump
from .provider import Provider

NAME = "openai"
BASE_URL = "https://api.openai.com"
PATH = "/v1/chat/completions"
MESSAGES = "messages"
SYSTEM = None  # a message with role system (or developer)
KEY_HEADERS = ("authorization",)


def usage(raw: object) -> Usage:
    """Disjoint counters from Chat (`prompt_tokens`) or Responses (`input_tokens`) usage, a dict or an SDK object:
    see `wire/usage.py`."""
    return Usage.from_openai(raw)


def unwrap(body: dict) -> Unwrapped | None:
    """A chat completion (its first choice's message); None for any other body."""
    choices = body.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict) and "message" in choices[0]):
        return None
    raw = body.get("usage")
    return Unwrapped(choices[0]["message"], usage(raw) if isinstance(raw, dict) else None,
                     choices[0].get("finish_reason"), body.get("id"))


def reader_message(message: dict) -> dict:
    """A message as a reader reads it: each tool call by its id, name and parsed arguments. Clients that parse a
    streamed call's arguments send them back re-serialised (Qwen Code, OpenCode and Cline send
    `{"command":"ls"}` for the `{"command": "ls"}` the stream gave) and may drop `type` or add `index`."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return message
    return {**message, "tool_calls": [_reader_call(c) for c in calls]}


REASONING_KEYS = ("reasoning_content", "reasoning")  # DeepSeek and xAI; vLLM and Ollama


def without_thinking(message: dict) -> dict | None:
    """The reply as a client sends it back without its reasoning (most do: the AI SDK, Qwen Code); None when it
    has none."""
    if not any(message.get(k) for k in REASONING_KEYS):
        return None
    return {k: v for k, v in message.items() if k not in REASONING_KEYS}


def _reader_call(call: object) -> object:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    fn = call["function"]
    return {"id": call.get("id"), "name": fn.get("name"), "arguments": parsed(fn.get("arguments"))}


def parsed(arguments: object) -> object:
    """Tool-call arguments given as a JSON string, parsed (a string that is no JSON stays as it is)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def curl(body: str) -> str:
    return (f"curl {BASE_URL}{PATH} -H 'content-type: application/json' -H \"Authorization: Bearer $OPENAI_API_KEY\""
            f" \\\n  -d {body}")


PYTHON_CALL = "openai.OpenAI().chat.completions.create"


# ---------------------------------------------------------------------- streams


class Stream:
    """Folds `chat.completion.chunk` events (dicts as sent, or the SDK's chunk objects) into the chat completion
    the same call would have returned unstreamed (its first choice; usage from the chunk that carries it).

    `add` says whether the chunk carried output (the first such is the first token).
    """

    def __init__(self) -> None:
        self.head: dict = {}
        self.text: list[str] | None = None
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict] = {}
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.ended = False

    def add(self, chunk: object) -> bool:
        get = getter(chunk)
        if not self.head:
            self.head = {k: get(k) for k in ("id", "created", "model", "system_fingerprint")}
        if get("usage") is not None:
            self.usage = dump(get("usage"))
        carried = False
        for choice in _listed(get("choices")):
            pick = getter(choice)
            if pick("index") == 0:
                carried = self._delta(pick("delta")) or carried
                self.finish_reason = pick("finish_reason") or self.finish_reason
        self.ended = self.ended or self.finish_reason is not None
        return carried

    def _delta(self, delta: object) -> bool:
        if delta is None:
            return False
        get = getter(delta)
        content = get("content")
        if isinstance(content, str):  # None means "no content" (a tool call), "" means empty text
            self.text = [] if self.text is None else self.text
            self.text.append(content)
        # DeepSeek and xAI say `reasoning_content`; vLLM and Ollama say `reasoning`.
        reasoning = get("reasoning_content") or get("reasoning")
        if isinstance(reasoning, str):
            self.reasoning.append(reasoning)
        if isinstance(get("refusal"), str):
            self.refusal.append(get("refusal"))
        for call in _listed(get("tool_calls")):
            self._tool_call(getter(call))
        return bool(content or reasoning or get("tool_calls"))

    def _tool_call(self, get: Any) -> None:
        index = get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            return
        slot = self.calls.setdefault(index, {"id": None, "type": "function",
                                             "function": {"name": "", "arguments": ""}})
        if get("id"):
            slot["id"] = get("id")
        function = get("function")
        if function is not None:
            for key in ("name", "arguments"):
                piece = getter(function)(key)
                slot["function"][key] += piece if isinstance(piece, str) else ""

    def message(self) -> dict:
        msg: dict = {"role": "assistant", "content": None if self.text is None else "".join(self.text)}
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            msg["refusal"] = "".join(self.refusal)
        if self.calls:
            msg["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return msg

    def body(self) -> dict:
        """The chat completion so far."""
        raw = {**{k: v for k, v in self.head.items() if v is not None}, "object": "chat.completion",
               "choices": [{"index": 0, "message": self.message(), "finish_reason": self.finish_reason}]}
        if self.usage is not None:
            raw["usage"] = self.usage
        return raw


def _listed(value: object) -> list | tuple:
    """A field that should hold a list, as one (a malformed chunk's other value as none)."""
    return value if isinstance(value, list | tuple) else ()


def error_body(status: int, kind: str, message: str) -> dict:
    """An error as the OpenAI SDKs read one (they show `message`); the Responses API's are the same."""
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def auth_headers(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


PROVIDER = Provider(
    api="openai_chat", name=NAME, base_url=BASE_URL, path=PATH, path_suffixes=("/chat/completions",),
    messages=MESSAGES, system=SYSTEM, key_headers=KEY_HEADERS, client_headers=(), key_variables=("OPENAI_API_KEY",),
    usage=usage, unwrap=unwrap, reader_message=reader_message, Stream=Stream, error_body=error_body,
    auth_headers=auth_headers, curl=lambda body, model: curl(body), python_call=PYTHON_CALL)
