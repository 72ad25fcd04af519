"""The server's retention (`reasonlog serve --keep-days N`): a thread that, every `every_s` seconds, prunes the
sessions last active more than N days ago, as `reasonlog prune --older-than Nd --yes` would.

It writes through a store of its own (its own connection), so ingestion never waits behind it in this process; on
PostgreSQL a prune is a series of short transactions that writers in every process interleave with
(store/pg_prune.py). With several workers each runs it; they take turns (`Store.exclusive`), and a worker that
comes second finds nothing left to prune. Errors are logged by type and first line, and the next pass tries again.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from ..store import Store
from ..store.maintenance import older_than
from .periodic import Periodic

log = logging.getLogger("reasonlog")


class BackgroundRetention(Periodic):
    """Start with `start()`; `stop()` ends the thread after the pass under way. `last` is the last pass's figures
    (as `Store.prune` returns them); `passes` counts finished passes."""

    name = "reasonlog-retention"

    def __init__(self, open_store: Callable[[], Store], keep_days: float, every_s: float = 3600.0):
        super().__init__(every_s)
        if keep_days <= 0:
            raise ValueError(f"keep_days: expected a positive number of days, got {keep_days}")
        self._open, self.keep_days = open_store, keep_days
        self._store: Store | None = None
        self.last: dict | None = None

    def run_pass(self) -> None:
        try:
            self._store = self._store or self._open()
            if self._store.read_only:
                return
            with self._store.exclusive("retention"):
                self.last = self._store.prune(older_than(days=self.keep_days))
            if self.last["sessions"]:
                log.warning("reasonlog retention removed %d sessions last active more than %s days ago",
                            self.last["sessions"], self.keep_days)
        except Exception as exc:  # noqa: BLE001 - the server stays up; the next pass tries again
            first = (str(exc).strip().splitlines() or [""])[0]
            log.warning("reasonlog retention failed: %s: %s", type(exc).__name__, first)

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        if self._store is not None:
            self._store.close()
