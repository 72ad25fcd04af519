"""Two answers to the same request set side by side: tools chosen and their arguments, stop reason, text
similarity, tokens, cost and latency; per call and in total over a session.

Text similarity is difflib's ratio over the two texts' words (2 x matching words / all words, from 0 to 1; two
empty texts are 1.0): a measure of shared wording, not of meaning.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..parts import parts_of
from ..providers.translate import stop_kind

TOKEN_FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


@dataclass(frozen=True)
class Answer:
    """What a model answered, as a reader compares it; built from a stored call's dict (store.get_call)."""

    model: str | None
    text: str
    tools: list[dict]  # {"name", "arguments"} in the order called
    stop_reason: str | None
    tokens: dict[str, int | None]
    cost_usd: float | None
    latency_ms: float | None
    error: str | None

    @classmethod
    def of_call(cls, call: Mapping[str, Any]) -> Answer:
        parts = parts_of(call.get("response")) if call.get("response") is not None else []
        error = call.get("error")
        message = (error.get("message") or str(error)) if isinstance(error, dict) else error
        return cls(call.get("model"), "\n".join(p.text for p in parts if p.kind == "text"),
                   [{"name": p.name, "arguments": p.input} for p in parts if p.kind == "tool_use"],
                   call.get("stop_reason"), {k: call.get(k) for k in TOKEN_FIELDS}, _usd(call.get("cost_usd")),
                   _ms(call.get("latency_ms")), message)

    def stop_kind(self) -> str | None:
        return stop_kind(self.stop_reason, bool(self.tools))

    def to_dict(self) -> dict:
        return {"model": self.model, "text": self.text, "tools": self.tools, "stop_reason": self.stop_reason,
                "tokens": self.tokens, "cost_usd": self.cost_usd, "latency_ms": self.latency_ms, "error": self.error}


def similarity(a: str, b: str) -> float:
    """Word-level difflib ratio, rounded to three places (see the module's docstring)."""
    words_a, words_b = a.split(), b.split()
    if not words_a and not words_b:
        return 1.0
    return round(difflib.SequenceMatcher(None, words_a, words_b, autojunk=False).ratio(), 3)


def text_diff(a: str, b: str) -> list[str]:
    """The replayed text against the original as unified-diff lines (without the file header)."""
    return list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=1))[2:]


def compare(original: Answer, replayed: Answer) -> dict:
    """One call's comparison: the facts a reader checks first, then both answers whole."""
    answered = original.error is None and replayed.error is None  # a failed call is like no other answer
    same_tools = answered and [t["name"] for t in original.tools] == [t["name"] for t in replayed.tools]
    return {"same_tool": same_tools, "same_arguments": same_tools and original.tools == replayed.tools,
            "same_stop_reason": answered and original.stop_kind() == replayed.stop_kind(),
            "stop_reasons": [original.stop_kind(), replayed.stop_kind()],
            "text_similarity": similarity(original.text, replayed.text) if answered else None,
            "text_diff": text_diff(original.text, replayed.text),
            "cost_usd": [original.cost_usd, replayed.cost_usd],
            "latency_ms": [original.latency_ms, replayed.latency_ms],
            "original": original.to_dict(), "replay": replayed.to_dict()}


def totals(rows: list[dict]) -> dict:
    """Counts and sums over a session's comparisons. `errors`: replayed calls that failed; the mean similarity is
    over the calls both answered; costs and latencies add up what is known (None: nothing is)."""
    answered = [r for r in rows if r["replay"]["error"] is None]
    compared = [r["text_similarity"] for r in rows if r["text_similarity"] is not None]
    return {"calls": len(rows), "errors": len(rows) - len(answered),
            **{key: sum(1 for r in answered if r[key]) for key in ("same_tool", "same_arguments", "same_stop_reason")},
            "mean_text_similarity": round(sum(compared) / len(compared), 4) if compared else None,
            "cost_usd": [_sum(r["cost_usd"][0] for r in rows), _sum(r["cost_usd"][1] for r in rows)],
            "latency_ms": [_sum(r["latency_ms"][0] for r in rows), _sum(r["latency_ms"][1] for r in rows)]}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _usd(value: float | None) -> float | None:
    """Dollars to the nano-dollar: a sum of per-token prices carries binary noise past that."""
    return None if value is None else round(value, 9)


def _sum(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 9) if known else None  # dollars to the nano-dollar; milliseconds as they are
