"""OpenAI Chat Completions (and the servers that speak it): `POST /v1/chat/completions`, the system prompt a
message, usage whose prompt tokens include cached ones."""
from __future__ import annotations

from typing import Any

from ..model import Usage
from .common import Unwrapped, first, getter

NAME = "openai"
BASE_URL = "https://api.openai.com"
PATH = "/v1/chat/completions"
MESSAGES = "messages"
SYSTEM = None  # a message with role system (or developer)
KEY_HEADERS = ("authorization",)


def usage(raw: Any) -> Usage:
    """Disjoint counters from Chat (`prompt_tokens`) or Responses (`input_tokens`) usage, a dict or an SDK object:
    cached tokens split off from input; reasoning counted inside output exactly once."""
    get = getter(raw)
    prompt = first(get("prompt_tokens"), get("input_tokens")) or 0
    completion = first(get("completion_tokens"), get("output_tokens")) or 0
    in_details = get("prompt_tokens_details") or get("input_tokens_details")
    out_details = get("completion_tokens_details") or get("output_tokens_details")
    # DeepSeek reports cache hits beside prompt_tokens, without prompt_tokens_details.
    cached = (getter(in_details)("cached_tokens") or 0) if in_details else get("prompt_cache_hit_tokens") or 0
    written = (getter(in_details)("cache_write_tokens") or 0) if in_details else 0
    reasoning = (getter(out_details)("reasoning_tokens") or 0) if out_details else 0
    completion = with_reasoning(completion, reasoning, prompt, get("total_tokens"))
    return Usage(input_tokens=max(prompt - cached - written, 0), output_tokens=completion, cache_read_tokens=cached,
                 cache_write_tokens=written, reasoning_tokens=min(reasoning, completion))


def with_reasoning(output: int, reasoning: int, prompt: int, total: int | None) -> int:
    """Output tokens including reasoning exactly once. Servers that speak this protocol disagree: OpenAI and
    DeepSeek count reasoning inside the completion tokens, xAI beside them; the total tells which one did."""
    if total is not None and reasoning and total == prompt + output + reasoning:
        return output + reasoning
    return output


def unwrap(body: dict) -> Unwrapped | None:
    """A chat completion (its first choice's message); None for any other body."""
    choices = body.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict) and "message" in choices[0]):
        return None
    raw = body.get("usage")
    return Unwrapped(choices[0]["message"], usage(raw) if isinstance(raw, dict) else None,
                     choices[0].get("finish_reason"), body.get("id"))


def curl(body: str) -> str:
    return (f"curl {BASE_URL}{PATH} -H 'content-type: application/json' -H \"Authorization: Bearer $OPENAI_API_KEY\""
            f" \\\n  -d {body}")


PYTHON_CALL = "openai.OpenAI().chat.completions.create"
