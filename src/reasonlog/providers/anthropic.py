"""Anthropic Messages: `POST /v1/messages`, `system` beside `messages`, usage whose input excludes the cache."""
from __future__ import annotations

import json
from typing import Any

from ..model import Usage
from ..wire.usage import getter
from .common import Unwrapped, dump
from .provider import Provider

NAME = "anthropic"
BASE_URL = "https://api.anthropic.com"
PATH = "/v1/messages"
MESSAGES = "messages"
SYSTEM = "system"
KEY_HEADERS = ("x-api-key",)


def usage(raw: object) -> Usage:
    """Disjoint counters from a Messages `usage` (a dict or the SDK's object): see `wire/usage.py`."""
    return Usage.from_anthropic(raw)


def unwrap(body: dict) -> Unwrapped | None:
    """A Message body (`type: message` with a role); None for any other body."""
    if body.get("type") != "message" or "role" not in body:
        return None
    raw = body.get("usage")
    return Unwrapped({"role": body["role"], "content": body.get("content")},
                     usage(raw) if isinstance(raw, dict) else None, body.get("stop_reason"), body.get("id"))


def reader_message(message: dict) -> dict:
    """A message as a reader reads it: Claude Code sends its replies back as they came (`cache_control`, which
    moves, is left out for every protocol by `conversation.reader_form`)."""
    return message


def curl(body: str) -> str:
    """A shell command that sends `body` (JSON text, shell-quoted by the caller) again."""
    return (f"curl {BASE_URL}{PATH} -H 'content-type: application/json' -H 'x-api-key: $ANTHROPIC_API_KEY'"
            f" -H 'anthropic-version: 2023-06-01' \\\n  -d {body}")


PYTHON_CALL = "anthropic.Anthropic().messages.create"


# ---------------------------------------------------------------------- streams


class Stream:
    """Folds Messages stream events (dicts as sent, or the SDK's event objects) into the Message the same call
    would have returned unstreamed.

    `add` says whether the event carried output (the first such is the first token). A `message_delta`'s usage
    counts are running totals that overwrite, and a count it leaves out keeps its `message_start` value, as the
    SDK's own accumulation does.
    """

    def __init__(self) -> None:
        self.message: dict | None = None
        self.json_parts: dict[int, list[str]] = {}
        self.ended = False

    def add(self, event: object) -> bool:
        get = getter(event)
        kind = get("type")
        if kind == "content_block_delta":
            self._delta(get("index"), get("delta"))
            return True
        if kind == "content_block_start" and self.message is not None:
            block = dump(get("content_block"))
            self.message["content"].append(block if isinstance(block, dict) else {})
            return True
        if kind == "message_start":
            message = dump(get("message"))
            self.message = {**(message if isinstance(message, dict) else {}), "content": []}
        elif kind == "message_delta" and self.message is not None:
            self._message_delta(dump(get("delta")) or {}, dump(get("usage")) or {})
        elif kind == "content_block_stop":
            self._parse_input(get("index"))
        elif kind == "message_stop":
            self.ended = True
        return False

    def _delta(self, index: int, delta: object) -> None:
        if self.message is None or not isinstance(index, int) or not 0 <= index < len(self.message["content"]):
            return
        get = getter(delta)
        block, kind = self.message["content"][index], get("type")
        if kind in ("text_delta", "thinking_delta"):
            key = kind.removesuffix("_delta")
            piece, before = get(key), block.get(key)
            block[key] = (before if isinstance(before, str) else "") + (piece if isinstance(piece, str) else "")
        elif kind == "signature_delta":
            block["signature"] = get("signature")
        elif kind == "input_json_delta" and isinstance(get("partial_json"), str):
            self.json_parts.setdefault(index, []).append(get("partial_json"))
        elif kind == "citations_delta" and isinstance(block.setdefault("citations", []), list):
            block["citations"].append(dump(get("citation")))

    def _parse_input(self, index: Any) -> None:
        text = "".join(self.json_parts.pop(index, ()))
        if text and self.message is not None and isinstance(index, int) and 0 <= index < len(self.message["content"]):
            self.message["content"][index]["input"] = _parse_json(text)

    def _message_delta(self, delta: dict, usage: dict) -> None:
        message = self.message
        assert message is not None
        message.update({k: v for k, v in delta.items() if v is not None or k.startswith("stop_")})
        counts = message["usage"] = message["usage"] if isinstance(message.get("usage"), dict) else {}
        counts.update({k: v for k, v in usage.items() if v is not None})

    def body(self) -> dict | None:
        """The Message so far (whole once the stream ended); None before `message_start`."""
        for index in list(self.json_parts):
            self._parse_input(index)
        return self.message


def _parse_json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:  # cut off mid-way: keep what arrived, parsed as far as it goes, as the SDK does
        try:
            from jiter import from_json  # a dependency of the anthropic SDK, present wherever its streams are
        except ImportError:
            return {}
        try:
            return from_json(text.encode(), partial_mode=True)
        except ValueError:
            return {}


def error_body(status: int, kind: str, message: str) -> dict:
    """An error as the Anthropic SDKs read one (they show `message`)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def auth_headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


PROVIDER = Provider(
    api="anthropic", name=NAME, base_url=BASE_URL, path=PATH, path_suffixes=("/messages",), messages=MESSAGES,
    system=SYSTEM, key_headers=KEY_HEADERS, client_headers=("x-api-key", "anthropic-version"),
    key_variables=("ANTHROPIC_API_KEY",), usage=usage, unwrap=unwrap, reader_message=reader_message, Stream=Stream,
    error_body=error_body, auth_headers=auth_headers, curl=lambda body, model: curl(body), python_call=PYTHON_CALL)
