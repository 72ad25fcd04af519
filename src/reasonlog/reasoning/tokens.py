"""Token counts of reasoning records: a real tokenizer when one is installed, a documented estimate otherwise.

`count(text)` gives `(tokens, tokenizer)`. With `tiktoken` installed and its `cl100k_base` encoding already in
tiktoken's cache (`$TIKTOKEN_CACHE_DIR`, else the temp folder's `data-gym-cache`; run
`python -c "import tiktoken; tiktoken.get_encoding('cl100k_base')"` once online to fill it), the count is exact
for that encoding and `tokenizer` is `tiktoken:cl100k_base`. reasonlog never fetches it itself: counting sits
on an agent's critical path and must not wait on a network. Otherwise it is `estimate:chars/4`: one token per four
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


def _tiktoken() -> Any:
    # Asked on every count, not cached: REASONLOG_TOKENIZER=estimate wins even once tiktoken was loaded.
    return None if os.environ.get("REASONLOG_TOKENIZER") == "estimate" else _loaded_tiktoken()


@lru_cache(maxsize=1)
def _loaded_tiktoken() -> Any:
    if not _cached_encoding():
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or a cache file it cannot read: the estimate
        return None


def _cached_encoding() -> bool:
    """Whether tiktoken's cache holds cl100k_base (tiktoken names the file by the SHA-1 of its URL)."""
    import hashlib
    import tempfile

    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        os.path.join(tempfile.gettempdir(), "data-gym-cache")
    name = hashlib.sha1(b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken").hexdigest()
    return os.path.isfile(os.path.join(folder, name))


def _anthropic(text: str) -> tuple[int, str] | None:
    model = os.environ.get("REASONLOG_TOKENIZER_MODEL", "claude-sonnet-4-5")
    try:
        import anthropic

        answer = anthropic.Anthropic(max_retries=1, timeout=10).messages.count_tokens(
            model=model, messages=[{"role": "user", "content": text}])
        return int(answer.input_tokens), f"anthropic:{model}"
    except Exception:  # no key, no network, no SDK: the local counts
        return None
