"""The terms every summarizer and the runner share: the run their own calls go to, the error, what makes a summary,
and the seam a summarizer fills. Apart from the package's `__init__` (which picks a summarizer by name and so
imports them), so that a summarizer never imports the package that imports it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .targets import Target

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
