"""The neutral form a request passes through when it changes protocol (see translate.py): system texts,
messages as parts, tools, the parameters every provider shares, and the notices of what was left behind."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..parts import Part


@dataclass
class Conversation:
    """A request in neutral form: system texts, messages as (role, parts), tools, and shared parameters."""

    system: list[str] = field(default_factory=list)
    messages: list[tuple[str, list[Part]]] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)  # {"name", "description", "schema"}
    params: dict[str, Any] = field(default_factory=dict)  # max_tokens, temperature, top_p, stop, tool_choice
    notices: Counter = field(default_factory=Counter)

    def drop(self, what: str, count: int = 1) -> None:
        """Name something the translated request leaves out (counted: the notice says how often)."""
        self.notices[what] += count


def arguments_text(value: object) -> str:
    """Tool arguments as OpenAI sends them: JSON text (a recorded string that was not JSON stays as it was)."""
    return value if isinstance(value, str) else orjson.dumps(value if value is not None else {}).decode()


def arguments_object(value: object) -> dict:
    """Tool arguments as Anthropic and Gemini take them: an object (any other value under `arguments`)."""
    return value if isinstance(value, dict) else {} if value is None else {"arguments": value}


def name_untranslatable(conv: Conversation, part: Part, target: str) -> None:
    """Name a part the target protocol has no place for."""
    if part.kind == "thinking":
        signed = " and its signature" if part.extra.get("signature") else ""
        conv.drop(f"thinking block{signed} (the {target} protocol takes no earlier reasoning)")
    elif part.kind == "redacted_thinking":
        conv.drop(f"redacted_thinking block (encrypted for Anthropic only; not sent to {target})")
    elif part.kind == "image":
        conv.drop(f"image block (not translated to {target})")
    else:
        conv.drop(f"{part.name or part.kind} block (a provider-only block; not sent to {target})")
