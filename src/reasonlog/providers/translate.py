"""A request recorded in one provider's protocol, written in another's: Anthropic Messages, OpenAI Chat
Completions and Gemini generateContent, through the parts reasonlog reads every message into (parts.py).

What the target protocol has no place for (Anthropic's server tools, thinking and its signatures, cache_control
marks, parameters only one provider takes) is left out of the translated request and *named* in its `notices`,
so a caller can show the user what the other model did not see. Nothing is dropped silently.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import anthropic, gemini, openai_chat
from .provider import Provider
from .translate_read import read_anthropic, read_gemini, read_openai
from .translate_write import write_anthropic, write_gemini, write_openai

READERS = {anthropic.NAME: read_anthropic, openai_chat.NAME: read_openai, gemini.NAME: read_gemini}
WRITERS = {anthropic.NAME: write_anthropic, openai_chat.NAME: write_openai, gemini.NAME: write_gemini}
TARGETS = {"anthropic": anthropic.PROVIDER, "openai": openai_chat.PROVIDER, "gemini": gemini.PROVIDER}  # --provider

# Each protocol's stop reasons in one vocabulary, so answers from two providers compare.
STOP_KINDS = {"end_turn": "end", "stop": "end", "STOP": "end", "stop_sequence": "end", "tool_use": "tool",
              "tool_calls": "tool", "function_call": "tool", "max_tokens": "length", "length": "length",
              "MAX_TOKENS": "length", "refusal": "refused", "content_filter": "refused", "SAFETY": "refused",
              "pause_turn": "paused"}


@dataclass(frozen=True)
class Translated:
    request: dict
    notices: list[str]  # what the target protocol could not carry, each named once


def translate_request(request: dict, source: Provider, target: Provider, model: str | None = None) -> Translated:
    """`request`, recorded in `source`'s protocol, in `target`'s (for `model`, else the recorded model)."""
    if source.name not in READERS:
        raise ValueError(f"cannot translate a request of the {source.api} protocol;"
                         " expected Anthropic Messages, OpenAI Chat Completions or Gemini generateContent")
    conversation = READERS[source.name](request)
    written = WRITERS[target.name](conversation, model or request.get("model"))
    return Translated(written, list(conversation.notices))


def stop_kind(reason: str | None, called_tools: bool) -> str | None:
    """A stop reason in one vocabulary (end, tool, length, refused, paused; others as they are). Gemini says STOP
    when it calls a function, so a reply that called tools stopped for them."""
    kind = STOP_KINDS.get(reason, reason) if reason is not None else None
    return "tool" if called_tools and kind == "end" else kind
