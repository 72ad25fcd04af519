"""Summaries: short derived text for sessions, exchanges and assistant messages, beside the full text.

A summary is never the only copy of anything: it is computed off the recording path from what the store
holds (`reasonlog summarize`, or `reasonlog serve --summarize`), stored with what made it (summarizer,
model, prompt hash, version) so it can be recomputed when any of those change, and kept as failed with its
error when it could not be made. Two summarizers: `offline` (deterministic, extractive, no network) and
the LLM summarizers in `llm.py` (Anthropic, or any OpenAI-protocol server), whose own calls are recorded
in their own run, `RUN`, so their cost never mixes with the sessions they summarise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .targets import KINDS, Target

__all__ = ["KINDS", "RUN", "Provenance", "Summarizer", "SummaryError", "Target", "make_summarizer"]

RUN = "reasonlog-summaries"  # the run a summarizer's own calls are recorded in; never summarised itself


class SummaryError(Exception):
    """A summary could not be made: the message is stored as the summary's error."""


@dataclass(frozen=True)
class Provenance:
    """What makes a summary: when any of it changes, the stored summary is stale."""

    summarizer: str
    model: str | None
    prompt_hash: str | None
    version: str


class Summarizer(Protocol):
    """The seam every summarizer fills.

    `provenance(target)` says what would make the target's summary (the model may depend on the target's
    session, for "the same model"); `summarize(target)` returns the text or raises `SummaryError` (any other
    exception is recorded as a failure too). `estimate(target)` gives the tokens one call would spend, as
    (input, output), or None when nothing is spent (offline). `close()` flushes whatever it recorded.
    """

    name: str

    def provenance(self, target: Target) -> Provenance: ...
    def summarize(self, target: Target) -> str: ...
    def estimate(self, target: Target) -> tuple[int, int] | None: ...
    def close(self) -> None: ...


def make_summarizer(name: str, *, db: str | None = None, model: str | None = None, base_url: str | None = None,
                    prompt: str | None = None, api_key: str | None = None) -> Summarizer:
    """A summarizer by name: `offline`, `anthropic` or `openai`. `db` is where an LLM summarizer records its calls;
    `model` "same" uses the model that produced each session."""
    if name == "offline":
        from .offline import OfflineSummarizer

        return OfflineSummarizer()
    if name in ("anthropic", "openai"):
        from .llm import LLMSummarizer

        return LLMSummarizer(name, db=db, model=model, base_url=base_url, prompt=prompt, api_key=api_key)
    raise ValueError(f"summarizer: expected offline, anthropic or openai, got {name!r}")
