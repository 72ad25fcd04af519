"""The server's background summaries (`reasonlog serve --summarize NAME`): a thread that, every `every_s` seconds,
summarises the sessions and exchanges that have no summary, failed before, or grew since.

It runs off the request path and the recording path alike, on the server's own store. Its errors are logged
by type only (never a message that could quote recorded text) and the next pass tries again.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..store import SessionFilter, Store
from ..summaries import Summarizer, runner

log = logging.getLogger("reasonlog")


class BackgroundSummaries:
    """Start with `start()`; `stop()` ends the thread after the pass under way. `passes` counts finished passes."""

    def __init__(self, get_store: Callable[[], Store], make: Callable[[], Summarizer], every_s: float = 60.0):
        if every_s <= 0:
            raise ValueError(f"every_s: expected a positive number of seconds, got {every_s}")
        self._get_store, self._make, self.every_s = get_store, make, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0
        self.last_report: runner.Report | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="reasonlog-summaries", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.every_s)

    def run_once(self) -> None:
        try:
            self.last_report = runner.summarize(self._get_store(), SessionFilter(limit=None), self._make())
        except Exception as exc:  # noqa: BLE001 - the server stays up; the next pass tries again
            log.warning("reasonlog background summaries failed: %s", type(exc).__name__)
        self.passes += 1
