"""Writers: how recorded events reach a store.

Contract shared by both writers:
- `submit(event)` never raises and never blocks on the store; what cannot be queued is counted
  as dropped.
- `flush(timeout)` returns True once everything submitted before it is written or spilled.
- `close(timeout)` flushes, stops and closes the store; it is safe to call twice.
- A batch the store refuses (locked past its timeout, read-only, disk full) goes to a spill
  file beside the database and is written before anything newer on the next chance or open.
  While spill files wait, newer batches spill too, so a session's order is never broken.
"""
from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

import orjson

from ..model import Event, event_from_dict, jsonable, new_id

log = logging.getLogger("reasonlog")


class Spill:
    """Spill files: one batch per file, JSON lines of events (secrets masked), replayed oldest first."""

    def __init__(self, directory: Path | None, redactor=None):
        self.directory = directory
        self.redactor = redactor

    def pending(self) -> list[Path]:
        if self.directory is None or not self.directory.exists():
            return []
        return sorted(self.directory.glob("*.spill"))

    def write(self, events: list[Event]) -> bool:
        if self.directory is None:
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{new_id()}.spill"
            tmp = path.with_suffix(".tmp")
            with open(tmp, "wb") as f:
                for ev in events:
                    line = orjson.dumps(ev.to_dict(), default=jsonable, option=orjson.OPT_NON_STR_KEYS)
                    f.write((self.redactor.bytes(line) if self.redactor else line) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            tmp.rename(path)
            return True
        except (OSError, TypeError):
            return False

    @staticmethod
    def read(path: Path) -> list[Event]:
        with open(path, "rb") as f:
            return [event_from_dict(orjson.loads(line)) for line in f if line.strip()]


class _Base:
    def __init__(self, store_factory: Callable, spill_dir: Path | None, redactor=None):
        self._store_factory = store_factory
        self._store = None
        self.spill = Spill(spill_dir, redactor)
        self.counts = collections.Counter()  # submitted, written, dropped, spilled_batches, failed
        self._unsaved = collections.Counter()  # counters not yet added to the store's own

    @property
    def store(self):
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    last_error: str | None = None

    def stats(self) -> dict:
        return {"submitted": 0, "written": 0, "dropped": 0, "rejected": 0, "spilled_batches": 0, **self.counts,
                "last_error": self.last_error}

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n
        if name in ("dropped", "rejected"):  # spilled batches are counted when replayed
            self._unsaved[name] += n

    def _write(self, batch: list[Event]) -> None:
        """Write one batch after any waiting spill files, or spill it; never raises."""
        try:
            self._replay_spill()
            if self.spill.pending():
                raise RuntimeError("older spilled batches are still waiting")
            self.store.write_batch(batch, dict(self._unsaved))
            self._unsaved.clear()
            self.counts["written"] += len(batch)
        except Exception as exc:  # the store failed: keep the batch on disk
            self.last_error = self._mask(f"{type(exc).__name__}: {exc}")
            if self.spill.write(batch):
                self.count("spilled_batches")
            else:
                self.count("dropped", len(batch))

    def _replay_spill(self) -> None:
        for path in self.spill.pending():
            try:
                events = Spill.read(path)
            except (OSError, ValueError, TypeError) as exc:  # unreadable: set it aside, never block the rest
                path.rename(path.with_suffix(".bad"))
                self.last_error = self._mask(f"{path.name}: {type(exc).__name__}: {exc}")
                log.warning("reasonlog set aside an unreadable spill file %s: %s", path.name, type(exc).__name__)
                continue
            self.store.write_batch(events, {"spilled_batches": 1, "replayed_batches": 1})
            path.unlink()

    def replay_spill(self) -> int:
        """Write waiting spill files now; returns how many remain."""
        try:
            self._replay_spill()
        except Exception as exc:
            self.last_error = self._mask(f"{type(exc).__name__}: {exc}")
        return len(self.spill.pending())

    def _mask(self, text: str) -> str:
        return self.spill.redactor.text(text) if self.spill.redactor else text

    def _save_counters(self) -> None:
        if self._unsaved:
            try:
                self.store.add_counters(dict(self._unsaved))
                self._unsaved.clear()
            except Exception:
                pass

    def _close_store(self) -> None:
        if self._store is not None:
            self._save_counters()
            try:
                self._store.close()
            finally:
                self._store = None


class SyncWriter(_Base):
    """Writes each event before `submit` returns: durable per call, for tests and careful callers."""

    def __init__(self, store_factory: Callable, spill_dir: Path | None = None, redactor=None):
        super().__init__(store_factory, spill_dir, redactor)
        self._lock = threading.Lock()

    def submit(self, event: Event) -> None:
        with self._lock:
            self.counts["submitted"] += 1
            self._write([event])

    def flush(self, timeout: float | None = None) -> bool:
        with self._lock:
            self._save_counters()
        return True

    def close(self, timeout: float | None = None) -> bool:
        with self._lock:
            self._close_store()
        return True


class BackgroundWriter(_Base):
    """A bounded queue drained by one daemon thread, one transaction per batch.

    The recording thread only appends to a deque; serialising, hashing, compressing and SQL
    all happen on the writer thread.
    """

    def __init__(self, store_factory: Callable, spill_dir: Path | None = None, *, max_queue: int = 100_000,
                 batch_size: int = 2_000, interval: float = 0.25, redactor=None):
        super().__init__(store_factory, spill_dir, redactor)
        self.max_queue, self.batch_size, self.interval = max_queue, batch_size, interval
        self._init_threading()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (w := ref()) and w._after_fork())

    def _init_threading(self) -> None:
        self._queue: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._finished = 0  # events written, spilled or dropped by the thread
        self._submitted = 0  # the number of the last event queued
        self._numbers = itertools.count(1)  # next() is atomic: agents may record from several threads
        self._closed = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _after_fork(self) -> None:
        # The child has no writer thread and must not write the parent's queue or use its connection.
        self._init_threading()
        self._store = None
        self.counts = collections.Counter()
        self._unsaved = collections.Counter()

    def submit(self, event: Event) -> None:
        if self._thread is None:
            self._start()
        if self._closed or len(self._queue) >= self.max_queue:
            self.count("dropped")
            return
        self._queue.append(event)
        self._submitted = next(self._numbers)
        self.counts["submitted"] += 1
        if len(self._queue) >= self.batch_size:
            self._wake.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="reasonlog-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        self.replay_spill()  # what an earlier process could not write goes first
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._drain()
            if self._closed and not self._queue:
                return

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            n = min(len(queue), self.batch_size)
            batch = [queue.popleft() for _ in range(n)]
            self._write(batch)
            with self._done:
                self._finished += n
                self._done.notify_all()

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything submitted so far is written (or spilled); False on timeout."""
        target = self._submitted
        if self._thread is None:
            return True
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._finished < target:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(left)
        return True

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush, stop the thread and close the store; what is still queued at the timeout stays counted."""
        if self._closed:
            return True
        ok = self.flush(timeout)
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout if ok else 0.1)
        if self._thread is None or not self._thread.is_alive():
            self._close_store()
        else:
            self.count("dropped", len(self._queue))
        return ok

    def stats(self) -> dict:
        return {**super().stats(), "queued": len(self._queue)}
