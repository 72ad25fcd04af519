"""Token counts of reasoning records: a real tokenizer when one is installed, a documented estimate otherwise.

`count(text)` gives `(tokens, tokenizer)`. With `tiktoken` installed and its `cl100k_base` encoding at hand
(tiktoken fetches it once and caches it; offline and never fetched, it is absent), the count is exact for that
encoding and `tokenizer` is `tiktoken:cl100k_base`. Otherwise it is `estimate:chars/4`: one token per four
characters, rounded up, plus one per run of non-ASCII characters' worth of bytes over four (CJK text runs
about a token a character). With `REASONLOG_TOKENIZER=anthropic` and an `ANTHROPIC_API_KEY`, Anthropic's
count-tokens endpoint is asked (`tokenizer` is `anthropic:<model>`), falling back to the rest on failure.
"""
from __future__ import annotations

import math
import os
from functools import lru_cache
from typing import Any

ESTIMATE = "estimate:chars/4"


def count(text: str) -> tuple[int, str]:
    if not text:
        return 0, ESTIMATE
    if os.environ.get("REASONLOG_TOKENIZER") == "anthropic":
        counted = _anthropic(text)
        if counted is not None:
            return counted
    encoding = _tiktoken()
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=())), "tiktoken:cl100k_base"
    return estimate(text), ESTIMATE


def estimate(text: str) -> int:
    """ceil(chars / 4), but never fewer than a token per non-ASCII character past the first four bytes' worth."""
    wide = sum(1 for c in text if ord(c) > 0x2E7F)  # CJK and beyond: about a token each
    return max(math.ceil(len(text) / 4), wide)


@lru_cache(maxsize=1)
def _tiktoken() -> Any:
    if os.environ.get("REASONLOG_TOKENIZER") == "estimate":
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or its encoding cannot be fetched (offline): the estimate
        return None


def _anthropic(text: str) -> tuple[int, str] | None:
    model = os.environ.get("REASONLOG_TOKENIZER_MODEL", "claude-sonnet-4-5")
    try:
        import anthropic

        answer = anthropic.Anthropic(max_retries=1, timeout=10).messages.count_tokens(
            model=model, messages=[{"role": "user", "content": text}])
        return int(answer.input_tokens), f"anthropic:{model}"
    except Exception:  # no key, no network, no SDK: the local counts
        return None
