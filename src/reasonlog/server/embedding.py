"""The server's background embedding (`reasonlog serve`, unless --no-embed): a thread that, every `every_s` seconds,
works off the search-by-meaning backlog (reasonlog.semantic.backlog) on the server's own store.

Off the request path and the recording path alike: ingestion writes events, this thread embeds what they hold
later, committing a batch at a time. A pass that runs long says how it goes on standard error (texts done of the
total, the rate, the time left) every `progress_every_s` seconds, and once more when it ends.
Its errors are logged by type and first line (an embeddings server's error names its URL, never recorded text)
and the next pass tries again.
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from ..semantic import Embedder
from ..semantic.backlog import Pass, Ticker, embed_backlog
from ..store import Store
from .periodic import Periodic

log = logging.getLogger("reasonlog")


class BackgroundEmbedding(Periodic):
    """Start with `start()`; `stop()` ends the thread after the batch under way. `passes` counts finished passes."""

    name = "reasonlog-embedding"

    def __init__(self, get_store: Callable[[], Store], make: Callable[[], Embedder], every_s: float = 30.0,
                 progress_every_s: float = 30.0, say: Callable[[str], None] | None = None):
        super().__init__(every_s)
        self._get_store, self._make = get_store, make
        self._progress_every_s, self._say = progress_every_s, say or _to_stderr
        self._embedder: Embedder | None = None
        self.last: Pass | None = None

    def run_pass(self) -> None:
        try:
            store = self._get_store()
            if not store.read_only:  # a server on a read-only database embeds nothing (its pages still search)
                self._embedder = self._embedder or self._make()  # the model loads once, on the first pass
                self.last = embed_backlog(store, self._embedder, stop=self._stop, always_refresh=self.passes == 0,
                                          progress=Ticker(self._said, self._progress_every_s))
        except Exception as exc:  # noqa: BLE001 - the server stays up; the next pass tries again
            first = (str(exc).strip().splitlines() or [""])[0]
            log.warning("reasonlog background embedding failed: %s: %s", type(exc).__name__, first)

    def _said(self, line: str) -> None:
        self._say(f"reasonlog background {line}")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
