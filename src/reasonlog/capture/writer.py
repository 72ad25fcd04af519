"""Writers: when recorded events reach a sink (see `sinks.py` for where).

Contract shared by both writers:
- `submit(event)` never raises. The background writer's queue is bounded by count (about
  `QUEUE_SECONDS` of the writer's speed as measured while it drains, at least `QUEUE_FLOOR`
  events) and by age: while the writer makes progress, a caller waits as long as the oldest
  queued event has waited `MAX_AGE` seconds. So what a SIGKILL can lose (the queue and the batch
  being committed) was recorded in about the last half second, and the last second at most if
  the writer halves its speed mid-run (the queue then drains at the new speed). When it is full the
  caller waits at most `MAX_WAIT` seconds; then the event is queued anyway (the writer is slow,
  not gone, and the wait already throttles the caller); only past `OVERFLOW` times the bound
  does the writer spill the excess to a file (order kept). `on_full="drop"` drops and counts
  instead. Nothing else drops, except events submitted after `close()`.
- Batches are sized by time (about `BATCH_SECONDS` of writing each), and the writer wakes at
  least every `interval` seconds, so something is committed at least every 200 ms under load.
- `flush(timeout=None)` returns True once everything submitted before it is written or spilled;
  on a timeout it logs how much is still pending and returns False.
- `close(timeout=None)` flushes, stops and closes the sink; on a timeout it spills what is still
  queued instead of losing it. Safe to call twice.
- Every event that never reaches the sink is counted (`dropped`, `rejected`), under a lock, and
  the counts travel to the database with the next batch, a spill file or a counters file.
"""
from __future__ import annotations

import collections
import itertools
import logging
import os
import random
import threading
import time
import weakref
from typing import Any

from ..model import Event, SessionEnded, SessionStarted, new_id
from ..redact import Redactor
from .sinks import Outcome, Sink, SpillingSink

log = logging.getLogger("reasonlog")

MAX_WAIT = 0.1  # seconds a caller waits for room in a full queue before the overflow spills
BATCH_SECONDS = 0.05  # a batch's share of writing: well under MAX_WAIT, so a waiting caller gets room in time
QUEUE_SECONDS = 0.3  # the queue holds about this much of the writer's measured work
# A caller waits while the oldest queued event is this old, unless the writer is stalled (has taken no batch
# for STALLED seconds: a lock wait, which waiting callers would not shorten). Issue 19 item 8: a SIGKILL lost up
# to 2.7 s before (a 1 s queue by write time alone, and a floor of 1,000 events); measured 0.05-0.40 s since.
MAX_AGE = 0.3
STALLED = 1.0
QUEUE_FLOOR = 200  # the queue bound never goes below this (a slow or still-opening store)
OVERFLOW = 2  # past this multiple of the bound, the excess is spilled rather than waited for
MIN_BATCH = 32  # per-transaction costs (fsync) must not dominate on a slow disk
FIRST_BATCH = 50  # events in a batch before the writer's speed is measured


class _Base:
    def __init__(self, sink: Sink, redactor: Redactor | None = None):
        # The writer owns spilling: a sink given without its spill folders is held in a wrapper that has none.
        self.sink = sink if isinstance(sink, SpillingSink) else SpillingSink(sink, None, redactor)
        self.redactor = redactor
        self._init_counts()
        self.last_error: str | None = None
        self.in_flight: tuple[list[Event], str | None, dict[str, int]] | None = None

    def _init_counts(self) -> None:
        self._count_lock = threading.Lock()  # callers count while the writer's thread takes the unsaved part
        self._counts: collections.Counter = collections.Counter()
        self._unsaved: collections.Counter = collections.Counter()  # not yet handed to the sink

    def count(self, name: str, n: int = 1) -> None:
        with self._count_lock:
            self._counts[name] += n
            self._unsaved[name] += n

    def _take_unsaved(self) -> dict[str, int]:
        with self._count_lock:
            unsaved = dict(self._unsaved)
            self._unsaved.clear()
        return unsaved

    def _give_back(self, counters: dict[str, int]) -> None:
        with self._count_lock:
            self._unsaved.update(counters)

    def _write(self, batch: list[Event], name: str | None = None) -> None:
        """Hand one batch to the sink with the unsaved counters; what it cannot take is counted dropped.

        While the sink holds it, the batch is `in_flight`: a close that cannot wait for it spills a copy under
        the same name, and the store writes a batch of a name once, so it lands once whichever copy does."""
        counters = self._take_unsaved()
        self.in_flight = (batch, name, counters)
        try:
            outcome = self.sink.write_batch(batch, counters, batch_id=name)
        except Exception as exc:
            self._failed(exc)
            self._give_back(counters)
            self.count("dropped", len(batch))
            return
        finally:
            self.in_flight = None
        if outcome != "spilled":
            with self._count_lock:
                self._counts["written"] += len(batch)

    def _spill(self, batch: list[Event], name: str | None) -> None:
        """Spill without trying the sink (overflow, close timeout); dropped and counted if it cannot."""
        counters = self._take_unsaved()
        if not self.sink.spill(batch, counters, name):
            self._give_back(counters)
            self.count("dropped", len(batch))

    def _failed(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        self.last_error = self.redactor.text(text) if self.redactor else text

    def replay_spill(self) -> int:
        """Write waiting spill files now; returns how many remain."""
        return self.sink.replay()

    def _save_counters(self) -> None:
        counters = self._take_unsaved()
        try:
            self.sink.add_counters(counters)
        except Exception as exc:
            self._failed(exc)
            self._give_back(counters)
            log.warning("reasonlog could not keep its loss counters anywhere: %s", dict(counters))

    def _close_sink(self, replay: bool = True) -> None:
        if replay:  # waiting files (overflow, earlier processes) are written now, unless time is up
            self.replay_spill()
        self._save_counters()
        self.sink.close()

    def stats(self) -> dict:
        sink = self.sink.stats()
        with self._count_lock:
            counts = dict(self._counts)
        out: dict[str, Any] = {"submitted": self._submitted_count(), "written": 0, "dropped": 0, "rejected": 0,
               "spilled_batches": 0, "spilled_events": 0, "replayed_batches": 0, "set_aside": 0}
        for key, value in list(counts.items()) + list(sink.items()):
            out[key] = out.get(key, 0) + value
        out["last_error"] = self.last_error or self.sink.last_error
        return out

    def _submitted_count(self) -> int:
        raise NotImplementedError


class SyncWriter(_Base):
    """Writes each event before `submit` returns: durable per call, for tests and careful callers; and the writer
    of whoever writes batches of its own (an import, a replay, a reasoning record) through `write`."""

    def __init__(self, sink: Sink, redactor: Redactor | None = None):
        super().__init__(sink, redactor)
        self._lock = threading.Lock()
        self._submitted = 0

    def submit(self, event: Event) -> None:
        with self._lock:
            self._submitted += 1
            self._write([event])

    def write(self, events: list[Event], counters: dict[str, int] | None = None, *, tries: int = 1) -> Outcome:
        """Write a caller's batch now, all or none, with its counters: "written", "spilled" (its sink's spill folders
        took it) or "known". Unlike `submit`, a batch that neither the destination nor a spill file took raises, and
        the caller decides (an import stops and resumes there; a record is not saved). `tries`: while the destination
        itself fails (busy, not the events' fault), try again this many times in all, with jittered back-off."""
        with self._lock:
            self._submitted += len(events)
            outcome = self._write_trying(events, counters, tries)
            if outcome != "spilled":
                with self._count_lock:
                    self._counts["written"] += len(events)
            return outcome

    def _write_trying(self, events: list[Event], counters: dict[str, int] | None, tries: int) -> Outcome:
        for attempt in range(tries):
            try:
                return self.sink.write_batch(events, counters)
            except Exception as exc:
                self._failed(exc)
                if attempt == tries - 1 or not self.sink.is_sink_failure(exc):
                    raise
            time.sleep(min(0.02 * 2 ** attempt, 1.0) * (0.5 + random.random()))  # writers that met must part
        raise ValueError(f"tries: expected at least 1, got {tries}")

    def _submitted_count(self) -> int:
        return self._submitted

    def flush(self, timeout: float | None = None) -> bool:
        with self._lock:
            self._save_counters()
        return True

    def close(self, timeout: float | None = None) -> bool:
        with self._lock:
            self._close_sink()
        return True


class BackgroundWriter(_Base):
    """A queue drained by one daemon thread, one transaction per batch.

    The recording thread only appends to a deque; serialising, hashing, compressing and SQL
    all happen on the writer thread. The thread starts with the writer, so spill files left by
    an earlier process are replayed even if nothing new is recorded.
    """

    def __init__(self, sink: Sink, *, max_queue: int = 100_000, batch_size: int = 2_000,
                 interval: float = 0.2, on_full: str = "block", redactor: Redactor | None = None):
        if on_full not in ("block", "drop"):
            raise ValueError(f"on_full: expected 'block' or 'drop', got {on_full!r}")
        super().__init__(sink, redactor)
        self.max_queue, self.batch_size, self.interval, self.on_full = max_queue, batch_size, interval, on_full
        self._init_threading()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        self._start()

    def _init_threading(self) -> None:
        self._queue: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._done = threading.Condition()  # notified when the thread takes or finishes a batch
        self._take_lock = threading.Lock()  # a batch and its spill-file name are taken together
        self._finished = 0  # events written, spilled or dropped by the thread
        self._submitted = 0  # the number of the last event queued
        self._taken_at = time.monotonic()  # when the writer's thread last took a batch
        self._inflight_at: float | None = None  # when the oldest event of the batch being written was queued
        self._busy_from: float | None = None  # when the last batch ended, if work was waiting then
        self._numbers = itertools.count(1)  # next() is atomic: agents may record from several threads
        self._closed = False
        self._orphaned: set[str] = set()  # sessions whose start was dropped: their records are dropped too
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._rate = 0.0  # events per second of writing, measured
        self._bound = min(self.max_queue, max(QUEUE_FLOOR, 10 * FIRST_BATCH))
        self._batch_n = min(self.batch_size, FIRST_BATCH)

    def _after_fork(self) -> None:
        # The child has no writer thread and must not write the parent's queue or use its connection.
        self._init_threading()
        self._init_counts()
        self.sink.after_fork()

    def _submitted_count(self) -> int:
        return self._submitted

    # ------------------------------------------------------------ the caller's side

    def submit(self, event: Event) -> None:
        queue = self._queue
        if self._thread is None:  # a forked child starts its own thread on its first event
            self._start()
        if self._orphaned and event.session_id in self._orphaned:  # type: ignore[attr-defined]
            return self._drop_orphan(event)
        now = _monotonic()
        if self._full(now) and not self._room():
            if type(event) is SessionStarted:
                self._orphaned.add(event.session_id)
            return
        queue.append((now, event))
        self._submitted = next(self._numbers)
        if len(queue) >= self._batch_n:
            self._wake.set()

    def _full(self, now: float) -> bool:
        """Whether a caller must wait: the queue holds its bound, or its oldest event is `MAX_AGE` old while
        the writer is taking batches (callers waiting on a stalled writer would lose as much, only slower)."""
        queue = self._queue
        if len(queue) >= self._bound:
            return True
        try:
            return now - queue[0][0] > MAX_AGE and now - self._taken_at < STALLED
        except IndexError:  # empty, or emptied by the writer meanwhile
            return False

    def _room(self) -> bool:
        """Wait a bounded time for room; False when the event is dropped (closed, or on_full="drop")."""
        if self._closed or self.on_full == "drop":
            self.count("dropped")
            return False
        self._wake.set()
        deadline = time.monotonic() + MAX_WAIT
        with self._done:
            while self._full(time.monotonic()) and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(1.0 if left is None else min(left, 1.0))  # and look again if alive
        return True  # time is up: queued beyond the bound (each such call cost its caller MAX_WAIT)

    def _drop_orphan(self, event: Event) -> None:
        """Drop, quietly and counted, a record of a session whose start was dropped: the store would
        reject it as an orphan, with a warning each (issue 19 item 12)."""
        self.count("dropped")
        if type(event) is SessionEnded:
            self._orphaned.discard(event.session_id)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="reasonlog-writer", daemon=True)
                self._thread.start()

    # ------------------------------------------------------------ the writer's thread

    def _run(self) -> None:
        self.replay_spill()  # what an earlier process could not write goes first
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._drain()
            if self._closed and not self._queue:
                return
            if not self._queue and self.sink.pending():
                self.sink.replay()  # idle: catch up on the overflow spilled earlier

    def _drain(self) -> None:
        while self._queue:
            batch, name, over = self._take()
            if not batch:
                return
            try:
                self._handle(batch, name, over)
            except Exception as exc:  # reasonlog's own bug: the thread must live on, and the batch with it
                self._failed(exc)
                log.exception("reasonlog's writer failed on a batch of %d events; spilling it", len(batch))
                self._spill(batch, name)
            with self._done:
                self._finished += len(batch)
                self._inflight_at = None
                self._done.notify_all()

    def _handle(self, batch: list[Event], name: str, over: bool) -> None:
        # The speed that bounds the queue is the speed it drains at: from the end of the previous batch when
        # work was waiting then (taking, waking callers, waiting for the GIL cost as much as writing), else
        # from now. Timing the write alone overestimated it by about 30 % flat out (issue 19 item 8).
        started = self._busy_from or time.perf_counter()
        replaying = self.sink.pending()  # a file goes first: not a clean measure
        if over:
            return self._spill(batch, name)
        self._write(batch, name)
        ended = time.perf_counter()
        self._busy_from = ended if self._queue else None
        if not replaying:
            try:
                self._measure(len(batch), ended - started)
            except Exception as exc:  # only the sizing failed: the batch is written, the old sizes stand
                self._failed(exc)

    def _take(self) -> tuple[list[Event], str, bool]:
        queue = self._queue
        with self._take_lock:
            # A writer that is merely slow (a long batch, a busy lock) is waited for: every event queued past
            # the bound cost its caller MAX_WAIT, so the overflow grows slowly. Only past OVERFLOW x the bound
            # (many threads, a stalled store) is the excess spilled, in one file, to keep memory bounded.
            over = len(queue) > OVERFLOW * self._bound
            n = min(len(queue), max(self._batch_n, len(queue) - self._bound if over else 0))
            taken = [queue.popleft() for _ in range(n)]
            batch = [event for _, event in taken]
            name = new_id()  # reserved now: a file spilled by close() meanwhile sorts after this batch
            self._taken_at = time.monotonic()
            self._inflight_at = taken[0][0] if taken else None
        with self._done:
            self._done.notify_all()  # room for waiting callers
        return batch, name, over

    def _measure(self, n: int, seconds: float) -> None:
        """Size the next batch and the queue bound by the writer's measured speed."""
        rate = n / max(seconds, 1e-6)
        self._rate = rate if not self._rate else 0.7 * self._rate + 0.3 * rate
        self._batch_n = max(min(MIN_BATCH, self.batch_size), int(min(self.batch_size, self._rate * BATCH_SECONDS)))
        # The bound falls at once with a slower batch (a busier machine) and rises with the average: what
        # waits must drain within QUEUE_SECONDS at the speed of now, not of a moment ago.
        speed = min(rate, self._rate)
        bound = max(min(self.max_queue, QUEUE_FLOOR), int(min(self.max_queue, speed * QUEUE_SECONDS)))
        # Never below what is already queued: what waits stays within the bound a SIGKILL can lose.
        self._bound = max(bound, min(self._bound, len(self._queue)))

    # ------------------------------------------------------------ flush and close

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written (or spilled); False, with a warning, on timeout."""
        target = self._submitted
        if self._thread is None:
            return True
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._finished < target:
                if self._thread is not None and not self._thread.is_alive():  # never wait for the dead
                    log.warning("reasonlog: the writer thread is gone; %d recorded events are still queued",
                                target - self._finished)
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    log.warning("reasonlog: %d recorded events still pending after %.1f s",
                                target - self._finished, timeout)
                    return False
                self._done.wait(1.0 if left is None else min(left, 1.0))  # and look again if alive
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Flush, stop the thread and close the sink; on a timeout, what is still queued is spilled."""
        if self._closed:
            return True
        ok = self.flush(timeout)
        self._closed = True
        self._wake.set()
        if not ok:
            self._spill_rest()
        if self._thread is not None:
            self._thread.join(None if ok else 0.1)
        if self._thread is None or not self._thread.is_alive():
            self._close_sink(replay=ok)
        else:
            self._spill_in_flight()
        return ok

    def _spill_in_flight(self) -> None:
        """The writer's thread is still committing a batch and the process may exit under it: keep a copy in a
        spill file of the batch's own name (the next writer replays it; if the commit lands first, the store
        knows the name and writes nothing twice)."""
        in_flight = self.in_flight
        if in_flight is None:
            return
        batch, name, counters = in_flight
        if self.sink.spill(batch, counters, name):
            log.warning("reasonlog: a batch of %d events was still being written at close; a copy waits in a spill"
                        " file and is written once, by whichever lands first", len(batch))
        else:
            log.warning("reasonlog: a batch of %d events was still being written at close and no spill file could"
                        " be written; it is lost if this process exits before it commits", len(batch))

    def _spill_rest(self) -> None:
        with self._take_lock:
            rest = [event for _, event in self._queue]
            self._queue.clear()
            name = new_id()
        if rest:
            self._spill(rest, name)
            with self._done:
                self._finished += len(rest)
                self._done.notify_all()

    def stats(self) -> dict:
        """Also `oldest_unwritten_s`: how long ago the oldest event not yet written was recorded, which is
        what a SIGKILL now would lose."""
        return {**super().stats(), "queued": len(self._queue), "queue_bound": self._bound,
                "batch_size": self._batch_n, "oldest_unwritten_s": self._oldest_unwritten()}

    def _oldest_unwritten(self) -> float:
        times = [self._inflight_at]
        try:
            times.append(self._queue[0][0])
        except IndexError:
            pass
        known = [t for t in times if t is not None]
        return round(time.monotonic() - min(known), 3) if known else 0.0


_monotonic = time.monotonic


def _after_fork(ref: weakref.ref) -> None:
    writer = ref()
    if writer is not None:
        writer._after_fork()
