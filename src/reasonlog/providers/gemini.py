"""Gemini `generateContent`: `contents` with `parts`, `system_instruction`, usage whose prompt count includes
cached tokens and whose thoughts come beside the candidates."""
from __future__ import annotations

from typing import Any

from ..model import Usage
from .common import Unwrapped, getter

NAME = "google"
BASE_URL = "https://generativelanguage.googleapis.com"
PATH = "/v1beta/models/{model}:generateContent"
MESSAGES = "contents"
SYSTEM = "system_instruction"
KEY_HEADERS = ("x-goog-api-key",)


def usage(raw: Any) -> Usage:
    """Disjoint counters from `usageMetadata`: cached tokens split off from the prompt; thoughts are output, as
    reasoning."""
    get = getter(raw)
    prompt, cached = get("promptTokenCount") or 0, get("cachedContentTokenCount") or 0
    thoughts = get("thoughtsTokenCount") or 0
    output = (get("candidatesTokenCount") or 0) + thoughts
    return Usage(input_tokens=max(prompt - cached, 0), output_tokens=output, cache_read_tokens=cached,
                 reasoning_tokens=thoughts)


def unwrap(body: dict) -> Unwrapped | None:
    """A generateContent body (its first candidate's content); None for any other body."""
    candidates = body.get("candidates")
    if not (isinstance(candidates, list) and candidates and isinstance(candidates[0], dict)
            and isinstance(candidates[0].get("content"), dict)):
        return None
    raw = body.get("usageMetadata")
    return Unwrapped(candidates[0]["content"], usage(raw) if isinstance(raw, dict) else None,
                     candidates[0].get("finishReason"), body.get("responseId"))


def curl(body: str, model: str = "MODEL") -> str:
    return (f"curl {BASE_URL}{PATH.format(model=model)} -H 'content-type: application/json'"
            f" -H \"x-goog-api-key: $GEMINI_API_KEY\" \\\n  -d {body}")


PYTHON_CALL = "google.genai.Client().models.generate_content"
