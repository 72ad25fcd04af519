"""Redaction: secrets are masked before anything reaches the database, a spill file or a log line.

Patterns run over serialised JSON and over plain strings (identifiers, log lines) alike. None of
them can match a quote, and a backslash only as part of a whole escape (the private-key block and a
bearer token span escaped newlines inside one string). So a masked document stays valid JSON, and a
string masks the same alone as inside JSON: ids stay equal wherever they are referenced. Only
content the store has not seen before is scanned: resent history costs nothing.
"""
from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# A token counts only where it stands on its own. Before it: nothing, or a character outside
# base64's alphabets (standard and URL-safe), or a JSON escape (`\n`, `\t`, `\"`, `\u001b`: patterns
# run over serialised JSON, where a newline is the two characters `\` `n`). After it: nothing or a
# character outside those alphabets. So a prefix that happens to occur inside an image's base64
# data is never masked (exact replay), while a key after a newline, a quote, `=` or `:` always is.
# Lengths are bounded so that a URL-safe base64 string which starts with a prefix is not taken whole.
_B64 = r"A-Za-z0-9+/_\-"
BEFORE = rf"(?:(?<![{_B64}])|(?<=\\[nrtbf\"\\])|(?<=\\u[0-9A-Fa-f]{{4}}))"
AFTER = rf"(?![{_B64}])"
MAX = 256  # longer than any provider's key; a run this long is data, not a key


def token(body: str) -> str:
    """`body` as a whole token: bounded on both sides (see BEFORE and AFTER)."""
    return BEFORE + body + AFTER


# Key formats published by each provider; the lengths keep ordinary words from matching.
# Each default pattern needs one of LITERALS to match: a substring test (fast, in C) over the
# bytes decides whether the regex (slow, in Python's engine) runs at all.
LITERALS = (b"sk-", b"AIza", b"AKIA", b"ASIA", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_",
            b"xox", b"hf_", b"gsk_", b"xai-", b"k_live_", b"k_test_", b"eyJ", b"earer", b"EARER", b"PRIVATE KEY")
DEFAULT_PATTERNS: dict[str, str] = {
    "anthropic_key": token(rf"sk-ant-[A-Za-z0-9_\-]{{20,{MAX}}}"),
    "openai_key": token(rf"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{{20,{MAX}}}"),
    "google_api_key": token(r"AIza[0-9A-Za-z_\-]{35}"),
    "aws_access_key": token(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    "github_token": token(rf"(?:gh[pousr]_[A-Za-z0-9]{{36,{MAX}}}|github_pat_[A-Za-z0-9_]{{22,{MAX}}})"),
    "slack_token": token(rf"xox[abprs]-[A-Za-z0-9\-]{{10,{MAX}}}"),
    "huggingface_token": token(rf"hf_[A-Za-z0-9]{{30,{MAX}}}"),
    "groq_key": token(rf"gsk_[A-Za-z0-9]{{20,{MAX}}}"),
    "xai_key": token(rf"xai-[A-Za-z0-9]{{20,{MAX}}}"),
    "stripe_key": token(rf"[rs]k_(?:live|test)_[A-Za-z0-9]{{16,{MAX}}}"),
    # Dots and whitespace never occur in base64, so these two cannot match inside it at any length.
    "jwt": token(r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    "bearer_token": BEFORE + r"(?i:bearer)(?:\s|\\[nrt])+[A-Za-z0-9\-._~+/]{16,}=*" + AFTER,
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
}
# The first character of every default pattern. Python's engine tries each alternative at each
# position; one class test in front rejects most positions at once (4x faster on workload text).
STARTS = r"(?=[sAgxhreBb\-])"


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
        combined = _combine(self.patterns)
        # Strings are mostly short identifiers: one regex call beats twenty substring tests there.
        self._text_literals = None if self.literals is None else re.compile(
            "|".join(re.escape(lit.decode()) for lit in self.literals))
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
        """Mask secrets in a string (an identifier, a log line, an error message)."""
        if self._text_literals is not None and not self._text_literals.search(text):
            return text
        if not self._text.search(text):
            return text
        return self._text.sub(self._text_mask, text)

    def _bytes_mask(self, match: re.Match) -> builtins.bytes:  # `bytes` is the method above, in here
        return self._text_mask(match).encode()

    def _text_mask(self, match: re.Match) -> str:
        self.masked += 1
        return f"[REDACTED:{self._names[match.lastgroup or '']}]"


def _combine(patterns: dict[str, str]) -> str:
    """One regex of named groups; the default patterns go first, behind their STARTS test."""
    known = [f"(?P<{_group(n)}>{p})" for n, p in patterns.items() if DEFAULT_PATTERNS.get(n) == p]
    other = [f"(?P<{_group(n)}>{p})" for n, p in patterns.items() if DEFAULT_PATTERNS.get(n) != p]
    return "|".join(([f"{STARTS}(?:{'|'.join(known)})"] if known else []) + other)


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)
