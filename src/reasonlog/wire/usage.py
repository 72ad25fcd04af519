"""How each provider's wire spells a call's usage, read into reasonlog's disjoint counters (`model.Usage`'s fields):
every token is counted in exactly one of them. `Usage.from_anthropic` / `from_openai` / `from_langchain` build a
`Usage` from these, and the providers' `usage(raw)` is that. No I/O here, and nothing from the rest of reasonlog.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def getter(obj: object):
    """Reads a field of a dict or of an SDK object alike (no dump on the agent's thread)."""
    if isinstance(obj, dict):
        return obj.get
    return lambda name: getattr(obj, name, None)


def first(*values: T | None) -> T | None:
    """The first value that is not None."""
    return next((v for v in values if v is not None), None)


def anthropic(raw: object) -> dict[str, int]:
    """Disjoint counters from a Messages `usage` (a dict or the SDK's object): `input_tokens` excludes cache reads
    and writes, which come beside it; 1-hour writes are a part of the writes."""
    get = getter(raw)
    write = get("cache_creation_input_tokens") or 0
    split = get("cache_creation")
    write_1h = (getter(split)("ephemeral_1h_input_tokens") or 0) if split else 0
    details = get("output_tokens_details")
    output = get("output_tokens") or 0
    reasoning = (getter(details)("thinking_tokens") or 0) if details else 0
    return {"input_tokens": get("input_tokens") or 0, "output_tokens": output,
            "cache_read_tokens": get("cache_read_input_tokens") or 0,
            "cache_write_tokens": write if write >= write_1h else write_1h, "cache_write_1h_tokens": write_1h,
            "reasoning_tokens": reasoning if reasoning <= output else output}


def openai(raw: object) -> dict[str, int]:
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
    return {"input_tokens": max(prompt - cached - written, 0), "output_tokens": completion,
            "cache_read_tokens": cached, "cache_write_tokens": written, "reasoning_tokens": min(reasoning, completion)}


def langchain(usage: Mapping[str, Any]) -> dict[str, int]:
    """Disjoint counters from LangChain's `UsageMetadata`, whose input tokens include cache reads and writes."""
    details, out_details = usage.get("input_token_details") or {}, usage.get("output_token_details") or {}
    prompt = usage.get("input_tokens") or 0
    read, write = details.get("cache_read") or 0, details.get("cache_creation") or 0
    write_1h, reasoning = details.get("ephemeral_1h_input_tokens") or 0, out_details.get("reasoning") or 0
    output = with_reasoning(usage.get("output_tokens") or 0, reasoning, prompt, usage.get("total_tokens"))
    return {"input_tokens": max(prompt - read - write, 0), "output_tokens": output, "cache_read_tokens": read,
            "cache_write_tokens": max(write, write_1h), "cache_write_1h_tokens": write_1h,
            "reasoning_tokens": min(reasoning, output)}


def with_reasoning(output: int, reasoning: int, prompt: int, total: int | None) -> int:
    """Output tokens including reasoning exactly once. Servers that speak this protocol disagree: OpenAI and
    DeepSeek count reasoning inside the completion tokens, xAI beside them; the total tells which one did."""
    if total is not None and reasoning and total == prompt + output + reasoning:
        return output + reasoning
    return output
