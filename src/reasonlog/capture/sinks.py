"""Sinks: where a writer's batches go. The writer decides *when*, the sink decides *where*.

The contract is `Sink` below (the OpenTelemetry split between a processor and an exporter); `BaseSink`
gives every optional part its "nothing kept aside" answer, so a sink writes only what it does.

`StoreSink` writes to a `Store`, opened lazily. `SpillingSink` wraps any sink: a batch the inner
sink refuses goes to a spill file (one file per batch, JSON lines, secrets masked, fsynced) and
is replayed, event by event when need be, before anything newer (see `SpillFiles`). `HttpSink`
sends batches to `reasonlog serve`. Tests inject their own sink with `Recorder(sink=...)`.
"""
from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from .. import model
from ..model import Event, dump_event
from ..redact import Redactor
from ..store import StoreWriter
from .spillfiles import SpillFiles, claimed

log = logging.getLogger("reasonlog")

# What became of a batch: written; kept in a spill file for later; or known already (its id was written before).
Outcome = Literal["written", "spilled", "known"]


class Sink(Protocol):
    """A destination: all a sink must have, and all a user's own sink needs (`Recorder(sink=...)`).

    - `write_batch(events, counters, batch_id=)`: write the events in order, all or none, together with the
      counters (name -> amount to add); raise if that failed. `batch_id` names the batch (a spill file, an ingested
      batch a server writes once); a sink that cannot tell a batch it wrote before may ignore it. What it returns
      may say "known" (written before) or "spilled"; anything else counts as written.
    - `add_counters(counters)`: add counters alone; raise if that failed.
    - `close()`: release what the sink holds; safe to call twice.

    Spilling is not a sink's: the writers hold every sink inside a `SpillingSink` (a concrete wrapper, with the
    spill files, their replay, the counts and the fork rules). A sink that knows more of its destination says it
    through `BaseSink`'s hooks (`probe`, `is_sink_failure`, `after_fork`, `stats`, `target`, `last_error`).
    """

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> object: ...
    def add_counters(self, counters: dict[str, int]) -> None: ...
    def close(self) -> None: ...


class BaseSink:
    """A `Sink` with the hooks the spilling wrapper asks of its destination, answered as by one that knows nothing
    more; a subclass writes the rest.

    `probe()` raises when the destination cannot be written now; `is_sink_failure(exc)` says whether an exception is
    the destination failing (not the events); `after_fork()` forgets what a forked child must not use; `stats()`
    and `last_error` report."""

    target: str | None = None
    last_error: str | None = None

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        raise NotImplementedError

    def add_counters(self, counters: dict[str, int]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        return None

    def probe(self) -> None:
        return None

    def is_sink_failure(self, exc: BaseException) -> bool:
        return False

    def after_fork(self) -> None:
        return None

    def stats(self) -> dict[str, int]:
        return {}


def as_sink(given: Sink) -> BaseSink:
    """`given` with the hooks of `BaseSink`: a `BaseSink` as it is; any other `Sink` (a user's own, behind
    `Recorder(sink=...)`) with the answers of one that knows nothing more of its destination."""
    return given if isinstance(given, BaseSink) else _Plain(given)


class _Plain(BaseSink):
    def __init__(self, given: Sink):
        self.given = given
        self.target = getattr(given, "target", None)

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        outcome = self.given.write_batch(events, counters)
        return outcome if outcome in ("spilled", "known") else "written"

    def add_counters(self, counters: dict[str, int]) -> None:
        self.given.add_counters(counters)

    def close(self) -> None:
        self.given.close()


class StoreSink(BaseSink):
    """A sink over a `Store`, opened on first use (so a recorder that records nothing opens nothing)."""

    def __init__(self, store_factory: Callable[[], StoreWriter], exists: Callable[[], bool] | None = None,
                 target: str | None = None, owned: bool = True):
        """`exists`: whether the database is there already; if so, a sink that wrote nothing still opens
        it once at close, since opening marks the sessions of dead recorders interrupted. `owned=False`: the
        store is the caller's (an import, a replay), which closes it; this sink's `close` leaves it open."""
        self._factory = store_factory
        self._exists = exists
        self._owned = owned
        self.target = target  # the database, as a warning names it
        self._store: StoreWriter | None = None
        self.rejected = 0  # events the store left out of the batches it wrote (their data's fault)

    @property
    def store(self) -> StoreWriter:
        if self._store is None:
            self._store = self._factory()
        return self._store

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        store = self.store
        before = store.rejected_events
        written = store.write_batch(events, counters, batch_id=batch_id)
        self.rejected += store.rejected_events - before
        return "written" if written else "known"

    def stats(self) -> dict[str, int]:
        return {"rejected": self.rejected}

    def add_counters(self, counters: dict[str, int]) -> None:
        if counters:
            self.store.add_counters(counters)

    def is_sink_failure(self, exc: BaseException) -> bool:
        if self._store is None:  # it could not even be opened
            return isinstance(exc, OSError)
        return self._store.is_store_failure(exc)

    def probe(self) -> None:
        self.store.add_counters({"probes": 0})  # takes and releases the write lock: raises if it cannot

    def after_fork(self) -> None:
        self._store = None  # the parent's connection is the parent's

    def close(self) -> None:
        if not self._owned:
            self._store = None
            return
        if self._store is None and self._exists is not None and self._exists():
            try:
                self.store  # noqa: B018 -- opening is the point: it marks what dead recorders left open
            except Exception:  # a database this recorder cannot open: it recorded nothing into it either
                pass
        if self._store is not None:
            try:
                self._store.close()
            finally:
                self._store = None


class SpillingSink(BaseSink):
    """Spilling around any sink: what `inner` refuses waits in files and goes first when it can. The writers hold
    every sink in one (with no folder, nothing can spill: a refused batch raises, as an import wants)."""

    def __init__(self, inner: Sink, directory: Path | list[Path] | None,
                 redactor: Redactor | None = None):
        self.inner: BaseSink = as_sink(inner)
        self.files = SpillFiles(directory, redactor)
        self.redactor = redactor
        self._maybe_pending = bool(self.files.directories)  # files of an earlier process may wait: looked for first
        self.target = self.inner.target
        self._count_lock = threading.Lock()  # the closing thread may spill while the writer's thread writes
        self.counts: collections.Counter = collections.Counter()
        self.last_error: str | None = None
        self._warned = False

    # ------------------------------------------------------------ the sink contract

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> Outcome:
        """Write after the oldest waiting file, else spill (so order never breaks); raise if both fail."""
        # Every waiting file first: under back-pressure the callers wait meanwhile, and what overflows
        # in that time is taken as one file, so the writer catches up instead of spilling forever.
        if self._maybe_pending and self.replay():
            return self._spill_or_raise(events, counters, batch_id, None)
        try:
            return self.inner.write_batch(events, counters, batch_id=batch_id)
        except Exception as exc:
            return self._spill_or_raise(events, counters, batch_id, exc)

    def add_counters(self, counters: dict[str, int]) -> None:
        """Add counters to the inner sink, else keep them in a counters file beside the spill files."""
        if not counters:
            return
        try:
            self.inner.add_counters(counters)
        except Exception as exc:
            self._note(exc)
            if not self.files.write_counters(counters):
                raise

    def close(self) -> None:
        self.inner.close()

    def after_fork(self) -> None:
        self.inner.after_fork()
        self._count_lock = threading.Lock()

    def is_sink_failure(self, exc: BaseException) -> bool:
        return self.inner.is_sink_failure(exc)

    def pending(self) -> bool:  # the writer's: whether its idle thread should replay
        """Whether files may wait (of this process's overflow, or an earlier process's)."""
        return self._maybe_pending

    # ------------------------------------------------------------ spilling

    def spill(self, events: list[Event], counters: dict[str, int] | None = None,
              batch_id: str | None = None) -> bool:
        """Keep a batch in a file (secrets masked); events no JSON form can hold are rejected alone."""
        result = self.files.write(events, counters or {}, batch_id)
        if result is None:
            return False
        self._maybe_pending = True
        self._add({"spilled_batches": 1, "spilled_events": len(events) - result, "rejected": result})
        return True

    def _spill_or_raise(self, events: list[Event], counters: dict[str, int] | None, batch_id: str | None,
                        exc: BaseException | None) -> Outcome:
        if exc is not None:
            self._note(exc)
        if self.spill(events, counters, batch_id):
            if exc is not None and not self._warned:
                self._warn_spilling()
            return "spilled"
        raise exc if exc is not None else OSError(f"cannot write spill files in {self.files.directory}")

    def _warn_spilling(self) -> None:
        """Tell the user once that records go to files instead of the database, why, and where they are:
        an unwritable database must not be silent (issue 19 item 11)."""
        self._warned = True
        target = self.inner.target or "the database"
        log.warning("reasonlog cannot write %s (%s); recorded events wait in spill files in %s and are written by"
                    " the next recorder that can, or `reasonlog db upgrade` (`reasonlog db status` counts them)."
                    " This warning is given once.", target, self.last_error, self.files.last_folder)

    # ------------------------------------------------------------ replaying

    def replay(self, limit: int | None = None) -> int:
        """Write up to `limit` waiting files (all by default), oldest first; returns how many still wait."""
        with self.files.replaying() as alone:
            if alone:
                self._replay(limit)
        left = len(self.files.pending())
        self._maybe_pending = left > 0
        return left

    def _replay(self, limit: int | None) -> None:
        self.files.clean_stale()
        self._merge_counter_files()
        done = 0
        for path in self.files.pending():
            if limit is not None and done >= limit:
                break
            try:
                self._replay_file(path)
            except Exception as exc:  # the inner sink failed: the file waits for the next chance
                self._note(exc)
                break
            done += 1

    def _replay_file(self, path: Path) -> None:
        with claimed(path) as fd:
            if fd is None:  # another process is replaying it, or has just finished
                return
            header, events, aside = self.files.read(fd, path)
            events = [ev for ev in events if self._checked(ev, path, aside)]
            counters = dict(header, spilled_batches=1, replayed_batches=1)
            try:  # by the batch's own name: a copy spilled by a close that could not wait lands once
                self.inner.write_batch(events, _plus(counters, "set_aside", len(aside)), batch_id=path.stem)
            except Exception as exc:
                self.inner_probe(exc)  # raises when the sink itself is failing: keep the file
                self._write_parts(events, path, aside)  # some event of the file is at fault
                self.inner.add_counters(_plus(counters, "set_aside", len(aside)))
            self.files.set_aside(aside)
            path.unlink()
            self._add({"replayed_batches": 1, "set_aside": len(aside)})

    def _checked(self, ev: Event, path: Path, aside: list) -> bool:
        try:
            _check_event(ev)
            dump_event(ev)
        except Exception as exc:
            aside.append(self.files.aside_entry(path, ev, exc))
            return False
        return True

    def _write_parts(self, events: list[Event], path: Path, aside: list) -> None:
        """Write halves until the events that fail alone (on a writable sink) are found and set aside."""
        if not events:
            return
        try:
            self.inner.write_batch(events, None)
            return
        except Exception as exc:
            if len(events) == 1:
                self.inner_probe(exc)
                aside.append(self.files.aside_entry(path, events[0], exc))
                return
        mid = len(events) // 2
        self._write_parts(events[:mid], path, aside)
        self._write_parts(events[mid:], path, aside)

    def inner_probe(self, exc: Exception) -> None:
        """Raise `exc` again when it is the inner sink failing, not the events; else return."""
        if self.inner.is_sink_failure(exc):
            raise exc
        self.inner.probe()

    def _merge_counter_files(self) -> None:
        for path in self.files.counter_files():
            with claimed(path) as fd:
                if fd is None:
                    continue
                counters = self.files.read_counters(fd)
                try:
                    self.inner.add_counters(counters)
                except Exception as exc:
                    self._note(exc)
                    return
                path.unlink()

    # ------------------------------------------------------------ bookkeeping

    def _add(self, amounts: dict[str, int]) -> None:
        with self._count_lock:
            self.counts.update(amounts)

    def _note(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        self.last_error = self.redactor.text(text) if self.redactor else text

    def stats(self) -> dict:
        """The spilling counts, with the inner sink's (the events its store rejected)."""
        with self._count_lock:
            counts = collections.Counter(self.counts)
        counts.update(self.inner.stats())
        return dict(counts)


def _check_event(ev: Event) -> None:
    """The store's own field checks, when this reasonlog has them (model.check_event): a file may be old or foreign."""
    check = getattr(model, "check_event", None)
    if check is not None:
        check(ev)


def _plus(counters: dict[str, int], name: str, n: int) -> dict[str, int]:
    return {**counters, name: counters.get(name, 0) + n} if n else counters
