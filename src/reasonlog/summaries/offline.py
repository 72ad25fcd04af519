"""The offline summarizer: deterministic, extractive, no network, within a length limit.

It names what was done rather than paraphrasing what was said: the outcomes linked to the target (a trade
reads "bought 10 NVDA at 189.60"), the tools called (with how many failed), the model calls and how many
failed, and the opening words of the last thing the assistant said. Sentences come in that order of
importance; one that does not fit is shortened (a list says how many items it left out) or left off.
The same target always gives the same text.
"""
from __future__ import annotations

import re
from collections import Counter

from .targets import Target, ToolCall, clip, describe_outcome, message_text
from .terms import Provenance

VERSION = "offline-1"
LIMIT = 400  # characters
_TAG = re.compile(r"</?[A-Z][A-Z0-9_]*>")  # <FINISH_SIGNAL> and the like: signals to a harness, not words
_MARKUP = re.compile(r"(^|\s)(#+|[-*>]|\d+\.)\s+|\*\*|__|`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


class OfflineSummarizer:
    """Extractive summaries made from the store alone. `limit`: at most this many characters."""

    name = "offline"

    def __init__(self, limit: int = LIMIT):
        if limit < 80:
            raise ValueError(f"limit: expected at least 80 characters, got {limit}")
        self.limit = limit

    def provenance(self, target: Target) -> Provenance:
        return Provenance(self.name, None, None, f"{VERSION}/{self.limit}")

    def estimate(self, target: Target) -> tuple[int, int] | None:
        return None

    def close(self) -> None:
        pass

    def summarize(self, target: Target) -> str:
        """The target's summary: outcomes, tools, calls, then the assistant's last words, in `limit` characters."""
        sentences = [_outcomes(target, self.limit * 3 // 5), _tools(target.tool_calls), _calls(target),
                     _asked(target)]
        text = ""
        for sentence in filter(None, sentences):
            if len(text) + 1 + len(sentence) <= self.limit:
                text = f"{text} {sentence}".strip()
        said = _said(target)
        room = self.limit - len(text) - (1 if text else 0)
        if said and room >= 40:
            text = f"{text} {clip(said, room)}".strip()
        return text or _nothing(target)


def _outcomes(target: Target, budget: int) -> str:
    if not target.outcomes:
        return ""
    items = [describe_outcome(o) for o in target.outcomes]
    head = "Outcome: " if len(items) == 1 else f"{len(items)} outcomes: "
    shown: list[str] = []
    for n, item in enumerate(items):
        rest = len(items) - n - 1
        more = f", and {rest} more" if rest else ""
        if len(head) + len(", ".join([*shown, item])) + len(more) + 1 > budget and shown:
            return f"{head}{', '.join(shown)}, and {len(items) - n} more."
        shown.append(item)
    return f"{head}{', '.join(shown)}."


def _tools(calls: list[ToolCall]) -> str:
    if not calls:
        return ""
    counts = Counter(c.name for c in calls)
    failed = Counter(c.name for c in calls if c.failed)
    parts = []
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        times = f" ×{n}" if n > 1 else ""
        fails = f" ({failed[name]} failed)" if failed[name] else ""
        parts.append(f"{name}{times}{fails}")
    return f"Tools: {', '.join(parts)}."


def _calls(target: Target) -> str:
    if target.kind == "message" or not target.calls:
        return ""
    failed = f", {target.failed_calls} failed" if target.failed_calls else ""
    return f"{target.calls} model call{'s' if target.calls != 1 else ''}{failed}."


def _asked(target: Target) -> str:
    if target.kind != "exchange" or not isinstance(target.input, str):
        return ""
    lead = _lead(target.input)
    return f"Asked: {clip(lead, 120)}" if lead else ""


def _said(target: Target) -> str:
    """The opening sentence of the assistant's last words in the target."""
    for m in reversed(target.messages):
        if m["role"] == "assistant":
            lead = _lead(message_text(m))
            if lead:
                return f"Said: {lead}" if target.kind != "message" else lead
    return ""


def _lead(text: str) -> str:
    plain = _MARKUP.sub(r"\1", _TAG.sub("", text))
    for chunk in _SENTENCE_END.split(plain):
        words = " ".join(chunk.split())
        if len(words) > 1:
            return words
    return ""


def _nothing(target: Target) -> str:
    return f"No assistant text, tool calls or outcomes in this {target.kind}."
