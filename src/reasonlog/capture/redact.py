"""Redaction: secrets are masked before anything reaches the database, a spill file or a log line.

Patterns run over serialised JSON. None of them can match a quote or a backslash, except the
private-key block, which spans escaped newlines inside one string. So a masked document stays
valid JSON. Only content the store has not seen before is scanned: resent history costs nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

# Key formats published by each provider; the lengths keep ordinary words from matching.
# Each default pattern needs one of LITERALS to match: a substring test (fast, in C) over the
# bytes decides whether the regex (slow, in Python's engine) runs at all.
LITERALS = (b"sk-", b"AIza", b"AKIA", b"ASIA", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_",
            b"xox", b"hf_", b"gsk_", b"xai-", b"k_live_", b"k_test_", b"eyJ", b"earer", b"EARER", b"PRIVATE KEY")
DEFAULT_PATTERNS: dict[str, str] = {
    "anthropic_key": r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_key": r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "google_api_key": r"AIza[0-9A-Za-z_\-]{35}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    "huggingface_token": r"\bhf_[A-Za-z0-9]{30,}",
    "groq_key": r"\bgsk_[A-Za-z0-9]{20,}",
    "xai_key": r"\bxai-[A-Za-z0-9]{20,}",
    "stripe_key": r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    "jwt": r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
    "bearer_token": r"\b(?i:bearer)\s+[A-Za-z0-9\-._~+/]{16,}=*",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
}


@dataclass
class Redactor:
    """Masks every match of its patterns with `[REDACTED:<name>]` and counts what it masked."""

    patterns: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PATTERNS))
    masked: int = 0
    literals: tuple[bytes, ...] | None = LITERALS  # None: the user's patterns need the regex on everything

    def __post_init__(self) -> None:
        for name, pattern in self.patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redaction pattern {name!r}: {exc}") from None
        combined = "|".join(f"(?P<{_group(name)}>{p})" for name, p in self.patterns.items())
        self._text = re.compile(combined, re.DOTALL)
        self._bytes = re.compile(combined.encode(), re.DOTALL)
        self._names = {_group(name): name for name in self.patterns}

    @classmethod
    def with_extra(cls, extra: Iterable[str] | dict[str, str] = ()) -> "Redactor":
        """The default patterns plus the user's own (a list of regexes or a name -> regex dict)."""
        patterns = dict(DEFAULT_PATTERNS)
        items = extra.items() if isinstance(extra, dict) else ((f"custom_{i}", p) for i, p in enumerate(extra))
        patterns.update(items)
        return cls(patterns, literals=None)

    def bytes(self, data: bytes) -> bytes:
        """Mask secrets in serialised bytes (JSON or text)."""
        if self.literals is not None and not any(lit in data for lit in self.literals):
            return data
        if not self._bytes.search(data):
            return data
        return self._bytes.sub(self._bytes_mask, data)

    def text(self, text: str) -> str:
        """Mask secrets in a string (log lines, error messages)."""
        if not self._text.search(text):
            return text
        return self._text.sub(self._text_mask, text)

    def _bytes_mask(self, match: re.Match) -> bytes:
        self.masked += 1
        return f"[REDACTED:{self._names[match.lastgroup]}]".encode()

    def _text_mask(self, match: re.Match) -> str:
        self.masked += 1
        return f"[REDACTED:{self._names[match.lastgroup]}]"


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)
