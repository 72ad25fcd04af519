"""The shapes of Codex CLI rollout lines across versions: the first versions' bare lines, where a model is
named, and the token counts of `token_count` events.

Checked against: the first Rust rollouts (codex-rs `rollout.rs`, May 2025: a bare `{id, timestamp,
instructions}` line, bare response items, `{"record_type": "state"}` lines); 0.46 (`session_meta`,
`turn_context`, `event_msg`, `response_item`, `compacted`); 0.156 (lines carry an `ordinal`,
`session_meta.base_instructions.text`, `cache_write_input_tokens` in the token counts, and some writers put
the answering `model` in `token_count.info`).
"""
from __future__ import annotations

from typing import Any

from ...model import Usage
from ...wire.rules import RecordError

_COUNTS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
           "reasoning_output_tokens")


def legacy_line(value: Any, last_at: str | None) -> dict | None:
    """A line of the first versions' format, in the `{timestamp, type, payload}` shape of later ones; None when
    it is not one. Their items carry no instant: each is placed at `last_at`, the last instant known."""
    if not isinstance(value, dict) or "payload" in value or "record_type" in value:
        return None
    if "type" not in value and isinstance(value.get("id"), str) and isinstance(value.get("timestamp"), str):
        return {"type": "session_meta", "timestamp": value["timestamp"], "payload": value}
    if last_at is not None and isinstance(value.get("type"), str):
        return {"type": "response_item", "timestamp": last_at, "payload": value}
    return None


def model_of(payload: dict) -> str | None:
    """The model a turn_context, a token_count's `info` or its payload names, if it names one."""
    model = payload.get("model")
    return model if isinstance(model, str) and model.strip() else None


def usage_of(last: dict) -> Usage:
    """A call's usage from `last_token_usage`, as disjoint counters.

    `input_tokens` includes `cached_input_tokens` and `cache_write_input_tokens` (`total_tokens` is input +
    output), and `output_tokens` includes `reasoning_output_tokens`: each token is counted once."""
    for key in _COUNTS:
        value = last.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise RecordError(f"last_token_usage.{key}: expected a non-negative integer, got {value!r}")
    total_in, cached = last.get("input_tokens") or 0, last.get("cached_input_tokens") or 0
    written = min(last.get("cache_write_input_tokens") or 0, max(total_in - cached, 0))
    output, reasoning = last.get("output_tokens") or 0, last.get("reasoning_output_tokens") or 0
    return Usage(input_tokens=max(total_in - cached - written, 0), cache_read_tokens=min(cached, total_in),
                 cache_write_tokens=written, output_tokens=output, reasoning_tokens=min(reasoning, output))
