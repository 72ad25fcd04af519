"""What reasonlog knows of each provider's protocol, in one module each; nothing else spells their field names.

`anthropic` (Messages), `openai_chat` (Chat Completions), `openai_responses` (Responses) and `gemini`
(generateContent). Each says where a request keeps its messages and system prompt, how a response body
unwraps into the assistant message, its usage, stop reason and id, how usage normalises into reasonlog's
disjoint counters, and its endpoint. Pure functions over plain values: capture, the store, readers, importers
and the dashboard ask here. Each module ends with its `PROVIDER` (provider.py), the typed value the others read.
"""
from __future__ import annotations

from . import anthropic, gemini, openai_chat, openai_responses
from .common import Unwrapped
from .provider import Provider, StreamFold

ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, GEMINI = (anthropic.PROVIDER, openai_chat.PROVIDER, openai_responses.PROVIDER,
                                                    gemini.PROVIDER)
# Every protocol, in the order a path or a body is tried against them.
PROTOCOLS: tuple[Provider, ...] = (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, GEMINI)
# Where a request keeps its context, by protocol; the first that holds a list wins (Chat and Messages share one).
MESSAGE_KEYS: tuple[str, ...] = tuple(dict.fromkeys(p.messages for p in PROTOCOLS))
SYSTEM_KEYS: tuple[str, ...] = tuple(dict.fromkeys(p.system for p in PROTOCOLS if p.system))

__all__ = ["ANTHROPIC", "GEMINI", "MESSAGE_KEYS", "OPENAI_CHAT", "OPENAI_RESPONSES", "PROTOCOLS", "STRING_INPUT",
           "SYSTEM_KEYS", "Provider", "StreamFold", "Unwrapped", "context_window", "messages_of", "protocol_of",
           "reader_message", "role_of", "string_message", "system_of", "unwrap", "without_thinking"]


def reader_message(message: object) -> object:
    """A message (or input item, or `contents` entry) as a reader reads it, whichever protocol sent it: what a
    client adds when it sends a reply back, or spells another way, taken out by each protocol's own
    `reader_message` (their shapes do not overlap, so each leaves the others' messages alone)."""
    if not isinstance(message, dict):
        return message
    for protocol in PROTOCOLS:
        message = protocol.reader_message(message)
    return message


# A Responses request may send its input as one string: one user message.
STRING_INPUT = openai_responses.MESSAGES


def string_message(text: str) -> dict:
    """The message a string `input` stands for."""
    return {"role": "user", "content": text}


def messages_of(request: dict) -> list:
    """The messages (or input items, or contents) a request sent; a string `input` as one user message."""
    found = next((request[k] for k in MESSAGE_KEYS if isinstance(request.get(k), list)), None)
    if found is None and isinstance(request.get(STRING_INPUT), str):
        return [string_message(request[STRING_INPUT])]
    return found if found is not None else []


def system_of(request: dict) -> object:
    """The system prompt a request sent outside its messages, or None."""
    return next((request[k] for k in SYSTEM_KEYS if k in request), None)


def unwrap(body: dict) -> Unwrapped | None:
    """A whole response body of any protocol as (message, usage, stop reason, id); None if it is none of them."""
    for protocol in PROTOCOLS:
        found = protocol.unwrap(body)
        if found is not None:
            return found
    return None


def protocol_of(provider: str | None, request: dict | None = None) -> Provider:
    """The protocol a recorded call spoke, from its provider name and the shape of its request."""
    name = (provider or "").lower()
    if name.startswith("anthropic") or name.startswith("claude"):
        return ANTHROPIC
    if name.startswith(("google", "gemini", "vertex")) or (request is not None and GEMINI.messages in request):
        return GEMINI
    if request is not None and isinstance(request.get(OPENAI_RESPONSES.messages), (list, str)) and \
            OPENAI_CHAT.messages not in request:
        return OPENAI_RESPONSES
    return OPENAI_CHAT


def context_window(model: str | None) -> int | None:
    """How many input tokens `model` takes, from the price table's listing of it; None when unknown."""
    if not model:
        return None
    from ..pricing import load_price_table  # the table loads once, when first needed

    return load_price_table().context_window(model)


def without_thinking(message: dict) -> list[dict]:
    """The forms a reply takes when a client sends it back without the reasoning its protocol keeps outside the
    content blocks (Chat's `reasoning_content`, Gemini's thought parts); none when it has no such reasoning."""
    found = (openai_chat.without_thinking(message), gemini.without_thinking(message))
    return [m for m in found if m is not None]


def role_of(message: object) -> str | None:
    """Who a message of any protocol stands for, named as reasonlog names it: Gemini's `model` is `assistant`; a
    Responses item without a role is the model's (a call, reasoning), a tool's (an output) or a setting's."""
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    if role == "model":
        return "assistant"
    if role is None and isinstance(message, dict):
        return openai_responses.item_role(message)
    return role if isinstance(role, str) else None
