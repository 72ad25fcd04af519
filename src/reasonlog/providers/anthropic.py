"""Anthropic Messages: `POST /v1/messages`, `system` beside `messages`, usage whose input excludes the cache."""
from __future__ import annotations

from typing import Any

from ..model import Usage
from .common import Unwrapped, getter

NAME = "anthropic"
BASE_URL = "https://api.anthropic.com"
PATH = "/v1/messages"
MESSAGES = "messages"
SYSTEM = "system"
KEY_HEADERS = ("x-api-key",)


def usage(raw: Any) -> Usage:
    """Disjoint counters from a Messages `usage` (a dict or the SDK's object): `input_tokens` excludes cache reads
    and writes, which come beside it; 1-hour writes are a part of the writes."""
    get = getter(raw)
    write = get("cache_creation_input_tokens") or 0
    split = get("cache_creation")
    write_1h = (getter(split)("ephemeral_1h_input_tokens") or 0) if split else 0
    details = get("output_tokens_details")
    output = get("output_tokens") or 0
    reasoning = (getter(details)("thinking_tokens") or 0) if details else 0
    return Usage(get("input_tokens") or 0, output, get("cache_read_input_tokens") or 0,
                 write if write >= write_1h else write_1h, write_1h, reasoning if reasoning <= output else output)


def unwrap(body: dict) -> Unwrapped | None:
    """A Message body (`type: message` with a role); None for any other body."""
    if body.get("type") != "message" or "role" not in body:
        return None
    raw = body.get("usage")
    return Unwrapped({"role": body["role"], "content": body.get("content")},
                     usage(raw) if isinstance(raw, dict) else None, body.get("stop_reason"), body.get("id"))


def curl(body: str) -> str:
    """A shell command that sends `body` (JSON text, shell-quoted by the caller) again."""
    return (f"curl {BASE_URL}{PATH} -H 'content-type: application/json' -H 'x-api-key: $ANTHROPIC_API_KEY'"
            f" -H 'anthropic-version: 2023-06-01' \\\n  -d {body}")


PYTHON_CALL = "anthropic.Anthropic().messages.create"
