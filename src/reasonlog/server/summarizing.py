"""The server's background summaries (`reasonlog serve --summarize NAME`): a thread that, every `every_s` seconds,
summarises the sessions and exchanges that have no summary, failed before, or grew since.

It runs off the request path and the recording path alike, on the server's own store. Its errors are logged
by type only (never a message that could quote recorded text) and the next pass tries again.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from ..store import SessionFilter, Store
from ..summaries import Summarizer, runner
from .periodic import Periodic

log = logging.getLogger("reasonlog")


class BackgroundSummaries(Periodic):
    """Start with `start()`; `stop()` ends the thread after the pass under way. `passes` counts finished passes."""

    name = "reasonlog-summaries"

    def __init__(self, get_store: Callable[[], Store], make: Callable[[], Summarizer], every_s: float = 60.0):
        super().__init__(every_s)
        self._get_store, self._make = get_store, make
        self.last_report: runner.Report | None = None

    def run_pass(self) -> None:
        try:
            self.last_report = runner.summarize(self._get_store(), SessionFilter(limit=None), self._make())
        except Exception as exc:  # noqa: BLE001 - the server stays up; the next pass tries again
            log.warning("reasonlog background summaries failed: %s", type(exc).__name__)
