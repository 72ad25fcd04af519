"""Summaries: short derived text for sessions, exchanges and assistant messages, beside the full text.

A summary is never the only copy of anything: it is computed off the recording path from what the store
holds (`reasonlog summarize`, or `reasonlog serve --summarize`), stored with what made it (summarizer,
model, prompt hash, version) so it can be recomputed when any of those change, and kept as failed with its
error when it could not be made. Two summarizers: `offline` (deterministic, extractive, no network) and
the LLM summarizers in `llm.py` (Anthropic, or any OpenAI-protocol server), whose own calls are recorded
in their own run, `RUN`, so their cost never mixes with the sessions they summarise.
"""
from __future__ import annotations

from .targets import KINDS, Target
from .terms import RUN, Provenance, Summarizer, SummaryError

__all__ = ["KINDS", "RUN", "Provenance", "Summarizer", "SummaryError", "Target", "make_summarizer"]


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
